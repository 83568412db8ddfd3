/*
 * store_nodes.c - nodes and their GPUs as agents registered them.
 */
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

/* One row per node and GPU; columns 12.. are the new node and GPU figures. */
/* clang-format off */
#define NODE_SQL                                                                                   \
    "SELECT n.id, n.name, n.state, n.labels::text, n.cpu, n.memory_bytes, "                        \
    TS_SQL_US("n.last_seen_at") ", " TS_SQL_US("n.created_at") ","                                 \
    " g.idx, g.uuid, g.model, g.memory_bytes,"                                                     \
    " n.swap_bytes, n.gpu_reserve_bytes, n.agent_version, n.generation, "                          \
    TS_SQL_US("n.registered_at") ","                                                               \
    " (SELECT count(*) FROM job j WHERE j.node_id = n.id AND j.state IN"                           \
    "   ('scheduled', 'running', 'evicting', 'cancelling', 'suspending', 'resuming')),"            \
    " coalesce(a.bytes, 0), g.utilization, g.memory_used_bytes, " TS_SQL_US("g.sampled_at") ","    \
    " a.jobs, n.collision,"                                                                        \
    " (SELECT coalesce(sum(CASE WHEN j.state = 'running' THEN j.swapped_bytes"                    \
    "   ELSE j.suspended_bytes END), 0) FROM job j WHERE j.node_id = n.id"                         \
    "   AND j.state IN ('running', 'suspending', 'suspended', 'resuming'))"                        \
    " FROM node n LEFT JOIN gpu g ON g.node_id = n.id"                                             \
    " LEFT JOIN LATERAL (SELECT sum(jg.memory_bytes) AS bytes,"                                    \
    "   string_agg(jg.job_id || coalesce('@' || jg.physical_idx, ''), ','"                         \
    "     ORDER BY jg.job_id) AS jobs"                                                             \
    "   FROM job_gpu jg WHERE jg.gpu_id = g.id) a ON true"
/* clang-format on */

/* "3,7@1,12" into arena arrays: job ids, and where its agent reported
 * each runs ("@1": physical GPU 1). */
static void parse_ids(const char *text, struct ts_arena *a, struct ts_gpu *g)
{
    g->jobs = NULL;
    g->job_physical = NULL;
    g->njobs = 0;
    if (text == NULL || *text == '\0')
        return;
    size_t n = 1;
    for (const char *p = text; *p; p++)
        n += *p == ',';
    int64_t *ids = ts_arena_alloc(a, n * sizeof(*ids));
    int *phys = ts_arena_alloc(a, n * sizeof(*phys));
    if (ids == NULL || phys == NULL)
        return;
    const char *p = text;
    for (size_t i = 0; i < n; i++) {
        char *end;
        ids[i] = strtoll(p, &end, 10);
        phys[i] = *end == '@' ? (int)strtol(end + 1, &end, 10) : -1;
        p = *end == ',' ? end + 1 : end;
    }
    g->jobs = ids;
    g->job_physical = phys;
    g->njobs = n;
}

/* Rows come ordered by node then GPU index; fold them into nodes. */
static enum ts_err fold(const PGresult *res, struct ts_arena *a, struct ts_node **out, size_t *n,
                        struct ts_error *err)
{
    int rows = PQntuples(res);
    struct ts_node *v = ts_arena_alloc(a, sizeof(*v) * (size_t)(rows ? rows : 1));
    struct ts_gpu *gpus = ts_arena_alloc(a, sizeof(*gpus) * (size_t)(rows ? rows : 1));
    if (v == NULL || gpus == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    size_t count = 0;
    for (int i = 0; i < rows; i++) {
        int64_t id = ts_row_i64(res, i, 0);
        if (count == 0 || v[count - 1].id != id) {
            struct ts_node *nd = &v[count++];
            nd->id = id;
            nd->name = ts_row_text(res, i, 1, a);
            nd->state = ts_row_text(res, i, 2, a);
            nd->labels = ts_row_text(res, i, 3, a);
            nd->cpu = ts_row_double(res, i, 4);
            nd->memory_bytes = ts_row_i64(res, i, 5);
            nd->last_seen_at_us = ts_row_i64(res, i, 6);
            nd->created_at_us = ts_row_i64(res, i, 7);
            nd->swap_bytes = ts_row_i64(res, i, 12);
            nd->gpu_reserve_bytes = ts_row_i64(res, i, 13);
            nd->agent_version = ts_row_null(res, i, 14) ? NULL : ts_row_text(res, i, 14, a);
            nd->generation = ts_row_i64(res, i, 15);
            nd->registered_at_us = ts_row_i64(res, i, 16);
            nd->running_jobs = (int)ts_row_i64(res, i, 17);
            nd->collision = ts_row_text(res, i, 23, a);
            nd->swap_used_bytes = ts_row_i64(res, i, 24);
            nd->gpus = &gpus[i];
            nd->ngpus = 0;
        }
        if (!ts_row_null(res, i, 8)) {
            struct ts_node *nd = &v[count - 1];
            struct ts_gpu *g = &nd->gpus[nd->ngpus++];
            g->index = (int)ts_row_i64(res, i, 8);
            g->uuid = ts_row_text(res, i, 9, a);
            g->model = ts_row_text(res, i, 10, a);
            g->memory_bytes = ts_row_i64(res, i, 11);
            g->allocated_bytes = ts_row_i64(res, i, 18);
            g->utilization = ts_row_double(res, i, 19);
            g->memory_used_bytes = ts_row_i64(res, i, 20);
            g->sampled_at_us = ts_row_i64(res, i, 21);
            parse_ids(ts_row_null(res, i, 22) ? NULL : PQgetvalue(res, i, 22), a, g);
        }
    }
    *out = v;
    *n = count;
    return TS_OK;
}

enum ts_err ts_store_node_list(struct ts_dbconn *c, struct ts_arena *a, struct ts_node **out,
                               size_t *n, struct ts_error *err)
{
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c, NODE_SQL " ORDER BY n.name, g.idx", 0, NULL, &res, err);
    if (e != TS_OK)
        return e;
    e = fold(res, a, out, n, err);
    PQclear(res);
    return e;
}

enum ts_err ts_store_node_get(struct ts_dbconn *c, const char *name, struct ts_arena *a,
                              struct ts_node *out, struct ts_error *err)
{
    PGresult *res = NULL;
    const char *params[] = {name};
    enum ts_err e = ts_db_exec(c, NODE_SQL " WHERE n.name = $1 ORDER BY g.idx",
                               TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    struct ts_node *v;
    size_t count;
    e = fold(res, a, &v, &count, err);
    PQclear(res);
    if (e != TS_OK)
        return e;
    if (count != 1)
        return ts_error_set(err, TS_ERR_NOT_FOUND, "node \"%s\" does not exist", name);
    *out = v[0];
    return TS_OK;
}

enum ts_err ts_store_node_jobs_visible(struct ts_dbconn *c, const int64_t *ids, size_t n,
                                       const int64_t *project_ids, size_t np, struct ts_arena *a,
                                       int64_t **out, size_t *nout, struct ts_error *err)
{
    *out = NULL;
    *nout = 0;
    char *jobs = ts_row_id_array(a, ids, n);
    char *projects = ts_row_id_array(a, project_ids, np);
    if (jobs == NULL || projects == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    const char *params[] = {jobs, projects};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c,
                               "SELECT id FROM job WHERE id = ANY($1::bigint[])"
                               " AND project_id = ANY($2::bigint[]) ORDER BY id",
                               TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    int64_t *v = ts_arena_alloc(a, sizeof(*v) * (size_t)(rows ? rows : 1));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rows; i++)
        v[i] = ts_row_i64(res, i, 0);
    PQclear(res);
    *out = v;
    *nout = (size_t)rows;
    return TS_OK;
}
