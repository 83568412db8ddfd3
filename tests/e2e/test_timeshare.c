/*
 * test_timeshare.c - the swap resolver end to end: GPU memory time-shared
 * between jobs whose bursts do not fit together, suspend and resume around
 * another job's burst, and idle detach. A real server, a real agent whose
 * node swaps (a 4 GiB simulated GPU, 2 GiB per-GPU reserve: 2 GiB usable,
 * jobs of 1 to 1.5 GiB: every byte is written and read back, which costs
 * seconds a GiB here; a 4 GiB host swap reserve; --swap-idle 1s,
 * --swap-quantum 2s), real jobs
 * under the real CUDA interposer: cuda_job (every byte written, every byte
 * checked at the same addresses; exit 3 on a lost byte, 4 on a failed
 * allocation) and tessera-gpuload (busy training steps, its buffers
 * checked every step).
 *
 *   e2e_test_timeshare [CASE-PATTERN]
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"

#define GiB (1024ll * 1024 * 1024)

static int setup(void **state)
{
    static const char *const server[] = {"--idle-swap-after", "3s", NULL};
    static const struct ts_e2e_project_spec projects[] = {{"lab", 3}, {NULL, 0}};
    static const struct ts_e2e_agent_spec agents[] = {
        {"n3", "sim:1x4GiB", NULL,
         "--collision swap --swap-reserve 4GiB --swap-idle 1s --swap-quantum 2s "
         "--gpu-reserve 2GiB --collision-wait 30s"},
        {NULL, NULL, NULL, NULL}};
    return ts_e2e_setup(state, server, projects, agents);
}

static long long submit(struct ts_e2e *c, const char *name, const char *kind, const char *gpu,
                        const char *more, const char *script)
{
    char extra[512];
    /* the interposer says what it does in the job's output (shown when a
     * case fails) */
    snprintf(extra, sizeof(extra), "{\"kind\": \"%s\", \"env\": {\"TESSERA_SHIM_LOG\": \"1\"}%s%s}",
             kind, more ? ", " : "", more ? more : "");
    long long id = ts_e2e_submit(&c->srv, "lab", name, gpu, "2s", extra, script);
    assert_true(id > 0);
    return id;
}

static void has_output(struct ts_e2e_agent *a, long long id, const char *text)
{
    if (!ts_e2e_wait_output(a, id, 1, text, 180)) {
        char *o = ts_e2e_output(a, id, 1);
        fail_msg("job %lld has no \"%s\" in its output:\n%s", id, text, o);
    }
}

static void succeeds(struct ts_it_server *s, long long id, double secs)
{
    json_t *j = ts_e2e_wait_state(s, id, "succeeded", secs);
    assert_non_null(j);
    assert_int_equal(ts_it_int(j, "exit_code"), 0);
    assert_int_equal(ts_it_int(j, "resume_count"), 0); /* never ended, never restarted */
    json_decref(j);
}

static char words[64];
static const char *job_words(long long id)
{
    snprintf(words, sizeof(words), "job %lld", id);
    return words;
}

/* A holds 1.5 GiB (1 above its request) and goes idle; B's burst does not
 * fit: A is swapped out, B gets the room. A's next GPU call waits for its
 * memory and, B idle by then, swaps B out to come back; B's next call
 * brings B back once A is done. Every byte of both is intact, nobody is
 * ended; both directions of priority give the same. */
static void idle_holder_swapped_out(struct ts_e2e *c, const char *kind_a, const char *kind_b,
                                    const char *tag)
{
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *n3 = ts_e2e_agent_named(c, "n3");
    char sa[2048], sb[2048], steps[512], name[32];
    const char *burst = "{\"memory\": \"512MiB\", \"memory_limit\": \"1536MiB\"}";
    snprintf(steps, sizeof(steps), "alloc 0 512 alloc 0 1024 mark @%sa await @%sgo check free", tag,
             tag);
    snprintf(name, sizeof(name), "%s-a", tag);
    long long a =
        submit(c, name, kind_a, burst, NULL, ts_e2e_cuda_script(c, sa, sizeof(sa), steps));
    snprintf(name, sizeof(name), "%sa", tag);
    assert_true(ts_e2e_flag_wait(c, name, 180));
    ts_e2e_sleep(1.5); /* A has been idle for --swap-idle when B comes */
    snprintf(steps, sizeof(steps), "alloc 0 512 alloc 0 1024 mark @%sb await @%sbgo check free",
             tag, tag);
    snprintf(name, sizeof(name), "%s-b", tag);
    long long b =
        submit(c, name, kind_b, burst, NULL, ts_e2e_cuda_script(c, sb, sizeof(sb), steps));
    snprintf(name, sizeof(name), "%sb", tag);
    assert_true(ts_e2e_flag_wait(c, name, 180)); /* B has its 1.5 GiB: A was moved out */
    assert_true(ts_e2e_wait_event(s, a, "swapped_out", job_words(b), 60));
    assert_true(ts_e2e_wait_event(s, b, "swapped_out", job_words(a), 60));
    assert_true(ts_e2e_event_has(s, a, "swapped_out", "idle for"));
    assert_true(ts_e2e_gpu_used(n3, 0) <= 2 * GiB); /* A's 1.5 GiB are off it */
    snprintf(name, sizeof(name), "%sgo", tag);
    ts_e2e_flag_set(c, name); /* A's next call: back, B (idle) going out */
    has_output(n3, a, "data intact 1610612736 bytes");
    assert_true(ts_e2e_wait_event(s, a, "swapped_in", NULL, 60));
    snprintf(name, sizeof(name), "%sbgo", tag);
    ts_e2e_flag_set(c, name);
    has_output(n3, b, "data intact 1610612736 bytes");
    succeeds(s, a, 180);
    succeeds(s, b, 180);
    assert_int_equal(ts_e2e_event_count(s, a, "memory_ended"), 0);
    assert_int_equal(ts_e2e_event_count(s, b, "memory_ended"), 0);
    assert_int_equal(ts_e2e_event_count(s, a, "out_of_memory"), 0);
    assert_int_equal(ts_e2e_event_count(s, b, "out_of_memory"), 0);
}

static void an_idle_burst_holder_is_swapped_out_for_a_burst_and_both_stay_intact(void **state)
{
    struct ts_e2e *c = *state;
    idle_holder_swapped_out(c, "train", "inference", "s1");
    idle_holder_swapped_out(c, "inference", "train", "s2");
    c->passed = true;
}

/* A request takes its room from a burst holder that is busy and inside its
 * turn: the guarantee does not wait for turns. The holder (gpuload, a
 * kernel and a check of its buffers every 200 ms) comes back when the
 * request's job is done and finishes without losing a byte. */
static void a_request_takes_its_room_from_a_busy_burst_holder_at_once(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *n3 = ts_e2e_agent_named(c, "n3");
    char sa[1024], sc[2048];
    snprintf(sa, sizeof(sa),
             "exec %s/tessera-gpuload --pattern train --memory 1536MiB --buffers 3 --touch 16MiB "
             "--step 200ms --busy 0.5 --duration 40s",
             ts_e2e_bin_dir());
    long long a = submit(c, "busy", "train",
                         "{\"memory\": \"512MiB\", \"memory_limit\": \"1536MiB\"}", NULL, sa);
    has_output(n3, a, "step=5 ");
    double t0 = ts_e2e_now();
    long long r = submit(c, "req", "inference", "{\"memory\": \"1GiB\"}", NULL,
                         ts_e2e_cuda_script(c, sc, sizeof(sc), "alloc 0 1024 check free"));
    has_output(n3, r, "data intact 1073741824 bytes");
    assert_true(ts_e2e_now() - t0 < 35); /* not after the holder's whole run (40 s) */
    succeeds(s, r, 180);
    assert_true(ts_e2e_wait_event(s, a, "swapped_out", job_words(r), 60));
    succeeds(s, a, 180); /* gpuload exits 3 on any lost byte */
    char *o = ts_e2e_output(n3, a, 1);
    assert_true(ts_e2e_count_lines(o, "step=") >= 10);
    free(o);
    c->passed = true;
}

/* Time-sharing: two jobs that both keep using bursts that do not fit
 * together (1.5 + 1.5 GiB on 2 usable) for 20 s each take turns of the quantum:
 * both make progress all along, both finish intact, neither is ended or
 * gets out-of-memory. */
static void two_jobs_that_keep_touching_their_bursts_take_turns_and_both_finish_intact(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *n3 = ts_e2e_agent_named(c, "n3");
    char sa[1024];
    snprintf(sa, sizeof(sa),
             "exec %s/tessera-gpuload --pattern train --memory 1536MiB --buffers 3 --touch 16MiB "
             "--step 300ms --busy 0.5 --duration 20s",
             ts_e2e_bin_dir());
    const char *burst = "{\"memory\": \"512MiB\", \"memory_limit\": \"1536MiB\"}";
    long long a = submit(c, "share-a", "train", burst, NULL, sa);
    has_output(n3, a, "step=2 ");
    long long b = submit(c, "share-b", "train", burst, NULL, sa);
    /* while both run, each keeps stepping: sampled twice, 6 s apart */
    has_output(n3, b, "step=2 ");
    int steps[2][2];
    for (int k = 0; k < 2; k++) {
        char *oa = ts_e2e_output(n3, a, 1), *ob = ts_e2e_output(n3, b, 1);
        steps[k][0] = ts_e2e_count_lines(oa, "step=");
        steps[k][1] = ts_e2e_count_lines(ob, "step=");
        free(oa);
        free(ob);
        if (k == 0)
            ts_e2e_sleep(6);
    }
    succeeds(s, a, 90);
    succeeds(s, b, 90);
    char *oa = ts_e2e_output(n3, a, 1), *ob = ts_e2e_output(n3, b, 1);
    int done_a = ts_e2e_count_lines(oa, "step="), done_b = ts_e2e_count_lines(ob, "step=");
    free(oa);
    free(ob);
    print_message("time-sharing: steps A %d -> %d (of %d), B %d -> %d (of %d) in 6 s\n",
                  steps[0][0], steps[1][0], done_a, steps[0][1], steps[1][1], done_b);
    assert_true(steps[1][0] > steps[0][0]); /* A went on while B ran */
    assert_true(steps[1][1] > steps[0][1]); /* and B while A ran */
    assert_true(ts_e2e_event_count(s, a, "swapped_out") >= 1);
    assert_true(ts_e2e_event_count(s, b, "swapped_out") >= 1);
    assert_true(ts_e2e_event_has(s, a, "swapped_out", job_words(b)));
    assert_true(ts_e2e_event_has(s, b, "swapped_out", job_words(a)));
    assert_int_equal(ts_e2e_event_count(s, a, "out_of_memory"), 0);
    assert_int_equal(ts_e2e_event_count(s, b, "out_of_memory"), 0);
    c->passed = true;
}

/* Suspend frees the GPU; another job's burst takes the room; resume brings
 * the suspended job back (its memory within its request: the burst holder
 * is swapped out for it), intact, and the burst holder comes back after. */
static void suspend_lets_another_job_burst_into_the_room_and_resume_comes_back_intact(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *n3 = ts_e2e_agent_named(c, "n3");
    char sa[2048], sb[2048], path[96];
    long long a =
        submit(c, "held", "train", "{\"memory\": \"1GiB\"}", NULL,
               ts_e2e_cuda_script(c, sa, sizeof(sa), "alloc 0 1024 mark @s4a await @s4go check"));
    assert_true(ts_e2e_flag_wait(c, "s4a", 180));
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", a);
    assert_int_equal(ts_e2e_req(s, "POST", path, "{}"), 202);
    json_t *j = ts_e2e_wait_state(s, a, "suspended", 120);
    assert_non_null(j);
    json_decref(j);
    long long b =
        submit(c, "into", "train", "{\"memory\": \"512MiB\", \"memory_limit\": \"1536MiB\"}", NULL,
               ts_e2e_cuda_script(c, sb, sizeof(sb),
                                  "alloc 0 512 alloc 0 1024 mark @s4b idle 3 check free"));
    assert_true(ts_e2e_flag_wait(c, "s4b", 180)); /* 1.5 GiB, in the room A left */
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/resume", a);
    assert_int_equal(ts_e2e_req(s, "POST", path, "{}"), 202);
    j = ts_e2e_wait_state(s, a, "running", 120);
    assert_non_null(j);
    assert_int_equal(ts_it_int(j, "attempt"), 1);
    json_decref(j);
    assert_true(ts_e2e_wait_event(s, b, "swapped_out", job_words(a), 60));
    ts_e2e_flag_set(c, "s4go");
    has_output(n3, a, "data intact 1073741824 bytes");
    has_output(n3, b, "data intact 1610612736 bytes");
    succeeds(s, a, 180);
    succeeds(s, b, 180);
    c->passed = true;
}

/* Idle detach: an interactive job (the server's --idle-swap-after 3s is its
 * kind's default) that makes no GPU call for 3 s has its memory moved to
 * the host reserve while it keeps running; the server shows it as swapped;
 * its next call brings it back intact. A training job (off by default)
 * stays; one that asks for it is detached too. */
static void an_idle_notebook_is_detached_and_its_next_call_brings_it_back(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *n3 = ts_e2e_agent_named(c, "n3");
    char sn[2048], st[2048], sx[2048];
    const char *gpu = "{\"memory\": \"1GiB\", \"memory_limit\": \"1536MiB\"}";
    long long nb =
        submit(c, "notebook", "interactive", gpu, NULL,
               ts_e2e_cuda_script(c, sn, sizeof(sn), "alloc 0 1024 mark @d1 await @dgo check"));
    long long tr =
        submit(c, "trainer", "train", gpu, NULL,
               ts_e2e_cuda_script(c, st, sizeof(st), "alloc 0 1024 mark @d2 await @dgo check"));
    json_t *j = ts_e2e_job(s, nb);
    assert_int_equal(ts_it_int(j, "idle_swap_after_seconds"), 3);
    json_decref(j);
    j = ts_e2e_job(s, tr);
    assert_int_equal(ts_it_int(j, "idle_swap_after_seconds"), 0);
    json_decref(j);
    assert_true(ts_e2e_flag_wait(c, "d1", 180) && ts_e2e_flag_wait(c, "d2", 180));
    assert_true(ts_e2e_wait_event(s, nb, "detached", "without a GPU call", 60));
    double until = ts_e2e_now() + 15;
    long long swapped = 0;
    while (swapped != GiB && ts_e2e_now() < until) {
        j = ts_e2e_job(s, nb);
        assert_string_equal(ts_it_str(j, "state"), "running");
        swapped = ts_it_int(j, "swapped_bytes");
        json_decref(j);
        ts_e2e_sleep(0.3);
    }
    assert_int_equal(swapped, GiB);
    assert_true(ts_e2e_gpu_used(n3, 0) <= GiB + 64 * 1024 * 1024); /* the trainer's only */
    ts_e2e_sleep(2.0);
    assert_int_equal(ts_e2e_event_count(s, tr, "detached"), 0);
    ts_e2e_flag_set(c, "dgo");
    has_output(n3, nb, "data intact 1073741824 bytes");
    has_output(n3, tr, "data intact 1073741824 bytes");
    succeeds(s, nb, 180);
    succeeds(s, tr, 180);
    assert_true(ts_e2e_wait_event(s, nb, "swapped_in", NULL, 60));

    /* a training job that asks for it */
    long long ex =
        submit(c, "asked", "train", gpu, "\"idle_swap_after\": \"2s\"",
               ts_e2e_cuda_script(c, sx, sizeof(sx), "alloc 0 1024 mark @d3 idle 5 check"));
    assert_true(ts_e2e_wait_event(s, ex, "detached", NULL, 60));
    has_output(n3, ex, "data intact 1073741824 bytes");
    succeeds(s, ex, 180);
    c->passed = true;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            an_idle_burst_holder_is_swapped_out_for_a_burst_and_both_stay_intact, setup,
            ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(a_request_takes_its_room_from_a_busy_burst_holder_at_once,
                                        setup, ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(
            two_jobs_that_keep_touching_their_bursts_take_turns_and_both_finish_intact, setup,
            ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(
            suspend_lets_another_job_burst_into_the_room_and_resume_comes_back_intact, setup,
            ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(
            an_idle_notebook_is_detached_and_its_next_call_brings_it_back, setup, ts_e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
