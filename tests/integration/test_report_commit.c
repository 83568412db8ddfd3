/*
 * test_report_commit.c - which reports wait for their WAL flush (issue 15):
 * a real server and its embedded PostgreSQL (fsync and synchronous_commit
 * on), a node and its jobs played over HTTP (agentplay.c). A report that
 * only brings samples and the heartbeat (what the next report, 5 s later,
 * says again) commits without waiting for its flush; a report that moves a
 * job's state still waits, as before. The flushes are counted in
 * PostgreSQL's pg_stat_wal (wal_sync: every fsync of the WAL, by a backend
 * at its commit or by the WAL writer), which backends publish within about
 * 10 s of going idle. The WAL writer is set to flush at most every 10 s
 * (wal_writer_delay), so that what the reports wrote without a flush is
 * not flushed report by report on a slow machine.
 *
 * A report that moves a job commits without PostgreSQL's notify lock: its
 * triggers' wake-ups go after its commit (migrations/0013). A commit is held
 * at its flush by asking for a synchronous standby that never comes
 * (synchronous_standby_names): the report's backend waits there (SyncRep)
 * while the test reads pg_locks, then the standby is no longer asked for
 * and the node's long-poll must wake.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/client/client.h"
#include "api/clock.h"
#include "tests/integration/agentplay.h"
#include "tests/integration/harness.h"

#define JOBS 10  /* one-GPU jobs on the node */
#define QUIET 40 /* reports of samples only */
#define WAL_SYNC "SELECT wal_sync FROM pg_stat_wal"

static struct ts_it_server srv;
static long long ids[JOBS];

static int setup(void **state)
{
    (void)state;
    if (ts_ap_start(&srv, NULL) != 0)
        return -1;
    ts_ap_sql_int("ALTER SYSTEM SET wal_writer_delay = '10s'");
    ts_ap_sql_int("SELECT pg_reload_conf()::int");
    ts_ap_register_node("w1", JOBS, "");
    return 0;
}

/* The jobs array of a report: job i reported running for i < n. */
static void running_jobs(char *buf, size_t len, int n, double util)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(buf + k, len - k,
                              "%s{\"id\": %lld, \"attempt\": 1, \"state\": \"running\","
                              " \"gpu_utilization\": %.2f, \"gpu_memory_used_bytes\": 1024}",
                              i ? ", " : "", ids[i], util);
}

/* Wait until the flushes counted since base reach at least want, or 15 s
 * pass; the count. */
static long long flushes_since(long long base, long long want)
{
    double end = ts_ap_now_s() + 15;
    long long got = ts_ap_sql_int(WAL_SYNC) - base;
    while (got < want && ts_ap_now_s() < end) {
        ts_sleep_ms(200);
        got = ts_ap_sql_int(WAL_SYNC) - base;
    }
    return got;
}

/* Each of the JOBS reports moves one job from scheduled to running: each
 * commit waits for its flush (a few may be covered by the WAL writer's). */
static void a_report_that_moves_a_job_waits_for_its_flush(void **state)
{
    (void)state;
    for (int i = 0; i < JOBS; i++) {
        char name[32];
        snprintf(name, sizeof(name), "w%d", i);
        ids[i] = ts_ap_submit("borrower", name, "\"gpu\": {\"count\": 1}");
    }
    for (int i = 0; i < JOBS; i++)
        json_decref(ts_ap_wait_state(ids[i], "scheduled", 30));
    ts_ap_settle(1);
    long long base = ts_ap_sql_int(WAL_SYNC);
    char rep[4096];
    for (int i = 1; i <= JOBS; i++) {
        running_jobs(rep, sizeof(rep), i, 0.5);
        json_decref(ts_ap_report("w1", rep, "", 200));
    }
    for (int i = 0; i < JOBS; i++)
        json_decref(ts_ap_wait_state(ids[i], "running", 1));
    long long got = flushes_since(base, JOBS);
    print_message("%lld WAL flushes for %d reports that moved a job\n", got, JOBS);
    if (got < JOBS * 8 / 10)
        fail_msg("%lld WAL flushes for %d reports that moved a job", got, JOBS);
}

/*
 * QUIET reports of the same running jobs with new samples: stored as
 * before (the last report's utilization is every job's), and their
 * commits do not wait for a flush each: what they wrote reaches the disk
 * with the WAL writer's next flush. Before, each waited for its own: QUIET
 * flushes at least.
 */
static void reports_of_samples_only_do_not_wait_for_their_flush(void **state)
{
    (void)state;
    ts_ap_settle(1);
    ts_sleep_ms(11000); /* what the last test's backends had not published yet */
    long long base = ts_ap_sql_int(WAL_SYNC);
    char rep[4096];
    for (int i = 0; i < QUIET; i++) {
        running_jobs(rep, sizeof(rep), JOBS, (double)(i % 10) / 10.0 + 0.05);
        json_decref(ts_ap_report("w1", rep, "", 200));
    }
    long long got = flushes_since(base, QUIET); /* waits 15 s unless they reach QUIET */
    /* the WAL writer's, the series sampler's and the scheduler's flushes
     * meanwhile are far fewer */
    print_message("%lld WAL flushes for %d reports of samples only\n", got, QUIET);
    if (got >= QUIET / 2)
        fail_msg("%lld WAL flushes for %d reports of samples only", got, QUIET);
    char q[256];
    snprintf(q, sizeof(q),
             "SELECT count(*) FROM job WHERE id BETWEEN %lld AND %lld AND state = 'running'"
             " AND gpu_utilization = 0.95",
             ids[0], ids[JOBS - 1]);
    assert_int_equal(ts_ap_sql_int(q), JOBS);
}

/* The node's long-poll from a thread: the desired state at generation gen,
 * waited for up to 30 s; when it answered and its generation. */
struct poll_arg {
    struct ts_client *c;
    char path[128];
    const char *body; /* a report's body; NULL: a long-poll */
    long status;
    long long generation;
    double answered_s;
};

static void *request_thread(void *arg)
{
    struct poll_arg *p = arg;
    struct ts_response r = {0};
    p->status = ts_it_req(p->c, p->body ? "POST" : "GET", p->path, p->body, NULL, &r);
    p->generation = r.json ? ts_it_int(r.json, "generation") : -1;
    p->answered_s = ts_ap_now_s();
    ts_response_free(&r);
    return NULL;
}

/* The report's backend (whose transaction wrote job id's row) waiting at
 * its commit for the standby: 1 once it is there. */
static long long report_waits_at_its_flush(long long id)
{
    return ts_ap_sql_count("SELECT count(*) FROM pg_stat_activity a, job j WHERE j.id = %lld"
                           " AND a.wait_event = 'SyncRep' AND a.backend_xid = j.xmax",
                           id);
}

/*
 * A report that starts a job: while its commit waits for its flush, no
 * session holds the notify lock (locktype object, pg_database, object 0);
 * on main its own transaction did, so every other notifying commit queued
 * behind its flush. Once it commits, the node's long-poll, waiting since
 * before the report, wakes at once (it waits 30 s without a NOTIFY).
 */
static void a_report_that_moves_a_job_commits_without_the_notify_lock(void **state)
{
    (void)state;
    ts_ap_register_node("n1", 1, "");
    long long id = ts_ap_submit("borrower", "n1-job", "\"gpu\": {\"count\": 1}");
    json_decref(ts_ap_wait_state(id, "scheduled", 30));
    ts_ap_settle(1);
    json_t *d = ts_ap_desired("n1", -1, NULL);
    long long gen = ts_it_int(d, "generation");
    json_decref(d);
    struct poll_arg lp = {.c = ts_it_client(&srv, ts_ap_agent_token())};
    struct poll_arg rp = {.c = ts_it_client(&srv, ts_ap_agent_token())};
    snprintf(lp.path, sizeof(lp.path), "/api/v1/nodes/n1/desired?generation=%lld&wait=30s", gen);
    snprintf(rp.path, sizeof(rp.path), "/api/v1/nodes/n1/report");
    char body[256];
    snprintf(body, sizeof(body),
             "{\"jobs\": [{\"id\": %lld, \"attempt\": 1, \"state\": \"running\"}]}", id);
    rp.body = body;
    pthread_t lt, rt;
    pthread_create(&lt, NULL, request_thread, &lp);
    ts_sleep_ms(500); /* the long-poll waits */
    ts_ap_sql_int("ALTER SYSTEM SET synchronous_standby_names = 'tessera_test_nobody'");
    ts_ap_sql_int("SELECT pg_reload_conf()::int");
    ts_sleep_ms(500); /* the checkpointer has read it */
    pthread_create(&rt, NULL, request_thread, &rp);
    double end = ts_ap_now_s() + 20;
    long long waits = report_waits_at_its_flush(id);
    while (waits != 1 && ts_ap_now_s() < end) {
        ts_sleep_ms(100);
        waits = report_waits_at_its_flush(id);
    }
    long long holders = ts_ap_sql_int("SELECT count(*) FROM pg_locks WHERE locktype = 'object'"
                                      " AND classid = 'pg_database'::regclass AND objid = 0"
                                      " AND granted");
    ts_ap_sql_int("ALTER SYSTEM RESET synchronous_standby_names");
    ts_ap_sql_int("SELECT pg_reload_conf()::int");
    double released = ts_ap_now_s();
    pthread_join(rt, NULL);
    pthread_join(lt, NULL);
    ts_client_free(lp.c);
    ts_client_free(rp.c);
    print_message("report at its flush: %lld; notify lock holders then: %lld; long-poll woke "
                  "%.2f s after the release, generation %lld -> %lld\n",
                  waits, holders, lp.answered_s - released, gen, lp.generation);
    assert_int_equal(waits, 1);
    assert_int_equal(holders, 0);
    assert_int_equal(rp.status, 200);
    assert_int_equal(lp.status, 200);
    assert_true(lp.generation > gen);
    assert_true(lp.answered_s - released < 10);
    json_decref(ts_ap_wait_state(id, "running", 5));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_report_that_moves_a_job_waits_for_its_flush),
        cmocka_unit_test(reports_of_samples_only_do_not_wait_for_their_flush),
        cmocka_unit_test(a_report_that_moves_a_job_commits_without_the_notify_lock),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
