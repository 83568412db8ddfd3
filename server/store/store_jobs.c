/*
 * store_jobs.c - job submission (with idempotency keys), reads, listing with
 * cursors, cancellation, and the job's events.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "api/log.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

/* Columns read by read_job, from job j, project p and node n. */
/* clang-format off */
#define JOB_COLS                                                                                   \
    "j.id, j.name, p.name, j.kind, j.priority, j.preemptible, j.command::text,"                    \
    " j.env::text, j.working_dir, j.gpu_kind, j.gpu_count, j.gpu_portion,"                         \
    " j.gpu_portion_limit, j.gpu_memory_bytes, j.gpu_memory_limit_bytes,"                          \
    " j.gpu_devices, j.cpu, j.memory_bytes, j.gpu_model::text, j.node_selector::text,"             \
    " j.max_runtime_seconds, j.state, n.name, j.exit_code, j.reason_code,"                         \
    " j.reason_message, j.queue_position, j.resume_count, "                                        \
    TS_SQL_US("j.created_at") ", " TS_SQL_US("j.updated_at") ", "                                  \
    TS_SQL_US("j.started_at") ", " TS_SQL_US("j.finished_at") ", j.project_id,"                    \
    " j.attempt, j.grace_seconds, j.checkpoint_dir, j.allocated_gpus, j.gpu_utilization,"          \
    " j.gpu_memory_used_bytes, " TS_SQL_US("j.last_active_at") ","                                 \
    " (SELECT string_agg(g.idx || ':' || jg.memory_bytes || ':'"                                    \
    "   || coalesce(jg.physical_idx::text, ''), ',' ORDER BY g.idx)"                               \
    "   FROM job_gpu jg JOIN gpu g ON g.id = jg.gpu_id WHERE jg.job_id = j.id),"                   \
    " p.deserved_gpus, p.fair_share_gpus, j.stop_reason, j.swap, j.suspended_bytes,"              \
    " j.suspend_held, j.swapped_bytes, j.idle_swap_after_seconds"
/* clang-format on */

#define JOB_FROM " JOIN project p ON p.id = j.project_id LEFT JOIN node n ON n.id = j.node_id"

static const char *const gpu_kinds[] = {"none", "count", "portion", "memory"};

/* "0:1024:1,3:2048:": GPU index, bytes packed there and the physical GPU
 * its agent reported (empty: not reported). */
static void read_alloc(const char *text, struct ts_arena *a, struct ts_job *j)
{
    if (text == NULL || *text == '\0')
        return;
    size_t n = 1;
    for (const char *p = text; *p; p++)
        n += *p == ',';
    struct ts_job_slot *v = ts_arena_alloc(a, n * sizeof(*v));
    if (v == NULL)
        return;
    const char *p = text;
    for (size_t i = 0; i < n; i++) {
        char *end;
        v[i].index = (int)strtol(p, &end, 10);
        v[i].memory_bytes = strtoll(*end == ':' ? end + 1 : end, &end, 10);
        v[i].physical_index = -1;
        if (*end == ':' && end[1] >= '0' && end[1] <= '9')
            v[i].physical_index = (int)strtol(end + 1, &end, 10);
        else if (*end == ':')
            end++;
        p = *end == ',' ? end + 1 : end;
    }
    j->slots = v;
    j->nslots = n;
}

static void read_job(const PGresult *res, int row, struct ts_arena *a, struct ts_job *j)
{
    memset(j, 0, sizeof(*j));
    struct ts_job_spec *s = &j->spec;
    j->id = ts_row_i64(res, row, 0);
    ts_row_copy(res, row, 1, s->name, sizeof(s->name));
    ts_row_copy(res, row, 2, s->project, sizeof(s->project));
    ts_job_kind_parse(PQgetvalue(res, row, 3), &s->kind);
    s->priority = (int)ts_row_i64(res, row, 4);
    s->preemptible = ts_row_bool(res, row, 5);
    s->command = ts_row_text(res, row, 6, a);
    s->env = ts_row_text(res, row, 7, a);
    s->working_dir = ts_row_text(res, row, 8, a);
    const char *gk = PQgetvalue(res, row, 9);
    for (int k = 0; k < 4; k++)
        if (strcmp(gk, gpu_kinds[k]) == 0)
            s->gpu.kind = (enum ts_gpu_kind)k;
    s->gpu.count = (int)ts_row_i64(res, row, 10);
    s->gpu.portion = ts_row_double(res, row, 11);
    s->gpu.portion_limit = ts_row_double(res, row, 12);
    s->gpu.memory_bytes = ts_row_i64(res, row, 13);
    s->gpu.memory_limit_bytes = ts_row_i64(res, row, 14);
    s->gpu.devices = (int)ts_row_i64(res, row, 15);
    s->cpu = ts_row_double(res, row, 16);
    s->memory_bytes = ts_row_i64(res, row, 17);
    s->gpu_model = ts_row_text(res, row, 18, a);
    s->node_selector = ts_row_text(res, row, 19, a);
    s->max_runtime_seconds = ts_row_i64(res, row, 20);
    ts_job_state_parse(PQgetvalue(res, row, 21), &j->state);
    j->node = ts_row_text(res, row, 22, a);
    j->has_exit_code = !ts_row_null(res, row, 23);
    j->exit_code = (int)ts_row_i64(res, row, 23);
    j->reason_code = ts_row_text(res, row, 24, a);
    j->reason_message = ts_row_text(res, row, 25, a);
    j->queue_position = ts_row_i64(res, row, 26);
    j->resume_count = (int)ts_row_i64(res, row, 27);
    j->created_at_us = ts_row_i64(res, row, 28);
    j->updated_at_us = ts_row_i64(res, row, 29);
    j->started_at_us = ts_row_i64(res, row, 30);
    j->finished_at_us = ts_row_i64(res, row, 31);
    j->attempt = (int)ts_row_i64(res, row, 33);
    s->grace_seconds = (int)ts_row_i64(res, row, 34);
    j->checkpoint_dir = ts_row_text(res, row, 35, a);
    j->allocated_gpus = ts_row_double(res, row, 36);
    j->gpu_utilization = ts_row_double(res, row, 37);
    j->gpu_memory_used_bytes = ts_row_i64(res, row, 38);
    j->last_active_at_us = ts_row_i64(res, row, 39);
    read_alloc(ts_row_null(res, row, 40) ? NULL : PQgetvalue(res, row, 40), a, j);
    j->project_deserved_gpus = ts_row_double(res, row, 41);
    j->project_fair_share_gpus = ts_row_double(res, row, 42);
    j->stop_reason = ts_row_text(res, row, 43, a);
    s->swap = ts_row_bool(res, row, 44);
    j->suspended_bytes = ts_row_i64(res, row, 45);
    j->suspend_held = ts_row_bool(res, row, 46);
    j->swapped_bytes = ts_row_i64(res, row, 47);
    s->idle_swap_after_seconds = ts_row_i64(res, row, 48);
    s->has_idle_swap_after = true;
}

/* The project's pending jobs as kept (migrations/0007): pending_jobs plus its
 * deltas not yet folded. */
#define PENDING_SQL(p)                                                                             \
    p ".pending_jobs + coalesce((SELECT sum(d.delta) FROM project_pending_delta d"                 \
      " WHERE d.project_id = " p ".id), 0)"

/* A submission's statement: `p`, a CTE naming the project (id) if the
 * caller may use it and it has room, and its delta rows not yet folded
 * (deltas); the job, its event and its idempotency key inserted. The insert
 * trigger adds the job to the count (a delta row). No row: an unknown
 * project, one the caller may not use, or no room. The job's columns, then
 * deltas (column DELTAS_COL). */
#define SUBMIT_SQL(p)                                                                              \
    "WITH p AS (" p "),"                                                                           \
    " j AS (INSERT INTO job (project_id, name, kind, priority, preemptible, command, env,"         \
    "   working_dir, gpu_kind, gpu_count, gpu_portion, gpu_portion_limit, gpu_memory_bytes,"       \
    "   gpu_memory_limit_bytes, gpu_devices, requested_gpus, cpu, memory_bytes, gpu_model,"        \
    "   node_selector, max_runtime_seconds, submitted_by, reason_code, reason_message,"            \
    "   grace_seconds, swap, idle_swap_after_seconds)"                                             \
    "   SELECT p.id, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,"      \
    "   $18, $19, $20, $21, $22, 'not_yet_scheduled', 'waiting for the scheduler to consider it'," \
    "   $27, $28, $29 FROM p RETURNING *),"                                                        \
    " e AS (INSERT INTO job_event (job_id, type, message) SELECT id, 'submitted', $23 FROM j),"    \
    " k AS (INSERT INTO idempotency_key (token_id, key, request_sha256, job_id)"                   \
    "   SELECT $22, $24, $25, id FROM j WHERE $24::text IS NOT NULL)"                              \
    " SELECT " JOB_COLS ", (SELECT deltas FROM p) FROM j" JOB_FROM
#define DELTAS_COL 49

/* tessera_submit_room (migrations/0011_concurrent_submit.sql) with $30
 * false: far from max_pending, the row shared (FOR KEY SHARE), then
 * counted; room while the count plus max_connections, more submissions
 * than can be in flight at once, is within max_pending. Such submissions
 * run side by side. With $30 true: near it, the row alone (FOR UPDATE),
 * which waits until the submissions sharing it have committed and keeps
 * new ones out, then counted; room while the count is below max_pending.
 * Either way the count's snapshot is taken after the lock. */
static const char submit_sql[] = SUBMIT_SQL(
    "SELECT r.project_id AS id, r.deltas FROM tessera_submit_room($1, $26::bigint[], $30) r");

/* A submission that counted more delta rows than this folds them. */
#define FOLD_AFTER 256

/* The key's row: *found, whether it matches, its job; deletes it when
 * older than ttl (then *found is false). */
static enum ts_err lookup_key(struct ts_dbconn *c, const struct ts_job_submit *s, bool *found,
                              bool *same, int64_t *job_id, struct ts_error *err)
{
    char tok[24], ttl[24];
    snprintf(tok, sizeof(tok), "%lld", (long long)s->token_id);
    snprintf(ttl, sizeof(ttl), "%lld", (long long)s->idempotency_ttl);
    const char *params[] = {tok, s->idempotency_key, ttl};
    PGresult *res = NULL;
    enum ts_err e =
        ts_db_exec(c,
                   "WITH old AS (DELETE FROM idempotency_key WHERE token_id = $1 AND key = $2"
                   "   AND created_at < now() - make_interval(secs => $3::bigint) RETURNING 1)"
                   " SELECT request_sha256, job_id, (SELECT count(*) FROM old) FROM idempotency_key"
                   " WHERE token_id = $1 AND key = $2",
                   TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    *found = PQntuples(res) == 1 && ts_row_i64(res, 0, 2) == 0;
    if (*found) {
        *same = strcmp(PQgetvalue(res, 0, 0), s->request_sha256) == 0;
        *job_id = ts_row_i64(res, 0, 1);
    }
    PQclear(res);
    return TS_OK;
}

/* The submission inserted no row: the project is unknown (422), not the
 * caller's (403), or at its max_pending (429), unless the request repeats
 * one that made a job (its Idempotency-Key): then that job. */
static enum ts_err no_row(struct ts_dbconn *c, const struct ts_job_submit *s, struct ts_arena *a,
                          struct ts_job *out, bool *replayed, struct ts_error *err)
{
    const char *project = s->spec->project;
    const char *params[] = {project};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c,
                               "SELECT p.id, " PENDING_SQL("p") ", p.max_pending FROM project p"
                                                                " WHERE p.name = $1",
                               TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return ts_error_field(err, TS_ERR_UNKNOWN_REFERENCE, "project",
                              "project \"%s\" does not exist", project);
    }
    int64_t id = ts_row_i64(res, 0, 0), pending = ts_row_i64(res, 0, 1);
    int64_t max = ts_row_i64(res, 0, 2);
    PQclear(res);
    bool allowed = s->allowed_projects == NULL;
    for (size_t i = 0; !allowed && i < s->nallowed; i++)
        allowed = s->allowed_projects[i] == id;
    if (!allowed)
        return ts_error_field(err, TS_ERR_FORBIDDEN, "project", "no access to project \"%s\"",
                              project);
    if (s->idempotency_key != NULL) {
        bool found = false, same = false;
        int64_t job_id = 0;
        e = lookup_key(c, s, &found, &same, &job_id, err);
        if (e != TS_OK)
            return e;
        if (found && same) {
            *replayed = true;
            return ts_store_job_get(c, job_id, a, out, NULL, err);
        }
    }
    ts_error_field(err, TS_ERR_TOO_MANY_PENDING, "project",
                   "project \"%s\" is at its limit of pending jobs: %lld of %lld", project,
                   (long long)pending, (long long)max);
    ts_error_hint(err, "submit again once some of its jobs have started or ended, or cancel some; "
                       "an admin may raise its max_pending");
    return TS_ERR_TOO_MANY_PENDING;
}

/* This process's submissions' wake-ups (wake_scheduler): how many have
 * committed, and, under wake_mu, how many had committed before the last
 * NOTIFY this process sent was read. */
static pthread_mutex_t wake_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint_fast64_t wake_committed;
static uint64_t wake_covered;

/* Wake the scheduler loop (of any replica) for a job just committed. Its
 * own transaction, committed without waiting for the WAL flush
 * (set_config(..., true) lasts through the commit): a NOTIFY holds
 * PostgreSQL's notify lock until its transaction's commit is done, so one
 * in the submission's transaction made every submission's commit, flush
 * included, wait for the one before (migrations/0011).
 *
 * Concurrent submissions share one: the NOTIFY is sent under wake_mu, and
 * a submission that finds one was sent after its commit (wake_covered, the
 * submissions counted before it was sent, reaches its own number) sends
 * none. That NOTIFY committed after this job did, so the cycle it wakes
 * reads the job. Those that wait meanwhile wait for one round trip, as if
 * they sent their own. 8 clients' 400 submissions sent 227-243
 * (tests/integration/test_submit_concurrent.c; 400 before), and each
 * NOTIFY also wakes the LISTEN session of every replica and its notify
 * thread. A lost wake-up (the NOTIFY failed) is no lost job: the job is
 * committed, and the next wake-up reads it. */
static void wake_scheduler(struct ts_dbconn *c)
{
    uint64_t mine = atomic_fetch_add(&wake_committed, 1) + 1;
    pthread_mutex_lock(&wake_mu);
    if (wake_covered < mine) {
        uint64_t upto = atomic_load(&wake_committed);
        PGresult *res = NULL;
        struct ts_error err;
        if (ts_db_exec(c,
                       "SELECT set_config('synchronous_commit', 'off', true),"
                       " pg_notify('tessera_sched', '')",
                       0, NULL, &res, &err) == TS_OK)
            wake_covered = upto;
        else
            ts_log_warn("could not wake the scheduler error=\"%s\"", err.message);
        PQclear(res);
    }
    pthread_mutex_unlock(&wake_mu);
}

/* One try: far from the limit, else near it. *inserted: a job was made
 * (out), else the project is unknown, not the caller's, or full. params
 * has room for $30. */
static enum ts_err submit_once(struct ts_dbconn *c, const char **params, struct ts_arena *a,
                               struct ts_job *out, bool *inserted, struct ts_error *err)
{
    for (int alone = 0; alone < 2; alone++) {
        PGresult *res = NULL;
        params[29] = alone ? "true" : "false";
        enum ts_err e = ts_db_exec(c, submit_sql, 30, params, &res, err);
        if (e != TS_OK)
            return e;
        if (PQntuples(res) == 1) {
            read_job(res, 0, a, out);
            int64_t project_id = ts_row_i64(res, 0, 32);
            int64_t deltas = ts_row_i64(res, 0, DELTAS_COL);
            PQclear(res);
            *inserted = true;
            /* after the commit; the job is made whatever these do */
            wake_scheduler(c);
            struct ts_error ferr;
            if (deltas > FOLD_AFTER && ts_store_pending_fold_project(c, project_id, &ferr) != TS_OK)
                ts_log_warn("could not fold pending counts project_id=%lld error=\"%s\"",
                            (long long)project_id, ferr.message);
            return TS_OK;
        }
        PQclear(res);
    }
    return TS_OK;
}

enum ts_err ts_store_job_submit(struct ts_dbconn *c, const struct ts_job_submit *s,
                                struct ts_arena *a, struct ts_job *out, bool *replayed,
                                struct ts_error *err)
{
    const struct ts_job_spec *sp = s->spec;
    char prio[16], count[16], portion[32], plimit[32], mem[24], mlimit[24], devices[16];
    char req[32], cpu[32], hostmem[24], runtime[24], tok[24], grace[16], idle[24];
    char *allowed = NULL;
    if (s->allowed_projects != NULL) {
        allowed = ts_row_id_array(a, s->allowed_projects, s->nallowed);
        if (allowed == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    snprintf(prio, sizeof(prio), "%d", sp->priority);
    snprintf(count, sizeof(count), "%d", sp->gpu.count);
    snprintf(portion, sizeof(portion), "%.17g", sp->gpu.portion);
    snprintf(plimit, sizeof(plimit), "%.17g", sp->gpu.portion_limit);
    snprintf(mem, sizeof(mem), "%lld", (long long)sp->gpu.memory_bytes);
    snprintf(mlimit, sizeof(mlimit), "%lld", (long long)sp->gpu.memory_limit_bytes);
    snprintf(devices, sizeof(devices), "%d", sp->gpu.devices);
    snprintf(req, sizeof(req), "%.17g", ts_gpu_request_gpus(&sp->gpu));
    snprintf(cpu, sizeof(cpu), "%.17g", sp->cpu);
    snprintf(hostmem, sizeof(hostmem), "%lld", (long long)sp->memory_bytes);
    snprintf(runtime, sizeof(runtime), "%lld", (long long)sp->max_runtime_seconds);
    snprintf(tok, sizeof(tok), "%lld", (long long)s->token_id);
    snprintf(grace, sizeof(grace), "%d", sp->grace_seconds);
    snprintf(idle, sizeof(idle), "%lld", (long long)sp->idle_swap_after_seconds);
    char *message = ts_arena_printf(a, "submitted to project \"%s\"", sp->project);
    const char *params[30] = {sp->project,
                              sp->name,
                              ts_job_kind_name(sp->kind),
                              prio,
                              sp->preemptible ? "true" : "false",
                              sp->command,
                              sp->env ? sp->env : "{}",
                              sp->working_dir,
                              gpu_kinds[sp->gpu.kind],
                              count,
                              portion,
                              plimit,
                              mem,
                              mlimit,
                              devices,
                              req,
                              cpu,
                              hostmem,
                              sp->gpu_model ? sp->gpu_model : "[]",
                              sp->node_selector ? sp->node_selector : "{}",
                              runtime,
                              s->token_id > 0 ? tok : NULL,
                              message,
                              s->idempotency_key,
                              s->request_sha256,
                              allowed,
                              grace,
                              sp->swap ? "true" : "false",
                              idle,
                              NULL};
    *replayed = false;
    for (int attempt = 0; attempt < 2; attempt++) {
        struct ts_error sub;
        bool inserted = false;
        enum ts_err e = submit_once(c, params, a, out, &inserted, &sub);
        if (e == TS_OK && inserted)
            return TS_OK;
        if (e == TS_OK)
            return no_row(c, s, a, out, replayed, err);
        if (e != TS_ERR_ALREADY_EXISTS) {
            if (err)
                *err = sub;
            return e;
        }
        if (s->idempotency_key == NULL)
            break;
        bool found = false, same = false;
        int64_t job_id = 0;
        e = lookup_key(c, s, &found, &same, &job_id, err);
        if (e != TS_OK)
            return e;
        if (found && !same) {
            ts_error_set(err, TS_ERR_IDEMPOTENCY_MISMATCH,
                         "Idempotency-Key \"%s\" was used with a different request",
                         s->idempotency_key);
            ts_error_hint(err, "use a new key for a new job");
            return TS_ERR_IDEMPOTENCY_MISMATCH;
        }
        if (found) {
            *replayed = true;
            return ts_store_job_get(c, job_id, a, out, NULL, err);
        }
        /* an expired key was removed, or the name itself is taken: retry once */
    }
    ts_error_field(err, TS_ERR_ALREADY_EXISTS, "name",
                   "job \"%s\" already exists in project \"%s\"", sp->name, sp->project);
    ts_error_hint(err, "job names are unique within a project; choose another name");
    return TS_ERR_ALREADY_EXISTS;
}

enum ts_err ts_store_job_get(struct ts_dbconn *c, int64_t id, struct ts_arena *a,
                             struct ts_job *out, int64_t *project_id, struct ts_error *err)
{
    char idbuf[24];
    snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
    const char *params[] = {idbuf};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c, "SELECT " JOB_COLS " FROM job j" JOB_FROM " WHERE j.id = $1",
                               TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "job %lld does not exist", (long long)id);
    }
    read_job(res, 0, a, out);
    if (project_id)
        *project_id = ts_row_i64(res, 0, 32);
    PQclear(res);
    return TS_OK;
}

/* The first `rows` rows of res as jobs (arena); clears res. */
static enum ts_err read_jobs(PGresult *res, int rows, struct ts_arena *a, struct ts_job **out,
                             size_t *n, struct ts_error *err)
{
    struct ts_job *v = ts_arena_alloc(a, sizeof(*v) * (size_t)(rows ? rows : 1));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rows; i++)
        read_job(res, i, a, &v[i]);
    *out = v;
    *n = (size_t)rows;
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_job_list(struct ts_dbconn *c, const struct ts_job_filter *f,
                              struct ts_arena *a, struct ts_job **out, size_t *n, bool *more,
                              struct ts_error *err)
{
    char *ids = NULL, *states = NULL;
    if (f->project_ids != NULL) {
        ids = ts_row_id_array(a, f->project_ids, f->nproject_ids);
        if (ids == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    if (f->nstates > 0) {
        states = ts_arena_alloc(a, 16 * 12);
        if (states == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        size_t len = 0;
        states[len++] = '{';
        for (int i = 0; i < f->nstates; i++)
            len += (size_t)snprintf(states + len, 16 * 12 - len, "%s%s", i ? "," : "",
                                    ts_job_state_name(f->states[i]));
        states[len++] = '}';
    }
    char after[24], limit[16];
    snprintf(after, sizeof(after), "%lld", (long long)f->after_id);
    snprintf(limit, sizeof(limit), "%d", f->limit + 1);
    const char *params[] = {
        ids,     f->project, states, f->has_kind ? ts_job_kind_name(f->kind) : NULL,
        f->node, after,      limit};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c,
                               "SELECT " JOB_COLS " FROM job j" JOB_FROM
                               " WHERE ($1::bigint[] IS NULL OR j.project_id = ANY($1::bigint[]))"
                               " AND ($2::text IS NULL OR p.name = $2)"
                               " AND ($3::text[] IS NULL OR j.state = ANY($3::text[]))"
                               " AND ($4::text IS NULL OR j.kind = $4)"
                               " AND ($5::text IS NULL OR n.name = $5)"
                               " AND j.id > $6 ORDER BY j.id LIMIT $7",
                               TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    *more = rows > f->limit;
    return read_jobs(res, *more ? f->limit : rows, a, out, n, err);
}

enum ts_err ts_store_queue(struct ts_dbconn *c, const char *project, const int64_t *project_ids,
                           size_t nproject_ids, struct ts_arena *a, struct ts_job **out, size_t *n,
                           struct ts_error *err)
{
    char *ids = NULL;
    if (project_ids != NULL && (ids = ts_row_id_array(a, project_ids, nproject_ids)) == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    const char *params[] = {ids, project};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c,
                               "SELECT " JOB_COLS " FROM job j" JOB_FROM
                               " WHERE (j.state = 'pending' OR j.state = 'suspended')"
                               " AND ($1::bigint[] IS NULL OR j.project_id = ANY($1::bigint[]))"
                               " AND ($2::text IS NULL OR p.name = $2)"
                               " ORDER BY j.queue_position = 0, j.queue_position, j.created_at,"
                               " j.id LIMIT 10000",
                               TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    return read_jobs(res, PQntuples(res), a, out, n, err);
}

enum ts_err ts_store_job_cancel(struct ts_dbconn *c, int64_t id, const char *by, struct ts_arena *a,
                                struct ts_job *out, struct ts_error *err)
{
    char idbuf[24];
    snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
    const char *params[] = {idbuf, by};
    PGresult *res = NULL;
    enum ts_err e = TS_ERR_CONFLICT;
    /* one statement, so a deadlock with a report or a scheduler cycle (they
     * lock the same job and node rows) is simply tried again */
    for (int attempt = 0; e == TS_ERR_CONFLICT && attempt < 3; attempt++)
        e = ts_db_exec(
            c,
            "WITH cur AS (SELECT id, state FROM job WHERE id = $1 FOR UPDATE),"
            " upd AS (UPDATE job SET"
            "   state = CASE WHEN cur.state = 'pending' THEN 'cancelled'"
            "                ELSE 'cancelling' END,"
            "   finished_at = CASE WHEN cur.state = 'pending' THEN now() END,"
            "   reason_code = NULL, reason_message = NULL, queue_position = 0, updated_at = now()"
            "   FROM cur WHERE job.id = cur.id"
            "   AND cur.state IN ('pending', 'scheduled', 'running', 'evicting', 'suspending',"
            "   'suspended', 'resuming')"
            "   RETURNING job.id, job.state),"
            " ev AS (INSERT INTO job_event (job_id, type, message)"
            "   SELECT id, state, CASE WHEN state = 'cancelled' THEN 'cancelled by ' || $2"
            "     ELSE 'cancel requested by ' || $2 || '; stopping' END FROM upd)"
            " SELECT (SELECT state FROM cur)",
            TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    bool missing = ts_row_null(res, 0, 0);
    enum ts_job_state before = TS_JOB_PENDING;
    if (!missing)
        ts_job_state_parse(PQgetvalue(res, 0, 0), &before);
    PQclear(res);
    if (missing)
        return ts_error_set(err, TS_ERR_NOT_FOUND, "job %lld does not exist", (long long)id);
    if (before == TS_JOB_SUCCEEDED || before == TS_JOB_FAILED) {
        return ts_error_set(err, TS_ERR_CONFLICT, "job %lld already finished: %s", (long long)id,
                            ts_job_state_name(before));
    }
    return ts_store_job_get(c, id, a, out, NULL, err);
}

enum ts_err ts_store_job_events(struct ts_dbconn *c, int64_t id, struct ts_arena *a,
                                struct ts_job_event **out, size_t *n, struct ts_error *err)
{
    char idbuf[24];
    snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
    const char *params[] = {idbuf};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c,
                               "SELECT id, job_id, " TS_SQL_US(
                                   "at") ", type, message,"
                                         " coalesce(attempt, 0), coalesce(seq, 0) FROM job_event"
                                         " WHERE job_id = $1 ORDER BY id",
                               TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    struct ts_job_event *v = ts_arena_alloc(a, sizeof(*v) * (size_t)(rows ? rows : 1));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rows; i++) {
        v[i].id = ts_row_i64(res, i, 0);
        v[i].job_id = ts_row_i64(res, i, 1);
        v[i].at_us = ts_row_i64(res, i, 2);
        v[i].type = ts_row_text(res, i, 3, a);
        v[i].message = ts_row_text(res, i, 4, a);
        v[i].attempt = ts_row_i64(res, i, 5);
        v[i].seq = ts_row_i64(res, i, 6);
    }
    *out = v;
    *n = (size_t)rows;
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_idempotency_expire(struct ts_dbconn *c, int64_t ttl, int64_t *deleted,
                                        struct ts_error *err)
{
    char ttlbuf[24];
    snprintf(ttlbuf, sizeof(ttlbuf), "%lld", (long long)ttl);
    const char *params[] = {ttlbuf};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(
        c,
        "DELETE FROM idempotency_key WHERE created_at < now() - make_interval(secs => $1::bigint)",
        TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    if (deleted)
        *deleted = strtoll(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return TS_OK;
}
