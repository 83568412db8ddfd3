/*
 * test_failover.c - failures end to end, with a real server, real agents on
 * simulated GPUs and real job processes: a node whose agent dies is marked
 * not ready and its jobs run again elsewhere; a server killed with SIGKILL
 * and restarted on its data folder loses nothing; of two replicas on one
 * database, killing the one that runs the scheduler loop moves the loop to
 * the other.
 *
 *   e2e_test_failover [CASE-PATTERN]
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"

static const char *const lost_args[] = {"--node-timeout", "2s", "--node-lost-timeout", "4s", NULL};
static char listen_arg[64];
static const char *const fixed_port_args[] = {"--listen", listen_arg, NULL};

static int start(void **state, const char *const *args)
{
    static const struct ts_e2e_project_spec projects[] = {{"vision", 4}, {NULL, 0}};
    return ts_e2e_setup(state, args, projects, NULL);
}

static int setup_lost(void **state)
{
    return start(state, lost_args);
}

static int setup_fixed_port(void **state)
{
    int port = ts_e2e_free_port();
    if (port <= 0)
        return -1;
    snprintf(listen_arg, sizeof(listen_arg), "127.0.0.1:%d", port);
    return start(state, fixed_port_args);
}

static int setup_default(void **state)
{
    return start(state, NULL);
}

static json_t *running(struct ts_it_server *s, long long id)
{
    json_t *j = ts_e2e_wait_state(s, id, "running", 30);
    if (j == NULL)
        fail_msg("job %lld did not run", id);
    return j;
}

static void cancel(struct ts_it_server *s, long long id)
{
    assert_int_equal(ts_e2e_cancel(s, id), 200);
}

/* Wait until the node's last report is later than t (Unix seconds). */
static void wait_reported_after(struct ts_it_server *s, const char *node, double t, double secs)
{
    double end = ts_e2e_now() + secs, seen = -1;
    while (ts_e2e_now() < end) {
        json_t *n = ts_e2e_get(s, "/api/v1/nodes/%s", node);
        if (n != NULL) {
            seen = ts_e2e_parse_time(ts_it_str(n, "last_seen_at"));
            bool ready = strcmp(ts_it_str(n, "state"), "ready") == 0;
            json_decref(n);
            if (ready && seen > t)
                return;
        }
        ts_e2e_sleep(0.1);
    }
    fail_msg("node %s has not reported since %.1f s before the restart", node, t - seen);
}

static void a_lost_node_s_jobs_are_requeued_and_run_on_another_node(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    /* the job starts on n2, the only node; then n1 joins */
    assert_true(ts_e2e_agent_add(c, "n2", "sim:1x16GiB", NULL) >= 0);
    assert_int_equal(ts_e2e_wait_node(s, "n2", "ready", 30), 0);
    long long id =
        ts_e2e_submit(s, "vision", "moves", "{\"count\": 1}", "2s", NULL, TS_E2E_SLEEPING_JOB);
    assert_true(id > 0);
    json_t *j = running(s, id);
    assert_string_equal(ts_it_str(j, "node"), "n2");
    char ckpt[512];
    snprintf(ckpt, sizeof(ckpt), "%s", ts_it_str(j, "checkpoint_dir"));
    json_decref(j);
    struct ts_e2e_agent *n2 = ts_e2e_agent_named(c, "n2");
    struct ts_e2e_proc old;
    assert_int_equal(ts_e2e_job_proc(n2, id, 1, &old), 0);
    assert_true(ts_e2e_agent_add(c, "n1", "sim:1x16GiB", NULL) >= 0);
    assert_int_equal(ts_e2e_wait_node(s, "n1", "ready", 30), 0);

    /* n2's agent dies and stays dead */
    int st = ts_e2e_agent_signal(n2, SIGKILL);
    assert_true(st != -1 && WIFSIGNALED(st));
    double t_kill = ts_e2e_wall();
    assert_int_equal(ts_e2e_wait_node(s, "n2", "not_ready", 15), 0);
    /* the job goes back to the queue and runs on n1, resumed */
    j = ts_e2e_wait_state(s, id, "running", 30);
    assert_non_null(j);
    while (strcmp(ts_it_str(j, "node"), "n1") != 0 ||
           strcmp(ts_it_str(j, "state"), "running") != 0) {
        assert_true(ts_e2e_wall() < t_kill + 30);
        json_decref(j);
        ts_e2e_sleep(0.1);
        j = ts_e2e_job(s, id);
        assert_non_null(j);
    }
    assert_string_equal(ts_it_str(j, "state"), "running");
    assert_int_equal(ts_it_int(j, "resume_count"), 1);
    assert_int_equal(ts_it_int(j, "attempt"), 2);
    assert_string_equal(ts_it_str(j, "checkpoint_dir"), ckpt);
    json_decref(j);
    double t_requeue = ts_e2e_event_time(s, id, "node_lost", 1);
    assert_true(t_requeue > 0);
    fprintf(stderr, "requeued %.1f s after the agent died (node lost timeout 4 s)\n",
            t_requeue - t_kill);
    assert_true(t_requeue - t_kill >= 2.9); /* silent 4 s, the last report up to 1 s old */
    assert_true(t_requeue - t_kill <= 15);
    assert_int_equal(ts_e2e_event_count(s, id, "node_lost"), 1);
    json_t *n = ts_e2e_get(s, "/api/v1/nodes/n2");
    assert_string_equal(ts_it_str(n, "state"), "not_ready");
    json_decref(n);
    struct ts_e2e_agent *n1 = ts_e2e_agent_named(c, "n1");
    struct ts_e2e_proc now;
    assert_int_equal(ts_e2e_job_proc(n1, id, 2, &now), 0);
    assert_true(ts_e2e_alive(now.pid, now.ticks));
    char *starts;
    double end = ts_e2e_now() + 10;
    char buf[64];
    for (;;) {
        starts = ts_e2e_checkpoint_file(s, id, "starts");
        if (ts_e2e_starts(starts, 1, "node", buf, sizeof(buf)) >= 2)
            break;
        free(starts);
        assert_true(ts_e2e_now() < end);
        ts_e2e_sleep(0.1);
    }
    assert_string_equal(buf, "n1");
    ts_e2e_starts(starts, 1, "resume", buf, sizeof(buf));
    assert_string_equal(buf, "1");
    ts_e2e_starts(starts, 0, "node", buf, sizeof(buf));
    assert_string_equal(buf, "n2");
    free(starts);

    /* the lost node's job process is still there: nobody could tell it to
     * stop. When its agent comes back, it is stopped (it is no longer the
     * node's), and the job keeps running on n1 */
    assert_true(ts_e2e_alive(old.pid, old.ticks));
    assert_int_equal(ts_e2e_agent_start(c, n2), 0);
    assert_int_equal(ts_e2e_wait_node(s, "n2", "ready", 30), 0);
    bool stopped = ts_e2e_wait_group_gone(old.pid, 15);
    ts_e2e_agent_kill_jobs(n2);
    assert_true(stopped);
    j = ts_e2e_job(s, id);
    assert_string_equal(ts_it_str(j, "state"), "running");
    assert_string_equal(ts_it_str(j, "node"), "n1");
    assert_int_equal(ts_it_int(j, "attempt"), 2);
    json_decref(j);
    assert_true(ts_e2e_alive(now.pid, now.ticks));
    c->passed = true;
}

static void a_server_killed_and_restarted_loses_nothing(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    char url[128];
    snprintf(url, sizeof(url), "%s", s->url);
    assert_non_null(strstr(url, listen_arg));
    assert_true(ts_e2e_agent_add(c, "n1", "sim:2x16GiB", NULL) >= 0);
    assert_int_equal(ts_e2e_wait_node(s, "n1", "ready", 30), 0);
    struct ts_e2e_agent *a = ts_e2e_agent_named(c, "n1");

    /* one job done, one running, one waiting for both GPUs */
    long long done = ts_e2e_submit(s, "vision", "done", "{\"count\": 1}", "2s", NULL,
                                   "echo output before the crash");
    assert_true(done > 0);
    json_decref(ts_e2e_wait_state(s, done, "succeeded", 30));
    long long run =
        ts_e2e_submit(s, "vision", "runs", "{\"count\": 1}", "2s", NULL, TS_E2E_SLEEPING_JOB);
    assert_true(run > 0);
    json_decref(running(s, run));
    long long waits =
        ts_e2e_submit(s, "vision", "waits", "{\"count\": 2}", "2s", NULL, TS_E2E_SLEEPING_JOB);
    assert_true(waits > 0);
    double end = ts_e2e_now() + 15;
    for (;;) {
        json_t *j = ts_e2e_job(s, waits);
        assert_non_null(j);
        bool considered =
            strcmp(ts_it_str(json_object_get(j, "pending_reason"), "code"), "no_fit") == 0;
        json_decref(j);
        if (considered)
            break;
        assert_true(ts_e2e_now() < end);
        ts_e2e_sleep(0.1);
    }
    struct ts_e2e_proc p;
    assert_int_equal(ts_e2e_job_proc(a, run, 1, &p), 0);
    char digest[33];
    assert_int_equal(ts_it_sql(s,
                               "SELECT md5(string_agg(row(id, state, node_id, attempt, "
                               "resume_count, pid, started_at)::text,"
                               " '|' ORDER BY id)) FROM job",
                               digest, sizeof(digest)),
                     0);
    int events = ts_e2e_event_count(s, run, "running");
    assert_int_equal(events, 1);

    /* SIGKILL; its PostgreSQL lives on, as after a crash */
    ts_it_crash(s);
    ts_e2e_sleep(1);
    assert_true(ts_e2e_alive(p.pid, p.ticks));
    assert_true(a->pid > 0 && ts_e2e_alive(a->pid, 0)); /* the agent waits for it */
    double t_restart = ts_e2e_wall();
    char dir[sizeof(s->dir)];
    snprintf(dir, sizeof(dir), "%s", s->dir);
    assert_int_equal(ts_it_start(s, dir, fixed_port_args), 0);
    assert_string_equal(s->url, url);

    /* the agent finds it again on its own */
    wait_reported_after(s, "n1", t_restart, 40);
    char after[33];
    assert_int_equal(ts_it_sql(s,
                               "SELECT md5(string_agg(row(id, state, node_id, attempt, "
                               "resume_count, pid, started_at)::text,"
                               " '|' ORDER BY id)) FROM job",
                               after, sizeof(after)),
                     0);
    assert_string_equal(after, digest);
    json_t *j = ts_e2e_job(s, done);
    assert_string_equal(ts_it_str(j, "state"), "succeeded");
    json_decref(j);
    struct ts_response r;
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/logs", done);
    assert_int_equal(ts_it_req(s->admin, "GET", path, NULL, NULL, &r), 200);
    assert_non_null(strstr(r.body.data, "output before the crash"));
    ts_response_free(&r);
    j = ts_e2e_job(s, run);
    assert_string_equal(ts_it_str(j, "state"), "running");
    assert_int_equal(ts_it_int(j, "attempt"), 1);
    json_decref(j);
    assert_true(ts_e2e_alive(p.pid, p.ticks));
    assert_int_equal(ts_e2e_event_count(s, run, "running"), 1);
    char *starts = ts_e2e_checkpoint_file(s, run, "starts");
    char buf[8];
    assert_int_equal(ts_e2e_starts(starts, 0, "pid", buf, sizeof(buf)), 1);
    free(starts);
    j = ts_e2e_job(s, waits);
    assert_string_equal(ts_it_str(j, "state"), "pending");
    json_decref(j);

    /* and it works: a new job runs, a cancel reaches the agent, the
     * waiting job gets its two GPUs */
    long long fresh = ts_e2e_submit(s, "vision", "fresh", "{\"count\": 1}", "2s", NULL,
                                    "echo output after the restart");
    assert_true(fresh > 0);
    json_decref(ts_e2e_wait_state(s, fresh, "succeeded", 30));
    assert_true(ts_e2e_wait_output(a, fresh, 1, "output after the restart", 10));
    cancel(s, run);
    json_decref(ts_e2e_wait_state(s, run, "cancelled", 30));
    assert_true(ts_e2e_wait_group_gone(p.pid, 10));
    j = running(s, waits);
    assert_int_equal(json_array_size(json_object_get(json_object_get(j, "allocation"), "devices")),
                     2);
    json_decref(j);
    c->passed = true;
}

static void killing_the_leader_moves_the_scheduler_loop_to_the_other_replica(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *a = &c->srv, *b = &c->replica;
    const char *args[] = {"--database", a->conninfo, NULL};
    assert_int_equal(ts_it_start(b, NULL, args), 0);
    snprintf(b->conninfo, sizeof(b->conninfo), "%s", a->conninfo);
    char a_log[300], b_log[300];
    snprintf(a_log, sizeof(a_log), "%s/server.log", a->dir);
    snprintf(b_log, sizeof(b_log), "%s/server.log", b->dir);

    /* n1's agent talks to A, n2's to B */
    assert_true(ts_e2e_agent_add_at(c, a->url, "n1", "sim:2x16GiB", "node=n1") >= 0);
    assert_true(ts_e2e_agent_add_at(c, b->url, "n2", "sim:2x16GiB", "node=n2") >= 0);
    assert_int_equal(ts_e2e_wait_node(b, "n1", "ready", 30), 0);
    assert_int_equal(ts_e2e_wait_node(a, "n2", "ready", 30), 0);

    /* A, started first, leads; each replica serves jobs for the other's
     * agent */
    long long j1 = ts_e2e_submit(b, "vision", "via-b-on-n1", "{\"count\": 1}", "2s",
                                 "{\"node_selector\": {\"node\": \"n1\"}}", TS_E2E_SLEEPING_JOB);
    long long j2 = ts_e2e_submit(a, "vision", "via-a-on-n2", "{\"count\": 1}", "2s",
                                 "{\"node_selector\": {\"node\": \"n2\"}}", TS_E2E_SLEEPING_JOB);
    assert_true(j1 > 0 && j2 > 0);
    json_t *j = running(b, j1);
    assert_string_equal(ts_it_str(j, "node"), "n1");
    json_decref(j);
    j = running(a, j2);
    assert_string_equal(ts_it_str(j, "node"), "n2");
    json_decref(j);
    assert_true(ts_e2e_log_has(a_log, "scheduler: this replica leads"));
    assert_false(ts_e2e_log_has(b_log, "scheduler: this replica leads"));

    /* the leader dies; B takes the loop over */
    ts_it_crash(a);
    double t_crash = ts_e2e_now();
    double end = t_crash + 20;
    while (!ts_e2e_log_has(b_log, "scheduler: this replica leads")) {
        assert_true(ts_e2e_now() < end);
        ts_e2e_sleep(0.1);
    }
    fprintf(stderr, "B leads %.1f s after A died\n", ts_e2e_now() - t_crash);
    long long j3 = ts_e2e_submit(b, "vision", "after-a", "{\"count\": 1}", "2s",
                                 "{\"node_selector\": {\"node\": \"n2\"}}", TS_E2E_SLEEPING_JOB);
    assert_true(j3 > 0);
    j = running(b, j3);
    assert_string_equal(ts_it_str(j, "node"), "n2");
    json_decref(j);

    /* n1's agent, pointed at B, adopts its job there */
    struct ts_e2e_agent *n1 = ts_e2e_agent_named(c, "n1");
    struct ts_e2e_proc p;
    assert_int_equal(ts_e2e_job_proc(n1, j1, 1, &p), 0);
    assert_true(ts_e2e_agent_signal(n1, SIGKILL) != -1);
    snprintf(n1->server, sizeof(n1->server), "%s", b->url);
    double t_repoint = ts_e2e_wall();
    assert_int_equal(ts_e2e_agent_start(c, n1), 0);
    wait_reported_after(b, "n1", t_repoint, 30);
    j = ts_e2e_job(b, j1);
    assert_string_equal(ts_it_str(j, "state"), "running");
    assert_int_equal(ts_it_int(j, "attempt"), 1);
    json_decref(j);
    assert_true(ts_e2e_alive(p.pid, p.ticks));
    cancel(b, j1);
    json_decref(ts_e2e_wait_state(b, j1, "cancelled", 30));
    assert_true(ts_e2e_wait_group_gone(p.pid, 10));
    c->passed = true;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_lost_node_s_jobs_are_requeued_and_run_on_another_node,
                                        setup_lost, ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(a_server_killed_and_restarted_loses_nothing,
                                        setup_fixed_port, ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(
            killing_the_leader_moves_the_scheduler_loop_to_the_other_replica, setup_default,
            ts_e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
