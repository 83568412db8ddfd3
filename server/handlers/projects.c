/*
 * projects.c - projects: create, list and get (as far as the caller's token
 * reaches; get with ETag), delete, and PUT /projects/{name}/quota
 * (If-Match required).
 */
#include "api/log.h"
#include "server/auth.h"
#include "server/handlers/handlers.h"
#include "server/store/store.h"

static enum ts_err decode_project(const json_t *in, void *spec, struct ts_error *err)
{
    return ts_wire_project_decode(in, spec, err);
}

static enum ts_err decode_project_quota(const json_t *in, void *spec, struct ts_error *err)
{
    return ts_wire_project_quota_decode(in, "", spec, err);
}

enum ts_err ts_h_project_create(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_project_spec spec;
    enum ts_err e = ts_h_body_decode(r, decode_project, &spec, err);
    if (e != TS_OK)
        return e;
    struct ts_dbconn *conn = ts_ctx_db(ctx, err);
    if (conn == NULL)
        return err->code;
    struct ts_project p;
    e = ts_store_project_create(conn, &spec, &p, err);
    if (e != TS_OK)
        return e;
    ts_log_info("project created name=%s department=%s quota_gpus=%g", p.spec.name,
                p.spec.department, p.spec.quota.gpus);
    ts_h_created(r, "projects", p.spec.name, p.revision, ts_wire_project_encode(&p));
    return TS_OK;
}

enum ts_err ts_h_project_list(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    struct ts_project *v;
    size_t n;
    size_t nids;
    const int64_t *ids = ts_auth_project_ids(c, &nids);
    enum ts_err e = ts_store_project_list(conn, ids, nids, r->arena, &v, &n, err);
    if (e != TS_OK)
        return e;
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, ts_wire_project_encode(&v[i]));
    ts_http_reply_json(r, 200, ts_h_list(items, "projects"));
    return TS_OK;
}

enum ts_err ts_h_project_get(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    struct ts_project p;
    enum ts_err e = ts_store_project_get(conn, r->params[0], r->arena, &p, err);
    if (e != TS_OK)
        return e;
    if (!ts_auth_project_allowed(c, p.id))
        return ts_error_set(err, TS_ERR_FORBIDDEN, "token \"%s\" has no access to project \"%s\"",
                            c->who.name, p.spec.name);
    ts_h_etag(r, p.revision);
    if (ts_h_not_modified(r, p.revision))
        return TS_OK;
    ts_http_reply_json(r, 200, ts_wire_project_encode(&p));
    return TS_OK;
}

enum ts_err ts_h_project_delete(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return ts_h_delete_named(ctx, r, "project", ts_store_project_delete, err);
}

enum ts_err ts_h_project_quota(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return ts_h_put_quota(ctx, r, "project", decode_project_quota, ts_store_project_set_quota,
                          ts_h_project_get, err);
}
