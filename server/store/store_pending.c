/*
 * store_pending.c - each project's count of pending jobs, kept for the
 * max_pending check at submission (migrations/0007_pending_audit.sql).
 *
 * project.pending_jobs plus the project's project_pending_delta rows is the
 * count of its pending jobs. A submission adds to pending_jobs under its
 * project's row lock; every other change to or from pending only inserts a
 * delta row. The fold moves the deltas into pending_jobs so that the sum a
 * submission reads stays a few rows long.
 */
#include "server/store/store.h"

enum ts_err ts_store_pending_fold(struct ts_dbconn *c, struct ts_error *err)
{
    /* Rows another transaction has not committed are not seen, hence not
     * deleted: the next fold takes them. Rows of a project deleted since
     * are dropped. */
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c,
                               "WITH d AS (DELETE FROM project_pending_delta"
                               "   RETURNING project_id, delta),"
                               " s AS (SELECT project_id, sum(delta) AS n FROM d"
                               "   GROUP BY project_id)"
                               " UPDATE project p SET pending_jobs = p.pending_jobs + s.n"
                               " FROM s WHERE p.id = s.project_id AND s.n <> 0",
                               0, NULL, &res, err);
    PQclear(res);
    return e;
}
