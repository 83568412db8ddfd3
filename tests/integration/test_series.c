/*
 * test_series.c - the metric time series end to end, on a server sampling
 * every second: the figures of the cluster, projects, nodes and GPUs written
 * as points with exact values, the same figures on /metrics, the query in
 * step buckets at the resolution retention allows, project series limited
 * to a member's projects, roll-ups as averages with their sample count, and
 * expiry past retention. Nodes, GPUs, placements and samples are set with
 * SQL until agents and the scheduler fill them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "api/clock.h"

#include "api/array.h"
#include "tests/integration/harness.h"

#define GIB 1073741824LL

static struct ts_it_server srv;
static char member1[128];
static long long t_setup; /* unix seconds when placements and samples were set */

static const char *sql1(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *sql1(const char *fmt, ...)
{
    static char out[4096];
    char q[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q, sizeof(q), fmt, ap);
    va_end(ap);
    if (ts_it_sql(&srv, q, out, sizeof(out)) != 0)
        snprintf(out, sizeof(out), "(error)");
    return out;
}

static long long db_now(void)
{
    return atoll(sql1("SELECT floor(extract(epoch FROM now()))::bigint"));
}

/* Wait until sql returns "t" (up to timeout_ms). */
static bool wait_sql(int timeout_ms, const char *sql)
{
    for (int waited = 0; waited <= timeout_ms; waited += 100) {
        if (strcmp(sql1("%s", sql), "t") == 0)
            return true;
        ts_sleep_ms(100);
    }
    return false;
}

static void rfc3339(long long t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* GET /api/v1/metrics/query?<query> with a token; the response in *r. */
static long query(const char *token, const char *q, struct ts_response *r)
{
    char path[1024];
    snprintf(path, sizeof(path), "/api/v1/metrics/query?%s", q);
    struct ts_client *c = ts_it_client(&srv, token);
    long st = ts_it_req(c, "GET", path, NULL, NULL, r);
    ts_client_free(c);
    return st;
}

static json_t *series_of(const json_t *o, const char *key)
{
    json_t *s;
    size_t i;
    json_array_foreach(json_object_get(o, "series"), i, s) {
        if (strcmp(ts_it_str(s, "key"), key) == 0)
            return s;
    }
    return NULL;
}

/* Every non-null point of the series equals want, and there is one. */
static void assert_series_is(const json_t *o, const char *key, double want)
{
    json_t *s = series_of(o, key);
    if (s == NULL)
        fail_msg("no series \"%s\"", key);
    json_t *p;
    size_t i;
    int seen = 0;
    json_array_foreach(json_object_get(s, "points"), i, p) {
        json_t *v = json_array_get(p, 1);
        if (json_is_null(v))
            continue;
        seen++;
        if (json_number_value(v) != want)
            fail_msg("series \"%s\" at %lld: %g, want %g", key,
                     (long long)json_integer_value(json_array_get(p, 0)), json_number_value(v),
                     want);
    }
    if (seen == 0)
        fail_msg("series \"%s\" has no points", key);
}

static void the_sampler_writes_every_scope_each_interval_with_exact_figures(void **state)
{
    char cond[1024];
    snprintf(cond, sizeof(cond),
             "SELECT count(*) > 0 FROM metric_point WHERE resolution_s = 1 AND scope = 'cluster'"
             " AND at >= to_timestamp(%lld)",
             t_setup + 2);
    assert_true(wait_sql(10000, cond));
    const char *got = sql1(
        "SELECT string_agg(scope || ':' || key || '=' || capacity || ',' || allocated || ','"
        " || utilized || ',' || memory_used_bytes || ',' || running_jobs || ',' || pending_jobs"
        " || ',' || samples, ' ' ORDER BY scope, key) FROM metric_point"
        " WHERE resolution_s = 1 AND at = to_timestamp(%lld)",
        t_setup + 2);
    /* the department is its projects' sum; jobs 1 to 3 are j1 to j3 */
    assert_string_equal(got, "cluster:=2,2.5,1.75,17179869184,3,1,1"
                             " department:d=0,2.5,1.75,17179869184,3,1,1"
                             " gpu:n1/0=1,1,0.5,10737418240,1,0,1"
                             " gpu:n1/1=1,0.5,0.25,5368709120,1,0,1"
                             " gpu:n2/0=1,1,1,1073741824,1,0,1"
                             " job:1=1,1,0.5,10737418240,1,0,1"
                             " job:2=0.5,0.5,0.25,5368709120,1,0,1"
                             " job:3=1,1,1,1073741824,1,0,1"
                             " node:n1=2,1.5,0.75,16106127360,2,0,1"
                             " node:n2=1,1,1,1073741824,1,0,1"
                             " project:p1=2,2,1.5,11811160064,2,1,1"
                             " project:p2=1.5,0.5,0.25,5368709120,1,0,1");
    /* buckets are whole seconds, one per interval, each written once */
    assert_string_equal(sql1("SELECT count(*) FROM metric_point WHERE resolution_s = 1"
                             " AND extract(epoch FROM at) <> floor(extract(epoch FROM at))"),
                        "0");
    assert_string_equal(sql1("SELECT count(DISTINCT at) >= 3 FROM metric_point"
                             " WHERE resolution_s = 1 AND scope = 'cluster'"),
                        "t");
}

static void the_query_answers_with_the_figures_of_each_key(void **state)
{
    while (db_now() < t_setup + 5) /* a few points after the set-up */
        ts_sleep_ms(200);
    char from[64], q[256];
    rfc3339(t_setup + 2, from, sizeof(from));
    struct ts_response r;
    snprintf(q, sizeof(q), "metric=allocated&by=gpu&from=%s&step=1s", from);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, q, &r), 200);
    assert_string_equal(ts_it_str(r.json, "metric"), "allocated");
    assert_string_equal(ts_it_str(r.json, "by"), "gpu");
    assert_int_equal(ts_it_int(r.json, "step_seconds"), 1);
    assert_int_equal(ts_it_int(r.json, "resolution_seconds"), 1);
    assert_int_equal(json_array_size(json_object_get(r.json, "series")), 3);
    assert_series_is(r.json, "n1/0", 1);
    assert_series_is(r.json, "n1/1", 0.5);
    assert_series_is(r.json, "n2/0", 1);
    ts_response_free(&r);

    snprintf(q, sizeof(q), "metric=utilized&by=project&from=%s", from);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, q, &r), 200);
    assert_series_is(r.json, "p1", 1.5);
    assert_series_is(r.json, "p2", 0.25);
    ts_response_free(&r);

    snprintf(q, sizeof(q), "metric=capacity&from=%s", from);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, q, &r), 200);
    assert_string_equal(ts_it_str(r.json, "by"), "cluster");
    assert_series_is(r.json, "", 2);
    ts_response_free(&r);

    snprintf(q, sizeof(q), "metric=running_jobs&by=node&key=n1&from=%s", from);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, q, &r), 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "series")), 1);
    assert_series_is(r.json, "n1", 2);
    ts_response_free(&r);

    snprintf(q, sizeof(q), "metric=memory_used_bytes&by=cluster&from=%s", from);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, q, &r), 200);
    assert_series_is(r.json, "", 16.0 * GIB);
    ts_response_free(&r);

    snprintf(q, sizeof(q), "metric=pending_jobs&by=project&key=p1&from=%s", from);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, q, &r), 200);
    assert_series_is(r.json, "p1", 1);
    ts_response_free(&r);
}

static void metrics_shows_the_same_figures(void **state)
{
    struct ts_response r;
    assert_int_equal(ts_it_req(srv.admin, "GET", "/metrics", NULL, NULL, &r), 200);
    static const char *const lines[] = {
        "\ntessera_cluster_gpus 2\n",
        "\ntessera_cluster_allocated_gpus 2.5\n",
        "\ntessera_cluster_utilized_gpus 1.75\n",
        "\ntessera_cluster_pending_jobs 1\n",
        "\ntessera_project_quota_gpus{project=\"p2\"} 1.5\n",
        "\ntessera_project_allocated_gpus{project=\"p1\"} 2\n",
        "\ntessera_project_utilized_gpus{project=\"p2\"} 0.25\n",
        "\ntessera_node_allocated_gpus{node=\"n1\"} 1.5\n",
        "\ntessera_node_gpus{node=\"n2\"} 1\n",
        "\ntessera_gpu_allocated_ratio{node=\"n1\",gpu=\"1\",UUID=\"u-n1-1\",modelName=\"H100\","
        "Hostname=\"n1\"} 0.5\n",
        "\ntessera_gpu_utilization_ratio{node=\"n1\",gpu=\"0\",UUID=\"u-n1-0\",modelName=\"H100\","
        "Hostname=\"n1\"} 0.5\n",
        "\ntessera_gpu_memory_used_bytes{node=\"n2\",gpu=\"0\",UUID=\"u-n2-0\",modelName=\"A100\","
        "Hostname=\"n2\"} 1073741824\n",
        "\ntessera_gpu_memory_total_bytes{node=\"n1\",gpu=\"1\",UUID=\"u-n1-1\",modelName=\"H100\","
        "Hostname=\"n1\"} 85899345920\n",
        "\ntessera_gpu_memory_free_bytes{node=\"n1\",gpu=\"1\",UUID=\"u-n1-1\",modelName=\"H100\","
        "Hostname=\"n1\"} 80530636800\n",
        "\ntessera_node_gpu_memory_total_bytes{node=\"n1\"} 171798691840\n",
        "\ntessera_cluster_gpu_memory_total_bytes 214748364800\n",
        "\ntessera_cluster_gpu_memory_free_bytes 197568495616\n",
        "\n# TYPE tessera_gpu_allocated_ratio gauge\n",
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(lines); i++)
        if (strstr(r.body.data, lines[i]) == NULL)
            fail_msg("/metrics lacks %s", lines[i] + 1);
    ts_response_free(&r);
}

static void members_see_only_their_projects_series(void **state)
{
    char from[64], q[256];
    rfc3339(t_setup + 2, from, sizeof(from));
    struct ts_response r;
    snprintf(q, sizeof(q), "metric=allocated&by=project&from=%s", from);
    assert_int_equal(query(member1, q, &r), 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "series")), 1);
    assert_series_is(r.json, "p1", 2);
    ts_response_free(&r);
    snprintf(q, sizeof(q), "metric=allocated&by=project&key=p2&from=%s", from);
    assert_int_equal(query(member1, q, &r), 403);
    assert_string_equal(ts_it_str(r.json, "code"), "forbidden");
    ts_response_free(&r);
    /* the cluster's nodes and GPUs are everyone's */
    snprintf(q, sizeof(q), "metric=allocated&by=gpu&from=%s", from);
    assert_int_equal(query(member1, q, &r), 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "series")), 3);
    ts_response_free(&r);
}

static void steps_average_the_points_in_them(void **state)
{
    long long t0 = (db_now() - 300) / 10 * 10;
    for (int i = 0; i < 10; i++)
        sql1("INSERT INTO metric_point (resolution_s, scope, key, at, running_jobs)"
             " VALUES (1, 'node', 'syn', to_timestamp(%lld), %d)",
             t0 + i, i + 1);
    char from[64], to[64], q[256];
    rfc3339(t0, from, sizeof(from));
    rfc3339(t0 + 10, to, sizeof(to));
    struct ts_response r;
    snprintf(q, sizeof(q), "metric=running_jobs&by=node&key=syn&from=%s&to=%s&step=5s", from, to);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, q, &r), 200);
    json_t *pts = json_object_get(series_of(r.json, "syn"), "points");
    assert_int_equal(json_array_size(pts), 2);
    assert_int_equal(json_integer_value(json_array_get(json_array_get(pts, 0), 0)), t0);
    assert_true(json_number_value(json_array_get(json_array_get(pts, 0), 1)) == 3.0);
    assert_int_equal(json_integer_value(json_array_get(json_array_get(pts, 1), 0)), t0 + 5);
    assert_true(json_number_value(json_array_get(json_array_get(pts, 1), 1)) == 8.0);
    ts_response_free(&r);
    /* a bucket with no point is null; an unknown key is one series of nulls */
    snprintf(q, sizeof(q), "metric=running_jobs&by=node&key=none&from=%s&to=%s&step=5s", from, to);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, q, &r), 200);
    pts = json_object_get(series_of(r.json, "none"), "points");
    assert_int_equal(json_array_size(pts), 2);
    assert_true(json_is_null(json_array_get(json_array_get(pts, 0), 1)));
    ts_response_free(&r);
}

static void the_resolution_is_the_finest_still_kept_for_from(void **state)
{
    long long now = db_now();
    long long t = (now - 48 * 3600) / 60 * 60;
    sql1("INSERT INTO metric_point (resolution_s, scope, key, at, running_jobs)"
         " VALUES (60, 'node', 'old', to_timestamp(%lld), 7)",
         t);
    char from[64], to[64], q[256];
    rfc3339(t - 600, from, sizeof(from));
    rfc3339(t + 600, to, sizeof(to));
    struct ts_response r;
    snprintf(q, sizeof(q), "metric=running_jobs&by=node&key=old&from=%s&to=%s", from, to);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, q, &r), 200);
    assert_int_equal(ts_it_int(r.json, "resolution_seconds"), 60);
    assert_int_equal(ts_it_int(r.json, "step_seconds"), 60);
    json_t *pts = json_object_get(series_of(r.json, "old"), "points");
    assert_int_equal(json_array_size(pts), 20);
    assert_int_equal(json_integer_value(json_array_get(json_array_get(pts, 10), 0)), t);
    assert_true(json_number_value(json_array_get(json_array_get(pts, 10), 1)) == 7.0);
    ts_response_free(&r);
    /* the 1 s points of two days ago are gone: a finer step is refused */
    snprintf(q, sizeof(q), "metric=running_jobs&by=node&key=old&from=%s&to=%s&step=10s", from, to);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, q, &r), 400);
    assert_string_equal(ts_it_str(r.json, "field"), "step");
    ts_response_free(&r);
    /* three days in 1 min points is too many: hourly points, one an hour */
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "metric=running_jobs&by=node&from=3d", &r), 200);
    assert_int_equal(ts_it_int(r.json, "resolution_seconds"), 3600);
    assert_int_equal(ts_it_int(r.json, "step_seconds"), 3600);
    ts_response_free(&r);
    /* the last hour fits in 1 s points? 3600 > 1000: 60 s points */
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "metric=running_jobs&from=1h", &r), 200);
    assert_int_equal(ts_it_int(r.json, "resolution_seconds"), 60);
    ts_response_free(&r);
    /* an explicit step giving more than 1000 points is refused with a hint */
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "metric=running_jobs&from=2h&step=1s", &r), 400);
    assert_string_equal(ts_it_str(r.json, "code"), "bad_parameter");
    assert_non_null(strstr(ts_it_str(r.json, "hint"), "step="));
    ts_response_free(&r);
}

static void old_points_are_deleted_past_retention(void **state)
{
    sql1("INSERT INTO metric_point (resolution_s, scope, key, at) VALUES"
         " (1, 'node', 'exp', now() - interval '25 hours'),"
         " (1, 'node', 'exp', now() - interval '23 hours'),"
         " (60, 'node', 'exp', now() - interval '8 days'),"
         " (60, 'node', 'exp', now() - interval '6 days'),"
         " (3600, 'node', 'exp', now() - interval '91 days'),"
         " (3600, 'node', 'exp', now() - interval '89 days')");
    assert_true(wait_sql(5000, "SELECT count(*) = 3 FROM metric_point WHERE key = 'exp'"));
    assert_string_equal(sql1("SELECT string_agg(resolution_s::text, ',' ORDER BY resolution_s)"
                             " FROM metric_point WHERE key = 'exp'"),
                        "1,60,3600");
}

/* The database's time, at least 2 minutes into the hour and 2 before its
 * end (waiting when it is not): the hour's first minutes are written and the
 * hour does not end during the test. */
static long long hour_inside(void)
{
    long long now = db_now();
    if (now % 3600 < 120 || now % 3600 > 3480) {
        ts_sleep_ms((int)((3720 - now % 3600) % 3600) * 1000);
        now = db_now();
    }
    return now;
}

static void minutes_and_hours_are_averages_of_finer_points(void **state)
{
    long long now = db_now();
    if (now % 60 > 50) { /* leave the sampler time to roll this minute up */
        ts_sleep_ms((int)(61 - now % 60) * 1000);
        now = db_now();
    }
    long long m = now / 60 * 60;
    sql1("INSERT INTO metric_point (resolution_s, scope, key, at, allocated) VALUES"
         " (1, 'node', 'roll', to_timestamp(%lld), 1),"
         " (1, 'node', 'roll', to_timestamp(%lld), 2),"
         " (1, 'node', 'roll', to_timestamp(%lld), 6)",
         m, m + 1, m + 2);
    char cond[1024];
    snprintf(cond, sizeof(cond),
             "SELECT count(*) > 0 FROM metric_point WHERE resolution_s = 60 AND key = 'roll'"
             " AND at = to_timestamp(%lld)",
             m);
    assert_true(wait_sql(70000, cond)); /* written when the minute is complete */
    assert_string_equal(sql1("SELECT allocated || ',' || samples FROM metric_point"
                             " WHERE resolution_s = 60 AND key = 'roll'"),
                        "3,3");
    /* the real series: a minute's point averages its 1 s points */
    snprintf(cond, sizeof(cond),
             "SELECT (SELECT samples FROM metric_point WHERE resolution_s = 60"
             "  AND scope = 'cluster' AND at = to_timestamp(%lld)) ="
             " (SELECT count(*) FROM metric_point WHERE resolution_s = 1 AND scope = 'cluster'"
             "  AND at >= to_timestamp(%lld) AND at < to_timestamp(%lld))",
             m, m, m + 60);
    assert_string_equal(sql1("%s", cond), "t");

    /* hours: two minutes of the hour before this one, which has no point
     * (as if the tick of its last minute was missed: deleted), rolled up
     * when the next minute is written */
    now = hour_inside();
    long long h = now / 3600 * 3600 - 3600;
    sql1("DELETE FROM metric_point WHERE resolution_s = 3600 AND at = to_timestamp(%lld)", h);
    sql1("INSERT INTO metric_point (resolution_s, scope, key, at, allocated, samples) VALUES"
         " (60, 'node', 'hour', to_timestamp(%lld), 2, 60),"
         " (60, 'node', 'hour', to_timestamp(%lld), 4, 60)",
         h + 60, h + 120);
    snprintf(cond, sizeof(cond),
             "SELECT count(*) > 0 FROM metric_point WHERE resolution_s = 3600 AND key = 'hour'"
             " AND at = to_timestamp(%lld)",
             h);
    assert_true(wait_sql(70000, cond));
    assert_string_equal(sql1("SELECT allocated || ',' || samples FROM metric_point"
                             " WHERE resolution_s = 3600 AND key = 'hour'"),
                        "3,2");
}

/* A minute's point is written once, when the minute is complete (issue 15:
 * recomputing the current minute at every tick was the sampler's largest
 * cost): none while the minute runs, which a query at 60 s answers from its
 * finer points as before; and a complete minute that has none (its last
 * tick missed, here deleted) gets it at the next tick, averaging all its
 * points. */
static void a_minute_is_written_once_complete(void **state)
{
    (void)state;
    long long now = db_now();
    if (now % 60 < 5 || now % 60 > 50) { /* well inside a minute */
        ts_sleep_ms((int)(65 - now % 60) % 60 * 1000);
        now = db_now();
    }
    long long m = now / 60 * 60;
    ts_sleep_ms(2000); /* two ticks in this minute */
    assert_string_equal(sql1("SELECT count(*) FROM metric_point WHERE resolution_s = 60"
                             " AND at = to_timestamp(%lld)",
                             m),
                        "0");
    /* yet a query at 60 s has the running minute: its points' average (a
     * project's capacity is its quota, the same at every point) */
    double quota = atof(sql1("SELECT quota_gpus FROM project WHERE name = 'p1'"));
    assert_true(quota > 0);
    struct ts_response r;
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "metric=capacity&by=project&key=p1", &r), 200);
    assert_int_equal(ts_it_int(r.json, "resolution_seconds"), 60);
    json_t *pts = json_object_get(series_of(r.json, "p1"), "points");
    json_t *last = json_array_get(pts, json_array_size(pts) - 1);
    assert_int_equal(json_integer_value(json_array_get(last, 0)), m);
    assert_true(json_number_value(json_array_get(last, 1)) == quota);
    ts_response_free(&r);
    sql1("DELETE FROM metric_point WHERE resolution_s = 60 AND at = to_timestamp(%lld)", m - 60);
    char cond[1024];
    snprintf(cond, sizeof(cond),
             "SELECT (SELECT samples FROM metric_point WHERE resolution_s = 60"
             "  AND scope = 'cluster' AND at = to_timestamp(%lld)) ="
             " (SELECT count(*) FROM metric_point WHERE resolution_s = 1 AND scope = 'cluster'"
             "  AND at >= to_timestamp(%lld) AND at < to_timestamp(%lld))",
             m - 60, m - 60, m);
    assert_true(wait_sql(5000, cond));
}

/* An hour's point is written once, when the hour is complete (issue 15:
 * recomputing the current hour from its minutes at every minute): none
 * while the hour runs, though minutes of it are written, and a query at
 * 3600 s answers it from its minutes as before. (The hour before, complete,
 * is written at the next minute: minutes_and_hours_are_averages_of_finer_points.) */
static void an_hour_is_written_once_complete(void **state)
{
    (void)state;
    long long now = hour_inside();
    long long h = now / 3600 * 3600;
    char cond[512];
    snprintf(cond, sizeof(cond),
             "SELECT count(*) > 0 FROM metric_point WHERE resolution_s = 60 AND scope = 'cluster'"
             " AND at >= to_timestamp(%lld)",
             h);
    assert_true(wait_sql(70000, cond)); /* a minute of this hour is written */
    assert_string_equal(sql1("SELECT count(*) FROM metric_point WHERE resolution_s = 3600"
                             " AND at = to_timestamp(%lld)",
                             h),
                        "0");
    double quota = atof(sql1("SELECT quota_gpus FROM project WHERE name = 'p1'"));
    assert_true(quota > 0);
    struct ts_response r;
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "metric=capacity&by=project&key=p1&from=3d", &r),
                     200);
    assert_int_equal(ts_it_int(r.json, "resolution_seconds"), 3600);
    json_t *pts = json_object_get(series_of(r.json, "p1"), "points");
    json_t *last = json_array_get(pts, json_array_size(pts) - 1);
    assert_int_equal(json_integer_value(json_array_get(last, 0)), h);
    assert_true(json_number_value(json_array_get(last, 1)) == quota);
    ts_response_free(&r);
}

static void an_interval_that_does_not_divide_a_minute_is_refused(void **state)
{
    struct ts_it_server other;
    static const char *const args[] = {"--series-interval", "7s", NULL};
    assert_int_equal(ts_it_start(&other, NULL, args), -1);
    ts_it_stop(&other);
    ts_it_cleanup(&other);
}

static long long submit(const char *name, const char *project, const char *gpu)
{
    char body[512];
    snprintf(body, sizeof(body),
             "{\"name\":\"%s\",\"project\":\"%s\",\"command\":[\"x\"],\"gpu\":%s}", name, project,
             gpu);
    struct ts_response r;
    long long id = -1;
    if (ts_it_req(srv.admin, "POST", "/api/v1/jobs", body, NULL, &r) == 201)
        id = ts_it_int(r.json, "id");
    else
        fprintf(stderr, "submit %s: %s\n", name, r.body.data);
    ts_response_free(&r);
    return id;
}

static int setup(void **state)
{
    ts_client_global_init();
    static const char *const args[] = {"--series-interval", "1s", NULL};
    if (ts_it_start(&srv, NULL, args) != 0)
        return -1;
    struct ts_client *a = srv.admin;
    if (ts_it_req(a, "POST", "/api/v1/departments", "{\"name\":\"d\"}", NULL, NULL) != 201 ||
        ts_it_req(a, "POST", "/api/v1/projects",
                  "{\"name\":\"p1\",\"department\":\"d\",\"quota\":{\"gpus\":2}}", NULL,
                  NULL) != 201 ||
        ts_it_req(a, "POST", "/api/v1/projects",
                  "{\"name\":\"p2\",\"department\":\"d\",\"quota\":{\"gpus\":1.5}}", NULL,
                  NULL) != 201)
        return -1;
    snprintf(member1, sizeof(member1), "%s", ts_it_token(&srv, "m1", "member", "[\"p1\"]"));
    long long j1 = submit("j1", "p1", "{\"count\":1}");
    long long j2 = submit("j2", "p2", "{\"portion\":0.5}");
    long long j3 = submit("j3", "p1", "{\"count\":1}");
    /* pending, and never placeable: a model no node has */
    char body[256];
    snprintf(body, sizeof(body),
             "{\"name\":\"j4\",\"project\":\"p1\",\"command\":[\"x\"],"
             "\"gpu\":{\"count\":1},\"gpu_model\":[\"none-such\"]}");
    long long j4 = ts_it_req(a, "POST", "/api/v1/jobs", body, NULL, NULL) == 201 ? 1 : -1;
    if (!member1[0] || j1 < 0 || j2 < 0 || j3 < 0 || j4 < 0)
        return -1;
    /* n1: two 80 GiB GPUs, ready; n2: one 40 GiB GPU, drained (its job
     * keeps running). j1 holds n1/0, j2 half of n1/1, j3 all of n2/0. */
    char sql[4096];
    snprintf(sql, sizeof(sql),
             "INSERT INTO node (name, state, last_seen_at) VALUES ('n1', 'ready', now()),"
             " ('n2', 'drained', now());"
             "INSERT INTO gpu (node_id, idx, uuid, model, memory_bytes, utilization,"
             " memory_used_bytes, sampled_at)"
             " SELECT id, 0, 'u-n1-0', 'H100', 80 * %lld::bigint, 0.5, 10 * %lld::bigint, now() "
             "FROM node"
             "  WHERE name = 'n1' UNION ALL"
             " SELECT id, 1, 'u-n1-1', 'H100', 80 * %lld::bigint, 0.25, 5 * %lld::bigint, now() "
             "FROM node"
             "  WHERE name = 'n1' UNION ALL"
             " SELECT id, 0, 'u-n2-0', 'A100', 40 * %lld::bigint, 1, %lld, now() FROM node WHERE "
             "name = 'n2';"
             "UPDATE job SET state = 'running', attempt = 1, started_at = now(),"
             " node_id = (SELECT id FROM node WHERE name = 'n1'), gpu_utilization = 0.5,"
             " gpu_memory_used_bytes = 10 * %lld::bigint WHERE id = %lld;"
             "UPDATE job SET state = 'running', attempt = 1, started_at = now(),"
             " node_id = (SELECT id FROM node WHERE name = 'n1'), gpu_utilization = 0.25,"
             " gpu_memory_used_bytes = 5 * %lld::bigint WHERE id = %lld;"
             "UPDATE job SET state = 'running', attempt = 1, started_at = now(),"
             " node_id = (SELECT id FROM node WHERE name = 'n2'), gpu_utilization = 1,"
             " gpu_memory_used_bytes = %lld WHERE id = %lld;"
             "INSERT INTO job_gpu (job_id, gpu_id, memory_bytes)"
             " SELECT %lld, id, 80 * %lld::bigint FROM gpu WHERE uuid = 'u-n1-0' UNION ALL"
             " SELECT %lld, id, 40 * %lld::bigint FROM gpu WHERE uuid = 'u-n1-1' UNION ALL"
             " SELECT %lld, id, 40 * %lld::bigint FROM gpu WHERE uuid = 'u-n2-0';",
             GIB, GIB, GIB, GIB, GIB, GIB, GIB, j1, GIB, j2, GIB, j3, j1, GIB, j2, GIB, j3, GIB);
    char out[8];
    if (ts_it_sql(&srv, sql, out, sizeof(out)) != 0)
        return -1;
    t_setup = db_now();
    return 0;
}

static int teardown(void **state)
{
    int rc = ts_it_stop(&srv);
    ts_it_cleanup(&srv);
    return rc;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_sampler_writes_every_scope_each_interval_with_exact_figures),
        cmocka_unit_test(the_query_answers_with_the_figures_of_each_key),
        cmocka_unit_test(metrics_shows_the_same_figures),
        cmocka_unit_test(members_see_only_their_projects_series),
        cmocka_unit_test(steps_average_the_points_in_them),
        cmocka_unit_test(the_resolution_is_the_finest_still_kept_for_from),
        cmocka_unit_test(old_points_are_deleted_past_retention),
        cmocka_unit_test(minutes_and_hours_are_averages_of_finer_points),
        cmocka_unit_test(a_minute_is_written_once_complete),
        cmocka_unit_test(an_hour_is_written_once_complete),
        cmocka_unit_test(an_interval_that_does_not_divide_a_minute_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
