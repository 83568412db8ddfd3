/*
 * test_sched_load.c - the scheduler loop under a stream of changes (issue
 * 15): a real server and PostgreSQL, the test submitting from several
 * clients. Every submission notifies the loop; a cycle reads every
 * unfinished job, so one cycle per change made the cost grow with the
 * square of the fleet. Cycles start at least --cycle-interval (200 ms by
 * default) apart, and the changes meanwhile share the next one. Counted
 * through /metrics (tessera_scheduler_cycles_total) against the time the
 * burst took, never timed itself.
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
    struct ts_response r;
    assert_int_equal(ts_it_req(srv.admin, "GET", "/metrics", NULL, NULL, &r), 200);
    const char *at = strstr(r.body.data, "\ntessera_scheduler_cycles_total ");
    if (at == NULL)
        fail_msg("/metrics has no tessera_scheduler_cycles_total");
    double v = strtod(at + strlen("\ntessera_scheduler_cycles_total "), NULL);
    ts_response_free(&r);
    return v;
}

/* Wait (up to 30 s) until no cycle ran for 1 s. */
static void settle(void)
{
    for (int i = 0; i < 30; i++) {
        double c = cycles();
        usleep(1000 * 1000);
        if (cycles() == c)
            return;
    }
    fail_msg("the scheduler loop kept cycling for 30 s with nothing happening");
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
    settle();
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
    settle(); /* the last submissions' cycle */
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
    settle();
    double c0 = cycles();
    long long id = ts_ap_submit("owner", "alone", "\"gpu\": {\"count\": 1}");
    json_decref(ts_ap_wait_state(id, "scheduled", 5));
    assert_true(cycles() - c0 >= 1);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_burst_of_submissions_shares_cycles),
        cmocka_unit_test(a_change_after_a_quiet_spell_is_decided),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
