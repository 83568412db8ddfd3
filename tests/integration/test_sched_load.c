/*
 * test_sched_load.c - the scheduler loop under a stream of changes (issue
 * 15): a real server and PostgreSQL, the test submitting from several
 * clients. Every submission notifies the loop; a cycle reads every
 * unfinished job, so one cycle per change made the cost grow with the
 * square of the fleet. Cycles start at least --cycle-interval (200 ms by
 * default) apart, and the changes meanwhile share the next one. Counted
 * through /metrics (tessera_scheduler_cycles_total) against the time the
 * burst took, never timed itself. And a cycle reads only the job rows
 * written since the previous one (tessera_scheduler_job_rows_read_total),
 * yet sees every change: a job submitted or cancelled between two cycles,
 * a GPU deleted by a node registering again with fewer.
 *
 * One server for the program (agentplay.c), node n1 with 2 GPUs.
 */
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

#define CLIENTS 4
#define PER_CLIENT 60
#define INTERVAL_MS 200.0 /* --cycle-interval's default */

static struct ts_it_server srv;

static int setup(void **state)
{
    (void)state;
    if (ts_ap_start(&srv, NULL) != 0)
        return -1;
    ts_ap_register_node("n1", 2, "");
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"held\", \"department\": \"research\","
                  " \"quota\": {\"gpus\": 0, \"limit\": 0}}",
                  201);
    return 0;
}

static double cycles(void)
{
    return ts_ap_metric("tessera_scheduler_cycles_total");
}

struct submitter {
    int id, taken;
};

static void *submit_run(void *arg)
{
    struct submitter *s = arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    for (int i = 0; i < PER_CLIENT; i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"name\": \"s%d-%d\", \"project\": \"held\", \"command\": [\"true\"],"
                 " \"gpu\": {\"count\": 1}}",
                 s->id, i);
        struct ts_response r;
        s->taken += ts_it_req(c, "POST", "/api/v1/jobs", body, NULL, &r) == 201;
        ts_response_free(&r);
    }
    ts_client_free(c);
    return NULL;
}

static void a_burst_of_submissions_shares_cycles(void **state)
{
    (void)state;
    ts_ap_settle(1);
    double c0 = cycles(), t0 = ts_ap_now_s();
    pthread_t t[CLIENTS];
    struct submitter s[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        s[i] = (struct submitter){.id = i};
        pthread_create(&t[i], NULL, submit_run, &s[i]);
    }
    int taken = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(t[i], NULL);
        taken += s[i].taken;
    }
    double secs = ts_ap_now_s() - t0;
    ts_ap_settle(1); /* the last submissions' cycle */
    double n = cycles() - c0;
    fprintf(stderr, "%d submissions in %.2f s: %.0f cycles\n", taken, secs, n);
    assert_int_equal(taken, CLIENTS * PER_CLIENT);
    /* one at the first change, then at most one per interval, and the one
     * after the burst; 1 s of settling counts as much */
    assert_true(n >= 1);
    assert_true(n <= (secs + 1.0) * 1000.0 / INTERVAL_MS + 2);
    /* every job was decided: each has its reason and a distinct position */
    assert_int_equal(ts_ap_sql_int("SELECT count(DISTINCT queue_position) FROM job j"
                                   " JOIN project p ON p.id = j.project_id WHERE p.name = 'held'"
                                   " AND j.state = 'pending' AND j.reason_code = 'over_limit'"),
                     CLIENTS * PER_CLIENT);
}

/* A change after a quiet spell is decided by the next cycle at once, not
 * an interval later: the job is bound before the test's next request. */
static void a_change_after_a_quiet_spell_is_decided(void **state)
{
    (void)state;
    ts_ap_settle(1);
    double c0 = cycles();
    long long id = ts_ap_submit("owner", "alone", "\"gpu\": {\"count\": 1}");
    json_decref(ts_ap_wait_state(id, "scheduled", 5));
    assert_true(cycles() - c0 >= 1);
}

/* The queue position of the held job named name. */
static long long held_position(const char *name)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT coalesce(max(j.queue_position), -1) FROM job j JOIN project p"
             " ON p.id = j.project_id WHERE p.name = 'held' AND j.name = '%s'",
             name);
    return ts_ap_sql_int(sql);
}

/* After the burst, 240 jobs wait in "held". One more submission wakes a
 * cycle that reads that job's row and not the 240 others (each cycle read
 * every unfinished job before: 240 at least); it is decided, last in the
 * queue. Then the first job is cancelled: the next cycle drops it, and the
 * one behind it moves up. */
static void a_cycle_reads_only_the_jobs_written_since_the_last(void **state)
{
    (void)state;
    ts_ap_settle(1);
    const char *rows = "tessera_scheduler_job_rows_read_total";
    double c0 = cycles(), r0 = ts_ap_metric(rows);
    long long id = ts_ap_submit("held", "late", "\"gpu\": {\"count\": 1}");
    ts_ap_settle(1);
    double n = cycles() - c0, read = ts_ap_metric(rows) - r0;
    fprintf(stderr, "one submission: %.0f cycles read %.0f job rows\n", n, read);
    assert_true(n >= 1);
    assert_true(read >= 1);
    assert_true(read <= 10 * n);
    assert_int_equal(held_position("late"), CLIENTS * PER_CLIENT + 1);
    json_t *j = ts_ap_job(id);
    assert_string_equal(ts_it_str(j, "state"), "pending");
    json_decref(j);

    long long first = ts_ap_sql_int("SELECT j.id FROM job j JOIN project p ON p.id = j.project_id"
                                    " WHERE p.name = 'held' AND j.queue_position = 1");
    long long second = ts_ap_sql_int("SELECT j.id FROM job j JOIN project p ON p.id = j.project_id"
                                     " WHERE p.name = 'held' AND j.queue_position = 2");
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", first);
    ts_ap_settle(1);
    c0 = cycles(), r0 = ts_ap_metric(rows);
    ts_ap_call_ok(srv.admin, "DELETE", path, NULL, 200);
    double t0 = ts_ap_now_s();
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT queue_position FROM job WHERE id = %lld", second);
    while (ts_ap_sql_int(sql) != 1 && ts_ap_now_s() < t0 + 10)
        usleep(100 * 1000);
    assert_int_equal(ts_ap_sql_int(sql), 1);
    ts_ap_settle(1);
    /* the cancelled row; the positions behind it, rewritten by that cycle,
     * are read again by the next one if another runs */
    fprintf(stderr, "one cancel: %.0f cycles read %.0f job rows\n", cycles() - c0,
            ts_ap_metric(rows) - r0);
    assert_true(ts_ap_metric(rows) - r0 >= 1);
    assert_int_equal(held_position("late"), CLIENTS * PER_CLIENT);
}

/* Node "shrink" registers 2 GPUs, a cycle reads them, then it registers
 * again with 1: the GPU deleted is never read again as a changed row, yet
 * no cycle may place a job on it (its job_gpu row would refer to no GPU:
 * the cycle's write fails, and with it every bind, cycle after cycle).
 * Two jobs for that node: one is bound, the other waits. */
static void a_gpu_deleted_between_cycles_is_not_placed_on(void **state)
{
    (void)state;
    const char *labels = "\"labels\": {\"pool\": \"shrink\"}";
    ts_ap_register_node("shrink", 2, labels);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"wide\", \"department\": \"research\"}", 201);
    ts_ap_settle(1);
    ts_ap_register_node("shrink", 1, labels);
    assert_int_equal(ts_ap_sql_int("SELECT count(*) FROM gpu g JOIN node n ON n.id = g.node_id"
                                   " WHERE n.name = 'shrink'"),
                     1);
    ts_ap_settle(1);
    const char *extra = "\"gpu\": {\"count\": 1}, \"node_selector\": {\"pool\": \"shrink\"}";
    long long a = ts_ap_submit("wide", "on-shrink-a", extra);
    long long b = ts_ap_submit("wide", "on-shrink-b", extra);
    double t0 = ts_ap_now_s();
    int bound = 0;
    while (bound == 0 && ts_ap_now_s() < t0 + 10) {
        usleep(100 * 1000);
        bound = (int)ts_ap_sql_int("SELECT count(*) FROM job WHERE name LIKE 'on-shrink-%'"
                                   " AND state = 'scheduled'");
    }
    ts_ap_settle(1);
    char sql[160];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM job WHERE id IN (%lld, %lld) AND state = 'scheduled'", a, b);
    assert_int_equal(ts_ap_sql_int(sql), 1);
    /* the other was decided: a cycle gave it its reason */
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM job WHERE id IN (%lld, %lld) AND state = 'pending'"
             " AND reason_code <> 'not_yet_scheduled'",
             a, b);
    assert_int_equal(ts_ap_sql_int(sql), 1);
    assert_int_equal(ts_ap_sql_int("SELECT count(*) FROM job_gpu jg JOIN job j ON j.id = jg.job_id"
                                   " WHERE j.name LIKE 'on-shrink-%'"),
                     1);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_burst_of_submissions_shares_cycles),
        cmocka_unit_test(a_change_after_a_quiet_spell_is_decided),
        cmocka_unit_test(a_cycle_reads_only_the_jobs_written_since_the_last),
        cmocka_unit_test(a_gpu_deleted_between_cycles_is_not_placed_on),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
