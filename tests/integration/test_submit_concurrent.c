/*
 * test_submit_concurrent.c - max_pending with submissions that no longer
 * queue on their project's row (issue 15, migrations/0011): far from the
 * limit they share the row and count after taking it, near it they take it
 * alone (server/store/store_jobs.c). Against a real server, scheduler loop
 * off, so nothing but the submissions themselves folds the counts:
 *
 * - a submission far from the limit that meets a near one in flight (the
 *   project's row held FOR UPDATE, here by the test's own transaction that
 *   fills the project to its limit) waits, then counts what that one made:
 *   refused (429), not taken on a count read before the wait;
 * - 16 clients racing across the far/near boundary (max_pending =
 *   max_connections + 40) take exactly max_pending jobs, every other answer
 *   a 429, and every job answered 201 is in the database;
 * - submissions fold their project's delta rows once they pass 256, so the
 *   rows do not pile up without a cycle, and the count after the fold is
 *   the real count;
 * - the delta rows a fold deleted are not read again by every later
 *   submission until a VACUUM (migrations/0012): the room function's count
 *   touches few buffers after 20,000 rows were folded;
 * - concurrent submissions share their wake-ups of the loop: fewer
 *   tessera_sched notifications than submissions.
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/agentplay.h"
#include "tests/integration/harness.h"

static struct ts_it_server srv;

static int setup(void **state)
{
    (void)state;
    static const char *const args[] = {"--scheduler=false", NULL};
    return ts_ap_start(&srv, args);
}

static int teardown(void **state)
{
    (void)state;
    return ts_ap_stop();
}

static long long sql_int(const char *fmt, ...)
{
    char sql[512], buf[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof(sql), fmt, ap);
    va_end(ap);
    if (ts_it_sql(&srv, sql, buf, sizeof(buf)) != 0)
        fail_msg("sql failed: %s", sql);
    return atoll(buf);
}

static void make_project(const char *name, long long max_pending)
{
    char body[256];
    snprintf(body, sizeof(body),
             "{\"name\": \"%s\", \"department\": \"research\","
             " \"quota\": {\"max_pending\": %lld}}",
             name, max_pending);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects", body, 201);
}

/* Kept count (pending_jobs plus the deltas) and count(*) of pending jobs. */
static void counts(const char *project, long long *kept, long long *real)
{
    *kept = sql_int("SELECT p.pending_jobs + coalesce((SELECT sum(delta)"
                    " FROM project_pending_delta d WHERE d.project_id = p.id), 0)"
                    " FROM project p WHERE p.name = '%s'",
                    project);
    *real = sql_int("SELECT count(*) FROM job j JOIN project p ON p.id = j.project_id"
                    " WHERE p.name = '%s' AND j.state = 'pending'",
                    project);
}

/* ---- a far submission counts what a near one in flight made ------------------ */

struct one {
    long status;
};

static void *submit_one(void *arg)
{
    struct one *o = arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    o->status = ts_it_req(c, "POST", "/api/v1/jobs",
                          "{\"name\": \"late\", \"project\": \"edge\", \"command\": [\"true\"],"
                          " \"gpu\": {\"count\": 4}}",
                          NULL, NULL);
    ts_client_free(c);
    return NULL;
}

static void a_far_submission_waiting_for_a_near_one_counts_its_jobs(void **state)
{
    (void)state;
    long long conns = sql_int("SELECT current_setting('max_connections')::bigint");
    long long max = conns + 5;
    make_project("edge", max);
    /* a near submission in flight: the row alone, and jobs up to the limit */
    PGconn *pg = PQconnectdb(srv.conninfo);
    assert_int_equal(PQstatus(pg), CONNECTION_OK);
    ts_ap_pg_exec(pg, "BEGIN");
    ts_ap_pg_exec(pg, "SELECT 1 FROM project WHERE name = 'edge' FOR UPDATE");
    char sql[512];
    snprintf(sql, sizeof(sql),
             "INSERT INTO job (project_id, name, kind, priority, preemptible, command)"
             " SELECT p.id, 'n' || g, 'train', 50, true, '[\"true\"]'"
             " FROM project p, generate_series(1, %lld) g WHERE p.name = 'edge'",
             max);
    ts_ap_pg_exec(pg, sql);
    /* the far one: 0 pending as it starts, far from max_conns + 5 */
    pthread_t t;
    struct one o = {0};
    pthread_create(&t, NULL, submit_one, &o);
    double end = ts_ap_now_s() + 20;
    while (sql_int("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                   " AND query LIKE '%%tessera_submit_room%%'") +
                   sql_int("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                           " AND query LIKE '%%FROM project p WHERE p.name%%'") ==
               0 &&
           ts_ap_now_s() < end)
        usleep(20 * 1000);
    assert_true(ts_ap_now_s() < end); /* it waits for the row */
    ts_ap_pg_exec(pg, "COMMIT");
    PQfinish(pg);
    pthread_join(t, NULL);
    assert_int_equal(o.status, 429);
    long long kept, real;
    counts("edge", &kept, &real);
    assert_int_equal(real, max);
    assert_int_equal(kept, max);
}

/* ---- many clients across the far/near boundary ---------------------------------- */

#define RACERS 16
#define TRIES 15

struct racer {
    int id, taken, refused, other;
    char names[TRIES][32];
};

static void *race_run(void *arg)
{
    struct racer *r = arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    for (int i = 0; i < TRIES; i++) {
        char body[256], name[32];
        snprintf(name, sizeof(name), "r%d-%d", r->id, i);
        snprintf(body, sizeof(body),
                 "{\"name\": \"%s\", \"project\": \"race\", \"command\": [\"true\"],"
                 " \"gpu\": {\"count\": 4}}",
                 name);
        long st = ts_it_req(c, "POST", "/api/v1/jobs", body, NULL, NULL);
        if (st == 201)
            snprintf(r->names[r->taken++], sizeof(r->names[0]), "%s", name);
        else if (st == 429)
            r->refused++;
        else
            r->other++;
    }
    ts_client_free(c);
    return NULL;
}

static void racing_clients_take_exactly_max_pending_and_lose_none(void **state)
{
    (void)state;
    long long max = sql_int("SELECT current_setting('max_connections')::bigint") + 40;
    assert_true(max < RACERS * TRIES);
    make_project("race", max);
    pthread_t t[RACERS];
    static struct racer r[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (struct racer){.id = i};
        pthread_create(&t[i], NULL, race_run, &r[i]);
    }
    int taken = 0, refused = 0, other = 0;
    for (int i = 0; i < RACERS; i++) {
        pthread_join(t[i], NULL);
        taken += r[i].taken, refused += r[i].refused, other += r[i].other;
    }
    assert_int_equal(other, 0);
    assert_int_equal(taken, max);
    assert_int_equal(refused, RACERS * TRIES - max);
    for (int i = 0; i < RACERS; i++)
        for (int k = 0; k < r[i].taken; k++)
            assert_int_equal(sql_int("SELECT count(*) FROM job j JOIN project p"
                                     " ON p.id = j.project_id WHERE p.name = 'race'"
                                     " AND j.name = '%s' AND j.state = 'pending'",
                                     r[i].names[k]),
                             1);
    long long kept, real;
    counts("race", &kept, &real);
    assert_int_equal(real, max);
    assert_int_equal(kept, max);
}

/* ---- submissions fold their project's deltas ------------------------------------ */

struct folder {
    int id, taken;
};

static void *fold_run(void *arg)
{
    struct folder *f = arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    for (int i = 0; i < 200; i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"name\": \"f%d-%d\", \"project\": \"folded\", \"command\": [\"true\"],"
                 " \"gpu\": {\"count\": 4}}",
                 f->id, i);
        f->taken += ts_it_req(c, "POST", "/api/v1/jobs", body, NULL, NULL) == 201;
    }
    ts_client_free(c);
    return NULL;
}

static void submissions_fold_their_projects_deltas_without_a_cycle(void **state)
{
    (void)state;
    make_project("folded", 100000);
    pthread_t t[4];
    struct folder f[4];
    for (int i = 0; i < 4; i++) {
        f[i] = (struct folder){.id = i};
        pthread_create(&t[i], NULL, fold_run, &f[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(f[i].taken, 200);
    }
    /* a cancel is a delta too: the fold counts it with the rest */
    long long id = sql_int("SELECT min(j.id) FROM job j JOIN project p ON p.id = j.project_id"
                           " WHERE p.name = 'folded'");
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    ts_ap_call_ok(srv.admin, "DELETE", path, NULL, 200);
    long long rows = sql_int("SELECT count(*) FROM project_pending_delta d JOIN project p"
                             " ON p.id = d.project_id WHERE p.name = 'folded'");
    long long folded = sql_int("SELECT pending_jobs FROM project WHERE name = 'folded'");
    fprintf(stderr, "800 submissions, no cycle: %lld delta rows left, %lld folded\n", rows, folded);
    /* each fold leaves the rows of submissions in flight; no more than 256
     * and those pile up between two folds */
    assert_true(rows <= 256 + 4 + 1);
    assert_true(folded >= 800 - 256 - 4 - 1);
    long long kept, real;
    counts("folded", &kept, &real);
    assert_int_equal(real, 799);
    assert_int_equal(kept, 799);
}

/* ---- folded delta rows are read once ------------------------------------------- */

/* Shared buffers (hit and read) one call of the room function for project
 * `name` touches on pg, from EXPLAIN's top node (the function scan, which
 * counts its statements' reads). A session's first call also reads the
 * catalogs: compare later ones. */
static long long room_buffers(PGconn *pg, const char *name)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)"
             " SELECT * FROM tessera_submit_room('%s', NULL, false)",
             name);
    PGresult *res = PQexec(pg, sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(pg));
    static const char hit[] = "\"Shared Hit Blocks\": ", read[] = "\"Shared Read Blocks\": ";
    const char *out = PQgetvalue(res, 0, 0);
    const char *h = strstr(out, hit), *r = strstr(out, read);
    assert_non_null(h);
    assert_non_null(r);
    long long n = atoll(h + strlen(hit)) + atoll(r + strlen(read));
    PQclear(res);
    return n;
}

static void a_submission_does_not_read_again_the_delta_rows_folded_before_it(void **state)
{
    (void)state;
    make_project("queued", 100000);
    /* 20,000 jobs queued in one INSERT: 20,000 delta rows */
    assert_int_equal(sql_int("WITH j AS (INSERT INTO job (project_id, name, kind, priority,"
                             "   preemptible, command)"
                             " SELECT p.id, 'q' || g, 'train', 50, true, '[\"true\"]'"
                             " FROM project p, generate_series(1, 20000) g"
                             " WHERE p.name = 'queued' RETURNING 1) SELECT count(*) FROM j"),
                     20000);
    /* the next submission counts more than 256 of them and folds them */
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/jobs",
                  "{\"name\": \"after\", \"project\": \"queued\", \"command\": [\"true\"]}", 201);
    assert_int_equal(sql_int("SELECT count(*) FROM project_pending_delta d JOIN project p"
                             " ON p.id = d.project_id WHERE p.name = 'queued'"),
                     0);
    /* the rows folded are dead but not vacuumed: a bitmap scan fetched
     * them all at every submission (about 130 buffers here, each time); an
     * index scan marks their entries dead once and then skips them */
    PGconn *pg = PQconnectdb(srv.conninfo);
    assert_int_equal(PQstatus(pg), CONNECTION_OK);
    long long n[3];
    for (int i = 0; i < 3; i++)
        n[i] = room_buffers(pg, "queued");
    PQfinish(pg);
    fprintf(stderr, "room after 20,000 folded delta rows: %lld, %lld, %lld buffers\n", n[0], n[1],
            n[2]);
    assert_true(n[2] < 30);
    long long kept, real;
    counts("queued", &kept, &real);
    assert_int_equal(real, 20001);
    assert_int_equal(kept, 20001);
}

/* ---- concurrent submissions share their wake-ups ------------------------------- */

#define WAKERS 8
#define WAKES 50

static void *wake_run(void *arg)
{
    struct folder *f = arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    for (int i = 0; i < WAKES; i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"name\": \"w%d-%d\", \"project\": \"woken\", \"command\": [\"true\"]}", f->id,
                 i);
        f->taken += ts_it_req(c, "POST", "/api/v1/jobs", body, NULL, NULL) == 201;
    }
    ts_client_free(c);
    return NULL;
}

/* The loop is off, so every tessera_sched notification is a submission's
 * wake-up: one each before, fewer now that one sent after several commits
 * wakes the loop for all of them (test_sched_load's burst checks, with the
 * loop on, that every job of a concurrent burst is still decided). */
static void concurrent_submissions_share_their_wake_ups(void **state)
{
    (void)state;
    make_project("woken", 100000);
    PGconn *pg = PQconnectdb(srv.conninfo);
    assert_int_equal(PQstatus(pg), CONNECTION_OK);
    ts_ap_pg_exec(pg, "LISTEN tessera_sched");
    pthread_t t[WAKERS];
    struct folder f[WAKERS];
    for (int i = 0; i < WAKERS; i++) {
        f[i] = (struct folder){.id = i};
        pthread_create(&t[i], NULL, wake_run, &f[i]);
    }
    for (int i = 0; i < WAKERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(f[i].taken, WAKES);
    }
    /* every wake-up committed before its submission was answered */
    int n = 0;
    for (int quiet = 0; quiet < 5; quiet++) {
        usleep(100 * 1000);
        assert_int_equal(PQconsumeInput(pg), 1);
        for (PGnotify *note; (note = PQnotifies(pg)) != NULL; PQfreemem(note), quiet = 0)
            n += strcmp(note->relname, "tessera_sched") == 0;
    }
    PQfinish(pg);
    fprintf(stderr, "%d submissions from %d clients: %d wake-ups\n", WAKERS * WAKES, WAKERS, n);
    assert_true(n >= 1);
    assert_true(n < WAKERS * WAKES);
}

/*
 * The planner expects one row from tessera_submit_room (migrations/0015).
 * A submission's statement inserts and returns a job per row of it, with a
 * subplan per returned row: with the default 1,000 rows its estimate at
 * 1,000 nodes was about 250,000, past jit_above_cost, and those
 * submissions were compiled with JIT at each execution, 15 to 30 ms of CPU
 * each (the fleet bench, tests/bench/README.md). Main: rows=1000.
 */
static void the_planner_expects_one_row_from_a_submissions_room(void **state)
{
    (void)state;
    char plan[256];
    assert_int_equal(ts_it_sql(&srv,
                               "EXPLAIN SELECT * FROM tessera_submit_room('any', NULL, false)",
                               plan, sizeof(plan)),
                     0);
    print_message("%s\n", plan);
    const char *rows = strstr(plan, "rows=");
    assert_non_null(rows);
    assert_int_equal(atoi(rows + 5), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_far_submission_waiting_for_a_near_one_counts_its_jobs),
        cmocka_unit_test(racing_clients_take_exactly_max_pending_and_lose_none),
        cmocka_unit_test(submissions_fold_their_projects_deltas_without_a_cycle),
        cmocka_unit_test(a_submission_does_not_read_again_the_delta_rows_folded_before_it),
        cmocka_unit_test(concurrent_submissions_share_their_wake_ups),
        cmocka_unit_test(the_planner_expects_one_row_from_a_submissions_room),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
