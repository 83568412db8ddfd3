/*
 * test_jobs.c - jobs on one node end to end: a real server, a real agent on
 * simulated GPUs, real job processes. Fractional jobs share one GPU; cancel
 * ends a job's whole process group; an agent killed with SIGKILL and
 * restarted adopts its jobs, which kept running and are never started twice.
 *
 *   e2e_test_jobs [CASE-PATTERN]
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"

static int setup(void **state)
{
    static const struct ts_e2e_project_spec projects[] = {{"vision", 2}, {NULL, 0}};
    static const struct ts_e2e_agent_spec agents[] = {{"n1", "sim:2x16GiB", NULL, NULL},
                                                      {NULL, NULL, NULL, NULL}};
    return ts_e2e_setup(state, NULL, projects, agents);
}

static json_t *running(struct ts_it_server *s, long long id)
{
    json_t *j = ts_e2e_wait_state(s, id, "running", 30);
    if (j == NULL)
        fail_msg("job %lld did not run", id);
    return j;
}

/* The starts file of the job once it has n lines (fails after 10 s). */
static char *starts_lines(struct ts_it_server *s, long long id, int n)
{
    double end = ts_e2e_now() + 10;
    for (;;) {
        char *t = ts_e2e_checkpoint_file(s, id, "starts");
        char buf[8];
        if (ts_e2e_starts(t, 0, "pid", buf, sizeof(buf)) >= n)
            return t;
        free(t);
        if (ts_e2e_now() > end)
            fail_msg("job %lld did not record %d starts", id, n);
        ts_e2e_sleep(0.05);
    }
}

static void cancel(struct ts_it_server *s, long long id)
{
    assert_int_equal(ts_e2e_cancel(s, id), 200);
}

static void fractional_jobs_share_one_gpu(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    /* two halves, each a tessera-gpuload training on the simulated GPU */
    char script[1024];
    snprintf(script, sizeof(script),
             "%sexec %s/tessera-gpuload --pattern train --memory 256MiB --touch 1MiB"
             " --step 100ms --busy 0.4",
             TS_E2E_RECORD_START, ts_e2e_bin_dir());
    long long h1 = ts_e2e_submit(s, "vision", "half-1", "{\"portion\": 0.5}", "2s", NULL, script);
    long long h2 = ts_e2e_submit(s, "vision", "half-2", "{\"portion\": 0.5}", "2s", NULL, script);
    assert_true(h1 > 0 && h2 > 0);
    json_t *j1 = running(s, h1), *j2 = running(s, h2);
    /* the same node and GPU, half of it each */
    assert_string_equal(ts_it_str(j1, "node"), "n1");
    assert_string_equal(ts_it_str(j2, "node"), "n1");
    json_t *a1 = json_object_get(j1, "allocation"), *a2 = json_object_get(j2, "allocation");
    assert_true(json_number_value(json_object_get(a1, "gpus")) == 0.5);
    assert_true(json_number_value(json_object_get(a2, "gpus")) == 0.5);
    assert_int_equal(json_array_size(json_object_get(a1, "devices")), 1);
    assert_int_equal(json_array_size(json_object_get(a2, "devices")), 1);
    long long index = ts_it_int(json_array_get(json_object_get(a1, "devices"), 0), "index");
    assert_true(index >= 0);
    assert_int_equal(ts_it_int(json_array_get(json_object_get(a2, "devices"), 0), "index"), index);
    json_decref(j1);
    json_decref(j2);

    /* the node shows both jobs on that GPU */
    json_t *n = ts_e2e_get(s, "/api/v1/nodes/n1");
    assert_non_null(n);
    json_t *g = json_array_get(json_object_get(n, "gpus"), (size_t)index);
    assert_int_equal(ts_it_int(g, "index"), index);
    json_t *ids = json_object_get(g, "jobs");
    assert_int_equal(json_array_size(ids), 2);
    long long x = json_integer_value(json_array_get(ids, 0));
    long long y = json_integer_value(json_array_get(ids, 1));
    assert_true((x == h1 && y == h2) || (x == h2 && y == h1));
    json_decref(n);

    /* both processes were given that GPU, and both compute on it at once */
    char *s1 = starts_lines(s, h1, 1), *s2 = starts_lines(s, h2, 1);
    char d1[16], d2[16], want[16];
    snprintf(want, sizeof(want), "%lld", index);
    ts_e2e_starts(s1, 0, "gpus", d1, sizeof(d1));
    ts_e2e_starts(s2, 0, "gpus", d2, sizeof(d2));
    assert_string_equal(d1, want);
    assert_string_equal(d2, want);
    free(s1);
    free(s2);
    struct ts_e2e_agent *a = ts_e2e_agent_named(c, "n1");
    assert_true(ts_e2e_wait_output(a, h1, 1, "step=5 ", 30));
    assert_true(ts_e2e_wait_output(a, h2, 1, "step=5 ", 30));
    char *o1 = ts_e2e_output(a, h1, 1);
    assert_non_null(strstr(o1, "device=0 ")); /* ordinal 0 of CUDA_VISIBLE_DEVICES */
    free(o1);
    struct ts_e2e_proc p1, p2;
    assert_int_equal(ts_e2e_job_proc(a, h1, 1, &p1), 0);
    assert_int_equal(ts_e2e_job_proc(a, h2, 1, &p2), 0);
    assert_true(ts_e2e_alive(p1.pid, p1.ticks));
    assert_true(ts_e2e_alive(p2.pid, p2.ticks));

    /* a third half fits on the other GPU, not on the full one */
    long long h3 =
        ts_e2e_submit(s, "vision", "half-3", "{\"portion\": 0.5}", "2s", NULL, TS_E2E_SLEEPING_JOB);
    assert_true(h3 > 0);
    json_t *j3 = running(s, h3);
    assert_int_not_equal(
        ts_it_int(json_array_get(json_object_get(json_object_get(j3, "allocation"), "devices"), 0),
                  "index"),
        index);
    json_decref(j3);
    c->passed = true;
}

static void cancel_ends_the_job_and_its_whole_process_group(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    /* a shell with two children in its group, one of which ignores SIGTERM */
    long long id =
        ts_e2e_submit(s, "vision", "to-cancel", "{\"count\": 1}", "2s", NULL,
                      TS_E2E_RECORD_START "(trap '' TERM; exec sleep 1000) & sleep 1000 & wait");
    assert_true(id > 0);
    json_t *j = running(s, id);
    int attempt = (int)ts_it_int(j, "attempt");
    json_decref(j);
    struct ts_e2e_agent *a = ts_e2e_agent_named(c, "n1");
    struct ts_e2e_proc p;
    assert_int_equal(ts_e2e_job_proc(a, id, attempt, &p), 0);
    double end = ts_e2e_now() + 10;
    while (ts_e2e_group_size(p.pid) < 3) {
        assert_true(ts_e2e_now() < end);
        ts_e2e_sleep(0.05);
    }

    cancel(s, id);
    j = ts_e2e_wait_state(s, id, "cancelled", 30);
    assert_non_null(j);
    assert_int_equal(ts_it_int(j, "exit_code"), 143); /* ended by SIGTERM */
    assert_true(json_is_null(json_object_get(j, "allocation")));
    json_decref(j);
    /* nothing of it is left: not the shell, not the child that ignored
     * SIGTERM, not its supervisor */
    assert_true(ts_e2e_wait_group_gone(p.pid, 10));
    end = ts_e2e_now() + 10;
    while (ts_e2e_alive(p.sup_pid, p.sup_ticks)) {
        assert_true(ts_e2e_now() < end);
        ts_e2e_sleep(0.05);
    }
    assert_int_equal(ts_e2e_event_count(s, id, "cancelling"), 1);
    assert_int_equal(ts_e2e_event_count(s, id, "cancelled"), 1);
    /* and its GPU is free: a whole-node job runs */
    long long next = ts_e2e_submit(s, "vision", "after-cancel", "{\"count\": 2}", "2s", NULL,
                                   TS_E2E_SLEEPING_JOB);
    assert_true(next > 0);
    json_decref(running(s, next));
    c->passed = true;
}

static void a_restarted_agent_adopts_its_jobs_which_kept_running(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *a = ts_e2e_agent_named(c, "n1");
    /* one job runs on; the other ends with status 7 while the agent is down */
    long long keep = ts_e2e_submit(s, "vision", "keeps-running", "{\"count\": 1}", "2s", NULL,
                                   TS_E2E_SLEEPING_JOB);
    long long ends = ts_e2e_submit(s, "vision", "ends-meanwhile", "{\"count\": 1}", "2s", NULL,
                                   TS_E2E_RECORD_START
                                   "while [ ! -e \"$TESSERA_CHECKPOINT_DIR/go\" ]; do sleep 0.1;"
                                   " done; echo ending; exit 7");
    assert_true(keep > 0 && ends > 0);
    json_t *j = running(s, ends);
    char go[512];
    snprintf(go, sizeof(go), "%s/go", ts_it_str(j, "checkpoint_dir"));
    json_decref(j);
    j = running(s, keep);
    int attempt = (int)ts_it_int(j, "attempt");
    json_decref(j);
    struct ts_e2e_proc pk, pe;
    assert_int_equal(ts_e2e_job_proc(a, keep, attempt, &pk), 0);
    assert_int_equal(ts_e2e_job_proc(a, ends, 1, &pe), 0);
    free(starts_lines(s, keep, 1));
    free(starts_lines(s, ends, 1));

    /* SIGKILL: the agent cannot say goodbye; its jobs live on */
    int st = ts_e2e_agent_signal(a, SIGKILL);
    assert_true(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    ts_e2e_sleep(0.5);
    assert_true(ts_e2e_alive(pk.pid, pk.ticks));
    assert_true(ts_e2e_alive(pe.pid, pe.ticks));
    FILE *f = fopen(go, "w");
    assert_non_null(f);
    fclose(f);
    assert_true(ts_e2e_wait_group_gone(pe.pid, 10));
    /* meanwhile the server still has them running */
    j = ts_e2e_job(s, keep);
    assert_string_equal(ts_it_str(j, "state"), "running");
    json_decref(j);

    assert_int_equal(ts_e2e_agent_start(c, a), 0);
    /* the exit that happened while it was down is reported */
    j = ts_e2e_wait_state(s, ends, "failed", 30);
    assert_non_null(j);
    assert_int_equal(ts_it_int(j, "exit_code"), 7);
    assert_int_equal(ts_it_int(j, "attempt"), 1);
    json_decref(j);
    /* the other is adopted: the same process, the same attempt, running */
    double end = ts_e2e_now() + 5;
    while (ts_e2e_now() < end) {
        j = ts_e2e_job(s, keep);
        assert_non_null(j);
        assert_string_equal(ts_it_str(j, "state"), "running");
        assert_int_equal(ts_it_int(j, "attempt"), attempt);
        assert_int_equal(ts_it_int(j, "resume_count"), 0);
        json_decref(j);
        assert_true(ts_e2e_alive(pk.pid, pk.ticks));
        ts_e2e_sleep(0.5);
    }
    struct ts_e2e_proc again;
    assert_int_equal(ts_e2e_job_proc(a, keep, attempt, &again), 0);
    assert_int_equal(again.pid, pk.pid);
    assert_int_equal(again.ticks, pk.ticks);
    /* never started twice: one start recorded, one running event, one
     * supervisor */
    char *t = ts_e2e_checkpoint_file(s, keep, "starts");
    char buf[8];
    assert_int_equal(ts_e2e_starts(t, 0, "pid", buf, sizeof(buf)), 1);
    free(t);
    t = ts_e2e_checkpoint_file(s, ends, "starts");
    assert_int_equal(ts_e2e_starts(t, 0, "pid", buf, sizeof(buf)), 1);
    free(t);
    assert_int_equal(ts_e2e_event_count(s, keep, "running"), 1);
    assert_int_equal(ts_e2e_event_count(s, keep, "scheduled"), 1);
    assert_true(ts_e2e_alive(pk.sup_pid, pk.sup_ticks));

    /* and it is still the agent's to stop */
    cancel(s, keep);
    json_decref(ts_e2e_wait_state(s, keep, "cancelled", 30));
    assert_true(ts_e2e_wait_group_gone(pk.pid, 10));
    c->passed = true;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(fractional_jobs_share_one_gpu, setup, ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(cancel_ends_the_job_and_its_whole_process_group, setup,
                                        ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(a_restarted_agent_adopts_its_jobs_which_kept_running, setup,
                                        ts_e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
