/*
 * test_cli.c - the `tessera` CLI as users run it: the real binary as a
 * subprocess against a real server (harness.c), its output, its exit status
 * and what it changed, checked through the API.
 */
#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/clock.h"

#include "api/array.h"
#include "tests/integration/agentplay.h"
#include "tests/integration/harness.h"

static struct ts_it_server srv;
static char tmp[128];    /* this test's folder: config, captured output */
static char cfgdir[256]; /* XDG_CONFIG_HOME */
static char exe[512];
static bool have_node; /* gpu-node-1 was registered */

/* ---- running the CLI ---------------------------------------------------- */

struct run {
    int status; /* exit status; -1 when it did not exit by itself */
    char *out, *err;
};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc(1, (size_t)n + 1);
    if (s && n > 0 && fread(s, 1, (size_t)n, f) != (size_t)n)
        s[0] = '\0';
    fclose(f);
    return s;
}

/* Start tessera with args (NULL-terminated) and input on stdin (NULL: none);
 * returns its pid. */
static pid_t cli_start(const char *input, const char *const *args)
{
    char in[300], out[300], err[300];
    snprintf(in, sizeof(in), "%s/stdin", tmp);
    snprintf(out, sizeof(out), "%s/stdout", tmp);
    snprintf(err, sizeof(err), "%s/stderr", tmp);
    FILE *f = fopen(in, "w");
    if (f) {
        fputs(input ? input : "", f);
        fclose(f);
    }
    const char *argv[64] = {exe};
    int n = 1;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int i0 = open(in, O_RDONLY), o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600),
            e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(i0, 0);
        dup2(o, 1);
        dup2(e, 2);
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Wait up to 60 s for pid and collect its output into r. */
static void cli_finish(pid_t pid, struct run *r)
{
    char out[300], err[300];
    snprintf(out, sizeof(out), "%s/stdout", tmp);
    snprintf(err, sizeof(err), "%s/stderr", tmp);
    int status = 0;
    r->status = -1;
    for (int waited = 0;; waited += 10) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            r->status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            break;
        }
        if (waited > 60000) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        ts_sleep_ms(10);
    }
    r->out = slurp(out);
    r->err = slurp(err);
}

static int cli_in(struct run *r, const char *input, const char *const *args)
{
    cli_finish(cli_start(input, args), r);
    return r->status;
}

/* Run tessera ARGS... (NULL-terminated); returns the exit status. */
static int cli(struct run *r, ...)
{
    const char *args[64];
    int n = 0;
    va_list ap;
    va_start(ap, r);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL && n < 63;)
        args[n++] = s;
    va_end(ap);
    args[n] = NULL;
    return cli_in(r, NULL, args);
}

/* Run tessera ARGS... (NULL-terminated) on a terminal cols characters wide
 * (a pseudo-terminal); what it printed, stdout and stderr together and
 * without the terminal's carriage returns, into r->out. Returns the exit
 * status. */
static int cli_tty(struct run *r, int cols, ...)
{
    const char *argv[64] = {exe};
    int n = 1;
    va_list ap;
    va_start(ap, cols);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL && n < 63;)
        argv[n++] = s;
    va_end(ap);
    argv[n] = NULL;
    struct winsize ws = {.ws_row = 50, .ws_col = (unsigned short)cols};
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, &ws);
    if (pid == 0) {
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    assert_true(pid > 0);
    size_t len = 0, cap = 1 << 16;
    char *out = calloc(1, cap);
    for (;;) {
        char buf[4096];
        ssize_t k = read(master, buf, sizeof(buf));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) /* EIO once the child has gone */
            break;
        for (ssize_t i = 0; i < k; i++)
            if (buf[i] != '\r' && len + 1 < cap)
                out[len++] = buf[i];
    }
    close(master);
    int status = 0;
    waitpid(pid, &status, 0);
    r->status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r->out = out;
    r->err = strdup("");
    return r->status;
}

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

/* The environment every test starts from: this server, the admin token,
 * no default project, a private config folder, wide tables. */
static void env_default(void)
{
    setenv("XDG_CONFIG_HOME", cfgdir, 1);
    setenv("TESSERA_SERVER", srv.url, 1);
    setenv("TESSERA_TOKEN", TS_IT_ADMIN_TOKEN, 1);
    unsetenv("TESSERA_PROJECT");
    setenv("COLUMNS", "250", 1);
    char path[400];
    snprintf(path, sizeof(path), "%s/tessera/config.json", cfgdir);
    unlink(path);
}

/* GET path as admin; the parsed body (new) or NULL. */
static json_t *api_get(const char *path)
{
    struct ts_response r;
    if (ts_it_req(srv.admin, "GET", path, NULL, NULL, &r) != 200) {
        ts_response_free(&r);
        return NULL;
    }
    json_t *j = json_incref(r.json);
    ts_response_free(&r);
    return j;
}

static json_t *api_job(long long id)
{
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    return api_get(path);
}

/* The CLI's -o json output (its arguments, NULL-terminated) is the API's
 * JSON at path. Read again, up to 10 s, while they differ: a scheduler
 * cycle between the two reads (they run --cycle-interval apart) may give a
 * job its reason after one read and before the other. */
static void cli_json_is_api(const char *path, ...)
{
    const char *args[64];
    int n = 0;
    va_list ap;
    va_start(ap, path);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL && n < 63;)
        args[n++] = s;
    va_end(ap);
    args[n] = NULL;
    for (int i = 0;; i++) {
        struct run r;
        assert_int_equal(cli_in(&r, NULL, args), 0);
        json_t *got = json_loads(r.out, 0, NULL), *api = api_get(path);
        bool same = got != NULL && json_equal(got, api);
        json_decref(got);
        json_decref(api);
        run_free(&r);
        if (same)
            return;
        if (i == 20)
            fail_msg("tessera %s -o json is not GET %s after 10 s", args[0], path);
        usleep(500 * 1000);
    }
}

/* The code of a job's pending reason once the scheduler has looked at it
 * (or whatever it is after 10 s), into code. */
static void settled_reason(long long id, char *code, size_t len)
{
    for (int i = 0; i < 500; i++) {
        json_t *j = api_job(id);
        snprintf(code, len, "%s", ts_it_str(json_object_get(j, "pending_reason"), "code"));
        json_decref(j);
        if (strcmp(code, "not_yet_scheduled") != 0)
            return;
        ts_sleep_ms(20);
    }
}

/* Submit through the CLI with --parsable; the new job's id (fails the test
 * otherwise). */
static long long submit_id(const char *name, const char *project)
{
    struct run r;
    assert_int_equal(cli(&r, "submit", name, "-p", project, "--parsable", "--", "true", NULL), 0);
    long long id = atoll(r.out);
    assert_true(id > 0);
    run_free(&r);
    return id;
}

/* GET path once the scheduler has decided what it lists: two reads half a
 * second apart alike (cycles run --cycle-interval apart, so a job just
 * submitted gets its reason a moment later). Fails after 15 s. */
static void get_settled(const char *path, struct ts_response *out)
{
    struct ts_response prev;
    assert_int_equal(ts_it_req(srv.admin, "GET", path, NULL, NULL, &prev), 200);
    for (int i = 0; i < 30; i++) {
        usleep(500 * 1000);
        assert_int_equal(ts_it_req(srv.admin, "GET", path, NULL, NULL, out), 200);
        bool same = out->body.len == prev.body.len &&
                    memcmp(out->body.data, prev.body.data, prev.body.len) == 0;
        ts_response_free(&prev);
        if (same)
            return;
        prev = *out;
    }
    fail_msg("%s kept changing for 15 s", path);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* ---- session: login, config, whoami --------------------------------------- */

static void login_checks_the_token_and_writes_the_config_file_0600(void **state)
{
    env_default();
    unsetenv("TESSERA_TOKEN");
    unsetenv("TESSERA_SERVER");
    struct run r;
    char path[400];
    snprintf(path, sizeof(path), "%s/tessera/config.json", cfgdir);
    /* a token the server refuses is not written */
    assert_int_equal(cli(&r, "login", "--server", srv.url, "--token", "not-a-token", NULL), 5);
    assert_non_null(strstr(r.err, "refused the token"));
    run_free(&r);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(cli(&r, "login", "--server", srv.url, "--token", TS_IT_ADMIN_TOKEN, NULL), 0);
    run_free(&r);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/tessera", cfgdir);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    json_t *f = json_load_file(path, 0, NULL);
    assert_non_null(f);
    assert_string_equal(ts_it_str(f, "server"), srv.url);
    assert_string_equal(ts_it_str(f, "token"), TS_IT_ADMIN_TOKEN);
    json_decref(f);
    /* the file alone is enough now */
    assert_int_equal(cli(&r, "whoami", NULL), 0);
    assert_non_null(strstr(r.out, "role:     admin"));
    assert_non_null(strstr(r.out, "(from config file)"));
    run_free(&r);
    /* a server that does not answer: nothing is written */
    assert_int_equal(cli(&r, "login", "--server", "http://127.0.0.1:1", "--token", "x", NULL), 2);
    run_free(&r);
    f = json_load_file(path, 0, NULL);
    assert_string_equal(ts_it_str(f, "server"), srv.url);
    json_decref(f);
}

static void login_reads_the_token_from_stdin_and_keeps_a_default_project(void **state)
{
    env_default();
    unsetenv("TESSERA_TOKEN");
    struct run r;
    const char *args[] = {"login", "-p", "p1", NULL};
    char input[128];
    snprintf(input, sizeof(input), "%s\n", TS_IT_ADMIN_TOKEN);
    assert_int_equal(cli_in(&r, input, args), 0);
    run_free(&r);
    char path[400];
    snprintf(path, sizeof(path), "%s/tessera/config.json", cfgdir);
    json_t *f = json_load_file(path, 0, NULL);
    assert_string_equal(ts_it_str(f, "token"), TS_IT_ADMIN_TOKEN);
    assert_string_equal(ts_it_str(f, "project"), "p1");
    json_decref(f);
    /* a default project that does not exist is refused */
    const char *bad[] = {"login", "-p", "nope", NULL};
    assert_int_equal(cli_in(&r, input, bad), 3);
    run_free(&r);
}

static void flags_win_over_the_environment_which_wins_over_the_file(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "config", "set", "server", "http://127.0.0.1:1", NULL), 0);
    run_free(&r);
    assert_int_equal(cli(&r, "config", "set", "project", "p2", NULL), 0);
    run_free(&r);
    /* TESSERA_SERVER (the test's server) wins over the file */
    assert_int_equal(cli(&r, "config", "view", NULL), 0);
    assert_non_null(strstr(r.out, "(from TESSERA_SERVER)"));
    assert_non_null(strstr(r.out, "project:     p2 (from config file)"));
    run_free(&r);
    /* without it, the file's server, which does not answer */
    unsetenv("TESSERA_SERVER");
    assert_int_equal(cli(&r, "list", NULL), 2);
    assert_non_null(strstr(r.err, "127.0.0.1:1"));
    run_free(&r);
    /* --server wins over both */
    setenv("TESSERA_SERVER", "http://127.0.0.1:2", 1);
    assert_int_equal(cli(&r, "--server", srv.url, "list", NULL), 0);
    run_free(&r);
    /* TESSERA_PROJECT wins over the file's project, -p over both */
    setenv("TESSERA_PROJECT", "p1", 1);
    assert_int_equal(cli(&r, "config", "view", "-o", "json", NULL), 0);
    json_t *v = json_loads(r.out, 0, NULL);
    assert_string_equal(ts_it_str(v, "project"), "p1");
    assert_string_equal(ts_it_str(v, "project_from"), "TESSERA_PROJECT");
    assert_null(strstr(r.out, TS_IT_ADMIN_TOKEN)); /* the token is masked */
    json_decref(v);
    run_free(&r);
    /* an unknown key is a usage error; "" removes a key */
    assert_int_equal(cli(&r, "config", "set", "sever", "x", NULL), 1);
    run_free(&r);
    assert_int_equal(cli(&r, "config", "set", "project", "", NULL), 0);
    run_free(&r);
    unsetenv("TESSERA_PROJECT");
    setenv("TESSERA_SERVER", srv.url, 1);
    assert_int_equal(cli(&r, "config", "view", NULL), 0);
    assert_non_null(strstr(r.out, "project:     (none)"));
    run_free(&r);
}

static void a_malformed_config_file_is_an_error_naming_it(void **state)
{
    env_default();
    char path[400];
    snprintf(path, sizeof(path), "%s/tessera", cfgdir);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/tessera/config.json", cfgdir);
    FILE *f = fopen(path, "w");
    fputs("{\"servr\": \"x\"}", f);
    fclose(f);
    struct run r;
    assert_int_equal(cli(&r, "list", NULL), 1);
    assert_non_null(strstr(r.err, "unknown member \"servr\""));
    assert_non_null(strstr(r.err, path));
    run_free(&r);
    unlink(path);
}

static void whoami_names_the_role_and_the_projects_of_a_member(void **state)
{
    env_default();
    char tok[128];
    snprintf(tok, sizeof(tok), "%s", ts_it_token(&srv, "who-member", "member", "[\"p2\"]"));
    setenv("TESSERA_TOKEN", tok, 1);
    struct run r;
    assert_int_equal(cli(&r, "whoami", NULL), 0);
    assert_null(strstr(r.out, "admin"));
    assert_non_null(strstr(r.out, "role:     member"));
    assert_non_null(strstr(r.out, "projects: p2"));
    assert_null(strstr(r.out, "p1"));
    run_free(&r);
    /* and an admin's */
    setenv("TESSERA_TOKEN", TS_IT_ADMIN_TOKEN, 1);
    assert_int_equal(cli(&r, "whoami", "-o", "json", NULL), 0);
    json_t *v = json_loads(r.out, 0, NULL);
    assert_string_equal(ts_it_str(v, "role"), "admin");
    json_decref(v);
    run_free(&r);
}

/* ---- submit --------------------------------------------------------------- */

static void submit_sends_whole_gpus(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "submit", "whole", "-p", "p1", "-g", "2", "--", "python", "-c",
                         "print('a b')", NULL),
                     0);
    assert_non_null(strstr(r.out, "submitted to project p1: pending"));
    long long id = atoll(strstr(r.out, "job ") + 4);
    run_free(&r);
    json_t *j = api_job(id);
    assert_non_null(j);
    assert_string_equal(ts_it_str(j, "name"), "whole");
    assert_int_equal(ts_it_int(json_object_get(j, "gpu"), "count"), 2);
    json_t *want = json_pack("[s,s,s]", "python", "-c", "print('a b')");
    assert_true(json_equal(json_object_get(j, "command"), want));
    json_decref(want);
    json_decref(j);
}

static void submit_sends_a_portion_with_its_limit_on_several_devices(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "submit", "portion", "-p", "p1", "--gpu-portion-request", "0.25",
                         "--gpu-portion-limit", "0.5", "--gpu-devices", "2", "--parsable", "--",
                         "sleep", "1", NULL),
                     0);
    /* --parsable: the id and nothing else */
    size_t digits = strspn(r.out, "0123456789");
    assert_true(digits > 0);
    assert_string_equal(r.out + digits, "\n");
    json_t *j = api_job(atoll(r.out));
    run_free(&r);
    json_t *g = json_object_get(j, "gpu");
    assert_true(json_number_value(json_object_get(g, "portion")) == 0.25);
    assert_true(json_number_value(json_object_get(g, "portion_limit")) == 0.5);
    assert_int_equal(ts_it_int(g, "devices"), 2);
    json_decref(j);
}

static void submit_sends_gpu_memory_with_its_limit(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "submit", "memory", "-p", "p1", "--gpu-memory-request", "20G",
                         "--gpu-memory-limit", "60G", "--parsable", "--", "true", NULL),
                     0);
    json_t *j = api_job(atoll(r.out));
    run_free(&r);
    json_t *g = json_object_get(j, "gpu");
    assert_int_equal(ts_it_int(g, "memory_bytes"), 20LL << 30);
    assert_int_equal(ts_it_int(g, "memory_limit_bytes"), 60LL << 30);
    json_decref(j);
}

static void submit_sends_every_other_option(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "submit", "everything", "-p", "p1", "--kind", "interactive", "--cpu",
                         "4", "--memory", "32G", "--priority", "7", "--preemptible", "--env", "A=1",
                         "-e", "B=x=y", "--gpu-model", "A100", "--gpu-model", "H100", "--selector",
                         "zone=a", "--working-dir", "/srv", "--max-runtime", "2h",
                         "--idle-swap-after", "20m", "--grace-period", "2m", "--no-swap",
                         "--parsable", "--", "jupyter", "lab", NULL),
                     0);
    json_t *j = api_job(atoll(r.out));
    run_free(&r);
    assert_string_equal(ts_it_str(j, "kind"), "interactive");
    assert_true(json_number_value(json_object_get(j, "cpu")) == 4);
    assert_int_equal(ts_it_int(j, "memory_bytes"), 32LL << 30);
    assert_int_equal(ts_it_int(j, "priority"), 7);
    assert_true(json_is_true(json_object_get(j, "preemptible"))); /* not the kind's default */
    assert_string_equal(ts_it_str(json_object_get(j, "env"), "A"), "1");
    assert_string_equal(ts_it_str(json_object_get(j, "env"), "B"), "x=y");
    json_t *models = json_pack("[s,s]", "A100", "H100");
    assert_true(json_equal(json_object_get(j, "gpu_model"), models));
    json_decref(models);
    assert_string_equal(ts_it_str(json_object_get(j, "node_selector"), "zone"), "a");
    assert_string_equal(ts_it_str(j, "working_dir"), "/srv");
    assert_int_equal(ts_it_int(j, "max_runtime_seconds"), 7200);
    assert_int_equal(ts_it_int(j, "idle_swap_after_seconds"), 1200);
    assert_int_equal(ts_it_int(j, "grace_seconds"), 120);
    assert_true(json_is_false(json_object_get(j, "swap")));
    assert_true(json_is_null(json_object_get(j, "gpu")));
    json_decref(j);
    /* --idle-swap-after 0: an interactive job that never swaps its idle memory out */
    assert_int_equal(cli(&r, "submit", "never-idle", "-p", "p1", "--kind", "interactive",
                         "--idle-swap-after", "0", "--parsable", "--", "true", NULL),
                     0);
    j = api_job(atoll(r.out));
    run_free(&r);
    assert_int_equal(ts_it_int(j, "idle_swap_after_seconds"), 0);
    json_decref(j);
    /* --non-preemptible */
    assert_int_equal(
        cli(&r, "submit", "np", "-p", "p1", "--non-preemptible", "--parsable", "--", "true", NULL),
        0);
    j = api_job(atoll(r.out));
    run_free(&r);
    assert_true(json_is_false(json_object_get(j, "preemptible")));
    json_decref(j);
}

static void submit_takes_the_default_project(void **state)
{
    env_default();
    setenv("TESSERA_PROJECT", "p2", 1);
    long long id = submit_id("in-default", "p2");
    json_t *j = api_job(id);
    assert_string_equal(ts_it_str(j, "project"), "p2");
    json_decref(j);
    unsetenv("TESSERA_PROJECT");
    struct run r;
    assert_int_equal(cli(&r, "submit", "no-project", "--", "true", NULL), 1);
    assert_non_null(strstr(r.err, "no project"));
    run_free(&r);
}

static void submit_refuses_bad_command_lines_with_exit_1(void **state)
{
    env_default();
    struct run r;
    char before[33], after[33];
    /* what the scheduler does with earlier jobs is done before the digest:
     * its cycles run --cycle-interval apart */
    ts_ap_settle_of(&srv, 0.5);
    ts_it_db_digest(&srv, before);
    assert_int_equal(cli(&r, "submit", "nocmd", "-p", "p1", NULL), 1);
    assert_non_null(strstr(r.err, "after --"));
    run_free(&r);
    assert_int_equal(cli(&r, "submit", "two", "-p", "p1", "-g", "1", "--gpu-portion-request", "0.5",
                         "--", "true", NULL),
                     1);
    run_free(&r);
    assert_int_equal(
        cli(&r, "submit", "lim", "-p", "p1", "--gpu-portion-limit", "0.5", "--", "true", NULL), 1);
    run_free(&r);
    assert_int_equal(cli(&r, "submit", "Bad_Name", "-p", "p1", "--", "true", NULL), 1);
    run_free(&r);
    assert_int_equal(cli(&r, "submit", "pri", "-p", "p1", "--priority", "high", "--", "true", NULL),
                     1);
    assert_non_null(strstr(r.err, "--priority"));
    run_free(&r);
    assert_int_equal(cli(&r, "submit", "env", "-p", "p1", "--env", "NOVALUE", "--", "true", NULL),
                     1);
    run_free(&r);
    /* a size without a unit is refused, naming the units, by every size flag */
    const char *sizes[] = {"--gpu-memory-request", "--gpu-memory-limit", "--memory"};
    for (size_t i = 0; i < TS_ARRAY_LEN(sizes); i++) {
        assert_int_equal(cli(&r, "submit", "bare", "-p", "p1", "--gpu-memory-request", "20GiB",
                             sizes[i], "20", "--", "true", NULL),
                         1);
        char want[80];
        snprintf(want, sizeof(want), "%s 20: give a unit, e.g. 20GiB", sizes[i]);
        assert_non_null(strstr(r.err, want));
        assert_non_null(strstr(r.err, "MiB"));
        run_free(&r);
    }
    const char *idle[] = {"soon", "-5m", "8d"};
    for (size_t i = 0; i < TS_ARRAY_LEN(idle); i++) {
        assert_int_equal(
            cli(&r, "submit", "idle", "-p", "p1", "--idle-swap-after", idle[i], "--", "true", NULL),
            1);
        assert_non_null(strstr(r.err, "--idle-swap-after"));
        run_free(&r);
    }
    const char *grace[] = {"later", "-1s", "25h"};
    for (size_t i = 0; i < TS_ARRAY_LEN(grace); i++) {
        assert_int_equal(
            cli(&r, "submit", "grace", "-p", "p1", "--grace-period", grace[i], "--", "true", NULL),
            1);
        assert_non_null(strstr(r.err, "--grace-period"));
        run_free(&r);
    }
    ts_it_db_digest(&srv, after);
    assert_string_equal(before, after);
    /* what only the server can judge: its message, exit 1 */
    assert_int_equal(cli(&r, "submit", "srv-bad", "-p", "p1", "--gpu-portion-request", "0.5",
                         "--gpu-portion-limit", "0.3", "--", "true", NULL),
                     1);
    assert_non_null(strstr(r.err, "error: gpu.portion_limit"));
    run_free(&r);
    /* a job name taken in the project: conflict */
    submit_id("taken", "p1");
    assert_int_equal(cli(&r, "submit", "taken", "-p", "p1", "--", "true", NULL), 4);
    assert_non_null(strstr(r.err, "error: "));
    run_free(&r);
}

static void each_submit_sends_its_own_key_and_a_replayed_request_makes_one_job(void **state)
{
    env_default();
    char before[32], after[32];
    ts_it_sql(&srv, "SELECT count(*) FROM idempotency_key", before, sizeof(before));
    long long a = submit_id("idem-a", "p1");
    long long b = submit_id("idem-b", "p1");
    assert_true(a != b);
    ts_it_sql(&srv, "SELECT count(*) FROM idempotency_key", after, sizeof(after));
    assert_int_equal(atoi(after), atoi(before) + 2);
    char key_a[300], key_b[300], sql[200];
    snprintf(sql, sizeof(sql), "SELECT key FROM idempotency_key WHERE job_id = %lld", a);
    assert_int_equal(ts_it_sql(&srv, sql, key_a, sizeof(key_a)), 0);
    snprintf(sql, sizeof(sql), "SELECT key FROM idempotency_key WHERE job_id = %lld", b);
    assert_int_equal(ts_it_sql(&srv, sql, key_b, sizeof(key_b)), 0);
    assert_int_equal(strlen(key_a), 32);
    assert_string_not_equal(key_a, key_b);
    /* the same request again with the CLI's key (what a retry sends): the
     * same job, not a second one */
    char hdr[340];
    snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", key_a);
    const char *headers[] = {hdr, NULL};
    struct ts_response r;
    assert_int_equal(ts_it_req(srv.admin, "POST", "/api/v1/jobs",
                               "{\"name\":\"idem-a\",\"project\":\"p1\",\"command\":[\"true\"]}",
                               headers, &r),
                     200);
    assert_int_equal(ts_it_int(r.json, "id"), a);
    ts_response_free(&r);
    char n[32];
    ts_it_sql(&srv, "SELECT count(*) FROM job WHERE name = 'idem-a'", n, sizeof(n));
    assert_string_equal(n, "1");
}

static void a_submit_repeated_with_its_key_returns_the_same_job(void **state)
{
    env_default();
    struct run r1, r2;
    const char *key = "cli-test-key-1";
    assert_int_equal(cli(&r1, "submit", "keyed", "-p", "p1", "--idempotency-key", key, "--parsable",
                         "--", "true", NULL),
                     0);
    assert_int_equal(
        cli(&r2, "submit", "keyed", "-p", "p1", "--idempotency-key", key, "--", "true", NULL), 0);
    assert_non_null(strstr(r2.out, "already submitted"));
    char want[64];
    snprintf(want, sizeof(want), "job %lld (keyed)", atoll(r1.out));
    assert_non_null(strstr(r2.out, want));
    run_free(&r1);
    run_free(&r2);
    char n[32];
    ts_it_sql(&srv, "SELECT count(*) FROM job WHERE name = 'keyed'", n, sizeof(n));
    assert_string_equal(n, "1");
}

static void submit_wait_ends_with_the_job_and_exits_6_unless_it_succeeded(void **state)
{
    env_default();
    const char *args[] = {"submit", "waited", "-p", "p1", "--wait", "--", "sleep", "100", NULL};
    pid_t pid = cli_start(NULL, args);
    /* find the job, then cancel it behind the waiting CLI's back */
    char id[32] = "";
    for (int i = 0; i < 500; i++) {
        ts_it_sql(&srv, "SELECT id FROM job WHERE name = 'waited'", id, sizeof(id));
        if (id[0] != '\0')
            break;
        ts_sleep_ms(20);
    }
    assert_true(id[0] != '\0');
    ts_sleep_ms(300);
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%s", id);
    assert_int_equal(ts_it_req(srv.admin, "DELETE", path, NULL, NULL, NULL), 200);
    struct run r;
    cli_finish(pid, &r);
    assert_int_equal(r.status, 6);
    assert_non_null(strstr(r.err, "cancelled"));
    run_free(&r);
}

/* ---- list, describe, cancel, events, why, queue ----------------------------- */

static void list_follows_every_page_and_json_is_the_api_json(void **state)
{
    env_default();
    ts_it_req(srv.admin, "POST", "/api/v1/projects", "{\"name\":\"plist\",\"department\":\"d1\"}",
              NULL, NULL);
    for (int i = 0; i < 7; i++) {
        char name[32];
        snprintf(name, sizeof(name), "listed-%d", i);
        submit_id(name, "plist");
    }
    struct run r;
    assert_int_equal(cli(&r, "list", "-p", "plist", "--page-size", "2", NULL), 0);
    for (int i = 0; i < 7; i++) {
        char name[32];
        snprintf(name, sizeof(name), "listed-%d ", i);
        assert_non_null(strstr(r.out, name));
    }
    assert_int_equal(count_lines(r.out), 8); /* header and 7 jobs */
    assert_true(strncmp(r.out, "ID", 2) == 0);
    run_free(&r);
    /* one page: byte for byte what the API sends */
    struct ts_response api;
    get_settled("/api/v1/jobs?project=plist", &api);
    assert_int_equal(cli(&r, "list", "-p", "plist", "-o", "json", NULL), 0);
    assert_int_equal(strlen(r.out), api.body.len + 1);
    assert_memory_equal(r.out, api.body.data, api.body.len);
    run_free(&r);
    /* several pages: the API's jobs, all of them, in one object */
    assert_int_equal(cli(&r, "list", "-p", "plist", "--page-size", "3", "-o", "json", NULL), 0);
    json_t *got = json_loads(r.out, 0, NULL);
    assert_true(json_equal(json_object_get(got, "jobs"), json_object_get(api.json, "jobs")));
    json_decref(got);
    run_free(&r);
    ts_response_free(&api);
    /* -A: every project; --state filters */
    assert_int_equal(cli(&r, "list", "-A", "--state", "pending", NULL), 0);
    assert_non_null(strstr(r.out, "listed-0"));
    assert_non_null(strstr(r.out, "whole"));
    run_free(&r);
    assert_int_equal(cli(&r, "list", "-p", "plist", "--state", "cancelled", NULL), 0);
    assert_int_equal(count_lines(r.out), 1);
    run_free(&r);
    assert_int_equal(cli(&r, "list", "--state", "sleeping", NULL), 1);
    assert_non_null(strstr(r.err, "unknown job state"));
    run_free(&r);
}

static void list_shows_unfinished_jobs_unless_all(void **state)
{
    env_default();
    ts_it_req(srv.admin, "POST", "/api/v1/projects", "{\"name\":\"pdone\",\"department\":\"d1\"}",
              NULL, NULL);
    submit_id("still-pending", "pdone");
    long long done = submit_id("cancelled-one", "pdone");
    struct run r;
    char id[32];
    snprintf(id, sizeof(id), "%lld", done);
    assert_int_equal(cli(&r, "cancel", id, NULL), 0);
    run_free(&r);
    assert_int_equal(cli(&r, "list", "-p", "pdone", NULL), 0);
    assert_non_null(strstr(r.out, "still-pending"));
    assert_null(strstr(r.out, "cancelled-one"));
    assert_int_equal(count_lines(r.out), 2);
    run_free(&r);
    assert_int_equal(cli(&r, "list", "-p", "pdone", "--all", NULL), 0);
    assert_non_null(strstr(r.out, "still-pending"));
    assert_non_null(strstr(r.out, "cancelled-one"));
    assert_int_equal(count_lines(r.out), 3);
    run_free(&r);
    assert_int_equal(cli(&r, "list", "-p", "pdone", "--state", "cancelled", NULL), 0);
    assert_non_null(strstr(r.out, "cancelled-one"));
    assert_int_equal(count_lines(r.out), 2);
    run_free(&r);
    assert_int_equal(cli(&r, "list", "-p", "pdone", "--all", "--state", "pending", NULL), 1);
    run_free(&r);
}

static void list_wide_shows_more_columns(void **state)
{
    env_default();
    long long id = submit_id("wide-one", "p2");
    char code[64], want[80];
    settled_reason(id, code, sizeof(code));
    snprintf(want, sizeof(want), "%s: ", code);
    struct run r;
    assert_int_equal(cli(&r, "list", "-p", "p2", "-o", "wide", NULL), 0);
    assert_non_null(strstr(r.out, "PREEMPT"));
    assert_non_null(strstr(r.out, "COMMAND"));
    assert_non_null(strstr(r.out, want)); /* the reason with its sentence */
    run_free(&r);
    assert_int_equal(cli(&r, "list", "-o", "yaml", NULL), 1);
    run_free(&r);
}

/* Whether every line of s is at most cols characters. */
static bool lines_fit(const char *s, int cols)
{
    int chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n')
            chars = 0;
        else if ((*p & 0xc0) != 0x80 && ++chars > cols)
            return false;
    }
    return true;
}

static void tables_on_a_terminal_fit_its_width_or_COLUMNS(void **state)
{
    env_default();
    const char *longname = "a-very-long-job-name-that-is-much-wider-than-a-narrow-terminal";
    submit_id(longname, "p2");
    struct run r;
    /* the terminal's width */
    unsetenv("COLUMNS");
    assert_int_equal(cli_tty(&r, 60, "list", "-p", "p2", NULL), 0);
    assert_null(strstr(r.out, longname));
    assert_non_null(strstr(r.out, "\xe2\x80\xa6")); /* an ellipsis where it was cut */
    assert_true(lines_fit(r.out, 60));
    assert_true(count_lines(r.out) >= 2);
    run_free(&r);
    /* COLUMNS wins over the terminal's width */
    setenv("COLUMNS", "50", 1);
    assert_int_equal(cli_tty(&r, 200, "list", "-p", "p2", NULL), 0);
    assert_null(strstr(r.out, longname));
    assert_true(lines_fit(r.out, 50));
    run_free(&r);
    /* -o wide cuts nothing */
    assert_int_equal(cli_tty(&r, 60, "list", "-p", "p2", "-o", "wide", NULL), 0);
    assert_non_null(strstr(r.out, longname));
    run_free(&r);
    setenv("COLUMNS", "250", 1);
    assert_int_equal(cli_tty(&r, 60, "list", "-p", "p2", NULL), 0);
    assert_non_null(strstr(r.out, longname));
    run_free(&r);
}

static void piped_tables_are_never_cut_and_no_headers_drops_the_header(void **state)
{
    env_default();
    const char *longname = "another-very-long-job-name-that-a-script-greps-for-in-full";
    submit_id(longname, "p2");
    struct run r;
    /* stdout is a file: neither COLUMNS nor 80 columns cut it */
    setenv("COLUMNS", "40", 1);
    assert_int_equal(cli(&r, "list", "-p", "p2", NULL), 0);
    assert_non_null(strstr(r.out, longname));
    assert_null(strstr(r.out, "\xe2\x80\xa6"));
    assert_true(strncmp(r.out, "ID", 2) == 0);
    run_free(&r);
    unsetenv("COLUMNS");
    assert_int_equal(cli(&r, "queue", "-p", "p2", NULL), 0);
    assert_non_null(strstr(r.out, longname));
    assert_null(strstr(r.out, "\xe2\x80\xa6"));
    run_free(&r);
    /* --no-headers: the rows alone, on every table command */
    assert_int_equal(cli(&r, "list", "-p", "p2", "--no-headers", NULL), 0);
    assert_non_null(strstr(r.out, longname));
    assert_null(strstr(r.out, "NAME"));
    run_free(&r);
    const char *const tables[][3] = {
        {"queue", NULL},    {"events", "-p", "p2"}, {"top", "node"},        {"top", "gpu"},
        {"top", "project"}, {"project", "list"},    {"department", "list"}, {"token", "list"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(tables); i++) {
        const char *args[5] = {tables[i][0], tables[i][1], tables[i][2], NULL, NULL};
        args[tables[i][1] == NULL ? 1 : tables[i][2] == NULL ? 2 : 3] = "--no-headers";
        assert_int_equal(cli_in(&r, NULL, args), 0);
        const char *headers[] = {"NAME", "NODE", "PROJECT", "TIME", "POS"};
        for (size_t k = 0; k < TS_ARRAY_LEN(headers); k++)
            assert_null(strstr(r.out, headers[k]));
        run_free(&r);
    }
    setenv("COLUMNS", "250", 1);
}

/* -o columns=A,B: the wide table's columns named, in that order, any case;
 * a name the table lacks exits 1 naming the columns there are, and prints
 * no table (issue 18: "column choice"). */
static void columns_print_only_those_named_in_their_order(void **state)
{
    (void)state;
    env_default();
    long long id = submit_id("columned", "p2");
    struct run r;
    assert_int_equal(cli(&r, "list", "-p", "p2", "-o", "columns=state,ID,Name", NULL), 0);
    /* the header, and the job's row, word by word */
    char h1[16], h2[16], h3[16], h4[16], w1[64], w2[64], w3[64], w4[64], line[256];
    assert_int_equal(sscanf(r.out, "%15s %15s %15s", h1, h2, h3), 3);
    assert_string_equal(h1, "STATE");
    assert_string_equal(h2, "ID");
    assert_string_equal(h3, "NAME");
    snprintf(line, sizeof(line), "%.*s", (int)strcspn(r.out, "\n"), r.out);
    assert_int_equal(sscanf(line, "%15s %15s %15s %15s", h1, h2, h3, h4), 3);
    const char *row = strstr(r.out, " columned\n");
    assert_non_null(row);
    while (row > r.out && row[-1] != '\n')
        row--;
    snprintf(line, sizeof(line), "%.*s", (int)strcspn(row, "\n"), row);
    assert_int_equal(sscanf(line, "%63s %63s %63s %63s", w1, w2, w3, w4), 3);
    assert_string_equal(w1, "pending");
    assert_int_equal(atoll(w2), id);
    assert_string_equal(w3, "columned");
    assert_null(strstr(r.out, "PROJECT"));
    assert_null(strstr(r.out, "p2 "));
    run_free(&r);
    /* a column only the wide table has, with --no-headers */
    assert_int_equal(cli(&r, "list", "-p", "p2", "-o", "columns=ID,COMMAND", "--no-headers", NULL),
                     0);
    char want[64];
    snprintf(want, sizeof(want), "%lld  true\n", id);
    assert_non_null(strstr(r.out, want));
    assert_null(strstr(r.out, "ID"));
    run_free(&r);
    /* other tables too */
    assert_int_equal(cli(&r, "project", "list", "-o", "columns=NAME", NULL), 0);
    assert_true(strncmp(r.out, "NAME\n", 5) == 0);
    assert_non_null(strstr(r.out, "\np2\n"));
    run_free(&r);
    /* a column the table lacks */
    assert_int_equal(cli(&r, "list", "-p", "p2", "-o", "columns=ID,FOO", NULL), 1);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "no column \"FOO\""));
    assert_non_null(strstr(r.err, "ID,NAME,PROJECT"));
    run_free(&r);
    assert_int_equal(cli(&r, "list", "-p", "p2", "-o", "columns=", NULL), 1);
    assert_non_null(strstr(r.err, "-o must be"));
    run_free(&r);
}

static void describe_job_shows_the_job_and_its_events_by_id_or_name(void **state)
{
    env_default();
    long long id = submit_id("described", "p2");
    struct run r;
    assert_int_equal(cli(&r, "describe", "job", "described", "-p", "p2", NULL), 0);
    char want[64];
    snprintf(want, sizeof(want), "Job:              %lld (described)", id);
    assert_non_null(strstr(r.out, want));
    assert_non_null(strstr(r.out, "Project:          p2"));
    assert_non_null(strstr(r.out, "Command:          true"));
    assert_non_null(strstr(r.out, "Idle swap after:  never"));
    assert_null(strstr(r.out, "Swapped:"));
    assert_non_null(strstr(r.out, "submitted"));
    run_free(&r);
    /* an interactive job: the server's default; running with memory in host
     * swap, it says how much (the state is set here as its agent's report
     * would; then it is put back) */
    assert_int_equal(cli(&r, "submit", "described-nb", "-p", "p2", "--kind", "interactive",
                         "--parsable", "--", "true", NULL),
                     0);
    long long nb = atoll(r.out);
    run_free(&r);
    char q[256];
    snprintf(q, sizeof(q),
             "UPDATE job SET state = 'running', swapped_bytes = 3221225472 WHERE id = %lld", nb);
    char out[16];
    assert_int_equal(ts_it_sql(&srv, q, out, sizeof(out)), 0);
    assert_int_equal(cli(&r, "describe", "job", "described-nb", "-p", "p2", NULL), 0);
    assert_non_null(strstr(r.out, "Idle swap after:  5m"));
    assert_non_null(strstr(r.out, "Swapped:          3GiB of its GPU memory"));
    run_free(&r);
    snprintf(q, sizeof(q), "UPDATE job SET state = 'pending' WHERE id = %lld", nb);
    assert_int_equal(ts_it_sql(&srv, q, out, sizeof(out)), 0);
    /* by name without a project: the one job of that name anywhere */
    char jpath[64];
    snprintf(jpath, sizeof(jpath), "/api/v1/jobs/%lld", id);
    cli_json_is_api(jpath, "describe", "job", "described", "-o", "json", NULL);
}

static void a_name_in_several_projects_needs_a_project(void **state)
{
    env_default();
    long long a = submit_id("twin", "p1");
    long long b = submit_id("twin", "p2");
    struct run r;
    assert_int_equal(cli(&r, "describe", "job", "twin", NULL), 1);
    assert_non_null(strstr(r.err, "p1"));
    assert_non_null(strstr(r.err, "p2"));
    run_free(&r);
    assert_int_equal(cli(&r, "why", "twin", "-p", "p2", NULL), 0);
    char want[64];
    snprintf(want, sizeof(want), "job %lld (twin) in project p2", b);
    assert_non_null(strstr(r.out, want));
    run_free(&r);
    (void)a;
}

static void an_unknown_project_exits_3_saying_it_does_not_exist(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "submit", "lost", "-p", "nosuch", "--", "true", NULL), 3);
    assert_non_null(strstr(r.err, "project \"nosuch\" does not exist"));
    run_free(&r);
    const char *cmds[] = {"list", "queue"};
    for (size_t i = 0; i < TS_ARRAY_LEN(cmds); i++) {
        assert_int_equal(cli(&r, cmds[i], "-p", "nosuch", NULL), 3);
        assert_string_equal(r.out, "");
        assert_non_null(strstr(r.err, "project \"nosuch\" does not exist"));
        run_free(&r);
    }
    /* a project without jobs is an empty table */
    ts_it_req(srv.admin, "POST", "/api/v1/projects", "{\"name\":\"empty\",\"department\":\"d1\"}",
              NULL, NULL);
    assert_int_equal(cli(&r, "list", "-p", "empty", NULL), 0);
    assert_int_equal(count_lines(r.out), 1);
    run_free(&r);
}

static void a_server_url_may_end_in_a_slash_or_api_v1(void **state)
{
    env_default();
    const char *tails[] = {"/", "/api/v1", "/api/v1/"};
    for (size_t i = 0; i < TS_ARRAY_LEN(tails); i++) {
        char url[300];
        snprintf(url, sizeof(url), "%s%s", srv.url, tails[i]);
        struct run r;
        assert_int_equal(cli(&r, "--server", url, "list", "-A", NULL), 0);
        assert_true(strncmp(r.out, "ID", 2) == 0);
        run_free(&r);
    }
}

static void a_missing_token_says_how_the_cli_takes_one(void **state)
{
    env_default();
    unsetenv("TESSERA_TOKEN");
    struct run r;
    assert_int_equal(cli(&r, "list", "-A", NULL), 5);
    assert_non_null(strstr(r.err, "--token"));
    assert_non_null(strstr(r.err, "TESSERA_TOKEN"));
    assert_non_null(strstr(r.err, "tessera login"));
    assert_null(strstr(r.err, "Authorization"));
    run_free(&r);
}

static void a_typo_gets_the_closest_command_or_option(void **state)
{
    env_default();
    struct run r;
    const char *typos[][2] = {
        {"lsit", "unknown command \"lsit\"; did you mean \"tessera list\"?"},
        {"qeueu", "did you mean \"tessera queue\"?"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(typos); i++) {
        assert_int_equal(cli(&r, typos[i][0], NULL), 1);
        assert_non_null(strstr(r.err, typos[i][1]));
        run_free(&r);
    }
    assert_int_equal(cli(&r, "project", "craete", "x", NULL), 1);
    assert_non_null(strstr(r.err, "did you mean \"tessera project create\"?"));
    run_free(&r);
    assert_int_equal(cli(&r, "submit", "typo", "-p", "p1", "--gpu", "1", "--", "true", NULL), 1);
    assert_non_null(strstr(r.err, "unknown option --gpu; did you mean --gpus?"));
    run_free(&r);
    assert_int_equal(cli(&r, "list", "--stat", "pending", NULL), 1);
    assert_non_null(strstr(r.err, "did you mean --state?"));
    run_free(&r);
    /* nothing close: no guess */
    assert_int_equal(cli(&r, "frobnicate", NULL), 1);
    assert_null(strstr(r.err, "did you mean"));
    run_free(&r);
    assert_int_equal(cli(&r, "list", "--colour", NULL), 1);
    assert_null(strstr(r.err, "did you mean"));
    run_free(&r);
}

static void unknown_jobs_exit_3(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "describe", "job", "999999", NULL), 3);
    assert_non_null(strstr(r.err, "error: "));
    assert_non_null(strstr(r.err, "999999"));
    run_free(&r);
    assert_int_equal(cli(&r, "cancel", "no-such-job", "-p", "p1", NULL), 3);
    assert_non_null(strstr(r.err, "no job named \"no-such-job\""));
    run_free(&r);
    assert_int_equal(cli(&r, "describe", "project", "no-such-project", NULL), 3);
    run_free(&r);
}

static void cancel_cancels_every_job_named_and_events_tell(void **state)
{
    env_default();
    long long a = submit_id("to-cancel-a", "p1");
    long long b = submit_id("to-cancel-b", "p1");
    char ida[32];
    snprintf(ida, sizeof(ida), "%lld", a);
    struct run r;
    assert_int_equal(cli(&r, "cancel", ida, "to-cancel-b", "-p", "p1", NULL), 0);
    assert_int_equal(count_lines(r.out), 2);
    run_free(&r);
    for (long long id = a; id <= b; id++) {
        json_t *j = api_job(id);
        assert_string_equal(ts_it_str(j, "state"), "cancelled");
        json_decref(j);
    }
    assert_int_equal(cli(&r, "events", ida, NULL), 0);
    assert_non_null(strstr(r.out, "submitted"));
    assert_non_null(strstr(r.out, "cancelled"));
    run_free(&r);
    /* -o json is the API's */
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/events", a);
    json_t *api = api_get(path);
    assert_int_equal(cli(&r, "events", ida, "-o", "json", NULL), 0);
    json_t *got = json_loads(r.out, 0, NULL);
    assert_true(json_equal(got, api));
    json_decref(got);
    json_decref(api);
    run_free(&r);
    /* events without a job: the project's, with job ids */
    assert_int_equal(cli(&r, "events", "-p", "p1", NULL), 0);
    assert_non_null(strstr(r.out, "JOB"));
    assert_non_null(strstr(r.out, ida));
    run_free(&r);
}

static void why_gives_the_reason_and_what_would_make_it_run(void **state)
{
    env_default();
    long long id = submit_id("why-me", "p1");
    char code[64], want[80];
    settled_reason(id, code, sizeof(code));
    snprintf(want, sizeof(want), "reason:   %s\n", code);
    struct run r;
    assert_int_equal(cli(&r, "why", "why-me", "-p", "p1", NULL), 0);
    assert_non_null(strstr(r.out, "is pending"));
    assert_non_null(strstr(r.out, want));
    assert_non_null(strstr(r.out, "to run:"));
    run_free(&r);
    /* a non-preemptible job in a project without quota waits for quota */
    assert_int_equal(ts_it_req(srv.admin, "POST", "/api/v1/projects",
                               "{\"name\":\"whyp\",\"department\":\"d1\"}", NULL, NULL),
                     201);
    assert_int_equal(cli(&r, "submit", "stuck", "-p", "whyp", "-g", "1", "--non-preemptible",
                         "--parsable", "--", "true", NULL),
                     0);
    id = atoll(r.out);
    run_free(&r);
    settled_reason(id, code, sizeof(code));
    assert_string_equal(code, "quota_exhausted");
    json_t *j = api_job(id);
    const json_t *reason = json_object_get(j, "pending_reason");
    char message[512], position[64];
    snprintf(message, sizeof(message), "message:  %s\n", ts_it_str(reason, "message"));
    long long pos = ts_it_int(reason, "queue_position");
    snprintf(position, sizeof(position), "position: %lld in the queue\n", pos);
    json_decref(j);
    assert_int_equal(cli(&r, "why", "stuck", NULL), 0);
    assert_non_null(strstr(r.out, "reason:   quota_exhausted\n"));
    assert_non_null(strstr(r.out, message));
    if (pos > 0)
        assert_non_null(strstr(r.out, position));
    assert_non_null(strstr(r.out, "raise the quota"));
    run_free(&r);
    /* the queue shows it at its position */
    assert_int_equal(cli(&r, "queue", "-p", "whyp", NULL), 0);
    assert_non_null(strstr(r.out, "POS"));
    assert_non_null(strstr(r.out, "quota_exhausted: "));
    char *line = strstr(r.out, "stuck");
    assert_non_null(line);
    while (line > r.out && line[-1] != '\n')
        line--;
    if (pos > 0)
        assert_int_equal(atoll(line), pos);
    run_free(&r);
}

static void queue_json_is_the_api_json(void **state)
{
    env_default();
    struct ts_response api;
    get_settled("/api/v1/queue?project=p1", &api);
    struct run r;
    assert_int_equal(cli(&r, "queue", "-p", "p1", "-o", "json", NULL), 0);
    json_t *got = json_loads(r.out, 0, NULL);
    assert_true(json_equal(json_object_get(got, "jobs"), json_object_get(api.json, "jobs")));
    assert_true(json_array_size(json_object_get(got, "jobs")) > 0);
    json_decref(got);
    ts_response_free(&api);
    run_free(&r);
}

/* ---- errors ---------------------------------------------------------------------- */

static void a_bad_token_exits_5_with_the_server_message(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "--token", "wrong", "list", NULL), 5);
    assert_non_null(strstr(r.err, "error: "));
    assert_non_null(strstr(r.err, "token"));
    run_free(&r);
    /* a member may not do what admins do */
    char tok[128];
    snprintf(tok, sizeof(tok), "%s", ts_it_token(&srv, "not-admin", "member", "[\"p1\"]"));
    assert_int_equal(cli(&r, "--token", tok, "token", "list", NULL), 5);
    run_free(&r);
    assert_int_equal(cli(&r, "--token", tok, "submit", "not-mine", "-p", "p2", "--", "true", NULL),
                     5);
    assert_non_null(strstr(r.err, "no access to project \"p2\""));
    run_free(&r);
}

static void a_server_that_does_not_answer_exits_2(void **state)
{
    env_default();
    setenv("TESSERA_SERVER", "http://127.0.0.1:1", 1);
    struct run r;
    assert_int_equal(cli(&r, "list", NULL), 2);
    assert_non_null(strstr(r.err, "could not reach the server"));
    run_free(&r);
    assert_int_equal(cli(&r, "submit", "down", "-p", "p1", "--", "true", NULL), 2);
    run_free(&r);
}

static void usage_errors_exit_1_and_help_exits_0(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "frobnicate", NULL), 1);
    assert_non_null(strstr(r.err, "unknown command"));
    run_free(&r);
    assert_int_equal(cli(&r, "project", NULL), 1);
    assert_non_null(strstr(r.err, "project create"));
    run_free(&r);
    assert_int_equal(cli(&r, "project", "rename", NULL), 1);
    run_free(&r);
    assert_int_equal(cli(&r, "describe", "job", NULL), 1);
    assert_non_null(strstr(r.err, "too few arguments"));
    run_free(&r);
    assert_int_equal(cli(&r, "why", "a", "b", NULL), 1);
    run_free(&r);
    assert_int_equal(cli(&r, "list", "-p", NULL), 1);
    assert_non_null(strstr(r.err, "needs a value"));
    run_free(&r);
    assert_int_equal(cli(&r, NULL), 1);
    run_free(&r);
    assert_int_equal(cli(&r, "--help", NULL), 0);
    assert_non_null(strstr(r.out, "submit"));
    run_free(&r);
    static const char *const commands[] = {
        "login",
        "config view",
        "config set",
        "whoami",
        "submit",
        "list",
        "describe job",
        "describe node",
        "describe project",
        "why",
        "logs",
        "cancel",
        "suspend",
        "resume",
        "events",
        "queue",
        "top node",
        "top gpu",
        "top project",
        "project create",
        "project set-quota",
        "project delete",
        "project list",
        "department create",
        "department set-quota",
        "department delete",
        "department list",
        "node drain",
        "node undrain",
        "token create",
        "token list",
        "token revoke",
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(commands); i++) {
        char words[64], usage[80];
        snprintf(words, sizeof(words), "%s", commands[i]);
        char *second = strchr(words, ' ');
        if (second)
            *second++ = '\0';
        if (second)
            cli(&r, words, second, "--help", NULL);
        else
            cli(&r, words, "--help", NULL);
        assert_int_equal(r.status, 0);
        snprintf(usage, sizeof(usage), "usage: tessera %s", commands[i]);
        if (strncmp(r.out, usage, strlen(usage)) != 0)
            fail_msg("%s --help printed: %s", commands[i], r.out);
        assert_non_null(strstr(r.out, "--server URL"));
        run_free(&r);
    }
    /* --help wins over a bad command line */
    assert_int_equal(cli(&r, "submit", "--bogus", "--help", NULL), 0);
    run_free(&r);
}

/* ---- admin: departments, projects, quotas, tokens, nodes ------------------------- */

static void departments_and_projects_are_created_listed_and_deleted(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(
        cli(&r, "department", "create", "research", "--gpus", "8", "--weight", "2", NULL), 0);
    run_free(&r);
    assert_int_equal(cli(&r, "project", "create", "vision", "-d", "research", "--gpus", "2.5",
                         "--limit", "4", "--priority", "10", NULL),
                     0);
    run_free(&r);
    json_t *p = api_get("/api/v1/projects/vision");
    assert_non_null(p);
    assert_string_equal(ts_it_str(p, "department"), "research");
    json_t *q = json_object_get(p, "quota");
    assert_true(json_number_value(json_object_get(q, "gpus")) == 2.5);
    assert_true(json_number_value(json_object_get(q, "limit")) == 4);
    assert_int_equal(ts_it_int(q, "priority"), 10);
    json_decref(p);
    json_t *d = api_get("/api/v1/departments/research");
    assert_true(json_number_value(json_object_get(json_object_get(d, "quota"), "gpus")) == 8);
    assert_true(
        json_number_value(json_object_get(json_object_get(d, "quota"), "over_quota_weight")) == 2);
    json_decref(d);
    assert_int_equal(cli(&r, "department", "list", NULL), 0);
    assert_non_null(strstr(r.out, "research"));
    run_free(&r);
    cli_json_is_api("/api/v1/projects", "project", "list", "-o", "json", NULL);
    /* a project needs its department; a taken name is a conflict */
    assert_int_equal(cli(&r, "project", "create", "orphan", NULL), 1);
    run_free(&r);
    assert_int_equal(cli(&r, "project", "create", "vision", "-d", "research", NULL), 4);
    run_free(&r);
    /* a department with projects cannot go */
    assert_int_equal(cli(&r, "department", "delete", "research", NULL), 4);
    run_free(&r);
    assert_int_equal(cli(&r, "project", "delete", "vision", NULL), 0);
    run_free(&r);
    assert_int_equal(cli(&r, "department", "delete", "research", NULL), 0);
    run_free(&r);
    assert_null(api_get("/api/v1/departments/research"));
    assert_int_equal(cli(&r, "project", "delete", "vision", NULL), 3);
    run_free(&r);
}

static void set_quota_changes_only_what_is_given(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "project", "create", "quota-p", "-d", "d1", "--gpus", "1", "--limit",
                         "6", "--weight", "3", NULL),
                     0);
    run_free(&r);
    assert_int_equal(cli(&r, "project", "set-quota", "quota-p", "--gpus", "2.5", NULL), 0);
    assert_non_null(strstr(r.out, "2.5 GPUs, limit 6, weight 3"));
    run_free(&r);
    json_t *p = api_get("/api/v1/projects/quota-p");
    json_t *q = json_object_get(p, "quota");
    assert_true(json_number_value(json_object_get(q, "gpus")) == 2.5);
    assert_true(json_number_value(json_object_get(q, "limit")) == 6);
    assert_true(json_number_value(json_object_get(q, "over_quota_weight")) == 3);
    json_decref(p);
    assert_int_equal(cli(&r, "project", "set-quota", "quota-p", "--no-limit", NULL), 0);
    run_free(&r);
    p = api_get("/api/v1/projects/quota-p");
    assert_true(json_is_null(json_object_get(json_object_get(p, "quota"), "limit")));
    json_decref(p);
    assert_int_equal(cli(&r, "project", "set-quota", "quota-p", NULL), 1);
    assert_non_null(strstr(r.err, "nothing to change"));
    run_free(&r);
    /* the server's own checks: a limit below the quota */
    assert_int_equal(cli(&r, "project", "set-quota", "quota-p", "--limit", "1", NULL), 1);
    assert_non_null(strstr(r.err, "limit"));
    run_free(&r);
    assert_int_equal(cli(&r, "department", "set-quota", "d1", "--gpus", "16", NULL), 0);
    run_free(&r);
    json_t *d = api_get("/api/v1/departments/d1");
    assert_true(json_number_value(json_object_get(json_object_get(d, "quota"), "gpus")) == 16);
    json_decref(d);
    assert_int_equal(cli(&r, "project", "set-quota", "nope", "--gpus", "1", NULL), 3);
    run_free(&r);
}

static void max_pending_is_set_and_shown_and_audit_lists_the_writes(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "project", "create", "mp-p", "-d", "d1", "--max-pending", "3", NULL),
                     0);
    assert_non_null(strstr(r.out, "max pending 3"));
    run_free(&r);
    assert_int_equal(cli(&r, "project", "set-quota", "mp-p", "--max-pending", "5", NULL), 0);
    assert_non_null(strstr(r.out, "max pending 5"));
    run_free(&r);
    assert_int_equal(cli(&r, "describe", "project", "mp-p", NULL), 0);
    assert_non_null(strstr(r.out, "Max pending"));
    assert_non_null(strstr(r.out, "5"));
    run_free(&r);
    assert_int_equal(cli(&r, "project", "set-quota", "mp-p", "--max-pending", "-1", NULL), 1);
    run_free(&r);
    assert_int_equal(cli(&r, "audit", "--limit", "1", NULL), 0);
    assert_non_null(strstr(r.out, "ACTOR"));
    assert_non_null(strstr(r.out, "/api/v1/projects/mp-p/quota"));
    assert_non_null(strstr(r.out, "\"max_pending\":5"));
    run_free(&r);
    assert_int_equal(cli(&r, "audit", "--limit", "2", "--no-headers", NULL), 0);
    assert_null(strstr(r.out, "ACTOR"));
    assert_non_null(strstr(r.out, "POST"));
    run_free(&r);
}

static void set_quota_after_someone_else_changed_it_exits_4_and_writes_nothing(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "project", "create", "raced-p", "-d", "d1", "--gpus", "1", NULL), 0);
    run_free(&r);
    /* the ETag a user saw */
    assert_int_equal(cli(&r, "describe", "project", "raced-p", NULL), 0);
    char *tag = strstr(r.out, "ETag:");
    assert_non_null(tag);
    char etag[64];
    assert_int_equal(sscanf(tag + 5, " %63s", etag), 1);
    run_free(&r);
    /* someone else changes the quota */
    struct ts_response api;
    char hdr[100];
    snprintf(hdr, sizeof(hdr), "If-Match: %s", etag);
    const char *headers[] = {hdr, NULL};
    assert_int_equal(ts_it_req(srv.admin, "PUT", "/api/v1/projects/raced-p/quota", "{\"gpus\":5}",
                               headers, &api),
                     200);
    ts_response_free(&api);
    /* writing with the old ETag is refused, clearly, and writes nothing */
    char before[33], after[33];
    /* what the scheduler does with earlier jobs is done before the digest:
     * its cycles run --cycle-interval apart */
    ts_ap_settle_of(&srv, 0.5);
    ts_it_db_digest(&srv, before);
    assert_int_equal(
        cli(&r, "project", "set-quota", "raced-p", "--gpus", "2", "--if-match", etag, NULL), 4);
    assert_non_null(strstr(r.err, "changed by someone else"));
    run_free(&r);
    ts_it_db_digest(&srv, after);
    assert_string_equal(before, after);
    json_t *p = api_get("/api/v1/projects/raced-p");
    assert_true(json_number_value(json_object_get(json_object_get(p, "quota"), "gpus")) == 5);
    json_decref(p);
}

static void tokens_are_created_listed_and_revoked(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "token", "create", "ci-bot", "-r", "member", "-p", "p1", NULL), 0);
    char secret[128];
    snprintf(secret, sizeof(secret), "%s", r.out);
    secret[strcspn(secret, "\n")] = '\0';
    assert_true(strncmp(secret, "tsk_", 4) == 0);
    assert_non_null(strstr(r.err, "shown only now"));
    run_free(&r);
    /* the secret works */
    assert_int_equal(cli(&r, "--token", secret, "submit", "by-bot", "-p", "p1", "--", "true", NULL),
                     0);
    run_free(&r);
    assert_int_equal(cli(&r, "token", "list", NULL), 0);
    assert_non_null(strstr(r.out, "ci-bot"));
    assert_non_null(strstr(r.out, "member"));
    assert_null(strstr(r.out, secret));
    run_free(&r);
    assert_int_equal(cli(&r, "token", "create", "bad-role", "-r", "root", NULL), 1);
    run_free(&r);
    /* revoke by name: the secret stops working */
    assert_int_equal(cli(&r, "token", "revoke", "ci-bot", NULL), 0);
    run_free(&r);
    ts_sleep_ms(10);
    assert_int_equal(cli(&r, "--token", secret, "list", NULL), 5);
    run_free(&r);
    assert_int_equal(cli(&r, "token", "revoke", "ci-bot", NULL), 3);
    run_free(&r);
    assert_int_equal(cli(&r, "token", "revoke", "999999", NULL), 3);
    run_free(&r);
}

static void an_agent_token_is_bound_to_the_nodes_given_with_node(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "token", "create", "agent-gpu", "-r", "agent", "--node", "cli-n1",
                         "-n", "gpu-*", NULL),
                     0);
    char secret[128];
    snprintf(secret, sizeof(secret), "%s", r.out);
    secret[strcspn(secret, "\n")] = '\0';
    run_free(&r);
    assert_int_equal(cli(&r, "token", "list", NULL), 0);
    assert_non_null(strstr(r.out, "NODES"));
    assert_non_null(strstr(r.out, "cli-n1,gpu-*"));
    run_free(&r);
    /* the server holds it to them */
    struct ts_client *c = ts_it_client(&srv, secret);
    static const char body[] = "{\"cpu\": 1, \"memory_bytes\": 1073741824, \"gpus\": []}";
    assert_int_equal(ts_it_req(c, "PUT", "/api/v1/nodes/cli-n2", body, NULL, NULL), 403);
    assert_int_equal(ts_it_req(c, "GET", "/api/v1/nodes/gpu-1/desired", NULL, NULL, NULL), 404);
    ts_client_free(c);
    /* only agents have nodes */
    assert_int_equal(cli(&r, "token", "create", "m-node", "-r", "member", "--node", "n1", NULL), 1);
    assert_non_null(strstr(r.err, "--node is only for agent tokens"));
    run_free(&r);
    assert_int_equal(cli(&r, "token", "revoke", "agent-gpu", NULL), 0);
    run_free(&r);
}

/* Cancel every pending job, so that a node registered next gets none. */
static void cancel_pending(void)
{
    json_t *jobs = api_get("/api/v1/jobs?state=pending&limit=1000");
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(jobs, "jobs"), i, j) {
        char path[64];
        snprintf(path, sizeof(path), "/api/v1/jobs/%lld", ts_it_int(j, "id"));
        ts_it_req(srv.admin, "DELETE", path, NULL, NULL, NULL);
    }
    json_decref(jobs);
}

static void nodes_are_drained_and_shown_with_their_gpus(void **state)
{
    env_default();
    cancel_pending(); /* what the scheduler places is not this test's business */
    struct ts_response api;
    long st = ts_it_req(srv.admin, "PUT", "/api/v1/nodes/gpu-node-1",
                        "{\"cpu\":64,\"memory_bytes\":549755813888,\"collision\":\"swap\","
                        "\"swap_bytes\":68719476736,\"gpus\":["
                        "{\"index\":0,\"uuid\":\"GPU-aaaa\",\"model\":\"H100\","
                        "\"memory_bytes\":85899345920},"
                        "{\"index\":1,\"uuid\":\"GPU-bbbb\",\"model\":\"H100\","
                        "\"memory_bytes\":85899345920}]}",
                        NULL, &api);
    ts_response_free(&api);
    if (st != 200)
        skip(); /* a server without node registration */
    have_node = true;
    struct run r;
    assert_int_equal(cli(&r, "top", "node", NULL), 0);
    assert_non_null(strstr(r.out, "gpu-node-1"));
    assert_non_null(strstr(r.out, "ALLOCATED"));
    run_free(&r);
    assert_int_equal(cli(&r, "top", "gpu", NULL), 0);
    assert_non_null(strstr(r.out, "H100"));
    assert_int_equal(count_lines(r.out), 3);
    run_free(&r);
    assert_int_equal(cli(&r, "describe", "node", "gpu-node-1", NULL), 0);
    assert_non_null(strstr(r.out, "GPUs:             2"));
    assert_non_null(strstr(r.out, "Collision:        swap"));
    assert_non_null(strstr(r.out, "64GiB")); /* the swap reserve */
    assert_non_null(strstr(r.out, "80GiB"));
    run_free(&r);
    assert_int_equal(cli(&r, "top", "node", "-o", "json", NULL), 0);
    json_t *got = json_loads(r.out, 0, NULL), *want = api_get("/api/v1/nodes");
    assert_true(json_equal(got, want));
    json_decref(got);
    json_decref(want);
    run_free(&r);
    assert_int_equal(cli(&r, "node", "drain", "gpu-node-1", NULL), 0);
    assert_non_null(strstr(r.out, "drained"));
    run_free(&r);
    json_t *n = api_get("/api/v1/nodes/gpu-node-1");
    assert_string_equal(ts_it_str(n, "state"), "drained");
    json_decref(n);
    assert_int_equal(cli(&r, "node", "undrain", "gpu-node-1", NULL), 0);
    run_free(&r);
    n = api_get("/api/v1/nodes/gpu-node-1");
    assert_string_not_equal(ts_it_str(n, "state"), "drained");
    json_decref(n);
    assert_int_equal(cli(&r, "node", "drain", "no-such-node", NULL), 3);
    run_free(&r);
    assert_int_equal(cli(&r, "describe", "node", "no-such-node", NULL), 3);
    run_free(&r);
}

/* ---- a job on a node: logs, --wait, describe (the test plays the agent) ---------- */

/* Wait up to 10 s for job id to be in state; the job (new) or NULL. */
static json_t *wait_state(long long id, const char *state)
{
    for (int i = 0; i < 500; i++) {
        json_t *j = api_job(id);
        if (j && strcmp(ts_it_str(j, "state"), state) == 0)
            return j;
        json_decref(j);
        ts_sleep_ms(20);
    }
    return NULL;
}

/* What the agent of gpu-node-1 says about a job. */
static void report(long long id, long long attempt, const char *what)
{
    char body[256];
    snprintf(body, sizeof(body), "{\"jobs\":[{\"id\":%lld,\"attempt\":%lld,%s}]}", id, attempt,
             what);
    assert_int_equal(
        ts_it_req(srv.admin, "POST", "/api/v1/nodes/gpu-node-1/report", body, NULL, NULL), 200);
}

/* The agent ships output of a job at offset. */
static void ship(long long id, long long attempt, long long offset, const char *text)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char enc[256], body[512];
    size_t n = strlen(text), k = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)(unsigned char)text[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)(unsigned char)text[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)text[i + 2];
        enc[k++] = t[v >> 18 & 63];
        enc[k++] = t[v >> 12 & 63];
        enc[k++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        enc[k++] = i + 2 < n ? t[v & 63] : '=';
    }
    enc[k] = '\0';
    snprintf(body, sizeof(body),
             "{\"chunks\":[{\"id\":%lld,\"attempt\":%lld,\"offset\":%lld,\"data\":\"%s\"}]}", id,
             attempt, offset, enc);
    assert_int_equal(
        ts_it_req(srv.admin, "POST", "/api/v1/nodes/gpu-node-1/logs", body, NULL, NULL), 200);
}

static void logs_print_and_follow_the_output_of_a_running_job(void **state)
{
    env_default();
    if (!have_node)
        skip();
    long long id = 0;
    struct run r;
    assert_int_equal(
        cli(&r, "submit", "logged", "-p", "p1", "-g", "1", "--parsable", "--", "app", NULL), 0);
    id = atoll(r.out);
    run_free(&r);
    json_t *j = wait_state(id, "scheduled");
    assert_non_null(j);
    long long attempt = ts_it_int(j, "attempt") > 0 ? ts_it_int(j, "attempt") : 1;
    json_decref(j);
    report(id, attempt, "\"state\":\"running\",\"pid\":4242,\"gpu_utilization\":0.5");
    assert_int_equal(cli(&r, "describe", "job", "logged", "-p", "p1", NULL), 0);
    assert_non_null(strstr(r.out, "Allocation:       1 GPUs on GPU "));
    assert_non_null(strstr(r.out, "Utilization:      50% busy"));
    run_free(&r);
    ship(id, attempt, 0, "hello\nworld\n");
    assert_int_equal(cli(&r, "logs", "logged", "-p", "p1", NULL), 0);
    assert_string_equal(r.out, "hello\nworld\n");
    run_free(&r);
    assert_int_equal(cli(&r, "logs", "logged", "-p", "p1", "--tail", "1", NULL), 0);
    assert_string_equal(r.out, "world\n");
    run_free(&r);
    /* -f: what comes while it runs, until it ends */
    const char *args[] = {"logs", "logged", "-p", "p1", "-f", NULL};
    pid_t pid = cli_start(NULL, args);
    ts_sleep_ms(500);
    ship(id, attempt, 12, "more\n");
    ts_sleep_ms(500);
    report(id, attempt, "\"state\":\"exited\",\"exit_code\":0");
    cli_finish(pid, &r);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "hello\nworld\nmore\n");
    run_free(&r);
    j = wait_state(id, "succeeded");
    assert_non_null(j);
    json_decref(j);
    assert_int_equal(cli(&r, "describe", "job", "logged", "-p", "p1", NULL), 0);
    assert_non_null(strstr(r.out, "State:            succeeded"));
    assert_non_null(strstr(r.out, "Node:             gpu-node-1"));
    assert_non_null(strstr(r.out, "Exit code:        0"));
    assert_non_null(strstr(r.out, "Attempt:          1"));
    assert_non_null(strstr(r.out, "running"));
    run_free(&r);
    assert_int_equal(cli(&r, "why", "logged", "-p", "p1", NULL), 0);
    assert_non_null(strstr(r.out, "is succeeded"));
    assert_non_null(strstr(r.out, "exit code: 0"));
    run_free(&r);
    /* the logs of a job that does not exist */
    assert_int_equal(cli(&r, "logs", "987654", NULL), 3);
    run_free(&r);
}

static void submit_wait_exits_0_when_the_job_succeeds(void **state)
{
    env_default();
    if (!have_node)
        skip();
    const char *args[] = {"submit", "waited-ok", "-p", "p1",  "-g",
                          "1",      "--wait",    "--", "app", NULL};
    pid_t pid = cli_start(NULL, args);
    char id[32] = "";
    for (int i = 0; i < 500; i++) {
        ts_it_sql(&srv, "SELECT id FROM job WHERE name = 'waited-ok'", id, sizeof(id));
        if (id[0] != '\0')
            break;
        ts_sleep_ms(20);
    }
    assert_true(id[0] != '\0');
    json_t *j = wait_state(atoll(id), "scheduled");
    assert_non_null(j);
    long long attempt = ts_it_int(j, "attempt") > 0 ? ts_it_int(j, "attempt") : 1;
    json_decref(j);
    report(atoll(id), attempt, "\"state\":\"running\"");
    ts_sleep_ms(300);
    report(atoll(id), attempt, "\"state\":\"exited\",\"exit_code\":0");
    struct run r;
    cli_finish(pid, &r);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.err, "running on gpu-node-1"));
    assert_non_null(strstr(r.err, "succeeded"));
    run_free(&r);
}

static void top_project_shows_quota_next_to_allocation(void **state)
{
    env_default();
    struct run r;
    assert_int_equal(cli(&r, "top", "project", NULL), 0);
    assert_non_null(strstr(r.out, "QUOTA"));
    assert_non_null(strstr(r.out, "ALLOC"));
    assert_non_null(strstr(r.out, "UTIL"));
    run_free(&r);
    /* a project's row: its quota and limit next to its jobs */
    assert_int_equal(
        cli(&r, "project", "create", "top-p", "-d", "d1", "--gpus", "1.5", "--limit", "3", NULL),
        0);
    run_free(&r);
    /* a job no node can take, so that it stays pending */
    assert_int_equal(cli(&r, "submit", "top-job", "-p", "top-p", "--selector", "zone=nowhere", "--",
                         "true", NULL),
                     0);
    run_free(&r);
    assert_int_equal(cli(&r, "top", "project", NULL), 0);
    char *line = strstr(r.out, "\ntop-p ");
    assert_non_null(line);
    char f[9][32];
    assert_int_equal(sscanf(line + 1, "%31s %31s %31s %31s %31s %31s %31s %31s %31s", f[0], f[1],
                            f[2], f[3], f[4], f[5], f[6], f[7], f[8]),
                     9);
    assert_string_equal(f[1], "1.5"); /* quota */
    assert_string_equal(f[2], "3");   /* limit */
    assert_string_equal(f[3], "0");   /* allocated: it asks for no GPU */
    assert_string_equal(f[7], "0");   /* running */
    assert_string_equal(f[8], "1");   /* pending */
    run_free(&r);
}

static void numbers_read_as_people_write_them(void **state)
{
    env_default();
    struct run r;
    /* GPUs with at most 2 decimals, in describe and in tables */
    assert_int_equal(cli(&r, "project", "create", "frac", "-d", "d1", "--gpus", "1.95513", NULL),
                     0);
    run_free(&r);
    assert_int_equal(cli(&r, "describe", "project", "frac", NULL), 0);
    assert_non_null(strstr(r.out, "1.96 GPUs"));
    assert_null(strstr(r.out, "1.955"));
    run_free(&r);
    assert_int_equal(cli(&r, "top", "project", NULL), 0);
    assert_non_null(strstr(r.out, "\nfrac "));
    assert_non_null(strstr(r.out, " 1.96 "));
    assert_null(strstr(r.out, "1.955"));
    run_free(&r);
    /* bytes in the largest unit: 24684084KiB is 23.54GiB */
    struct ts_response api;
    long st = ts_it_req(srv.admin, "PUT", "/api/v1/nodes/odd-node",
                        "{\"cpu\":8,\"memory_bytes\":25276502016,\"gpus\":[]}", NULL, &api);
    ts_response_free(&api);
    assert_int_equal(st, 200);
    assert_int_equal(cli(&r, "describe", "node", "odd-node", NULL), 0);
    assert_non_null(strstr(r.out, "23.54GiB"));
    assert_null(strstr(r.out, "KiB"));
    run_free(&r);
    assert_int_equal(cli(&r, "top", "node", NULL), 0);
    assert_non_null(strstr(r.out, "23.54GiB"));
    run_free(&r);
}

/* ---- set-up ------------------------------------------------------------------------- */

static int setup(void **state)
{
    ts_client_global_init();
    const char *bin = getenv("TS_BIN_DIR") ? getenv("TS_BIN_DIR") : "build/bin";
    snprintf(exe, sizeof(exe), "%s/tessera", bin);
    if (exe[0] != '/') {
        char cwd[256];
        if (getcwd(cwd, sizeof(cwd)) == NULL)
            return -1;
        snprintf(exe, sizeof(exe), "%s/%s/tessera", cwd, bin);
    }
    snprintf(tmp, sizeof(tmp), "/tmp/tessera-cli-XXXXXX");
    if (mkdtemp(tmp) == NULL)
        return -1;
    snprintf(cfgdir, sizeof(cfgdir), "%s/config", tmp);
    /* the test plays the agent of its node only now and then */
    static const char *const args[] = {"--node-timeout", "1h", "--node-lost-timeout", "1h", NULL};
    if (ts_it_start(&srv, NULL, args) != 0)
        return -1;
    if (ts_it_req(srv.admin, "POST", "/api/v1/departments", "{\"name\":\"d1\"}", NULL, NULL) !=
            201 ||
        ts_it_req(srv.admin, "POST", "/api/v1/projects", "{\"name\":\"p1\",\"department\":\"d1\"}",
                  NULL, NULL) != 201 ||
        ts_it_req(srv.admin, "POST", "/api/v1/projects", "{\"name\":\"p2\",\"department\":\"d1\"}",
                  NULL, NULL) != 201)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    int rc = ts_it_stop(&srv);
    ts_it_cleanup(&srv);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (strncmp(tmp, "/tmp/tessera-cli-", 17) == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    return rc;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(login_checks_the_token_and_writes_the_config_file_0600),
        cmocka_unit_test(login_reads_the_token_from_stdin_and_keeps_a_default_project),
        cmocka_unit_test(flags_win_over_the_environment_which_wins_over_the_file),
        cmocka_unit_test(a_malformed_config_file_is_an_error_naming_it),
        cmocka_unit_test(whoami_names_the_role_and_the_projects_of_a_member),
        cmocka_unit_test(submit_sends_whole_gpus),
        cmocka_unit_test(submit_sends_a_portion_with_its_limit_on_several_devices),
        cmocka_unit_test(submit_sends_gpu_memory_with_its_limit),
        cmocka_unit_test(submit_sends_every_other_option),
        cmocka_unit_test(submit_takes_the_default_project),
        cmocka_unit_test(submit_refuses_bad_command_lines_with_exit_1),
        cmocka_unit_test(each_submit_sends_its_own_key_and_a_replayed_request_makes_one_job),
        cmocka_unit_test(a_submit_repeated_with_its_key_returns_the_same_job),
        cmocka_unit_test(submit_wait_ends_with_the_job_and_exits_6_unless_it_succeeded),
        cmocka_unit_test(list_follows_every_page_and_json_is_the_api_json),
        cmocka_unit_test(list_shows_unfinished_jobs_unless_all),
        cmocka_unit_test(list_wide_shows_more_columns),
        cmocka_unit_test(tables_on_a_terminal_fit_its_width_or_COLUMNS),
        cmocka_unit_test(piped_tables_are_never_cut_and_no_headers_drops_the_header),
        cmocka_unit_test(columns_print_only_those_named_in_their_order),
        cmocka_unit_test(describe_job_shows_the_job_and_its_events_by_id_or_name),
        cmocka_unit_test(a_name_in_several_projects_needs_a_project),
        cmocka_unit_test(an_unknown_project_exits_3_saying_it_does_not_exist),
        cmocka_unit_test(a_server_url_may_end_in_a_slash_or_api_v1),
        cmocka_unit_test(a_missing_token_says_how_the_cli_takes_one),
        cmocka_unit_test(a_typo_gets_the_closest_command_or_option),
        cmocka_unit_test(unknown_jobs_exit_3),
        cmocka_unit_test(cancel_cancels_every_job_named_and_events_tell),
        cmocka_unit_test(why_gives_the_reason_and_what_would_make_it_run),
        cmocka_unit_test(queue_json_is_the_api_json),
        cmocka_unit_test(a_bad_token_exits_5_with_the_server_message),
        cmocka_unit_test(a_server_that_does_not_answer_exits_2),
        cmocka_unit_test(usage_errors_exit_1_and_help_exits_0),
        cmocka_unit_test(departments_and_projects_are_created_listed_and_deleted),
        cmocka_unit_test(set_quota_changes_only_what_is_given),
        cmocka_unit_test(max_pending_is_set_and_shown_and_audit_lists_the_writes),
        cmocka_unit_test(set_quota_after_someone_else_changed_it_exits_4_and_writes_nothing),
        cmocka_unit_test(tokens_are_created_listed_and_revoked),
        cmocka_unit_test(an_agent_token_is_bound_to_the_nodes_given_with_node),
        cmocka_unit_test(nodes_are_drained_and_shown_with_their_gpus),
        cmocka_unit_test(logs_print_and_follow_the_output_of_a_running_job),
        cmocka_unit_test(submit_wait_exits_0_when_the_job_succeeds),
        cmocka_unit_test(top_project_shows_quota_next_to_allocation),
        cmocka_unit_test(numbers_read_as_people_write_them),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
