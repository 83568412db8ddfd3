/*
 * tokens.c - POST/GET /tokens, DELETE /tokens/{id} (admin only).
 */
#include <stdio.h>
#include <string.h>

#include "api/log.h"
#include "server/auth.h"
#include "server/authcache.h"
#include "server/handlers/handlers.h"
#include "server/store/store.h"

enum ts_err ts_h_token_create(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    json_t *body = NULL;
    enum ts_err e = ts_h_body(r, &body, err);
    if (e != TS_OK)
        return e;
    struct ts_token_spec spec;
    e = ts_wire_token_decode(body, r->arena, &spec, err);
    if (e != TS_OK)
        goto out;
    char secret[TS_AUTH_SECRET_LEN], hash[65];
    e = ts_auth_new_secret(secret, err);
    if (e != TS_OK)
        goto out;
    ts_auth_sha256_hex(secret, strlen(secret), hash);
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL) {
        e = err->code;
        goto out;
    }
    struct ts_token t;
    e = ts_store_token_create(conn, &spec, hash, r->arena, &t, err);
    if (e != TS_OK)
        goto out;
    t.secret = secret;
    ts_log_info("token created id=%lld name=%s role=%s by=%s", (long long)t.id, t.spec.name,
                ts_role_name(t.spec.role), c->who.name);
    char loc[64];
    snprintf(loc, sizeof(loc), "/api/v1/tokens/%lld", (long long)t.id);
    ts_http_add_header(r, "Location", loc);
    ts_http_add_header(r, "Cache-Control", "no-store");
    ts_http_reply_json(r, 201, ts_wire_token_encode(&t));
out:
    json_decref(body);
    return e;
}

/* The caller's token: name, role, the projects it is limited to, and an
 * agent's nodes. */
enum ts_err ts_h_whoami(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    size_t n = 0;
    const int64_t *ids = ts_auth_project_ids(c, &n);
    struct ts_whoami w = {.id = c->who.token_id,
                          .name = c->who.name,
                          .role = ts_role_name(c->who.role),
                          .restricted = ids != NULL,
                          .has_nodes = c->who.role == TS_ROLE_AGENT};
    if (ids != NULL && n > 0) {
        struct ts_dbconn *conn = ts_ctx_db(c, err);
        if (conn == NULL)
            return err->code;
        enum ts_err e =
            ts_store_project_names(conn, ids, n, r->arena, &w.projects, &w.nprojects, err);
        if (e != TS_OK)
            return e;
    }
    /* an agent's nodes, "a,b*" in its token; none for any node */
    const char *list = w.has_nodes && c->who.nodes != NULL ? c->who.nodes : "";
    size_t most = 1;
    for (const char *p = list; *p != '\0'; p++)
        most += *p == ',';
    w.nodes = ts_arena_alloc(r->arena, most * sizeof(*w.nodes));
    if (w.nodes == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (const char *p = list; *p != '\0';) {
        size_t len = strcspn(p, ",");
        if ((w.nodes[w.nnodes++] = ts_arena_strndup(r->arena, p, len)) == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        p += len + (p[len] == ',');
    }
    json_t *o = ts_wire_whoami_encode(&w);
    if (o == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    ts_http_reply_json(r, 200, o);
    return TS_OK;
}

enum ts_err ts_h_token_list(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    struct ts_token *v;
    size_t n;
    enum ts_err e = ts_store_token_list(conn, r->arena, &v, &n, err);
    if (e != TS_OK)
        return e;
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, ts_wire_token_encode(&v[i]));
    ts_http_reply_json(r, 200, ts_h_list(items, "tokens"));
    return TS_OK;
}

enum ts_err ts_h_token_delete(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    int64_t id;
    enum ts_err e = ts_h_param_id(r, 0, "token", &id, err);
    if (e != TS_OK)
        return e;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    e = ts_store_token_delete(conn, id, err);
    if (e != TS_OK)
        return e;
    ts_authcache_clear(c->srv->auth_cache);
    ts_log_info("token revoked id=%lld by=%s", (long long)id, c->who.name);
    r->status = 204;
    return TS_OK;
}
