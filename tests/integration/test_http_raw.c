/*
 * test_http_raw.c - what the server answers to requests a client library
 * would never send, written byte for byte on a socket to a real server:
 * every error is problem+json, and nothing is written.
 *
 *   - a request target with %00 is 400 (it was unescaped to a NUL that ended
 *     the path: /jobs/1%00 answered job 1);
 *   - two Content-Length header fields, or one with Transfer-Encoding, are
 *     400 (the first one had won: a way to smuggle a second request);
 *   - a target over 8 KiB is 414 and header fields over 32 KiB are 431,
 *     as problem+json (libmicrohttpd's own answers were HTML pages);
 *   - 401 says how to authenticate: WWW-Authenticate: Bearer, with
 *     error="invalid_token" when a token was sent;
 *   - bytes that are not UTF-8, quoted in a problem (a query parameter's
 *     name or value, the path), are '?' (the body had been dropped).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/harness.h"

static struct ts_it_server srv;

static int setup(void **state)
{
    (void)state;
    return ts_it_start(&srv, NULL, NULL);
}

static int teardown(void **state)
{
    (void)state;
    return ts_it_stop(&srv);
}

/* Send req (len bytes) on a new connection; the whole answer (new, NUL-ended). */
static char *raw(const char *req, size_t len)
{
    int port = atoi(strrchr(srv.url, ':') + 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    for (size_t off = 0; off < len;) {
        ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (n <= 0)
            break; /* the server may answer and close before reading it all */
        off += (size_t)n;
    }
    size_t cap = 65536, got = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    for (;;) {
        ssize_t n = recv(fd, out + got, cap - got - 1, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got + 1 == cap) {
            cap *= 2;
            char *grown = realloc(out, cap);
            assert_non_null(grown);
            out = grown;
        }
    }
    out[got] = '\0';
    close(fd);
    return out;
}

static char *raw_text(const char *req)
{
    return raw(req, strlen(req));
}

/* The answer has status, is problem+json with code. */
static void problem(const char *answer, int status, const char *code)
{
    char line[32], want[64];
    snprintf(line, sizeof(line), "HTTP/1.1 %d ", status);
    if (strncmp(answer, line, strlen(line)) != 0)
        fail_msg("want %d, got: %.200s", status, answer);
    assert_non_null(strcasestr(answer, "\r\nContent-Type: application/problem+json"));
    snprintf(want, sizeof(want), "\"code\":\"%s\"", code);
    if (strstr(answer, want) == NULL)
        fail_msg("want code %s, got: %.400s", code, answer);
}

static long jobs_count(void)
{
    char out[32];
    assert_int_equal(ts_it_sql(&srv, "SELECT count(*) FROM job", out, sizeof(out)), 0);
    return atol(out);
}

#define AUTH "Authorization: Bearer " TS_IT_ADMIN_TOKEN "\r\n"

static void a_nul_in_the_target_is_400(void **state)
{
    (void)state;
    char *a =
        raw_text("GET /api/v1/jobs/1%00 HTTP/1.1\r\nHost: x\r\n" AUTH "Connection: close\r\n\r\n");
    problem(a, 400, "bad_request");
    assert_non_null(strstr(a, "%00"));
    free(a);
    a = raw_text("GET /api/v1/jobs?project=a%00b HTTP/1.1\r\nHost: x\r\n" AUTH
                 "Connection: close\r\n\r\n");
    problem(a, 400, "bad_request");
    free(a);
    /* an escaped percent sign followed by 00 is no NUL */
    a = raw_text("GET /api/v1/jobs/1%2500 HTTP/1.1\r\nHost: x\r\n" AUTH
                 "Connection: close\r\n\r\n");
    assert_null(strstr(a, "bad_request"));
    free(a);
}

/* A message that quotes what the client sent stays a problem+json body
 * when those bytes are not UTF-8 (they were dropped with the body): '?'
 * stands for each such byte. Written here, not in tests/data/http, since
 * Prism (api/conformance/http_cases) rewrites such bytes and drops the
 * connection on %FF in a path. */
static void bytes_that_are_not_utf8_are_quoted_as_question_marks(void **state)
{
    (void)state;
    char *a =
        raw_text("GET /api/v1/jobs?%FF=1 HTTP/1.1\r\nHost: x\r\n" AUTH "Connection: close\r\n\r\n");
    problem(a, 400, "bad_parameter");
    assert_non_null(strstr(a, "unknown query parameter \\\"?\\\""));
    assert_non_null(strstr(a, "\"field\":\"?\""));
    free(a);
    a = raw_text("GET /api/v1/jobs?state=%C3%28 HTTP/1.1\r\nHost: x\r\n" AUTH
                 "Connection: close\r\n\r\n");
    problem(a, 400, "bad_parameter");
    assert_non_null(strstr(a, "unknown job state: \\\"?(\\\""));
    free(a);
    a = raw_text("GET /api/v1/jobs/%FF HTTP/1.1\r\nHost: x\r\n" AUTH "Connection: close\r\n\r\n");
    problem(a, 404, "not_found");
    assert_non_null(strstr(a, "\"instance\":\"/api/v1/jobs/?\""));
    free(a);
}

static void two_content_lengths_are_400_and_write_nothing(void **state)
{
    (void)state;
    long before = jobs_count();
    const char *body = "{\"name\": \"x\", \"project\": \"nosuch\", \"command\": [\"true\"]}";
    char req[1024];
    snprintf(req, sizeof(req),
             "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\n" AUTH
             "Content-Type: application/json\r\nContent-Length: %zu\r\nContent-Length: 5\r\n"
             "Connection: close\r\n\r\n%s",
             strlen(body), body);
    char *a = raw_text(req);
    problem(a, 400, "bad_request");
    assert_non_null(strstr(a, "Content-Length"));
    free(a);
    snprintf(req, sizeof(req),
             "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\n" AUTH
             "Content-Type: application/json\r\nContent-Length: %zu\r\n"
             "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n%s",
             strlen(body), body);
    a = raw_text(req);
    assert_non_null(strstr(a, " 400 "));
    free(a);
    assert_int_equal(jobs_count(), before);
}

static void a_long_target_is_414_and_large_headers_431_as_problems(void **state)
{
    (void)state;
    size_t n = 20000;
    char *req = malloc(n + 256);
    assert_non_null(req);
    int k = snprintf(req, 64, "GET /api/v1/jobs?x=");
    memset(req + k, 'a', n);
    snprintf(req + k + n, 200, " HTTP/1.1\r\nHost: x\r\n" AUTH "Connection: close\r\n\r\n");
    char *a = raw_text(req);
    problem(a, 414, "uri_too_long");
    free(a);
    k = snprintf(req, 200, "GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n" AUTH "X-Big: ");
    n = 40000;
    char *grown = realloc(req, (size_t)k + n + 64);
    assert_non_null(grown);
    req = grown;
    memset(req + k, 'b', n);
    snprintf(req + k + n, 64, "\r\nConnection: close\r\n\r\n");
    a = raw_text(req);
    problem(a, 431, "headers_too_large");
    free(a);
    free(req);
}

static void unauthenticated_answers_say_how_to_authenticate(void **state)
{
    (void)state;
    char *a = raw_text("GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    problem(a, 401, "unauthenticated");
    assert_non_null(strcasestr(a, "\r\nWWW-Authenticate: Bearer realm=\"tessera\"\r\n"));
    free(a);
    a = raw_text("GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tsk_nope\r\n"
                 "Connection: close\r\n\r\n");
    problem(a, 401, "unauthenticated");
    assert_non_null(
        strcasestr(a, "\r\nWWW-Authenticate: Bearer realm=\"tessera\", error=\"invalid_token\""));
    free(a);
    /* the server still answers ordinary requests on a kept-alive connection */
    a = raw_text("GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(a, " 200 "));
    free(a);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_nul_in_the_target_is_400),
        cmocka_unit_test(bytes_that_are_not_utf8_are_quoted_as_question_marks),
        cmocka_unit_test(two_content_lengths_are_400_and_write_nothing),
        cmocka_unit_test(a_long_target_is_414_and_large_headers_431_as_problems),
        cmocka_unit_test(unauthenticated_answers_say_how_to_authenticate),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
