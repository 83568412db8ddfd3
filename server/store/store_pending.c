/*
 * store_pending.c - each project's count of pending jobs, kept for the
 * max_pending check at submission (migrations/0007_pending_audit.sql,
 * 0011_concurrent_submit.sql).
 *
 * project.pending_jobs plus the project's project_pending_delta rows is the
 * count of its pending jobs. Every change to or from pending, a submission
 * included, only inserts a delta row. The fold moves the deltas into
 * pending_jobs so that the sum a submission reads stays a few rows long: the
 * scheduler's cycle folds every project's, and a submission that counted
 * many rows folds its project's (store_jobs.c), so they do not pile up
 * while no cycle runs.
 *
 * A fold takes the delta rows no other fold holds (SKIP LOCKED: two folds
 * never wait for each other's rows, hence never deadlock; a row another one
 * holds is that one's to count) and only then the project's row, in one
 * statement: a snapshot sees the rows or the sum they became, never both.
 */
#include <stdio.h>

#include "api/array.h"
#include "server/store/db_pg.h"
#include "server/store/store.h"

enum ts_err ts_store_pending_fold(struct ts_dbconn *c, struct ts_error *err)
{
    /* Rows another transaction has not committed are not seen, hence not
     * deleted: the next fold takes them. Rows of a project deleted since
     * are dropped. */
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c,
                               "WITH l AS (SELECT ctid FROM project_pending_delta"
                               "   FOR UPDATE SKIP LOCKED),"
                               " d AS (DELETE FROM project_pending_delta"
                               "   WHERE ctid = ANY (ARRAY(SELECT ctid FROM l))"
                               "   RETURNING project_id, delta),"
                               " s AS (SELECT project_id, sum(delta) AS n FROM d"
                               "   GROUP BY project_id)"
                               " UPDATE project p SET pending_jobs = p.pending_jobs + s.n"
                               " FROM s WHERE p.id = s.project_id AND s.n <> 0",
                               0, NULL, &res, err);
    PQclear(res);
    return e;
}

enum ts_err ts_store_pending_fold_project(struct ts_dbconn *c, int64_t project_id,
                                          struct ts_error *err)
{
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)project_id);
    const char *params[] = {id};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c,
                               "WITH l AS (SELECT ctid FROM project_pending_delta"
                               "   WHERE project_id = $1 FOR UPDATE SKIP LOCKED),"
                               " d AS (DELETE FROM project_pending_delta"
                               "   WHERE ctid = ANY (ARRAY(SELECT ctid FROM l)) RETURNING delta)"
                               " UPDATE project p SET pending_jobs = p.pending_jobs + s.n"
                               " FROM (SELECT sum(delta) AS n FROM d) s"
                               " WHERE p.id = $1 AND s.n <> 0",
                               TS_ARRAY_LEN(params), params, &res, err);
    PQclear(res);
    return e;
}
