/*
 * series.c - GET /metrics/query?metric=&by=&key=&from=&to=&step=: the
 * metric time series in step buckets.
 *
 * The points are read at the finest resolution still kept for `from`; with
 * a step they are averaged into step buckets (a step finer than that
 * resolution is refused), without one the step is the finest resolution
 * that gives at most 1000 points. A bucket with no point is null. Members
 * and viewers limited to projects see only their projects' series with
 * by=project, their projects' departments with by=department and their
 * projects' jobs with by=job (a job named by key; another project's job is
 * 403); the cluster, node and GPU series are everyone's.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/array.h"
#include "api/units.h"
#include "server/auth.h"
#include "server/handlers/handlers.h"
#include "server/series.h"
#include "server/store/store.h"

#define MAX_POINTS 1000    /* per series */
#define MAX_ROWS 1000000   /* points with data in one answer */
#define DEFAULT_RANGE 3600 /* seconds before `to` when `from` is absent */

static enum ts_err bad(struct ts_error *err, const char *field, const char *what, const char *given)
{
    return ts_error_field(err, TS_ERR_BAD_PARAMETER, field, "%s: \"%s\"", what, given);
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return a / b + (a % b != 0 && (a < 0) == (b < 0));
}

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* The names a restricted caller may see (arena), or NULL for any: of its
 * projects, or of their departments (each once). */
static enum ts_err allowed_names(struct ts_ctx *c, struct ts_dbconn *conn, struct ts_arena *a,
                                 bool departments, const char ***names, size_t *n,
                                 struct ts_error *err)
{
    size_t nids;
    const int64_t *ids = ts_auth_project_ids(c, &nids);
    *names = NULL;
    *n = 0;
    if (ids == NULL)
        return TS_OK;
    struct ts_project *v = NULL;
    size_t np = 0;
    enum ts_err e = nids ? ts_store_project_list(conn, ids, nids, a, &v, &np, err) : TS_OK;
    if (e != TS_OK)
        return e;
    const char **out = ts_arena_alloc(a, (np ? np : 1) * sizeof(*out));
    if (out == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < np; i++) {
        const char *name = departments ? v[i].spec.department : v[i].spec.name;
        bool seen = false;
        for (size_t j = 0; j < k && !seen; j++)
            seen = strcmp(out[j], name) == 0;
        if (!seen)
            out[k++] = name;
    }
    *names = out;
    *n = k;
    return TS_OK;
}

/* Limit q to what the caller may read of a project or department scope:
 * q->keys the names allowed, a named key outside them is 403. */
static enum ts_err limit_names(struct ts_ctx *c, struct ts_series_query *q, const char **names,
                               size_t nn, const char *what, struct ts_error *err)
{
    if (names == NULL)
        return TS_OK;
    q->keys = names;
    q->nkeys = nn;
    bool ok = q->key == NULL;
    for (size_t i = 0; i < nn && !ok; i++)
        ok = strcmp(names[i], q->key) == 0;
    if (!ok)
        return ts_error_set(err, TS_ERR_FORBIDDEN, "token \"%s\" has no access to %s \"%s\"",
                            c->who.name, what, q->key);
    return TS_OK;
}

static enum ts_err access_project(struct ts_ctx *c, struct ts_dbconn *conn, struct ts_arena *a,
                                  struct ts_series_query *q, struct ts_error *err)
{
    const char **names;
    size_t nn;
    enum ts_err e = allowed_names(c, conn, a, false, &names, &nn, err);
    return e == TS_OK ? limit_names(c, q, names, nn, "project", err) : e;
}

static enum ts_err access_department(struct ts_ctx *c, struct ts_dbconn *conn, struct ts_arena *a,
                                     struct ts_series_query *q, struct ts_error *err)
{
    const char **names;
    size_t nn;
    enum ts_err e = allowed_names(c, conn, a, true, &names, &nn, err);
    return e == TS_OK ? limit_names(c, q, names, nn, "department", err) : e;
}

/* A job's key is its id. A restricted caller names one job of its projects. */
static enum ts_err access_job(struct ts_ctx *c, struct ts_dbconn *conn, struct ts_arena *a,
                              struct ts_series_query *q, struct ts_error *err)
{
    if (q->key == NULL) {
        if (!ts_auth_restricted(c))
            return TS_OK;
        ts_error_field(err, TS_ERR_BAD_PARAMETER, "key",
                       "key is required with by=job for a token limited to projects");
        ts_error_hint(err, "name the job: key=ID");
        return TS_ERR_BAD_PARAMETER;
    }
    char *end = NULL;
    errno = 0;
    long long id = strtoll(q->key, &end, 10);
    if (q->key[0] < '1' || q->key[0] > '9' || *end != '\0' || errno != 0)
        return bad(err, "key", "a job's key is its id, a positive integer", q->key);
    if (!ts_auth_restricted(c))
        return TS_OK;
    struct ts_job *job = ts_arena_alloc(a, sizeof(*job));
    if (job == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    int64_t pid;
    enum ts_err e = ts_store_job_get(conn, id, a, job, &pid, err);
    if (e != TS_OK)
        return e;
    if (!ts_auth_project_allowed(c, pid))
        return ts_error_set(err, TS_ERR_FORBIDDEN, "token \"%s\" has no access to project \"%s\"",
                            c->who.name, job->spec.project);
    return TS_OK;
}

/* The scopes of by= (the names, in the order of scope_access), and what a
 * caller limited to projects may read of each (NULL: all of it). */
static const char *const scope_names[] = {"cluster", "department", "project", "node",
                                          "gpu",     "job",        NULL};
typedef enum ts_err (*access_fn)(struct ts_ctx *c, struct ts_dbconn *conn, struct ts_arena *a,
                                 struct ts_series_query *q, struct ts_error *err);
static const access_fn scope_access[] = {NULL, access_department, access_project, NULL,
                                         NULL, access_job};
_Static_assert(TS_ARRAY_LEN(scope_access) + 1 == TS_ARRAY_LEN(scope_names),
               "one access rule per scope");

/* GET /metrics/query and /metrics/idle: what the query string may hold (the
 * CLI's `tessera top` sends metric, by and from; the dashboard's charts
 * metric, by, key, from and to, its idle hours from). from and to stay
 * INT64_MIN when absent, step 0. */
struct metrics_query {
    int metric; /* enum ts_series_metric: index in ts_series_metric_names */
    int by;     /* index in scope_names */
    const char *key;
    int64_t from, to, step;
};

#define FROM_TO_PARAMS                                                                             \
    {.name = "from",                                                                               \
     .type = TS_QUERY_TIME,                                                                        \
     .offset = offsetof(struct metrics_query, from),                                               \
     .ago = true},                                                                                 \
    {                                                                                              \
        .name = "to", .type = TS_QUERY_TIME, .offset = offsetof(struct metrics_query, to)          \
    }

static const struct ts_query_param metrics_query_params[] = {
    {.name = "metric",
     .type = TS_QUERY_ENUM,
     .offset = offsetof(struct metrics_query, metric),
     .required = true,
     .names = ts_series_metric_names},
    {.name = "by",
     .type = TS_QUERY_ENUM,
     .offset = offsetof(struct metrics_query, by),
     .names = scope_names},
    {.name = "key", .type = TS_QUERY_STRING, .offset = offsetof(struct metrics_query, key)},
    FROM_TO_PARAMS,
    {.name = "step",
     .type = TS_QUERY_DURATION,
     .offset = offsetof(struct metrics_query, step),
     .min = 1,
     .max = TS_DURATION_MAX_SECONDS},
};

static const struct ts_query_param metrics_idle_params[] = {FROM_TO_PARAMS};

/* The query string of route params into m. */
static enum ts_err metrics_decode(struct ts_request *r, const struct ts_query_param *params,
                                  size_t n, struct metrics_query *m, struct ts_error *err)
{
    *m = (struct metrics_query){.from = INT64_MIN, .to = INT64_MIN};
    return ts_h_query(r, params, n, m, NULL, err);
}

/* from and to of the query string (times or, for from, a duration
 * before now); from defaults to range seconds before to, to to now. */
static enum ts_err query_from_to(const struct metrics_query *m, int64_t now, int64_t range,
                                 int64_t *from, int64_t *to, struct ts_error *err)
{
    *to = m->to != INT64_MIN ? m->to : now;
    *from = m->from != INT64_MIN ? m->from : *to - range;
    if (*from >= *to)
        return ts_error_field(err, TS_ERR_BAD_PARAMETER, "from",
                              "from must be before to: %lld is not before %lld", (long long)*from,
                              (long long)*to);
    return TS_OK;
}

/* Level k's buckets not rolled up yet are read from the level below: the
 * minute and the hour are written once complete (store_series.c). That
 * level's resolution, or 0. */
static int64_t finer_of(const struct ts_series_levels *lv, int k)
{
    if (k <= 0 || k >= lv->n)
        return 0;
    return lv->resolution[k - 1];
}

/* The finest of the levels whose points are still kept for from (a bucket
 * of slack); the coarsest when none is. */
static int finest_level(const struct ts_series_levels *lv, int64_t from, int64_t now)
{
    for (int i = 0; i < lv->n; i++)
        if (from >= now - lv->retention[i] - lv->resolution[i])
            return i;
    return lv->n - 1;
}

/* metric, by and key of the query string into q. */
static enum ts_err query_what(const struct metrics_query *m, struct ts_series_query *q,
                              struct ts_error *err)
{
    q->metric = (enum ts_series_metric)m->metric;
    q->scope = scope_names[m->by];
    q->key = m->key;
    bool cluster = strcmp(q->scope, "cluster") == 0;
    if (cluster && q->key != NULL && q->key[0] != '\0')
        return bad(err, "key", "the cluster has no keys: leave key out", q->key);
    if (cluster)
        q->key = "";
    return TS_OK;
}

/* from, to and step into q: the finest resolution kept for from, the step
 * (given, or the one that gives at most MAX_POINTS) and *npoints. */
static enum ts_err query_range(const struct metrics_query *m, const struct ts_server_config *cfg,
                               struct ts_series_query *q, int64_t *npoints, struct ts_error *err)
{
    int64_t now = (int64_t)time(NULL), from, to;
    enum ts_err e = query_from_to(m, now, DEFAULT_RANGE, &from, &to, err);
    if (e != TS_OK)
        return e;
    int64_t step = m->step;

    struct ts_series_levels lv;
    ts_series_levels_of(cfg, &lv);
    int k = finest_level(&lv, from, now);
    if (step == 0) {
        /* the finest kept resolution that gives at most MAX_POINTS */
        while (k < lv.n - 1 && ceil_div(to - from, lv.resolution[k]) > MAX_POINTS)
            k++;
        step = lv.resolution[k];
        if (ceil_div(to - floor_div(from, step) * step, step) > MAX_POINTS)
            step = ceil_div(ceil_div(to - from, MAX_POINTS - 1), step) * step;
    } else if (step < lv.resolution[k]) {
        ts_error_field(err, TS_ERR_BAD_PARAMETER, "step",
                       "step %llds is finer than the points kept for that time: %llds",
                       (long long)step, (long long)lv.resolution[k]);
        ts_error_hint(err, "use step=%llds or more, or a later from", (long long)lv.resolution[k]);
        return TS_ERR_BAD_PARAMETER;
    }
    q->resolution = lv.resolution[k];
    q->finer = finer_of(&lv, k);
    q->step = step;
    q->start = floor_div(from, step) * step;
    q->end = to;
    *npoints = ceil_div(q->end - q->start, step);
    if (*npoints > MAX_POINTS) {
        ts_error_field(err, TS_ERR_BAD_PARAMETER, "step",
                       "the answer would hold %lld points per series, more than %d",
                       (long long)*npoints, MAX_POINTS);
        ts_error_hint(err, "use step=%llds or more, or a shorter range",
                      (long long)ceil_div(q->end - q->start, MAX_POINTS));
        return TS_ERR_BAD_PARAMETER;
    }
    return TS_OK;
}

/* The answer of q over the store's rows (new): one series per key with
 * points, a named key (and the cluster) always, npoints points each. */
static json_t *query_answer(const struct ts_series_query *q, const struct ts_series_row *rows,
                            size_t n, int64_t npoints)
{
    int64_t step = q->step;
    json_t *series = json_array();
    size_t i = 0;
    /* one series per key with points; a named key (and the cluster) always */
    bool named = q->key != NULL;
    while (i < n || named) {
        const char *key = i < n ? rows[i].key : q->key;
        json_t *points = json_array();
        for (int64_t b = 0; b < npoints; b++) {
            int64_t t = q->start + b * step;
            json_t *pt = json_array();
            json_array_append_new(pt, json_integer(t));
            if (i < n && strcmp(rows[i].key, key) == 0 && rows[i].bucket == t)
                json_array_append_new(pt, json_real(rows[i++].value));
            else
                json_array_append_new(pt, json_null());
            json_array_append_new(points, pt);
        }
        /* buckets the store gave that the loop did not meet (none expected) */
        while (i < n && strcmp(rows[i].key, key) == 0)
            i++;
        json_t *s = json_object();
        json_object_set_new(s, "key", json_string(key));
        json_object_set_new(s, "points", points);
        json_array_append_new(series, s);
        named = false;
    }
    json_t *o = json_object();
    json_object_set_new(o, "metric", json_string(ts_series_metric_name(q->metric)));
    json_object_set_new(o, "by", json_string(q->scope));
    json_object_set_new(o, "from", ts_wire_time(q->start * 1000000));
    json_object_set_new(o, "to", ts_wire_time(q->end * 1000000));
    json_object_set_new(o, "step_seconds", json_integer(step));
    json_object_set_new(o, "resolution_seconds", json_integer(q->resolution));
    json_object_set_new(o, "series", series);
    return o;
}

enum ts_err ts_h_metrics_query(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    const struct ts_server_config *cfg = &c->srv->cfg;
    struct ts_series_query q = {.max_rows = MAX_ROWS};
    struct metrics_query m;
    int64_t npoints = 0;
    enum ts_err e =
        metrics_decode(r, metrics_query_params, TS_ARRAY_LEN(metrics_query_params), &m, err);
    if (e == TS_OK)
        e = query_what(&m, &q, err);
    if (e == TS_OK)
        e = query_range(&m, cfg, &q, &npoints, err);
    if (e != TS_OK)
        return e;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    access_fn access = scope_access[m.by];
    if (access != NULL && (e = access(c, conn, r->arena, &q, err)) != TS_OK)
        return e;
    struct ts_series_row *rows;
    size_t n;
    if ((e = ts_store_series_query(conn, &q, r->arena, &rows, &n, err)) != TS_OK)
        return e;

    ts_http_reply_json(r, 200, query_answer(&q, rows, n, npoints));
    return TS_OK;
}

/* GET /metrics/idle?from=&to=: each project's allocated and idle GPU-hours
 * in the range (default: the last 24 hours), from the finest points still
 * kept for `from`. A caller limited to projects sees its projects. */
enum ts_err ts_h_metrics_idle(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    int64_t now = (int64_t)time(NULL), from, to;
    struct metrics_query m;
    enum ts_err e =
        metrics_decode(r, metrics_idle_params, TS_ARRAY_LEN(metrics_idle_params), &m, err);
    if (e == TS_OK)
        e = query_from_to(&m, now, 24 * 3600, &from, &to, err);
    if (e != TS_OK)
        return e;
    struct ts_series_levels lv;
    ts_series_levels_of(&c->srv->cfg, &lv);
    int k = finest_level(&lv, from, now);
    int64_t res = lv.resolution[k];
    int64_t start = floor_div(from, res) * res;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    const char **names;
    size_t nn;
    if ((e = allowed_names(c, conn, r->arena, false, &names, &nn, err)) != TS_OK)
        return e;
    struct ts_series_idle *v;
    size_t n;
    if ((e = ts_store_series_idle(conn, res, finer_of(&lv, k), start, to, names, nn, r->arena, &v,
                                  &n, err)) != TS_OK)
        return e;
    json_t *projects = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_object();
        json_object_set_new(p, "project", json_string(v[i].project));
        json_object_set_new(p, "idle_gpu_hours", json_real(v[i].idle_gpu_hours));
        json_object_set_new(p, "allocated_gpu_hours", json_real(v[i].allocated_gpu_hours));
        json_object_set_new(p, "utilized_gpu_hours", json_real(v[i].utilized_gpu_hours));
        json_object_set_new(p, "unused_gpu_hours", json_real(v[i].unused_gpu_hours));
        json_array_append_new(projects, p);
    }
    json_t *o = json_object();
    json_object_set_new(o, "from", ts_wire_time(start * 1000000));
    json_object_set_new(o, "to", ts_wire_time(to * 1000000));
    json_object_set_new(o, "resolution_seconds", json_integer(res));
    json_object_set_new(o, "projects", projects);
    ts_http_reply_json(r, 200, o);
    return TS_OK;
}
