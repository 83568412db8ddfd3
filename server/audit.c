/*
 * audit.c - recording admin writes in the transaction of the write (see
 * audit.h; the table is migrations/0007_pending_audit.sql).
 */
#include "server/audit.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/log.h"
#include "server/authcache.h"
#include "server/store/store.h"

bool ts_audit_recorded(const struct ts_route *route)
{
    return route->access == TS_ACCESS_ADMIN && strcmp(route->method, "GET") != 0;
}

enum ts_err ts_audit_begin(struct ts_ctx *ctx, struct ts_error *err)
{
    struct ts_dbconn *c = ts_ctx_db(ctx, err);
    if (c == NULL)
        return err->code;
    return ts_db_begin(c, err);
}

static bool secret_key(const char *key)
{
    return strcmp(key, "token") == 0 || strcmp(key, "secret") == 0 || strcmp(key, "password") == 0;
}

/* In place: secrets out of v, at any depth. */
static void redact(json_t *v)
{
    const char *key;
    json_t *m;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach(v, key, m) {
            if (secret_key(key)) {
                json_object_set_new(v, key, json_string("(redacted)"));
            } else if (strcmp(key, "env") == 0 && json_is_object(m)) {
                const char *name;
                json_t *val;
                json_object_foreach(m, name, val)
                    json_object_set_new(m, name, json_null());
            } else {
                redact(m);
            }
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, m)
            redact(m);
    }
}

char *ts_audit_changes(const char *body, size_t len)
{
    if (body == NULL || len == 0)
        return NULL;
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
    if (v == NULL)
        return NULL;
    redact(v);
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    json_decref(v);
    return s;
}

/* What the write was about: the path's parameter ("vision", a token id, a
 * node), else the id of what it created. */
static const char *target(struct ts_request *r, char *buf, size_t len)
{
    if (r->nparams > 0)
        return r->params[0];
    json_t *id = r->json ? json_object_get(r->json, "id") : NULL;
    if (json_is_integer(id)) {
        snprintf(buf, len, "%lld", (long long)json_integer_value(id));
        return buf;
    }
    return NULL;
}

enum ts_err ts_audit_commit(struct ts_ctx *ctx, struct ts_error *err)
{
    struct ts_request *r = ctx->req;
    char id[24];
    char *changes = ts_audit_changes(r->body.data, r->body.len);
    struct ts_audit_event ev = {
        .token_id = ctx->who.token_id,
        .token_name = ctx->who.name,
        .token_role = ts_role_name(ctx->who.role),
        .method = r->method,
        .path = r->path,
        .target = target(r, id, sizeof(id)),
        .changes = changes,
        .status = r->status,
        .request_id = r->request_id,
    };
    enum ts_err e = ts_store_audit_insert(ctx->conn, &ev, err);
    free(changes);
    if (e == TS_OK)
        e = ts_db_commit(ctx->conn, err);
    if (e != TS_OK) {
        ts_db_rollback(ctx->conn);
        ts_log_error("admin write not kept: its audit record failed method=%s path=%s "
                     "request=%s: %s",
                     r->method, r->path, r->request_id, err->message);
        /* the request was fine: a database away is 503, anything else ours */
        if (e != TS_ERR_DATABASE)
            e = ts_error_set(err, TS_ERR_INTERNAL, "could not record the admin write");
        return e;
    }
    /* an admin write may change who may do what: a token revoked through
     * this server stops working at once, never before its commit */
    ts_authcache_clear(ctx->srv->auth_cache);
    return TS_OK;
}
