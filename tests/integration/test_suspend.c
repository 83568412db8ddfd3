/*
 * test_suspend.c - suspend in place through the agent protocol, with the
 * test playing the agents over HTTP against a real server and PostgreSQL:
 * nodes declaring their collision resolver and host swap, suspend and resume
 * on request (back on the same node, GPUs and attempt), the scheduler
 * suspending a borrower instead of evicting it and resuming it when room
 * returns, the end of a suspension by a cancel, the refusals (each writing
 * nothing), two suspensions racing for a node's last swap, jobs that refuse
 * swap, and the resolver's events stored once.
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/array.h"
#include "tests/integration/agentplay.h"

#define GIB 1073741824LL

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

/* Wait for the job's pending reason code; returns the job (caller's). */
static json_t *wait_reason(long long id, const char *code, double secs)
{
    double end = ts_ap_now_s() + secs;
    for (;;) {
        json_t *j = ts_ap_job(id);
        if (strcmp(ts_it_str(json_object_get(j, "pending_reason"), "code"), code) == 0)
            return j;
        if (ts_ap_now_s() > end)
            fail_msg("job %lld waits with %s, not %s, after %.0fs", id,
                     ts_it_str(json_object_get(j, "pending_reason"), "code"), code, secs);
        json_decref(j);
        usleep(100 * 1000);
    }
}

static void report_state(const char *node, long long id, int attempt, const char *state,
                         const char *more)
{
    char rep[256];
    snprintf(rep, sizeof(rep), "{\"id\": %lld, \"attempt\": %d, \"state\": \"%s\"%s%s}", id,
             attempt, state, more[0] ? ", " : "", more);
    json_decref(ts_ap_report(node, rep, "", 200));
}

/* The device indexes of the job's allocation, as "0" or "0,1" ("" when none). */
static void devices(const json_t *j, char *out, size_t len)
{
    out[0] = '\0';
    json_t *d = json_object_get(json_object_get(j, "allocation"), "devices"), *v;
    size_t i, used = 0;
    json_array_foreach(d, i, v)
        used +=
            (size_t)snprintf(out + used, len - used, "%s%lld", i ? "," : "", ts_it_int(v, "index"));
}

static void sql(const char *q, char *out, size_t len)
{
    assert_int_equal(ts_it_sql(&srv, q, out, len), 0);
}

/* Start a job on pool and report it running; returns its id. */
static long long running_job(const char *project, const char *name, const char *pool,
                             const char *gpu, const char *node)
{
    char extra[256];
    snprintf(extra, sizeof(extra), "\"gpu\": %s, \"node_selector\": {\"pool\": \"%s\"}", gpu, pool);
    long long id = ts_ap_submit(project, name, extra);
    json_t *j = ts_ap_wait_state(id, "scheduled", 10);
    assert_string_equal(ts_it_str(j, "node"), node);
    json_decref(j);
    report_state(node, id, 1, "running", "");
    json_decref(ts_ap_wait_state(id, "running", 2));
    return id;
}

/* The job's state, hold, swap figure and events, to prove a refusal wrote nothing. */
static void job_row(long long id, char *out, size_t len)
{
    char q[256];
    snprintf(q, sizeof(q),
             "SELECT state || suspend_held || suspended_bytes || (SELECT count(*) FROM job_event"
             " WHERE job_id = %lld) FROM job WHERE id = %lld",
             id, id);
    sql(q, out, len);
}

static int setup(void **state)
{
    (void)state;
    static const char *const args[] = {"--node-timeout", "5s", "--node-lost-timeout", "60s", NULL};
    if (ts_ap_start(&srv, args) != 0)
        return -1;
    register_node("sw1", 2, "swap", 200, "swap");
    register_node("plain1", 1, "wait", 0, "plain");
    register_node("small1", 1, "swap", 1, "small");
    return 0;
}

static void nodes_show_their_resolver_and_swap_and_a_bad_resolver_is_refused(void **state)
{
    (void)state;
    json_t *n = ts_ap_get_json(srv.admin, "/api/v1/nodes/sw1", 200);
    assert_string_equal(ts_it_str(n, "collision"), "swap");
    assert_int_equal(ts_it_int(n, "swap_bytes"), 200 * GIB);
    assert_int_equal(ts_it_int(n, "swap_used_bytes"), 0);
    json_decref(n);
    n = ts_ap_get_json(srv.admin, "/api/v1/nodes/plain1", 200);
    assert_string_equal(ts_it_str(n, "collision"), "wait");
    json_decref(n);
    json_t *p = ts_ap_call(ts_ap_agent(), "PUT", "/api/v1/nodes/sw1",
                           "{\"collision\": \"kill\", \"swap_bytes\": 0, \"gpus\": []}", 422);
    assert_string_equal(ts_it_str(p, "field"), "collision");
    assert_non_null(strstr(ts_it_str(p, "detail"), "wait, priority or swap"));
    json_decref(p);
    /* nothing changed: still swap, same reserve, same GPUs */
    n = ts_ap_get_json(srv.admin, "/api/v1/nodes/sw1", 200);
    assert_string_equal(ts_it_str(n, "collision"), "swap");
    assert_int_equal(ts_it_int(n, "swap_bytes"), 200 * GIB);
    assert_int_equal(json_array_size(json_object_get(n, "gpus")), 2);
    json_decref(n);
}

static void a_job_suspended_on_request_frees_its_gpus_and_resumes_on_the_same_ones(void **state)
{
    (void)state;
    long long a = running_job("owner", "sus-a", "swap", "{\"count\": 1}", "sw1");
    json_t *j = ts_ap_job(a);
    char held_on[16];
    devices(j, held_on, sizeof(held_on));
    assert_true(json_is_true(json_object_get(j, "swap")));
    json_decref(j);
    json_t *dj = ts_ap_desired_job("sw1", a);
    assert_true(json_is_true(json_object_get(dj, "swap")));
    json_decref(dj);

    char path[96];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", a);
    j = ts_ap_call(srv.admin, "POST", path, NULL, 202);
    assert_string_equal(ts_it_str(j, "state"), "suspending");
    assert_true(json_is_true(json_object_get(j, "suspend_held")));
    /* the whole GPU is its limit: that much swap is held until it says */
    assert_int_equal(ts_it_int(j, "suspended_bytes"), 80 * GIB);
    json_decref(j);
    dj = ts_ap_desired_job("sw1", a);
    assert_string_equal(ts_it_str(dj, "action"), "suspend");
    assert_int_equal(ts_it_int(dj, "attempt"), 1);
    json_decref(dj);
    /* a second request: it is no longer running */
    json_t *p = ts_ap_call(srv.admin, "POST", path, NULL, 409);
    assert_non_null(strstr(ts_it_str(p, "detail"), "suspending"));
    json_decref(p);

    report_state("sw1", a, 1, "suspended", "\"swapped_bytes\": 3221225472");
    j = ts_ap_wait_state(a, "suspended", 2);
    assert_string_equal(ts_it_str(j, "node"), "sw1");
    assert_int_equal(ts_it_int(j, "attempt"), 1);
    assert_int_equal(ts_it_int(j, "suspended_bytes"), 3 * GIB);
    assert_true(json_is_null(json_object_get(j, "allocation")));
    assert_string_equal(ts_it_str(json_object_get(j, "pending_reason"), "code"), "suspended");
    assert_non_null(strstr(ts_it_str(json_object_get(j, "pending_reason"), "message"), "resume"));
    json_decref(j);
    /* the event says the size as people read it, not 3221225472 */
    char evpath[64];
    snprintf(evpath, sizeof(evpath), "/api/v1/jobs/%lld/events", a);
    json_t *ev = ts_ap_call(srv.admin, "GET", evpath, NULL, 200);
    char *evtext = json_dumps(ev, JSON_COMPACT);
    assert_non_null(strstr(evtext, "suspended on node sw1: 3 GiB of GPU memory in host swap"));
    free(evtext);
    json_decref(ev);
    char out[256], q[256];
    snprintf(q, sizeof(q), "SELECT count(*) FROM job_gpu WHERE job_id = %lld", a);
    sql(q, out, sizeof(out));
    assert_string_equal(out, "0");
    json_t *n = ts_ap_get_json(srv.admin, "/api/v1/nodes/sw1", 200);
    assert_int_equal(ts_it_int(n, "swap_used_bytes"), 3 * GIB);
    json_decref(n);
    /* still on its node's desired state, stopped, with the GPU it keeps */
    dj = ts_ap_desired_job("sw1", a);
    assert_string_equal(ts_it_str(dj, "action"), "suspend");
    assert_int_equal(json_array_size(json_object_get(dj, "gpus")), 1);
    json_decref(dj);
    /* the queue names it and says how to continue */
    json_t *queue = ts_ap_get_json(srv.admin, "/api/v1/queue", 200), *v;
    size_t i;
    bool listed = false;
    json_array_foreach(json_object_get(queue, "jobs"), i, v)
        listed |= ts_it_int(v, "id") == a &&
                  strcmp(ts_it_str(json_object_get(v, "pending_reason"), "code"), "suspended") == 0;
    assert_true(listed);
    json_decref(queue);

    /* its GPU is free for another job, which takes the same one */
    long long c = running_job("owner", "sus-c", "swap", "{\"count\": 1}", "sw1");
    j = ts_ap_job(c);
    char c_on[16];
    devices(j, c_on, sizeof(c_on));
    assert_string_equal(c_on, held_on);
    json_decref(j);

    /* resume: it waits for its own GPU although the other one is free */
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/resume", a);
    j = ts_ap_call(srv.admin, "POST", path, NULL, 202);
    assert_false(json_is_true(json_object_get(j, "suspend_held")));
    json_decref(j);
    j = wait_reason(a, "no_fit", 10);
    assert_string_equal(ts_it_str(j, "state"), "suspended");
    snprintf(q, sizeof(q), "resumes only on the GPU it held (%s)", held_on);
    assert_non_null(strstr(ts_it_str(json_object_get(j, "pending_reason"), "message"), q));
    json_decref(j);
    /* a second resume: it is no longer held */
    p = ts_ap_call(srv.admin, "POST", path, NULL, 409);
    json_decref(p);

    report_state("sw1", c, 1, "exited", "\"exit_code\": 0");
    j = ts_ap_wait_state(a, "resuming", 10);
    assert_string_equal(ts_it_str(j, "node"), "sw1");
    assert_int_equal(ts_it_int(j, "attempt"), 1);
    char back_on[16];
    devices(j, back_on, sizeof(back_on));
    assert_string_equal(back_on, held_on);
    json_decref(j);
    dj = ts_ap_desired_job("sw1", a);
    assert_string_equal(ts_it_str(dj, "action"), "run");
    assert_int_equal(ts_it_int(dj, "attempt"), 1);
    json_decref(dj);
    report_state("sw1", a, 1, "running", "");
    j = ts_ap_wait_state(a, "running", 2);
    assert_int_equal(ts_it_int(j, "resume_count"), 0);
    assert_int_equal(ts_it_int(j, "suspended_bytes"), 0);
    json_decref(j);
    n = ts_ap_get_json(srv.admin, "/api/v1/nodes/sw1", 200);
    assert_int_equal(ts_it_int(n, "swap_used_bytes"), 0);
    json_decref(n);
    snprintf(q, sizeof(q),
             "SELECT string_agg(type, ',' ORDER BY id) FROM job_event WHERE job_id = %lld", a);
    sql(q, out, sizeof(out));
    assert_string_equal(out, "submitted,scheduled,running,suspending,suspended,resume_requested,"
                             "resuming,resumed");
    report_state("sw1", a, 1, "exited", "\"exit_code\": 0");
    json_decref(ts_ap_wait_state(a, "succeeded", 2));
}

static void refusals_say_why_and_change_nothing(void **state)
{
    (void)state;
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/jobs/999999/suspend", NULL, 404);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/jobs/999999/resume", NULL, 404);
    char path[96], before[256], after[256];

    /* pending: never placed (no node has 8 GPUs) */
    long long pend = ts_ap_submit("owner", "ref-pending", "\"gpu\": {\"count\": 8}");
    json_decref(wait_reason(pend, "too_large", 10));
    job_row(pend, before, sizeof(before));
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", pend);
    json_t *p = ts_ap_call(srv.admin, "POST", path, NULL, 409);
    assert_non_null(strstr(ts_it_str(p, "detail"), "only a running job can be suspended"));
    json_decref(p);
    job_row(pend, after, sizeof(after));
    assert_string_equal(before, after);
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", pend);
    ts_ap_call_ok(srv.admin, "DELETE", path, NULL, 200);

    /* a node without host swap */
    long long plain = running_job("owner", "ref-plain", "plain", "{\"count\": 1}", "plain1");
    job_row(plain, before, sizeof(before));
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", plain);
    p = ts_ap_call(srv.admin, "POST", path, NULL, 409);
    assert_non_null(strstr(ts_it_str(p, "detail"), "node plain1 has no host swap"));
    json_decref(p);
    job_row(plain, after, sizeof(after));
    assert_string_equal(before, after);

    /* resume a running job */
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/resume", plain);
    p = ts_ap_call(srv.admin, "POST", path, NULL, 409);
    assert_non_null(strstr(ts_it_str(p, "detail"), "is running"));
    json_decref(p);
    job_row(plain, after, sizeof(after));
    assert_string_equal(before, after);

    /* another project's member may not; a member of the job's may */
    const char *other = ts_it_token(&srv, "member-b", "member", "[\"borrower\"]");
    struct ts_client *mb = ts_it_client(&srv, other);
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", plain);
    ts_ap_call_ok(mb, "POST", path, NULL, 403);
    ts_client_free(mb);
    job_row(plain, after, sizeof(after));
    assert_string_equal(before, after);
    report_state("plain1", plain, 1, "exited", "\"exit_code\": 0");

    /* too little free swap for its GPU memory limit (80 GiB in 1 GiB) */
    long long small = running_job("owner", "ref-small", "small", "{\"count\": 1}", "small1");
    job_row(small, before, sizeof(before));
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", small);
    p = ts_ap_call(srv.admin, "POST", path, NULL, 409);
    assert_non_null(strstr(ts_it_str(p, "detail"), "too little free host swap"));
    json_decref(p);
    job_row(small, after, sizeof(after));
    assert_string_equal(before, after);
    report_state("small1", small, 1, "exited", "\"exit_code\": 0");

    /* a job that refuses swap */
    long long ns =
        running_job("owner", "ref-noswap", "swap", "{\"count\": 1}, \"swap\": false", "sw1");
    json_t *dj = ts_ap_desired_job("sw1", ns);
    assert_true(json_is_false(json_object_get(dj, "swap")));
    json_decref(dj);
    job_row(ns, before, sizeof(before));
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", ns);
    p = ts_ap_call(srv.admin, "POST", path, NULL, 409);
    assert_non_null(strstr(ts_it_str(p, "detail"), "refuses swap"));
    json_decref(p);
    job_row(ns, after, sizeof(after));
    assert_string_equal(before, after);
    report_state("sw1", ns, 1, "exited", "\"exit_code\": 0");
    json_decref(ts_ap_wait_state(ns, "succeeded", 2));

    /* swap of the wrong type at submission */
    p = ts_ap_call(srv.admin, "POST", "/api/v1/jobs",
                   "{\"name\": \"bad-swap\", \"project\": \"owner\", \"command\": [\"x\"],"
                   " \"swap\": \"no\"}",
                   400);
    assert_string_equal(ts_it_str(p, "field"), "swap");
    json_decref(p);
}

static void a_job_that_refuses_swap_and_can_burst_stays_off_nodes_that_swap(void **state)
{
    (void)state;
    /* only swapping nodes match: it waits, saying why */
    long long pinned =
        ts_ap_submit("owner", "burst-pinned",
                     "\"gpu\": {\"portion\": 0.25, \"portion_limit\": 0.5}, \"swap\": false,"
                     " \"node_selector\": {\"pool\": \"swap\"}");
    json_t *j = wait_reason(pinned, "node_unavailable", 10);
    assert_non_null(
        strstr(ts_it_str(json_object_get(j, "pending_reason"), "message"), "refuses swap"));
    json_decref(j);
    /* anywhere: it goes to the one node that does not swap */
    long long free_ =
        ts_ap_submit("owner", "burst-free",
                     "\"gpu\": {\"portion\": 0.25, \"portion_limit\": 0.5}, \"swap\": false");
    j = ts_ap_wait_state(free_, "scheduled", 10);
    assert_string_equal(ts_it_str(j, "node"), "plain1");
    json_decref(j);
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", pinned);
    ts_ap_call_ok(srv.admin, "DELETE", path, NULL, 200);
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", free_);
    ts_ap_call_ok(srv.admin, "DELETE", path, NULL, 200);
    report_state("plain1", free_, 1, "exited", "\"signal\": 15");
    json_decref(ts_ap_wait_state(free_, "cancelled", 2));
}

static void the_scheduler_suspends_a_borrower_for_the_owner_and_resumes_it_later(void **state)
{
    (void)state;
    /* the cluster is sw1 alone, so that the borrower's two GPUs are above
     * its fair share once the owner wants one */
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/nodes/plain1/drain", NULL, 200);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/nodes/small1/drain", NULL, 200);
    long long b1 = running_job("borrower", "borrow-1", "swap", "{\"count\": 1}", "sw1");
    long long b2 = running_job("borrower", "borrow-2", "swap", "{\"count\": 1}", "sw1");
    long long own = ts_ap_submit("owner", "own-1",
                                 "\"gpu\": {\"count\": 1},"
                                 " \"node_selector\": {\"pool\": \"swap\"}");
    /* one borrower job is suspended in place for it, not evicted */
    long long victim = -1;
    double end = ts_ap_now_s() + 10;
    while (victim < 0 && ts_ap_now_s() < end) {
        json_t *x = ts_ap_job(b1), *y = ts_ap_job(b2);
        if (strcmp(ts_it_str(x, "state"), "suspending") == 0)
            victim = b1;
        else if (strcmp(ts_it_str(y, "state"), "suspending") == 0)
            victim = b2;
        assert_string_not_equal(ts_it_str(x, "state"), "evicting");
        assert_string_not_equal(ts_it_str(y, "state"), "evicting");
        json_decref(x);
        json_decref(y);
        usleep(100 * 1000);
    }
    assert_true(victim > 0);
    json_t *j = ts_ap_job(victim);
    char held_on[16];
    devices(j, held_on, sizeof(held_on));
    assert_string_equal(ts_it_str(j, "stop_reason"), "suspended");
    assert_false(json_is_true(json_object_get(j, "suspend_held")));
    json_decref(j);
    json_t *dj = ts_ap_desired_job("sw1", victim);
    assert_string_equal(ts_it_str(dj, "action"), "suspend");
    json_decref(dj);
    report_state("sw1", victim, 1, "suspended", "\"swapped_bytes\": 1073741824");
    json_decref(ts_ap_wait_state(victim, "suspended", 2));
    j = ts_ap_wait_state(own, "scheduled", 10);
    char own_on[16];
    devices(j, own_on, sizeof(own_on));
    assert_string_equal(own_on, held_on);
    json_decref(j);
    report_state("sw1", own, 1, "running", "");
    /* it waits with the scheduler's reason, not a hold */
    j = wait_reason(victim, "no_fit", 10);
    assert_string_equal(ts_it_str(j, "state"), "suspended");
    json_decref(j);

    /* room returns: it resumes in place, same attempt */
    report_state("sw1", own, 1, "exited", "\"exit_code\": 0");
    j = ts_ap_wait_state(victim, "resuming", 10);
    assert_int_equal(ts_it_int(j, "attempt"), 1);
    char back_on[16];
    devices(j, back_on, sizeof(back_on));
    assert_string_equal(back_on, held_on);
    json_decref(j);
    report_state("sw1", victim, 1, "running", "");
    json_decref(ts_ap_wait_state(victim, "running", 2));
    long long other = victim == b1 ? b2 : b1;
    report_state("sw1", victim, 1, "exited", "\"exit_code\": 0");
    report_state("sw1", other, 1, "exited", "\"exit_code\": 0");
    json_decref(ts_ap_wait_state(victim, "succeeded", 2));
    json_decref(ts_ap_wait_state(other, "succeeded", 2));
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/nodes/plain1/undrain", NULL, 200);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/nodes/small1/undrain", NULL, 200);
}

static void cancelling_a_suspended_job_ends_its_suspension(void **state)
{
    (void)state;
    long long a = running_job("owner", "cancel-sus", "swap", "{\"count\": 1}", "sw1");
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", a);
    ts_ap_call_ok(srv.admin, "POST", path, NULL, 202);
    report_state("sw1", a, 1, "suspended", "\"swapped_bytes\": 1073741824");
    json_decref(ts_ap_wait_state(a, "suspended", 2));
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", a);
    json_t *j = ts_ap_call(srv.admin, "DELETE", path, NULL, 200);
    assert_string_equal(ts_it_str(j, "state"), "cancelling");
    json_decref(j);
    json_t *dj = ts_ap_desired_job("sw1", a);
    assert_string_equal(ts_it_str(dj, "action"), "stop");
    json_decref(dj);
    report_state("sw1", a, 1, "exited", "\"signal\": 9");
    json_decref(ts_ap_wait_state(a, "cancelled", 2));
    json_t *n = ts_ap_get_json(srv.admin, "/api/v1/nodes/sw1", 200);
    assert_int_equal(ts_it_int(n, "swap_used_bytes"), 0);
    json_decref(n);
}

/* A suspend that fails ends in a stop (SIGTERM): the job saves a checkpoint
 * and exits 0. It was evicted, not finished: back in the queue, resumed in a
 * new attempt; only an exit on its own is success. */
static void a_suspending_job_that_exits_0_is_requeued_not_succeeded(void **state)
{
    (void)state;
    long long a = running_job("owner", "exit0-sus", "swap", "{\"count\": 1}", "sw1");
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", a);
    ts_ap_call_ok(srv.admin, "POST", path, NULL, 202);
    report_state("sw1", a, 1, "exited", "\"exit_code\": 0");
    json_t *j = ts_ap_wait_state(a, "scheduled", 10); /* requeued, placed again at once */
    assert_int_equal(ts_it_int(j, "resume_count"), 1);
    assert_int_equal(ts_it_int(j, "attempt"), 2);
    assert_false(json_is_true(json_object_get(j, "suspend_held")));
    json_decref(j);
    char q[160], out[64];
    snprintf(q, sizeof(q),
             "SELECT string_agg(type, ',' ORDER BY id) FROM job_event WHERE job_id = %lld"
             " AND type IN ('requeued', 'succeeded', 'failed')",
             a);
    sql(q, out, sizeof(out));
    assert_string_equal(out, "requeued");
    report_state("sw1", a, 2, "running", "");
    json_decref(ts_ap_wait_state(a, "running", 2));
    report_state("sw1", a, 2, "exited", "\"exit_code\": 0");
    j = ts_ap_wait_state(a, "succeeded", 2);
    assert_int_equal(ts_it_int(j, "exit_code"), 0);
    json_decref(j);
}

static void resolver_events_are_stored_once_and_bad_ones_refused(void **state)
{
    (void)state;
    long long a = running_job("owner", "events-1", "swap",
                              "{\"portion\": 0.25, \"portion_limit\": 0.5}", "sw1");
    char rep[128], events[1024], q[256], out[256];
    snprintf(rep, sizeof(rep), "{\"id\": %lld, \"attempt\": 1, \"state\": \"running\"}", a);
    snprintf(events, sizeof(events),
             "\"events\": [{\"id\": %lld, \"attempt\": 1, \"seq\": 1, \"type\": \"memory_wait\","
             " \"message\": \"waited 200 ms for 2 GiB\"},"
             " {\"id\": %lld, \"attempt\": 1, \"seq\": 2, \"type\": \"swapped_out\","
             " \"message\": \"4 GiB to host RAM\"},"
             " {\"id\": 999999, \"attempt\": 1, \"seq\": 1, \"type\": \"swapped_in\","
             " \"message\": \"not here\"}]",
             a, a);
    snprintf(q, sizeof(q),
             "SELECT string_agg(type || ':' || seq, ',' ORDER BY seq) FROM job_event"
             " WHERE job_id = %lld AND seq IS NOT NULL",
             a);
    for (int k = 0; k < 2; k++) { /* the second time: a resent report */
        json_t *res = ts_ap_report("sw1", rep, events, 200);
        json_t *ign = json_object_get(res, "ignored");
        assert_int_equal(json_array_size(ign), 1);
        assert_int_equal(json_integer_value(json_array_get(ign, 0)), 999999);
        json_decref(res);
        sql(q, out, sizeof(out));
        assert_string_equal(out, "memory_wait:1,swapped_out:2");
    }
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/events", a);
    json_t *ev = ts_ap_get_json(srv.admin, path, 200), *v;
    size_t i;
    bool seen = false;
    json_array_foreach(json_object_get(ev, "events"), i, v) {
        if (strcmp(ts_it_str(v, "type"), "swapped_out") == 0) {
            seen = true;
            assert_string_equal(ts_it_str(v, "message"), "4 GiB to host RAM");
            assert_int_equal(ts_it_int(v, "attempt"), 1);
            assert_int_equal(ts_it_int(v, "seq"), 2);
        } else if (strcmp(ts_it_str(v, "type"), "submitted") == 0) {
            /* the server's own events have neither */
            assert_null(json_object_get(v, "attempt"));
            assert_null(json_object_get(v, "seq"));
        }
    }
    assert_true(seen);
    json_decref(ev);

    /* bad events: the whole report is refused and nothing is stored */
    char count_q[160], before[32], after[32];
    snprintf(count_q, sizeof(count_q), "SELECT count(*) FROM job_event WHERE job_id = %lld", a);
    sql(count_q, before, sizeof(before));
    const char *bad[] = {"\"seq\": 0, \"type\": \"memory_wait\"",
                         "\"seq\": 3, \"type\": \"abcdefghijklmnopqrstuvwxyz_abcdefg\"",
                         "\"seq\": 3, \"type\": \"Swap-Out\""};
    for (size_t k = 0; k < TS_ARRAY_LEN(bad); k++) {
        snprintf(events, sizeof(events),
                 "\"events\": [{\"id\": %lld, \"attempt\": 1, \"seq\": 4, \"type\": \"t\","
                 " \"message\": \"fine\"}, {\"id\": %lld, \"attempt\": 1, %s, \"message\": \"m\"}]",
                 a, a, bad[k]);
        json_t *p = ts_ap_report("sw1", rep, events, 422);
        assert_non_null(strstr(ts_it_str(p, "field"), "events[1]"));
        json_decref(p);
    }
    size_t cap = 1001 * 120 + 64;
    char *many = malloc(cap);
    assert_non_null(many);
    size_t len = (size_t)snprintf(many, cap, "\"events\": [");
    for (int k = 0; k < 1001; k++)
        len += (size_t)snprintf(many + len, cap - len,
                                "%s{\"id\": %lld, \"attempt\": 1, \"seq\": %d, \"type\": \"t\","
                                " \"message\": \"m\"}",
                                k ? "," : "", a, 10 + k);
    snprintf(many + len, cap - len, "]");
    json_t *p = ts_ap_report("sw1", rep, many, 422);
    assert_string_equal(ts_it_str(p, "field"), "events");
    assert_non_null(strstr(ts_it_str(p, "detail"), "at most 1000"));
    json_decref(p);
    free(many);
    sql(count_q, after, sizeof(after));
    assert_string_equal(before, after);
    report_state("sw1", a, 1, "exited", "\"exit_code\": 0");
}

static void a_suspending_job_its_agent_no_longer_names_goes_back_to_the_queue(void **state)
{
    (void)state;
    long long a = running_job("owner", "gone-sus", "swap", "{\"count\": 1}", "sw1");
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", a);
    ts_ap_call_ok(srv.admin, "POST", path, NULL, 202);
    /* the heartbeats name no job: after 10 s it counts as gone, back in the
     * queue (and placed again at once: sw1 has room) */
    double end = ts_ap_now_s() + 40;
    json_t *j;
    while (ts_it_int((j = ts_ap_job(a)), "resume_count") != 1) {
        assert_true(ts_ap_now_s() < end);
        json_decref(j);
        usleep(200 * 1000);
    }
    assert_string_not_equal(ts_it_str(j, "state"), "suspending");
    assert_string_not_equal(ts_it_str(j, "state"), "suspended");
    assert_false(json_is_true(json_object_get(j, "suspend_held")));
    assert_int_equal(ts_it_int(j, "suspended_bytes"), 0);
    json_decref(j);
    char q[160], out[64];
    snprintf(q, sizeof(q),
             "SELECT count(*) FROM job_event WHERE job_id = %lld AND type = 'requeued'", a);
    sql(q, out, sizeof(out));
    assert_string_equal(out, "1");
    json_t *n = ts_ap_get_json(srv.admin, "/api/v1/nodes/sw1", 200);
    assert_int_equal(ts_it_int(n, "swap_used_bytes"), 0);
    json_decref(n);
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", a);
    ts_ap_call_ok(srv.admin, "DELETE", path, NULL, 200);
}

struct racer {
    long long id;
    long status;
    char detail[512];
};

static void *suspend_racer(void *arg)
{
    struct racer *r = arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", r->id);
    struct ts_response resp = {0};
    r->status = ts_it_req(c, "POST", path, NULL, NULL, &resp);
    snprintf(r->detail, sizeof(r->detail), "%s", ts_it_str(resp.json, "detail"));
    ts_response_free(&resp);
    ts_client_free(c);
    return NULL;
}

/* Backends waiting for a row lock, apart from heartbeats (which write the
 * node row too). */
static int lock_waiters(PGconn *pg)
{
    PGresult *res = PQexec(pg, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type ="
                               " 'Lock' AND query NOT LIKE 'UPDATE node SET last_seen_at%'");
    int n = PQresultStatus(res) == PGRES_TUPLES_OK ? atoi(PQgetvalue(res, 0, 0)) : -1;
    PQclear(res);
    return n;
}

static void two_suspensions_at_once_cannot_both_take_the_last_swap(void **state)
{
    (void)state;
    /* race1 has 100 GiB of swap: room for one whole 80 GiB GPU, not two
     * (registered here: its GPUs would change the cases before) */
    register_node("race1", 2, "swap", 100, "race");
    long long a = running_job("owner", "race-a", "race", "{\"count\": 1}", "race1");
    long long b = running_job("owner", "race-b", "race", "{\"count\": 1}", "race1");
    /* hold the node row so that both requests are under way before either
     * decides */
    PGconn *pg = PQconnectdb(srv.conninfo);
    assert_int_equal(PQstatus(pg), CONNECTION_OK);
    PQclear(PQexec(pg, "BEGIN"));
    PGresult *res = PQexec(pg, "SELECT 1 FROM node WHERE name = 'race1' FOR UPDATE");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    PQclear(res);
    PGconn *watch = PQconnectdb(srv.conninfo);
    assert_int_equal(PQstatus(watch), CONNECTION_OK);
    struct racer r[2] = {{.id = a}, {.id = b}};
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        assert_int_equal(pthread_create(&t[k], NULL, suspend_racer, &r[k]), 0);
    double end = ts_ap_now_s() + 20;
    while (lock_waiters(watch) < 2) {
        assert_true(ts_ap_now_s() < end);
        usleep(20 * 1000);
    }
    PQclear(PQexec(pg, "COMMIT"));
    PQfinish(pg);
    PQfinish(watch);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    /* one took the swap, the other was told why not */
    int won = r[0].status == 202 ? 0 : 1, lost = 1 - won;
    assert_int_equal(r[won].status, 202);
    assert_int_equal(r[lost].status, 409);
    assert_non_null(strstr(r[lost].detail, "too little free host swap"));
    json_t *n = ts_ap_get_json(srv.admin, "/api/v1/nodes/race1", 200);
    assert_int_equal(ts_it_int(n, "swap_used_bytes"), 80 * GIB);
    json_decref(n);
    json_t *j = ts_ap_job(r[lost].id);
    assert_string_equal(ts_it_str(j, "state"), "running");
    assert_int_equal(ts_it_int(j, "suspended_bytes"), 0);
    json_decref(j);
    for (int k = 0; k < 2; k++) {
        char path[64];
        snprintf(path, sizeof(path), "/api/v1/jobs/%lld", r[k].id);
        ts_ap_call_ok(srv.admin, "DELETE", path, NULL, 200);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nodes_show_their_resolver_and_swap_and_a_bad_resolver_is_refused),
        cmocka_unit_test(a_job_suspended_on_request_frees_its_gpus_and_resumes_on_the_same_ones),
        cmocka_unit_test(refusals_say_why_and_change_nothing),
        cmocka_unit_test(a_job_that_refuses_swap_and_can_burst_stays_off_nodes_that_swap),
        cmocka_unit_test(the_scheduler_suspends_a_borrower_for_the_owner_and_resumes_it_later),
        cmocka_unit_test(cancelling_a_suspended_job_ends_its_suspension),
        cmocka_unit_test(a_suspending_job_that_exits_0_is_requeued_not_succeeded),
        cmocka_unit_test(resolver_events_are_stored_once_and_bad_ones_refused),
        cmocka_unit_test(a_suspending_job_its_agent_no_longer_names_goes_back_to_the_queue),
        cmocka_unit_test(two_suspensions_at_once_cannot_both_take_the_last_swap),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
