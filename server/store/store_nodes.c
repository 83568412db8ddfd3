/*
 * store_nodes.c - nodes and their GPUs as agents registered them.
 */
#include <string.h>

#include "server/store/row.h"
#include "server/store/store.h"

#define NODE_SQL                                                                                   \
    "SELECT n.id, n.name, n.state, n.labels::text, n.cpu, n.memory_bytes, " TS_SQL_US(             \
        "n.last_seen_at") ", " TS_SQL_US("n.created_at") ","                                       \
                                                         " g.idx, g.uuid, g.model, g.memory_bytes" \
                                                         " FROM node n LEFT JOIN gpu g ON "        \
                                                         "g.node_id = n.id"

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
    enum ts_err e =
        ts_db_exec(c, NODE_SQL " WHERE n.name = $1 ORDER BY g.idx", 1, params, &res, err);
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
