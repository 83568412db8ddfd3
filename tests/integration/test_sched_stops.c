/*
 * test_sched_stops.c - a scheduler cycle's stops, written in one statement
 * (issue 15, as its binds, test_sched_binds.c): a real server and
 * PostgreSQL, a node and jobs played over HTTP (agentplay.c). A cycle that
 * evicts many jobs writes every one of them as a stop one statement each
 * did (state, stop reason, one event each, in one transaction); and a job
 * that ends between the cycle's snapshot and its write (here its exit is
 * recorded while the write waits for its row) is left out, the others
 * stopped by that same cycle, not rolled back and decided again.
 *
 * One node of 8 GPUs, filled by 8 one-GPU jobs of a project without quota;
 * a project with a quota of 8 then asks for all 8 GPUs at once: one cycle
 * evicts the 8.
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

#define LENT 8 /* one-GPU jobs that borrow the node, then are evicted */
#define STOPS "tessera_scheduler_decisions_total{action=\"stop\"}"

static struct ts_it_server srv;

static int setup(void **state)
{
    (void)state;
    if (ts_ap_start(&srv, NULL) != 0)
        return -1;
    ts_ap_register_node("s1", LENT, "");
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"lent\", \"department\": \"research\", \"quota\": {\"gpus\": 0}}",
                  201);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"claim\", \"department\": \"research\", \"quota\": {\"gpus\": 8}}",
                  201);
    return 0;
}

/*
 * The 8 lent jobs run on s1; the claim's job of 8 GPUs evicts all of them
 * in one cycle. The test holds one of their rows, so the cycle's write
 * waits for it; meanwhile that job exits 0 (recorded as its agent's report
 * would: succeeded, no GPUs) and the test commits. The write finds it
 * ended: it stops the other 7 and leaves that one out. Their events were
 * written by the transaction that waited (its start time is before the
 * exit's commit), each once, in one transaction: not rolled back and
 * written again by a later cycle, as when one refused stop undid the
 * whole cycle.
 */
static void a_stop_refused_by_a_job_that_ended_leaves_the_others_stopped(void **state)
{
    (void)state;
    long long ids[LENT];
    char rep[2048];
    size_t len = 0;
    for (int i = 0; i < LENT; i++) {
        char name[32];
        snprintf(name, sizeof(name), "l%d", i);
        ids[i] = ts_ap_submit("lent", name, "\"gpu\": {\"count\": 1}");
    }
    for (int i = 0; i < LENT; i++) {
        json_decref(ts_ap_wait_state(ids[i], "scheduled", 30));
        len += (size_t)snprintf(rep + len, sizeof(rep) - len,
                                "%s{\"id\": %lld, \"attempt\": 1, \"state\": \"running\"}",
                                i ? ", " : "", ids[i]);
    }
    json_decref(ts_ap_report("s1", rep, "", 200));
    for (int i = 0; i < LENT; i++)
        json_decref(ts_ap_wait_state(ids[i], "running", 10));
    ts_ap_settle(1);

    long long gone = ids[LENT / 2];
    double stops0 = ts_ap_metric(STOPS);
    PGconn *held = ts_ap_hold_row(gone);
    long long claim = ts_ap_submit("claim", "all", "\"gpu\": {\"count\": 8}");
    double end = ts_ap_now_s() + 30;
    while (ts_ap_sql_count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                           " AND query LIKE '%%UPDATE job%%''evicting''%%'") < 1) {
        if (ts_ap_now_s() > end)
            fail_msg("the cycle's stops never waited for job %lld", gone);
        ts_sleep_ms(50);
    }
    char q[1024];
    snprintf(q, sizeof(q),
             "UPDATE job SET state = 'succeeded', exit_code = 0, finished_at = now(), pid = NULL,"
             " allocated_gpus = 0, updated_at = now() WHERE id = %lld;"
             "INSERT INTO job_event (job_id, type, message) VALUES (%lld, 'succeeded',"
             " 'exited 0 on node s1 (the test)')",
             gone, gone);
    ts_ap_pg_exec(held, q);
    PGresult *r = PQexec(held, "SELECT floor(extract(epoch FROM clock_timestamp()) * 1e6)::bigint");
    long long ended_us = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    ts_ap_pg_exec(held, "COMMIT");
    PQfinish(held);
    ts_ap_settle(1);

    const char *lent = "(SELECT j.id FROM job j JOIN project p ON p.id = j.project_id"
                       " WHERE p.name = 'lent')";
    /* the 7 others stop, as an eviction: state, reason, node and GPUs kept
     * until their agent says they stopped */
    assert_int_equal(
        ts_ap_sql_count("SELECT count(*) FROM job WHERE id IN %s AND state = 'evicting'"
                        " AND stop_reason = 'evicted' AND node_id IS NOT NULL"
                        " AND allocated_gpus = 1",
                        lent),
        LENT - 1);
    assert_int_equal(ts_ap_sql_count("SELECT count(*) FROM job_gpu WHERE job_id IN %s", lent),
                     LENT - 1);
    /* one event each, all by the cycle that read them before the exit */
    assert_int_equal(ts_ap_sql_count("SELECT count(*) FROM job_event WHERE job_id IN %s"
                                     " AND type = 'evicting'",
                                     lent),
                     LENT - 1);
    assert_int_equal(
        ts_ap_sql_count("SELECT count(DISTINCT job_id) FROM job_event WHERE job_id IN %s"
                        " AND type = 'evicting'"
                        " AND floor(extract(epoch FROM at) * 1e6)::bigint < %lld",
                        lent, ended_us),
        LENT - 1);
    assert_int_equal(ts_ap_sql_count("SELECT count(DISTINCT at) FROM job_event WHERE job_id IN %s"
                                     " AND type = 'evicting'",
                                     lent),
                     1);
    /* the one that ended stays ended, with no stop written */
    assert_int_equal(
        ts_ap_sql_count("SELECT count(*) FROM job WHERE id = %lld AND state = 'succeeded'"
                        " AND stop_reason IS NULL",
                        gone),
        1);
    assert_int_equal(ts_ap_sql_count("SELECT count(*) FROM job_event WHERE job_id = %lld"
                                     " AND type = 'evicting'",
                                     gone),
                     0);
    assert_true(ts_ap_metric(STOPS) - stops0 == LENT - 1);
    /* the claim waits for the room its stops free */
    json_t *c = ts_ap_job(claim);
    assert_string_equal(ts_it_str(c, "state"), "pending");
    json_decref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_stop_refused_by_a_job_that_ended_leaves_the_others_stopped),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
