/*
 * store_sched.c - the scheduler loop's queries: the sweeps (nodes that stopped
 * reporting, jobs past their maximum runtime) and the transaction that
 * writes its decisions; the snapshot it reads is store_sched_snap.c.
 *
 * Decisions are written in one transaction, each guarded by the state the
 * snapshot saw: the stops are one statement and the binds another, and a
 * decision whose job moved meanwhile (a cancel, a report) is left out while
 * the others are written (write_stops, write_binds).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

#define P(fmt, v) ts_arena_printf(a, fmt, v)

/* ---- sweeps ---------------------------------------------------------------- */

/*
 * One statement, so that a tick of an idle scheduler costs the database one
 * round trip. Its parts see the same snapshot: a node marked not ready here
 * has its jobs requeued by a later sweep (lost_s is longer than not_ready_s
 * in any sensible setting, and a sweep runs every second), and a job both
 * lost and past its maximum runtime is only requeued (two parts of one
 * statement must not update the same row).
 */
#define SWEEP_SQL                                                                                  \
    "WITH nr AS (UPDATE node SET state = 'not_ready' WHERE state = 'ready'"                        \
    "   AND coalesce(last_seen_at, created_at) < now() - make_interval(secs => $1::bigint)"        \
    "   RETURNING id),"                                                                            \
    " lost AS (SELECT j.id, j.state, n.name FROM job j JOIN node n ON n.id = j.node_id"            \
    "   WHERE j.state IN ('scheduled', 'running', 'evicting', 'cancelling', 'suspending',"         \
    "   'suspended', 'resuming')"                                                                  \
    "   AND n.state <> 'ready'"                                                                    \
    "   AND coalesce(n.last_seen_at, n.created_at) < now() - make_interval(secs => $2::bigint)"    \
    "   FOR UPDATE OF j),"                                                                         \
    " upd AS (UPDATE job SET"                                                                      \
    "   state = CASE WHEN lost.state = 'cancelling' THEN 'cancelled' ELSE 'pending' END,"          \
    "   node_id = CASE WHEN lost.state = 'cancelling' THEN job.node_id END,"                       \
    "   finished_at = CASE WHEN lost.state = 'cancelling' THEN now() END,"                         \
    "   resume_count = job.resume_count"                                                           \
    "     + CASE WHEN lost.state = 'cancelling' THEN 0 ELSE 1 END,"                                \
    "   pid = NULL, allocated_gpus = 0, stop_reason = NULL, updated_at = now(),"                   \
    "   gpu_utilization = 0, gpu_memory_used_bytes = 0, suspended_bytes = 0,"                      \
    "   suspend_held = false, suspended_gpu_ids = NULL, suspended_gpu_bytes = NULL,"               \
    "   reason_code = CASE WHEN lost.state = 'cancelling' THEN NULL"                               \
    "     ELSE 'not_yet_scheduled' END,"                                                           \
    "   reason_message = CASE WHEN lost.state = 'cancelling' THEN NULL"                            \
    "     ELSE 'waiting for the scheduler' END"                                                    \
    "   FROM lost WHERE job.id = lost.id RETURNING job.id, job.state, lost.name),"                 \
    " lost_ev AS (INSERT INTO job_event (job_id, type, message)"                                   \
    "   SELECT id, 'node_lost', 'node ' || name || ' stopped reporting for '"                      \
    "   || $2 || 's; ' || CASE WHEN state = 'cancelled' THEN 'counted as cancelled'"               \
    "   ELSE 'back in the queue' END FROM upd),"                                                   \
    " over AS (UPDATE job SET state = 'cancelling', stop_reason = 'max_runtime',"                  \
    "   updated_at = now() WHERE state IN ('running', 'suspended') AND max_runtime_seconds > 0"    \
    "   AND attempt_started_at + make_interval(secs => max_runtime_seconds) < now()"               \
    "   AND id NOT IN (SELECT id FROM lost)"                                                       \
    "   RETURNING id, max_runtime_seconds),"                                                       \
    " over_ev AS (INSERT INTO job_event (job_id, type, message)"                                   \
    "   SELECT id, 'cancelling', 'reached its maximum runtime of ' || max_runtime_seconds"         \
    "   || 's; stopping' FROM over)"                                                               \
    " SELECT (SELECT count(*) FROM nr), (SELECT count(*) FROM upd), (SELECT count(*) FROM over)"

enum ts_err ts_store_sched_sweep(struct ts_dbconn *c, int64_t not_ready_s, int64_t lost_s,
                                 struct ts_sweep_result *out, struct ts_error *err)
{
    memset(out, 0, sizeof(*out));
    char nr[24], lost[24];
    snprintf(nr, sizeof(nr), "%lld", (long long)not_ready_s);
    snprintf(lost, sizeof(lost), "%lld", (long long)lost_s);
    const char *p[] = {nr, lost};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c, SWEEP_SQL, TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    out->nodes_not_ready = (int)ts_row_i64(res, 0, 0);
    out->jobs_requeued = (int)ts_row_i64(res, 0, 1);
    out->jobs_timed_out = (int)ts_row_i64(res, 0, 2);
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_sched_forgive(struct ts_dbconn *c, double secs, int *n, struct ts_error *err)
{
    char s[32];
    snprintf(s, sizeof(s), "%.3f", secs);
    const char *p[] = {s};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c,
                               "UPDATE node SET last_seen_at = least(now(),"
                               " last_seen_at + make_interval(secs => $1::double precision))"
                               " WHERE last_seen_at IS NOT NULL",
                               TS_ARRAY_LEN(p), p, &res, err);
    if (e == TS_OK)
        *n = atoi(PQcmdTuples(res));
    PQclear(res);
    return e;
}

/* ---- writing the decisions ---------------------------------------------------- */

/* "scheduled on node n1 GPUs 0,1: MESSAGE" (new, in a). */
static const char *bind_message(const struct ts_sched_snapshot *s,
                                const struct ts_sched_decision *d, struct ts_arena *a)
{
    char *where = ts_arena_alloc(a, 32 + strlen(s->nodes[d->node].name) + d->nslots * 12);
    if (where == NULL)
        return NULL;
    size_t wl = (size_t)sprintf(where, "node %s", s->nodes[d->node].name);
    for (size_t i = 0; i < d->nslots; i++)
        wl += (size_t)sprintf(where + wl, "%s%d", i ? "," : (d->nslots > 1 ? " GPUs " : " GPU "),
                              s->gpus[d->slots[i].gpu].index);
    return ts_arena_printf(a, "scheduled on %s: %s", where, d->message);
}

/*
 * Every bind of the cycle in one statement (issue 15: one statement each
 * took seconds for a cycle binding thousands). Each job is checked as one
 * statement each checked it: still pending, or suspended on that node and
 * not held. A job that moved since the snapshot (cancelled, held) is not
 * bound and the others are: a bind only takes room, so leaving one out
 * cannot overfill a GPU or a project, and the binds written never wait for
 * this cycle's stops (safe_decisions in schedloop.c holds those back).
 * A suspended job resumes in the same attempt: its processes continue on
 * the GPUs they held. Events are written in the decisions' order.
 */
#define BINDS_SQL                                                                                  \
    "WITH b AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::float8[], $5::text[])"        \
    "   WITH ORDINALITY AS b(id, node, gpus, msg, ord)),"                                          \
    " upd AS (UPDATE job j SET"                                                                    \
    "   state = CASE WHEN j.state = 'suspended' THEN 'resuming' ELSE 'scheduled' END,"             \
    "   node_id = b.node, allocated_gpus = b.gpus, reason_code = NULL,"                            \
    "   attempt = j.attempt + CASE WHEN j.state = 'suspended' THEN 0 ELSE 1 END,"                  \
    "   reason_message = NULL, queue_position = 0, stop_reason = NULL,"                            \
    "   attempt_started_at = CASE WHEN j.state = 'suspended'"                                      \
    "     THEN j.attempt_started_at END, updated_at = now(),"                                      \
    "   checkpoint_dir = coalesce(j.checkpoint_dir, $4 || '/' || p.name || '/' || j.id)"           \
    "   FROM b, project p WHERE j.id = b.id AND p.id = j.project_id"                               \
    "   AND (j.state = 'pending' OR (j.state = 'suspended' AND j.node_id = b.node"                 \
    "   AND NOT j.suspend_held)) RETURNING j.id, j.state, b.msg, b.ord),"                          \
    " slots AS (INSERT INTO job_gpu (job_id, gpu_id, memory_bytes)"                                \
    "   SELECT upd.id, s.gpu, s.bytes FROM upd"                                                    \
    "   JOIN unnest($6::bigint[], $7::bigint[], $8::bigint[]) AS s(job, gpu, bytes)"               \
    "   ON s.job = upd.id),"                                                                       \
    " ev AS (INSERT INTO job_event (job_id, type, message)"                                        \
    "   SELECT id, CASE WHEN state = 'resuming' THEN 'resuming' ELSE 'scheduled' END,"             \
    "   CASE WHEN state = 'resuming' THEN 'resuming on ' || substr(msg, 14)"                       \
    "   ELSE msg END FROM upd ORDER BY ord)"                                                       \
    " SELECT count(*) FROM upd"

/* A float8[] literal, exact (17 significant digits). */
static char *float_array(struct ts_arena *a, const double *v, size_t n)
{
    size_t cap = 3 + n * 26, len = 0;
    char *s = ts_arena_alloc(a, cap);
    if (s == NULL)
        return NULL;
    s[len++] = '{';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s%.17g", i ? "," : "", v[i]);
    s[len++] = '}';
    s[len] = '\0';
    return s;
}

/* The binds among ap's decisions in one statement; *refused: how many
 * were not written because their job moved. */
static enum ts_err write_binds(struct ts_dbconn *c, const struct ts_sched_snapshot *s,
                               const struct ts_sched_rows *rows, const struct ts_sched_apply *ap,
                               struct ts_arena *a, size_t *refused, struct ts_error *err)
{
    size_t nb = 0, ns = 0;
    for (size_t i = 0; i < ap->ndecisions; i++)
        if (ap->decisions[i]->action == TS_SCHED_BIND) {
            nb++;
            ns += ap->decisions[i]->nslots;
        }
    *refused = 0;
    if (nb == 0)
        return TS_OK;
    int64_t *ids = ts_arena_alloc(a, sizeof(int64_t) * nb);
    int64_t *nodes = ts_arena_alloc(a, sizeof(int64_t) * nb);
    double *gpus = ts_arena_alloc(a, sizeof(double) * nb);
    const char **msgs = ts_arena_alloc(a, sizeof(char *) * nb);
    int64_t *sj = ts_arena_alloc(a, sizeof(int64_t) * (ns + 1));
    int64_t *sg = ts_arena_alloc(a, sizeof(int64_t) * (ns + 1));
    int64_t *sb = ts_arena_alloc(a, sizeof(int64_t) * (ns + 1));
    if (!ids || !nodes || !gpus || !msgs || !sj || !sg || !sb)
        return ts_error_nomem(err);
    size_t k = 0, m = 0;
    for (size_t i = 0; i < ap->ndecisions; i++) {
        const struct ts_sched_decision *d = ap->decisions[i];
        if (d->action != TS_SCHED_BIND)
            continue;
        ids[k] = d->job_id;
        nodes[k] = s->nodes[d->node].id;
        gpus[k] = d->gpus;
        if ((msgs[k++] = bind_message(s, d, a)) == NULL)
            return ts_error_nomem(err);
        for (size_t j = 0; j < d->nslots; j++, m++) {
            sj[m] = d->job_id;
            sg[m] = rows->gpu_ids[d->slots[j].gpu];
            sb[m] = d->slots[j].memory_bytes;
        }
    }
    const char *p[] = {ts_row_id_array(a, ids, nb),    ts_row_id_array(a, nodes, nb),
                       float_array(a, gpus, nb),       ap->checkpoint_root,
                       ts_row_text_array(a, msgs, nb), ts_row_id_array(a, sj, ns),
                       ts_row_id_array(a, sg, ns),     ts_row_id_array(a, sb, ns)};
    for (size_t i = 0; i < TS_ARRAY_LEN(p); i++)
        if (p[i] == NULL && i != 3)
            return ts_error_nomem(err);
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c, BINDS_SQL, TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    int64_t done = ts_row_i64(res, 0, 0);
    PQclear(res);
    *refused = nb - (size_t)done;
    return TS_OK;
}

/*
 * Every stop of the cycle in one statement (issue 15, as the binds), in
 * three kinds, each checked as its own statement checked it:
 * - evict: a running (or scheduled) job stops (evicting);
 * - suspend: a running job that accepts swap is suspended in place
 *   (suspending, holding what it holds on its GPUs of the node's swap until
 *   its agent says what it moved); one that does not, or that its agent
 *   has not started yet, is simply evicted. The swap it needs must still
 *   be free: the snapshot gave the core the same figures, so the check
 *   refuses only when a report moved them since. The suspensions before it
 *   in the cycle on the same node count as taken (grow: what they add to
 *   the swap the node's jobs hold), as when each statement saw the ones
 *   before; a stop earlier in the cycle that frees swap does not count
 *   until the next cycle (a suspension refused for that is decided again);
 * - end: a suspended job that is pending again (not held) ends its
 *   suspension: its processes are killed (evicting, with no GPUs) and it is
 *   queued again.
 * A stop whose job moved since the snapshot (ended, cancelled, held) is left
 * out and the others are written: a stop only frees room, and no bind of
 * this cycle counts on it (safe_decisions in schedloop.c holds those
 * back). Events are written in the decisions' order.
 */
#define STOPS_SQL                                                                                  \
    "WITH b AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])"                        \
    "   WITH ORDINALITY AS b(id, kind, msg, ord)),"                                                \
    " sw AS (SELECT b.id, b.ord, j.node_id, CASE WHEN j.state = 'running' AND j.swap"              \
    "   THEN " TS_SQL_JOB_HELD_BYTES " - j.swapped_bytes ELSE 0 END AS grow"                       \
    "   FROM b JOIN job j ON j.id = b.id WHERE b.kind = 'suspend'),"                               \
    " swb AS (SELECT id, coalesce(sum(grow) OVER (PARTITION BY node_id ORDER BY ord"               \
    "   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)::bigint AS before FROM sw),"         \
    " upd AS (UPDATE job j SET"                                                                    \
    "   state = CASE WHEN b.kind = 'suspend' AND j.state = 'running' AND j.swap"                   \
    "     THEN 'suspending' ELSE 'evicting' END,"                                                  \
    "   stop_reason = CASE WHEN b.kind = 'suspend' AND j.state = 'running' AND j.swap"             \
    "     THEN 'suspended' ELSE 'evicted' END,"                                                    \
    "   suspended_bytes = CASE WHEN b.kind <> 'suspend' THEN j.suspended_bytes"                    \
    "     WHEN j.state = 'running' AND j.swap THEN " TS_SQL_JOB_HELD_BYTES " ELSE 0 END,"          \
    "   suspend_held = CASE WHEN b.kind = 'suspend' THEN false ELSE j.suspend_held END,"           \
    "   updated_at = now()"                                                                        \
    "   FROM b LEFT JOIN swb ON swb.id = b.id WHERE j.id = b.id AND CASE b.kind"                   \
    "   WHEN 'end' THEN j.state = 'suspended' AND NOT j.suspend_held"                              \
    "   WHEN 'evict' THEN j.state IN ('scheduled', 'running')"                                     \
    "   ELSE j.state IN ('scheduled', 'running')"                                                  \
    "   AND NOT (j.state = 'running' AND j.swap AND " TS_SQL_JOB_HELD_BYTES                        \
    "     > (SELECT n.swap_bytes FROM node n WHERE n.id = j.node_id)"                              \
    "     - " TS_SQL_NODE_SWAP_USED_BY_OTHERS " - swb.before) END"                                 \
    "   RETURNING j.id, j.state, b.kind, b.msg, b.ord),"                                           \
    " ev AS (INSERT INTO job_event (job_id, type, message)"                                        \
    "   SELECT id, state, CASE WHEN kind = 'end' THEN 'its suspension ends: ' || msg"              \
    "   ELSE msg END FROM upd ORDER BY ord)"                                                       \
    " SELECT count(*) FROM upd"

/* The stops among ap's decisions in one statement; *refused: how many were
 * not written because their job moved. */
static enum ts_err write_stops(struct ts_dbconn *c, const struct ts_sched_apply *ap,
                               struct ts_arena *a, size_t *refused, struct ts_error *err)
{
    size_t n = 0, nsusp = 0;
    int64_t *ids = ts_arena_alloc(a, sizeof(int64_t) * (ap->ndecisions + 1));
    int64_t *susp = ts_arena_alloc(a, sizeof(int64_t) * (ap->ndecisions + 1));
    const char **kinds = ts_arena_alloc(a, sizeof(char *) * (ap->ndecisions + 1));
    const char **msgs = ts_arena_alloc(a, sizeof(char *) * (ap->ndecisions + 1));
    if (ids == NULL || susp == NULL || kinds == NULL || msgs == NULL)
        return ts_error_nomem(err);
    for (size_t i = 0; i < ap->ndecisions; i++) {
        const struct ts_sched_decision *d = ap->decisions[i];
        if (d->action == TS_SCHED_BIND)
            continue;
        ids[n] = d->job_id;
        msgs[n] = d->message;
        kinds[n++] = !d->job_was_running             ? "end"
                     : d->action == TS_SCHED_SUSPEND ? "suspend"
                                                     : "evict";
        if (d->job_was_running && d->action == TS_SCHED_SUSPEND)
            susp[nsusp++] = d->job_id;
    }
    *refused = 0;
    if (n == 0)
        return TS_OK;
    PGresult *res = NULL;
    enum ts_err e = TS_OK;
    if (nsusp > 0) {
        /* The nodes' rows are locked before their swap is counted, as a
         * suspend on request does, so that the two cannot both take the
         * last of it. */
        const char *lp[] = {ts_row_id_array(a, susp, nsusp)};
        if (lp[0] == NULL)
            return ts_error_nomem(err);
        e = ts_db_exec(c,
                       "SELECT 1 FROM node WHERE id IN (SELECT node_id FROM job"
                       " WHERE id = ANY($1::bigint[])) ORDER BY id FOR UPDATE",
                       TS_ARRAY_LEN(lp), lp, &res, err);
        PQclear(res);
        if (e != TS_OK)
            return e;
    }
    const char *p[] = {ts_row_id_array(a, ids, n), ts_row_text_array(a, kinds, n),
                       ts_row_text_array(a, msgs, n)};
    if (p[0] == NULL || p[1] == NULL || p[2] == NULL)
        return ts_error_nomem(err);
    e = ts_db_exec(c, STOPS_SQL, TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    int64_t done = ts_row_i64(res, 0, 0);
    PQclear(res);
    *refused = n - (size_t)done;
    return TS_OK;
}

/* The reason is the one the snapshot read for that job: nothing to write. */
static bool reason_stored(const struct ts_sched_rows *rows, const struct ts_sched_snapshot *snap,
                          const struct ts_sched_pending_reason *r)
{
    if (rows->pending_code == NULL || r->job < 0 || (size_t)r->job >= snap->npending ||
        snap->pending[r->job].id != r->job_id)
        return false;
    const char *code = rows->pending_code[r->job], *msg = rows->pending_message[r->job];
    return code != NULL && msg != NULL && strcmp(code, r->code) == 0 &&
           strcmp(msg, r->message) == 0 && rows->pending_position[r->job] == r->queue_position;
}

static enum ts_err write_reasons(struct ts_dbconn *c, const struct ts_sched_snapshot *snap,
                                 const struct ts_sched_rows *rows, const struct ts_sched_apply *ap,
                                 struct ts_arena *a, struct ts_error *err)
{
    size_t n = 0;
    int64_t *ids = ts_arena_alloc(a, sizeof(int64_t) * (ap->nreasons + 1));
    int64_t *pos = ts_arena_alloc(a, sizeof(int64_t) * (ap->nreasons + 1));
    const char **codes = ts_arena_alloc(a, sizeof(char *) * (ap->nreasons + 1));
    const char **msgs = ts_arena_alloc(a, sizeof(char *) * (ap->nreasons + 1));
    if (ids == NULL || pos == NULL || codes == NULL || msgs == NULL)
        return ts_error_nomem(err);
    for (size_t i = 0; i < ap->nreasons; i++) {
        if (reason_stored(rows, snap, &ap->reasons[i]))
            continue;
        ids[n] = ap->reasons[i].job_id;
        pos[n] = ap->reasons[i].queue_position;
        codes[n] = ap->reasons[i].code;
        msgs[n] = ap->reasons[i].message;
        n++;
    }
    if (n == 0)
        return TS_OK;
    const char *p[] = {ts_row_id_array(a, ids, n), ts_row_id_array(a, pos, n),
                       ts_row_text_array(a, codes, n), ts_row_text_array(a, msgs, n)};
    if (p[0] == NULL || p[1] == NULL || p[2] == NULL || p[3] == NULL)
        return ts_error_nomem(err);
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(
        c,
        "UPDATE job SET reason_code = u.code, reason_message = u.msg, queue_position = u.pos"
        " FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS u(id, pos, code, msg)"
        " WHERE job.id = u.id AND (job.state = 'pending'"
        "   OR (job.state = 'suspended' AND NOT job.suspend_held))"
        " AND (job.reason_code, job.reason_message, job.queue_position)"
        "   IS DISTINCT FROM (u.code, u.msg, u.pos)",
        TS_ARRAY_LEN(p), p, &res, err);
    PQclear(res);
    return e;
}

static enum ts_err write_shares(struct ts_dbconn *c, const struct ts_sched_rows *rows,
                                const struct ts_sched_result *r, struct ts_arena *a,
                                struct ts_error *err)
{
    size_t n = 0;
    char **id = ts_arena_alloc(a, sizeof(char *) * (r->nshares + 1));
    char **des = ts_arena_alloc(a, sizeof(char *) * (r->nshares + 1));
    char **fair = ts_arena_alloc(a, sizeof(char *) * (r->nshares + 1));
    if (id == NULL || des == NULL || fair == NULL)
        return ts_error_nomem(err);
    for (size_t i = 0; i < r->nshares; i++) {
        const struct ts_sched_share *sh = &r->shares[i];
        if (fabs(rows->project_shares[2 * i] - sh->deserved) < 1e-9 &&
            fabs(rows->project_shares[2 * i + 1] - sh->fair_share) < 1e-9)
            continue;
        id[n] = P("%lld", (long long)sh->project_id);
        des[n] = P("%.17g", sh->deserved);
        fair[n] = P("%.17g", sh->fair_share);
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        const char *p[] = {id[i], des[i], fair[i]};
        PGresult *res = NULL;
        enum ts_err e = ts_db_exec(c,
                                   "UPDATE project SET deserved_gpus = $2, fair_share_gpus = $3"
                                   " WHERE id = $1",
                                   TS_ARRAY_LEN(p), p, &res, err);
        PQclear(res);
        if (e != TS_OK)
            return e;
    }
    return TS_OK;
}

enum ts_err ts_store_sched_apply(struct ts_dbconn *c, const struct ts_sched_snapshot *s,
                                 const struct ts_sched_rows *rows, const struct ts_sched_apply *ap,
                                 struct ts_arena *a, struct ts_sched_refused *refused,
                                 struct ts_error *err)
{
    struct ts_sched_refused nrefused = {0};
    enum ts_err e = ts_db_begin(c, err);
    /* the stops first, as before the binds they make room for (a bind
       waiting for a stop is written by a later cycle) */
    if (e == TS_OK)
        e = write_stops(c, ap, a, &nrefused.stops, err);
    if (e == TS_OK)
        e = write_binds(c, s, rows, ap, a, &nrefused.binds, err);
    if (e == TS_OK)
        e = write_reasons(c, s, rows, ap, a, err);
    if (e == TS_OK && ap->result != NULL)
        e = write_shares(c, rows, ap->result, a, err);
    if (e == TS_OK) /* last: it holds project rows until the commit */
        e = ts_store_pending_fold(c, err);
    if (e == TS_OK)
        e = ts_db_commit(c, err);
    else
        ts_db_rollback(c);
    if (refused != NULL)
        *refused = e == TS_OK ? nrefused : (struct ts_sched_refused){0};
    return e;
}
