/*
 * test_logs.c - job output end to end: agents ship chunks (idempotent,
 * contiguous, only for jobs on their node, capped per job, bad input writes
 * nothing), users read them (all attempts in order, tail, access by
 * project) and follow them while the job runs, on a stream that ends when
 * the job finishes and holds no database connection while it waits.
 */
#include <curl/curl.h>
#include <pthread.h>
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

#define CAP 4096 /* --log-max-bytes */

static struct ts_it_server srv;
static char agent[128], member1[128], member2[128], viewer[128];
static long long job_a, job_b, job_c, job_d, job_e;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void b64(const char *in, size_t n, char *out)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char)in[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)in[i + 2];
        out[k++] = t[v >> 18 & 63];
        out[k++] = t[v >> 12 & 63];
        out[k++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        out[k++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[k] = '\0';
}

static const char *sql1(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *sql1(const char *fmt, ...)
{
    static char out[256];
    char q[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q, sizeof(q), fmt, ap);
    va_end(ap);
    if (ts_it_sql(&srv, q, out, sizeof(out)) != 0)
        snprintf(out, sizeof(out), "(error)");
    return out;
}

/* POST one chunk; returns the status and keeps the response in *r. */
static long ship(const char *node, long long job, int attempt, long long offset, const char *data,
                 size_t len, struct ts_response *r)
{
    char *enc = malloc(len * 4 / 3 + 8);
    b64(data, len, enc);
    size_t blen = strlen(enc) + 200;
    char *body = malloc(blen);
    snprintf(body, blen,
             "{\"chunks\":[{\"id\":%lld,\"attempt\":%d,\"offset\":%lld,\"data\":\"%s\"}]}", job,
             attempt, offset, enc);
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/nodes/%s/logs", node);
    struct ts_client *c = ts_it_client(&srv, agent);
    long st = ts_it_req(c, "POST", path, body, NULL, r);
    ts_client_free(c);
    free(body);
    free(enc);
    return st;
}

/* next_offset of (job, attempt) in a POST answer; -1 when absent. */
static long long next_offset(const struct ts_response *r, long long job, int attempt)
{
    json_t *v;
    size_t i;
    json_array_foreach(json_object_get(r->json, "chunks"), i, v) {
        if (ts_it_int(v, "id") == job && ts_it_int(v, "attempt") == attempt)
            return ts_it_int(v, "next_offset");
    }
    return -1;
}

/* GET the job's output with a token and a query; the body into out. */
static long read_logs(const char *token, long long job, const char *query, char *out, size_t len)
{
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/logs%s", job, query ? query : "");
    struct ts_client *c = ts_it_client(&srv, token);
    struct ts_response r;
    long st = ts_it_req(c, "GET", path, NULL, NULL, &r);
    snprintf(out, len, "%s", r.body.data ? r.body.data : "");
    ts_response_free(&r);
    ts_client_free(c);
    return st;
}

static void ships_chunks_once_and_answers_the_contiguous_end(void **state)
{
    struct ts_response r;
    assert_int_equal(ship("n1", job_a, 1, 0, "hello\n", 6, &r), 200);
    assert_int_equal(next_offset(&r, job_a, 1), 6);
    ts_response_free(&r);
    /* the same chunk again stores nothing */
    assert_int_equal(ship("n1", job_a, 1, 0, "hello\n", 6, &r), 200);
    assert_int_equal(next_offset(&r, job_a, 1), 6);
    ts_response_free(&r);
    assert_string_equal(sql1("SELECT count(*) FROM job_log WHERE job_id = %lld", job_a), "1");
    /* a chunk overlapping what is stored adds only its new part */
    assert_int_equal(ship("n1", job_a, 1, 3, "lo\nworld\n", 9, &r), 200);
    assert_int_equal(next_offset(&r, job_a, 1), 12);
    ts_response_free(&r);
    assert_string_equal(sql1("SELECT log_bytes FROM job WHERE id = %lld", job_a), "12");
    char out[256];
    assert_int_equal(read_logs(TS_IT_ADMIN_TOKEN, job_a, NULL, out, sizeof(out)), 200);
    assert_string_equal(out, "hello\nworld\n");
}

static void a_chunk_past_a_gap_is_not_stored_and_the_answer_says_where_to_resume(void **state)
{
    struct ts_response r;
    assert_int_equal(ship("n1", job_a, 1, 100, "late\n", 5, &r), 200);
    assert_int_equal(next_offset(&r, job_a, 1), 12);
    ts_response_free(&r);
    assert_string_equal(sql1("SELECT log_bytes FROM job WHERE id = %lld", job_a), "12");
    char out[256];
    read_logs(TS_IT_ADMIN_TOKEN, job_a, NULL, out, sizeof(out));
    assert_string_equal(out, "hello\nworld\n");
}

static void chunks_of_jobs_not_on_the_node_are_ignored_and_reported(void **state)
{
    struct ts_response r;
    /* job_b runs on n2; an unknown job; an attempt job_a has not reached */
    const char body[] = "{\"chunks\":["
                        "{\"id\":%lld,\"attempt\":1,\"offset\":0,\"data\":\"eA==\"},"
                        "{\"id\":999999,\"attempt\":1,\"offset\":0,\"data\":\"eA==\"},"
                        "{\"id\":%lld,\"attempt\":7,\"offset\":0,\"data\":\"eA==\"}]}";
    char text[512];
    snprintf(text, sizeof(text), body, job_b, job_a);
    struct ts_client *c = ts_it_client(&srv, agent);
    assert_int_equal(ts_it_req(c, "POST", "/api/v1/nodes/n1/logs", text, NULL, &r), 200);
    ts_client_free(c);
    json_t *ign = json_object_get(r.json, "ignored");
    assert_int_equal(json_array_size(ign), 3);
    assert_int_equal(json_integer_value(json_array_get(ign, 0)), job_a);
    assert_int_equal(json_integer_value(json_array_get(ign, 1)), job_b);
    assert_int_equal(json_integer_value(json_array_get(ign, 2)), 999999);
    assert_int_equal(json_array_size(json_object_get(r.json, "chunks")), 0);
    ts_response_free(&r);
    assert_string_equal(sql1("SELECT count(*) FROM job_log WHERE job_id = %lld", job_b), "0");
    assert_string_equal(
        sql1("SELECT count(*) FROM job_log WHERE job_id = %lld AND attempt = 7", job_a), "0");
    /* on its own node it is stored */
    assert_int_equal(ship("n2", job_b, 1, 0, "b\n", 2, &r), 200);
    assert_int_equal(next_offset(&r, job_b, 1), 2);
    ts_response_free(&r);
    assert_int_equal(ship("nosuch", job_b, 1, 0, "b\n", 2, &r), 404);
    assert_string_equal(ts_it_str(r.json, "code"), "not_found");
    ts_response_free(&r);
}

static void bad_chunks_are_refused_and_write_nothing(void **state)
{
    static const struct {
        const char *body;
        long status;
        const char *code, *field;
    } cases[] = {
        {"{\"chunks\":[{\"id\":%lld,\"attempt\":1,\"offset\":12,\"data\":\"not base64!\"}]}", 422,
         "invalid_value", "chunks[0].data"},
        {"{\"chunks\":[{\"id\":%lld,\"attempt\":1,\"offset\":12,\"data\":\"eA=\"}]}", 422,
         "invalid_value", "chunks[0].data"},
        {"{\"chunks\":[{\"id\":%lld,\"attempt\":1,\"offset\":-1,\"data\":\"eA==\"}]}", 422,
         "invalid_value", "chunks[0].offset"},
        {"{\"chunks\":[{\"id\":%lld,\"attempt\":\"1\",\"offset\":12,\"data\":\"eA==\"}]}", 400,
         "wrong_type", "chunks[0].attempt"},
        {"{\"chunks\":[{\"id\":%lld,\"attempt\":1,\"offset\":12,\"data\":\"eA==\",\"x\":1}]}", 400,
         "unknown_field", "chunks[0].x"},
        {"{\"chunks\":[{\"id\":%lld,\"attempt\":1,\"offset\":12}]}", 422, "missing_field",
         "chunks[0].data"},
        /* a good chunk before a bad one is not stored either */
        {"{\"chunks\":[{\"id\":%lld,\"attempt\":1,\"offset\":12,\"data\":\"eA==\"},"
         "{\"id\":1,\"attempt\":1,\"offset\":0,\"data\":7}]}",
         400, "wrong_type", "chunks[1].data"},
        {"{\"chunk\":[]}", 400, "unknown_field", "chunk"},
        {"[]", 400, "wrong_type", NULL},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        char body[512];
        snprintf(body, sizeof(body), cases[i].body, job_a);
        struct ts_client *c = ts_it_client(&srv, agent);
        struct ts_response r;
        long st = ts_it_req(c, "POST", "/api/v1/nodes/n1/logs", body, NULL, &r);
        ts_client_free(c);
        if (st != cases[i].status || strcmp(ts_it_str(r.json, "code"), cases[i].code) != 0 ||
            (cases[i].field && strcmp(ts_it_str(r.json, "field"), cases[i].field) != 0))
            fail_msg("case %zu: %ld %s", i, st, r.body.data);
        ts_response_free(&r);
        assert_string_equal(sql1("SELECT log_bytes FROM job WHERE id = %lld", job_a), "12");
        assert_string_equal(sql1("SELECT count(*) FROM job_log WHERE job_id = %lld", job_a), "2");
    }
    /* a body over --max-body is 413 before it is read */
    size_t n = 2 * 1024 * 1024;
    char *big = malloc(n + 1);
    memset(big, 'A', n);
    memcpy(big, "{\"chunks\":[{\"id\":1,\"attempt\":1,\"offset\":0,\"data\":\"", 49);
    memcpy(big + n - 4, "\"}]}", 4);
    big[n] = '\0';
    struct ts_client *c = ts_it_client(&srv, agent);
    assert_int_equal(ts_it_req(c, "POST", "/api/v1/nodes/n1/logs", big, NULL, NULL), 413);
    ts_client_free(c);
    free(big);
}

static void tail_gives_the_last_lines(void **state)
{
    struct ts_response r;
    assert_int_equal(ship("n1", job_c, 1, 0, "one\ntwo\nthree\nfour", 18, &r), 200);
    ts_response_free(&r);
    char out[256];
    assert_int_equal(read_logs(TS_IT_ADMIN_TOKEN, job_c, "?tail=2", out, sizeof(out)), 200);
    assert_string_equal(out, "three\nfour");
    assert_int_equal(ship("n1", job_c, 1, 18, "\n", 1, &r), 200);
    ts_response_free(&r);
    read_logs(TS_IT_ADMIN_TOKEN, job_c, "?tail=2", out, sizeof(out));
    assert_string_equal(out, "three\nfour\n");
    read_logs(TS_IT_ADMIN_TOKEN, job_c, "?tail=0", out, sizeof(out));
    assert_string_equal(out, "");
    read_logs(TS_IT_ADMIN_TOKEN, job_c, "?tail=100", out, sizeof(out));
    assert_string_equal(out, "one\ntwo\nthree\nfour\n");
    assert_int_equal(read_logs(TS_IT_ADMIN_TOKEN, job_c, "?tail=-1", out, sizeof(out)), 400);
    assert_int_equal(read_logs(TS_IT_ADMIN_TOKEN, job_c, "?tail=x", out, sizeof(out)), 400);
    assert_int_equal(read_logs(TS_IT_ADMIN_TOKEN, job_c, "?follow=yes", out, sizeof(out)), 400);
}

static void every_attempt_is_shown_in_order(void **state)
{
    struct ts_response r;
    /* attempt 2 ships before the rest of attempt 1 arrives */
    sql1("UPDATE job SET attempt = 2 WHERE id = %lld", job_c);
    assert_int_equal(ship("n1", job_c, 2, 0, "again\n", 6, &r), 200);
    ts_response_free(&r);
    assert_int_equal(ship("n1", job_c, 1, 19, "last of one", 11, &r), 200);
    assert_int_equal(next_offset(&r, job_c, 1), 30);
    ts_response_free(&r);
    char out[256];
    read_logs(TS_IT_ADMIN_TOKEN, job_c, NULL, out, sizeof(out));
    assert_string_equal(out, "one\ntwo\nthree\nfour\nlast of one\nagain\n");
}

static void readers_see_only_jobs_of_their_projects(void **state)
{
    char out[256];
    assert_int_equal(read_logs(member1, job_a, NULL, out, sizeof(out)), 200);
    assert_string_equal(out, "hello\nworld\n");
    assert_int_equal(read_logs(viewer, job_a, NULL, out, sizeof(out)), 200);
    assert_int_equal(read_logs(member2, job_a, NULL, out, sizeof(out)), 403);
    assert_int_equal(read_logs(agent, job_a, NULL, out, sizeof(out)), 403);
    assert_int_equal(read_logs(member2, 999999, NULL, out, sizeof(out)), 404);
    /* an agent ships; a member cannot */
    struct ts_client *c = ts_it_client(&srv, member1);
    assert_int_equal(ts_it_req(c, "POST", "/api/v1/nodes/n1/logs", "{\"chunks\":[]}", NULL, NULL),
                     403);
    ts_client_free(c);
}

static void output_past_the_cap_drops_the_oldest_chunks(void **state)
{
    char block[2001];
    struct ts_response r;
    for (int i = 0; i < 3; i++) {
        memset(block, 'a' + i, 1999);
        block[1999] = '\n';
        block[2000] = '\0';
        assert_int_equal(ship("n1", job_d, 1, i * 2000, block, 2000, &r), 200);
        assert_int_equal(next_offset(&r, job_d, 1), (i + 1) * 2000);
        ts_response_free(&r);
    }
    assert_string_equal(sql1("SELECT log_bytes FROM job WHERE id = %lld", job_d), "4000");
    assert_string_equal(
        sql1("SELECT min(offset_bytes) FROM job_log WHERE job_id = %lld AND length(data) > 0",
             job_d),
        "2000");
    char *out = malloc(8192);
    read_logs(TS_IT_ADMIN_TOKEN, job_d, NULL, out, 8192);
    assert_int_equal(strlen(out), 4000);
    assert_int_equal(out[0], 'b');
    assert_int_equal(out[3999 - 1], 'c');
    /* the dropped chunk shipped again is still known: not stored */
    memset(block, 'a', 1999);
    assert_int_equal(ship("n1", job_d, 1, 0, block, 2000, &r), 200);
    assert_int_equal(next_offset(&r, job_d, 1), 6000);
    ts_response_free(&r);
    assert_string_equal(sql1("SELECT log_bytes FROM job WHERE id = %lld", job_d), "4000");
    /* a new attempt pushes the old one out entirely; its end is remembered */
    sql1("UPDATE job SET attempt = 2 WHERE id = %lld", job_d);
    for (int i = 0; i < 2; i++) {
        memset(block, 'x' + i, 2000);
        assert_int_equal(ship("n1", job_d, 2, i * 2000, block, 2000, &r), 200);
        ts_response_free(&r);
    }
    assert_string_equal(sql1("SELECT count(*) FROM job_log WHERE job_id = %lld AND attempt = 1 AND"
                             " length(data) > 0",
                             job_d),
                        "0");
    memset(block, 'c', 1999);
    assert_int_equal(ship("n1", job_d, 1, 4000, block, 2000, &r), 200);
    assert_int_equal(next_offset(&r, job_d, 1), 6000);
    ts_response_free(&r);
    assert_string_equal(sql1("SELECT log_bytes FROM job WHERE id = %lld", job_d), "4000");
    /* one chunk bigger than the cap keeps its newest bytes */
    char *huge = malloc(6000);
    memset(huge, 'p', 3000);
    memset(huge + 3000, 'q', 3000);
    assert_int_equal(ship("n1", job_d, 2, 4000, huge, 6000, &r), 200);
    assert_int_equal(next_offset(&r, job_d, 2), 10000);
    ts_response_free(&r);
    free(huge);
    assert_string_equal(sql1("SELECT log_bytes FROM job WHERE id = %lld", job_d), "4096");
    read_logs(TS_IT_ADMIN_TOKEN, job_d, NULL, out, 8192);
    assert_int_equal(strlen(out), 4096);
    assert_int_equal(out[0], 'p');
    assert_int_equal(out[4095], 'q');
    free(out);
}

/* A follower: GET ...?follow=true on its own thread with libcurl. */
struct follower {
    long long job;
    const char *query;
    pthread_mutex_t mu;
    char buf[8192];
    size_t len;
    bool done;
    long status;
    double ended_at;
    pthread_t thread;
};

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    struct follower *f = ud;
    pthread_mutex_lock(&f->mu);
    size_t k = size * n;
    if (f->len + k < sizeof(f->buf)) {
        memcpy(f->buf + f->len, p, k);
        f->len += k;
        f->buf[f->len] = '\0';
    }
    pthread_mutex_unlock(&f->mu);
    return size * n;
}

static void *follow_run(void *arg)
{
    struct follower *f = arg;
    char url[512], auth[256];
    snprintf(url, sizeof(url), "%s/api/v1/jobs/%lld/logs?follow=true%s", srv.url, f->job,
             f->query ? f->query : "");
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", TS_IT_ADMIN_TOKEN);
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, auth);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_perform(c);
    long st = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    pthread_mutex_lock(&f->mu);
    f->status = st;
    f->done = true;
    f->ended_at = now_s();
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static void follow_start(struct follower *f, long long job, const char *query)
{
    memset(f, 0, sizeof(*f));
    f->job = job;
    f->query = query;
    pthread_mutex_init(&f->mu, NULL);
    pthread_create(&f->thread, NULL, follow_run, f);
}

/* Wait until the follower has received want (exactly) or timeout_ms. */
static bool follow_wait_for(struct follower *f, const char *want, int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        pthread_mutex_lock(&f->mu);
        bool ok = f->len == strlen(want) && memcmp(f->buf, want, f->len) == 0;
        pthread_mutex_unlock(&f->mu);
        if (ok)
            return true;
        ts_sleep_ms(20);
    }
    pthread_mutex_lock(&f->mu);
    fprintf(stderr, "follower has \"%s\", want \"%s\"\n", f->buf, want);
    pthread_mutex_unlock(&f->mu);
    return false;
}

static bool follow_done(struct follower *f)
{
    pthread_mutex_lock(&f->mu);
    bool d = f->done;
    pthread_mutex_unlock(&f->mu);
    return d;
}

static void a_follower_gets_new_output_and_ends_when_the_job_finishes(void **state)
{
    struct ts_response r;
    assert_int_equal(ship("n1", job_e, 1, 0, "first\nsecond\n", 13, &r), 200);
    ts_response_free(&r);
    struct follower f;
    follow_start(&f, job_e, "&tail=1");
    assert_true(follow_wait_for(&f, "second\n", 5000));
    /* output shipped after it connected reaches it, promptly */
    double t0 = now_s();
    assert_int_equal(ship("n1", job_e, 1, 13, "third\n", 6, &r), 200);
    ts_response_free(&r);
    assert_true(follow_wait_for(&f, "second\nthird\n", 5000));
    assert_true(now_s() - t0 < 1.0); /* woken by NOTIFY, not by the 1 s re-check */
    assert_false(follow_done(&f));
    /* a new attempt's output follows on */
    sql1("UPDATE job SET attempt = 2 WHERE id = %lld", job_e);
    assert_int_equal(ship("n1", job_e, 2, 0, "resumed", 7, &r), 200);
    ts_response_free(&r);
    assert_true(follow_wait_for(&f, "second\nthird\nresumed", 5000));
    ts_sleep_ms(1500);
    assert_false(follow_done(&f)); /* still running: still following */
    double finished_at = now_s();
    sql1("UPDATE job SET state = 'succeeded', finished_at = now() WHERE id = %lld", job_e);
    pthread_join(f.thread, NULL);
    assert_int_equal(f.status, 200);
    assert_string_equal(f.buf, "second\nthird\nresumed");
    assert_true(f.ended_at - finished_at < 4.0);
    /* a finished job's output is answered at once, even with follow */
    char out[256];
    double t1 = now_s();
    assert_int_equal(read_logs(TS_IT_ADMIN_TOKEN, job_e, "?follow=true", out, sizeof(out)), 200);
    assert_string_equal(out, "first\nsecond\nthird\nresumed");
    assert_true(now_s() - t1 < 1.0);
}

static void followers_hold_no_database_connection_while_they_wait(void **state)
{
    /* the server runs with --db-pool 2: four idle followers would starve it */
    enum { N = 4 };
    struct follower f[N];
    for (int i = 0; i < N; i++)
        follow_start(&f[i], job_a, NULL);
    for (int i = 0; i < N; i++)
        assert_true(follow_wait_for(&f[i], "hello\nworld\n", 5000));
    for (int k = 0; k < 5; k++) {
        double t0 = now_s();
        char path[64];
        snprintf(path, sizeof(path), "/api/v1/jobs/%lld", job_a);
        assert_int_equal(ts_it_req(srv.admin, "GET", path, NULL, NULL, NULL), 200);
        assert_true(now_s() - t0 < 3.0);
    }
    struct ts_response r;
    assert_int_equal(ship("n1", job_a, 1, 12, "more\n", 5, &r), 200);
    ts_response_free(&r);
    for (int i = 0; i < N; i++)
        assert_true(follow_wait_for(&f[i], "hello\nworld\nmore\n", 5000));
    sql1("UPDATE job SET state = 'failed', finished_at = now() WHERE id = %lld", job_a);
    for (int i = 0; i < N; i++) {
        pthread_join(f[i].thread, NULL);
        assert_int_equal(f[i].status, 200);
    }
}

static long long submit(const char *name, const char *project)
{
    char body[256];
    snprintf(body, sizeof(body),
             "{\"name\":\"%s\",\"project\":\"%s\",\"command\":[\"x\"],\"gpu\":{\"count\":1}}", name,
             project);
    struct ts_response r;
    long long id = -1;
    if (ts_it_req(srv.admin, "POST", "/api/v1/jobs", body, NULL, &r) == 201)
        id = ts_it_int(r.json, "id");
    ts_response_free(&r);
    return id;
}

static int setup(void **state)
{
    ts_client_global_init();
    static const char *const args[] = {"--log-max-bytes", "4096", "--db-pool", "2", NULL};
    if (ts_it_start(&srv, NULL, args) != 0)
        return -1;
    if (ts_it_req(srv.admin, "POST", "/api/v1/departments", "{\"name\":\"d\"}", NULL, NULL) !=
            201 ||
        ts_it_req(srv.admin, "POST", "/api/v1/projects", "{\"name\":\"p1\",\"department\":\"d\"}",
                  NULL, NULL) != 201 ||
        ts_it_req(srv.admin, "POST", "/api/v1/projects", "{\"name\":\"p2\",\"department\":\"d\"}",
                  NULL, NULL) != 201)
        return -1;
    snprintf(agent, sizeof(agent), "%s", ts_it_token(&srv, "agent", "agent", NULL));
    snprintf(member1, sizeof(member1), "%s", ts_it_token(&srv, "m1", "member", "[\"p1\"]"));
    snprintf(member2, sizeof(member2), "%s", ts_it_token(&srv, "m2", "member", "[\"p2\"]"));
    snprintf(viewer, sizeof(viewer), "%s", ts_it_token(&srv, "viewer", "viewer", NULL));
    job_a = submit("a", "p1");
    job_b = submit("b", "p1");
    job_c = submit("c", "p1");
    job_d = submit("d", "p1");
    job_e = submit("e", "p1");
    if (!agent[0] || !member1[0] || !member2[0] || !viewer[0] || job_e < 0)
        return -1;
    /* until agents register nodes and the scheduler places jobs: SQL. Each
     * job holds one whole GPU, as a running job placed by the scheduler. */
    char sql[2048];
    snprintf(sql, sizeof(sql),
             "INSERT INTO node (name, state, last_seen_at) VALUES ('n1', 'ready', now()),"
             " ('n2', 'ready', now());"
             "INSERT INTO gpu (node_id, idx, uuid, model, memory_bytes)"
             " SELECT n.id, i, n.name || '-' || i, 'H100', 85899345920"
             " FROM node n, generate_series(0, 4) i;"
             "UPDATE job SET state = 'running', attempt = 1,"
             " node_id = (SELECT id FROM node WHERE name = 'n1') WHERE id <> %lld;"
             "UPDATE job SET state = 'running', attempt = 1,"
             " node_id = (SELECT id FROM node WHERE name = 'n2') WHERE id = %lld;"
             "INSERT INTO job_gpu (job_id, gpu_id, memory_bytes)"
             " SELECT j.id, g.id, g.memory_bytes FROM job j JOIN gpu g ON g.node_id = j.node_id"
             " AND g.idx = j.id %% 5;",
             job_b, job_b);
    char out[8];
    return ts_it_sql(&srv, sql, out, sizeof(out));
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
        cmocka_unit_test(ships_chunks_once_and_answers_the_contiguous_end),
        cmocka_unit_test(a_chunk_past_a_gap_is_not_stored_and_the_answer_says_where_to_resume),
        cmocka_unit_test(chunks_of_jobs_not_on_the_node_are_ignored_and_reported),
        cmocka_unit_test(bad_chunks_are_refused_and_write_nothing),
        cmocka_unit_test(tail_gives_the_last_lines),
        cmocka_unit_test(every_attempt_is_shown_in_order),
        cmocka_unit_test(readers_see_only_jobs_of_their_projects),
        cmocka_unit_test(output_past_the_cap_drops_the_oldest_chunks),
        cmocka_unit_test(a_follower_gets_new_output_and_ends_when_the_job_finishes),
        cmocka_unit_test(followers_hold_no_database_connection_while_they_wait),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
