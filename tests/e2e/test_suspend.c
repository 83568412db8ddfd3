/*
 * test_suspend.c - suspend in place end to end: a real server, a real agent
 * whose node swaps (--collision swap, a host swap reserve), a real
 * tessera-gpuload job under the real CUDA interposer on a simulated GPU.
 * POST /jobs/{id}/suspend moves the job's GPU memory to the host reserve
 * and stops its processes; POST /jobs/{id}/resume brings it back warm, the
 * same processes in the same attempt, its device memory byte-identical
 * (gpuload checks every step and exits 3 on any lost byte).
 *
 *   e2e_test_suspend [CASE-PATTERN]
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"

#define MiB (1024ll * 1024)

static int setup(void **state)
{
    static const struct ts_e2e_project_spec projects[] = {{"vision", 2}, {NULL, 0}};
    static const struct ts_e2e_agent_spec agents[] = {
        {"n1", "sim:1x8GiB", "swap=yes",
         "--collision swap --swap-reserve 1GiB --gpu-reserve 512MiB"},
        {"n2", "sim:1x8GiB", "swap=no", "--collision priority"},
        {NULL, NULL, NULL, NULL}};
    return ts_e2e_setup(state, NULL, projects, agents);
}

/* The one-letter state of pid in /proc (R, S, T...), or '?'. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return '?';
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : '?';
}

static int step_lines(const struct ts_e2e_agent *a, long long id)
{
    char *o = ts_e2e_output(a, id, 1);
    int n = ts_e2e_count_lines(o, "step=");
    free(o);
    return n;
}

/* Run the tessera CLI as admin with one job argument: its exit status; its
 * output (stdout and stderr) into out. */
static int cli(struct ts_it_server *s, const char *verb, long long id, char *out, size_t len)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/tessera --server %s --token %s %s %lld 2>&1", ts_e2e_bin_dir(),
             s->url, TS_IT_ADMIN_TOKEN, verb, id);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        fail_msg("popen: %s", cmd);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static long long submit_gpuload(struct ts_it_server *s, const char *name, const char *extra,
                                int steps)
{
    char script[1024];
    snprintf(script, sizeof(script),
             "exec %s/tessera-gpuload --pattern train --memory 256MiB --buffers 4 --touch 4MiB"
             " --step 100ms --busy 0.3 --steps %d",
             ts_e2e_bin_dir(), steps);
    /* a fraction that may burst: the job runs under the interposer */
    return ts_e2e_submit(s, "vision", name,
                         "{\"memory\": \"512MiB\", \"memory_limit\": \"768MiB\"}", "2s", extra,
                         script);
}

static void a_job_suspended_through_the_api_resumes_warm_with_its_memory_intact(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    long long id = submit_gpuload(s, "warm", "{\"node_selector\": {\"swap\": \"yes\"}}", 60);
    assert_true(id > 0);
    json_t *j = ts_e2e_wait_state(s, id, "running", 30);
    assert_non_null(j);
    assert_string_equal(ts_it_str(j, "node"), "n1");
    json_decref(j);
    struct ts_e2e_agent *a = ts_e2e_agent_named(c, "n1");
    assert_true(ts_e2e_wait_output(a, id, 1, "step=3 ", 30));
    struct ts_e2e_proc p;
    assert_int_equal(ts_e2e_job_proc(a, id, 1, &p), 0);
    long long before = ts_e2e_gpu_used(a, 0);
    assert_true(before >= 256 * MiB);

    /* through the CLI, as a user would */
    char out[2048], want[128];
    assert_int_equal(cli(s, "suspend", id, out, sizeof(out)), 0);
    snprintf(want, sizeof(want), "job %lld (warm) suspend: suspending", id);
    assert_non_null(strstr(out, want));
    j = ts_e2e_wait_state(s, id, "suspended", 30);
    assert_non_null(j);
    json_decref(j);
    /* its device memory left the GPU; its processes are stopped */
    assert_true(ts_e2e_gpu_used(a, 0) <= before - 256 * MiB);
    assert_int_equal(proc_state(p.pid), 'T');
    int steps = step_lines(a, id);
    ts_e2e_sleep(1.0);
    assert_int_equal(step_lines(a, id), steps);
    assert_true(ts_e2e_event_count(s, id, "suspended") >= 1);
    /* suspending it again is a conflict: exit 4 with the server's detail */
    assert_int_equal(cli(s, "suspend", id, out, sizeof(out)), 4);
    assert_non_null(strstr(out, "only a running job can be suspended"));

    assert_int_equal(cli(s, "resume", id, out, sizeof(out)), 0);
    snprintf(want, sizeof(want), "job %lld (warm) resume:", id);
    assert_non_null(strstr(out, want));
    j = ts_e2e_wait_state(s, id, "running", 30);
    assert_non_null(j);
    assert_int_equal(ts_it_int(j, "attempt"), 1);
    json_decref(j);
    /* the same process, going on from where it was, memory back on the GPU */
    assert_true(ts_e2e_alive(p.pid, p.ticks));
    assert_true(ts_e2e_wait_output(a, id, 1, "step=20 ", 30));
    assert_true(ts_e2e_gpu_used(a, 0) >= 256 * MiB);
    /* gpuload checked its buffers every step: it ends 0 only if no byte changed */
    j = ts_e2e_wait_state(s, id, "succeeded", 60);
    assert_non_null(j);
    json_decref(j);
    char *o = ts_e2e_output(a, id, 1);
    /* started once, never restarted from its checkpoint */
    assert_int_equal(ts_e2e_count_lines(o, "no checkpoint in"), 1);
    assert_null(strstr(o, "resumed from"));
    free(o);
    c->passed = true;
}

static void
a_job_that_refuses_swap_cannot_be_suspended_and_a_suspended_job_can_be_cancelled(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    /* swap refused: never placed on the swapping node (it can burst), never suspended */
    long long no = submit_gpuload(s, "noswap", "{\"swap\": false}", 0);
    assert_true(no > 0);
    json_t *j = ts_e2e_wait_state(s, no, "running", 30);
    assert_non_null(j);
    assert_string_equal(ts_it_str(j, "node"), "n2");
    json_decref(j);
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", no);
    assert_int_equal(ts_e2e_req(s, "POST", path, "{}"), 409);

    /* a job that accepts swap, on n2, which has no swap reserve: refused too */
    long long n2 = submit_gpuload(s, "on-n2", "{\"node_selector\": {\"swap\": \"no\"}}", 0);
    assert_true(n2 > 0);
    j = ts_e2e_wait_state(s, n2, "running", 30);
    assert_non_null(j);
    json_decref(j);
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", n2);
    assert_int_equal(ts_e2e_req(s, "POST", path, "{}"), 409);
    assert_int_equal(ts_e2e_cancel(s, n2), 200);

    long long id = submit_gpuload(s, "gone", "{\"node_selector\": {\"swap\": \"yes\"}}", 0);
    assert_true(id > 0);
    j = ts_e2e_wait_state(s, id, "running", 30);
    assert_non_null(j);
    json_decref(j);
    struct ts_e2e_agent *a = ts_e2e_agent_named(c, "n1");
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/suspend", id);
    assert_true(ts_e2e_wait_output(a, id, 1, "step=2 ", 30));
    struct ts_e2e_proc p;
    assert_int_equal(ts_e2e_job_proc(a, id, 1, &p), 0);
    assert_int_equal(ts_e2e_req(s, "POST", path, "{}"), 202);
    j = ts_e2e_wait_state(s, id, "suspended", 30);
    assert_non_null(j);
    json_decref(j);
    assert_int_equal(ts_e2e_cancel(s, id), 200);
    j = ts_e2e_wait_state(s, id, "cancelled", 30);
    assert_non_null(j);
    json_decref(j);
    /* a stopped process still ends: the whole group is gone */
    assert_true(ts_e2e_wait_group_gone(p.pid, 15));
    assert_int_equal(ts_e2e_cancel(s, no), 200);
    c->passed = true;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_job_suspended_through_the_api_resumes_warm_with_its_memory_intact, setup,
            ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(
            a_job_that_refuses_swap_cannot_be_suspended_and_a_suspended_job_can_be_cancelled, setup,
            ts_e2e_teardown),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
