/*
 * test_sched_check.c - the invariant checker catches what it promises to.
 * Every other scheduler test trusts ts_sched_check to pass only results
 * that keep the invariants; here each invariant is broken on purpose, by a
 * result written by hand, and the checker must name the breach. The first
 * case is a result that keeps them all. The same for the snapshot's own
 * validation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "server/sched/sched.h"
#include "server/sched/sched_json.h"

#define GIB 1073741824LL

/* n1: two 80 GiB A100s (snapshot GPUs 0, 1), 8 CPUs; n2: not ready (2, 3).
 * Running: r1 (id 1, p, not preemptible) has GPU 0 whole; r2 (id 2, q,
 * protected for 100 s, started 10 s ago) has half of GPU 1. Pending: j1
 * (id 3, p, one GPU), j2 (id 4, q, half a GPU), j3 (id 5, wants an H100),
 * j4 (id 6, wants zone b), j5 (id 7, 10 CPUs). */
static const char snapshot[] =
    "{\"now\": 1000,"
    " \"departments\": [{\"name\": \"d\", \"quota\": 2}],"
    " \"projects\": [{\"name\": \"p\", \"quota\": 1, \"limit\": 1},"
    "                {\"name\": \"q\", \"department\": \"d\", \"quota\": 1,"
    "                 \"min_runtime_s\": 100}],"
    " \"nodes\": [{\"name\": \"n1\", \"cpu\": 8, \"gpus\": 2, \"gpu_model\": \"A100\","
    "              \"labels\": {\"zone\": \"a\"}},"
    "            {\"name\": \"n2\", \"ready\": false, \"gpus\": 2, \"gpu_model\": \"A100\"}],"
    " \"running\": [{\"name\": \"r1\", \"project\": \"p\", \"preemptible\": false,"
    "                \"gpu\": {\"count\": 1}, \"node\": \"n1\", \"gpus\": [0]},"
    "               {\"name\": \"r2\", \"project\": \"q\", \"gpu\": {\"portion\": 0.5},"
    "                \"node\": \"n1\", \"gpus\": [1], \"started_at\": 990}],"
    " \"pending\": [{\"name\": \"j1\", \"project\": \"q\", \"gpu\": {\"count\": 1}},"
    "               {\"name\": \"j2\", \"project\": \"q\", \"gpu\": {\"portion\": 0.5}},"
    "               {\"name\": \"j3\", \"project\": \"q\", \"gpu\": {\"portion\": 0.5},"
    "                \"gpu_model\": [\"H100\"]},"
    "               {\"name\": \"j4\", \"project\": \"q\", \"gpu\": {\"portion\": 0.5},"
    "                \"node_selector\": {\"zone\": \"b\"}},"
    "               {\"name\": \"j5\", \"project\": \"q\", \"gpu\": {\"portion\": 0.5}, \"cpu\": "
    "10},"
    "               {\"name\": \"j6\", \"project\": \"p\", \"gpu\": {\"portion\": 0.5}}]}";

enum { J1, J2, J3, J4, J5, J6, NPEND };

struct fixture {
    json_t *j;
    struct ts_arena *a;
    struct ts_sched_snapshot s;
    struct ts_sched_decision d[8];
    struct ts_sched_pending_reason p[NPEND + 2];
    struct ts_sched_result r;
    struct ts_sched_slot slots[8][2];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    json_error_t je;
    struct ts_error err = {0};
    f->j = json_loads(snapshot, 0, &je);
    assert_non_null(f->j);
    f->a = ts_arena_new();
    if (ts_sched_snapshot_from_json(f->j, f->a, &f->s, &err) != TS_OK)
        fail_msg("%s", err.message);
    f->r.decisions = f->d;
    f->r.pending = f->p;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    ts_arena_free(f->a);
    json_decref(f->j);
    free(f);
    return 0;
}

static void bind(struct fixture *f, int job, int node, int gpu, int64_t bytes)
{
    size_t i = f->r.ndecisions++;
    f->slots[i][0] = (struct ts_sched_slot){.gpu = gpu, .memory_bytes = bytes};
    f->d[i] = (struct ts_sched_decision){.action = TS_SCHED_BIND,
                                         .job_id = f->s.pending[job].id,
                                         .job = job,
                                         .node = node,
                                         .slots = f->slots[i],
                                         .nslots = gpu < 0 ? 0 : 1,
                                         .code = "fits",
                                         .message = "fits"};
}

static void evict(struct fixture *f, int running, int64_t for_job_id)
{
    size_t i = f->r.ndecisions++;
    f->d[i] = (struct ts_sched_decision){.action = TS_SCHED_EVICT,
                                         .job_id = f->s.running[running].id,
                                         .job_was_running = true,
                                         .job = running,
                                         .node = f->s.running[running].node,
                                         .for_job_id = for_job_id,
                                         .code = "preempt",
                                         .message = "preempt"};
}

/* Every pending job but the one or two placed (-1: none) left with a reason,
 * in order. */
static void leave_pending(struct fixture *f, int placed, int placed2)
{
    for (int k = 0; k < NPEND; k++) {
        if (k == placed || k == placed2)
            continue;
        f->p[f->r.npending] =
            (struct ts_sched_pending_reason){.job_id = f->s.pending[k].id,
                                             .job = k,
                                             .code = "no_room",
                                             .message = "no room",
                                             .queue_position = (int64_t)f->r.npending + 1};
        f->r.npending++;
    }
}

static void expect_breach(struct fixture *f, const char *words)
{
    struct ts_error err = {0};
    if (ts_sched_check(&f->s, &f->r, &err) == TS_OK)
        fail_msg("passed; expected \"%s\"", words);
    if (strstr(err.message, words) == NULL)
        fail_msg("\"%s\" does not say \"%s\"", err.message, words);
}

static void a_result_that_keeps_every_invariant_passes(void **state)
{
    struct fixture *f = *state;
    bind(f, J2, 0, 1, 40 * GIB);
    leave_pending(f, J2, -1);
    struct ts_error err = {0};
    if (ts_sched_check(&f->s, &f->r, &err) != TS_OK)
        fail_msg("%s", err.message);
}

static void a_stop_that_serves_no_bind(void **state)
{
    struct fixture *f = *state;
    f->s.now = 5000; /* past r2's protection */
    evict(f, 1, f->s.pending[J1].id);
    leave_pending(f, -1, -1);
    f->p[f->r.npending] =
        (struct ts_sched_pending_reason){2, -1, "evicted", "evicted", (int64_t)f->r.npending + 1};
    f->r.npending++;
    expect_breach(f, "job 2 was stopped for job 3, which was not placed after it");
}

static void a_non_preemptible_job_stopped(void **state)
{
    struct fixture *f = *state;
    evict(f, 0, f->s.pending[J1].id);
    bind(f, J1, 0, 0, 80 * GIB);
    leave_pending(f, J1, -1);
    expect_breach(f, "non-preemptible job \"r1\" was stopped");
}

static void a_protected_job_stopped(void **state)
{
    struct fixture *f = *state;
    evict(f, 1, f->s.pending[J1].id);
    bind(f, J1, 0, 1, 80 * GIB);
    leave_pending(f, J1, -1);
    expect_breach(f, "job \"r2\" was stopped after 10 s, inside its 100 s protection");
}

static void a_job_stopped_twice(void **state)
{
    struct fixture *f = *state;
    f->s.now = 5000;
    evict(f, 1, f->s.pending[J1].id);
    evict(f, 1, f->s.pending[J1].id);
    bind(f, J1, 0, 1, 80 * GIB);
    leave_pending(f, J1, -1);
    expect_breach(f, "job \"r2\" was stopped twice");
}

static void a_bind_on_a_node_not_ready(void **state)
{
    struct fixture *f = *state;
    bind(f, J2, 1, 2, 40 * GIB);
    leave_pending(f, J2, -1);
    expect_breach(f, "job 4 was placed on n2, which is not ready");
}

static void a_bind_without_the_node_selector(void **state)
{
    struct fixture *f = *state;
    bind(f, J4, 0, 1, 40 * GIB);
    leave_pending(f, J4, -1);
    expect_breach(f, "job 6 was placed on n1 without zone=b");
}

static void a_bind_with_the_wrong_gpu_count(void **state)
{
    struct fixture *f = *state;
    bind(f, J2, 0, -1, 0);
    leave_pending(f, J2, -1);
    expect_breach(f, "job 4 got 0 GPUs and asked for 1");
}

static void a_gpu_of_another_node(void **state)
{
    struct fixture *f = *state;
    bind(f, J2, 0, 3, 40 * GIB);
    leave_pending(f, J2, -1);
    expect_breach(f, "job 4 got a GPU of another node");
}

static void a_gpu_model_not_accepted(void **state)
{
    struct fixture *f = *state;
    bind(f, J3, 0, 1, 40 * GIB);
    leave_pending(f, J3, -1);
    expect_breach(f, "job 5 got a A100 GPU it does not accept");
}

static void a_whole_gpu_that_is_in_use(void **state)
{
    struct fixture *f = *state;
    bind(f, J1, 0, 1, 80 * GIB);
    leave_pending(f, J1, -1);
    expect_breach(f, "job 3 got GPU 1 of n1 whole, but it is in use");
}

static void a_gpu_over_committed(void **state)
{
    struct fixture *f = *state;
    bind(f, J2, 0, 1, 41 * GIB);
    leave_pending(f, J2, -1);
    expect_breach(f, "GPU 1 of n1 is over-committed");
}

static void a_node_over_committed(void **state)
{
    struct fixture *f = *state;
    bind(f, J5, 0, 1, 40 * GIB);
    leave_pending(f, J5, -1);
    expect_breach(f, "node n1 is over-committed: 10 of 8 cpu");
}

static void a_project_over_its_limit(void **state)
{
    struct fixture *f = *state;
    bind(f, J6, 0, 1, 40 * GIB);
    leave_pending(f, J6, -1);
    expect_breach(f, "project \"p\" is over its limit: 1.5 of 1");
}

static void a_pending_job_without_a_reason(void **state)
{
    struct fixture *f = *state;
    bind(f, J2, 0, 1, 40 * GIB);
    leave_pending(f, J2, -1);
    f->r.npending--;
    expect_breach(f, "5 jobs are pending but 4 reasons were given");
}

static void a_reason_without_a_message(void **state)
{
    struct fixture *f = *state;
    leave_pending(f, -1, -1);
    f->p[2].message = "";
    expect_breach(f, "pending job 5 has no reason");
}

static void two_jobs_at_one_queue_position(void **state)
{
    struct fixture *f = *state;
    leave_pending(f, -1, -1);
    f->p[3].queue_position = 3;
    expect_breach(f, "pending job 6 has queue position 3");
}

static void a_department_over_its_limit(void **state)
{
    struct fixture *f = *state;
    struct ts_sched_department *d = (struct ts_sched_department *)&f->s.departments[0];
    d->has_limit = true;
    d->limit_gpus = 0.5;
    bind(f, J2, 0, 1, 40 * GIB);
    leave_pending(f, J2, -1);
    expect_breach(f, "department \"d\" is over its limit: 1 of 0.5");
}

static void a_job_that_refuses_swap_suspended(void **state)
{
    struct fixture *f = *state;
    f->s.now = 5000;
    ((struct ts_sched_running *)f->s.running)[1].request.refuses_swap = true;
    evict(f, 1, f->s.pending[J2].id);
    f->d[0].action = TS_SCHED_SUSPEND;
    bind(f, J2, 0, 1, 40 * GIB);
    leave_pending(f, J2, -1);
    int64_t pos = (int64_t)f->r.npending + 1;
    f->p[f->r.npending++] = (struct ts_sched_pending_reason){2, -1, "suspended", "suspended", pos};
    expect_breach(f, "job 2 refuses swap but was suspended");
}

static void a_bursting_job_that_refuses_swap_where_bursts_swap(void **state)
{
    struct fixture *f = *state;
    struct ts_sched_pending *p = (struct ts_sched_pending *)&f->s.pending[J2];
    p->request.refuses_swap = true;
    p->request.portion_limit = 1;
    ((struct ts_sched_node *)f->s.nodes)[0].swap_resolver = true;
    bind(f, J2, 0, 1, 40 * GIB);
    leave_pending(f, J2, -1);
    expect_breach(f, "job 4 refuses swap, can burst, and was placed on n1, whose resolver swaps");
}

static void a_suspended_job_resumed_on_other_gpus(void **state)
{
    struct fixture *f = *state;
    struct ts_sched_pending *p = (struct ts_sched_pending *)&f->s.pending[J2];
    static const struct ts_sched_slot held = {.gpu = 0, .memory_bytes = 40 * GIB};
    p->suspended_node = 0;
    p->suspended_slots = &held;
    p->nsuspended_slots = 1;
    bind(f, J2, 0, 1, 40 * GIB);
    leave_pending(f, J2, -1);
    expect_breach(f, "job 4 resumed on GPU 1 of n1, which it did not hold");
}

/* ts_sched_snapshot_validate: what the store hands the core is checked
 * before any cycle; each breach named. */
static void expect_invalid(struct fixture *f, const char *words)
{
    struct ts_error err = {0};
    if (ts_sched_snapshot_validate(&f->s, &err) == TS_OK)
        fail_msg("valid; expected \"%s\"", words);
    if (strstr(err.message, words) == NULL)
        fail_msg("\"%s\" does not say \"%s\"", err.message, words);
}

static void the_snapshot_is_valid(void **state)
{
    struct fixture *f = *state;
    struct ts_error err = {0};
    if (ts_sched_snapshot_validate(&f->s, &err) != TS_OK)
        fail_msg("%s", err.message);
}

static void an_unknown_strategy_is_invalid(void **state)
{
    struct fixture *f = *state;
    f->s.config.strategy = "worstfit";
    expect_invalid(f, "unknown strategy \"worstfit\"");
}

static void a_department_out_of_range_is_invalid(void **state)
{
    struct fixture *f = *state;
    ((struct ts_sched_project *)f->s.projects)[1].department = 4;
    expect_invalid(f, "project \"q\": department index 4 is out of range (0..1)");
}

static void a_gpu_all_reserve_is_invalid(void **state)
{
    struct fixture *f = *state;
    struct ts_sched_gpu *g = (struct ts_sched_gpu *)&f->s.gpus[3];
    g->reserve_bytes = g->memory_bytes;
    expect_invalid(f, "gpu 1 of node \"n2\": memory must exceed the reserve");
}

static void a_slot_on_another_node_is_invalid(void **state)
{
    struct fixture *f = *state;
    ((struct ts_sched_slot *)f->s.running[1].slots)[0].gpu = 2;
    expect_invalid(f, "running job \"r2\": gpu index 2 is not on its node");
}

static void a_slot_that_packs_nothing_is_invalid(void **state)
{
    struct fixture *f = *state;
    ((struct ts_sched_slot *)f->s.running[0].slots)[0].memory_bytes = 0;
    expect_invalid(f, "running job \"r1\": slot 0 packs no memory");
}

static void suspended_gpus_without_a_node_are_invalid(void **state)
{
    struct fixture *f = *state;
    struct ts_sched_pending *p = (struct ts_sched_pending *)&f->s.pending[J2];
    p->suspended_slots = f->s.running[1].slots;
    p->nsuspended_slots = 1;
    expect_invalid(f, "pending job \"j2\": suspended GPUs without a suspended node");
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(a_result_that_keeps_every_invariant_passes),
        T(a_stop_that_serves_no_bind),
        T(a_non_preemptible_job_stopped),
        T(a_protected_job_stopped),
        T(a_job_stopped_twice),
        T(a_bind_on_a_node_not_ready),
        T(a_bind_without_the_node_selector),
        T(a_bind_with_the_wrong_gpu_count),
        T(a_gpu_of_another_node),
        T(a_gpu_model_not_accepted),
        T(a_whole_gpu_that_is_in_use),
        T(a_gpu_over_committed),
        T(a_node_over_committed),
        T(a_project_over_its_limit),
        T(a_pending_job_without_a_reason),
        T(a_reason_without_a_message),
        T(two_jobs_at_one_queue_position),
        T(a_department_over_its_limit),
        T(a_job_that_refuses_swap_suspended),
        T(a_bursting_job_that_refuses_swap_where_bursts_swap),
        T(a_suspended_job_resumed_on_other_gpus),
        T(the_snapshot_is_valid),
        T(an_unknown_strategy_is_invalid),
        T(a_department_out_of_range_is_invalid),
        T(a_gpu_all_reserve_is_invalid),
        T(a_slot_on_another_node_is_invalid),
        T(a_slot_that_packs_nothing_is_invalid),
        T(suspended_gpus_without_a_node_are_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
