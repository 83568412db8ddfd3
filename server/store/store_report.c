/*
 * store_report.c - the agent protocol's reports: heartbeat, job states,
 * samples and events (registration and the desired state are store_agent.c).
 *
 * Job states move here when an agent reports: scheduled -> running;
 * running -> succeeded | failed (it ended on its own); evicting -> pending
 * (requeued, resume_count + 1) whatever its exit status: a job that saves a
 * checkpoint on SIGTERM and exits 0 was evicted, it did not succeed;
 * cancelling -> cancelled (failed when stopped at its max_runtime);
 * suspending -> suspended (its GPUs are given back, the swap it holds
 * recorded); resuming -> running; a suspending or suspended job that exits
 * counts as evicted, whatever its exit status, and so does any job its agent
 * reports exited with evicted (its collision resolver ended it to make room)
 * unless a cancel came first. A resuming job its agent still reports suspended with a
 * message waits for memory (reason waiting_for_memory). A running job's
 * swapped_bytes (GPU memory its node keeps in host swap) are recorded.
 * A report names a job by (id, attempt) and counts only when that attempt is
 * the job's current one on this node; otherwise it is ignored and named in
 * the answer. Events the agent sends (its collision resolver's actions) are
 * stored once per (job, attempt, seq) when that attempt ran on this node
 * (job_attempt, migrations/0004), whatever the job's state now. The job
 * trigger (migrations/0002) frees job_gpu rows; the wake-ups of the
 * scheduler and the node's agent that its triggers record are sent after
 * the report's commit (notify_after_commit, migrations/0013). A report
 * costs a fixed number of statements: the samples of its jobs that run (the
 * common case) and of its GPUs go in one statement each, as arrays; only a
 * job whose state moves takes its own statements. A report that moves
 * nothing commits without waiting for its WAL flush (server/README.md, the
 * agent protocol): the next report says it again.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "api/log.h"
#include "api/units.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

#define P(fmt, v) ts_arena_printf(a, fmt, v)

/* ---- reports ------------------------------------------------------------- */

static const char *exit_words(const struct ts_report_job *r, struct ts_arena *a)
{
    if (r->state == TS_REPORT_FAILED_TO_START)
        return ts_arena_printf(a, "could not start: %s", r->message ? r->message : "unknown error");
    if (r->signal > 0)
        return ts_arena_printf(a, "killed by signal %d (%s)", r->signal, strsignal(r->signal));
    return ts_arena_printf(a, "exited with status %d", r->exit_code);
}

static enum ts_err add_event(struct ts_dbconn *c, const char *id, const char *type,
                             const char *message, struct ts_error *err)
{
    const char *p[] = {id, type, message};
    PGresult *res = NULL;
    enum ts_err e =
        ts_db_exec_in_tx(c, "INSERT INTO job_event (job_id, type, message) VALUES ($1, $2, $3)",
                         TS_ARRAY_LEN(p), p, &res, err);
    PQclear(res);
    return e;
}

/* The job has ended on the node: decide where it goes. */
static enum ts_err job_ended(struct ts_dbconn *c, const char *id, const char *state,
                             const char *stop_reason, const char *node,
                             const struct ts_report_job *r, struct ts_arena *a,
                             struct ts_error *err)
{
    int code = r->signal > 0 ? 128 + r->signal : r->exit_code;
    bool clean = r->state == TS_REPORT_EXITED && r->signal == 0 && r->exit_code == 0;
    const char *next, *type, *msg;
    const char *how = exit_words(r, a);
    if (strcmp(state, "cancelling") == 0) {
        bool timeout = stop_reason && strcmp(stop_reason, "max_runtime") == 0;
        next = timeout ? "failed" : "cancelled";
        type = next;
        msg = ts_arena_printf(a, "%s on node %s: %s",
                              timeout ? "stopped at its maximum runtime" : "stopped", node, how);
    } else if (r->evicted) {
        /* its node ended it to make room (the collision resolver): an
         * eviction whatever its exit status, never a failure */
        next = "pending";
        type = "requeued";
        if (r->state == TS_REPORT_FAILED_TO_START)
            how = "before it had started";
        msg = r->message ? ts_arena_printf(a,
                                           "evicted by node %s: %s; %s; back in the queue, it "
                                           "resumes later",
                                           node, r->message, how)
                         : ts_arena_printf(a,
                                           "evicted by node %s to make room; %s; back in the "
                                           "queue, it resumes later",
                                           node, how);
    } else if (strcmp(state, "evicting") == 0 || strcmp(state, "suspending") == 0 ||
               strcmp(state, "suspended") == 0) {
        /* the server asked it to stop (an eviction; a suspension that ends
         * or fails is one too): back in the queue whatever its exit status,
         * since saving a checkpoint on SIGTERM and exiting 0 is how a job is
         * meant to leave, not success */
        next = "pending";
        type = "requeued";
        msg = ts_arena_printf(a, "stopped on node %s (%s) and back in the queue; it resumes later",
                              node, how);
    } else {
        next = clean ? "succeeded" : "failed";
        type = next;
        msg = ts_arena_printf(a, "%s on node %s", how, node);
    }
    if (msg == NULL || how == NULL)
        return ts_error_nomem(err);
    bool requeue = strcmp(next, "pending") == 0;
    const char *p[] = {id, next, requeue ? NULL : P("%d", code)};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec_in_tx(
        c,
        "UPDATE job SET state = $2, pid = NULL, updated_at = now(), exit_code = $3::int,"
        " finished_at = CASE WHEN $2 = 'pending' THEN NULL ELSE now() END,"
        " node_id = CASE WHEN $2 = 'pending' THEN NULL ELSE node_id END,"
        " resume_count = resume_count + CASE WHEN $2 = 'pending' THEN 1 ELSE 0 END,"
        " allocated_gpus = 0, stop_reason = CASE WHEN $2 = 'pending' THEN NULL ELSE stop_reason "
        "END,"
        " reason_code = CASE WHEN $2 = 'pending' THEN 'not_yet_scheduled' END,"
        " reason_message = CASE WHEN $2 = 'pending' THEN 'waiting for the scheduler' END,"
        " gpu_utilization = 0, gpu_memory_used_bytes = 0, suspended_bytes = 0,"
        " suspend_held = false, suspended_gpu_ids = NULL, suspended_gpu_bytes = NULL"
        " WHERE id = $1",
        TS_ARRAY_LEN(p), p, &res, err);
    PQclear(res);
    if (e == TS_OK)
        e = add_event(c, id, type, msg, err);
    return e;
}

/* A resuming job its agent still reports suspended: the swap-in was sent
 * but its memory is not back yet. With a message (what it waits for, the
 * agent's words) that becomes its reason, waiting_for_memory; it stays
 * resuming until its agent reports it running. */
static enum ts_err job_waits_for_memory(struct ts_dbconn *c, const char *id,
                                        const struct ts_report_job *r, const char *bytes,
                                        struct ts_error *err)
{
    if (r->message == NULL && bytes == NULL)
        return TS_OK;
    const char *p[] = {id, bytes, r->message};
    PGresult *res = NULL;
    enum ts_err e =
        ts_db_exec_in_tx(c,
                         "UPDATE job SET suspended_bytes = coalesce($2::bigint, suspended_bytes),"
                         " reason_code = CASE WHEN $3::text IS NULL THEN reason_code"
                         "   ELSE 'waiting_for_memory' END,"
                         " reason_message = coalesce($3::text, reason_message), queue_position = 0"
                         " WHERE id = $1",
                         TS_ARRAY_LEN(p), p, &res, err);
    PQclear(res);
    return e;
}

/* Its agent reports it suspended: its processes are stopped and its GPU
 * memory is in host swap. A suspending job becomes suspended: its GPUs are
 * given back (the trigger deletes its job_gpu rows; the GPUs are kept in
 * suspended_gpu_ids: it resumes only there), the swap it holds is recorded.
 * A suspended job's figure is updated; in other states nothing changes. */
static enum ts_err job_suspended(struct ts_dbconn *c, const char *id, const char *state, bool held,
                                 const char *node, const struct ts_report_job *r,
                                 struct ts_arena *a, struct ts_error *err)
{
    const char *bytes = r->has_swapped_bytes ? P("%lld", (long long)r->swapped_bytes) : NULL;
    PGresult *res = NULL;
    if (strcmp(state, "suspended") == 0) {
        if (bytes == NULL)
            return TS_OK;
        const char *p[] = {id, bytes};
        enum ts_err e = ts_db_exec_in_tx(c, "UPDATE job SET suspended_bytes = $2 WHERE id = $1",
                                         TS_ARRAY_LEN(p), p, &res, err);
        PQclear(res);
        return e;
    }
    if (strcmp(state, "resuming") == 0)
        return job_waits_for_memory(c, id, r, bytes, err);
    if (strcmp(state, "suspending") != 0)
        return TS_OK;
    const char *why = held ? ts_arena_printf(a,
                                             "suspended by request on node %s; POST "
                                             "/api/v1/jobs/%s/resume to continue",
                                             node, id)
                           : ts_arena_printf(a,
                                             "suspended on node %s to make room; it resumes "
                                             "there when its GPUs are free",
                                             node);
    char size[32];
    const char *msg =
        bytes ? ts_arena_printf(a, "suspended on node %s: %s of GPU memory in host swap", node,
                                ts_bytesize_human(strtoll(bytes, NULL, 10), size, sizeof(size)))
              : ts_arena_printf(a, "suspended on node %s", node);
    if (why == NULL || msg == NULL)
        return ts_error_nomem(err);
    const char *p[] = {id, bytes, why};
    enum ts_err e = ts_db_exec_in_tx(
        c,
        "UPDATE job SET state = 'suspended', allocated_gpus = 0, updated_at = now(),"
        " suspended_bytes = coalesce($2::bigint, suspended_bytes),"
        " suspended_gpu_ids = (SELECT array_agg(gpu_id ORDER BY gpu_id) FROM job_gpu"
        "   WHERE job_id = $1),"
        " suspended_gpu_bytes = (SELECT array_agg(memory_bytes ORDER BY gpu_id) FROM job_gpu"
        "   WHERE job_id = $1),"
        " gpu_utilization = 0, reason_code = 'suspended', reason_message = $3,"
        " queue_position = 0"
        " WHERE id = $1",
        TS_ARRAY_LEN(p), p, &res, err);
    PQclear(res);
    return e == TS_OK ? add_event(c, id, "suspended", msg, err) : e;
}

/* Its agent reports a resuming job running: its processes continue. */
static enum ts_err job_resumed(struct ts_dbconn *c, const char *id, const char *node,
                               struct ts_arena *a, struct ts_error *err)
{
    PGresult *res = NULL;
    const char *p[] = {id};
    enum ts_err e =
        ts_db_exec_in_tx(c,
                         "UPDATE job SET state = 'running', suspended_bytes = 0,"
                         " suspended_gpu_ids = NULL, suspended_gpu_bytes = NULL,"
                         " stop_reason = NULL, reason_code = NULL, reason_message = NULL,"
                         " updated_at = now() WHERE id = $1",
                         TS_ARRAY_LEN(p), p, &res, err);
    PQclear(res);
    if (e != TS_OK)
        return e;
    const char *msg = ts_arena_printf(a, "resumed on node %s", node);
    return msg ? add_event(c, id, "resumed", msg, err) : ts_error_nomem(err);
}

/* Its agent reports a scheduled job running: its attempt starts. */
static enum ts_err job_started(struct ts_dbconn *c, const char *id, const char *node,
                               const struct ts_report_job *r, struct ts_arena *a,
                               struct ts_error *err)
{
    PGresult *res = NULL;
    const char *p[] = {id};
    enum ts_err e = ts_db_exec_in_tx(
        c,
        "UPDATE job SET state = 'running', started_at = coalesce(started_at, now()),"
        " attempt_started_at = now(), last_active_at = coalesce(last_active_at, now()),"
        " updated_at = now() WHERE id = $1",
        TS_ARRAY_LEN(p), p, &res, err);
    PQclear(res);
    if (e != TS_OK)
        return e;
    const char *msg = r->pid > 0 ? ts_arena_printf(a, "running on node %s (pid %d)", node, r->pid)
                                 : ts_arena_printf(a, "running on node %s", node);
    return msg ? add_event(c, id, "running", msg, err) : ts_error_nomem(err);
}

static enum ts_err apply_job(struct ts_dbconn *c, const char *node_id, const char *node,
                             const struct ts_report_job *r, struct ts_arena *a, bool *ignored,
                             struct ts_error *err)
{
    const char *id = P("%lld", (long long)r->id);
    const char *p[] = {id, P("%d", r->attempt), node_id};
    PGresult *res = NULL;
    enum ts_err e =
        ts_db_exec_in_tx(c,
                         "SELECT state, stop_reason, suspend_held FROM job WHERE id = $1"
                         " AND attempt = $2 AND node_id = $3 AND state IN"
                         " ('scheduled', 'running', 'evicting', 'cancelling', 'suspending',"
                         " 'suspended', 'resuming') FOR UPDATE",
                         TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    *ignored = PQntuples(res) != 1;
    if (*ignored) {
        PQclear(res);
        return TS_OK;
    }
    const char *state = ts_row_text(res, 0, 0, a);
    const char *stop_reason = ts_row_text(res, 0, 1, a);
    bool held = ts_row_bool(res, 0, 2);
    PQclear(res);
    if (state == NULL)
        return ts_error_nomem(err);
    if (r->state == TS_REPORT_SUSPENDED)
        return job_suspended(c, id, state, held, node, r, a, err);
    if (r->state != TS_REPORT_RUNNING)
        return job_ended(c, id, state, stop_reason, node, r, a, err);
    if (strcmp(state, "suspended") == 0)
        return TS_OK; /* not resumed yet: the agent still has it stopped */
    if (strcmp(state, "resuming") == 0)
        e = job_resumed(c, id, node, a, err);
    else if (strcmp(state, "scheduled") == 0)
        e = job_started(c, id, node, r, a, err);
    if (e != TS_OK)
        return e;
    /* the samples, and the host swap it holds while it runs (the trigger of
     * migrations/0004 keeps that at 0 in any other state) */
    const char *u[] = {id,
                       r->pid > 0 ? P("%d", r->pid) : NULL,
                       r->has_usage ? "t" : "f",
                       P("%.17g", r->gpu_utilization),
                       P("%lld", (long long)r->gpu_memory_used_bytes),
                       r->has_swapped_bytes ? P("%lld", (long long)r->swapped_bytes) : NULL};
    e = ts_db_exec_in_tx(
        c,
        "UPDATE job SET pid = coalesce($2::int, pid),"
        " gpu_utilization = CASE WHEN $3::boolean THEN $4 ELSE gpu_utilization END,"
        " gpu_memory_used_bytes = CASE WHEN $3::boolean THEN $5"
        "   ELSE gpu_memory_used_bytes END,"
        " sampled_at = CASE WHEN $3::boolean THEN now() ELSE sampled_at END,"
        " last_active_at = CASE WHEN $3::boolean AND $4::float8 > 0 THEN now()"
        "   ELSE last_active_at END,"
        " swapped_bytes = coalesce($6::bigint, swapped_bytes)"
        " WHERE id = $1",
        TS_ARRAY_LEN(u), u, &res, err);
    PQclear(res);
    return e;
}

/* A job asked to stop before its agent ever ran it (a scheduled job evicted
 * or cancelled): the agent reports every job it knows, so one it has not
 * named for a while after the stop never started there. Likewise a job asked
 * to suspend that its agent no longer names: it is gone, and requeued. */
static enum ts_err never_started(struct ts_dbconn *c, const char *node_id,
                                 const struct ts_node_report *rep, struct ts_arena *a, bool *moved,
                                 struct ts_error *err)
{
    int64_t *ids = ts_arena_alloc(a, sizeof(*ids) * (rep->njobs + 1));
    if (ids == NULL)
        return ts_error_nomem(err);
    for (size_t i = 0; i < rep->njobs; i++)
        ids[i] = rep->jobs[i].id;
    const char *p[] = {node_id, ts_row_id_array(a, ids, rep->njobs)};
    if (p[1] == NULL)
        return ts_error_nomem(err);
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec_in_tx(
        c,
        "WITH gone AS (SELECT id, state FROM job WHERE node_id = $1"
        "   AND ((state IN ('evicting', 'cancelling') AND attempt_started_at IS NULL)"
        "     OR state = 'suspending')"
        "   AND updated_at < now() - interval '10 seconds' AND id <> ALL($2::bigint[])"
        "   FOR UPDATE),"
        " upd AS (UPDATE job SET"
        "   state = CASE WHEN gone.state = 'cancelling' THEN 'cancelled' ELSE 'pending' END,"
        "   node_id = CASE WHEN gone.state = 'cancelling' THEN job.node_id END,"
        "   finished_at = CASE WHEN gone.state = 'cancelling' THEN now() END,"
        "   resume_count = job.resume_count + CASE WHEN gone.state = 'suspending' THEN 1"
        "     ELSE 0 END,"
        "   suspended_bytes = 0, suspend_held = false,"
        "   allocated_gpus = 0, stop_reason = NULL, updated_at = now(),"
        "   reason_code = CASE WHEN gone.state = 'cancelling' THEN NULL"
        "     ELSE 'not_yet_scheduled' END,"
        "   reason_message = CASE WHEN gone.state = 'cancelling' THEN NULL"
        "     ELSE 'waiting for the scheduler' END"
        "   FROM gone WHERE job.id = gone.id RETURNING job.id, job.state)"
        " INSERT INTO job_event (job_id, type, message)"
        " SELECT upd.id, CASE WHEN upd.state = 'cancelled' THEN 'cancelled' ELSE 'requeued' END,"
        "   CASE WHEN gone.state = 'suspending'"
        "   THEN 'its node no longer has it; back in the queue'"
        "   ELSE 'stopped before it started on its node'"
        "   || CASE WHEN upd.state = 'pending' THEN '; back in the queue' ELSE '' END END"
        " FROM upd JOIN gone ON gone.id = upd.id",
        TS_ARRAY_LEN(p), p, &res, err);
    if (e == TS_OK && atol(PQcmdTuples(res)) > 0)
        *moved = true;
    PQclear(res);
    return e;
}

/* A PostgreSQL array literal built in the arena, values of at most 32
 * characters ("NULL" for none) added one by one: a report's values go in one
 * statement as arrays, not one statement a job or a GPU. */
struct array_text {
    char *s;
    size_t len, cap;
};

static bool array_add(struct array_text *t, const char *v)
{
    size_t n = strlen(v);
    if (t->len + n + 3 > t->cap)
        return false;
    if (t->len > 1)
        t->s[t->len++] = ',';
    memcpy(t->s + t->len, v, n);
    t->len += n;
    t->s[t->len] = '}';
    t->s[t->len + 1] = '\0';
    return true;
}

static bool array_init(struct array_text *t, size_t n, struct ts_arena *a)
{
    t->cap = 4 + n * 33;
    t->s = ts_arena_alloc(a, t->cap);
    t->len = 1;
    if (t->s == NULL)
        return false;
    memcpy(t->s, "{}", 3);
    return true;
}

/* Every GPU's sample in one statement (the last one of an index counts). */
static enum ts_err apply_gpus(struct ts_dbconn *c, const char *node_id,
                              const struct ts_node_report *rep, struct ts_arena *a,
                              struct ts_error *err)
{
    struct array_text idx, util, mem;
    if (rep->ngpus == 0)
        return TS_OK;
    if (!array_init(&idx, rep->ngpus, a) || !array_init(&util, rep->ngpus, a) ||
        !array_init(&mem, rep->ngpus, a))
        return ts_error_nomem(err);
    for (size_t i = 0; i < rep->ngpus; i++) {
        const struct ts_report_gpu *g = &rep->gpus[i];
        bool later = false;
        for (size_t k = i + 1; k < rep->ngpus && !later; k++)
            later = rep->gpus[k].index == g->index;
        if (later)
            continue;
        char v[32];
        snprintf(v, sizeof(v), "%d", g->index);
        array_add(&idx, v);
        snprintf(v, sizeof(v), "%.17g", g->utilization);
        array_add(&util, v);
        snprintf(v, sizeof(v), "%lld", (long long)g->memory_used_bytes);
        array_add(&mem, v);
    }
    const char *p[] = {node_id, idx.s, util.s, mem.s};
    PGresult *res = NULL;
    enum ts_err e =
        ts_db_exec_in_tx(c,
                         "UPDATE gpu SET utilization = u.util, memory_used_bytes = u.mem,"
                         " sampled_at = now()"
                         " FROM unnest($2::int[], $3::float8[], $4::bigint[])"
                         "   AS u(idx, util, mem)"
                         " WHERE gpu.node_id = $1 AND gpu.idx = u.idx",
                         TS_ARRAY_LEN(p), p, &res, err);
    PQclear(res);
    return e;
}

/* The jobs reported running that are running: their samples in one
 * statement, the rows locked in id order; done[i] is set for each such
 * job. The others (starting, resuming, suspended, ended, another attempt)
 * go through apply_job one by one. */
static enum ts_err apply_running(struct ts_dbconn *c, const char *node_id,
                                 const struct ts_node_report *rep, struct ts_arena *a, bool *done,
                                 struct ts_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < rep->njobs; i++)
        n += rep->jobs[i].state == TS_REPORT_RUNNING;
    if (n == 0)
        return TS_OK;
    struct array_text ids, attempts, pids, usage, util, mem, swapped;
    if (!array_init(&ids, n, a) || !array_init(&attempts, n, a) || !array_init(&pids, n, a) ||
        !array_init(&usage, n, a) || !array_init(&util, n, a) || !array_init(&mem, n, a) ||
        !array_init(&swapped, n, a))
        return ts_error_nomem(err);
    for (size_t i = 0; i < rep->njobs; i++) {
        const struct ts_report_job *r = &rep->jobs[i];
        if (r->state != TS_REPORT_RUNNING)
            continue;
        char v[32];
        snprintf(v, sizeof(v), "%lld", (long long)r->id);
        array_add(&ids, v);
        snprintf(v, sizeof(v), "%d", r->attempt);
        array_add(&attempts, v);
        if (r->pid > 0)
            snprintf(v, sizeof(v), "%d", r->pid);
        array_add(&pids, r->pid > 0 ? v : "NULL");
        array_add(&usage, r->has_usage ? "t" : "f");
        snprintf(v, sizeof(v), "%.17g", r->gpu_utilization);
        array_add(&util, v);
        snprintf(v, sizeof(v), "%lld", (long long)r->gpu_memory_used_bytes);
        array_add(&mem, v);
        if (r->has_swapped_bytes)
            snprintf(v, sizeof(v), "%lld", (long long)r->swapped_bytes);
        array_add(&swapped, r->has_swapped_bytes ? v : "NULL");
    }
    const char *p[] = {node_id, ids.s, attempts.s, pids.s, usage.s, util.s, mem.s, swapped.s};
    PGresult *res = NULL;
    /* the samples, and the host swap it holds while it runs (the trigger of
     * migrations/0004 keeps that at 0 in any other state) */
    enum ts_err e = ts_db_exec_in_tx(
        c,
        "WITH r AS (SELECT * FROM unnest($2::bigint[], $3::int[], $4::int[], $5::boolean[],"
        "   $6::float8[], $7::bigint[], $8::bigint[])"
        "   AS r(id, attempt, pid, has_usage, util, mem, swapped)),"
        " l AS (SELECT j.id FROM job j JOIN r ON r.id = j.id AND r.attempt = j.attempt"
        "   WHERE j.node_id = $1 AND j.state = 'running' ORDER BY j.id FOR UPDATE OF j)"
        " UPDATE job SET pid = coalesce(r.pid, job.pid),"
        " gpu_utilization = CASE WHEN r.has_usage THEN r.util ELSE job.gpu_utilization END,"
        " gpu_memory_used_bytes = CASE WHEN r.has_usage THEN r.mem"
        "   ELSE job.gpu_memory_used_bytes END,"
        " sampled_at = CASE WHEN r.has_usage THEN now() ELSE job.sampled_at END,"
        " last_active_at = CASE WHEN r.has_usage AND r.util > 0 THEN now()"
        "   ELSE job.last_active_at END,"
        " swapped_bytes = coalesce(r.swapped, job.swapped_bytes)"
        " FROM r JOIN l ON l.id = r.id WHERE job.id = r.id AND job.attempt = r.attempt"
        " RETURNING job.id",
        TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    for (int row = 0; row < PQntuples(res); row++) {
        int64_t id = ts_row_i64(res, row, 0);
        for (size_t i = 0; i < rep->njobs; i++)
            if (rep->jobs[i].id == id && rep->jobs[i].state == TS_REPORT_RUNNING)
                done[i] = true;
    }
    PQclear(res);
    return TS_OK;
}

/* The resolver's events: stored once per (job, attempt, seq), only for
 * attempts that ran on this node (job_attempt), whatever the job's state
 * now: the victim of a resolver is often requeued or ended by the time its
 * node reports why. An agent's token never writes into another node's jobs:
 * the others' ids go to ignored. */
static enum ts_err apply_events(struct ts_dbconn *c, const char *node_id,
                                const struct ts_node_report *rep, struct ts_arena *a,
                                struct ts_report_result *out, struct ts_error *err)
{
    for (size_t i = 0; i < rep->nevents; i++) {
        const struct ts_report_event *ev = &rep->events[i];
        const char *p[] = {P("%lld", (long long)ev->id),
                           P("%d", ev->attempt),
                           P("%lld", (long long)ev->seq),
                           ev->type,
                           ev->message,
                           node_id};
        PGresult *res = NULL;
        enum ts_err e = ts_db_exec_in_tx(
            c,
            "WITH j AS (SELECT job_id AS id FROM job_attempt"
            "   WHERE job_id = $1 AND attempt = $2 AND node_id = $6),"
            " ins AS (INSERT INTO job_event (job_id, type, message, attempt, seq)"
            "   SELECT id, $4, $5, $2, $3 FROM j"
            "   ON CONFLICT (job_id, attempt, seq) WHERE seq IS NOT NULL DO NOTHING)"
            " SELECT count(*) FROM j",
            TS_ARRAY_LEN(p), p, &res, err);
        if (e != TS_OK)
            return e;
        bool known = ts_row_i64(res, 0, 0) > 0;
        PQclear(res);
        bool listed = false;
        for (size_t k = 0; k < out->nignored && !listed; k++)
            listed = out->ignored[k] == ev->id;
        if (!known && !listed)
            out->ignored[out->nignored++] = ev->id;
    }
    return TS_OK;
}

/* What the triggers of a transaction that set tessera.notify_later
 * recorded (migrations/0013): columns of a statement's row. */
#define LATER_COLS                                                                                 \
    " current_setting('tessera.later_sched', true),"                                               \
    " current_setting('tessera.later_nodes', true)"

/* The heartbeat, the report's last statement; *res (new): the node's
 * generation and LATER_COLS. The state column is written only when it
 * changes, so that heartbeats do not wake the scheduler. A report that
 * moved nothing (samples, the heartbeat, where jobs run on the node: what
 * its next report, 5 s later, says again) commits without waiting for its
 * WAL flush (server/README.md, the agent protocol). */
static enum ts_err heartbeat(struct ts_dbconn *c, const char *node_id, bool moved, bool was_lost,
                             PGresult **res, struct ts_error *err)
{
    const char *q[] = {node_id, moved ? "f" : "t"};
    enum ts_err e = ts_db_exec_in_tx(c,
                                     "UPDATE node SET last_seen_at = now() WHERE id = $1"
                                     " RETURNING generation," LATER_COLS ", CASE WHEN $2::boolean"
                                     "   THEN set_config('synchronous_commit', 'off', true) END",
                                     TS_ARRAY_LEN(q), q, res, err);
    if (e != TS_OK || !was_lost)
        return e;
    const char *q1[] = {node_id};
    PQclear(*res);
    *res = NULL;
    e = ts_db_exec_in_tx(c, "UPDATE node SET state = 'ready' WHERE id = $1 AND state = 'not_ready'",
                         TS_ARRAY_LEN(q1), q1, res, err);
    PQclear(*res);
    *res = NULL;
    if (e != TS_OK)
        return e;
    /* what its triggers made of it */
    return ts_db_exec_in_tx(c, "SELECT generation," LATER_COLS " FROM node WHERE id = $1",
                            TS_ARRAY_LEN(q1), q1, res, err);
}

/* The wake-ups the report's triggers recorded instead of sending them
 * (migrations/0013), after its commit: tessera_sched when sched, and
 * tessera_node for each id in nodes (",3,7,"; NULL or "" for none). A
 * NOTIFY holds PostgreSQL's notify lock from its transaction's commit
 * record until that commit is done: sent from the report's transaction, it
 * made every report that started or ended a job, and every other notifying
 * transaction, commit one at a time through each other's WAL flush. Here
 * it is a transaction of its own that does not wait for its flush, as a
 * submission's (store_jobs.c). The waiters read after the notification, so
 * they see what the report committed. A lost wake-up (the NOTIFY failed,
 * the server died between the two) loses no data: the agent learns its
 * node's new generation from the report's answer, and the loop reads the
 * change at its next cycle. */
static void notify_after_commit(struct ts_dbconn *c, bool sched, const char *nodes)
{
    if (!sched && (nodes == NULL || nodes[0] == '\0'))
        return;
    const char *p[] = {sched ? "t" : "f", nodes ? nodes : ""};
    PGresult *res = NULL;
    struct ts_error err;
    if (ts_db_exec(c,
                   "SELECT set_config('synchronous_commit', 'off', true),"
                   " CASE WHEN $1::boolean THEN pg_notify('tessera_sched', '') END,"
                   " (SELECT count(*) FROM (SELECT pg_notify('tessera_node', n)"
                   "   FROM unnest(string_to_array($2, ',')) AS n WHERE n <> '') AS x)",
                   TS_ARRAY_LEN(p), p, &res, &err) != TS_OK)
        ts_log_warn("could not send a report's wake-ups error=\"%s\"", err.message);
    PQclear(res);
}

enum ts_err ts_store_node_report(struct ts_dbconn *c, const char *name,
                                 const struct ts_node_report *rep, struct ts_arena *a,
                                 struct ts_report_result *out, struct ts_error *err)
{
    memset(out, 0, sizeof(*out));
    out->ignored = ts_arena_alloc(a, sizeof(*out->ignored) * (rep->njobs + rep->nevents + 1));
    if (out->ignored == NULL)
        return ts_error_nomem(err);
    enum ts_err e = ts_db_begin(c, err);
    if (e != TS_OK)
        return e;
    const char *p[] = {name};
    PGresult *res = NULL;
    /* Locks are taken job rows first, then the node row (the job trigger
     * updates the node), as cancels and the scheduler do: the node is only
     * read here, and its heartbeat written last, or the two would deadlock. */
    /* its triggers' wake-ups are sent after the commit (notify_after_commit) */
    e = ts_db_exec_in_tx(c,
                         "SELECT id, state, set_config('tessera.notify_later', 'on', true)"
                         " FROM node WHERE name = $1",
                         TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    if (PQntuples(res) != 1) {
        PQclear(res);
        ts_db_rollback(c);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "node \"%s\" is not registered", name);
    }
    const char *node_id = ts_row_text(res, 0, 0, a);
    bool was_lost = strcmp(PQgetvalue(res, 0, 1), "not_ready") == 0;
    PQclear(res);
    if (node_id == NULL) {
        ts_db_rollback(c);
        return ts_error_nomem(err);
    }
    bool *done = ts_arena_alloc(a, sizeof(*done) * (rep->njobs + 1));
    if (done == NULL) {
        ts_db_rollback(c);
        return ts_error_nomem(err);
    }
    e = apply_running(c, node_id, rep, a, done, err);
    /* moved: the report changed a job's or the node's state, or stored an
     * event (below, durable) */
    bool moved = was_lost || rep->nevents > 0;
    for (size_t i = 0; e == TS_OK && i < rep->njobs; i++) {
        if (done[i])
            continue;
        moved = true;
        bool ignored = false;
        e = apply_job(c, node_id, name, &rep->jobs[i], a, &ignored, err);
        if (ignored)
            out->ignored[out->nignored++] = rep->jobs[i].id;
    }
    if (e == TS_OK)
        e = ts_store_report_places(c, node_id, rep, a, err);
    if (e == TS_OK)
        e = apply_events(c, node_id, rep, a, out, err);
    if (e == TS_OK)
        e = never_started(c, node_id, rep, a, &moved, err);
    if (e == TS_OK)
        e = apply_gpus(c, node_id, rep, a, err);
    if (e == TS_OK)
        e = heartbeat(c, node_id, moved, was_lost, &res, err);
    if (e != TS_OK)
        return e; /* rolled back */
    out->generation = ts_row_i64(res, 0, 0);
    bool sched = !PQgetisnull(res, 0, 1) && strcmp(PQgetvalue(res, 0, 1), "on") == 0;
    const char *nodes = ts_row_text(res, 0, 2, a);
    PQclear(res);
    if ((e = ts_db_commit(c, err)) == TS_OK)
        notify_after_commit(c, sched, nodes);
    return e;
}
