/*
 * jobs.c - POST/GET /jobs, GET/DELETE /jobs/{id}, GET /jobs/{id}/events,
 * POST /jobs/{id}/suspend and /resume.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "api/log.h"
#include "server/auth.h"
#include "server/handlers/handlers.h"
#include "server/store/store.h"

#define MAX_KEY 255
#define DEFAULT_LIMIT 100
#define MAX_LIMIT 1000
/* Seconds a submission refused for its project's max_pending is told to
 * wait (Retry-After). Room comes as the project's jobs start or end, at
 * the pace of running jobs finishing (minutes), not of scheduler cycles
 * (below a second): a shorter wait makes a retrying script a request loop
 * that only costs the server; 30 s keeps it to 2 tries a minute while a
 * person waits little after room appears. */
#define PENDING_RETRY_AFTER "30"

static enum ts_err forbidden(struct ts_ctx *c, const char *project, struct ts_error *err)
{
    return ts_error_set(err, TS_ERR_FORBIDDEN, "token \"%s\" has no access to project \"%s\"",
                        c->who.name, project);
}

enum ts_err ts_h_job_submit(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    const char *key = ts_http_header(r, "Idempotency-Key");
    if (key != NULL && (key[0] == '\0' || strlen(key) > MAX_KEY))
        return ts_error_set(err, TS_ERR_BAD_PARAMETER, "Idempotency-Key must be 1 to %d characters",
                            MAX_KEY);
    json_t *body = NULL;
    enum ts_err e = ts_h_body(r, &body, err);
    if (e != TS_OK)
        return e;
    struct ts_job_spec spec;
    e = ts_wire_job_decode(body, r->arena, &spec, err);
    /* idempotency compares requests by meaning, not by whitespace or key order */
    char hash[65];
    char *canonical = e == TS_OK ? json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (canonical != NULL)
        ts_auth_sha256_hex(canonical, strlen(canonical), hash);
    free(canonical);
    json_decref(body);
    if (e != TS_OK)
        return e;
    if (canonical == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    /* idle detach not given: the kind's default, stored resolved */
    if (!spec.has_idle_swap_after)
        spec.idle_swap_after_seconds =
            spec.kind == TS_JOB_INTERACTIVE ? c->srv->cfg.idle_swap_after : 0;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    size_t nallowed;
    struct ts_job_submit s = {
        .spec = &spec,
        .allowed_projects = ts_auth_project_ids(c, &nallowed),
        .nallowed = nallowed,
        .token_id = c->who.token_id,
        .idempotency_key = key,
        .request_sha256 = hash,
        .idempotency_ttl = c->srv->cfg.idempotency_ttl,
    };
    struct ts_job job;
    bool replayed = false;
    e = ts_store_job_submit(conn, &s, r->arena, &job, &replayed, err);
    if (e == TS_ERR_FORBIDDEN)
        return forbidden(c, spec.project, err);
    if (e == TS_ERR_TOO_MANY_PENDING)
        ts_http_add_header(r, "Retry-After", PENDING_RETRY_AFTER);
    if (e != TS_OK)
        return e;
    if (!replayed)
        ts_log_info("job submitted id=%lld name=%s project=%s by=%s", (long long)job.id,
                    job.spec.name, job.spec.project, c->who.name);
    char loc[64];
    snprintf(loc, sizeof(loc), "/api/v1/jobs/%lld", (long long)job.id);
    ts_http_add_header(r, "Location", loc);
    if (replayed)
        ts_http_add_header(r, "Idempotent-Replayed", "true");
    ts_http_reply_json(r, replayed ? 200 : 201, ts_h_job_json(c, &job));
    return TS_OK;
}

/* "a,b,c" of states into f; TS_ERR_BAD_PARAMETER on an unknown one. */
static enum ts_err parse_states(const char *s, struct ts_job_filter *f, struct ts_error *err)
{
    char buf[256];
    if (strlen(s) >= sizeof(buf))
        return ts_error_set(err, TS_ERR_BAD_PARAMETER, "state filter is too long");
    strcpy(buf, s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (f->nstates >= 8)
            return ts_error_set(err, TS_ERR_BAD_PARAMETER, "too many states in the filter");
        if (ts_job_state_parse(tok, &f->states[f->nstates]) != 0)
            return ts_error_field(err, TS_ERR_BAD_PARAMETER, "state", "unknown job state: \"%s\"",
                                  tok);
        f->nstates++;
    }
    return TS_OK;
}

/* GET /jobs: what the query string may hold (the CLI's `tessera jobs`
 * sends project, state, kind, node, limit and cursor; the dashboard
 * project, state, limit and cursor). */
struct job_list_query {
    const char *project, *state, *node;
    int kind; /* in ts_job_kind_names; -1: any */
    long long limit;
    int64_t after; /* the cursor is opaque to clients: "j" and the last id seen */
};

static const struct ts_query_param job_list_params[] = {
    {.name = "project",
     .type = TS_QUERY_STRING,
     .offset = offsetof(struct job_list_query, project)},
    {.name = "state", .type = TS_QUERY_STRING, .offset = offsetof(struct job_list_query, state)},
    {.name = "kind",
     .type = TS_QUERY_ENUM,
     .offset = offsetof(struct job_list_query, kind),
     .names = ts_job_kind_names},
    {.name = "node", .type = TS_QUERY_STRING, .offset = offsetof(struct job_list_query, node)},
    {.name = "limit",
     .type = TS_QUERY_INT,
     .offset = offsetof(struct job_list_query, limit),
     .min = 1,
     .max = MAX_LIMIT},
    {.name = "cursor",
     .type = TS_QUERY_CURSOR,
     .offset = offsetof(struct job_list_query, after),
     .prefix = "j",
     .min = 0,
     .max = INT64_MAX},
};

enum ts_err ts_h_job_list(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct job_list_query q = {.kind = -1, .limit = DEFAULT_LIMIT};
    enum ts_err e = ts_h_query(r, job_list_params, TS_ARRAY_LEN(job_list_params), &q, NULL, err);
    if (e != TS_OK)
        return e;
    struct ts_job_filter f = {.limit = (int)q.limit, .after_id = q.after, .project = q.project};
    if (q.state && (e = parse_states(q.state, &f, err)) != TS_OK)
        return e;
    if (q.kind >= 0) {
        f.kind = (enum ts_job_kind)q.kind;
        f.has_kind = true;
    }
    f.node = q.node;
    f.project_ids = ts_auth_project_ids(c, &f.nproject_ids);
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    if (f.project != NULL && ts_auth_restricted(c)) {
        int64_t pid;
        if (ts_store_project_id(conn, f.project, &pid, NULL) == TS_OK &&
            !ts_auth_project_allowed(c, pid))
            return forbidden(c, f.project, err);
    }
    struct ts_job *v;
    size_t n;
    bool more;
    e = ts_store_job_list(conn, &f, r->arena, &v, &n, &more, err);
    if (e != TS_OK)
        return e;
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, ts_h_job_json(c, &v[i]));
    json_t *o = ts_h_list(items, "jobs");
    if (more && n > 0) {
        char next[32];
        snprintf(next, sizeof(next), "j%lld", (long long)v[n - 1].id);
        json_object_set_new(o, "next_cursor", json_string(next));
    } else {
        json_object_set_new(o, "next_cursor", json_null());
    }
    ts_http_reply_json(r, 200, o);
    return TS_OK;
}

/* Load the job of path parameter 0 and check the caller may see it. */
static enum ts_err load_job(struct ts_ctx *c, struct ts_request *r, struct ts_job *job,
                            struct ts_error *err)
{
    int64_t id, pid;
    enum ts_err e = ts_h_param_id(r, 0, "job", &id, err);
    if (e != TS_OK)
        return e;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    e = ts_store_job_get(conn, id, r->arena, job, &pid, err);
    if (e != TS_OK)
        return e;
    if (!ts_auth_project_allowed(c, pid))
        return forbidden(c, job->spec.project, err);
    return TS_OK;
}

enum ts_err ts_h_job_get(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct ts_job job;
    enum ts_err e = load_job(c, r, &job, err);
    if (e != TS_OK)
        return e;
    ts_http_reply_json(r, 200, ts_h_job_json(c, &job));
    return TS_OK;
}

enum ts_err ts_h_job_cancel(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct ts_job job;
    enum ts_err e = load_job(c, r, &job, err);
    if (e != TS_OK)
        return e;
    char *by = ts_arena_printf(r->arena, "token \"%s\"", c->who.name);
    e = ts_store_job_cancel(c->conn, job.id, by, r->arena, &job, err);
    if (e != TS_OK)
        return e;
    ts_log_info("job cancel id=%lld state=%s by=%s", (long long)job.id,
                ts_job_state_name(job.state), c->who.name);
    ts_http_reply_json(r, 200, ts_h_job_json(c, &job));
    return TS_OK;
}

/* Suspend or resume on request: the same access as a cancel (an admin, or a
 * member of the job's project); 202 with the job, whose state moves on when
 * its agent and the scheduler act. */
static enum ts_err suspend_or_resume(struct ts_ctx *c, struct ts_request *r, bool suspend,
                                     struct ts_error *err)
{
    struct ts_job job;
    enum ts_err e = load_job(c, r, &job, err);
    if (e != TS_OK)
        return e;
    char *by = ts_arena_printf(r->arena, "token \"%s\"", c->who.name);
    if (by == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    e = suspend ? ts_store_job_suspend(c->conn, job.id, by, r->arena, &job, err)
                : ts_store_job_resume(c->conn, job.id, by, r->arena, &job, err);
    if (e != TS_OK)
        return e;
    ts_log_info("job %s id=%lld state=%s by=%s", suspend ? "suspend" : "resume", (long long)job.id,
                ts_job_state_name(job.state), c->who.name);
    ts_http_reply_json(r, 202, ts_h_job_json(c, &job));
    return TS_OK;
}

enum ts_err ts_h_job_suspend(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return suspend_or_resume(ctx, r, true, err);
}

enum ts_err ts_h_job_resume(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return suspend_or_resume(ctx, r, false, err);
}

enum ts_err ts_h_job_events(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct ts_job job;
    enum ts_err e = load_job(c, r, &job, err);
    if (e != TS_OK)
        return e;
    struct ts_job_event *v;
    size_t n;
    e = ts_store_job_events(c->conn, job.id, r->arena, &v, &n, err);
    if (e != TS_OK)
        return e;
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++) {
        v[i].message = ts_h_redact_projects(c, v[i].message);
        json_array_append_new(items, ts_wire_job_event_encode(&v[i]));
    }
    ts_http_reply_json(r, 200, ts_h_list(items, "events"));
    return TS_OK;
}
