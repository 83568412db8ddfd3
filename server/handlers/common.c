/*
 * common.c - small pieces every handler uses: the body, ids in paths,
 * ETag and If-Match, the query string (by the route's table), jobs and
 * scheduler messages as a caller may see them;
 * a named thing's create answer, delete and PUT .../quota (departments.c,
 * projects.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/log.h"
#include "server/auth.h"
#include "server/handlers/handlers.h"
#include "server/handlers/web.h"
#include "server/store/store.h"

enum ts_err ts_h_body(struct ts_request *r, json_t **out, struct ts_error *err)
{
    if (r->body.len == 0)
        return ts_error_set(err, TS_ERR_MISSING_FIELD, "request body is required: a JSON object");
    return ts_wire_parse(r->body.data, r->body.len, out, err);
}

enum ts_err ts_h_param_id(struct ts_request *r, int i, const char *what, int64_t *out,
                          struct ts_error *err)
{
    const char *s = r->params[i];
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0 || v <= 0)
        return ts_error_set(err, TS_ERR_NOT_FOUND, "%s \"%s\" does not exist", what, s);
    *out = v;
    return TS_OK;
}

void ts_h_etag(struct ts_request *r, int64_t revision)
{
    char tag[32];
    snprintf(tag, sizeof(tag), "\"%lld\"", (long long)revision);
    ts_http_add_header(r, "ETag", tag);
}

enum ts_err ts_h_if_match(struct ts_request *r, struct ts_revisions *revs, bool *any,
                          struct ts_error *err)
{
    const char *h = ts_http_header(r, "If-Match");
    if (h == NULL) {
        ts_error_set(err, TS_ERR_PRECONDITION_REQUIRED, "If-Match header is required");
        ts_error_hint(err, "GET the resource and send its ETag in If-Match");
        return TS_ERR_PRECONDITION_REQUIRED;
    }
    /* RFC 9110 §13.1.1: "*" or a list of entity tags, any of which passes
     * by the strong comparison; a weak tag or one that is not ours
     * (a revision "N") matches nothing */
    revs->n = 0;
    *any = false;
    for (const char *p = h; *p != '\0';) {
        p += strspn(p, " \t,");
        size_t len = strcspn(p, ",");
        if (len == 0)
            break;
        long long v;
        int used = 0;
        if (p[0] == '*') {
            *any = true;
        } else if (sscanf(p, "\"%lld\"%n", &v, &used) == 1 && v > 0 && p[0] == '"' && p[1] >= '0' &&
                   p[1] <= '9' && (size_t)used <= len &&
                   strspn(p + used, " \t") == len - (size_t)used) {
            if (revs->n == TS_REVISIONS_MAX)
                return ts_error_set(err, TS_ERR_PRECONDITION_FAILED,
                                    "If-Match names more than %d entity tags", TS_REVISIONS_MAX);
            revs->v[revs->n++] = v;
        }
        p += len;
    }
    return TS_OK;
}

bool ts_h_not_modified(struct ts_request *r, int64_t revision)
{
    if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0)
        return false;
    const char *inm = ts_http_header(r, "If-None-Match");
    char tag[32];
    snprintf(tag, sizeof(tag), "\"%lld\"", (long long)revision);
    if (inm == NULL || !ts_web_etag_matches(inm, tag))
        return false;
    r->status = 304;
    r->raw = "";
    r->raw_len = 0;
    return true;
}

json_t *ts_h_list(json_t *items, const char *key)
{
    json_t *o = json_object();
    json_object_set_new(o, key, items);
    return o;
}

/* Whether text[0..len) is one of names. */
static bool hidden_name(const char *text, size_t len, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(names[i]) == len && memcmp(names[i], text, len) == 0)
            return true;
    return false;
}

const char *ts_h_redact_projects(struct ts_ctx *ctx, const char *text)
{
    size_t nids = 0;
    const int64_t *ids = ts_auth_project_ids(ctx, &nids);
    if (text == NULL || ids == NULL || strchr(text, '"') == NULL)
        return text;
    struct ts_arena *a = ctx->req->arena;
    if (!ctx->hidden_projects_loaded) {
        struct ts_dbconn *conn = ts_ctx_db(ctx, NULL);
        if (conn == NULL ||
            ts_store_token_hidden_projects(conn, ids, nids, a, &ctx->hidden_projects,
                                           &ctx->nhidden_projects, NULL) != TS_OK)
            return "(hidden)";
        ctx->hidden_projects_loaded = true;
    }
    /* each "NAME" of a hidden project, with a "project " before it, becomes
     * "another project": at least 3 characters ("a" quoted) give 15, so
     * the result is at most 5 times as long */
    static const char word[] = "project ", other[] = "another project";
    size_t len = strlen(text);
    char *out = ts_arena_alloc(a, 5 * len + 1);
    if (out == NULL)
        return "(hidden)";
    size_t o = 0;
    for (const char *p = text; *p != '\0';) {
        const char *close = p[0] == '"' ? strchr(p + 1, '"') : NULL;
        if (close != NULL && hidden_name(p + 1, (size_t)(close - p - 1), ctx->hidden_projects,
                                         ctx->nhidden_projects)) {
            if (o >= sizeof(word) - 1 &&
                memcmp(out + o - (sizeof(word) - 1), word, sizeof(word) - 1) == 0)
                o -= sizeof(word) - 1;
            memcpy(out + o, other, sizeof(other) - 1);
            o += sizeof(other) - 1;
            p = close + 1;
            continue;
        }
        out[o++] = *p++;
    }
    out[o] = '\0';
    return out;
}

json_t *ts_h_job_json(struct ts_ctx *ctx, const struct ts_job *job)
{
    struct ts_job seen = *job;
    seen.reason_message = ts_h_redact_projects(ctx, job->reason_message);
    json_t *o = ts_wire_job_encode(&seen);
    if (o == NULL || ts_auth_env_visible(ctx))
        return o;
    json_t *env = json_object_get(o, "env");
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v) {
        json_object_set_new(env, k, json_null());
    }
    json_object_set_new(o, "env_redacted", json_true());
    return o;
}

enum ts_err ts_h_query(struct ts_request *r, const struct ts_query_param *params, size_t n,
                       void *out, uint64_t *given, struct ts_error *err)
{
    struct ts_query_pair *pairs;
    ssize_t np = ts_http_query_pairs(r, &pairs);
    if (np < 0)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    return ts_query_decode(params, n, pairs, (size_t)np, (int64_t)time(NULL), out, given, err);
}

enum ts_err ts_h_body_decode(struct ts_request *r, ts_h_decode_fn decode, void *spec,
                             struct ts_error *err)
{
    json_t *body = NULL;
    enum ts_err e = ts_h_body(r, &body, err);
    if (e == TS_OK)
        e = decode(body, spec, err);
    json_decref(body);
    return e;
}

void ts_h_created(struct ts_request *r, const char *kind, const char *name, int64_t revision,
                  json_t *body)
{
    char loc[128];
    snprintf(loc, sizeof(loc), "/api/v1/%s/%s", kind, name);
    ts_http_add_header(r, "Location", loc);
    ts_h_etag(r, revision);
    ts_http_reply_json(r, 201, body);
}

enum ts_err ts_h_put_quota(void *ctx, struct ts_request *r, const char *what, ts_h_decode_fn decode,
                           ts_h_set_quota_fn set, ts_route_handler get, struct ts_error *err)
{
    struct ts_revisions revs;
    bool any;
    enum ts_err e = ts_h_if_match(r, &revs, &any, err);
    if (e != TS_OK)
        return e;
    struct ts_quota q;
    e = ts_h_body_decode(r, decode, &q, err);
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

enum ts_err ts_h_delete_named(void *ctx, struct ts_request *r, const char *what,
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
