/*
 * test_server_lifecycle.c - the server as a process: the embedded
 * PostgreSQL across restarts and crashes, the generated admin token, an
 * external database shared by servers starting together, an external
 * database that goes away and returns, a database newer
 * than the server, and the option table (--help, flags, environment, file).
 */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/array.h"
#include "tests/integration/harness.h"
#include "tests/integration/pgtest.h"

static char exe[512];

/* Run tessera-server with args and env (NULL-terminated "K=V" list), capture
 * stdout+stderr into out; returns the exit status (or -1). Gives up after
 * timeout seconds. */
/* The migrations the server embeds: the .sql files of migrations/. */
static int migration_files(void)
{
    char dir[512];
    const char *src = getenv("TS_SOURCE_DIR");
    snprintf(dir, sizeof(dir), "%s/migrations", src ? src : ".");
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        n += len > 4 && strcmp(e->d_name + len - 4, ".sql") == 0;
    }
    closedir(d);
    return n;
}

static int run_server(const char *const *args, const char *const *env, char *out, size_t len,
                      int timeout)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        unsetenv("TESSERA_ADMIN_TOKEN");
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        const char *argv[24] = {exe};
        int n = 1;
        for (int i = 0; args && args[i] && n < 22; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        alarm((unsigned)timeout);
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    size_t used = 0;
    ssize_t r;
    while (used + 1 < len && (r = read(p[0], out + used, len - 1 - used)) > 0)
        used += (size_t)r;
    out[used] = '\0';
    close(p[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void help_lists_every_option_with_its_environment_variable(void **state)
{
    static char out[16384];
    const char *args[] = {"--help", NULL};
    assert_int_equal(run_server(args, NULL, out, sizeof(out), 10), 0);
    const char *names[] = {
        "--data-dir",       "--listen",          "--database",         "--pg-bindir",
        "--log-level",      "--max-body",        "--max-connections",  "--connection-timeout",
        "--db-pool",        "--idempotency-ttl", "--auth-cache-ttl",   "--config",
        "TESSERA_DATA_DIR", "TESSERA_LISTEN",    "TESSERA_ADMIN_TOKEN"};
    for (size_t i = 0; i < TS_ARRAY_LEN(names); i++)
        if (strstr(out, names[i]) == NULL)
            fail_msg("--help does not mention %s:\n%s", names[i], out);
    const char *more[] = {"--idle-swap-after DURATION",
                          "(default 5m; env TESSERA_IDLE_SWAP_AFTER)"};
    for (size_t i = 0; i < TS_ARRAY_LEN(more); i++)
        if (strstr(out, more[i]) == NULL)
            fail_msg("--help does not mention %s:\n%s", more[i], out);
}

static void bad_options_are_refused_with_a_clear_message(void **state)
{
    static char out[4096];
    const char *unknown[] = {"--data-dir", "/tmp/x", "--lisen", "1:2", NULL};
    assert_int_equal(run_server(unknown, NULL, out, sizeof(out), 10), 1);
    assert_non_null(strstr(out, "lisen"));
    const char *secret[] = {"--data-dir", "/tmp/x", "--admin-token", "abcdefghijklmnopq", NULL};
    assert_int_equal(run_server(secret, NULL, out, sizeof(out), 10), 1);
    assert_non_null(strstr(out, "admin-token"));
    const char *range[] = {"--data-dir", "/tmp/x", "--db-pool", "0", NULL};
    assert_int_equal(run_server(range, NULL, out, sizeof(out), 10), 1);
    assert_non_null(strstr(out, "db-pool"));
    const char *env[] = {"TESSERA_MAX_BODY=20XB", NULL};
    const char *plain[] = {"--data-dir", "/tmp/x", NULL};
    assert_int_equal(run_server(plain, env, out, sizeof(out), 10), 1);
    assert_non_null(strstr(out, "TESSERA_MAX_BODY"));
}

static void the_first_start_writes_a_private_admin_token_that_works(void **state)
{
    struct ts_it_server s;
    ts_it_admin_from_env = false;
    int rc = ts_it_start(&s, NULL, NULL);
    ts_it_admin_from_env = true;
    assert_int_equal(rc, 0);
    char path[400], token[128];
    snprintf(path, sizeof(path), "%s/admin.token", s.dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(token, sizeof(token), f));
    fclose(f);
    token[strcspn(token, "\n")] = '\0';
    struct ts_client *c = ts_it_client(&s, token);
    assert_int_equal(ts_it_req(c, "GET", "/api/v1/tokens", NULL, NULL, NULL), 200);
    /* a restart keeps the same token and does not write a new one */
    ts_it_stop(&s);
    ts_it_admin_from_env = false;
    struct ts_it_server again;
    rc = ts_it_start(&again, s.dir, NULL);
    ts_it_admin_from_env = true;
    assert_int_equal(rc, 0);
    ts_client_free(c);
    c = ts_it_client(&again, token);
    assert_int_equal(ts_it_req(c, "GET", "/api/v1/tokens", NULL, NULL, NULL), 200);
    ts_client_free(c);
    assert_int_equal(ts_it_stop(&again), 0);
    ts_it_cleanup(&again);
}

static void data_survives_a_restart_and_a_crash_of_the_server(void **state)
{
    struct ts_it_server s;
    assert_int_equal(ts_it_start(&s, NULL, NULL), 0);
    assert_int_equal(
        ts_it_req(s.admin, "POST", "/api/v1/departments", "{\"name\":\"keep\"}", NULL, NULL), 201);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", s.dir);
    ts_it_stop(&s);
    /* the embedded PostgreSQL stopped with the server */
    char pidfile[400];
    snprintf(pidfile, sizeof(pidfile), "%s/pg/data/postmaster.pid", dir);
    assert_int_not_equal(access(pidfile, F_OK), 0);

    assert_int_equal(ts_it_start(&s, dir, NULL), 0);
    assert_int_equal(ts_it_req(s.admin, "GET", "/api/v1/departments/keep", NULL, NULL, NULL), 200);
    /* a crash leaves PostgreSQL running; the next start adopts it */
    ts_it_crash(&s);
    assert_int_equal(access(pidfile, F_OK), 0);
    assert_int_equal(ts_it_start(&s, dir, NULL), 0);
    assert_int_equal(ts_it_req(s.admin, "GET", "/api/v1/departments/keep", NULL, NULL, NULL), 200);
    assert_int_equal(ts_it_stop(&s), 0);
    ts_it_cleanup(&s);
}

/* Killing the embedded PostgreSQL: the server answers 503 while it is gone
 * (never a crash), starts it again by itself within seconds and serves the
 * same data; before, it answered 503 for ever. */
static void a_killed_embedded_postgresql_is_started_again(void **state)
{
    (void)state;
    struct ts_it_server s;
    assert_int_equal(ts_it_start(&s, NULL, NULL), 0);
    assert_int_equal(
        ts_it_req(s.admin, "POST", "/api/v1/departments", "{\"name\":\"keep\"}", NULL, NULL), 201);
    char pidfile[400], line[32] = "";
    snprintf(pidfile, sizeof(pidfile), "%s/pg/data/postmaster.pid", s.dir);
    FILE *f = fopen(pidfile, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof(line), f));
    fclose(f);
    pid_t pm = (pid_t)atol(line);
    assert_true(pm > 1);
    assert_int_equal(kill(pm, SIGKILL), 0);
    /* some answer 503 meanwhile; within 60 s it serves the data again */
    long st = 0;
    int unavailable = 0;
    for (int i = 0; i < 600; i++) {
        st = ts_it_req(s.admin, "GET", "/api/v1/departments/keep", NULL, NULL, NULL);
        unavailable += st == 503;
        if (st == 200 && i > 0)
            break;
        assert_true(st == 200 || st == 503);
        usleep(100 * 1000);
    }
    fprintf(stderr, "%d answers 503 while PostgreSQL was away\n", unavailable);
    assert_int_equal(st, 200);
    f = fopen(pidfile, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof(line), f));
    fclose(f);
    assert_int_not_equal((pid_t)atol(line), pm); /* a new postmaster */
    assert_int_equal(
        ts_it_req(s.admin, "POST", "/api/v1/departments", "{\"name\":\"after\"}", NULL, NULL), 201);
    /* the keep-alive thread logs the restart after PostgreSQL accepts
     * connections, so a request may be answered before the line is written */
    char logpath[400], text[65536];
    snprintf(logpath, sizeof(logpath), "%s/server.log", s.dir);
    bool logged = false;
    for (int i = 0; i < 100 && !logged; i++) {
        f = fopen(logpath, "r");
        assert_non_null(f);
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        logged = strstr(text, "started it again") != NULL;
        if (!logged)
            usleep(100 * 1000);
    }
    assert_true(logged);
    assert_int_equal(ts_it_stop(&s), 0);
    ts_it_cleanup(&s);
}

static void servers_starting_together_on_an_external_database_migrate_it_once(void **state)
{
    struct ts_it_server host;
    assert_int_equal(ts_it_start(&host, NULL, NULL), 0);
    char out[64];
    assert_int_equal(ts_it_sql(&host, "CREATE DATABASE shared", out, sizeof(out)), 0);
    char url[400];
    snprintf(url, sizeof(url), "host=%s/pg/run dbname=shared user=tessera", host.dir);
    const char *args[] = {"--database", url, NULL};
    struct ts_it_server a, b;
    /* start both before waiting for either: they race for the migration lock */
    pid_t pa = fork();
    if (pa == 0)
        _exit(ts_it_start(&a, NULL, args) == 0 ? (ts_it_stop(&a), ts_it_cleanup(&a), 0) : 1);
    pid_t pb = fork();
    if (pb == 0)
        _exit(ts_it_start(&b, NULL, args) == 0 ? (ts_it_stop(&b), ts_it_cleanup(&b), 0) : 1);
    int sa, sb;
    waitpid(pa, &sa, 0);
    waitpid(pb, &sb, 0);
    assert_true(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
    assert_true(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
    struct ts_it_server probe = host;
    snprintf(probe.conninfo, sizeof(probe.conninfo), "%s", url);
    assert_int_equal(ts_it_sql(&probe, "SELECT count(*) FROM schema_migration", out, sizeof(out)),
                     0);
    char nmig[16];
    snprintf(nmig, sizeof(nmig), "%d", migration_files());
    assert_string_equal(out, nmig); /* every migration applied, each once */
    /* a database migrated by a newer server is refused */
    assert_int_equal(ts_it_sql(&probe,
                               "INSERT INTO schema_migration (version, name)"
                               " VALUES (9999, '9999_future.sql')",
                               out, sizeof(out)),
                     0);
    static char log[8192];
    char dd[64];
    snprintf(dd, sizeof(dd), "/tmp/tessera-it-newer-%d", (int)getpid());
    const char *newer[] = {"--data-dir", dd, "--listen", "127.0.0.1:0", "--database", url, NULL};
    const char *env[] = {"TESSERA_ADMIN_TOKEN=" TS_IT_ADMIN_TOKEN, NULL};
    assert_int_equal(run_server(newer, env, log, sizeof(log), 60), 1);
    if (strstr(log, "9999") == NULL)
        fail_msg("the refusal does not name the version:\n%s", log);
    char rm[128];
    snprintf(rm, sizeof(rm), "rm -rf %s", dd);
    assert_int_equal(system(rm), 0);
    assert_int_equal(ts_it_stop(&host), 0);
    ts_it_cleanup(&host);
}

/* An external database that goes away and comes back (issue 14: "reconnects
 * to an external one when it returns, answering 503 meanwhile"): the server
 * answers 503 problems while PostgreSQL is down, never crashes, and once it
 * is back serves the same data, takes writes, and its scheduler decides the
 * jobs submitted after the return (its leader's connection came back too). */
static long get_until(struct ts_client *c, const char *path, long want, int seconds)
{
    long st = 0;
    for (int i = 0; i < seconds * 10; i++) {
        st = ts_it_req(c, "GET", path, NULL, NULL, NULL);
        if (st == want)
            break;
        assert_true(st == 200 || st == 503);
        usleep(100 * 1000);
    }
    return st;
}

static void an_external_database_that_returns_is_served_again(void **state)
{
    (void)state;
    struct ts_it_server host, s;
    assert_int_equal(ts_it_start(&host, NULL, NULL), 0);
    char out[64], hostdir[256];
    snprintf(hostdir, sizeof(hostdir), "%s", host.dir);
    assert_int_equal(ts_it_sql(&host, "CREATE DATABASE away", out, sizeof(out)), 0);
    char url[400];
    snprintf(url, sizeof(url), "host=%s/pg/run dbname=away user=tessera", hostdir);
    const char *args[] = {"--database", url, "--cycle-interval", "0", NULL};
    assert_int_equal(ts_it_start(&s, NULL, args), 0);
    assert_int_equal(
        ts_it_req(s.admin, "POST", "/api/v1/departments", "{\"name\":\"keep\"}", NULL, NULL), 201);

    /* PostgreSQL goes away with the server that embeds it */
    ts_it_crash(&host);
    long pm = ts_pgtest_postmaster_pid(hostdir);
    assert_true(pm > 1);
    assert_int_equal(kill((pid_t)pm, SIGINT), 0); /* a fast shutdown */
    assert_true(ts_pgtest_wait_gone(pm, 30000, false));
    assert_int_equal(get_until(s.admin, "/api/v1/departments/keep", 503, 30), 503);
    struct ts_response r = {0};
    assert_int_equal(ts_it_req(s.admin, "GET", "/readyz", NULL, NULL, &r), 503);
    ts_response_free(&r);
    assert_int_equal(ts_it_req(s.admin, "GET", "/api/v1/departments/keep", NULL, NULL, &r), 503);
    assert_non_null(r.headers.data);
    assert_non_null(strstr(r.headers.data, "application/problem+json"));
    ts_response_free(&r);
    assert_int_equal(kill(s.pid, 0), 0); /* still running */

    /* it returns: the same data, writes taken, the scheduler decides */
    assert_int_equal(ts_it_start(&host, hostdir, NULL), 0);
    assert_int_equal(get_until(s.admin, "/api/v1/departments/keep", 200, 60), 200);
    assert_int_equal(
        ts_it_req(s.admin, "POST", "/api/v1/departments", "{\"name\":\"back\"}", NULL, NULL), 201);
    assert_int_equal(
        ts_it_req(s.admin, "POST", "/api/v1/projects",
                  "{\"name\":\"pb\", \"department\": \"back\", \"quota\": {\"gpus\": 1}}", NULL,
                  NULL),
        201);
    json_t *job = NULL;
    assert_int_equal(ts_it_req(s.admin, "POST", "/api/v1/jobs",
                               "{\"project\": \"pb\", \"name\": \"after\", \"command\": "
                               "[\"true\"], \"gpu\": {\"count\": 1}}",
                               NULL, &r),
                     201);
    job = json_loads(r.body.data, 0, NULL);
    ts_response_free(&r);
    assert_non_null(job);
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", ts_it_int(job, "id"));
    json_decref(job);
    const char *reason = "";
    json_t *j = NULL;
    /* "not_yet_scheduled" until a cycle decides: no node, so it says why */
    for (int i = 0; i < 100; i++) {
        json_decref(j);
        assert_int_equal(ts_it_req(s.admin, "GET", path, NULL, NULL, &r), 200);
        j = json_loads(r.body.data, 0, NULL);
        ts_response_free(&r);
        reason = ts_it_str(json_object_get(j, "pending_reason"), "code");
        if (strcmp(reason, "not_yet_scheduled") != 0)
            break;
        usleep(100 * 1000);
    }
    fprintf(stderr, "after the return: %s\n", reason);
    assert_string_not_equal(reason, "not_yet_scheduled");
    assert_true(reason[0] != '\0');
    json_decref(j);
    assert_int_equal(ts_it_stop(&s), 0);
    ts_it_cleanup(&s);
    assert_int_equal(ts_it_stop(&host), 0);
    ts_it_cleanup(&host);
}

static void a_config_file_and_the_environment_set_options(void **state)
{
    struct ts_it_server s;
    char dir[] = "/tmp/tessera-it-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char conf[300];
    snprintf(conf, sizeof(conf), "%s/tessera.conf", dir);
    FILE *f = fopen(conf, "w");
    assert_non_null(f);
    fprintf(f, "# tiny bodies\nmax_body = 2KiB\nlog-level = \"warn\"\n");
    fclose(f);
    char arg[320];
    snprintf(arg, sizeof(arg), "--config=%s", conf);
    const char *args[] = {arg, NULL};
    assert_int_equal(ts_it_start(&s, dir, args), 0);
    char body[4096];
    memset(body, ' ', sizeof(body) - 1);
    body[0] = '{';
    body[sizeof(body) - 2] = '}';
    body[sizeof(body) - 1] = '\0';
    assert_int_equal(ts_it_req(s.admin, "POST", "/api/v1/departments", body, NULL, NULL), 413);
    assert_int_equal(ts_it_stop(&s), 0);
    ts_it_cleanup(&s);
}

int main(void)
{
    ts_client_global_init();
    const char *bin = getenv("TS_BIN_DIR");
    snprintf(exe, sizeof(exe), "%s/tessera-server", bin ? bin : "build/bin");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_lists_every_option_with_its_environment_variable),
        cmocka_unit_test(bad_options_are_refused_with_a_clear_message),
        cmocka_unit_test(the_first_start_writes_a_private_admin_token_that_works),
        cmocka_unit_test(data_survives_a_restart_and_a_crash_of_the_server),
        cmocka_unit_test(a_killed_embedded_postgresql_is_started_again),
        cmocka_unit_test(servers_starting_together_on_an_external_database_migrate_it_once),
        cmocka_unit_test(an_external_database_that_returns_is_served_again),
        cmocka_unit_test(a_config_file_and_the_environment_set_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
