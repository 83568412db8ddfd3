/*
 * departments.c - departments: create, list, get (with ETag), delete, and
 * PUT /departments/{name}/quota (If-Match required).
 */
#include "api/log.h"
#include "server/handlers/handlers.h"
#include "server/store/store.h"

static enum ts_err decode_department(const json_t *in, void *spec, struct ts_error *err)
{
    return ts_wire_department_decode(in, spec, err);
}

static enum ts_err decode_quota(const json_t *in, void *spec, struct ts_error *err)
{
    return ts_wire_quota_decode(in, "", spec, err);
}

enum ts_err ts_h_department_create(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_department_spec spec;
    enum ts_err e = ts_h_body_decode(r, decode_department, &spec, err);
    if (e != TS_OK)
        return e;
    struct ts_dbconn *conn = ts_ctx_db(ctx, err);
    if (conn == NULL)
        return err->code;
    struct ts_department d;
    e = ts_store_department_create(conn, &spec, &d, err);
    if (e != TS_OK)
        return e;
    ts_log_info("department created name=%s quota_gpus=%g", d.spec.name, d.spec.quota.gpus);
    ts_h_created(r, "departments", d.spec.name, d.revision, ts_wire_department_encode(&d));
    return TS_OK;
}

enum ts_err ts_h_department_list(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_dbconn *conn = ts_ctx_db(ctx, err);
    if (conn == NULL)
        return err->code;
    struct ts_department *v;
    size_t n;
    enum ts_err e = ts_store_department_list(conn, r->arena, &v, &n, err);
    if (e != TS_OK)
        return e;
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, ts_wire_department_encode(&v[i]));
    ts_http_reply_json(r, 200, ts_h_list(items, "departments"));
    return TS_OK;
}

enum ts_err ts_h_department_get(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_dbconn *conn = ts_ctx_db(ctx, err);
    if (conn == NULL)
        return err->code;
    struct ts_department d;
    enum ts_err e = ts_store_department_get(conn, r->params[0], r->arena, &d, err);
    if (e != TS_OK)
        return e;
    ts_h_etag(r, d.revision);
    if (ts_h_not_modified(r, d.revision))
        return TS_OK;
    ts_http_reply_json(r, 200, ts_wire_department_encode(&d));
    return TS_OK;
}

enum ts_err ts_h_department_delete(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return ts_h_delete_named(ctx, r, "department", ts_store_department_delete, err);
}

enum ts_err ts_h_department_quota(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return ts_h_put_quota(ctx, r, "department", decode_quota, ts_store_department_set_quota,
                          ts_h_department_get, err);
}
