/*
 * test_store_db.c - the connection pool and the SQLSTATE mapping
 * (server/store/db.c) on a real PostgreSQL: bounded waits, connections broken
 * by the server and reset, transactions left open, and the error codes every
 * store function relies on.
 *
 * One private cluster for the file, in a temporary folder removed at the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/array.h"
#include "server/store/db.h"
#include "server/store/db_pg.h"
#include "server/store/pgembed.h"
#include "tests/integration/pgtest.h"

static char *dir;             /* owned: the temporary folder */
static struct ts_pgembed *pg; /* owned */

static const char *schema_sql =
    "CREATE TABLE parent (id integer, CONSTRAINT parent_pkey PRIMARY KEY (id));"
    "CREATE TABLE child (id integer NOT NULL, parent_id integer,"
    " CONSTRAINT child_id_check CHECK (id > 0),"
    " CONSTRAINT child_parent_fkey FOREIGN KEY (parent_id) REFERENCES parent (id));"
    "CREATE TABLE note (x text)";

static int group_setup(void **state)
{
    (void)state;
    struct ts_error err;
    if ((dir = ts_pgtest_tmpdir()) == NULL)
        return -1;
    if (ts_pgembed_start(dir, NULL, &pg, &err) != TS_OK) {
        fprintf(stderr, "could not start PostgreSQL: %s: %s\n", err.message, err.detail);
        return -1;
    }
    PGconn *c = ts_pgtest_connect(ts_pgembed_conninfo(pg));
    char buf[8];
    bool ok = c != NULL && ts_pgtest_value(c, schema_sql, buf, sizeof(buf));
    PQfinish(c);
    return ok ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    ts_pgembed_stop(pg);
    int left = ts_pgtest_leftovers(dir);
    ts_pgtest_rmtree(dir);
    free(dir);
    return left == 0 ? 0 : -1;
}

static struct ts_db *open_pool(int size)
{
    struct ts_db *db = NULL;
    struct ts_error err;
    if (ts_db_open(ts_pgembed_conninfo(pg), size, &db, &err) != TS_OK)
        fprintf(stderr, "%s: %s\n", err.message, err.detail);
    assert_non_null(db);
    return db;
}

static struct ts_dbconn *acquire(struct ts_db *db)
{
    struct ts_error err;
    struct ts_dbconn *c = ts_db_acquire(db, 5000, &err);
    if (c == NULL)
        fprintf(stderr, "%s: %s\n", err.message, err.detail);
    assert_non_null(c);
    return c;
}

/* One value of a statement that must succeed, into buf. */
static void one(struct ts_dbconn *c, const char *sql, char *buf, size_t len)
{
    PGresult *res = NULL;
    struct ts_error err;
    enum ts_err e = ts_db_exec(c, sql, 0, NULL, &res, &err);
    if (e != TS_OK)
        fprintf(stderr, "%s: %s (%s)\n", sql, err.message, err.detail);
    assert_int_equal(e, TS_OK);
    snprintf(buf, len, "%s", PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : "");
    PQclear(res);
}

static long elapsed_ms(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (long)(t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

static void connections_are_named_tessera(void **state)
{
    (void)state;
    char buf[64];
    struct ts_db *db = open_pool(1);
    struct ts_dbconn *c = acquire(db);
    one(c, "SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()", buf,
        sizeof(buf));
    assert_string_equal(buf, "tessera");
    ts_db_release(db, c);
    ts_db_close(db);
}

static void acquire_gives_up_after_its_timeout_when_every_connection_is_borrowed(void **state)
{
    (void)state;
    struct ts_error err;
    struct ts_db *db = open_pool(1);
    struct ts_dbconn *c = acquire(db);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_null(ts_db_acquire(db, 200, &err));
    long ms = elapsed_ms(&t0);
    assert_true(ms >= 195 && ms < 2000);
    assert_int_equal(err.code, TS_ERR_DATABASE);
    assert_string_equal(err.message,
                        "could not get a database connection: all 1 in use after 200 ms");
    ts_db_release(db, c);
    c = acquire(db); /* free again */
    ts_db_release(db, c);
    ts_db_close(db);
}

struct releaser {
    struct ts_db *db;
    struct ts_dbconn *c;
};

static void *release_later(void *arg)
{
    struct releaser *r = arg;
    usleep(150000);
    ts_db_release(r->db, r->c);
    return NULL;
}

static void acquire_wakes_when_another_thread_releases(void **state)
{
    (void)state;
    struct ts_db *db = open_pool(1);
    struct releaser r = {db, acquire(db)};
    pthread_t t;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pthread_create(&t, NULL, release_later, &r), 0);
    struct ts_dbconn *c = acquire(db);
    long ms = elapsed_ms(&t0);
    assert_true(ms >= 100 && ms < 2000); /* woken by the release, not by the 5 s timeout */
    assert_ptr_equal(c, r.c);
    pthread_join(t, NULL);
    ts_db_release(db, c);
    ts_db_close(db);
}

static void a_connection_the_server_dropped_is_reset_before_reuse(void **state)
{
    (void)state;
    char pid[32], buf[32], sql[128];
    struct ts_error err;
    struct ts_db *db = open_pool(1);
    struct ts_dbconn *c = acquire(db);
    one(c, "SELECT pg_backend_pid()", pid, sizeof(pid));

    PGconn *killer = ts_pgtest_connect(ts_pgembed_conninfo(pg));
    assert_non_null(killer);
    snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%s, 5000)", pid);
    assert_true(ts_pgtest_value(killer, sql, buf, sizeof(buf)));
    assert_string_equal(buf, "t");
    PQfinish(killer);

    PGresult *res = NULL;
    assert_int_equal(ts_db_exec(c, "SELECT 1", 0, NULL, &res, &err), TS_ERR_DATABASE);
    assert_null(res);
    assert_non_null(strstr(err.message, "lost connection to database: "));
    assert_true(err.detail[0] != '\0');
    ts_db_release(db, c);

    c = acquire(db); /* the same slot, connected again */
    one(c, "SELECT pg_backend_pid()", buf, sizeof(buf));
    assert_string_not_equal(buf, pid);
    ts_db_release(db, c);
    assert_int_equal(ts_db_ping(db, &err), TS_OK);
    ts_db_close(db);
}

/* Run sql with params and expect code; err gets the error. */
static void expect(struct ts_dbconn *c, const char *sql, int n, const char *const *params,
                   enum ts_err code, struct ts_error *err)
{
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c, sql, n, params, &res, err);
    if (e != code)
        fprintf(stderr, "%s: got %s, want %s: %s (%s)\n", sql, ts_err_code(e), ts_err_code(code),
                err->message, err->detail);
    assert_int_equal(e, code);
    assert_int_equal(err->code, code);
    assert_null(res);
    assert_true(err->message[0] != '\0');
    assert_true(err->detail[0] != '\0');
}

static void sqlstates_map_to_tessera_error_codes(void **state)
{
    (void)state;
    struct ts_error err;
    char buf[32];
    struct ts_db *db = open_pool(1);
    struct ts_dbconn *c = acquire(db);
    one(c, "TRUNCATE child, parent", buf, sizeof(buf));
    const char *one_id[] = {"1"};
    one(c, "INSERT INTO parent VALUES (1)", buf, sizeof(buf));

    expect(c, "INSERT INTO parent VALUES ($1)", 1, one_id, TS_ERR_ALREADY_EXISTS, &err);
    assert_string_equal(err.message,
                        "duplicate key value violates unique constraint \"parent_pkey\"");
    assert_non_null(strstr(err.detail, "Key (id)=(1) already exists."));
    assert_non_null(strstr(err.detail, "sqlstate=23505"));
    assert_non_null(strstr(err.detail, "constraint=parent_pkey"));

    const char *missing[] = {"1", "99"};
    expect(c, "INSERT INTO child VALUES ($1, $2)", 2, missing, TS_ERR_UNKNOWN_REFERENCE, &err);
    assert_non_null(strstr(err.detail, "constraint=child_parent_fkey"));

    const char *ok[] = {"1", "1"};
    PGresult *res = NULL;
    assert_int_equal(
        ts_db_exec(c, "INSERT INTO child VALUES ($1, $2)", TS_ARRAY_LEN(ok), ok, &res, &err),
        TS_OK);
    PQclear(res);
    expect(c, "DELETE FROM parent WHERE id = $1", 1, one_id, TS_ERR_IN_USE, &err);
    assert_non_null(strstr(err.detail, "constraint=child_parent_fkey"));

    const char *negative[] = {"-1", "1"};
    expect(c, "INSERT INTO child VALUES ($1, $2)", 2, negative, TS_ERR_INVALID_VALUE, &err);
    assert_non_null(strstr(err.detail, "constraint=child_id_check"));

    expect(c, "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '40001'; END $$", 0, NULL,
           TS_ERR_CONFLICT, &err);
    expect(c, "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '40P01'; END $$", 0, NULL,
           TS_ERR_CONFLICT, &err);
    expect(c, "SELEC 1", 0, NULL, TS_ERR_INTERNAL, &err);
    assert_non_null(strstr(err.detail, "sqlstate=42601"));
    expect(c, "SELECT $1::integer", 1, (const char *[]){"banana"}, TS_ERR_INTERNAL, &err);

    /* NULL parameters are SQL NULL */
    const char *null_param[] = {NULL};
    res = NULL;
    assert_int_equal(
        ts_db_exec(c, "SELECT $1::text IS NULL", TS_ARRAY_LEN(null_param), null_param, &res, &err),
        TS_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "t");
    PQclear(res);
    ts_db_release(db, c);
    ts_db_close(db);
}

static void committing_a_failed_transaction_is_an_error(void **state)
{
    (void)state;
    struct ts_error err;
    char buf[32];
    struct ts_db *db = open_pool(1);
    struct ts_dbconn *c = acquire(db);
    one(c, "TRUNCATE note", buf, sizeof(buf));
    assert_int_equal(ts_db_begin(c, &err), TS_OK);
    one(c, "INSERT INTO note VALUES ('lost')", buf, sizeof(buf));
    PGresult *res = NULL;
    assert_int_equal(ts_db_exec(c, "SELEC 1", 0, NULL, &res, &err), TS_ERR_INTERNAL);
    assert_int_not_equal(ts_db_commit(c, &err), TS_OK);
    assert_string_equal(err.message,
                        "cannot commit: the transaction was aborted by an earlier error");
    assert_int_equal(PQtransactionStatus(ts_dbconn_pg(c)), PQTRANS_IDLE);
    one(c, "SELECT count(*) FROM note", buf, sizeof(buf));
    assert_string_equal(buf, "0");

    /* and a good one commits */
    assert_int_equal(ts_db_begin(c, &err), TS_OK);
    one(c, "INSERT INTO note VALUES ('kept')", buf, sizeof(buf));
    assert_int_equal(ts_db_commit(c, &err), TS_OK);
    one(c, "SELECT count(*) FROM note", buf, sizeof(buf));
    assert_string_equal(buf, "1");
    ts_db_rollback(c); /* no-op outside a transaction */
    ts_db_release(db, c);
    ts_db_close(db);
}

static void a_connection_released_inside_a_transaction_is_rolled_back(void **state)
{
    (void)state;
    struct ts_error err;
    char buf[32];
    struct ts_db *db = open_pool(1);
    struct ts_dbconn *c = acquire(db);
    one(c, "TRUNCATE note", buf, sizeof(buf));
    assert_int_equal(ts_db_begin(c, &err), TS_OK);
    one(c, "INSERT INTO note VALUES ('forgotten')", buf, sizeof(buf));
    ts_db_release(db, c);

    c = acquire(db);
    assert_int_equal(PQtransactionStatus(ts_dbconn_pg(c)), PQTRANS_IDLE);
    one(c, "SELECT count(*) FROM note", buf, sizeof(buf));
    assert_string_equal(buf, "0");
    ts_db_release(db, c);
    ts_db_close(db);
}

static void opening_a_pool_to_an_unreachable_server_fails_clearly(void **state)
{
    (void)state;
    struct ts_db *db = (struct ts_db *)&db; /* must be reset to NULL */
    struct ts_error err;
    char ci[1024];
    snprintf(ci, sizeof(ci), "host=%s/nowhere port=5432 dbname=tessera", dir);
    assert_int_equal(ts_db_open(ci, 2, &db, &err), TS_ERR_DATABASE);
    assert_null(db);
    assert_string_equal(err.message, "could not connect to database: no such file or directory");
    assert_non_null(strstr(err.detail, "/nowhere/.s.PGSQL.5432"));

    snprintf(ci, sizeof(ci), "%s dbname=nosuchdb", ts_pgembed_conninfo(pg));
    assert_int_equal(ts_db_open(ci, 1, &db, &err), TS_ERR_DATABASE);
    assert_string_equal(err.message,
                        "could not connect to database: database \"nosuchdb\" does not exist");

    assert_int_equal(ts_db_open(ts_pgembed_conninfo(pg), 0, &db, &err), TS_ERR_CONFIG);
    assert_string_equal(err.message, "database pool size must be at least 1: 0");
}

static void ping_answers_through_the_pool(void **state)
{
    (void)state;
    struct ts_error err;
    struct ts_db *db = open_pool(2);
    assert_int_equal(ts_db_ping(db, &err), TS_OK);
    ts_db_close(db);
    ts_db_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(connections_are_named_tessera),
        cmocka_unit_test(acquire_gives_up_after_its_timeout_when_every_connection_is_borrowed),
        cmocka_unit_test(acquire_wakes_when_another_thread_releases),
        cmocka_unit_test(a_connection_the_server_dropped_is_reset_before_reuse),
        cmocka_unit_test(sqlstates_map_to_tessera_error_codes),
        cmocka_unit_test(committing_a_failed_transaction_is_an_error),
        cmocka_unit_test(a_connection_released_inside_a_transaction_is_rolled_back),
        cmocka_unit_test(opening_a_pool_to_an_unreachable_server_fails_clearly),
        cmocka_unit_test(ping_answers_through_the_pool),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
