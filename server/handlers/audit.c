/*
 * audit.c - GET /audit?since=&actor=&limit=&cursor= (admin only): the
 * recorded admin writes, newest first, a page at a time (server/audit.c
 * writes them).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

enum ts_err ts_h_audit_list(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_audit_filter f = {.limit = DEFAULT_LIMIT, .actor = ts_http_query(r, "actor")};
    const char *s = ts_http_query(r, "limit");
    if (s != NULL) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (s[0] == '\0' || *end != '\0' || errno != 0 || v < 1 || v > MAX_LIMIT)
            return ts_error_field(err, TS_ERR_BAD_PARAMETER, "limit",
                                  "limit must be an integer between 1 and %d: \"%s\"", MAX_LIMIT,
                                  s);
        f.limit = (int)v;
    }
    const char *cursor = ts_http_query(r, "cursor");
    if (cursor != NULL) {
        /* opaque to clients: "a" and the last id seen */
        char *end = NULL;
        errno = 0;
        f.before_id = cursor[0] == 'a' ? strtoll(cursor + 1, &end, 10) : -1;
        if (cursor[0] != 'a' || cursor[1] == '\0' || *end != '\0' || errno != 0 || f.before_id < 1)
            return ts_error_field(err, TS_ERR_BAD_PARAMETER, "cursor", "invalid cursor: \"%s\"",
                                  cursor);
    }
    f.since_s = -1;
    enum ts_err e = ts_h_query_time(r, "since", true, (int64_t)time(NULL), &f.since_s, err);
    if (e != TS_OK)
        return e;
    f.has_since = ts_http_query(r, "since") != NULL;
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
