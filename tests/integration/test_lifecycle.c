/*
 * test_lifecycle.c - the job lifecycle through the agent protocol, with the
 * test playing the agent over HTTP against a real server and PostgreSQL:
 * registration, the scheduler loop binding jobs, the long-polled desired
 * state, reports moving jobs through their states, cancel, stale reports,
 * reclaim with eviction and requeue, the queue, lost nodes (with a
 * suspended job on one), and a second replica taking over the loop when the
 * leader dies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/agentplay.h"

static struct ts_it_server srv;

static const char *const server_args[] = {"--node-timeout", "2s", "--node-lost-timeout", "3s",
                                          NULL};

/* What every job here asks for, and the GPU sample of every report. */
#define ONE_GPU "\"gpu\": {\"count\": 1}"
#define GPU_SAMPLE "\"gpus\": [{\"index\": 0, \"utilization\": 0.5, \"memory_used_bytes\": 1024}]"

static int setup(void **state)
{
    (void)state;
    return ts_ap_start(&srv, server_args);
}

static void a_job_runs_to_success_through_the_agent_protocol(void **state)
{
    (void)state;
    ts_ap_register_node("n1", 2, "");
    json_t *n = ts_ap_get_json(srv.admin, "/api/v1/nodes/n1", 200);
    assert_string_equal(ts_it_str(n, "state"), "ready");
    assert_int_equal(json_array_size(json_object_get(n, "gpus")), 2);
    long long gen = ts_it_int(n, "generation");
    json_decref(n);

    /* an idle long-poll waits out its time */
    double t0 = ts_ap_now_s();
    json_t *d = ts_ap_desired("n1", gen, "1s");
    assert_true(ts_ap_now_s() - t0 >= 0.9);
    assert_int_equal(ts_it_int(d, "generation"), gen);
    assert_int_equal(json_array_size(json_object_get(d, "jobs")), 0);
    json_decref(d);

    long long id = ts_ap_submit("owner", "ok-1", ONE_GPU);
    json_t *j = ts_ap_wait_state(id, "scheduled", 10);
    assert_string_equal(ts_it_str(j, "node"), "n1");
    assert_int_equal(ts_it_int(j, "attempt"), 1);
    json_decref(j);
    /* the long-poll from the old generation answers at once with the job */
    t0 = ts_ap_now_s();
    d = ts_ap_desired("n1", gen, "20s");
    assert_true(ts_ap_now_s() - t0 < 5);
    assert_true(ts_it_int(d, "generation") > gen);
    json_t *dj = ts_ap_desired_find(d, id);
    assert_non_null(dj);
    assert_string_equal(ts_it_str(dj, "action"), "run");
    assert_int_equal(ts_it_int(dj, "attempt"), 1);
    assert_int_equal(ts_it_int(dj, "grace_seconds"), 5);
    assert_int_equal(json_array_size(json_object_get(dj, "gpus")), 1);
    assert_non_null(strstr(ts_it_str(dj, "checkpoint_dir"), "/owner/"));
    json_decref(d);

    char rep[256];
    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 1, \"state\": \"running\", \"pid\": 4242,"
             " \"gpu_utilization\": 0.75}",
             id);
    json_decref(ts_ap_report("n1", rep, GPU_SAMPLE, 200));
    j = ts_ap_wait_state(id, "running", 1);
    assert_true(json_real_value(json_object_get(json_object_get(j, "usage"), "gpu_utilization")) ==
                0.75);
    json_decref(j);
    n = ts_ap_get_json(srv.admin, "/api/v1/nodes/n1", 200);
    assert_true(json_real_value(json_object_get(n, "allocated_gpus")) == 1.0);
    json_decref(n);

    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 1, \"state\": \"exited\","
             " \"exit_code\": 0}",
             id);
    json_decref(ts_ap_report("n1", rep, GPU_SAMPLE, 200));
    j = ts_ap_wait_state(id, "succeeded", 1);
    assert_int_equal(ts_it_int(j, "exit_code"), 0);
    assert_true(json_is_null(json_object_get(j, "allocation")));
    json_decref(j);
    char out[64];
    assert_int_equal(ts_it_sql(&srv, "SELECT count(*) FROM job_gpu", out, sizeof(out)), 0);
    assert_string_equal(out, "0");
    snprintf(rep, sizeof(rep),
             "SELECT string_agg(type, ',' ORDER BY id) FROM job_event WHERE job_id = %lld", id);
    assert_int_equal(ts_it_sql(&srv, rep, out, sizeof(out)), 0);
    assert_string_equal(out, "submitted,scheduled,running,succeeded");
}

static void failures_cancels_and_stale_reports(void **state)
{
    (void)state;
    long long bad = ts_ap_submit("owner", "bad-1", ONE_GPU);
    long long gone = ts_ap_submit("owner", "cancel-1", ONE_GPU);
    json_decref(ts_ap_wait_state(bad, "scheduled", 10));
    json_decref(ts_ap_wait_state(gone, "scheduled", 10));
    char rep[512];
    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 1, \"state\": \"running\"},"
             " {\"id\": %lld, \"attempt\": 1, \"state\": \"running\"}",
             bad, gone);
    json_decref(ts_ap_report("n1", rep, GPU_SAMPLE, 200));
    json_decref(ts_ap_wait_state(gone, "running", 1));

    /* a report about another attempt changes nothing and is named */
    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 7, \"state\": \"exited\","
             " \"exit_code\": 0}",
             bad);
    json_t *res = ts_ap_report("n1", rep, GPU_SAMPLE, 200);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(res, "ignored"), 0)), bad);
    json_decref(res);
    json_decref(ts_ap_wait_state(bad, "running", 1));

    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 1, \"state\": \"exited\","
             " \"exit_code\": 3}",
             bad);
    json_decref(ts_ap_report("n1", rep, GPU_SAMPLE, 200));
    json_t *j = ts_ap_wait_state(bad, "failed", 1);
    assert_int_equal(ts_it_int(j, "exit_code"), 3);
    json_decref(j);

    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", gone);
    ts_ap_call_ok(srv.admin, "DELETE", path, NULL, 200);
    json_decref(ts_ap_wait_state(gone, "cancelling", 1));
    json_t *d = ts_ap_desired("n1", -1, NULL);
    json_t *dj = ts_ap_desired_find(d, gone);
    assert_non_null(dj);
    assert_string_equal(ts_it_str(dj, "action"), "stop");
    assert_string_equal(ts_it_str(dj, "stop_reason"), "cancelled");
    json_decref(d);
    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 1, \"state\": \"exited\","
             " \"signal\": 15}",
             gone);
    json_decref(ts_ap_report("n1", rep, GPU_SAMPLE, 200));
    j = ts_ap_wait_state(gone, "cancelled", 1);
    assert_int_equal(ts_it_int(j, "exit_code"), 143);
    json_decref(j);
}

static void the_owner_reclaims_what_a_borrower_took_which_exits_0_and_is_requeued(void **state)
{
    (void)state;
    long long b1 = ts_ap_submit("borrower", "borrow-1", ONE_GPU);
    long long b2 = ts_ap_submit("borrower", "borrow-2", ONE_GPU);
    json_decref(ts_ap_wait_state(b1, "scheduled", 10));
    json_decref(ts_ap_wait_state(b2, "scheduled", 10));
    char rep[512];
    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 1, \"state\": \"running\"},"
             " {\"id\": %lld, \"attempt\": 1, \"state\": \"running\"}",
             b1, b2);
    json_decref(ts_ap_report("n1", rep, GPU_SAMPLE, 200));
    json_decref(ts_ap_wait_state(b1, "running", 1));

    long long own = ts_ap_submit("owner", "own-1", ONE_GPU);
    /* one borrower job is evicted for it */
    long long victim = -1;
    double end = ts_ap_now_s() + 10;
    while (victim < 0 && ts_ap_now_s() < end) {
        json_t *x = ts_ap_job(b1), *y = ts_ap_job(b2);
        if (strcmp(ts_it_str(x, "state"), "evicting") == 0)
            victim = b1;
        else if (strcmp(ts_it_str(y, "state"), "evicting") == 0)
            victim = b2;
        json_decref(x);
        json_decref(y);
        usleep(100 * 1000);
    }
    assert_true(victim > 0);
    json_t *o = ts_ap_job(own);
    assert_string_equal(ts_it_str(o, "state"), "pending"); /* until the room is free */
    json_decref(o);
    json_t *d = ts_ap_desired("n1", -1, NULL);
    assert_string_equal(ts_it_str(ts_ap_desired_find(d, victim), "stop_reason"), "evicted");
    json_decref(d);
    /* it saves a checkpoint on SIGTERM and exits 0, as training code does:
     * evicted, not succeeded; back in the queue to be resumed */
    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 1, \"state\": \"exited\","
             " \"exit_code\": 0}",
             victim);
    json_decref(ts_ap_report("n1", rep, GPU_SAMPLE, 200));
    json_t *v = ts_ap_wait_state(victim, "pending", 2);
    assert_int_equal(ts_it_int(v, "resume_count"), 1);
    assert_true(json_is_null(json_object_get(v, "exit_code")));
    assert_true(json_is_null(json_object_get(v, "finished_at")));
    json_decref(v);
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/events", victim);
    json_t *ev = ts_ap_get_json(srv.admin, path, 200);
    json_t *e, *requeued = NULL;
    size_t i;
    json_array_foreach(json_object_get(ev, "events"), i, e) {
        assert_string_not_equal(ts_it_str(e, "type"), "succeeded");
        if (strcmp(ts_it_str(e, "type"), "requeued") == 0)
            requeued = e;
    }
    assert_non_null(requeued);
    assert_string_equal(ts_it_str(requeued, "message"), "stopped on node n1 (exited with status 0) "
                                                        "and back in the queue; it resumes later");
    json_decref(ev);
    json_decref(ts_ap_wait_state(own, "scheduled", 10));
    /* fair share as the loop computed it: the owner wants one GPU (own-1) and
     * deserves it: min(quota 2, demand 1) */
    json_t *p = ts_ap_get_json(srv.admin, "/api/v1/projects/owner", 200);
    json_t *st = json_object_get(p, "status");
    assert_true(json_real_value(json_object_get(st, "deserved_gpus")) == 1.0);
    assert_true(json_real_value(json_object_get(st, "fair_share_gpus")) == 1.0);
    json_decref(p);

    /* the victim waits in the queue with a reason and a position */
    double until = ts_ap_now_s() + 5;
    json_t *q = NULL;
    for (;;) {
        q = ts_ap_get_json(srv.admin, "/api/v1/queue", 200);
        json_t *first = json_array_get(json_object_get(q, "jobs"), 0);
        json_t *reason = json_object_get(first, "pending_reason");
        if (ts_it_int(first, "id") == victim && ts_it_int(reason, "queue_position") == 1 &&
            strcmp(ts_it_str(reason, "code"), "not_yet_scheduled") != 0)
            break;
        assert_true(ts_ap_now_s() < until);
        json_decref(q);
        usleep(100 * 1000);
    }
    json_decref(q);
}

static void a_silent_node_is_not_ready_and_its_jobs_go_back_to_the_queue(void **state)
{
    (void)state;
    /* submitted first, so that it (the owner's, below its fair share) and
     * not the borrower's waiting job gets the new node */
    long long id = ts_ap_submit("owner", "lost-1", ONE_GPU);
    ts_ap_register_node("n2", 1, "");
    json_t *j = ts_ap_wait_state(id, "scheduled", 10);
    assert_string_equal(ts_it_str(j, "node"), "n2");
    json_decref(j);
    /* n1 keeps reporting; n2 falls silent */
    ts_ap_heartbeat("n2", false);
    double end = ts_ap_now_s() + 10;
    for (;;) {
        j = ts_ap_job(id);
        bool back = strcmp(ts_it_str(j, "state"), "pending") == 0;
        if (back)
            assert_int_equal(ts_it_int(j, "resume_count"), 1);
        json_decref(j);
        if (back)
            break;
        assert_true(ts_ap_now_s() < end);
        usleep(300 * 1000);
    }
    json_t *n = ts_ap_get_json(srv.admin, "/api/v1/nodes/n2", 200);
    assert_string_equal(ts_it_str(n, "state"), "not_ready");
    json_decref(n);
    n = ts_ap_get_json(srv.admin, "/api/v1/nodes/n1", 200);
    assert_string_equal(ts_it_str(n, "state"), "ready");
    json_decref(n);
    char q[160], out[64];
    snprintf(q, sizeof(q),
             "SELECT count(*) FROM job_event WHERE job_id = %lld AND type = 'node_lost'", id);
    assert_int_equal(ts_it_sql(&srv, q, out, sizeof(out)), 0);
    assert_string_equal(out, "1");
    /* a report brings it back */
    json_decref(ts_ap_report("n2", "", GPU_SAMPLE, 200));
    ts_ap_heartbeat("n2", true);
    n = ts_ap_get_json(srv.admin, "/api/v1/nodes/n2", 200);
    assert_string_equal(ts_it_str(n, "state"), "ready");
    json_decref(n);
}

static void drain_keeps_new_jobs_off_a_node(void **state)
{
    (void)state;
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/nodes/n2/drain", NULL, 200);
    json_t *n = ts_ap_get_json(srv.admin, "/api/v1/nodes/n2", 200);
    assert_string_equal(ts_it_str(n, "state"), "drained");
    json_decref(n);
    ts_ap_call_ok(ts_ap_agent(), "POST", "/api/v1/nodes/n2/drain", NULL, 403); /* admin only */
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/nodes/n2/undrain", NULL, 200);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/nodes/nope/drain", NULL, 404);
}

static void a_job_stopped_before_its_agent_started_it_does_not_hang(void **state)
{
    (void)state;
    char q[160], out[8];
    /* room: end what earlier tests left (as if their agents reported it) */
    assert_int_equal(ts_it_sql(&srv,
                               "UPDATE job SET state = 'cancelled' WHERE state NOT IN"
                               " ('succeeded', 'failed', 'cancelled')",
                               out, sizeof(out)),
                     0);
    long long id = ts_ap_submit("owner", "never-1", ONE_GPU);
    json_t *j = ts_ap_wait_state(id, "scheduled", 10);
    json_decref(j);
    /* as if the scheduler evicted it 20 s ago and the agent, which never
     * started it, ignored the stop: its reports do not name the job */
    snprintf(q, sizeof(q),
             "UPDATE job SET state = 'evicting', updated_at = now() - interval '20 seconds'"
             " WHERE id = %lld",
             id);
    assert_int_equal(ts_it_sql(&srv, q, out, sizeof(out)), 0);
    snprintf(q, sizeof(q),
             "SELECT count(*) FROM job_event WHERE job_id = %lld AND type = 'requeued'"
             " AND message LIKE 'stopped before it started%%'",
             id);
    double end = ts_ap_now_s() + 5;
    while (ts_it_sql(&srv, q, out, sizeof(out)) == 0 && strcmp(out, "1") != 0) {
        assert_true(ts_ap_now_s() < end);
        usleep(100 * 1000);
    }
    /* back in the queue (and placed again, as attempt 2): never resumed */
    j = ts_ap_job(id);
    assert_int_equal(ts_it_int(j, "resume_count"), 0);
    assert_true(strcmp(ts_it_str(j, "state"), "pending") == 0 || ts_it_int(j, "attempt") == 2);
    json_decref(j);
    /* cancel it so that it leaves the GPUs to the next test */
    snprintf(q, sizeof(q), "/api/v1/jobs/%lld", id);
    ts_ap_call_ok(srv.admin, "DELETE", q, NULL, 200);
}

static void a_suspended_job_on_a_lost_node_goes_back_to_the_queue_unsuspended(void **state)
{
    (void)state;
    ts_ap_register_node("sw9", 1,
                        "\"labels\": {\"pool\": \"lostswap\"}, \"collision\": \"swap\","
                        " \"swap_bytes\": 107374182400");
    long long id =
        ts_ap_submit("owner", "lost-sus", ONE_GPU ", \"node_selector\": {\"pool\": \"lostswap\"}");
    json_decref(ts_ap_wait_state(id, "scheduled", 10));
    char rep[160], path[64], q[256], out[64];
    snprintf(rep, sizeof(rep), "{\"id\": %lld, \"attempt\": 1, \"state\": \"running\"}", id);
    json_decref(ts_ap_report("sw9", rep, "", 200));
    json_decref(ts_ap_wait_state(id, "running", 2));
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", id);
    ts_ap_call_ok(srv.admin, "POST", path, NULL, 202);
    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 1, \"state\": \"suspended\", \"swapped_bytes\": 1048576}",
             id);
    json_decref(ts_ap_report("sw9", rep, "", 200));
    json_t *j = ts_ap_wait_state(id, "suspended", 2);
    assert_true(json_is_true(json_object_get(j, "suspend_held")));
    json_decref(j);
    snprintf(q, sizeof(q), "SELECT suspended_gpu_ids IS NOT NULL FROM job WHERE id = %lld", id);
    assert_int_equal(ts_it_sql(&srv, q, out, sizeof(out)), 0);
    assert_string_equal(out, "t");

    /* its node falls silent: the host memory it was suspended into is
     * gone with it, so the job starts again elsewhere, from the queue */
    ts_ap_heartbeat("sw9", false);
    j = ts_ap_wait_state(id, "pending", 10);
    assert_int_equal(ts_it_int(j, "resume_count"), 1);
    assert_int_equal(ts_it_int(j, "suspended_bytes"), 0);
    assert_false(json_is_true(json_object_get(j, "suspend_held")));
    assert_string_equal(ts_it_str(j, "node"), "");
    json_decref(j);
    snprintf(q, sizeof(q),
             "SELECT (suspended_gpu_ids IS NULL)::text || (SELECT count(*) FROM job_event"
             " WHERE job_id = %lld AND type = 'node_lost') FROM job WHERE id = %lld",
             id, id);
    assert_int_equal(ts_it_sql(&srv, q, out, sizeof(out)), 0);
    assert_string_equal(out, "true1");
    json_t *n = ts_ap_get_json(srv.admin, "/api/v1/nodes/sw9", 200);
    assert_string_equal(ts_it_str(n, "state"), "not_ready");
    assert_int_equal(ts_it_int(n, "swap_used_bytes"), 0);
    json_decref(n);
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    ts_ap_call_ok(srv.admin, "DELETE", path, NULL, 200);
}

static void a_second_replica_takes_over_the_loop(void **state)
{
    (void)state;
    struct ts_it_server b;
    const char *args[] = {"--database", srv.conninfo, NULL};
    assert_int_equal(ts_it_start(&b, NULL, args), 0);
    snprintf(b.conninfo, sizeof(b.conninfo), "%s", srv.conninfo); /* for ts_it_sql */
    ts_ap_heartbeat_to(&b);
    ts_it_crash(&srv); /* the leader dies; its PostgreSQL lives on */
    /* free GPUs so that the new job can go somewhere: undo the reclaim test's jobs */
    assert_int_equal(ts_it_sql(&b, "UPDATE job SET state = 'cancelled' WHERE state <> 'pending'",
                               (char[8]){0}, 8),
                     0);
    struct ts_response r;
    assert_int_equal(ts_it_req(b.admin, "POST", "/api/v1/jobs",
                               "{\"name\": \"after-1\", \"project\": \"owner\","
                               " \"command\": [\"true\"], \"gpu\": {\"count\": 1}}",
                               NULL, &r),
                     201);
    long long id = ts_it_int(r.json, "id");
    ts_response_free(&r);
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    double end = ts_ap_now_s() + 15;
    for (;;) {
        assert_int_equal(ts_it_req(b.admin, "GET", path, NULL, NULL, &r), 200);
        bool placed = strcmp(ts_it_str(r.json, "state"), "scheduled") == 0;
        ts_response_free(&r);
        if (placed)
            break;
        assert_true(ts_ap_now_s() < end);
        usleep(200 * 1000);
    }
    assert_int_equal(ts_it_stop(&b), 0);
    ts_it_cleanup(&b);
    /* restart the first (adopting its PostgreSQL) so that teardown stops it */
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", srv.dir);
    assert_int_equal(ts_it_start(&srv, dir, server_args), 0);
    ts_ap_heartbeat_to(&srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_job_runs_to_success_through_the_agent_protocol),
        cmocka_unit_test(failures_cancels_and_stale_reports),
        cmocka_unit_test(the_owner_reclaims_what_a_borrower_took_which_exits_0_and_is_requeued),
        cmocka_unit_test(a_silent_node_is_not_ready_and_its_jobs_go_back_to_the_queue),
        cmocka_unit_test(drain_keeps_new_jobs_off_a_node),
        cmocka_unit_test(a_job_stopped_before_its_agent_started_it_does_not_hang),
        cmocka_unit_test(a_suspended_job_on_a_lost_node_goes_back_to_the_queue_unsuspended),
        cmocka_unit_test(a_second_replica_takes_over_the_loop),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
