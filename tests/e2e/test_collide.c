/*
 * test_collide.c - GPU memory collisions end to end under the wait and
 * priority resolvers: a real server, real agents on 4 GiB simulated GPUs
 * (2 GiB per-GPU reserve: 2 GiB usable; jobs of 1 to 1.5 GiB, two or
 * three a GPU: sizes kept small because every byte is written and read
 * back, which costs seconds a GiB here), real jobs under the real CUDA
 * interposer. The jobs are cuda_job (tests/agent/cuda_job.c), which writes
 * every byte of its device memory and checks every byte later at the same
 * addresses (exit 3 on a lost byte, 4 when an allocation fails); flag files
 * order the steps of the jobs and the test. Every case checks the jobs'
 * memory byte for byte, their exit codes and states, and the events both
 * jobs of a collision get through GET /jobs/{id}/events.
 *
 *   n1  --collision wait      (--collision-wait 8s, a 2 GiB host swap reserve)
 *   n2  --collision priority  (--collision-wait 8s, --collision-grace 1s)
 *
 *   e2e_test_collide [CASE-PATTERN]
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"

static int setup(void **state)
{
    static const struct ts_e2e_project_spec projects[] = {{"lab", 3}, {NULL, 0}};
    static const struct ts_e2e_agent_spec agents[] = {
        {"n1", "sim:1x4GiB", "resolver=wait",
         "--collision wait --collision-wait 8s --gpu-reserve 2GiB --swap-reserve 2GiB"},
        {"n2", "sim:1x4GiB", "resolver=priority",
         "--collision priority --collision-wait 8s --collision-grace 1s --gpu-reserve 2GiB"},
        {NULL, NULL, NULL, NULL}};
    return ts_e2e_setup(state, NULL, projects, agents);
}

/* Submit a job of kind to project "lab" on the node whose resolver label
 * is `resolver`; gpu is the "gpu" object as JSON text, script the shell
 * text it runs. */
static long long submit(struct ts_e2e *c, const char *name, const char *kind, const char *resolver,
                        const char *gpu, const char *script)
{
    char extra[512];
    /* the interposer says what it does in the job's output (shown when a
     * case fails) */
    snprintf(extra, sizeof(extra),
             "{\"kind\": \"%s\", \"node_selector\": {\"resolver\": \"%s\"}, "
             "\"env\": {\"TESSERA_SHIM_LOG\": \"1\"}}",
             kind, resolver);
    long long id = ts_e2e_submit(&c->srv, "lab", name, gpu, "2s", extra, script);
    assert_true(id > 0);
    return id;
}

static struct ts_e2e_agent *node(struct ts_e2e *c, const char *name)
{
    struct ts_e2e_agent *a = ts_e2e_agent_named(c, name);
    assert_non_null(a);
    return a;
}

/* The job ends in state with that exit code. */
static void ends(struct ts_it_server *s, long long id, const char *state, int code, double secs)
{
    json_t *j = ts_e2e_wait_state(s, id, state, secs);
    assert_non_null(j);
    assert_int_equal(ts_it_int(j, "exit_code"), code);
    json_decref(j);
}

static void has_output(struct ts_e2e_agent *a, long long id, int attempt, const char *text)
{
    if (!ts_e2e_wait_output(a, id, attempt, text, 180)) {
        char *o = ts_e2e_output(a, id, attempt);
        fail_msg("job %lld attempt %d has no \"%s\" in its output:\n%s", id, attempt, text, o);
    }
}

/* The milliseconds cuda_job reports for its allocation of mib MiB. */
static double alloc_ms(struct ts_e2e_agent *a, long long id, int attempt, int mib)
{
    char *o = ts_e2e_output(a, id, attempt), want[64];
    snprintf(want, sizeof(want), "alloc ok dev=0 mib=%d ", mib);
    const char *l = strstr(o, want), *m = l != NULL ? strstr(l, " ms=") : NULL;
    double v = m != NULL ? atof(m + 4) : -1;
    free(o);
    return v;
}

static char ev_text[64];
static const char *job_words(long long id)
{
    snprintf(ev_text, sizeof(ev_text), "job %lld", id);
    return ev_text;
}

/* ---- wait ------------------------------------------------------------------ */

/* A holds 1.5 GiB (1 above its 512 MiB request); B's 1 GiB burst does
 * not fit and waits until A frees, then gets it: no out-of-memory, both
 * intact. */
static void wait_a_burst_waits_for_the_holders_burst_then_gets_it(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *n1 = node(c, "n1");
    char sa[2048], sb[2048];
    const char *burst = "{\"memory\": \"512MiB\", \"memory_limit\": \"2GiB\"}";
    long long a =
        submit(c, "w1-a", "train", "wait", burst,
               ts_e2e_cuda_script(c, sa, sizeof(sa),
                                  "alloc 0 512 alloc 0 1024 check mark @w1a await @w1go free"));
    assert_true(ts_e2e_flag_wait(c, "w1a", 180));
    long long b =
        submit(c, "w1-b", "inference", "wait", burst,
               ts_e2e_cuda_script(c, sb, sizeof(sb), "alloc 0 512 alloc 0 1024 check free"));
    has_output(n1, b, 1, "alloc ok dev=0 mib=512 "); /* within its request: at once */
    assert_true(ts_e2e_wait_event(s, b, "memory_wait", job_words(a), 60));
    assert_true(ts_e2e_event_has(s, b, "memory_wait", "a burst above its request"));
    char *o = ts_e2e_output(n1, b, 1);
    assert_null(strstr(o, "mib=1024")); /* still waiting, not failed */
    free(o);
    ts_e2e_sleep(1.0);
    ts_e2e_flag_set(c, "w1go"); /* A checks and frees */
    has_output(n1, b, 1, "alloc ok dev=0 mib=1024 ");
    assert_true(alloc_ms(n1, b, 1, 1024) >= 1000); /* it waited for the room */
    has_output(n1, b, 1, "data intact 1610612736 bytes");
    has_output(n1, a, 1, "data intact 1610612736 bytes");
    ends(s, a, "succeeded", 0, 180);
    ends(s, b, "succeeded", 0, 180);
    assert_int_equal(ts_e2e_event_count(s, b, "out_of_memory"), 0);
    c->passed = true;
}

/* Three jobs: A holds 1.5 GiB (1 above its request), B takes its 512 MiB
 * request (the GPU is full) and its 512 MiB burst waits --collision-wait
 * (8 s) and gets out-of-memory, with an event on both jobs naming the
 * other; then C's 1 GiB within its request waits (nothing is taken from A
 * under wait) until A frees, and gets it. */
static void wait_a_burst_gives_up_after_collision_wait_and_a_request_waits_for_a_burst(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *n1 = node(c, "n1");
    char sa[2048], sb[2048], sc[2048];
    const char *burst = "{\"memory\": \"512MiB\", \"memory_limit\": \"2GiB\"}";
    long long a =
        submit(c, "w2-a", "train", "wait", burst,
               ts_e2e_cuda_script(c, sa, sizeof(sa),
                                  "alloc 0 512 alloc 0 1024 check mark @w2a await @w2go free"));
    assert_true(ts_e2e_flag_wait(c, "w2a", 180));
    long long b = submit(c, "w2-b", "train", "wait", burst,
                         ts_e2e_cuda_script(c, sb, sizeof(sb), "alloc 0 512 alloc 0 512 check"));
    /* cuda_job exits 4 when an allocation fails: the ordinary OOM, after the wait */
    ends(s, b, "failed", 4, 180);
    has_output(n1, b, 1, "alloc failed dev=0 mib=512 err=2");
    assert_true(ts_e2e_wait_event(s, b, "out_of_memory", job_words(a), 60));
    assert_true(ts_e2e_event_has(s, b, "out_of_memory", "after waiting 8.0 s"));
    assert_true(ts_e2e_wait_event(s, a, "out_of_memory", job_words(b), 60));

    long long cj = submit(c, "w2-c", "inference", "wait", "{\"memory\": \"1GiB\"}",
                          ts_e2e_cuda_script(c, sc, sizeof(sc), "alloc 0 1024 check"));
    assert_true(ts_e2e_wait_event(s, cj, "memory_wait", "within its request", 60));
    ts_e2e_sleep(1.0);
    json_t *j = ts_e2e_job(s, a);
    assert_string_equal(ts_it_str(j, "state"), "running"); /* nothing was taken from A */
    json_decref(j);
    ts_e2e_flag_set(c, "w2go");
    has_output(n1, cj, 1, "data intact 1073741824 bytes");
    has_output(n1, a, 1, "data intact 1610612736 bytes");
    ends(s, a, "succeeded", 0, 180);
    ends(s, cj, "succeeded", 0, 180);
    c->passed = true;
}

/* A job suspended through the API frees its GPU; B bursts into the room and
 * holds it. Resumed, A waits for its memory: it stays resuming, its reason
 * saying what it waits for and who holds the room, never running without
 * its memory; when B frees, A is running again, intact. */
static void wait_a_resumed_job_stays_resuming_until_its_memory_is_back(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *n1 = node(c, "n1");
    char sa[2048], sb[2048], path[96];
    long long a =
        submit(c, "w3-a", "train", "wait", "{\"memory\": \"1GiB\"}",
               ts_e2e_cuda_script(c, sa, sizeof(sa), "alloc 0 1024 mark @w3a await @w3go check"));
    assert_true(ts_e2e_flag_wait(c, "w3a", 180));
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", a);
    assert_int_equal(ts_e2e_req(s, "POST", path, "{}"), 202);
    json_t *j = ts_e2e_wait_state(s, a, "suspended", 120);
    assert_non_null(j);
    json_decref(j);
    long long b =
        submit(c, "w3-b", "train", "wait", "{\"memory\": \"512MiB\", \"memory_limit\": \"2GiB\"}",
               ts_e2e_cuda_script(c, sb, sizeof(sb),
                                  "alloc 0 512 alloc 0 1024 mark @w3b await @w3bgo check free"));
    assert_true(ts_e2e_flag_wait(c, "w3b", 180)); /* 1.5 GiB of 2: A's 1 GiB does not fit */
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/resume", a);
    assert_int_equal(ts_e2e_req(s, "POST", path, "{}"), 202);
    j = ts_e2e_wait_state(s, a, "resuming", 120);
    assert_non_null(j);
    json_decref(j);
    double until = ts_e2e_now() + 20;
    bool said = false;
    char seen[512] = "";
    while (!said && ts_e2e_now() < until) {
        j = ts_e2e_job(s, a);
        assert_string_equal(ts_it_str(j, "state"), "resuming");
        json_t *why = json_object_get(j, "pending_reason");
        const char *code = ts_it_str(why, "code"), *msg = ts_it_str(why, "message");
        snprintf(seen, sizeof(seen), "%s: %s", code, msg);
        said = strcmp(code, "waiting_for_memory") == 0 && strstr(msg, job_words(b)) != NULL &&
               strstr(msg, "1.00 GiB") != NULL;
        json_decref(j);
        ts_e2e_sleep(0.3);
    }
    if (!said)
        fail_msg("the resuming job's reason does not say what it waits for: %s", seen);
    ts_e2e_sleep(1.0);
    j = ts_e2e_job(s, a);
    assert_string_equal(ts_it_str(j, "state"), "resuming"); /* still: its memory is not back */
    json_decref(j);
    ts_e2e_flag_set(c, "w3bgo"); /* B frees */
    j = ts_e2e_wait_state(s, a, "running", 120);
    assert_non_null(j);
    assert_int_equal(ts_it_int(j, "attempt"), 1);
    json_decref(j);
    assert_true(ts_e2e_wait_event(s, a, "resumed", "back from the host swap reserve", 60));
    ts_e2e_flag_set(c, "w3go");
    has_output(n1, a, 1, "data intact 1073741824 bytes");
    ends(s, a, "succeeded", 0, 180);
    ends(s, b, "succeeded", 0, 180);
    c->passed = true;
}

/* ---- priority -------------------------------------------------------------- */

/* The script of a job that bursts on its first attempt and, resumed after
 * an eviction, only takes 512 MiB (its request) after the steps `then`
 * and checks it. */
static const char *bursting(struct ts_e2e *c, char *buf, size_t len, const char *first,
                            const char *then)
{
    char s1[1536];
    ts_e2e_cuda_script(c, s1, sizeof(s1), first);
    int n = snprintf(
        buf, len,
        "if [ \"$TESSERA_RESUME_COUNT\" -gt 0 ]; then exec %s %s alloc 0 512 check; fi; %s",
        ts_e2e_cuda_job(), then, s1);
    if (n < 0 || (size_t)n >= len)
        fail_msg("script too long");
    return buf;
}

/* Burst against burst, higher priority first: inference B's burst ends the
 * training job A holding the room; A is requeued (never failed), resumes
 * later and succeeds; both jobs' events say who made room for whom. */
static void
priority_a_higher_priority_burst_ends_the_lower_priority_holder_which_is_requeued(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *n2 = node(c, "n2");
    char sa[2048], sb[2048];
    const char *burst = "{\"memory\": \"512MiB\", \"memory_limit\": \"2GiB\"}";
    long long a =
        submit(c, "p1-a", "train", "priority", burst,
               bursting(c, sa, sizeof(sa), "alloc 0 512 alloc 0 1024 mark @p1a idle 60", ""));
    assert_true(ts_e2e_flag_wait(c, "p1a", 180));
    long long b =
        submit(c, "p1-b", "inference", "priority", burst,
               ts_e2e_cuda_script(c, sb, sizeof(sb), "alloc 0 512 alloc 0 1024 check free"));
    has_output(n2, b, 1, "data intact 1610612736 bytes");
    ends(s, b, "succeeded", 0, 180);
    /* A: back in the queue as an eviction, then run again and done */
    assert_true(ts_e2e_wait_event(s, a, "requeued", job_words(b), 60));
    assert_true(ts_e2e_event_has(s, a, "requeued", "priority resolver"));
    json_t *j = ts_e2e_wait_state(s, a, "succeeded", 120);
    assert_non_null(j);
    assert_int_equal(ts_it_int(j, "resume_count"), 1);
    json_decref(j);
    assert_int_equal(ts_e2e_event_count(s, a, "failed"), 0);
    /* the events of the attempt that was ended reach the job after its requeue */
    assert_true(ts_e2e_wait_event(s, a, "memory_ended", job_words(b), 60));
    char want[96];
    snprintf(want, sizeof(want), "job %lld (priority 50, 1.50 GiB on GPU 0) was ended", a);
    assert_true(ts_e2e_wait_event(s, b, "memory_ended", want, 60));
    assert_true(ts_e2e_wait_event(s, b, "memory_wait", job_words(a), 60));
    c->passed = true;
}

/* The other direction: a training job's burst never ends an inference
 * holder. It waits --collision-wait and gets out-of-memory; the holder runs
 * on untouched. */
static void priority_a_lower_priority_burst_never_ends_a_higher_priority_holder(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *n2 = node(c, "n2");
    char sa[2048], sb[2048];
    const char *burst = "{\"memory\": \"512MiB\", \"memory_limit\": \"2GiB\"}";
    long long a =
        submit(c, "p2-a", "inference", "priority", burst,
               ts_e2e_cuda_script(c, sa, sizeof(sa),
                                  "alloc 0 512 alloc 0 1024 mark @p2a await @p2go check free"));
    assert_true(ts_e2e_flag_wait(c, "p2a", 180));
    long long b = submit(c, "p2-b", "train", "priority", burst,
                         ts_e2e_cuda_script(c, sb, sizeof(sb), "alloc 0 512 alloc 0 1024 check"));
    ends(s, b, "failed", 4, 180);
    has_output(n2, b, 1, "alloc failed dev=0 mib=1024 err=2");
    assert_true(ts_e2e_wait_event(s, b, "out_of_memory", job_words(a), 60));
    assert_int_equal(ts_e2e_event_count(s, a, "memory_ended"), 0);
    ts_e2e_flag_set(c, "p2go");
    has_output(n2, a, 1, "data intact 1610612736 bytes");
    ends(s, a, "succeeded", 0, 180);
    json_t *j = ts_e2e_job(s, a);
    assert_int_equal(ts_it_int(j, "resume_count"), 0);
    json_decref(j);
    c->passed = true;
}

/* Three jobs: an inference job H and a training job L both hold bursts;
 * C's allocation within its request does not fit. The guarantee takes the
 * room from the lowest priority holder, L, alone; H keeps its memory. */
static void priority_a_request_ends_the_lowest_priority_of_the_burst_holders(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *n2 = node(c, "n2");
    char sh[2048], sl[2048], sc[2048];
    const char *burst = "{\"memory\": \"512MiB\", \"memory_limit\": \"1GiB\"}";
    long long h =
        submit(c, "p3-h", "inference", "priority", burst,
               ts_e2e_cuda_script(c, sh, sizeof(sh),
                                  "alloc 0 512 alloc 0 512 mark @p3h await @p3go check free"));
    assert_true(ts_e2e_flag_wait(c, "p3h", 180));
    char then[700], path[600];
    snprintf(then, sizeof(then), "await %s", ts_e2e_flag(c, "p3go", path, sizeof(path)));
    long long l =
        submit(c, "p3-l", "train", "priority", burst,
               bursting(c, sl, sizeof(sl), "alloc 0 512 alloc 0 512 mark @p3l idle 60", then));
    assert_true(ts_e2e_flag_wait(c, "p3l", 180)); /* 2 of 2 GiB held */
    long long cj = submit(c, "p3-c", "interactive", "priority", "{\"memory\": \"1GiB\"}",
                          ts_e2e_cuda_script(c, sc, sizeof(sc), "alloc 0 1024 check free"));
    has_output(n2, cj, 1, "data intact 1073741824 bytes");
    ends(s, cj, "succeeded", 0, 180);
    assert_true(ts_e2e_wait_event(s, l, "requeued", job_words(cj), 60));
    assert_true(ts_e2e_wait_event(s, l, "memory_ended", "within its request", 60));
    assert_int_equal(ts_e2e_event_count(s, h, "memory_ended"), 0);
    ts_e2e_flag_set(c, "p3go");
    has_output(n2, h, 1, "data intact 1073741824 bytes");
    ends(s, h, "succeeded", 0, 180);
    json_t *j = ts_e2e_wait_state(s, l, "succeeded", 120);
    assert_non_null(j);
    assert_int_equal(ts_it_int(j, "resume_count"), 1);
    json_decref(j);
    c->passed = true;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(wait_a_burst_waits_for_the_holders_burst_then_gets_it,
                                        setup, ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(
            wait_a_burst_gives_up_after_collision_wait_and_a_request_waits_for_a_burst, setup,
            ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(wait_a_resumed_job_stays_resuming_until_its_memory_is_back,
                                        setup, ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(
            priority_a_higher_priority_burst_ends_the_lower_priority_holder_which_is_requeued,
            setup, ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(
            priority_a_lower_priority_burst_never_ends_a_higher_priority_holder, setup,
            ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(
            priority_a_request_ends_the_lowest_priority_of_the_burst_holders, setup,
            ts_e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
