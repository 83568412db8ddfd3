/*
 * queue.c - GET /queue: pending jobs in the order the scheduler will
 * consider them, each with its position and reason.
 */
#include <stddef.h>

#include "api/array.h"
#include "server/auth.h"
#include "server/handlers/handlers.h"
#include "server/store/store.h"

/* GET /queue: what the query string may hold (the CLI's `tessera queue`
 * and the dashboard send project). */
struct queue_query {
    const char *project;
};

static const struct ts_query_param queue_params[] = {
    {.name = "project", .type = TS_QUERY_STRING, .offset = offsetof(struct queue_query, project)},
};

enum ts_err ts_h_queue(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct queue_query q = {0};
    enum ts_err qe = ts_h_query(r, queue_params, TS_ARRAY_LEN(queue_params), &q, NULL, err);
    if (qe != TS_OK)
        return qe;
    const char *project = q.project;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    if (project != NULL) {
        int64_t pid;
        enum ts_err e = ts_store_project_id(conn, project, &pid, err);
        if (e != TS_OK)
            return e;
        if (!ts_auth_project_allowed(c, pid))
            return ts_error_set(err, TS_ERR_FORBIDDEN,
                                "token \"%s\" has no access to project \"%s\"", c->who.name,
                                project);
    }
    size_t nids = 0;
    const int64_t *ids = ts_auth_project_ids(c, &nids);
    struct ts_job *v;
    size_t n;
    enum ts_err e = ts_store_queue(conn, project, ids, nids, r->arena, &v, &n, err);
    if (e != TS_OK)
        return e;
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, ts_h_job_json(c, &v[i]));
    ts_http_reply_json(r, 200, ts_h_list(items, "jobs"));
    return TS_OK;
}
