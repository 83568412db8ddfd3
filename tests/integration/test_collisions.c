/*
 * test_collisions.c - what the server does with its nodes' collision
 * resolvers, with the test playing the agents over HTTP against a real
 * server and PostgreSQL: a job its node ended to make room (reported
 * exited with evicted) is requeued, never failed, unless a cancel came
 * first; the resolver's events about an attempt are stored whatever the job
 * became since, once, and only from the node that ran that attempt; host
 * swap that running jobs hold (swapped_bytes) is shown and counted against
 * suspensions; a suspension takes what a job holds, not its limit, on
 * request and when the scheduler decides it; a resuming job whose memory is
 * not back yet says what it waits for; idle_swap_after is resolved per kind
 * from --idle-swap-after and sent to the agents.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/array.h"
#include "tests/integration/agentplay.h"

#define GIB 1073741824LL

/* What the priority resolver says about the job it ended. */
#define RESOLVER_MSG                                                                               \
    "ended on node ev1 by the priority resolver to make room for job 12"                           \
    " (pid 345 needs 2.00 GiB on GPU 0)"
/* What a resuming job's agent says while its memory is not back. */
#define WAIT_MSG "waiting for 3.00 GiB on GPU 0: held above their requests by job 9 (2.50 GiB)"

static struct ts_it_server srv;

/* name: 80 GiB GPUs, labelled pool=<pool>; swap in GiB. */
static void register_node(const char *name, int gpus, const char *collision, long long swap_gib,
                          const char *pool)
{
    char extra[256];
    snprintf(extra, sizeof(extra),
             "\"labels\": {\"pool\": \"%s\"}, \"collision\": \"%s\", \"swap_bytes\": %lld", pool,
             collision, swap_gib * GIB);
    ts_ap_register_node(name, gpus, extra);
}

static void sql(const char *q, char *out, size_t len)
{
    assert_int_equal(ts_it_sql(&srv, q, out, len), 0);
}

static void report_state(const char *node, long long id, int attempt, const char *state,
                         const char *more)
{
    char rep[1024];
    snprintf(rep, sizeof(rep), "{\"id\": %lld, \"attempt\": %d, \"state\": \"%s\"%s%s}", id,
             attempt, state, more[0] ? ", " : "", more);
    json_decref(ts_ap_report(node, rep, "", 200));
}

/* Submit a job on pool with gpu (and extra members), wait until it is
 * scheduled on node, report it running in attempt 1; its id. */
static long long running_job(const char *project, const char *name, const char *pool,
                             const char *gpu, const char *node, const char *extra)
{
    char members[512];
    snprintf(members, sizeof(members), "\"gpu\": %s, \"node_selector\": {\"pool\": \"%s\"}%s%s",
             gpu, pool, extra[0] ? ", " : "", extra);
    long long id = ts_ap_submit(project, name, members);
    json_t *j = ts_ap_wait_state(id, "scheduled", 10);
    char on[64];
    snprintf(on, sizeof(on), "%s", ts_it_str(j, "node"));
    json_decref(j);
    if (node != NULL)
        assert_string_equal(on, node);
    report_state(on, id, 1, "running", "");
    json_decref(ts_ap_wait_state(id, "running", 2));
    return id;
}

/* Wait until the job has been requeued `count` times; the job (caller's). */
static json_t *wait_resumes(long long id, long long count, double secs)
{
    double end = ts_ap_now_s() + secs;
    for (;;) {
        json_t *j = ts_ap_job(id);
        if (ts_it_int(j, "resume_count") == count)
            return j;
        if (ts_ap_now_s() > end)
            fail_msg("job %lld was resumed %lld times, not %lld, after %.0fs", id,
                     ts_it_int(j, "resume_count"), count, secs);
        json_decref(j);
        usleep(100 * 1000);
    }
}

/* Cancel the job and, when it was on node in attempt, report it ended. */
static void finish(long long id, const char *node, int attempt)
{
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    json_t *j = ts_ap_call(srv.admin, "DELETE", path, NULL, 200);
    bool stopping = strcmp(ts_it_str(j, "state"), "cancelling") == 0;
    json_decref(j);
    if (stopping && node != NULL) {
        report_state(node, id, attempt, "exited", "\"signal\": 15");
        json_decref(ts_ap_wait_state(id, "cancelled", 2));
    }
}

/* The agent-reported events of the job, "type:attempt:seq,..." in order. */
static void agent_events(long long id, char *out, size_t len)
{
    char q[256];
    snprintf(
        q, sizeof(q),
        "SELECT coalesce(string_agg(type || ':' || attempt || ':' || seq, ',' ORDER BY id), '')"
        " FROM job_event WHERE job_id = %lld AND seq IS NOT NULL",
        id);
    sql(q, out, len);
}

/* How many events of this type the job has. */
static int count_events(long long id, const char *type)
{
    char q[256], out[32];
    snprintf(q, sizeof(q), "SELECT count(*) FROM job_event WHERE job_id = %lld AND type = '%s'", id,
             type);
    sql(q, out, sizeof(out));
    return atoi(out);
}

/* The job's state, figures and events, to prove a refusal wrote nothing. */
static void job_row(long long id, char *out, size_t len)
{
    char q[512];
    snprintf(q, sizeof(q),
             "SELECT state || suspend_held || suspended_bytes || swapped_bytes || updated_at"
             " || (SELECT count(*) FROM job_event WHERE job_id = %lld) FROM job WHERE id = %lld",
             id, id);
    sql(q, out, len);
}

static long long node_swap_used(const char *node)
{
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", node);
    json_t *n = ts_ap_get_json(srv.admin, path, 200);
    long long used = ts_it_int(n, "swap_used_bytes");
    json_decref(n);
    return used;
}

static int setup(void **state)
{
    (void)state;
    static const char *const args[] = {
        "--node-timeout", "5s", "--node-lost-timeout", "60s", "--idle-swap-after", "90s", NULL};
    if (ts_ap_start(&srv, args) != 0)
        return -1;
    register_node("ev1", 2, "priority", 0, "ev");
    register_node("ea", 1, "priority", 0, "evs");
    register_node("eb", 1, "priority", 0, "evs");
    register_node("sw1", 2, "swap", 16, "sw");
    register_node("rc1", 1, "swap", 16, "rc");
    register_node("id1", 1, "wait", 0, "idle");
    return 0;
}

static void a_job_its_node_ended_to_make_room_is_requeued_never_failed(void **state)
{
    (void)state;
    const char *portion = "{\"portion\": 0.25, \"portion_limit\": 0.5}";
    long long a = running_job("owner", "ev-a", "ev", portion, "ev1", "");
    long long b = running_job("owner", "ev-b", "ev", portion, "ev1", "");
    long long c = ts_ap_submit(
        "owner", "ev-c", "\"gpu\": {\"portion\": 0.25}, \"node_selector\": {\"pool\": \"ev\"}");
    json_decref(ts_ap_wait_state(c, "scheduled", 10));
    long long d = ts_ap_submit(
        "owner", "ev-d", "\"gpu\": {\"portion\": 0.25}, \"node_selector\": {\"pool\": \"ev\"}");
    json_decref(ts_ap_wait_state(d, "scheduled", 10));
    /* drained, ev1 keeps its jobs but gets no new ones: the requeued jobs
     * stay in the queue where the test can look at them */
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/nodes/ev1/drain", NULL, 200);

    char rep[1024];
    /* killed by the priority resolver; then one that exited 0 once ended
     * (a checkpoint saved on SIGTERM), one it ended before its agent had
     * said it was running, and one ended before it could start */
    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 1, \"state\": \"exited\", \"signal\": 9,"
             " \"evicted\": true, \"message\": \"" RESOLVER_MSG "\"},"
             " {\"id\": %lld, \"attempt\": 1, \"state\": \"exited\", \"exit_code\": 0,"
             " \"evicted\": true},"
             " {\"id\": %lld, \"attempt\": 1, \"state\": \"exited\", \"exit_code\": 1,"
             " \"evicted\": true, \"message\": \"ended to make room\"},"
             " {\"id\": %lld, \"attempt\": 1, \"state\": \"failed_to_start\","
             " \"evicted\": true, \"message\": \"ended to make room\"}",
             a, b, c, d);
    json_t *res = ts_ap_report("ev1", rep, "", 200);
    assert_int_equal(json_array_size(json_object_get(res, "ignored")), 0);
    json_decref(res);
    long long ids[] = {a, b, c, d};
    for (int k = 0; k < 4; k++) {
        json_t *j = wait_resumes(ids[k], 1, 2);
        assert_string_equal(ts_it_str(j, "state"), "pending");
        assert_true(json_is_null(json_object_get(j, "node")));
        assert_true(json_is_null(json_object_get(j, "allocation")));
        assert_true(json_is_null(json_object_get(j, "exit_code")));
        assert_true(json_is_null(json_object_get(j, "finished_at")));
        assert_int_equal(ts_it_int(j, "attempt"), 1);
        assert_non_null(json_object_get(j, "pending_reason"));
        json_decref(j);
        assert_int_equal(count_events(ids[k], "requeued"), 1);
        assert_int_equal(count_events(ids[k], "failed"), 0);
        assert_int_equal(count_events(ids[k], "succeeded"), 0);
        char q[160], out[32];
        snprintf(q, sizeof(q), "SELECT count(*) FROM job_gpu WHERE job_id = %lld", ids[k]);
        sql(q, out, sizeof(out));
        assert_string_equal(out, "0");
    }
    /* the requeued event says why, in the resolver's words */
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/events", a);
    json_t *ev = ts_ap_get_json(srv.admin, path, 200), *v;
    size_t i;
    bool seen = false;
    json_array_foreach(json_object_get(ev, "events"), i, v) {
        if (strcmp(ts_it_str(v, "type"), "requeued") != 0)
            continue;
        seen = true;
        const char *m = ts_it_str(v, "message");
        assert_non_null(strstr(m, RESOLVER_MSG));
        assert_non_null(strstr(m, "evicted by node ev1"));
        assert_non_null(strstr(m, "killed by signal 9"));
        assert_non_null(strstr(m, "back in the queue"));
    }
    assert_true(seen);
    json_decref(ev);
    /* the node is free of them */
    json_t *n = ts_ap_get_json(srv.admin, "/api/v1/nodes/ev1", 200);
    assert_int_equal(ts_it_int(n, "running_jobs"), 0);
    json_decref(n);

    /* back on the node, they run again in attempt 2 */
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/nodes/ev1/undrain", NULL, 200);
    for (int k = 0; k < 4; k++) {
        json_t *j = ts_ap_wait_state(ids[k], "scheduled", 10);
        assert_int_equal(ts_it_int(j, "attempt"), 2);
        json_decref(j);
        json_t *dj = ts_ap_desired_job("ev1", ids[k]);
        assert_int_equal(ts_it_int(dj, "attempt"), 2);
        assert_int_equal(ts_it_int(dj, "resume_count"), 1);
        json_decref(dj);
    }
    for (int k = 0; k < 4; k++)
        finish(ids[k], "ev1", 2);
}

static void a_cancelled_job_its_node_ended_to_make_room_ends_cancelled(void **state)
{
    (void)state;
    long long a = running_job("owner", "ev-cancel", "ev", "{\"portion\": 0.25}", "ev1", "");
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", a);
    json_t *j = ts_ap_call(srv.admin, "DELETE", path, NULL, 200);
    assert_string_equal(ts_it_str(j, "state"), "cancelling");
    json_decref(j);
    report_state("ev1", a, 1, "exited",
                 "\"signal\": 9, \"evicted\": true, \"message\": \"" RESOLVER_MSG "\"");
    j = ts_ap_wait_state(a, "cancelled", 2);
    assert_int_equal(ts_it_int(j, "resume_count"), 0);
    assert_int_equal(ts_it_int(j, "exit_code"), 137);
    json_decref(j);
    assert_int_equal(count_events(a, "requeued"), 0);
    assert_int_equal(count_events(a, "cancelling"), 1);
    assert_int_equal(count_events(a, "cancelled"), 1);
}

static void
resolver_events_are_kept_whatever_became_of_the_job_from_the_node_that_ran_it(void **state)
{
    (void)state;
    long long x = running_job("owner", "evs-x", "evs", "{\"count\": 1}", NULL, "");
    json_t *j = ts_ap_job(x);
    char first[16], other[16];
    snprintf(first, sizeof(first), "%s", ts_it_str(j, "node"));
    snprintf(other, sizeof(other), "%s", strcmp(first, "ea") == 0 ? "eb" : "ea");
    json_decref(j);
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/nodes/%s/drain", first);
    ts_ap_call_ok(srv.admin, "POST", path, NULL, 200);

    /* the report that ends it carries the resolver's events about it: they
     * are stored although the job is back in the queue by then */
    char rep[512], events[1024], out[512];
    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 1, \"state\": \"exited\", \"signal\": 9,"
             " \"evicted\": true, \"message\": \"ended to make room for job 77\"}",
             x);
    snprintf(events, sizeof(events),
             "\"events\": [{\"id\": %lld, \"attempt\": 1, \"seq\": 1, \"type\":"
             " \"fell_back_to_priority\", \"message\": \"the host swap reserve is full\"},"
             " {\"id\": %lld, \"attempt\": 1, \"seq\": 2, \"type\": \"memory_ended\","
             " \"message\": \"ended to make room for job 77 (needs 2.00 GiB on GPU 0)\"}]",
             x, x);
    json_t *res = ts_ap_report(first, rep, events, 200);
    assert_int_equal(json_array_size(json_object_get(res, "ignored")), 0);
    json_decref(res);
    agent_events(x, out, sizeof(out));
    assert_string_equal(out, "fell_back_to_priority:1:1,memory_ended:1:2");

    /* it runs again, elsewhere, in attempt 2 */
    j = ts_ap_wait_state(x, "scheduled", 10);
    assert_string_equal(ts_it_str(j, "node"), other);
    assert_int_equal(ts_it_int(j, "attempt"), 2);
    json_decref(j);
    report_state(other, x, 2, "running", "");
    json_decref(ts_ap_wait_state(x, "running", 2));

    /* a late event of attempt 1 from its node: stored, once however often
     * it is sent */
    snprintf(events, sizeof(events),
             "\"events\": [{\"id\": %lld, \"attempt\": 1, \"seq\": 3, \"type\": \"swapped_out\","
             " \"message\": \"4.00 GiB to host RAM\"}]",
             x);
    for (int k = 0; k < 2; k++) {
        res = ts_ap_report(first, "", events, 200);
        assert_int_equal(json_array_size(json_object_get(res, "ignored")), 0);
        json_decref(res);
    }
    agent_events(x, out, sizeof(out));
    assert_string_equal(out, "fell_back_to_priority:1:1,memory_ended:1:2,swapped_out:1:3");

    /* attempt 1 never ran on the other node, attempt 2 never on the first:
     * both are ignored and nothing is stored */
    const struct {
        const char *node;
        int attempt;
    } wrong[] = {{other, 1}, {first, 2}, {first, 7}};
    for (size_t k = 0; k < TS_ARRAY_LEN(wrong); k++) {
        snprintf(events, sizeof(events),
                 "\"events\": [{\"id\": %lld, \"attempt\": %d, \"seq\": 9, \"type\":"
                 " \"swapped_in\", \"message\": \"not from here\"}]",
                 x, wrong[k].attempt);
        res = ts_ap_report(wrong[k].node, "", events, 200);
        json_t *ign = json_object_get(res, "ignored");
        assert_int_equal(json_array_size(ign), 1);
        assert_int_equal(json_integer_value(json_array_get(ign, 0)), x);
        json_decref(res);
    }
    agent_events(x, out, sizeof(out));
    assert_string_equal(out, "fell_back_to_priority:1:1,memory_ended:1:2,swapped_out:1:3");

    /* the attempt that runs, from its node */
    snprintf(events, sizeof(events),
             "\"events\": [{\"id\": %lld, \"attempt\": 2, \"seq\": 1, \"type\": \"memory_wait\","
             " \"message\": \"waited 200 ms for 2.00 GiB\"}]",
             x);
    json_decref(ts_ap_report(other, "", events, 200));

    /* failed: its node's last words about it still count */
    report_state(other, x, 2, "exited", "\"exit_code\": 1");
    json_decref(ts_ap_wait_state(x, "failed", 2));
    snprintf(events, sizeof(events),
             "\"events\": [{\"id\": %lld, \"attempt\": 2, \"seq\": 2, \"type\": \"out_of_memory\","
             " \"message\": \"no room for 2.00 GiB on GPU 0 after 30 s\"}]",
             x);
    res = ts_ap_report(other, "", events, 200);
    assert_int_equal(json_array_size(json_object_get(res, "ignored")), 0);
    json_decref(res);
    agent_events(x, out, sizeof(out));
    assert_string_equal(out, "fell_back_to_priority:1:1,memory_ended:1:2,swapped_out:1:3,"
                             "memory_wait:2:1,out_of_memory:2:2");
    json_decref(ts_ap_wait_state(x, "failed", 1));

    /* GET /jobs/{id}/events shows them with their attempt and seq */
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/events", x);
    json_t *ev = ts_ap_get_json(srv.admin, path, 200), *v;
    size_t i;
    int agents = 0;
    json_array_foreach(json_object_get(ev, "events"), i, v) {
        if (json_object_get(v, "seq") == NULL)
            continue;
        agents++;
        if (strcmp(ts_it_str(v, "type"), "swapped_out") == 0) {
            assert_string_equal(ts_it_str(v, "message"), "4.00 GiB to host RAM");
            assert_int_equal(ts_it_int(v, "attempt"), 1);
            assert_int_equal(ts_it_int(v, "seq"), 3);
        }
    }
    assert_int_equal(agents, 5);
    json_decref(ev);
    snprintf(path, sizeof(path), "/api/v1/nodes/%s/undrain", first);
    ts_ap_call_ok(srv.admin, "POST", path, NULL, 200);
}

static void host_swap_running_jobs_hold_is_shown_and_counted_against_suspensions(void **state)
{
    (void)state;
    /* d keeps 10 GiB of its GPU memory in sw1's 16 GiB host swap while it
     * runs (idle detach) */
    long long d = running_job("owner", "sw-d", "sw",
                              "{\"memory\": \"4GiB\", \"memory_limit\": \"20GiB\"}", "sw1", "");
    report_state("sw1", d, 1, "running",
                 "\"swapped_bytes\": 10737418240, \"gpu_memory_used_bytes\": 12884901888");
    json_t *j = ts_ap_job(d);
    assert_int_equal(ts_it_int(j, "swapped_bytes"), 10 * GIB);
    json_decref(j);
    json_t *list = ts_ap_get_json(srv.admin, "/api/v1/jobs?project=owner&state=running", 200), *v;
    size_t i;
    bool listed = false;
    json_array_foreach(json_object_get(list, "jobs"), i, v) {
        if (ts_it_int(v, "id") == d) {
            listed = true;
            assert_int_equal(ts_it_int(v, "swapped_bytes"), 10 * GIB);
        }
    }
    assert_true(listed);
    json_decref(list);
    assert_int_equal(node_swap_used("sw1"), 10 * GIB);

    /* v may burst to 60 GiB (more than the whole reserve) and uses 8 GiB:
     * 8 GiB do not fit in the 6 GiB d leaves */
    long long s = running_job("owner", "sw-v", "sw",
                              "{\"memory\": \"4GiB\", \"memory_limit\": \"60GiB\"}", "sw1", "");
    report_state("sw1", s, 1, "running", "\"gpu_memory_used_bytes\": 8589934592");
    char path[96], before[256], after[256];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", s);
    job_row(s, before, sizeof(before));
    json_t *p = ts_ap_call(srv.admin, "POST", path, NULL, 409);
    assert_non_null(strstr(ts_it_str(p, "detail"), "too little free host swap for job"));
    assert_non_null(strstr(ts_it_str(p, "detail"),
                           "6442450944 of 17179869184 bytes free, it holds 8589934592 bytes"));
    json_decref(p);
    job_row(s, after, sizeof(after));
    assert_string_equal(before, after);
    assert_int_equal(node_swap_used("sw1"), 10 * GIB);

    /* d's memory is back on its GPU: now v's 8 GiB fit, although its limit
     * (60 GiB) would not; it holds what it uses */
    report_state("sw1", d, 1, "running", "\"swapped_bytes\": 0");
    assert_int_equal(node_swap_used("sw1"), 0);
    j = ts_ap_call(srv.admin, "POST", path, NULL, 202);
    assert_string_equal(ts_it_str(j, "state"), "suspending");
    assert_int_equal(ts_it_int(j, "suspended_bytes"), 8 * GIB);
    json_decref(j);
    assert_int_equal(node_swap_used("sw1"), 8 * GIB);
    report_state("sw1", s, 1, "suspended", "\"swapped_bytes\": 8589934592");
    json_decref(ts_ap_wait_state(s, "suspended", 2));

    /* d detaches again: both count; a job that leaves running holds none */
    report_state("sw1", d, 1, "running", "\"swapped_bytes\": 6442450944");
    assert_int_equal(node_swap_used("sw1"), 14 * GIB);
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", d);
    j = ts_ap_call(srv.admin, "DELETE", path, NULL, 200);
    assert_string_equal(ts_it_str(j, "state"), "cancelling");
    assert_int_equal(ts_it_int(j, "swapped_bytes"), 0);
    json_decref(j);
    assert_int_equal(node_swap_used("sw1"), 8 * GIB);
    /* its agent still says what it holds while it stops: not counted */
    report_state("sw1", d, 1, "running", "\"swapped_bytes\": 6442450944");
    j = ts_ap_job(d);
    assert_int_equal(ts_it_int(j, "swapped_bytes"), 0);
    json_decref(j);
    report_state("sw1", d, 1, "exited", "\"signal\": 15");
    json_decref(ts_ap_wait_state(d, "cancelled", 2));
    finish(s, "sw1", 1);
    assert_int_equal(node_swap_used("sw1"), 0);
}

static void a_resuming_job_whose_memory_is_not_back_says_what_it_waits_for(void **state)
{
    (void)state;
    long long r = running_job("owner", "wm-r", "sw", "{\"memory\": \"4GiB\"}", "sw1", "");
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", r);
    ts_ap_call_ok(srv.admin, "POST", path, NULL, 202);
    report_state("sw1", r, 1, "suspended", "\"swapped_bytes\": 4294967296");
    json_decref(ts_ap_wait_state(r, "suspended", 2));
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/resume", r);
    ts_ap_call_ok(srv.admin, "POST", path, NULL, 202);
    json_t *j = ts_ap_wait_state(r, "resuming", 10);
    assert_true(json_is_null(json_object_get(j, "pending_reason")));
    json_decref(j);

    /* still stopped, nothing said: nothing changes */
    report_state("sw1", r, 1, "suspended", "");
    j = ts_ap_job(r);
    assert_string_equal(ts_it_str(j, "state"), "resuming");
    assert_true(json_is_null(json_object_get(j, "pending_reason")));
    json_decref(j);

    /* its agent sent the swap-in but the memory is held by others */
    report_state("sw1", r, 1, "suspended", "\"message\": \"" WAIT_MSG "\"");
    j = ts_ap_job(r);
    assert_string_equal(ts_it_str(j, "state"), "resuming");
    json_t *reason = json_object_get(j, "pending_reason");
    assert_string_equal(ts_it_str(reason, "code"), "waiting_for_memory");
    assert_string_equal(ts_it_str(reason, "message"), WAIT_MSG);
    json_decref(j);
    json_t *dj = ts_ap_desired_job("sw1", r);
    assert_string_equal(ts_it_str(dj, "action"), "run");
    json_decref(dj);
    /* a scheduler cycle does not overwrite it */
    usleep(1500 * 1000);
    j = ts_ap_job(r);
    assert_string_equal(ts_it_str(json_object_get(j, "pending_reason"), "code"),
                        "waiting_for_memory");
    json_decref(j);

    /* back: running, the reason gone */
    report_state("sw1", r, 1, "running", "");
    j = ts_ap_wait_state(r, "running", 2);
    assert_true(json_is_null(json_object_get(j, "pending_reason")));
    assert_int_equal(ts_it_int(j, "suspended_bytes"), 0);
    json_decref(j);
    assert_int_equal(count_events(r, "resumed"), 1);
    report_state("sw1", r, 1, "exited", "\"exit_code\": 0");
    json_decref(ts_ap_wait_state(r, "succeeded", 2));
}

static void the_scheduler_suspends_what_fits_and_evicts_a_burst_that_does_not(void **state)
{
    (void)state;
    /* the cluster is rc1 alone, so that the borrower is above its fair share
     * once the owner wants the GPU */
    static const char *const others[] = {"ev1", "ea", "eb", "sw1", "id1"};
    char path[96];
    for (size_t k = 0; k < TS_ARRAY_LEN(others); k++) {
        snprintf(path, sizeof(path), "/api/v1/nodes/%s/drain", others[k]);
        ts_ap_call_ok(srv.admin, "POST", path, NULL, 200);
    }
    /* two borrower jobs packing 8 GiB each on rc1's one GPU; b1 has burst to
     * 30 GiB, more than rc1's 16 GiB of host swap */
    const char *mem = "{\"memory\": \"8GiB\", \"memory_limit\": \"40GiB\"}";
    long long b1 = running_job("borrower", "rc-b1", "rc", mem, "rc1", "");
    report_state("rc1", b1, 1, "running", "\"gpu_memory_used_bytes\": 32212254720");
    long long b2 = running_job("borrower", "rc-b2", "rc", mem, "rc1", "");
    report_state("rc1", b2, 1, "running", "\"gpu_memory_used_bytes\": 8589934592");
    /* the owner wants the whole GPU back */
    long long own = ts_ap_submit("owner", "rc-own",
                                 "\"gpu\": {\"count\": 1}, \"node_selector\": {\"pool\": \"rc\"}");
    json_t *j1 = ts_ap_wait_state(b1, "evicting", 10);
    json_t *j2 = ts_ap_wait_state(b2, "suspending", 2);
    assert_int_equal(ts_it_int(j2, "suspended_bytes"), 8 * GIB);
    assert_int_equal(ts_it_int(j1, "suspended_bytes"), 0);
    json_decref(j1);
    json_decref(j2);
    assert_int_equal(node_swap_used("rc1"), 8 * GIB);
    report_state("rc1", b2, 1, "suspended", "\"swapped_bytes\": 8589934592");
    report_state("rc1", b1, 1, "exited", "\"signal\": 15");
    json_decref(ts_ap_wait_state(b2, "suspended", 2));
    json_decref(wait_resumes(b1, 1, 2));
    json_decref(ts_ap_wait_state(own, "scheduled", 10));
    finish(b1, NULL, 0);
    finish(b2, "rc1", 1);
    finish(own, "rc1", 1);
    assert_int_equal(node_swap_used("rc1"), 0);
    for (size_t k = 0; k < TS_ARRAY_LEN(others); k++) {
        snprintf(path, sizeof(path), "/api/v1/nodes/%s/undrain", others[k]);
        ts_ap_call_ok(srv.admin, "POST", path, NULL, 200);
    }
}

/* Jobs, events and idempotency keys, to prove a refusal wrote nothing. */
static void jobs_digest(char *out, size_t len)
{
    sql("SELECT (SELECT count(*) || ':' || coalesce(max(id), 0) || ':'"
        " || coalesce(sum(idle_swap_after_seconds), 0) FROM job)"
        " || '/' || (SELECT count(*) FROM job_event) || '/' || (SELECT count(*) FROM"
        " idempotency_key)",
        out, len);
}

static void idle_swap_after_follows_the_kind_and_the_server_and_reaches_the_agent(void **state)
{
    (void)state;
    const char *gpu = "\"gpu\": {\"portion\": 0.1}, \"node_selector\": {\"pool\": \"idle\"}";
    char extra[256];
    struct {
        const char *name, *more;
        long long seconds;
        const char *text;
        long long id;
    } jobs[] = {
        {"idle-nb", "\"kind\": \"interactive\"", 90, "1m30s", 0},
        {"idle-train", "\"kind\": \"train\"", 0, "0s", 0},
        {"idle-serve", "\"kind\": \"inference\"", 0, "0s", 0},
        {"idle-nb-off", "\"kind\": \"interactive\", \"idle_swap_after\": \"0s\"", 0, "0s", 0},
        {"idle-train-on", "\"idle_swap_after\": \"2m\"", 120, "2m", 0},
    };
    size_t n = TS_ARRAY_LEN(jobs);
    for (size_t k = 0; k < n; k++) {
        snprintf(extra, sizeof(extra), "%s, %s", gpu, jobs[k].more);
        jobs[k].id = ts_ap_submit("owner", jobs[k].name, extra);
        json_t *j = ts_ap_job(jobs[k].id);
        assert_int_equal(ts_it_int(j, "idle_swap_after_seconds"), jobs[k].seconds);
        assert_string_equal(ts_it_str(j, "idle_swap_after"), jobs[k].text);
        assert_int_equal(ts_it_int(j, "swapped_bytes"), 0);
        json_decref(j);
    }
    for (size_t k = 0; k < n; k++) {
        json_decref(ts_ap_wait_state(jobs[k].id, "scheduled", 10));
        json_t *dj = ts_ap_desired_job("id1", jobs[k].id);
        assert_non_null(dj);
        json_t *v = json_object_get(dj, "idle_swap_after_seconds");
        assert_true(json_is_integer(v));
        assert_int_equal(json_integer_value(v), jobs[k].seconds);
        json_decref(dj);
    }

    /* bad values are refused and change nothing */
    const struct {
        const char *value;
        long status;
        const char *code;
    } bad[] = {
        {"true", 400, "wrong_type"},        {"[\"5m\"]", 400, "wrong_type"},
        {"-30", 422, "invalid_value"},      {"\"-30s\"", 422, "invalid_value"},
        {"\"8d\"", 422, "invalid_value"},   {"604801", 422, "invalid_value"},
        {"\"soon\"", 422, "invalid_value"}, {"1.5", 422, "invalid_value"},
    };
    char before[128], after[128], body[256];
    jobs_digest(before, sizeof(before));
    for (size_t k = 0; k < TS_ARRAY_LEN(bad); k++) {
        snprintf(body, sizeof(body),
                 "{\"name\": \"idle-bad\", \"project\": \"owner\", \"kind\": \"interactive\","
                 " \"command\": [\"x\"], \"idle_swap_after\": %s}",
                 bad[k].value);
        json_t *p = ts_ap_call(srv.admin, "POST", "/api/v1/jobs", body, bad[k].status);
        assert_string_equal(ts_it_str(p, "code"), bad[k].code);
        assert_string_equal(ts_it_str(p, "field"), "idle_swap_after");
        json_decref(p);
    }
    json_t *p = ts_ap_call(srv.admin, "POST", "/api/v1/jobs",
                           "{\"name\": \"idle-bad\", \"project\": \"owner\", \"command\": [\"x\"],"
                           " \"idle_swap_after_seconds\": 60}",
                           400);
    assert_string_equal(ts_it_str(p, "code"), "unknown_field");
    json_decref(p);
    jobs_digest(after, sizeof(after));
    assert_string_equal(before, after);
    for (size_t k = 0; k < n; k++)
        finish(jobs[k].id, "id1", 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_job_its_node_ended_to_make_room_is_requeued_never_failed),
        cmocka_unit_test(a_cancelled_job_its_node_ended_to_make_room_ends_cancelled),
        cmocka_unit_test(
            resolver_events_are_kept_whatever_became_of_the_job_from_the_node_that_ran_it),
        cmocka_unit_test(host_swap_running_jobs_hold_is_shown_and_counted_against_suspensions),
        cmocka_unit_test(a_resuming_job_whose_memory_is_not_back_says_what_it_waits_for),
        cmocka_unit_test(the_scheduler_suspends_what_fits_and_evicts_a_burst_that_does_not),
        cmocka_unit_test(idle_swap_after_follows_the_kind_and_the_server_and_reaches_the_agent),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
