/*
 * test_series_scopes.c - the department and job series, pending demand and
 * idle GPU-hours (issue 18), on a server sampling every second. One GPU of
 * n1 is shared by an idle job of p1 and a busy job of p2 (the GPU itself
 * is 40 % busy, so no per-GPU rule would call it idle); the other holds a
 * busy job of p3; pending jobs ask 0.5 GPU (p1) and 2 GPUs (p3). Nodes,
 * placements and samples are set with SQL, as in test_series.c.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "api/array.h"
#include "tests/integration/harness.h"

#define GIB 1073741824LL

static struct ts_it_server srv;
static char member1[128];
static long long t_setup;
static long long j_idle, j_busy, j_other;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

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

static void rfc3339(long long t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static long get(const char *token, const char *path, struct ts_response *r)
{
    struct ts_client *c = ts_it_client(&srv, token);
    long st = ts_it_req(c, "GET", path, NULL, NULL, r);
    ts_client_free(c);
    return st;
}

/* GET /metrics/query of metric by scope from t_setup+2 to t_setup+6. */
static long query(const char *token, const char *metric, const char *by, const char *key,
                  struct ts_response *r)
{
    char from[64], to[64], path[512];
    rfc3339(t_setup + 2, from, sizeof(from));
    rfc3339(t_setup + 6, to, sizeof(to));
    snprintf(path, sizeof(path), "/api/v1/metrics/query?metric=%s&by=%s%s%s&from=%s&to=%s&step=1s",
             metric, by, key ? "&key=" : "", key ? key : "", from, to);
    return get(token, path, r);
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

/* Every point of the series equals want (none null). */
static void assert_series_is(const json_t *o, const char *key, double want)
{
    json_t *s = series_of(o, key);
    if (s == NULL)
        fail_msg("no series \"%s\"", key);
    json_t *p;
    size_t i;
    json_array_foreach(json_object_get(s, "points"), i, p) {
        json_t *v = json_array_get(p, 1);
        if (json_is_null(v) || fabs(json_number_value(v) - want) > 1e-9)
            fail_msg("series \"%s\" at %lld: %s%g, want %g", key,
                     (long long)json_integer_value(json_array_get(p, 0)),
                     json_is_null(v) ? "null " : "", json_number_value(v), want);
    }
    if (i != 4)
        fail_msg("series \"%s\" has %zu points, want 4", key, i);
}

static void wait_points(void)
{
    while (db_now() < t_setup + 7)
        sleep_ms(200);
}

static void departments_are_the_sum_of_their_projects(void **state)
{
    wait_points();
    struct ts_response r;
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "allocated", "department", NULL, &r), 200);
    assert_string_equal(ts_it_str(r.json, "by"), "department");
    assert_int_equal(json_array_size(json_object_get(r.json, "series")), 2);
    assert_series_is(r.json, "d1", 1);
    assert_series_is(r.json, "d2", 1);
    ts_response_free(&r);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "utilized", "department", NULL, &r), 200);
    assert_series_is(r.json, "d1", 0.4);
    assert_series_is(r.json, "d2", 0.9);
    ts_response_free(&r);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "capacity", "department", "d1", &r), 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "series")), 1);
    assert_series_is(r.json, "d1", 3);
    ts_response_free(&r);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "running_jobs", "department", "d1", &r), 200);
    assert_series_is(r.json, "d1", 2);
    ts_response_free(&r);
}

static void each_running_job_has_its_own_series(void **state)
{
    wait_points();
    char k1[32], k2[32], k3[32];
    snprintf(k1, sizeof(k1), "%lld", j_idle);
    snprintf(k2, sizeof(k2), "%lld", j_busy);
    snprintf(k3, sizeof(k3), "%lld", j_other);
    struct ts_response r;
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "utilized", "job", NULL, &r), 200);
    assert_string_equal(ts_it_str(r.json, "by"), "job");
    assert_int_equal(json_array_size(json_object_get(r.json, "series")), 3);
    assert_series_is(r.json, k1, 0);
    assert_series_is(r.json, k2, 0.4);
    assert_series_is(r.json, k3, 0.9);
    ts_response_free(&r);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "allocated", "job", k1, &r), 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "series")), 1);
    assert_series_is(r.json, k1, 0.5);
    ts_response_free(&r);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "capacity", "job", k3, &r), 200);
    assert_series_is(r.json, k3, 1);
    ts_response_free(&r);
    /* a job's key is its id */
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "allocated", "job", "j1", &r), 400);
    assert_string_equal(ts_it_str(r.json, "code"), "bad_parameter");
    ts_response_free(&r);
}

static void an_idle_job_on_a_shared_gpu_counts_as_idle_and_a_busy_one_does_not(void **state)
{
    wait_points();
    char k1[32], k2[32];
    snprintf(k1, sizeof(k1), "%lld", j_idle);
    snprintf(k2, sizeof(k2), "%lld", j_busy);
    struct ts_response r;
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "idle_gpus", "job", NULL, &r), 200);
    assert_series_is(r.json, k1, 0.5);
    assert_series_is(r.json, k2, 0);
    ts_response_free(&r);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "idle_gpus", "project", NULL, &r), 200);
    assert_series_is(r.json, "p1", 0.5);
    assert_series_is(r.json, "p2", 0);
    assert_series_is(r.json, "p3", 0);
    ts_response_free(&r);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "idle_gpus", "department", NULL, &r), 200);
    assert_series_is(r.json, "d1", 0.5);
    assert_series_is(r.json, "d2", 0);
    ts_response_free(&r);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "idle_gpus", "cluster", NULL, &r), 200);
    assert_series_is(r.json, "", 0.5);
    ts_response_free(&r);
}

static void pending_demand_is_the_gpus_pending_jobs_ask(void **state)
{
    wait_points();
    struct ts_response r;
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "pending_gpus", "project", NULL, &r), 200);
    assert_series_is(r.json, "p1", 0.5);
    assert_series_is(r.json, "p2", 0);
    assert_series_is(r.json, "p3", 2);
    ts_response_free(&r);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "pending_gpus", "department", NULL, &r), 200);
    assert_series_is(r.json, "d1", 0.5);
    assert_series_is(r.json, "d2", 2);
    ts_response_free(&r);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "pending_gpus", "cluster", NULL, &r), 200);
    assert_series_is(r.json, "", 2.5);
    ts_response_free(&r);
}

static double hours_of(const json_t *o, const char *project, const char *field)
{
    json_t *p;
    size_t i;
    json_array_foreach(json_object_get(o, "projects"), i, p) {
        if (strcmp(ts_it_str(p, "project"), project) == 0)
            return json_number_value(json_object_get(p, field));
    }
    fail_msg("no project \"%s\"", project);
    return -1;
}

static void idle_gpu_hours_integrate_the_idle_allocation_per_project(void **state)
{
    wait_points();
    char from[64], to[64], path[256];
    rfc3339(t_setup + 2, from, sizeof(from));
    rfc3339(t_setup + 6, to, sizeof(to));
    snprintf(path, sizeof(path), "/api/v1/metrics/idle?from=%s&to=%s", from, to);
    struct ts_response r;
    assert_int_equal(get(TS_IT_ADMIN_TOKEN, path, &r), 200);
    assert_int_equal(ts_it_int(r.json, "resolution_seconds"), 1);
    assert_int_equal(json_array_size(json_object_get(r.json, "projects")), 3);
    /* four one-second points: 0.5 GPU idle for 4 s is 2/3600 GPU-hours */
    assert_true(fabs(hours_of(r.json, "p1", "idle_gpu_hours") - 2.0 / 3600) < 1e-12);
    assert_true(fabs(hours_of(r.json, "p1", "allocated_gpu_hours") - 2.0 / 3600) < 1e-12);
    assert_true(hours_of(r.json, "p2", "idle_gpu_hours") == 0);
    assert_true(fabs(hours_of(r.json, "p2", "allocated_gpu_hours") - 2.0 / 3600) < 1e-12);
    assert_true(hours_of(r.json, "p3", "idle_gpu_hours") == 0);
    assert_true(fabs(hours_of(r.json, "p3", "allocated_gpu_hours") - 4.0 / 3600) < 1e-12);
    /* allocated less utilized: p1 0.5 - 0, p2 0.5 - 0.4, p3 1 - 0.9, for 4 s */
    assert_true(fabs(hours_of(r.json, "p1", "unused_gpu_hours") - 2.0 / 3600) < 1e-9);
    assert_true(fabs(hours_of(r.json, "p2", "unused_gpu_hours") - 0.4 / 3600) < 1e-9);
    assert_true(fabs(hours_of(r.json, "p3", "unused_gpu_hours") - 0.4 / 3600) < 1e-9);
    assert_true(fabs(hours_of(r.json, "p2", "utilized_gpu_hours") - 1.6 / 3600) < 1e-9);
    assert_true(fabs(hours_of(r.json, "p3", "utilized_gpu_hours") - 3.6 / 3600) < 1e-9);
    /* most idle first */
    assert_string_equal(
        ts_it_str(json_array_get(json_object_get(r.json, "projects"), 0), "project"), "p1");
    ts_response_free(&r);
    /* a member sees its projects */
    assert_int_equal(get(member1, path, &r), 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "projects")), 1);
    assert_true(fabs(hours_of(r.json, "p1", "idle_gpu_hours") - 2.0 / 3600) < 1e-12);
    ts_response_free(&r);
    snprintf(path, sizeof(path), "/api/v1/metrics/idle?from=%s&to=%s", to, from);
    assert_int_equal(get(TS_IT_ADMIN_TOKEN, path, &r), 400);
    ts_response_free(&r);
    assert_int_equal(get(TS_IT_ADMIN_TOKEN, "/api/v1/metrics/idle?from=yesterday", &r), 400);
    assert_string_equal(ts_it_str(r.json, "code"), "bad_parameter");
    ts_response_free(&r);
}

static void members_see_their_departments_and_jobs_only(void **state)
{
    wait_points();
    char k1[32], k2[32];
    snprintf(k1, sizeof(k1), "%lld", j_idle);
    snprintf(k2, sizeof(k2), "%lld", j_busy);
    struct ts_response r;
    assert_int_equal(query(member1, "allocated", "department", NULL, &r), 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "series")), 1);
    assert_series_is(r.json, "d1", 1);
    ts_response_free(&r);
    assert_int_equal(query(member1, "allocated", "department", "d2", &r), 403);
    assert_string_equal(ts_it_str(r.json, "code"), "forbidden");
    ts_response_free(&r);
    assert_int_equal(query(member1, "utilized", "job", k1, &r), 200);
    assert_series_is(r.json, k1, 0);
    ts_response_free(&r);
    assert_int_equal(query(member1, "utilized", "job", k2, &r), 403);
    assert_string_equal(ts_it_str(r.json, "code"), "forbidden");
    ts_response_free(&r);
    assert_int_equal(query(member1, "utilized", "job", NULL, &r), 400);
    assert_string_equal(ts_it_str(r.json, "code"), "bad_parameter");
    ts_response_free(&r);
}

static void an_unknown_scope_names_every_scope(void **state)
{
    struct ts_response r;
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "allocated", "team", NULL, &r), 400);
    assert_non_null(strstr(r.body.data, "cluster, department, project, node, gpu or job"));
    ts_response_free(&r);
    assert_int_equal(query(TS_IT_ADMIN_TOKEN, "idle", "project", NULL, &r), 400);
    assert_non_null(strstr(r.body.data, "pending_gpus or idle_gpus"));
    ts_response_free(&r);
}

static long long submit(const char *name, const char *project, const char *gpu, bool placeable)
{
    char body[512];
    snprintf(body, sizeof(body),
             "{\"name\":\"%s\",\"project\":\"%s\",\"command\":[\"x\"],\"gpu\":%s%s}", name, project,
             gpu, placeable ? "" : ",\"gpu_model\":[\"none-such\"]");
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
    static const char *const posts[][2] = {
        {"/api/v1/departments", "{\"name\":\"d1\",\"quota\":{\"gpus\":3}}"},
        {"/api/v1/departments", "{\"name\":\"d2\"}"},
        {"/api/v1/projects", "{\"name\":\"p1\",\"department\":\"d1\"}"},
        {"/api/v1/projects", "{\"name\":\"p2\",\"department\":\"d1\"}"},
        {"/api/v1/projects", "{\"name\":\"p3\",\"department\":\"d2\"}"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(posts); i++)
        if (ts_it_req(a, "POST", posts[i][0], posts[i][1], NULL, NULL) != 201) {
            fprintf(stderr, "POST %s %s failed\n", posts[i][0], posts[i][1]);
            return -1;
        }
    snprintf(member1, sizeof(member1), "%s", ts_it_token(&srv, "m1", "member", "[\"p1\"]"));
    j_idle = submit("idle", "p1", "{\"portion\":0.5}", false);
    j_busy = submit("busy", "p2", "{\"portion\":0.5}", false);
    j_other = submit("other", "p3", "{\"count\":1}", false);
    if (!member1[0] || j_idle < 0 || j_busy < 0 || j_other < 0 ||
        submit("wait1", "p1", "{\"portion\":0.5}", false) < 0 ||
        submit("wait3", "p3", "{\"count\":2}", false) < 0)
        return -1;
    /* n1: two 80 GiB GPUs; n1/0 (40 % busy) shared half and half by the
     * idle job (0 %, sampled) and the busy one (40 %); n1/1 all the other
     * job's (90 %) */
    char sql[4096];
    snprintf(
        sql, sizeof(sql),
        "INSERT INTO node (name, state, last_seen_at) VALUES ('n1', 'ready', now());"
        "INSERT INTO gpu (node_id, idx, uuid, model, memory_bytes, utilization,"
        " memory_used_bytes, sampled_at)"
        " SELECT id, 0, 'u-0', 'H100', 80 * %lld::bigint, 0.4, 0, now() FROM node UNION ALL"
        " SELECT id, 1, 'u-1', 'H100', 80 * %lld::bigint, 0.9, 0, now() FROM node;"
        "UPDATE job SET state = 'running', attempt = 1, started_at = now(), sampled_at = now(),"
        " node_id = (SELECT id FROM node WHERE name = 'n1'),"
        " gpu_utilization = CASE id WHEN %lld THEN 0 WHEN %lld THEN 0.4 ELSE 0.9 END"
        " WHERE id IN (%lld, %lld, %lld);"
        "INSERT INTO job_gpu (job_id, gpu_id, memory_bytes)"
        " SELECT %lld, id, 40 * %lld::bigint FROM gpu WHERE uuid = 'u-0' UNION ALL"
        " SELECT %lld, id, 40 * %lld::bigint FROM gpu WHERE uuid = 'u-0' UNION ALL"
        " SELECT %lld, id, 80 * %lld::bigint FROM gpu WHERE uuid = 'u-1';",
        GIB, GIB, j_idle, j_busy, j_idle, j_busy, j_other, j_idle, GIB, j_busy, GIB, j_other, GIB);
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
        cmocka_unit_test(departments_are_the_sum_of_their_projects),
        cmocka_unit_test(each_running_job_has_its_own_series),
        cmocka_unit_test(an_idle_job_on_a_shared_gpu_counts_as_idle_and_a_busy_one_does_not),
        cmocka_unit_test(pending_demand_is_the_gpus_pending_jobs_ask),
        cmocka_unit_test(idle_gpu_hours_integrate_the_idle_allocation_per_project),
        cmocka_unit_test(members_see_their_departments_and_jobs_only),
        cmocka_unit_test(an_unknown_scope_names_every_scope),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
