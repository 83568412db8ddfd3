/*
 * test_http_cases.c - the data-driven HTTP tests: every file in
 * tests/data/http/ holds {"cases": [...]}, run in order against one real
 * server seeded with a known world (see seed()). A case:
 *
 *   {"name": "sentence", "token": "admin|member|viewer|agent|loner|none|bad",
 *    "method": "POST", "path": "/api/v1/jobs",
 *    "headers": {"If-Match": "\"1\""},
 *    "body": {...} | "body_text": "raw text" | "body_size": 2000000,
 *    "status": 422, "code": "invalid_value", "field": "gpu.portion",
 *    "detail_contains": "between 0 and 1", "response": {subset},
 *    "response_headers": {"Allow": "GET, POST"}, "body_empty": true}
 *
 * A HEAD case has no body to check: its code, field and detail are not read.
 * loner is a member of no project. "{job}" in a path is the seeded job's id. Every case answering
 * 4xx or 5xx must leave every table exactly as it was: bad input changes nothing.
 *
 * With TS_IT_PRISM (ctest api/conformance/http_cases) every request but the
 * body_text and HEAD ones (the spec lists GET operations, which HEAD follows)
 * goes through a Prism proxy that checks each answer against
 * api/openapi.yaml (specproxy.h).
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/integration/harness.h"

static struct ts_it_server srv;
static char member[128], viewer[128], agent[128], loner[128], agent_n1[128];
static long long seed_job;

static const char *token_for(const char *who)
{
    if (who == NULL || strcmp(who, "admin") == 0)
        return TS_IT_ADMIN_TOKEN;
    if (strcmp(who, "member") == 0)
        return member;
    if (strcmp(who, "viewer") == 0)
        return viewer;
    if (strcmp(who, "agent") == 0)
        return agent;
    if (strcmp(who, "loner") == 0)
        return loner;
    if (strcmp(who, "agent-n1") == 0) /* an agent token bound to node n1 */
        return agent_n1;
    if (strcmp(who, "bad") == 0)
        return "tsk_not-a-real-token";
    return NULL; /* "none" */
}

static int seed_failed;

static void must(long got, long want, const char *what)
{
    if (got != want) {
        fprintf(stderr, "seed: %s: got %ld, want %ld\n", what, got, want);
        seed_failed = 1;
    }
}

static int seed(void)
{
    struct ts_client *a = srv.admin;
    must(ts_it_req(a, "POST", "/api/v1/departments",
                   "{\"name\":\"research\",\"quota\":{\"gpus\":4}}", NULL, NULL),
         201, "department research");
    must(ts_it_req(a, "POST", "/api/v1/departments", "{\"name\":\"empty\"}", NULL, NULL), 201,
         "department empty");
    must(ts_it_req(a, "POST", "/api/v1/projects",
                   "{\"name\":\"vision\",\"department\":\"research\",\"quota\":{\"gpus\":2.5,"
                   "\"limit\":8}}",
                   NULL, NULL),
         201, "project vision");
    must(ts_it_req(a, "POST", "/api/v1/projects",
                   "{\"name\":\"nlp\",\"department\":\"research\",\"quota\":{\"gpus\":1}}", NULL,
                   NULL),
         201, "project nlp");
    snprintf(member, sizeof(member), "%s", ts_it_token(&srv, "member", "member", "[\"vision\"]"));
    snprintf(viewer, sizeof(viewer), "%s", ts_it_token(&srv, "viewer", "viewer", NULL));
    snprintf(agent, sizeof(agent), "%s", ts_it_token(&srv, "agent", "agent", NULL));
    snprintf(loner, sizeof(loner), "%s", ts_it_token(&srv, "loner", "member", NULL));
    struct ts_response r;
    must(ts_it_req(a, "POST", "/api/v1/tokens",
                   "{\"name\":\"agent-n1\",\"role\":\"agent\",\"nodes\":[\"n1\"]}", NULL, &r),
         201, "token agent-n1");
    snprintf(agent_n1, sizeof(agent_n1), "%s", ts_it_str(r.json, "token"));
    ts_response_free(&r);
    if (!member[0] || !viewer[0] || !agent[0] || !loner[0] || !agent_n1[0])
        return -1;
    must(ts_it_req(a, "POST", "/api/v1/jobs",
                   "{\"name\":\"seed-job\",\"project\":\"vision\",\"command\":[\"sleep\",\"1\"],"
                   "\"gpu\":{\"portion\":0.5}}",
                   NULL, &r),
         201, "seed job");
    seed_job = ts_it_int(r.json, "id");
    ts_response_free(&r);
    return seed_failed ? -1 : 0;
}

/* Whether `want` is contained in `got`: objects by key, arrays element-wise
 * with the same length, scalars equal (numbers compared as reals). */
static int subset(const json_t *want, const json_t *got, char *path, size_t len)
{
    if (json_is_object(want)) {
        if (!json_is_object(got))
            return 0;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)want, k, v) {
            size_t n = strlen(path);
            snprintf(path + n, len - n, ".%s", k);
            if (!subset(v, json_object_get(got, k), path, len))
                return 0;
            path[n] = '\0';
        }
        return 1;
    }
    if (json_is_array(want)) {
        if (!json_is_array(got) || json_array_size(got) != json_array_size(want))
            return 0;
        for (size_t i = 0; i < json_array_size(want); i++)
            if (!subset(json_array_get(want, i), json_array_get(got, i), path, len))
                return 0;
        return 1;
    }
    if (json_is_number(want))
        return json_is_number(got) && json_number_value(want) == json_number_value(got);
    return json_equal((json_t *)want, (json_t *)got);
}

static void expand_path(const char *in, char *out, size_t len)
{
    const char *p = strstr(in, "{job}");
    if (p == NULL) {
        snprintf(out, len, "%s", in);
        return;
    }
    snprintf(out, len, "%.*s%lld%s", (int)(p - in), in, seed_job, p + 5);
}

static int run_case(const char *file, const json_t *c)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    const char *method = json_string_value(json_object_get(c, "method"));
    const char *rawpath = json_string_value(json_object_get(c, "path"));
    long want = (long)json_integer_value(json_object_get(c, "status"));
    if (!name || !method || !rawpath || want == 0) {
        fprintf(stderr, "%s: a case lacks name, method, path or status\n", file);
        return 0;
    }
    char path[512];
    expand_path(rawpath, path, sizeof(path));
    const char *headers[8] = {0};
    char hbuf[8][1024];
    int nh = 0;
    const char *hk;
    json_t *hv;
    json_object_foreach(json_object_get(c, "headers"), hk, hv) {
        if (nh < 7) {
            snprintf(hbuf[nh], sizeof(hbuf[nh]), "%s: %s", hk, json_string_value(hv));
            headers[nh] = hbuf[nh];
            nh++;
        }
    }
    char *body = NULL;
    json_t *jb = json_object_get(c, "body");
    json_t *tb = json_object_get(c, "body_text");
    json_t *sb = json_object_get(c, "body_size");
    if (jb)
        body = json_dumps(jb, JSON_COMPACT | JSON_ENCODE_ANY);
    else if (tb)
        body = strdup(json_string_value(tb));
    else if (sb) {
        size_t n = (size_t)json_integer_value(sb);
        body = malloc(n + 1);
        memset(body, ' ', n);
        memcpy(body, "{\"name\":\"x\",\"pad\":\"", 19);
        body[n - 2] = '"';
        body[n - 1] = '}';
        body[n] = '\0';
    }
    char before[33] = "", after[33] = "";
    if (want >= 400)
        ts_it_db_digest(&srv, before);
    /* a raw body goes to the server itself: a Prism proxy (TS_IT_PRISM)
     * parses JSON bodies and sends them on re-serialised, or answers
     * malformed ones itself */
    const char *token = token_for(json_string_value(json_object_get(c, "token")));
    bool head = strcmp(method, "HEAD") == 0;
    struct ts_client *cl =
        tb != NULL || head ? ts_it_client_direct(&srv, token) : ts_it_client(&srv, token);
    struct ts_response r;
    struct ts_error err;
    int ok = 1;
    if (ts_client_do(cl, method, path, body, body ? strlen(body) : 0, headers, &r, &err) != TS_OK) {
        fprintf(stderr, "%s: %s: %s\n", file, name, err.message);
        free(body);
        ts_client_free(cl);
        return 0;
    }
    if (r.status != want) {
        fprintf(stderr, "%s: %s: status %ld, want %ld: %s\n", file, name, r.status, want,
                r.body.data ? r.body.data : "");
        ok = 0;
    }
    const char *code = json_string_value(json_object_get(c, "code"));
    if (ok && code && strcmp(ts_it_str(r.json, "code"), code) != 0) {
        fprintf(stderr, "%s: %s: code \"%s\", want \"%s\": %s\n", file, name,
                ts_it_str(r.json, "code"), code, r.body.data);
        ok = 0;
    }
    if (ok && json_is_true(json_object_get(c, "body_empty")) && r.body.len != 0) {
        fprintf(stderr, "%s: %s: a body of %zu bytes, want none: %s\n", file, name, r.body.len,
                r.body.data);
        ok = 0;
    }
    char ct[128];
    if (ok && want >= 400 && !head &&
        (!ts_response_header(&r, "Content-Type", ct, sizeof(ct)) ||
         strcmp(ct, "application/problem+json") != 0 || r.json == NULL ||
         ts_it_int(r.json, "status") != want || ts_it_str(r.json, "detail")[0] == '\0')) {
        fprintf(stderr, "%s: %s: not a problem+json body: %s\n", file, name, r.body.data);
        ok = 0;
    }
    const char *field = json_string_value(json_object_get(c, "field"));
    if (ok && field && strcmp(ts_it_str(r.json, "field"), field) != 0) {
        fprintf(stderr, "%s: %s: field \"%s\", want \"%s\": %s\n", file, name,
                ts_it_str(r.json, "field"), field, r.body.data);
        ok = 0;
    }
    const char *contains = json_string_value(json_object_get(c, "detail_contains"));
    if (ok && contains && strstr(ts_it_str(r.json, "detail"), contains) == NULL) {
        fprintf(stderr, "%s: %s: detail lacks \"%s\": %s\n", file, name, contains, r.body.data);
        ok = 0;
    }
    json_t *sub = json_object_get(c, "response");
    char jpath[256] = "";
    if (ok && sub && !subset(sub, r.json, jpath, sizeof(jpath))) {
        fprintf(stderr, "%s: %s: response differs at %s: %s\n", file, name,
                jpath[0] ? jpath : "(top)", r.body.data);
        ok = 0;
    }
    json_object_foreach(json_object_get(c, "response_headers"), hk, hv) {
        char v[256];
        if (ok &&
            (!ts_response_header(&r, hk, v, sizeof(v)) || strcmp(v, json_string_value(hv)) != 0)) {
            fprintf(stderr, "%s: %s: header %s is \"%s\", want \"%s\"\n", file, name, hk,
                    ts_response_header(&r, hk, v, sizeof(v)) ? v : "(absent)",
                    json_string_value(hv));
            ok = 0;
        }
    }
    if (want >= 400) {
        ts_it_db_digest(&srv, after);
        if (strcmp(before, after) != 0) {
            fprintf(stderr, "%s: %s: a failed request changed the database\n", file, name);
            ok = 0;
        }
    }
    ts_response_free(&r);
    ts_client_free(cl);
    free(body);
    return ok;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static void every_case_in_tests_data_http_answers_as_written(void **state)
{
    const char *src = getenv("TS_SOURCE_DIR");
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/tests/data/http", src ? src : ".");
    struct dirent **names;
    int n = scandir(dir, &names, NULL, by_name);
    assert_true(n > 0);
    int cases = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        const char *f = names[i]->d_name;
        size_t fl = strlen(f);
        if (fl > 5 && strcmp(f + fl - 5, ".json") == 0) {
            char path[1024];
            snprintf(path, sizeof(path), "%s/%s", dir, f);
            json_error_t jerr;
            json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
            if (doc == NULL) {
                fprintf(stderr, "%s: line %d: %s\n", f, jerr.line, jerr.text);
                failed++;
            }
            json_t *c;
            size_t k;
            json_array_foreach(json_object_get(doc, "cases"), k, c) {
                cases++;
                failed += !run_case(f, c);
            }
            json_decref(doc);
        }
        free(names[i]);
    }
    free(names);
    fprintf(stderr, "http cases: %d run, %d failed\n", cases, failed);
    assert_true(cases >= 50);
    assert_int_equal(failed, 0);
}

static int setup(void **state)
{
    ts_client_global_init();
    /* no scheduler: its cycles write pending reasons on their own clock, and
     * each case must prove that a failed request wrote nothing */
    static const char *const args[] = {"--scheduler=false", NULL};
    if (ts_it_start(&srv, NULL, args) != 0)
        return -1;
    return seed();
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
        cmocka_unit_test(every_case_in_tests_data_http_answers_as_written),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
