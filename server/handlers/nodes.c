/*
 * nodes.c - GET /nodes and /nodes/{name}, as agents registered them.
 *
 * A project-limited caller sees the ids of its projects' jobs on each GPU
 * and only a count (hidden_jobs) of the others; an agent token bound to
 * nodes lists only those.
 */
#include "server/auth.h"
#include "server/handlers/handlers.h"
#include "server/store/store.h"

static bool id_in(int64_t id, const int64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == id)
            return true;
    return false;
}

/* Replace the GPUs' job ids of other projects by a count, for a
 * project-limited caller. */
static enum ts_err hide_jobs(struct ts_ctx *c, struct ts_dbconn *conn, struct ts_request *r,
                             struct ts_node *nodes, size_t n, struct ts_error *err)
{
    size_t np = 0;
    const int64_t *pids = ts_auth_project_ids(c, &np);
    if (pids == NULL)
        return TS_OK;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < nodes[i].ngpus; g++)
            total += nodes[i].gpus[g].njobs;
    if (total == 0)
        return TS_OK;
    int64_t *all = ts_arena_alloc(r->arena, sizeof(*all) * total);
    if (all == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < nodes[i].ngpus; g++)
            for (size_t j = 0; j < nodes[i].gpus[g].njobs; j++)
                all[k++] = nodes[i].gpus[g].jobs[j];
    int64_t *seen = NULL;
    size_t nseen = 0;
    if (np > 0) {
        enum ts_err e =
            ts_store_node_jobs_visible(conn, all, total, pids, np, r->arena, &seen, &nseen, err);
        if (e != TS_OK)
            return e;
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t g = 0; g < nodes[i].ngpus; g++) {
            struct ts_gpu *gpu = &nodes[i].gpus[g];
            int64_t *kept = ts_arena_alloc(r->arena, sizeof(*kept) * (gpu->njobs + 1));
            int *phys = ts_arena_alloc(r->arena, sizeof(*phys) * (gpu->njobs + 1));
            if (kept == NULL || phys == NULL)
                return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            size_t nk = 0;
            for (size_t j = 0; j < gpu->njobs; j++)
                if (id_in(gpu->jobs[j], seen, nseen)) {
                    phys[nk] = gpu->job_physical != NULL ? gpu->job_physical[j] : -1;
                    kept[nk++] = gpu->jobs[j];
                }
            gpu->hidden_jobs = gpu->njobs - nk;
            gpu->jobs = kept;
            gpu->job_physical = phys;
            gpu->njobs = nk;
        }
    }
    return TS_OK;
}

enum ts_err ts_h_node_list(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    struct ts_node *v;
    size_t n;
    enum ts_err e = ts_store_node_list(conn, r->arena, &v, &n, err);
    if (e == TS_OK)
        e = hide_jobs(c, conn, r, v, n, err);
    if (e != TS_OK)
        return e;
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        if (ts_auth_node_allowed(c, v[i].name))
            json_array_append_new(items, ts_wire_node_encode(&v[i]));
    ts_http_reply_json(r, 200, ts_h_list(items, "nodes"));
    return TS_OK;
}

enum ts_err ts_h_node_get(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    struct ts_node node;
    enum ts_err e = ts_store_node_get(conn, r->params[0], r->arena, &node, err);
    if (e == TS_OK)
        e = hide_jobs(c, conn, r, &node, 1, err);
    if (e != TS_OK)
        return e;
    ts_http_reply_json(r, 200, ts_wire_node_encode(&node));
    return TS_OK;
}
