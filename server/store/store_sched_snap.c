/*
 * store_sched_snap.c - the snapshot the scheduler core reads: departments,
 * projects, nodes, GPUs, every unfinished job and the GPUs they hold, read
 * in one REPEATABLE READ transaction so that every row comes from the same
 * moment.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/sched_cache.h"
#include "server/store/store.h"

/* ---- the snapshot ------------------------------------------------------------ */

static int find_id(const int64_t *ids, size_t n, int64_t id)
{
    size_t lo = 0, hi = n; /* ids ascending */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ids[lo] == id ? (int)lo : -1;
}

/* A JSON object of strings as labels (arena). */
static void parse_labels(const char *text, struct ts_arena *a, const struct ts_sched_label **out,
                         size_t *n)
{
    *out = NULL;
    *n = 0;
    json_t *o = text ? json_loads(text, 0, NULL) : NULL;
    if (!json_is_object(o) || json_object_size(o) == 0) {
        json_decref(o);
        return;
    }
    struct ts_sched_label *v = ts_arena_alloc(a, sizeof(*v) * json_object_size(o));
    const char *k;
    json_t *val;
    json_object_foreach(o, k, val) {
        if (v == NULL || !json_is_string(val))
            continue;
        v[*n].key = ts_arena_strdup(a, k);
        v[*n].value = ts_arena_strdup(a, json_string_value(val));
        (*n)++;
    }
    *out = v;
    json_decref(o);
}

static void parse_models(const char *text, struct ts_arena *a, const char *const **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    json_t *arr = text ? json_loads(text, 0, NULL) : NULL;
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        json_decref(arr);
        return;
    }
    const char **v = ts_arena_alloc(a, sizeof(*v) * json_array_size(arr));
    for (size_t i = 0; v != NULL && i < json_array_size(arr); i++)
        if (json_is_string(json_array_get(arr, i)))
            v[(*n)++] = ts_arena_strdup(a, json_string_value(json_array_get(arr, i)));
    *out = v;
    json_decref(arr);
}

static enum ts_err query(struct ts_dbconn *c, const char *sql, PGresult **res, struct ts_error *err)
{
    enum ts_err e = ts_db_exec(c, sql, 0, NULL, res, err);
    if (e != TS_OK)
        ts_db_rollback(c);
    return e;
}

static enum ts_err load_quota(struct ts_dbconn *c, struct ts_arena *a, struct ts_sched_rows *rows,
                              struct ts_sched_snapshot *s, struct ts_error *err)
{
    PGresult *res = NULL;
    enum ts_err e = query(c,
                          "SELECT id, name, quota_gpus, over_quota_weight, limit_gpus, priority"
                          " FROM department ORDER BY id",
                          &res, err);
    if (e != TS_OK)
        return e;
    size_t n = (size_t)PQntuples(res);
    struct ts_sched_department *d = ts_arena_alloc(a, sizeof(*d) * (n + 1));
    rows->department_ids = ts_arena_alloc(a, sizeof(int64_t) * (n + 1));
    if (d == NULL || rows->department_ids == NULL) {
        PQclear(res);
        return ts_error_nomem(err);
    }
    for (size_t i = 0; i < n; i++) {
        d[i] = (struct ts_sched_department){
            .id = ts_row_i64(res, (int)i, 0),
            .name = ts_row_text(res, (int)i, 1, a),
            .quota_gpus = ts_row_double(res, (int)i, 2),
            .over_quota_weight = ts_row_double(res, (int)i, 3),
            .has_limit = !ts_row_null(res, (int)i, 4),
            .limit_gpus = ts_row_double(res, (int)i, 4),
            .priority = (int)ts_row_i64(res, (int)i, 5),
        };
        rows->department_ids[i] = d[i].id;
    }
    PQclear(res);
    s->departments = d;
    s->ndepartments = n;
    e = query(c,
              "SELECT id, name, department_id, quota_gpus, over_quota_weight, limit_gpus, priority,"
              " deserved_gpus, fair_share_gpus FROM project ORDER BY id",
              &res, err);
    if (e != TS_OK)
        return e;
    n = (size_t)PQntuples(res);
    struct ts_sched_project *p = ts_arena_alloc(a, sizeof(*p) * (n + 1));
    rows->project_ids = ts_arena_alloc(a, sizeof(int64_t) * (n + 1));
    rows->project_shares = ts_arena_alloc(a, sizeof(double) * 2 * (n + 1));
    if (p == NULL || rows->project_ids == NULL || rows->project_shares == NULL) {
        PQclear(res);
        return ts_error_nomem(err);
    }
    for (size_t i = 0; i < n; i++) {
        p[i] = (struct ts_sched_project){
            .id = ts_row_i64(res, (int)i, 0),
            .name = ts_row_text(res, (int)i, 1, a),
            .department =
                find_id(rows->department_ids, s->ndepartments, ts_row_i64(res, (int)i, 2)),
            .quota_gpus = ts_row_double(res, (int)i, 3),
            .over_quota_weight = ts_row_double(res, (int)i, 4),
            .has_limit = !ts_row_null(res, (int)i, 5),
            .limit_gpus = ts_row_double(res, (int)i, 5),
            .priority = (int)ts_row_i64(res, (int)i, 6),
            .min_runtime_s = -1,
        };
        rows->project_ids[i] = p[i].id;
        rows->project_shares[2 * i] = ts_row_double(res, (int)i, 7);
        rows->project_shares[2 * i + 1] = ts_row_double(res, (int)i, 8);
    }
    PQclear(res);
    s->projects = p;
    s->nprojects = n;
    return TS_OK;
}

/* A cached row's columns (sched_cache.h), read as ts_row_* reads a
 * PGresult's: NULL is 0, false or "". */
static const char *jv(const struct ts_sjrow *j, int k)
{
    return j->v[k] != NULL ? j->v[k] : "";
}

static int64_t ji64(const struct ts_sjrow *j, int k)
{
    return strtoll(jv(j, k), NULL, 10);
}

static double jdouble(const struct ts_sjrow *j, int k)
{
    return strtod(jv(j, k), NULL);
}

static bool jbool(const struct ts_sjrow *j, int k)
{
    return jv(j, k)[0] == 't';
}

static const char *jtext(const struct ts_sjrow *j, int k, struct ts_arena *a)
{
    return j->v[k] != NULL ? ts_arena_strdup(a, j->v[k]) : NULL;
}

static enum ts_err load_nodes(struct ts_dbconn *c, const struct ts_sched_jobcache *jc,
                              struct ts_arena *a, struct ts_sched_rows *rows,
                              struct ts_sched_snapshot *s, struct ts_error *err)
{
    PGresult *res = NULL;
    enum ts_err e = query(c,
                          "SELECT id, name, state, cpu, memory_bytes, labels::text,"
                          " gpu_reserve_bytes, collision, swap_bytes FROM node ORDER BY id",
                          &res, err);
    if (e != TS_OK)
        return e;
    size_t n = (size_t)PQntuples(res);
    struct ts_sched_node *nd = ts_arena_alloc(a, sizeof(*nd) * (n + 1));
    rows->node_ids = ts_arena_alloc(a, sizeof(int64_t) * (n + 1));
    int64_t *reserve = ts_arena_alloc(a, sizeof(int64_t) * (n + 1));
    if (nd == NULL || rows->node_ids == NULL || reserve == NULL) {
        PQclear(res);
        return ts_error_nomem(err);
    }
    for (size_t i = 0; i < n; i++) {
        nd[i] = (struct ts_sched_node){
            .id = ts_row_i64(res, (int)i, 0),
            .name = ts_row_text(res, (int)i, 1, a),
            .ready = strcmp(PQgetvalue(res, (int)i, 2), "ready") == 0,
            .cpu = ts_row_double(res, (int)i, 3),
            .memory_bytes = ts_row_i64(res, (int)i, 4),
            /* less what its jobs hold of it: load_jobs */
            .swap_free_bytes = ts_row_i64(res, (int)i, 8),
            .swap_resolver = strcmp(PQgetvalue(res, (int)i, 7), "swap") == 0,
        };
        parse_labels(PQgetvalue(res, (int)i, 5), a, &nd[i].labels, &nd[i].nlabels);
        reserve[i] = ts_row_i64(res, (int)i, 6);
        rows->node_ids[i] = nd[i].id;
    }
    PQclear(res);
    s->nodes = nd;
    s->nnodes = n;
    const struct ts_sjrow *const *gpus = ts_store_sched_cache_gpus(jc, &n);
    struct ts_sched_gpu *g = ts_arena_alloc(a, sizeof(*g) * (n + 1));
    rows->gpu_ids = ts_arena_alloc(a, sizeof(int64_t) * (n + 1));
    if (g == NULL || rows->gpu_ids == NULL)
        return ts_error_nomem(err);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ts_sjrow *G = gpus[i];
        int node = find_id(rows->node_ids, s->nnodes, ji64(G, TS_SG_NODE));
        int64_t mem = ji64(G, TS_SG_MEMORY);
        if (node < 0 || reserve[node] >= mem)
            continue; /* a node deleted since (its GPUs go with it); the reserve: registration
                         checks it */
        g[kept] = (struct ts_sched_gpu){
            .node = node,
            .index = (int)ji64(G, TS_SG_INDEX),
            .model = jtext(G, TS_SG_MODEL, a),
            .memory_bytes = mem,
            .reserve_bytes = reserve[node],
        };
        rows->gpu_ids[kept++] = G->id;
    }
    s->gpus = g;
    s->ngpus = kept;
    return TS_OK;
}

static void read_request(const struct ts_sjrow *j, struct ts_arena *a, struct ts_sched_request *q)
{
    const int col = TS_SJ_GPU_KIND;
    const char *kind = jv(j, col);
    memset(q, 0, sizeof(*q));
    q->kind = strcmp(kind, "count") == 0     ? TS_SCHED_GPU_COUNT
              : strcmp(kind, "portion") == 0 ? TS_SCHED_GPU_PORTION
              : strcmp(kind, "memory") == 0  ? TS_SCHED_GPU_MEMORY
                                             : TS_SCHED_GPU_NONE;
    q->count = (int)ji64(j, col + 1);
    q->portion = jdouble(j, col + 2);
    q->portion_limit = jdouble(j, col + 3);
    q->memory_bytes = ji64(j, col + 4);
    q->memory_limit_bytes = ji64(j, col + 5);
    q->devices = (int)ji64(j, col + 6);
    q->cpu = jdouble(j, col + 7);
    q->host_memory_bytes = ji64(j, col + 8);
    parse_models(j->v[col + 9], a, &q->gpu_models, &q->ngpu_models);
    parse_labels(j->v[col + 10], a, &q->node_selector, &q->nnode_selector);
    q->refuses_swap = !jbool(j, TS_SJ_SWAP);
}

/* Every job's GPUs, by job id: read before the jobs, which need to know
 * which of them hold GPUs. `job` is column 0 parsed (ascending). */
struct slot_rows {
    PGresult *res;
    int64_t *job;
    size_t n;
};

static enum ts_err read_slots(struct ts_dbconn *c, struct ts_arena *a, struct slot_rows *sr,
                              struct ts_error *err)
{
    enum ts_err e = query(c,
                          "SELECT job_id, gpu_id, memory_bytes FROM job_gpu"
                          " ORDER BY job_id, gpu_id",
                          &sr->res, err);
    if (e != TS_OK)
        return e;
    sr->n = (size_t)PQntuples(sr->res);
    sr->job = ts_arena_alloc(a, sizeof(int64_t) * (sr->n + 1));
    if (sr->job == NULL) {
        PQclear(sr->res);
        sr->res = NULL;
        return ts_error_nomem(err);
    }
    for (size_t i = 0; i < sr->n; i++)
        sr->job[i] = ts_row_i64(sr->res, (int)i, 0);
    return TS_OK;
}

static enum ts_err load_slots(struct ts_arena *a, const struct ts_sched_rows *rows,
                              const struct slot_rows *sr, struct ts_sched_running *run, size_t nrun,
                              struct ts_error *err)
{
    struct ts_sched_slot *slots = ts_arena_alloc(a, sizeof(*slots) * (sr->n + 1));
    if (slots == NULL)
        return ts_error_nomem(err);
    size_t k = 0; /* running[] is by id too: walk both */
    for (size_t i = 0; i < sr->n; i++) {
        int64_t job = sr->job[i];
        while (k < nrun && run[k].id < job)
            k++;
        if (k == nrun || run[k].id != job)
            continue;
        int gpu = find_id(rows->gpu_ids, rows->ngpu_ids, ts_row_i64(sr->res, (int)i, 1));
        if (gpu < 0)
            continue;
        if (run[k].nslots == 0)
            run[k].slots = &slots[i];
        slots[i] =
            (struct ts_sched_slot){.gpu = gpu, .memory_bytes = ts_row_i64(sr->res, (int)i, 2)};
        run[k].nslots++;
    }
    return TS_OK;
}

/* "3,7" (GPU ids) as slots of the snapshot's GPUs on `node`; none when a
 * GPU is gone or moved (the job may then resume on any GPUs of its node). */
static void suspended_slots(const char *text, int node, const struct ts_sched_rows *rows,
                            const struct ts_sched_snapshot *s, struct ts_arena *a,
                            struct ts_sched_pending *p)
{
    if (text == NULL || *text == '\0')
        return;
    size_t n = 1;
    for (const char *q = text; *q; q++)
        n += *q == ',';
    struct ts_sched_slot *v = ts_arena_alloc(a, n * sizeof(*v));
    if (v == NULL || n > TS_SCHED_MAX_DEVICES)
        return;
    const char *q = text;
    for (size_t i = 0; i < n; i++) {
        char *end;
        int g = find_id(rows->gpu_ids, rows->ngpu_ids, strtoll(q, &end, 10));
        if (g < 0 || s->gpus[g].node != node)
            return;
        v[i] = (struct ts_sched_slot){.gpu = g};
        q = *end == ',' ? end + 1 : end;
    }
    p->suspended_slots = v;
    p->nsuspended_slots = n;
}

/* Pending (or suspended, on node `at`) job J as the snapshot's pending[i],
 * and the reason it has as stored. */
static void read_pending(const struct ts_sjrow *J, int project, int at,
                         const struct ts_sched_snapshot *s, struct ts_sched_rows *rows,
                         struct ts_arena *a, size_t i, struct ts_sched_pending *p)
{
    bool has = J->v[TS_SJ_REASON_CODE] != NULL && J->v[TS_SJ_REASON_MESSAGE] != NULL &&
               J->v[TS_SJ_QUEUE_POSITION] != NULL;
    rows->pending_code[i] = has ? jtext(J, TS_SJ_REASON_CODE, a) : NULL;
    rows->pending_message[i] = has ? jtext(J, TS_SJ_REASON_MESSAGE, a) : NULL;
    rows->pending_position[i] = has ? ji64(J, TS_SJ_QUEUE_POSITION) : 0;
    *p = (struct ts_sched_pending){
        .id = ji64(J, TS_SJ_ID),
        .name = jtext(J, TS_SJ_NAME, a),
        .project = project,
        .priority = (int)ji64(J, TS_SJ_PRIORITY),
        .preemptible = jbool(J, TS_SJ_PREEMPTIBLE),
        .submitted_at = ji64(J, TS_SJ_CREATED),
        .suspended_node = at,
    };
    read_request(J, a, &p->request);
    if (at >= 0)
        suspended_slots(J->v[TS_SJ_SUSPENDED_GPUS], at, rows, s, a, p);
}

static enum ts_err load_jobs(const struct ts_sched_jobcache *jc, struct ts_arena *a,
                             struct ts_sched_rows *rows, struct ts_sched_snapshot *s,
                             const struct slot_rows *sr, struct ts_error *err)
{
    size_t n;
    const struct ts_sjrow *const *jobs = ts_store_sched_cache_jobs(jc, &n);
    struct ts_sched_running *run = ts_arena_alloc(a, sizeof(*run) * (n + 1));
    struct ts_sched_pending *pend = ts_arena_alloc(a, sizeof(*pend) * (n + 1));
    rows->running_stopping = ts_arena_alloc(a, sizeof(bool) * (n + 1));
    rows->pending_code = ts_arena_alloc(a, sizeof(char *) * (n + 1));
    rows->pending_message = ts_arena_alloc(a, sizeof(char *) * (n + 1));
    rows->pending_position = ts_arena_alloc(a, sizeof(int64_t) * (n + 1));
    if (run == NULL || pend == NULL || rows->running_stopping == NULL ||
        rows->pending_code == NULL || rows->pending_message == NULL ||
        rows->pending_position == NULL)
        return ts_error_nomem(err);
    size_t nrun = 0, npend = 0;
    /* the snapshot's nodes are this arena's: suspensions the core does not
     * see (held ones, ones being ended) keep their host memory */
    struct ts_sched_node *nodes = (struct ts_sched_node *)s->nodes;
    for (size_t i = 0; i < n; i++) {
        const struct ts_sjrow *J = jobs[i];
        const char *state = jv(J, TS_SJ_STATE);
        /* none: the job was deleted with its project since it was read */
        int project = find_id(rows->project_ids, s->nprojects, ji64(J, TS_SJ_PROJECT));
        if (project < 0)
            continue;
        bool suspended = strcmp(state, "suspended") == 0;
        bool held = suspended && jbool(J, TS_SJ_SUSPEND_HELD);
        bool stopping = strcmp(state, "evicting") == 0 || strcmp(state, "cancelling") == 0 ||
                        strcmp(state, "suspending") == 0;
        bool gpuless = find_id(sr->job, sr->n, ji64(J, TS_SJ_ID)) < 0 &&
                       strcmp(jv(J, TS_SJ_GPU_KIND), "none") != 0;
        int at =
            J->v[TS_SJ_NODE] == NULL ? -1 : find_id(rows->node_ids, s->nnodes, ji64(J, TS_SJ_NODE));
        /* the node's swap its jobs hold (TS_SQL_NODE_SWAP_USED_BY_OTHERS) */
        if (at >= 0 && (strcmp(state, "running") == 0 || strcmp(state, "suspending") == 0 ||
                        suspended || strcmp(state, "resuming") == 0))
            nodes[at].swap_free_bytes -= strcmp(state, "running") == 0
                                             ? ji64(J, TS_SJ_SWAPPED)
                                             : ji64(J, TS_SJ_SUSPENDED_BYTES);
        /* suspended on request, on a node that is not ready (it waits for
         * the node, or for the lost-node sweep), or a suspension being
         * ended: not the scheduler's to place, but its host memory is
         * still taken */
        if (held || (suspended && (at < 0 || !nodes[at].ready)) ||
            (stopping && gpuless && strcmp(state, "suspending") != 0)) {
            if (at >= 0) {
                int64_t m = nodes[at].memory_bytes - ji64(J, TS_SJ_HOST_MEMORY);
                nodes[at].memory_bytes = m > 0 ? m : 0;
            }
            continue;
        }
        if (strcmp(state, "pending") == 0 || suspended) {
            read_pending(J, project, suspended ? at : -1, s, rows, a, npend, &pend[npend]);
            npend++;
            continue;
        }
        int node = at;
        if (node < 0)
            continue;
        struct ts_sched_running *j = &run[nrun];
        *j = (struct ts_sched_running){
            .id = ji64(J, TS_SJ_ID),
            .name = jtext(J, TS_SJ_NAME, a),
            .project = project,
            .priority = (int)ji64(J, TS_SJ_PRIORITY),
            /* a job already stopping is never chosen again, nor one resuming
             * (its agent is bringing it back; it can be stopped once running) */
            .preemptible =
                jbool(J, TS_SJ_PREEMPTIBLE) && !stopping && strcmp(state, "resuming") != 0,
            .node = node,
            .started_at = ji64(J, TS_SJ_STARTED),
            /* what a suspension moves: the store counts the same
             * (TS_SQL_JOB_HELD_BYTES) */
            .memory_used_bytes = ji64(J, TS_SJ_MEMORY_USED),
            .swapped_bytes = ji64(J, TS_SJ_SWAPPED),
        };
        read_request(J, a, &j->request);
        rows->running_stopping[nrun++] = stopping;
    }
    s->running = run;
    s->nrunning = nrun;
    s->pending = pend;
    s->npending = npend;
    for (size_t i = 0; i < s->nnodes; i++)
        if (nodes[i].swap_free_bytes < 0)
            nodes[i].swap_free_bytes = 0;
    return load_slots(a, rows, sr, run, nrun, err);
}

enum ts_err ts_store_sched_snapshot(struct ts_dbconn *c, struct ts_arena *a,
                                    struct ts_sched_jobcache *jc, struct ts_sched_snapshot *s,
                                    struct ts_sched_rows *rows, size_t *job_rows,
                                    struct ts_error *err)
{
    memset(rows, 0, sizeof(*rows));
    struct ts_sched_config cfg = s->config;
    memset(s, 0, sizeof(*s));
    s->config = cfg;
    char xmin[32];
    struct slot_rows sr = {0};
    size_t nread = 0;
    struct ts_sched_jobcache *own = NULL;
    if (jc == NULL && (jc = own = ts_store_sched_jobcache_new()) == NULL)
        return ts_error_nomem(err);
    PGresult *res = NULL;
    enum ts_err e =
        ts_db_exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, &res, err);
    PQclear(res);
    if (e != TS_OK)
        goto out;
    /* the first statement takes the transaction's snapshot */
    e = query(c,
              "SELECT extract(epoch from now())::bigint,"
              " pg_snapshot_xmin(pg_current_snapshot())::text",
              &res, err);
    if (e != TS_OK)
        goto out;
    s->now = ts_row_i64(res, 0, 0);
    snprintf(xmin, sizeof(xmin), "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    if ((e = load_quota(c, a, rows, s, err)) != TS_OK)
        goto out;
    e = ts_store_sched_cache_refresh(c, jc, xmin, &nread, err);
    if (e != TS_OK) {
        ts_db_rollback(c);
        goto out;
    }
    if ((e = load_nodes(c, jc, a, rows, s, err)) != TS_OK)
        goto out;
    rows->ngpu_ids = s->ngpus;
    if ((e = read_slots(c, a, &sr, err)) != TS_OK)
        goto out;
    e = load_jobs(jc, a, rows, s, &sr, err);
    PQclear(sr.res);
    if (job_rows != NULL)
        *job_rows = nread;
    ts_db_rollback(c); /* read only: nothing to keep */
out:
    ts_store_sched_jobcache_free(own);
    return e;
}
