/*
 * test_sched_binds.c - a scheduler cycle's binds, written in one statement
 * (issue 15): a real server and PostgreSQL, nodes and jobs played over
 * HTTP (agentplay.c). A cycle that binds many jobs writes every one of
 * them as a bind one statement each did (state, GPU rows, event, attempt);
 * and a job that moves between the cycle's snapshot and its write (here
 * cancelled while the write waits for its row) is left out, the others
 * bound by that same cycle, not rolled back and decided again.
 *
 * One server for the program; jobs wait behind their project's limit of 0
 * until the test lifts it, so that one cycle decides them all.
 */
#include <libpq-fe.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/clock.h"
#include "tests/integration/agentplay.h"
#include "tests/integration/harness.h"

#define MANY 16 /* jobs bound by one cycle: two nodes of 8 GPUs, a third for RACED */
#define RACED 6 /* jobs of the cycle whose write meets a cancel */
#define BINDS "tessera_scheduler_decisions_total{action=\"bind\"}"

static struct ts_it_server srv;

static int setup(void **state)
{
    (void)state;
    if (ts_ap_start(&srv, NULL) != 0)
        return -1;
    ts_ap_register_node("b1", 8, "");
    ts_ap_register_node("b2", 8, "");
    ts_ap_register_node("b3", 8, "");
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"many\", \"department\": \"research\","
                  " \"quota\": {\"gpus\": 0, \"limit\": 0}}",
                  201);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"raced\", \"department\": \"research\","
                  " \"quota\": {\"gpus\": 0, \"limit\": 0}}",
                  201);
    return 0;
}

/* Lift project's limit to gpus: one change, one cycle for its jobs. */
static void lift_limit(const char *project, int gpus)
{
    char path[128], body[128];
    snprintf(path, sizeof(path), "/api/v1/projects/%s/quota", project);
    snprintf(body, sizeof(body), "{\"gpus\": 0, \"limit\": %d}", gpus);
    const char *ifm[] = {"If-Match: *", NULL};
    assert_int_equal(ts_it_req(srv.admin, "PUT", path, body, ifm, NULL), 200);
}

/* Wait up to secs until the project has n jobs scheduled. */
static void wait_scheduled(const char *project, long long n, double secs)
{
    double end = ts_ap_now_s() + secs;
    long long got = -1;
    while (ts_ap_now_s() < end) {
        got = ts_ap_sql_count("SELECT count(*) FROM job j JOIN project p ON p.id = j.project_id"
                              " WHERE p.name = '%s' AND j.state = 'scheduled'",
                              project);
        if (got >= n)
            return;
        ts_sleep_ms(100);
    }
    fail_msg("%lld of %lld jobs of %s scheduled after %.0f s", got, n, project, secs);
}

/* Every scheduled job of project is written as a bind: on a node, one
 * attempt, its GPU rows (a whole GPU each, no GPU given twice), one
 * "scheduled on node ..." event and its attempt's row. */
static void assert_bound(const char *project, long long n)
{
    const char *jobs = "(SELECT j.id FROM job j JOIN project p ON p.id = j.project_id"
                       " WHERE p.name = '%s' AND j.state = 'scheduled')";
    char in[512];
    snprintf(in, sizeof(in), jobs, project);
    assert_int_equal(
        ts_ap_sql_count("SELECT count(*) FROM job WHERE id IN %s AND node_id IS NOT NULL"
                        " AND attempt = 1 AND allocated_gpus = 1 AND reason_code IS NULL"
                        " AND queue_position = 0 AND checkpoint_dir IS NOT NULL",
                        in),
        n);
    assert_int_equal(ts_ap_sql_count("SELECT count(*) FROM job_gpu WHERE job_id IN %s", in), n);
    assert_int_equal(
        ts_ap_sql_count("SELECT count(DISTINCT gpu_id) FROM job_gpu WHERE job_id IN %s", in), n);
    assert_int_equal(
        ts_ap_sql_count("SELECT count(*) FROM job_event WHERE job_id IN %s"
                        " AND type = 'scheduled' AND message LIKE 'scheduled on node b_ GPU %%'",
                        in),
        n);
    assert_int_equal(
        ts_ap_sql_count("SELECT count(*) FROM job_attempt a JOIN job j ON j.id = a.job_id"
                        " WHERE j.id IN %s AND a.attempt = 1 AND a.node_id = j.node_id",
                        in),
        n);
}

static void a_cycle_binding_many_jobs_writes_every_bind(void **state)
{
    (void)state;
    for (int i = 0; i < MANY; i++) {
        char name[32];
        snprintf(name, sizeof(name), "m%d", i);
        ts_ap_submit("many", name, "\"gpu\": {\"count\": 1}");
    }
    ts_ap_settle(1);
    assert_int_equal(
        ts_ap_sql_count("SELECT count(*) FROM job j JOIN project p ON p.id = j.project_id"
                        " WHERE p.name = 'many' AND j.state = 'pending'"),
        MANY);
    double binds0 = ts_ap_metric(BINDS);
    lift_limit("many", MANY);
    wait_scheduled("many", MANY, 30);
    assert_bound("many", MANY);
    /* one cycle, one transaction: every event has its start time */
    assert_int_equal(ts_ap_sql_count("SELECT count(DISTINCT e.at) FROM job_event e JOIN job j"
                                     " ON j.id = e.job_id JOIN project p ON p.id = j.project_id"
                                     " WHERE p.name = 'many' AND e.type = 'scheduled'"),
                     1);
    assert_true(ts_ap_metric(BINDS) - binds0 == MANY);
}

/*
 * The cycle that lifts "raced"'s limit reads its jobs pending, then its
 * write waits for one job's row, which the test holds; the test cancels
 * that job (as a cancel of a pending job does) and commits. The cycle's
 * write finds the job cancelled: it binds the others and leaves that one
 * out. Their events were written by the transaction that waited (its start
 * time is before the cancel's commit): not rolled back and written again by
 * a later cycle, as when one refused bind undid the whole cycle.
 */
static void a_bind_refused_by_a_cancel_leaves_the_others_bound(void **state)
{
    (void)state;
    long long ids[RACED];
    for (int i = 0; i < RACED; i++) {
        char name[32];
        snprintf(name, sizeof(name), "r%d", i);
        ids[i] = ts_ap_submit("raced", name, "\"gpu\": {\"count\": 1}");
    }
    ts_ap_settle(1);
    long long gone = ids[RACED / 2];
    double binds0 = ts_ap_metric(BINDS);
    PGconn *held = ts_ap_hold_row(gone);
    lift_limit("raced", RACED);
    double end = ts_ap_now_s() + 30;
    while (ts_ap_sql_count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                           " AND query LIKE '%%UPDATE job j SET%%'") < 1) {
        if (ts_ap_now_s() > end)
            fail_msg("the cycle's write never waited for job %lld", gone);
        ts_sleep_ms(50);
    }
    char q[1024];
    snprintf(q, sizeof(q),
             "UPDATE job SET state = 'cancelled', finished_at = now(), reason_code = NULL,"
             " reason_message = NULL, queue_position = 0, updated_at = now() WHERE id = %lld;"
             "INSERT INTO job_event (job_id, type, message) VALUES (%lld, 'cancelled',"
             " 'cancelled by the test')",
             gone, gone);
    ts_ap_pg_exec(held, q);
    PGresult *r = PQexec(held, "SELECT floor(extract(epoch FROM clock_timestamp()) * 1e6)::bigint");
    long long cancel_us = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    ts_ap_pg_exec(held, "COMMIT");
    PQfinish(held);

    wait_scheduled("raced", RACED - 1, 30);
    assert_bound("raced", RACED - 1);
    assert_int_equal(
        ts_ap_sql_count("SELECT count(*) FROM job WHERE id = %lld AND state = 'cancelled'"
                        " AND node_id IS NULL",
                        gone),
        1);
    assert_int_equal(ts_ap_sql_count("SELECT count(*) FROM job_gpu WHERE job_id = %lld", gone), 0);
    assert_int_equal(ts_ap_sql_count("SELECT count(*) FROM job_event WHERE job_id = %lld"
                                     " AND type = 'scheduled'",
                                     gone),
                     0);
    /* written by the cycle that read them before the cancel */
    assert_int_equal(
        ts_ap_sql_count("SELECT count(*) FROM job_event e JOIN job j ON j.id = e.job_id"
                        " JOIN project p ON p.id = j.project_id WHERE p.name = 'raced'"
                        " AND e.type = 'scheduled'"
                        " AND floor(extract(epoch FROM e.at) * 1e6)::bigint < %lld",
                        cancel_us),
        RACED - 1);
    assert_true(ts_ap_metric(BINDS) - binds0 == RACED - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_cycle_binding_many_jobs_writes_every_bind),
        cmocka_unit_test(a_bind_refused_by_a_cancel_leaves_the_others_bound),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
