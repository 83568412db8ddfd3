/*
 * audit.c - GET /audit?since=&actor=&limit=&cursor= (admin only): the
 * recorded admin writes, newest first, a page at a time (server/audit.c
 * writes them).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "api/array.h"
#include "server/handlers/handlers.h"
#include "server/store/store.h"

#define DEFAULT_LIMIT 100
#define MAX_LIMIT 1000

static json_t *event_json(const struct ts_audit_event *ev)
{
    json_t *changes = ev->changes ? json_loads(ev->changes, 0, NULL) : NULL;
    json_t *o = json_pack(
        "{s:I, s:o, s:{s:I, s:s, s:s}, s:s, s:s, s:o, s:o, s:i, s:s}", "id", (json_int_t)ev->id,
        "at", ts_wire_time(ev->at_us), "actor", "token_id", (json_int_t)ev->token_id, "name",
        ev->token_name, "role", ev->token_role, "method", ev->method, "path", ev->path, "target",
        ev->target ? json_string(ev->target) : json_null(), "changes",
        changes ? changes : json_null(), "status", ev->status, "request_id", ev->request_id);
    return o;
}

/* GET /audit: what the query string may hold (the CLI's `tessera audit`
 * sends limit, since, actor and cursor). */
struct audit_query {
    long long limit;
    int64_t before; /* the cursor is opaque to clients: "a" and the last id seen */
    int64_t since;
    const char *actor;
};

enum { AUDIT_SINCE = 2 }; /* its index in audit_params */

static const struct ts_query_param audit_params[] = {
    {.name = "limit",
     .type = TS_QUERY_INT,
     .offset = offsetof(struct audit_query, limit),
     .min = 1,
     .max = MAX_LIMIT},
    {.name = "cursor",
     .type = TS_QUERY_CURSOR,
     .offset = offsetof(struct audit_query, before),
     .prefix = "a",
     .min = 1,
     .max = INT64_MAX},
    [AUDIT_SINCE] = {.name = "since",
                     .type = TS_QUERY_TIME,
                     .offset = offsetof(struct audit_query, since),
                     .ago = true},
    {.name = "actor", .type = TS_QUERY_STRING, .offset = offsetof(struct audit_query, actor)},
};

enum ts_err ts_h_audit_list(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct audit_query q = {.limit = DEFAULT_LIMIT, .since = -1};
    uint64_t given;
    enum ts_err e = ts_h_query(r, audit_params, TS_ARRAY_LEN(audit_params), &q, &given, err);
    if (e != TS_OK)
        return e;
    struct ts_audit_filter f = {.limit = (int)q.limit,
                                .before_id = q.before,
                                .actor = q.actor,
                                .since_s = q.since,
                                .has_since = (given >> AUDIT_SINCE) & 1};
    struct ts_dbconn *conn = ts_ctx_db(ctx, err);
    if (conn == NULL)
        return err->code;
    struct ts_audit_event *v;
    size_t n;
    bool more;
    e = ts_store_audit_list(conn, &f, r->arena, &v, &n, &more, err);
    if (e != TS_OK)
        return e;
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, event_json(&v[i]));
    json_t *o = ts_h_list(items, "events");
    if (more && n > 0) {
        char next[32];
        snprintf(next, sizeof(next), "a%lld", (long long)v[n - 1].id);
        json_object_set_new(o, "next_cursor", json_string(next));
    } else {
        json_object_set_new(o, "next_cursor", json_null());
    }
    ts_http_reply_json(r, 200, o);
    return TS_OK;
}
