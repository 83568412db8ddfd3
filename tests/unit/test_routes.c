/*
 * test_routes.c - route matching, and the route table against
 * api/openapi.yaml both ways: every route is documented, every documented
 * path and method is served.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/array.h"
#include "server/http/route.h"
#include "server/routes.h"

static const struct ts_route table[] = {
    {"GET", "/api/v1/jobs", NULL, TS_ACCESS_READ, false},
    {"POST", "/api/v1/jobs", NULL, TS_ACCESS_SUBMIT, false},
    {"GET", "/api/v1/jobs/{id}", NULL, TS_ACCESS_READ, false},
    {"DELETE", "/api/v1/jobs/{id}", NULL, TS_ACCESS_SUBMIT, false},
    {"GET", "/api/v1/jobs/{id}/events", NULL, TS_ACCESS_READ, false},
    {"PUT", "/api/v1/projects/{name}/quota", NULL, TS_ACCESS_ADMIN, false},
};
#define N (TS_ARRAY_LEN(table))

static void a_literal_path_matches_its_method(void **state)
{
    struct ts_route_match m;
    assert_int_equal(ts_route_find(table, N, "POST", "/api/v1/jobs", &m), TS_OK);
    assert_int_equal(m.index, 1);
    assert_int_equal(m.nvalues, 0);
}

static void a_parameter_captures_one_segment(void **state)
{
    struct ts_route_match m;
    assert_int_equal(ts_route_find(table, N, "GET", "/api/v1/jobs/42/events", &m), TS_OK);
    assert_int_equal(m.index, 4);
    assert_int_equal(m.nvalues, 1);
    assert_string_equal(m.values[0], "42");
    assert_int_equal(ts_route_find(table, N, "PUT", "/api/v1/projects/vision/quota", &m), TS_OK);
    assert_string_equal(m.values[0], "vision");
}

static void an_empty_segment_does_not_match_a_parameter(void **state)
{
    struct ts_route_match m;
    assert_int_equal(ts_route_find(table, N, "GET", "/api/v1/jobs/", &m), TS_ERR_ROUTE_NOT_FOUND);
    assert_int_equal(ts_route_find(table, N, "GET", "/api/v1/jobs//events", &m),
                     TS_ERR_ROUTE_NOT_FOUND);
}

static void extra_or_missing_segments_do_not_match(void **state)
{
    struct ts_route_match m;
    assert_int_equal(ts_route_find(table, N, "GET", "/api/v1/jobs/1/events/2", &m),
                     TS_ERR_ROUTE_NOT_FOUND);
    assert_int_equal(ts_route_find(table, N, "GET", "/api/v1", &m), TS_ERR_ROUTE_NOT_FOUND);
    assert_int_equal(ts_route_find(table, N, "GET", "", &m), TS_ERR_ROUTE_NOT_FOUND);
    assert_int_equal(ts_route_find(table, N, "GET", "api/v1/jobs", &m), TS_ERR_ROUTE_NOT_FOUND);
}

static void a_known_path_with_another_method_lists_the_allowed_ones(void **state)
{
    struct ts_route_match m;
    assert_int_equal(ts_route_find(table, N, "PATCH", "/api/v1/jobs/7", &m),
                     TS_ERR_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "GET, HEAD, DELETE");
}

static void head_is_answered_by_the_get_route_and_nothing_else(void **state)
{
    struct ts_route_match m;
    assert_int_equal(ts_route_find(table, N, "HEAD", "/api/v1/jobs/7", &m), TS_OK);
    assert_string_equal(table[m.index].method, "GET");
    assert_string_equal(m.values[0], "7");
    assert_int_equal(ts_route_find(table, N, "HEAD", "/api/v1/projects/vision/quota", &m),
                     TS_ERR_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "PUT");
}

static void an_overlong_parameter_does_not_match(void **state)
{
    char path[400] = "/api/v1/jobs/";
    memset(path + strlen(path), '9', 300);
    struct ts_route_match m;
    assert_int_equal(ts_route_find(table, N, "GET", path, &m), TS_ERR_ROUTE_NOT_FOUND);
}

/* Read api/openapi.yaml's paths: a line "  /path:" starts a path, lines
 * "    get:" etc. under it are its methods. */
struct doc_op {
    char method[8];
    char path[128];
};

static size_t read_openapi(struct doc_op *ops, size_t max)
{
    char file[512];
    const char *src = getenv("TS_SOURCE_DIR");
    snprintf(file, sizeof(file), "%s/api/openapi.yaml", src ? src : ".");
    FILE *f = fopen(file, "r");
    assert_non_null(f);
    char line[1024], path[128] = "";
    size_t n = 0;
    int in_paths = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "paths:", 6) == 0) {
            in_paths = 1;
            continue;
        }
        if (in_paths && line[0] != ' ' && line[0] != '\n')
            break;
        if (!in_paths)
            continue;
        if (strncmp(line, "  /", 3) == 0) {
            snprintf(path, sizeof(path), "%.120s", line + 2);
            path[strcspn(path, ":")] = '\0';
            continue;
        }
        static const char *const methods[] = {"get", "post", "put", "delete", "patch"};
        for (size_t i = 0; i < 5; i++) {
            size_t l = strlen(methods[i]);
            if (strncmp(line, "    ", 4) == 0 && line[4] != ' ' &&
                strncmp(line + 4, methods[i], l) == 0 && line[4 + l] == ':' && n < max) {
                for (size_t k = 0; k <= l; k++)
                    ops[n].method[k] = (char)(methods[i][k] >= 'a' ? methods[i][k] - 32 : 0);
                snprintf(ops[n].path, sizeof(ops[n].path), "%s", path);
                n++;
            }
        }
    }
    fclose(f);
    return n;
}

static void every_route_is_documented_and_every_documented_route_is_served(void **state)
{
    struct doc_op ops[128];
    size_t n = read_openapi(ops, 128);
    assert_true(n >= 20);
    for (size_t i = 0; i < ts_routes_count; i++) {
        int found = 0;
        for (size_t k = 0; k < n; k++)
            found |= strcmp(ops[k].method, ts_routes[i].method) == 0 &&
                     strcmp(ops[k].path, ts_routes[i].path) == 0;
        if (!found)
            fail_msg("route %s %s is not in api/openapi.yaml", ts_routes[i].method,
                     ts_routes[i].path);
    }
    for (size_t k = 0; k < n; k++) {
        int found = 0;
        for (size_t i = 0; i < ts_routes_count; i++)
            found |= strcmp(ops[k].method, ts_routes[i].method) == 0 &&
                     strcmp(ops[k].path, ts_routes[i].path) == 0;
        if (!found)
            fail_msg("api/openapi.yaml documents %s %s, which the server does not serve",
                     ops[k].method, ops[k].path);
    }
    assert_int_equal(n, ts_routes_count);
}

static void every_route_has_a_handler(void **state)
{
    for (size_t i = 0; i < ts_routes_count; i++)
        assert_non_null(ts_routes[i].handler);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_literal_path_matches_its_method),
        cmocka_unit_test(a_parameter_captures_one_segment),
        cmocka_unit_test(an_empty_segment_does_not_match_a_parameter),
        cmocka_unit_test(extra_or_missing_segments_do_not_match),
        cmocka_unit_test(a_known_path_with_another_method_lists_the_allowed_ones),
        cmocka_unit_test(head_is_answered_by_the_get_route_and_nothing_else),
        cmocka_unit_test(an_overlong_parameter_does_not_match),
        cmocka_unit_test(every_route_is_documented_and_every_documented_route_is_served),
        cmocka_unit_test(every_route_has_a_handler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
