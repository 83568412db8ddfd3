/*
 * dispatch.c - from a complete HTTP request to a response: body cap, route,
 * authentication and role, content type, handler, problem+json on error;
 * and the per-request cleanup (database connection, metrics).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/clock.h"
#include "api/log.h"
#include "api/query.h"
#include "server/audit.h"
#include "server/auth.h"
#include "server/dispatch.h"
#include "server/http/problem.h"
#include "server/metrics.h"
#include "server/routes.h"

struct ts_dbconn *ts_ctx_db(struct ts_ctx *ctx, struct ts_error *err)
{
    if (ctx->conn == NULL)
        ctx->conn = ts_db_acquire(ctx->srv->db, 5000, err);
    return ctx->conn;
}

void ts_ctx_db_release(struct ts_ctx *ctx)
{
    if (ctx->conn != NULL) {
        ts_db_rollback(ctx->conn);
        ts_db_release(ctx->srv->db, ctx->conn);
        ctx->conn = NULL;
    }
}

static bool json_content_type(const char *ct)
{
    /* application/json, application/problem+json, with parameters */
    size_t n = strcspn(ct, "; ");
    if (n == 16 && strncasecmp(ct, "application/json", 16) == 0)
        return true;
    return n > 17 && strncasecmp(ct, "application/", 12) == 0 &&
           strncasecmp(ct + n - 5, "+json", 5) == 0;
}

static enum ts_err route_and_run(struct ts_ctx *ctx, struct ts_request *r, struct ts_error *err)
{
    if (r->body_too_large) {
        ts_error_set(err, TS_ERR_BODY_TOO_LARGE, "request body is larger than %lld bytes",
                     (long long)ctx->srv->cfg.max_body);
        ts_error_hint(err, "the server's max-body option sets the limit");
        return TS_ERR_BODY_TOO_LARGE;
    }
    struct ts_route_match m;
    enum ts_err e = ts_route_find(ts_routes, ts_routes_count, r->method, r->path, &m);
    if (e == TS_ERR_METHOD_NOT_ALLOWED) {
        ts_http_add_header(r, "Allow", m.allow);
        return ts_error_set(err, e, "method %s is not allowed on %s: allowed are %s", r->method,
                            r->path, m.allow);
    }
    if (e != TS_OK)
        return ts_error_set(err, e, "no route for %s %s", r->method, r->path);
    r->route_index = m.index;
    for (int i = 0; i < m.nvalues; i++)
        r->params[i] = ts_arena_strdup(r->arena, m.values[i]);
    r->nparams = m.nvalues;
    const struct ts_route *route = &ts_routes[m.index];
    e = ts_auth_check(ctx, route->access, err);
    if (e != TS_OK)
        return e;
    if (!route->query) {
        /* an empty table refuses any parameter, naming it */
        struct ts_query_pair *pairs;
        ssize_t np = ts_http_query_pairs(r, &pairs);
        if (np < 0)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        e = ts_query_decode(NULL, 0, pairs, (size_t)np, 0, NULL, NULL, err);
        if (e != TS_OK)
            return e;
    }
    if (r->body.len > 0) {
        const char *ct = ts_http_header(r, "Content-Type");
        if (ct != NULL && !json_content_type(ct)) {
            ts_error_set(err, TS_ERR_UNSUPPORTED_MEDIA,
                         "request body must be application/json, not %s", ct);
            ts_error_hint(err, "send \"Content-Type: application/json\" (with curl: --json)");
            return TS_ERR_UNSUPPORTED_MEDIA;
        }
    }
    if (!ts_audit_recorded(route))
        return route->handler(ctx, r, err);
    /* an admin write: the write and its audit record commit together */
    int nheaders = r->nheaders;
    e = ts_audit_begin(ctx, err);
    if (e == TS_OK)
        e = route->handler(ctx, r, err);
    if (e == TS_OK && r->status >= 200 && r->status < 300)
        e = ts_audit_commit(ctx, err);
    if (e != TS_OK)
        r->nheaders = nheaders; /* no Location or ETag of what was not kept */
    if (ctx->conn != NULL)
        ts_db_rollback(ctx->conn); /* a failure, or an answer that is not a success */
    return e;
}

void ts_dispatch(void *cls, struct ts_request *r)
{
    struct ts_server *srv = cls;
    struct ts_ctx *ctx = ts_arena_alloc(r->arena, sizeof(*ctx));
    if (ctx == NULL) {
        r->status = 500;
        r->raw = "{\"status\":500,\"code\":\"out_of_memory\"}";
        r->raw_len = strlen(r->raw);
        r->content_type = "application/problem+json";
        return;
    }
    ctx->srv = srv;
    ctx->req = r;
    r->user = ctx;
    struct ts_error err;
    ts_error_clear(&err);
    enum ts_err e = route_and_run(ctx, r, &err);
    if (e != TS_OK) {
        if (err.code != e)
            ts_error_set(&err, e, "%s", ts_err_title(e));
        if (ctx->conn)
            ts_db_rollback(ctx->conn);
        ts_problem_reply(r, &err);
    }
    if (r->status == 0) {
        ts_error_set(&err, TS_ERR_INTERNAL, "handler set no response");
        ts_problem_reply(r, &err);
    }
}

void ts_dispatch_complete(void *cls, struct ts_request *r)
{
    struct ts_server *srv = cls;
    struct ts_ctx *ctx = r->user;
    if (ctx && ctx->conn) {
        ts_db_release(srv->db, ctx->conn);
        ctx->conn = NULL;
    }
    int64_t ns = ts_now_ns() - r->started_ns;
    ts_metrics_observe(srv->metrics, r->route_index, r->method, r->status, (double)ns / 1e9,
                       r->held || r->stream != NULL);
    ts_log_debug("%s %s status=%d duration_ms=%.3f request=%s", r->method, r->path, r->status,
                 (double)ns / 1e6, r->request_id);
}
