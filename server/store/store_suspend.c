/*
 * store_suspend.c - suspend and resume on request (POST /jobs/{id}/suspend,
 * /resume): the checks, the state change and its event, in one transaction.
 *
 * A job suspended on request is held: the scheduler leaves it suspended
 * until a resume clears the hold; then it is an ordinary suspended job that
 * the scheduler binds again on its node and GPUs when they have room.
 *
 * Swap accounting: a job suspending, suspended or resuming holds
 * suspended_bytes of its node's host swap (swap_bytes), and a running job
 * swapped_bytes (its GPU memory its node keeps in host swap while it runs:
 * idle detach, time-sharing). While suspending, suspended_bytes is what the
 * job holds on its GPUs (TS_SQL_JOB_HELD_BYTES: the greater of its packed
 * request, its last reported use and its swapped bytes), what its agent
 * will move; once its agent reports it suspended, what it moved.
 */
#include <stdio.h>
#include <string.h>

#include "api/array.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

static enum ts_err fail(struct ts_dbconn *c, struct ts_error *err, enum ts_err code,
                        const char *msg)
{
    ts_db_rollback(c);
    return ts_error_set(err, code, "%s", msg);
}

/* The node's swap check and the state change, in one transaction. The job
 * row is locked first, as reports and the scheduler do, then the node row,
 * so that two suspensions on one node are decided one after the other: the
 * second sees the first's swap. Returns TS_ERR_CONFLICT with *retry set
 * when PostgreSQL chose this transaction to break a deadlock. */
static enum ts_err suspend_once(struct ts_dbconn *c, const char *idbuf, int64_t id, const char *by,
                                struct ts_arena *a, bool *retry, struct ts_error *err)
{
    const char *p[] = {idbuf};
    PGresult *res = NULL;
    *retry = false;
    enum ts_err e = ts_db_begin(c, err);
    if (e != TS_OK)
        return e;
    e = ts_db_exec(c, "SELECT node_id FROM job WHERE id = $1 FOR UPDATE", TS_ARRAY_LEN(p), p, &res,
                   err);
    if (e == TS_OK && PQntuples(res) == 1 && !ts_row_null(res, 0, 0)) {
        const char *q[] = {ts_row_text(res, 0, 0, a)};
        PQclear(res);
        res = NULL;
        e = q[0] == NULL ? ts_error_set(err, TS_ERR_NOMEM, "out of memory")
                         : ts_db_exec(c, "SELECT 1 FROM node WHERE id = $1 FOR UPDATE",
                                      TS_ARRAY_LEN(q), q, &res, err);
    }
    PQclear(res);
    res = NULL;
    /* a new statement: it sees every suspension committed before the lock */
    if (e == TS_OK)
        e = ts_db_exec(c,
                       "SELECT j.state, j.swap, n.name, n.swap_bytes, " TS_SQL_JOB_HELD_BYTES
                       ", " TS_SQL_NODE_SWAP_USED_BY_OTHERS
                       " FROM job j LEFT JOIN node n ON n.id = j.node_id"
                       " WHERE j.id = $1",
                       TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK) {
        *retry = e == TS_ERR_CONFLICT;
        ts_db_rollback(c);
        return e;
    }
    if (PQntuples(res) != 1) {
        PQclear(res);
        ts_db_rollback(c);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "job %lld does not exist", (long long)id);
    }
    char state[32], node[TS_NAME_MAX + 1] = "";
    ts_row_copy(res, 0, 0, state, sizeof(state));
    bool swap = ts_row_bool(res, 0, 1);
    if (!ts_row_null(res, 0, 2))
        ts_row_copy(res, 0, 2, node, sizeof(node));
    int64_t swap_bytes = ts_row_i64(res, 0, 3);
    int64_t need = ts_row_i64(res, 0, 4);
    int64_t used = ts_row_i64(res, 0, 5);
    PQclear(res);
    char msg[512];
    if (strcmp(state, "running") != 0) {
        snprintf(msg, sizeof(msg), "job %lld is %s; only a running job can be suspended",
                 (long long)id, state);
        return fail(c, err, TS_ERR_CONFLICT, msg);
    }
    if (!swap) {
        snprintf(msg, sizeof(msg), "job %lld refuses swap (swap: false); it cannot be suspended",
                 (long long)id);
        return fail(c, err, TS_ERR_CONFLICT, msg);
    }
    if (swap_bytes <= 0) {
        snprintf(msg, sizeof(msg),
                 "node %s has no host swap (swap_bytes 0); job %lld cannot be "
                 "suspended there",
                 node, (long long)id);
        return fail(c, err, TS_ERR_CONFLICT, msg);
    }
    if (swap_bytes - used < need) {
        snprintf(msg, sizeof(msg),
                 "node %s has too little free host swap for job %lld: %lld of %lld bytes free, "
                 "it holds %lld bytes of GPU memory",
                 node, (long long)id, (long long)(swap_bytes - used), (long long)swap_bytes,
                 (long long)need);
        return fail(c, err, TS_ERR_CONFLICT, msg);
    }
    const char *q[] = {
        idbuf, ts_arena_printf(a, "%lld", (long long)need),
        ts_arena_printf(a, "suspend requested by %s; stopping in place on node %s", by, node)};
    if (q[1] == NULL || q[2] == NULL) {
        ts_db_rollback(c);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    e = ts_db_exec(c,
                   "WITH upd AS (UPDATE job SET state = 'suspending', suspend_held = true,"
                   "   stop_reason = 'suspended', suspended_bytes = $2, updated_at = now()"
                   "   WHERE id = $1 AND state = 'running' RETURNING id)"
                   " INSERT INTO job_event (job_id, type, message) SELECT id, 'suspending', $3"
                   " FROM upd",
                   TS_ARRAY_LEN(q), q, &res, err);
    PQclear(res);
    if (e == TS_OK)
        e = ts_db_commit(c, err);
    else
        ts_db_rollback(c);
    *retry = e == TS_ERR_CONFLICT;
    return e;
}

enum ts_err ts_store_job_suspend(struct ts_dbconn *c, int64_t id, const char *by,
                                 struct ts_arena *a, struct ts_job *out, struct ts_error *err)
{
    char idbuf[24];
    snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
    bool retry = true;
    enum ts_err e = TS_ERR_CONFLICT;
    for (int attempt = 0; retry && attempt < 3; attempt++)
        e = suspend_once(c, idbuf, id, by, a, &retry, err);
    if (e != TS_OK)
        return e;
    return ts_store_job_get(c, id, a, out, NULL, err);
}

enum ts_err ts_store_job_resume(struct ts_dbconn *c, int64_t id, const char *by, struct ts_arena *a,
                                struct ts_job *out, struct ts_error *err)
{
    char idbuf[24];
    snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
    const char *msg = ts_arena_printf(a, "resume requested by %s; waiting for its GPUs", by);
    if (msg == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    const char *p[] = {idbuf, msg};
    PGresult *res = NULL;
    /* one statement: the hold is cleared only on a suspended, held job */
    enum ts_err e = ts_db_exec(
        c,
        "WITH cur AS (SELECT id, state, suspend_held FROM job WHERE id = $1 FOR UPDATE),"
        " upd AS (UPDATE job SET suspend_held = false, updated_at = now(),"
        "   reason_code = 'not_yet_scheduled', reason_message = 'waiting for the scheduler'"
        "   FROM cur WHERE job.id = cur.id AND cur.state = 'suspended' AND cur.suspend_held"
        "   RETURNING job.id),"
        " ev AS (INSERT INTO job_event (job_id, type, message) SELECT id, 'resume_requested', $2"
        "   FROM upd)"
        " SELECT cur.state, cur.suspend_held, (SELECT count(*) FROM upd) FROM cur",
        TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "job %lld does not exist", (long long)id);
    }
    char state[32];
    ts_row_copy(res, 0, 0, state, sizeof(state));
    bool held = ts_row_bool(res, 0, 1);
    bool done = ts_row_i64(res, 0, 2) == 1;
    PQclear(res);
    if (!done) {
        if (strcmp(state, "suspended") == 0 && !held)
            return ts_error_set(err, TS_ERR_CONFLICT,
                                "job %lld was suspended by the scheduler; it resumes by itself "
                                "when its GPUs are free",
                                (long long)id);
        if (strcmp(state, "suspending") == 0)
            return ts_error_set(err, TS_ERR_CONFLICT,
                                "job %lld is still suspending; resume it once it is suspended",
                                (long long)id);
        return ts_error_set(err, TS_ERR_CONFLICT,
                            "job %lld is %s; only a suspended job can be resumed", (long long)id,
                            state);
    }
    return ts_store_job_get(c, id, a, out, NULL, err);
}
