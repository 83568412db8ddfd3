/*
 * test_cli_retry.c - what the `tessera` CLI does when the server fails: a
 * scripted HTTP server on loopback drops connections or answers 5xx, and
 * records every request, so the tests see each attempt: a submit retried
 * with one Idempotency-Key throughout, safe requests retried a few times,
 * unsafe ones sent once, and the exit statuses and messages that result;
 * also the requests of commands whose routes the real server lacks so far
 * (suspend, resume, whoami).
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#define MAX_REQUESTS 16

/* ---- the scripted server ------------------------------------------------------ */

struct fake {
    int fd, port;
    pthread_t thread;
    atomic_bool stop;
    const char *const *script; /* one action per request, the last repeats */
    int nscript;
    int seen;
    char method[MAX_REQUESTS][16];
    char path[MAX_REQUESTS][256];
    char key[MAX_REQUESTS][300];   /* Idempotency-Key, "" when absent */
    char match[MAX_REQUESTS][64];  /* If-Match, "" when absent */
    char body[MAX_REQUESTS][1024]; /* the request's body */
};

static struct fake fk;

static const char problem503[] =
    "{\"type\":\"urn:tessera:error:database_unavailable\",\"title\":\"Database unavailable\","
    "\"status\":503,\"code\":\"database_unavailable\",\"detail\":\"could not connect to "
    "database: connection refused\",\"hint\":\"try again in a moment\"}";
static const char job201[] = "{\"id\":77,\"name\":\"retried\",\"project\":\"p1\","
                             "\"state\":\"pending\"}";
static const char jobs200[] = "{\"jobs\":[],\"next_cursor\":null}";
static const char project200[] =
    "{\"id\":3,\"name\":\"vision\",\"department\":\"d1\",\"quota\":{\"gpus\":2.0,"
    "\"over_quota_weight\":3.0,\"limit\":8.0,\"priority\":5}}";
static const char whoami200[] =
    "{\"name\":\"alice\",\"role\":\"member\",\"projects\":[\"vision\",\"nlp\"]}";
/* a project that is no name: the whoami codec refuses the answer */
static const char whoami200_bad[] =
    "{\"name\":\"alice\",\"role\":\"member\",\"projects\":[\"vision\",7]}";
static const char problem412[] =
    "{\"type\":\"urn:tessera:error:precondition_failed\",\"title\":\"Precondition failed\","
    "\"status\":412,\"code\":\"precondition_failed\",\"detail\":\"project \\\"vision\\\" has "
    "changed: revision 8, not 7\"}";

static void reply_with(int c, int status, const char *reason, const char *type, const char *extra,
                       const char *body)
{
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                     "Connection: close\r\n\r\n",
                     status, reason, type, strlen(body), extra);
    if (write(c, head, (size_t)n) < 0 || write(c, body, strlen(body)) < 0)
        return;
}

static void reply(int c, int status, const char *reason, const char *type, const char *body)
{
    reply_with(c, status, reason, type, "", body);
}

/* Read one request's head and body; record it. */
static void take(int c, int i)
{
    char buf[16384] = "";
    size_t len = 0;
    char *end = NULL;
    while (len < sizeof(buf) - 1 && (end = strstr(buf, "\r\n\r\n")) == NULL) {
        ssize_t n = read(c, buf + len, sizeof(buf) - 1 - len);
        if (n <= 0)
            return;
        len += (size_t)n;
        buf[len] = '\0';
    }
    if (end == NULL)
        return;
    sscanf(buf, "%15s %255s", fk.method[i], fk.path[i]);
    fk.key[i][0] = '\0';
    fk.match[i][0] = '\0';
    fk.body[i][0] = '\0';
    size_t body = 0;
    for (char *line = strstr(buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
        if (strncasecmp(line + 2, "Idempotency-Key:", 16) == 0)
            sscanf(line + 18, "%299s", fk.key[i]);
        if (strncasecmp(line + 2, "If-Match:", 9) == 0)
            sscanf(line + 11, "%63s", fk.match[i]);
        if (strncasecmp(line + 2, "Content-Length:", 15) == 0)
            body = (size_t)atol(line + 17);
    }
    size_t have = len - (size_t)(end + 4 - buf);
    snprintf(fk.body[i], sizeof(fk.body[i]), "%s", end + 4);
    while (have < body) {
        ssize_t n = read(c, buf, sizeof(buf) - 1);
        if (n <= 0)
            return;
        buf[n] = '\0';
        size_t got = strlen(fk.body[i]);
        snprintf(fk.body[i] + got, sizeof(fk.body[i]) - got, "%s", buf);
        have += (size_t)n;
    }
}

static void *serve(void *arg)
{
    (void)arg;
    while (!atomic_load(&fk.stop)) {
        struct pollfd p = {fk.fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int c = accept(fk.fd, NULL, NULL);
        if (c < 0)
            continue;
        int i = fk.seen < MAX_REQUESTS ? fk.seen : MAX_REQUESTS - 1;
        take(c, i);
        const char *act = fk.script[fk.seen < fk.nscript ? fk.seen : fk.nscript - 1];
        fk.seen++;
        if (strcmp(act, "drop") == 0)
            ; /* close without a word */
        else if (strcmp(act, "503") == 0)
            reply(c, 503, "Service Unavailable", "application/problem+json", problem503);
        else if (strcmp(act, "502") == 0)
            reply(c, 502, "Bad Gateway", "text/html", "<html>upstream went away</html>\n");
        else if (strcmp(act, "201") == 0)
            reply(c, 201, "Created", "application/json", job201);
        else if (strcmp(act, "replay") == 0) /* the job an earlier attempt made */
            reply(c, 200, "OK", "application/json", job201);
        else if (strcmp(act, "project") == 0)
            reply_with(c, 200, "OK", "application/json", "ETag: \"7\"\r\n", project200);
        else if (strcmp(act, "job") == 0)
            reply(c, 200, "OK", "application/json", job201);
        else if (strcmp(act, "whoami") == 0)
            reply(c, 200, "OK", "application/json", whoami200);
        else if (strcmp(act, "whoami_bad") == 0)
            reply(c, 200, "OK", "application/json", whoami200_bad);
        else if (strcmp(act, "412") == 0)
            reply(c, 412, "Precondition Failed", "application/problem+json", problem412);
        else if (strcmp(act, "200") == 0)
            reply(c, 200, "OK", "application/json", jobs200);
        close(c);
    }
    return NULL;
}

static void fake_start(const char *const *script, int n)
{
    memset(&fk, 0, sizeof(fk));
    fk.script = script;
    fk.nscript = n;
    fk.fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fk.fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fk.fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fk.fd, 16), 0);
    socklen_t alen = sizeof(a);
    getsockname(fk.fd, (struct sockaddr *)&a, &alen);
    fk.port = ntohs(a.sin_port);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", fk.port);
    setenv("TESSERA_SERVER", url, 1);
    assert_int_equal(pthread_create(&fk.thread, NULL, serve, NULL), 0);
}

static void fake_stop(void)
{
    atomic_store(&fk.stop, true);
    pthread_join(fk.thread, NULL);
    close(fk.fd);
}

/* ---- running the CLI -------------------------------------------------------------- */

static char tmp[128], exe[512];

struct run {
    int status;
    char *out, *err;
};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *s = calloc(1, 65536);
    if (f && s && fread(s, 1, 65535, f) == 0)
        s[0] = '\0';
    if (f)
        fclose(f);
    return s;
}

static int cli(struct run *r, ...)
{
    const char *argv[32] = {exe};
    int n = 1;
    va_list ap;
    va_start(ap, r);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL && n < 31;)
        argv[n++] = s;
    va_end(ap);
    argv[n] = NULL;
    char out[300], err[300];
    snprintf(out, sizeof(out), "%s/stdout", tmp);
    snprintf(err, sizeof(err), "%s/stderr", tmp);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(o, 1);
        dup2(e, 2);
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    r->status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r->out = slurp(out);
    r->err = slurp(err);
    return r->status;
}

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

/* ---- tests --------------------------------------------------------------------------- */

static void a_submit_retried_after_no_answer_and_503_keeps_one_idempotency_key(void **state)
{
    static const char *const script[] = {"drop", "503", "201"};
    fake_start(script, 3);
    struct run r;
    int rc = cli(&r, "submit", "retried", "-p", "p1", "--", "true", NULL);
    fake_stop();
    assert_int_equal(rc, 0);
    assert_non_null(strstr(r.out, "job 77 (retried)"));
    assert_int_equal(fk.seen, 3);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(fk.method[i], "POST");
        assert_string_equal(fk.path[i], "/api/v1/jobs");
        assert_int_equal(strlen(fk.key[i]), 32);
        assert_string_equal(fk.key[i], fk.key[0]);
    }
    run_free(&r);
    /* the next invocation is another submit: another key */
    char first[300];
    snprintf(first, sizeof(first), "%s", fk.key[0]);
    static const char *const ok[] = {"201"};
    fake_start(ok, 1);
    cli(&r, "submit", "retried", "-p", "p1", "--", "true", NULL);
    fake_stop();
    assert_int_equal(fk.seen, 1);
    assert_string_not_equal(fk.key[0], first);
    run_free(&r);
}

static void a_submit_whose_answer_was_lost_reports_the_job_it_made(void **state)
{
    static const char *const script[] = {"drop", "replay"};
    fake_start(script, 2);
    struct run r;
    int rc = cli(&r, "submit", "retried", "-p", "p1", "--", "true", NULL);
    fake_stop();
    assert_int_equal(rc, 0);
    assert_int_equal(fk.seen, 2);
    assert_string_equal(fk.key[1], fk.key[0]);
    assert_non_null(strstr(r.out, "job 77 (retried) submitted to project p1"));
    run_free(&r);
}

static void a_server_that_keeps_failing_exits_2_with_its_message_after_4_tries(void **state)
{
    static const char *const script[] = {"503"};
    fake_start(script, 1);
    struct run r;
    int rc = cli(&r, "list", "-A", NULL);
    fake_stop();
    assert_int_equal(rc, 2);
    assert_int_equal(fk.seen, 4);
    assert_non_null(strstr(r.err, "error: could not connect to database: connection refused"));
    assert_non_null(strstr(r.err, "hint: try again in a moment"));
    run_free(&r);
}

static void a_get_that_succeeds_on_a_retry_is_a_success(void **state)
{
    static const char *const script[] = {"drop", "200"};
    fake_start(script, 2);
    struct run r;
    int rc = cli(&r, "list", "-A", NULL);
    fake_stop();
    assert_int_equal(rc, 0);
    assert_int_equal(fk.seen, 2);
    assert_non_null(strstr(r.out, "ID"));
    run_free(&r);
}

static void requests_unsafe_to_repeat_are_sent_once(void **state)
{
    static const char *const script[] = {"503"};
    fake_start(script, 1);
    struct run r;
    int rc = cli(&r, "project", "create", "once", "-d", "d1", NULL);
    int seen_create = fk.seen;
    fake_stop();
    assert_int_equal(rc, 2);
    assert_int_equal(seen_create, 1);
    run_free(&r);
    fake_start(script, 1);
    rc = cli(&r, "department", "delete", "once", NULL);
    fake_stop();
    assert_int_equal(rc, 2);
    assert_int_equal(fk.seen, 1);
    assert_string_equal(fk.method[0], "DELETE");
    run_free(&r);
}

static void set_quota_sends_the_etag_it_read_and_says_when_someone_else_changed_it(void **state)
{
    /* between the CLI's GET and its PUT, someone else wrote the quota */
    static const char *const script[] = {"project", "412"};
    fake_start(script, 2);
    struct run r;
    int rc = cli(&r, "project", "set-quota", "vision", "--gpus", "4", NULL);
    fake_stop();
    assert_int_equal(rc, 4);
    assert_int_equal(fk.seen, 2); /* not retried */
    assert_string_equal(fk.method[0], "GET");
    assert_string_equal(fk.path[0], "/api/v1/projects/vision");
    assert_string_equal(fk.method[1], "PUT");
    assert_string_equal(fk.path[1], "/api/v1/projects/vision/quota");
    assert_string_equal(fk.match[1], "\"7\"");
    /* only --gpus changed; the rest is what was read */
    json_t *q = json_loads(fk.body[1], 0, NULL);
    assert_non_null(q);
    assert_true(json_number_value(json_object_get(q, "gpus")) == 4);
    assert_true(json_number_value(json_object_get(q, "over_quota_weight")) == 3);
    assert_true(json_number_value(json_object_get(q, "limit")) == 8);
    assert_int_equal(json_integer_value(json_object_get(q, "priority")), 5);
    json_decref(q);
    assert_non_null(strstr(r.err, "project vision was changed by someone else"));
    assert_non_null(strstr(r.err, "nothing was written"));
    run_free(&r);
}

static void suspend_and_resume_post_to_the_job(void **state)
{
    static const char *const script[] = {"job"};
    fake_start(script, 1);
    struct run r;
    int rc = cli(&r, "suspend", "77", NULL);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(r.out, "job 77 (retried) suspend: pending"));
    run_free(&r);
    rc = cli(&r, "resume", "77", NULL);
    fake_stop();
    assert_int_equal(rc, 0);
    run_free(&r);
    assert_int_equal(fk.seen, 2);
    assert_string_equal(fk.method[0], "POST");
    assert_string_equal(fk.path[0], "/api/v1/jobs/77/suspend");
    assert_string_equal(fk.method[1], "POST");
    assert_string_equal(fk.path[1], "/api/v1/jobs/77/resume");
}

static void whoami_shows_what_the_server_says_of_the_token(void **state)
{
    static const char *const script[] = {"whoami"};
    fake_start(script, 1);
    struct run r;
    int rc = cli(&r, "whoami", NULL);
    fake_stop();
    assert_int_equal(rc, 0);
    assert_string_equal(fk.path[0], "/api/v1/whoami");
    assert_non_null(strstr(r.out, "name:     alice"));
    assert_non_null(strstr(r.out, "role:     member"));
    assert_non_null(strstr(r.out, "projects: vision, nlp"));
    run_free(&r);
}

/* The answer is read by api/'s whoami codec (ts_wire_whoami_decode), as the
 * agent's --join reads it: one that breaks it is named, nothing printed as
 * if it were the token's. */
static void a_whoami_answer_the_codec_refuses_is_an_error_naming_the_member(void **state)
{
    static const char *const script[] = {"whoami_bad"};
    fake_start(script, 1);
    struct run r;
    int rc = cli(&r, "whoami", NULL);
    fake_stop();
    assert_int_equal(rc, 2);
    assert_non_null(strstr(r.err, "could not read the server's answer to whoami"));
    assert_non_null(strstr(r.err, "projects[1]"));
    assert_null(strstr(r.out, "role:"));
    run_free(&r);
}

static void an_answer_that_is_not_a_problem_shows_its_status_and_first_line(void **state)
{
    static const char *const script[] = {"502"};
    fake_start(script, 1);
    struct run r;
    int rc = cli(&r, "list", "-A", NULL);
    fake_stop();
    assert_int_equal(rc, 2);
    assert_non_null(strstr(r.err, "HTTP 502: <html>upstream went away</html>"));
    run_free(&r);
}

static int setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    const char *bin = getenv("TS_BIN_DIR") ? getenv("TS_BIN_DIR") : "build/bin";
    snprintf(exe, sizeof(exe), "%s/tessera", bin);
    snprintf(tmp, sizeof(tmp), "/tmp/tessera-cli-retry-XXXXXX");
    if (mkdtemp(tmp) == NULL)
        return -1;
    char cfg[200];
    snprintf(cfg, sizeof(cfg), "%s/config", tmp);
    setenv("XDG_CONFIG_HOME", cfg, 1);
    setenv("TESSERA_TOKEN", "test-token", 1);
    unsetenv("TESSERA_PROJECT");
    return 0;
}

static int teardown(void **state)
{
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_submit_retried_after_no_answer_and_503_keeps_one_idempotency_key),
        cmocka_unit_test(a_submit_whose_answer_was_lost_reports_the_job_it_made),
        cmocka_unit_test(a_server_that_keeps_failing_exits_2_with_its_message_after_4_tries),
        cmocka_unit_test(a_get_that_succeeds_on_a_retry_is_a_success),
        cmocka_unit_test(requests_unsafe_to_repeat_are_sent_once),
        cmocka_unit_test(set_quota_sends_the_etag_it_read_and_says_when_someone_else_changed_it),
        cmocka_unit_test(suspend_and_resume_post_to_the_job),
        cmocka_unit_test(whoami_shows_what_the_server_says_of_the_token),
        cmocka_unit_test(a_whoami_answer_the_codec_refuses_is_an_error_naming_the_member),
        cmocka_unit_test(an_answer_that_is_not_a_problem_shows_its_status_and_first_line),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
