/*
 * nodes.c - GET /nodes and /nodes/{name}, as agents registered them.
 */
#include "server/handlers/handlers.h"
#include "server/store/store.h"

TS_HANDLER(ts_h_node_list)
{
    struct ts_dbconn *conn = ts_ctx_db(ctx, err);
    if (conn == NULL)
        return err->code;
    struct ts_node *v;
    size_t n;
    enum ts_err e = ts_store_node_list(conn, r->arena, &v, &n, err);
    if (e != TS_OK)
        return e;
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, ts_wire_node_encode(&v[i]));
    ts_http_reply_json(r, 200, ts_h_list(items, "nodes"));
    return TS_OK;
}

TS_HANDLER(ts_h_node_get)
{
    struct ts_dbconn *conn = ts_ctx_db(ctx, err);
    if (conn == NULL)
        return err->code;
    struct ts_node node;
    enum ts_err e = ts_store_node_get(conn, r->params[0], r->arena, &node, err);
    if (e != TS_OK)
        return e;
    ts_http_reply_json(r, 200, ts_wire_node_encode(&node));
    return TS_OK;
}
