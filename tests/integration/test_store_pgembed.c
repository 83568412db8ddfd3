/*
 * test_store_pgembed.c - the embedded PostgreSQL (server/store/pgembed.c)
 * against real PostgreSQL binaries: first start, restart, adopting a cluster
 * a crashed server left running, recovering after the postmaster was killed,
 * and the errors a user sees. Each test has its own temporary folder and
 * leaves no process behind. CI runs these as root, the path that matters most.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/store/pgembed.h"
#include "tests/integration/pgtest.h"

struct fixture {
    char *dir; /* owned: the test's temporary folder */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || (f->dir = ts_pgtest_tmpdir()) == NULL)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    int left = ts_pgtest_leftovers(f->dir);
    if (left != 0)
        fprintf(stderr, "%d PostgreSQL processes were still running in %s\n", left, f->dir);
    ts_pgtest_rmtree(f->dir);
    free(f->dir);
    free(f);
    return left == 0 ? 0 : -1;
}

static struct ts_pgembed *start_ok(const char *dir)
{
    struct ts_pgembed *pg = NULL;
    struct ts_error err;
    ts_error_clear(&err);
    enum ts_err e = ts_pgembed_start(dir, NULL, &pg, &err);
    if (e != TS_OK)
        fprintf(stderr, "start failed: %s\ndetail: %s\nhint: %s\n", err.message, err.detail,
                err.hint);
    assert_int_equal(e, TS_OK);
    assert_non_null(pg);
    return pg;
}

static void query(PGconn *c, const char *sql, char *buf, size_t len)
{
    assert_true(ts_pgtest_value(c, sql, buf, len));
}

static void assert_value(PGconn *c, const char *sql, const char *want)
{
    char got[512];
    query(c, sql, got, sizeof(got));
    if (strcmp(got, want) != 0)
        fprintf(stderr, "%s: got \"%s\", want \"%s\"\n", sql, got, want);
    assert_string_equal(got, want);
}

static void path_of(char *out, size_t len, const char *dir, const char *rel)
{
    snprintf(out, len, "%s/%s", dir, rel);
}

static void assert_mode_owner(const char *path, mode_t mode, uid_t uid)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    if ((st.st_mode & 07777) != mode || st.st_uid != uid)
        fprintf(stderr, "%s: mode %04o uid %u, want %04o uid %u\n", path,
                (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)mode, (unsigned)uid);
    assert_int_equal(st.st_mode & 07777, mode);
    assert_int_equal(st.st_uid, uid);
}

/* The user the cluster must run as: ourselves, or postgres/nobody as root. */
static uid_t expected_owner(void)
{
    if (geteuid() != 0)
        return geteuid();
    struct passwd *pw = getpwnam("postgres");
    if (pw == NULL)
        pw = getpwnam("nobody");
    assert_non_null(pw);
    return pw->pw_uid;
}

/* Start the cluster in a child process that then dies without stopping it. */
static void start_in_crashing_server(const char *dir, const char *sql)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct ts_pgembed *pg = NULL;
        struct ts_error err;
        if (ts_pgembed_start(dir, NULL, &pg, &err) != TS_OK) {
            fprintf(stderr, "child start failed: %s: %s\n", err.message, err.detail);
            _exit(1);
        }
        if (sql != NULL) {
            PGconn *c = PQconnectdb(ts_pgembed_conninfo(pg));
            PGresult *r = PQexec(c, sql);
            int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
            PQclear(r);
            PQfinish(c);
            if (!ok)
                _exit(2);
        }
        _exit(0); /* the "crash": no ts_pgembed_stop */
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void first_start_creates_the_cluster_reachable_only_through_its_socket(void **state)
{
    struct fixture *f = *state;
    char path[PATH_MAX], want[PATH_MAX], line[256];
    struct ts_pgembed *pg = start_ok(f->dir);

    /* the conninfo names the socket folder inside DIR, and nothing else */
    path_of(want, sizeof(want), f->dir, "pg/run");
    assert_non_null(strstr(ts_pgembed_conninfo(pg), want));
    assert_null(strstr(ts_pgembed_conninfo(pg), "localhost"));

    PGconn *c = ts_pgtest_connect(ts_pgembed_conninfo(pg));
    assert_non_null(c);
    assert_value(c, "SELECT current_database()", "tessera");
    assert_value(c, "SELECT current_user", "tessera");
    assert_value(c, "SHOW listen_addresses", "");
    assert_value(c, "SHOW unix_socket_directories", want);
    assert_value(c, "SHOW unix_socket_permissions", "0700");
    assert_value(c, "SHOW port", "5432");
    assert_value(c, "SHOW fsync", "on");
    assert_value(c, "SHOW synchronous_commit", "on");
    assert_value(c, "SHOW shared_buffers", "128MB");
    assert_value(c, "SHOW max_connections", "100");
    assert_value(c, "SHOW server_encoding", "UTF8");
    assert_value(c, "SHOW lc_collate", "C");
    /* authentication: only "local" (unix socket) lines, all trust */
    assert_value(c, "SELECT count(*) FROM pg_hba_file_rules WHERE type <> 'local'", "0");
    assert_value(c, "SELECT count(*) FROM pg_hba_file_rules WHERE type = 'local'", "1");
    /* it really is the cluster in DIR/pg/data */
    path_of(want, sizeof(want), f->dir, "pg/data");
    assert_value(c, "SHOW data_directory", want);
    PQfinish(c);

    /* postmaster.pid line 6 is the first TCP listen address: none */
    assert_true(ts_pgtest_pidfile_line(f->dir, 6, line, sizeof(line)));
    assert_string_equal(line, "");
    path_of(path, sizeof(path), f->dir, "pg/run/.s.PGSQL.5432");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));

    /* closed folders owned by the PostgreSQL user, never root */
    uid_t owner = expected_owner();
    assert_true(owner != 0);
    path_of(path, sizeof(path), f->dir, "pg");
    assert_mode_owner(path, 0700, owner);
    path_of(path, sizeof(path), f->dir, "pg/run");
    assert_mode_owner(path, 0700, owner);
    path_of(path, sizeof(path), f->dir, "pg/data");
    assert_mode_owner(path, 0700, owner);
    if (geteuid() == 0) {
        /* mkdtemp made DIR 0700: it was opened to 0711 so the user can pass */
        assert_int_equal(stat(f->dir, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0711);
    }
    path_of(path, sizeof(path), f->dir, "pg/log/postgresql.log");
    char *log = ts_pgtest_read_file(path);
    assert_non_null(log);
    assert_non_null(strstr(log, "database system is ready to accept connections"));
    free(log);

    long pid = ts_pgtest_postmaster_pid(f->dir);
    assert_true(ts_pgtest_alive(pid));
    ts_pgembed_stop(pg);
    assert_true(ts_pgtest_wait_gone(pid, 5000, false));
    path_of(path, sizeof(path), f->dir, "pg/data/postmaster.pid");
    assert_int_not_equal(access(path, F_OK), 0);
}

static void second_start_after_stop_reuses_the_data(void **state)
{
    struct fixture *f = *state;
    char path[PATH_MAX];
    struct stat before, after;
    struct ts_pgembed *pg = start_ok(f->dir);
    PGconn *c = ts_pgtest_connect(ts_pgembed_conninfo(pg));
    assert_non_null(c);
    char buf[64];
    query(c, "CREATE TABLE kept (x integer); INSERT INTO kept VALUES (42)", buf, sizeof(buf));
    PQfinish(c);
    ts_pgembed_stop(pg);
    path_of(path, sizeof(path), f->dir, "pg/data/PG_VERSION");
    assert_int_equal(stat(path, &before), 0);

    pg = start_ok(f->dir);
    assert_int_equal(stat(path, &after), 0);
    assert_int_equal(before.st_ino, after.st_ino); /* not made again by initdb */
    c = ts_pgtest_connect(ts_pgembed_conninfo(pg));
    assert_non_null(c);
    assert_value(c, "SELECT x FROM kept", "42");
    PQfinish(c);
    ts_pgembed_stop(pg);
}

static void start_adopts_a_cluster_that_a_crashed_server_left_running(void **state)
{
    struct fixture *f = *state;
    start_in_crashing_server(f->dir, "CREATE TABLE kept (x integer)");
    long pid = ts_pgtest_postmaster_pid(f->dir);
    assert_true(ts_pgtest_alive(pid));

    struct ts_pgembed *pg = start_ok(f->dir);
    assert_int_equal(ts_pgtest_postmaster_pid(f->dir), pid); /* the same postmaster */
    PGconn *c = ts_pgtest_connect(ts_pgembed_conninfo(pg));
    assert_non_null(c);
    assert_value(c, "SELECT count(*) FROM kept", "0");
    PQfinish(c);
    ts_pgembed_stop(pg);
    assert_true(ts_pgtest_wait_gone(pid, 5000, false));
}

/*
 * kill -9 of the postmaster leaves postmaster.pid behind. reaped: wait until
 * init has reaped it (pg_ctl start then copes with a dead pid); otherwise
 * start at once, while it may still be an unreaped zombie that postgres would
 * take for a live postmaster.
 */
static void restart_after_kill_9(const char *dir, bool reaped)
{
    char path[PATH_MAX];
    start_in_crashing_server(dir, "CREATE TABLE kept (x integer); INSERT INTO kept VALUES (7)");
    long pid = ts_pgtest_postmaster_pid(dir);
    assert_true(ts_pgtest_alive(pid));
    assert_int_equal(kill((pid_t)pid, SIGKILL), 0);
    assert_true(ts_pgtest_wait_gone(pid, 10000, reaped));
    path_of(path, sizeof(path), dir, "pg/data/postmaster.pid");
    assert_int_equal(access(path, F_OK), 0); /* stale */

    struct ts_pgembed *pg = start_ok(dir);
    long npid = ts_pgtest_postmaster_pid(dir);
    assert_int_not_equal(npid, pid);
    assert_true(ts_pgtest_alive(npid));
    PGconn *c = ts_pgtest_connect(ts_pgembed_conninfo(pg));
    assert_non_null(c);
    assert_value(c, "SELECT x FROM kept", "7"); /* committed before the kill: kept */
    PQfinish(c);
    ts_pgembed_stop(pg);
    assert_true(ts_pgtest_wait_gone(npid, 5000, false));
}

static void start_recovers_from_a_stale_postmaster_pid_after_kill_9(void **state)
{
    struct fixture *f = *state;
    restart_after_kill_9(f->dir, true);
}

static void start_recovers_at_once_after_kill_9_before_the_postmaster_is_reaped(void **state)
{
    struct fixture *f = *state;
    restart_after_kill_9(f->dir, false);
}

static void a_cluster_that_cannot_start_is_reported_with_its_log(void **state)
{
    struct fixture *f = *state;
    char path[PATH_MAX];
    ts_pgembed_stop(start_ok(f->dir));
    path_of(path, sizeof(path), f->dir, "pg/data/postgresql.auto.conf");
    FILE *conf = fopen(path, "a");
    assert_non_null(conf);
    fputs("shared_buffers = 'banana'\n", conf);
    fclose(conf);

    struct ts_pgembed *pg = NULL;
    struct ts_error err;
    assert_int_equal(ts_pgembed_start(f->dir, NULL, &pg, &err), TS_ERR_DATABASE);
    assert_null(pg);
    assert_string_equal(err.message, "could not start PostgreSQL: pg_ctl exited with status 1");
    assert_non_null(strstr(err.detail, "shared_buffers"));
    path_of(path, sizeof(path), f->dir, "pg/log/postgresql.log");
    assert_non_null(strstr(err.hint, path));
}

static void a_data_folder_too_long_for_a_socket_is_refused(void **state)
{
    struct fixture *f = *state;
    char dir[PATH_MAX], pgdir[PATH_MAX + 8];
    snprintf(dir, sizeof(dir), "%s/%0100d", f->dir, 0);
    struct ts_pgembed *pg = NULL;
    struct ts_error err;
    assert_int_equal(ts_pgembed_start(dir, NULL, &pg, &err), TS_ERR_CONFIG);
    assert_null(pg);
    assert_non_null(strstr(err.message, "data folder path is too long for a unix socket"));
    assert_non_null(strstr(err.message, "limit 86"));
    assert_true(err.hint[0] != '\0');
    snprintf(pgdir, sizeof(pgdir), "%s/pg", dir);
    assert_int_not_equal(access(pgdir, F_OK), 0); /* nothing made */
}

static void a_pg_bindir_without_postgresql_is_refused(void **state)
{
    struct fixture *f = *state;
    struct ts_pgembed *pg = NULL;
    struct ts_error err;
    assert_int_equal(ts_pgembed_start(f->dir, "/nonexistent/bin", &pg, &err), TS_ERR_CONFIG);
    assert_string_equal(err.message, "PostgreSQL programs not found in \"/nonexistent/bin\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(first_start_creates_the_cluster_reachable_only_through_its_socket),
        T(second_start_after_stop_reuses_the_data),
        T(start_adopts_a_cluster_that_a_crashed_server_left_running),
        T(start_recovers_from_a_stale_postmaster_pid_after_kill_9),
        T(start_recovers_at_once_after_kill_9_before_the_postmaster_is_reaped),
        T(a_cluster_that_cannot_start_is_reported_with_its_log),
        T(a_data_folder_too_long_for_a_socket_is_refused),
        T(a_pg_bindir_without_postgresql_is_refused),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
