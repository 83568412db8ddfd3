/*
 * test_api_jobs.c - job submission end to end: idempotency keys (also under
 * concurrent retries), cursor pagination, tokens shown once and stored
 * hashed, revocation, metrics and the served OpenAPI document.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/auth.h"
#include "tests/integration/agentplay.h"
#include "tests/integration/harness.h"

static struct ts_it_server srv;

static const char job_body[] =
    "{\"name\":\"%s\",\"project\":\"p1\",\"command\":[\"sleep\",\"1\"],\"gpu\":{\"count\":1}}";

static long submit(struct ts_client *c, const char *name, const char *key, long long *id)
{
    char body[512], hdr[300];
    snprintf(body, sizeof(body), job_body, name);
    snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", key ? key : "");
    const char *headers[] = {hdr, NULL};
    struct ts_response r;
    long st = ts_it_req(c, "POST", "/api/v1/jobs", body, key ? headers : NULL, &r);
    if (id)
        *id = ts_it_int(r.json, "id");
    ts_response_free(&r);
    return st;
}

static void a_retried_submission_with_the_same_key_returns_the_same_job(void **state)
{
    long long a = 0, b = 0;
    assert_int_equal(submit(srv.admin, "idem-1", "key-1", &a), 201);
    assert_int_equal(submit(srv.admin, "idem-1", "key-1", &b), 200);
    assert_true(a > 0);
    assert_int_equal(a, b);
    char n[32];
    assert_int_equal(
        ts_it_sql(&srv, "SELECT count(*) FROM job WHERE name = 'idem-1'", n, sizeof(n)), 0);
    assert_string_equal(n, "1");
}

static void the_same_key_with_another_body_is_422_and_writes_nothing(void **state)
{
    char before[33], after[33];
    ts_ap_settle_of(&srv, 0.5); /* the earlier jobs' cycle done before the digest */
    ts_it_db_digest(&srv, before);
    assert_int_equal(submit(srv.admin, "idem-other", "key-1", NULL), 422);
    ts_it_db_digest(&srv, after);
    assert_string_equal(before, after);
}

static void keys_belong_to_their_token(void **state)
{
    char tok[128];
    snprintf(tok, sizeof(tok), "%s", ts_it_token(&srv, "second", "member", "[\"p1\"]"));
    struct ts_client *c = ts_it_client(&srv, tok);
    long long id = 0;
    assert_int_equal(submit(c, "idem-2", "key-1", &id), 201);
    ts_client_free(c);
}

struct race {
    long status;
    long long id;
};

static void *race_one(void *arg)
{
    struct race *r = arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    r->status = submit(c, "raced", "race-key", &r->id);
    ts_client_free(c);
    return NULL;
}

static void concurrent_retries_with_one_key_make_exactly_one_job(void **state)
{
    enum { N = 8 };
    pthread_t t[N];
    struct race r[N];
    for (int i = 0; i < N; i++)
        pthread_create(&t[i], NULL, race_one, &r[i]);
    int created = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        assert_true(r[i].status == 201 || r[i].status == 200);
        created += r[i].status == 201;
        assert_int_equal(r[i].id, r[0].id);
    }
    assert_int_equal(created, 1);
    char n[32];
    ts_it_sql(&srv, "SELECT count(*) FROM job WHERE name = 'raced'", n, sizeof(n));
    assert_string_equal(n, "1");
}

static void expired_keys_are_forgotten(void **state)
{
    long long a = 0, b = 0;
    assert_int_equal(submit(srv.admin, "old-1", "old-key", &a), 201);
    char n[32];
    ts_it_sql(&srv,
              "UPDATE idempotency_key SET created_at = now() - interval '25 hours'"
              " WHERE key = 'old-key'",
              n, sizeof(n));
    /* the key is free again: the same body now collides on the job name */
    assert_int_equal(submit(srv.admin, "old-1", "old-key", &b), 409);
    assert_int_equal(submit(srv.admin, "old-2", "old-key", &b), 201);
    assert_true(b != a);
}

static void pages_follow_the_cursor_without_gaps_or_repeats(void **state)
{
    for (int i = 0; i < 25; i++) {
        char name[32];
        snprintf(name, sizeof(name), "page-%02d", i);
        assert_int_equal(submit(srv.admin, name, NULL, NULL), 201);
    }
    char path[256] = "/api/v1/jobs?project=p1&kind=train&limit=10";
    long long last = 0;
    int seen = 0, pages = 0;
    for (;;) {
        struct ts_response r;
        assert_int_equal(ts_it_req(srv.admin, "GET", path, NULL, NULL, &r), 200);
        json_t *jobs = json_object_get(r.json, "jobs");
        size_t i;
        json_t *j;
        json_array_foreach(jobs, i, j) {
            assert_true(ts_it_int(j, "id") > last);
            last = ts_it_int(j, "id");
            seen++;
        }
        pages++;
        const char *next = json_string_value(json_object_get(r.json, "next_cursor"));
        if (next == NULL) {
            ts_response_free(&r);
            break;
        }
        assert_int_equal(json_array_size(jobs), 10);
        snprintf(path, sizeof(path), "/api/v1/jobs?project=p1&kind=train&limit=10&cursor=%s", next);
        ts_response_free(&r);
    }
    char n[32];
    ts_it_sql(&srv,
              "SELECT count(*) FROM job j JOIN project p ON p.id = j.project_id"
              " WHERE p.name = 'p1'",
              n, sizeof(n));
    assert_int_equal(seen, atoi(n));
    assert_true(pages >= 3);
}

static void a_token_secret_is_shown_once_and_stored_only_as_its_hash(void **state)
{
    struct ts_response r;
    assert_int_equal(ts_it_req(srv.admin, "POST", "/api/v1/tokens",
                               "{\"name\":\"carol\",\"role\":\"viewer\"}", NULL, &r),
                     201);
    char secret[128], hash[65], sql[256], stored[80];
    snprintf(secret, sizeof(secret), "%s", ts_it_str(r.json, "token"));
    long long id = ts_it_int(r.json, "id");
    ts_response_free(&r);
    assert_true(strncmp(secret, "tsk_", 4) == 0 && strlen(secret) == 47);
    ts_auth_sha256_hex(secret, strlen(secret), hash);
    snprintf(sql, sizeof(sql), "SELECT token_sha256 FROM api_token WHERE id = %lld", id);
    ts_it_sql(&srv, sql, stored, sizeof(stored));
    assert_string_equal(stored, hash);
    /* no column anywhere holds the secret */
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM api_token t WHERE t::text LIKE '%%%s%%'",
             secret + 4);
    ts_it_sql(&srv, sql, stored, sizeof(stored));
    assert_string_equal(stored, "0");
    /* the list never shows secrets */
    assert_int_equal(ts_it_req(srv.admin, "GET", "/api/v1/tokens", NULL, NULL, &r), 200);
    assert_null(strstr(r.body.data, secret));
    assert_null(strstr(r.body.data, "\"token\""));
    ts_response_free(&r);
    /* it works until revoked, then it is 401 */
    struct ts_client *c = ts_it_client(&srv, secret);
    assert_int_equal(ts_it_req(c, "GET", "/api/v1/projects", NULL, NULL, NULL), 200);
    snprintf(sql, sizeof(sql), "/api/v1/tokens/%lld", id);
    assert_int_equal(ts_it_req(srv.admin, "DELETE", sql, NULL, NULL, NULL), 204);
    assert_int_equal(ts_it_req(c, "GET", "/api/v1/projects", NULL, NULL, NULL), 401);
    ts_client_free(c);
}

static void metrics_count_requests_by_route_and_jobs_by_state(void **state)
{
    struct ts_response r;
    assert_int_equal(ts_it_req(srv.admin, "GET", "/metrics", NULL, NULL, &r), 200);
    const char *m = r.body.data;
    assert_non_null(strstr(m, "tessera_http_requests_total{route=\"/api/v1/jobs\",method=\"POST\","
                              "code=\"201\"}"));
    assert_non_null(strstr(m, "tessera_http_requests_total{route=\"/api/v1/jobs\",method=\"POST\","
                              "code=\"422\"} 1"));
    assert_non_null(strstr(m, "tessera_http_request_duration_seconds_bucket{route=\"/api/v1/jobs\","
                              "method=\"POST\",le=\"+Inf\"}"));
    assert_non_null(strstr(m, "tessera_jobs{project=\"p1\",state=\"pending\"}"));
    ts_response_free(&r);
}

static void the_openapi_document_is_served_as_written(void **state)
{
    struct ts_response r;
    assert_int_equal(ts_it_req(srv.admin, "GET", "/api/v1/openapi.yaml", NULL, NULL, &r), 200);
    char path[512];
    snprintf(path, sizeof(path), "%s/api/openapi.yaml",
             getenv("TS_SOURCE_DIR") ? getenv("TS_SOURCE_DIR") : ".");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *want = calloc(1, 1 << 20);
    size_t n = fread(want, 1, (1 << 20) - 1, f);
    fclose(f);
    assert_int_equal(r.body.len, n);
    assert_memory_equal(r.body.data, want, n);
    free(want);
    ts_response_free(&r);
}

static int setup(void **state)
{
    ts_client_global_init();
    if (ts_it_start(&srv, NULL, NULL) != 0)
        return -1;
    if (ts_it_req(srv.admin, "POST", "/api/v1/departments", "{\"name\":\"d1\"}", NULL, NULL) !=
            201 ||
        ts_it_req(srv.admin, "POST", "/api/v1/projects", "{\"name\":\"p1\",\"department\":\"d1\"}",
                  NULL, NULL) != 201)
        return -1;
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
        cmocka_unit_test(a_retried_submission_with_the_same_key_returns_the_same_job),
        cmocka_unit_test(the_same_key_with_another_body_is_422_and_writes_nothing),
        cmocka_unit_test(keys_belong_to_their_token),
        cmocka_unit_test(concurrent_retries_with_one_key_make_exactly_one_job),
        cmocka_unit_test(expired_keys_are_forgotten),
        cmocka_unit_test(pages_follow_the_cursor_without_gaps_or_repeats),
        cmocka_unit_test(a_token_secret_is_shown_once_and_stored_only_as_its_hash),
        cmocka_unit_test(metrics_count_requests_by_route_and_jobs_by_state),
        cmocka_unit_test(the_openapi_document_is_served_as_written),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
