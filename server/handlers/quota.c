/*
 * quota.c - departments and projects: create, list, get (with ETag),
 * delete, and PUT .../quota (If-Match required).
 */
#include <stdio.h>

#include "api/log.h"
#include "server/auth.h"
#include "server/handlers/handlers.h"
#include "server/store/store.h"

/* Decode a body with decode(body, spec, err). */
typedef enum ts_err (*decode_fn)(const json_t *in, void *spec, struct ts_error *err);

static enum ts_err decode_body(struct ts_request *r, decode_fn decode, void *spec,
                               struct ts_error *err)
{
    json_t *body = NULL;
    enum ts_err e = ts_h_body(r, &body, err);
    if (e == TS_OK)
        e = decode(body, spec, err);
    json_decref(body);
    return e;
}

static enum ts_err decode_department(const json_t *in, void *spec, struct ts_error *err)
{
    return ts_wire_department_decode(in, spec, err);
}

static enum ts_err decode_project(const json_t *in, void *spec, struct ts_error *err)
{
    return ts_wire_project_decode(in, spec, err);
}

static enum ts_err decode_quota(const json_t *in, void *spec, struct ts_error *err)
{
    return ts_wire_quota_decode(in, "", spec, err);
}

static enum ts_err decode_project_quota(const json_t *in, void *spec, struct ts_error *err)
{
    return ts_wire_project_quota_decode(in, "", spec, err);
}

static void created(struct ts_request *r, const char *kind, const char *name, int64_t revision,
                    json_t *body)
{
    char loc[128];
    snprintf(loc, sizeof(loc), "/api/v1/%s/%s", kind, name);
    ts_http_add_header(r, "Location", loc);
    ts_h_etag(r, revision);
    ts_http_reply_json(r, 201, body);
}

/* PUT .../{name}/quota: If-Match, a quota body, set(), then answer get(). */
typedef enum ts_err (*set_quota_fn)(struct ts_dbconn *c, const char *name, const struct ts_quota *q,
                                    const struct ts_revisions *revs, struct ts_error *err);

static enum ts_err put_quota(void *ctx, struct ts_request *r, const char *what, decode_fn decode,
                             set_quota_fn set, ts_route_handler get, struct ts_error *err)
{
    struct ts_revisions revs;
    bool any;
    enum ts_err e = ts_h_if_match(r, &revs, &any, err);
    if (e != TS_OK)
        return e;
    struct ts_quota q;
    e = decode_body(r, decode, &q, err);
    if (e != TS_OK)
        return e;
    struct ts_dbconn *conn = ts_ctx_db(ctx, err);
    if (conn == NULL)
        return err->code;
    e = set(conn, r->params[0], &q, any ? NULL : &revs, err);
    if (e != TS_OK)
        return e;
    ts_log_info("%s quota set name=%s gpus=%g", what, r->params[0], q.gpus);
    return get(ctx, r, err);
}

/* DELETE .../{name}: 204 when del() removed it. */
static enum ts_err delete_named(void *ctx, struct ts_request *r, const char *what,
                                enum ts_err (*del)(struct ts_dbconn *, const char *,
                                                   struct ts_error *),
                                struct ts_error *err)
{
    struct ts_dbconn *conn = ts_ctx_db(ctx, err);
    if (conn == NULL)
        return err->code;
    enum ts_err e = del(conn, r->params[0], err);
    if (e != TS_OK)
        return e;
    ts_log_info("%s deleted name=%s", what, r->params[0]);
    r->status = 204;
    return TS_OK;
}

/* ---- departments ------------------------------------------------------------- */

enum ts_err ts_h_department_create(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_department_spec spec;
    enum ts_err e = decode_body(r, decode_department, &spec, err);
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
    created(r, "departments", d.spec.name, d.revision, ts_wire_department_encode(&d));
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
    return delete_named(ctx, r, "department", ts_store_department_delete, err);
}

enum ts_err ts_h_department_quota(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return put_quota(ctx, r, "department", decode_quota, ts_store_department_set_quota,
                     ts_h_department_get, err);
}

/* ---- projects ---------------------------------------------------------------- */

enum ts_err ts_h_project_create(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_project_spec spec;
    enum ts_err e = decode_body(r, decode_project, &spec, err);
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
    created(r, "projects", p.spec.name, p.revision, ts_wire_project_encode(&p));
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
    return delete_named(ctx, r, "project", ts_store_project_delete, err);
}

enum ts_err ts_h_project_quota(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return put_quota(ctx, r, "project", decode_project_quota, ts_store_project_set_quota,
                     ts_h_project_get, err);
}
