/*
 * test_idle.c - the scheduler loop at rest: a real server and PostgreSQL,
 * the test playing 20 agents over HTTP. The loop runs a cycle only when
 * something it reads changed or the clock is due; otherwise it sweeps once
 * a second. Counted through /metrics (tessera_scheduler_cycles_total and
 * tessera_scheduler_sweeps_total), never timed: before, an idle server ran
 * hundreds of cycles a second (its own sweep woke the next one) and every
 * agent report woke one. Also the figures that tell a loaded control plane
 * from an idle one: the reports' lag and the database pool's waits. And
 * what a sweep reads at rest: not the running jobs.
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

#include <time.h>

#include "tests/integration/agentplay.h"

#define NODES 20

static struct ts_it_server srv;

static int setup(void **state)
{
    (void)state;
    /* a metric point a minute: the sampler's tick reads the running jobs
     * (what it counts), which the sweep case keeps out of its window */
    static const char *const args[] = {"--min-runtime", "3s", "--series-interval", "60s", NULL};
    return ts_ap_start(&srv, args);
}

static double cycles(void)
{
    return ts_ap_metric("tessera_scheduler_cycles_total");
}

/* Cycles and sweeps over secs of nothing happening. */
static void quiet(double secs, double *ncycles, double *nsweeps)
{
    ts_ap_settle(2);
    double c0 = cycles(), s0 = ts_ap_metric("tessera_scheduler_sweeps_total");
    usleep((useconds_t)(secs * 1e6));
    *ncycles = cycles() - c0;
    *nsweeps = ts_ap_metric("tessera_scheduler_sweeps_total") - s0;
    fprintf(stderr, "%.0f s: %.0f cycles, %.0f sweeps\n", secs, *ncycles, *nsweeps);
}

static void an_idle_server_runs_no_scheduler_cycles(void **state)
{
    (void)state;
    assert_true(ts_ap_metric("tessera_scheduler_leader") == 1);
    double c, s;
    quiet(10, &c, &s);
    assert_true(c <= 1);
    assert_true(s >= 5); /* the loop is alive: it sweeps once a second */
}

#define RUNNING 5000 /* jobs running on the node "sweep" */

/* Rows of the job table read by sequential scans so far (each backend
 * publishes its counts about once a second while it works). The agents'
 * reports read their node's jobs by index (job_node_idx): not counted. */
static long long job_rows_read(void)
{
    return ts_ap_sql_int("SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'job'");
}

/*
 * An idle server with RUNNING jobs running (jobs of no GPU, written in SQL
 * on a registered node): its sweeps, once a second, do not read them.
 * Before migration 0014 the sweep's search for jobs past their maximum
 * runtime read the whole job table (a sequential scan: most of its rows
 * are running) at every sweep and every cycle, though none of them has a
 * maximum runtime.
 */
static void a_sweep_does_not_read_the_running_jobs(void **state)
{
    (void)state;
    ts_ap_register_node("sweep", 1, "");
    assert_int_equal(ts_ap_sql_count("WITH j AS (INSERT INTO job (project_id, name, kind, priority,"
                                     "   preemptible, command, state, node_id, started_at,"
                                     "   attempt_started_at)"
                                     " SELECT p.id, 'r-' || g, 'train', 50, true, '[\"true\"]',"
                                     "   'running', n.id, now(), now()"
                                     " FROM project p, node n, generate_series(1, %d) g"
                                     " WHERE p.name = 'owner' AND n.name = 'sweep' RETURNING 1)"
                                     " SELECT count(*) FROM j",
                                     RUNNING),
                     RUNNING);
    ts_ap_sql_int("ANALYZE"); /* as autovacuum would */
    ts_ap_settle(2);
    /* The series tick, at each minute's start, reads the running jobs on
     * purpose, and an idle backend publishes what it read up to 10 s
     * later: the window starts 12 s past a minute and ends before the next */
    time_t now = time(NULL);
    int sec = (int)(now % 60);
    if (sec < 12 || sec > 50)
        usleep((unsigned)((sec < 12 ? 12 - sec : 72 - sec) * 1000000));
    long long r0 = job_rows_read();
    double s0 = ts_ap_metric("tessera_scheduler_sweeps_total");
    usleep(8000 * 1000);
    long long read = job_rows_read() - r0;
    double sweeps = ts_ap_metric("tessera_scheduler_sweeps_total") - s0;
    fprintf(stderr, "8 s: %.0f sweeps, %lld job rows read by sequential scans\n", sweeps, read);
    assert_true(sweeps >= 4);
    assert_true(read < RUNNING * sweeps / 2);
}

static void twenty_reporting_agents_wake_no_cycles(void **state)
{
    (void)state;
    char name[16];
    for (int i = 0; i < NODES; i++) {
        snprintf(name, sizeof(name), "n%02d", i);
        ts_ap_register_node(name, 1, "");
    }
    const char *route = "tessera_http_requests_total{route=\"/api/v1/nodes/{name}/report\","
                        "method=\"POST\",code=\"200\"}";
    usleep(1000 * 1000); /* the registrations' cycles */
    double r0 = ts_ap_metric(route), c, s;
    quiet(10, &c, &s);
    double reports = ts_ap_metric(route) - r0;
    fprintf(stderr, "%.0f reports\n", reports);
    assert_true(reports >= NODES * 10); /* every agent reported, several times a second */
    assert_true(c <= 1);
    json_t *nodes = ts_ap_get_json(srv.admin, "/api/v1/nodes", 200);
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(nodes, "nodes"), i, n)
        assert_string_equal(ts_it_str(n, "state"), "ready");
    assert_int_equal(json_array_size(json_object_get(nodes, "nodes")), NODES);
    json_decref(nodes);
}

/* A submission is decided at once; a job that waits for a victim's minimum
 * runtime (3 s) gets it when the clock says so, with nothing else
 * happening; then the loop is quiet again. */
static void a_change_wakes_a_cycle_and_the_clock_ends_a_protection(void **state)
{
    (void)state;
    long long b[NODES];
    char name[32];
    for (int i = 0; i < NODES; i++) {
        snprintf(name, sizeof(name), "borrow-%d", i);
        b[i] = ts_ap_submit("borrower", name, "\"gpu\": {\"count\": 1}");
    }
    for (int i = 0; i < NODES; i++)
        json_decref(ts_ap_wait_state(b[i], "scheduled", 5));
    double t0 = ts_ap_now_s();
    long long own = ts_ap_submit("owner", "own", "\"gpu\": {\"count\": 1}");
    /* every GPU is held by a job inside its minimum runtime: it waits */
    json_t *j = ts_ap_wait_state(own, "pending", 1);
    json_decref(j);
    /* the protection ends 3 s after the borrowers were bound: a victim is
     * stopped then, by the clock alone */
    int evicting = -1;
    while (evicting < 0 && ts_ap_now_s() < t0 + 10) {
        for (int i = 0; i < NODES && evicting < 0; i++) {
            j = ts_ap_job(b[i]);
            if (strcmp(ts_it_str(j, "state"), "evicting") == 0)
                evicting = i;
            json_decref(j);
        }
        usleep(100 * 1000);
    }
    fprintf(stderr, "a victim after %.1f s\n", ts_ap_now_s() - t0);
    if (evicting < 0)
        fail_msg("no victim was chosen");
    /* it exits: the owner's job is bound */
    char rep[128];
    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 1, \"state\": \"exited\", \"signal\": 15}", b[evicting]);
    json_t *node = ts_ap_job(b[evicting]);
    char nname[16];
    snprintf(nname, sizeof(nname), "%s", ts_it_str(node, "node"));
    json_decref(node);
    json_decref(ts_ap_report(nname, rep, "", 200));
    json_decref(ts_ap_wait_state(own, "scheduled", 5));
    json_decref(ts_ap_wait_state(b[evicting], "pending", 5));
    /* now nothing is due: the borrower's requeued job waits for a GPU no
     * clock frees (every holder is past its minimum runtime and above the
     * borrower's share) */
    usleep(1500 * 1000);
    double c, s;
    quiet(6, &c, &s);
    assert_true(c <= 1);
}

/* The value of a histogram's _count line for the desired-state route, 0
 * when absent. */
static double desired_count(const char *family)
{
    char name[256];
    snprintf(name, sizeof(name), "%s_count{route=\"/api/v1/nodes/{name}/desired\",method=\"GET\"}",
             family);
    struct ts_response r;
    assert_int_equal(ts_it_req(srv.admin, "GET", "/metrics", NULL, NULL, &r), 200);
    char want[300];
    snprintf(want, sizeof(want), "\n%s ", name);
    const char *at = strstr(r.body.data, want);
    double v = at ? strtod(at + strlen(want), NULL) : 0;
    ts_response_free(&r);
    return v;
}

/* Wait up to 5 s for desired_count(family) to be want: a request's time
 * is recorded when it completes, a moment after its answer was sent. */
static void wait_count(const char *family, double want)
{
    double got = -1;
    for (int i = 0; i < 50; i++) {
        got = desired_count(family);
        if (got == want)
            return;
        usleep(100 * 1000);
    }
    fail_msg("%s counts %g desired-state requests, not %g", family, got, want);
}

/* An agent's long-poll that waits is timed in a histogram of its own: the
 * request latency histogram keeps only requests answered at once. */
static void a_long_poll_that_waits_is_timed_apart(void **state)
{
    (void)state;
    const char *req = "tessera_http_request_duration_seconds";
    const char *held = "tessera_http_held_request_duration_seconds";
    double r0 = desired_count(req), h0 = desired_count(held);
    json_t *d = ts_ap_desired("n00", -1, NULL); /* at once */
    long long gen = ts_it_int(d, "generation");
    json_decref(d);
    wait_count(req, r0 + 1);
    wait_count(held, h0);
    json_decref(ts_ap_desired("n00", gen, "1s")); /* nothing changes: it waits 1 s */
    wait_count(held, h0 + 1);
    wait_count(req, r0 + 1);
    json_decref(ts_ap_desired("n00", gen - 1, "1s")); /* behind: answered at once */
    wait_count(req, r0 + 2);
    wait_count(held, h0 + 1);
}

/* The reports' lag: the stalest report among the nodes that are not lost.
 * A node that falls silent ages it; once it reports again, it is young. */
static void the_report_age_follows_the_silent_node(void **state)
{
    (void)state;
    assert_true(ts_ap_metric("tessera_report_nodes") == NODES);
    ts_ap_heartbeat("n05", false);
    usleep(3000 * 1000);
    double age = ts_ap_metric("tessera_report_age_max_seconds");
    fprintf(stderr, "report age after 3 s of silence: %.2f s\n", age);
    assert_true(age >= 2.9);
    ts_ap_heartbeat("n05", true);
    double end = ts_ap_now_s() + 20;
    while ((age = ts_ap_metric("tessera_report_age_max_seconds")) >= 2.9) {
        assert_true(ts_ap_now_s() < end);
        usleep(100 * 1000);
    }
}

/* The database pool's waits: ten clients at once through a pool of one
 * connection wait for it, and the figures add up. */
struct burst {
    pthread_t t;
    struct ts_it_server *s;
    int ok;
};

static void *burst_run(void *arg)
{
    struct burst *b = arg;
    struct ts_client *c = ts_it_client(b->s, TS_IT_ADMIN_TOKEN);
    for (int i = 0; i < 30; i++)
        b->ok += ts_it_req(c, "GET", "/api/v1/jobs", NULL, NULL, NULL) == 200;
    ts_client_free(c);
    return NULL;
}

static void the_database_pool_counts_its_waits(void **state)
{
    (void)state;
    struct ts_it_server one;
    const char *args[] = {"--db-pool", "1", NULL};
    assert_int_equal(ts_it_start(&one, NULL, args), 0);
    assert_true(ts_ap_metric_of(&one, "tessera_db_pool_connections") == 1);
    double a0 = ts_ap_metric_of(&one, "tessera_db_pool_acquires_total");
    double w0 = ts_ap_metric_of(&one, "tessera_db_pool_waits_total");
    struct burst b[10];
    for (int i = 0; i < 10; i++) {
        b[i] = (struct burst){.s = &one};
        pthread_create(&b[i].t, NULL, burst_run, &b[i]);
    }
    int ok = 0;
    for (int i = 0; i < 10; i++) {
        pthread_join(b[i].t, NULL);
        ok += b[i].ok;
    }
    assert_int_equal(ok, 300);
    double acquires = ts_ap_metric_of(&one, "tessera_db_pool_acquires_total") - a0;
    double waits = ts_ap_metric_of(&one, "tessera_db_pool_waits_total") - w0;
    fprintf(stderr, "300 requests: %.0f acquires, %.0f waits, %.3f s waited\n", acquires, waits,
            ts_ap_metric_of(&one, "tessera_db_pool_wait_seconds_total"));
    assert_true(acquires >= 300);
    assert_true(waits > 0 && waits <= acquires);
    assert_true(ts_ap_metric_of(&one, "tessera_db_pool_wait_seconds_total") > 0);
    assert_true(ts_ap_metric_of(&one, "tessera_db_pool_timeouts_total") == 0);
    assert_true(ts_ap_metric_of(&one, "tessera_db_pool_in_use") <= 1);
    assert_int_equal(ts_it_stop(&one), 0);
    ts_it_cleanup(&one);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_idle_server_runs_no_scheduler_cycles),
        cmocka_unit_test(twenty_reporting_agents_wake_no_cycles),
        cmocka_unit_test(a_change_wakes_a_cycle_and_the_clock_ends_a_protection),
        cmocka_unit_test(a_long_poll_that_waits_is_timed_apart),
        cmocka_unit_test(the_report_age_follows_the_silent_node),
        cmocka_unit_test(the_database_pool_counts_its_waits),
        cmocka_unit_test(a_sweep_does_not_read_the_running_jobs),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
