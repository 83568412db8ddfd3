/*
 * test_soak.c - minutes of mixed GPU memory load on one swapping node (label
 * soak, never in the default run): a real server, a real agent with two
 * simulated 8 GiB GPUs (2 GiB per-GPU reserve: 6 GiB usable each) under
 * --collision swap with a 16 GiB host swap reserve, and eight
 * tessera-gpuload jobs of mixed kinds (training, notebooks, inference), each
 * with a 1 GiB request it holds all along and random bursts of 1 to 2 GiB
 * up to a 3 GiB limit, with random idle periods: together they want up to
 * twice what the GPUs have. Every job checks its buffers every step (exit 3
 * on a lost byte) and gets out-of-memory as exit 2 (its bursts are not
 * optional), so the test fails on any job death, any corruption, any
 * eviction, and on a host swap reserve that still holds pages when no job
 * is swapped out. It prints what the node did.
 *
 *   TS_SOAK_SECONDS=600 build/tests/soak_test     (the default: 10 minutes)
 *   ctest --test-dir build -L soak -V
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"

#define JOBS 8

struct soak_job {
    const char *name, *kind, *pattern, *extra;
};

static const struct soak_job jobs[JOBS] = {
    {"train-a", "train", "train", "--step 500ms --busy 0.6"},
    {"train-b", "train", "train", "--step 1s --busy 0.8"},
    {"notebook-a", "interactive", "notebook", "--burst 200ms --idle 6s"},
    {"notebook-b", "interactive", "notebook", "--burst 100ms --idle 12s"},
    {"serve-a", "inference", "inference", "--rate 20/s --burst 10ms"},
    {"serve-b", "inference", "inference", "--rate 5/s --burst 30ms"},
    {"train-c", "train", "train", "--step 300ms --busy 0.3"},
    {"notebook-c", "interactive", "notebook", "--burst 300ms --idle 4s"},
};

static int setup(void **state)
{
    /* notebooks detach after 20 s idle, as their kind's default; jobs spread,
     * four a GPU, so that requests leave room to burst into */
    static const char *const server[] = {"--idle-swap-after", "20s", "--strategy", "spread", NULL};
    static const struct ts_e2e_project_spec projects[] = {{"soak", 8}, {NULL, 0}};
    static const struct ts_e2e_agent_spec agents[] = {
        {"s1", "sim:2x8GiB", NULL,
         "--collision swap --swap-reserve 16GiB --swap-idle 2s --swap-quantum 2s "
         "--gpu-reserve 2GiB --collision-wait 120s"},
        {NULL, NULL, NULL, NULL}};
    return ts_e2e_setup(state, server, projects, agents);
}

/* Lines of the agent's log holding text. */
static int log_count(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    int n = 0;
    char line[2048];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, text) != NULL;
    if (f != NULL)
        fclose(f);
    return n;
}

/* The host swap reserve's path, from the agent's log ("swap_path=..."). */
static void reserve_path(const char *log, char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen(log, "r");
    char line[2048];
    while (f != NULL && out[0] == '\0' && fgets(line, sizeof(line), f) != NULL) {
        const char *p = strstr(line, "swap_path=");
        if (p != NULL)
            sscanf(p + 10, "%511s", out);
    }
    if (f != NULL)
        fclose(f);
    (void)len;
}

static long long reserve_resident(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_blocks * 512 : -1;
}

static void eight_jobs_burst_and_idle_for_minutes_and_none_dies_or_loses_a_byte(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *a = ts_e2e_agent_named(c, "s1");
    const char *env = getenv("TS_SOAK_SECONDS");
    int secs = env != NULL && atoi(env) > 0 ? atoi(env) : 600;
    long long id[JOBS];
    for (int i = 0; i < JOBS; i++) {
        char script[1024];
        snprintf(script, sizeof(script),
                 "exec %s/tessera-gpuload --pattern %s --memory 1GiB --buffers 2 --touch 32MiB "
                 "--burst-memory %s --burst-every 15s --burst-hold 8s --jitter 0.8 --seed %d "
                 "--duration %ds %s",
                 ts_e2e_bin_dir(), jobs[i].pattern, i % 2 ? "2GiB" : "1GiB", i + 1, secs,
                 jobs[i].extra);
        char extra[64];
        snprintf(extra, sizeof(extra), "{\"kind\": \"%s\"}", jobs[i].kind);
        id[i] = ts_e2e_submit(s, "soak", jobs[i].name,
                              "{\"memory\": \"1GiB\", \"memory_limit\": \"3GiB\"}", "5s", extra,
                              script);
        assert_true(id[i] > 0);
    }
    for (int i = 0; i < JOBS; i++) {
        json_t *j = ts_e2e_wait_state(s, id[i], "running", 60);
        assert_non_null(j);
        json_decref(j);
    }
    /* while they run: every job stays running, once a minute */
    double end = ts_e2e_now() + secs;
    long long peak_swapped = 0;
    while (ts_e2e_now() < end - 5) {
        for (int i = 0; i < JOBS; i++) {
            json_t *j = ts_e2e_job(s, id[i]);
            const char *st = ts_it_str(j, "state");
            if (strcmp(st, "running") != 0 && strcmp(st, "succeeded") != 0)
                fail_msg("job %s is %s (exit %lld)", jobs[i].name, st, ts_it_int(j, "exit_code"));
            json_decref(j);
        }
        char path[512];
        reserve_path(a->log, path, sizeof(path));
        long long r = reserve_resident(path);
        if (r > peak_swapped)
            peak_swapped = r;
        ts_e2e_sleep(10);
    }
    for (int i = 0; i < JOBS; i++) {
        json_t *j = ts_e2e_wait_state(s, id[i], "succeeded", 300);
        if (j == NULL) {
            char *o = ts_e2e_output(a, id[i], 1);
            fail_msg("job %s did not succeed; the end of its output:\n%s", jobs[i].name,
                     strlen(o) > 2000 ? o + strlen(o) - 2000 : o);
        }
        assert_int_equal(ts_it_int(j, "exit_code"), 0);
        assert_int_equal(ts_it_int(j, "resume_count"), 0);
        json_decref(j);
    }
    /* nobody is out any more: the reserve gives its pages back (trimmed
     * every 2 s) */
    char path[512];
    reserve_path(a->log, path, sizeof(path));
    long long left = -1;
    for (int k = 0; k < 20 && left != 0; k++) {
        ts_e2e_sleep(0.5);
        left = reserve_resident(path);
    }
    int steps = 0, bursts = 0, skipped = 0;
    for (int i = 0; i < JOBS; i++) {
        char *o = ts_e2e_output(a, id[i], 1);
        steps += ts_e2e_count_lines(o, "step=");
        bursts += ts_e2e_count_lines(o, "burst start=");
        skipped += ts_e2e_count_lines(o, "burst skipped=");
        assert_null(strstr(o, "data loss"));
        free(o);
    }
    print_message("soak: %d jobs, %d s: %d steps, %d bursts (%d skipped); swap-outs %d "
                  "(detached %d), swap-ins %d, waits %d, out-of-memory %d, ended %d; host swap "
                  "reserve peak %.2f GiB, left %lld bytes\n",
                  JOBS, secs, steps, bursts, skipped,
                  log_count(a->log, "type=swapped_out message=\"pid"),
                  log_count(a->log, "type=detached"), log_count(a->log, "type=swapped_in"),
                  log_count(a->log, "type=memory_wait"), log_count(a->log, "type=out_of_memory"),
                  log_count(a->log, "type=memory_ended"), (double)peak_swapped / (1 << 30), left);
    assert_int_equal(log_count(a->log, "type=out_of_memory"), 0);
    assert_int_equal(log_count(a->log, "type=memory_ended"), 0);
    assert_true(log_count(a->log, "type=swapped_out") > 0); /* it did time-share */
    assert_int_equal(left, 0);
    c->passed = true;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            eight_jobs_burst_and_idle_for_minutes_and_none_dies_or_loses_a_byte, setup,
            ts_e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
