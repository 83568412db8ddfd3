/*
 * test_nodesched.c - the node-level scheduler end to end (issue 17): a real
 * server, a real agent with --node-scheduler spread on two simulated GPUs,
 * real jobs under the real interposer. The scheduler packs two notebooks
 * on one GPU; the node runs one of them on the other GPU so that both can
 * burst. The server keeps the logical GPU (allocation.devices[].index) and
 * learns the physical one from the agent's report (physical_index, the
 * node's moved_jobs), which `tessera describe job` and `tessera top gpu`
 * show.
 *
 * Re-pack on demand, the example: on a node of two 1 GiB simulated
 * GPUs (768 MiB usable each) two notebooks of request 0.5 and limit 1 both
 * burst to 70 % of a GPU's memory at once, which only their spreading
 * allows; then a whole-GPU job is bound to the GPU the node spread one of
 * them to: the node moves that notebook back, the job runs within 10 s,
 * and both notebooks read their memory back intact.
 *
 *   e2e_test_nodesched [CASE-PATTERN]
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"

static int setup(void **state)
{
    static const struct ts_e2e_project_spec projects[] = {{"lab", 2}, {NULL, 0}};
    static const struct ts_e2e_agent_spec agents[] = {
        {"n1", "sim:2x4GiB", NULL, "--node-scheduler spread --gpu-reserve 512MiB"},
        {NULL, NULL, NULL, NULL}};
    return ts_e2e_setup(state, NULL, projects, agents);
}

/* Run the tessera CLI as admin with args: its exit status; its output
 * (stdout and stderr) into out. */
static int cli(struct ts_it_server *s, const char *args, char *out, size_t len)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/tessera --server %s --token %s %s 2>&1", ts_e2e_bin_dir(),
             s->url, TS_IT_ADMIN_TOKEN, args);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        fail_msg("popen: %s", cmd);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A notebook: request half of a GPU's usable 3.5 GiB, limit all of it. */
static long long notebook(struct ts_it_server *s, const char *name)
{
    return ts_e2e_submit(s, "lab", name, "{\"memory\": \"1792MiB\", \"memory_limit\": \"3584MiB\"}",
                         "2s", NULL, TS_E2E_SLEEPING_JOB);
}

/* allocation.devices[0]'s member key of job id (-1 when absent or null). */
static long long device0(struct ts_it_server *s, long long id, const char *key)
{
    json_t *j = ts_e2e_job(s, id);
    json_t *d = json_array_get(json_object_get(json_object_get(j, "allocation"), "devices"), 0);
    json_t *v = json_object_get(d, key);
    long long r = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(j);
    return r;
}

/* Wait up to secs for the job's physical GPU to be reported; it or -1. */
static long long wait_physical(struct ts_it_server *s, long long id, double secs)
{
    double end = ts_e2e_now() + secs;
    long long p;
    while ((p = device0(s, id, "physical_index")) < 0 && ts_e2e_now() < end)
        ts_e2e_sleep(0.2);
    return p;
}

static void a_spread_notebook_shows_its_logical_and_physical_gpu_in_the_api_and_cli(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    long long a = notebook(s, "nb-a"), b = notebook(s, "nb-b");
    assert_true(a > 0 && b > 0);
    json_decref(ts_e2e_wait_state(s, a, "running", 30));
    json_decref(ts_e2e_wait_state(s, b, "running", 30));
    /* the cluster packed both on one GPU: that is what it keeps */
    long long la = device0(s, a, "index"), lb = device0(s, b, "index");
    assert_true(la >= 0);
    assert_int_equal(la, lb);
    /* the node spread them: one runs on each GPU, as its agent reports */
    long long pa = wait_physical(s, a, 15), pb = wait_physical(s, b, 15);
    if (pa < 0 || pb < 0) {
        json_t *j = ts_e2e_job(s, pa < 0 ? a : b);
        char *t = json_dumps(json_object_get(j, "allocation"), JSON_COMPACT);
        fail_msg("no physical GPU reported: %s", t);
    }
    assert_int_not_equal(pa, pb);
    long long moved = pa != la ? a : b, phys = pa != la ? pa : pb;
    assert_int_equal(device0(s, moved, "index"), la); /* the allocation did not move */

    /* the node's GPU lists it among its jobs and says where it runs */
    json_t *n = ts_e2e_get(s, "/api/v1/nodes/n1");
    assert_non_null(n);
    json_t *g = json_array_get(json_object_get(n, "gpus"), (size_t)la);
    json_t *m = json_array_get(json_object_get(g, "moved_jobs"), 0);
    assert_int_equal(json_array_size(json_object_get(g, "moved_jobs")), 1);
    assert_int_equal(ts_it_int(m, "id"), moved);
    assert_int_equal(ts_it_int(m, "physical_index"), phys);
    assert_int_equal(json_array_size(json_object_get(
                         json_array_get(json_object_get(n, "gpus"), (size_t)phys), "moved_jobs")),
                     0);
    json_decref(n);

    char out[8192], args[64], want[128];
    snprintf(args, sizeof(args), "describe job %lld", moved);
    assert_int_equal(cli(s, args, out, sizeof(out)), 0);
    snprintf(want, sizeof(want), "on GPU %lld (1.75GiB, runs on GPU %lld)", la, phys);
    if (strstr(out, want) == NULL)
        fail_msg("describe job lacks \"%s\":\n%s", want, out);
    snprintf(args, sizeof(args), "describe job %lld", moved == a ? b : a);
    assert_int_equal(cli(s, args, out, sizeof(out)), 0);
    assert_null(strstr(out, "runs on GPU"));

    assert_int_equal(cli(s, "top gpu", out, sizeof(out)), 0);
    assert_non_null(strstr(out, "RUNS-HERE"));
    snprintf(want, sizeof(want), "%lld(on %lld)", moved, phys);
    if (strstr(out, want) == NULL)
        fail_msg("top gpu lacks \"%s\":\n%s", want, out);
    snprintf(want, sizeof(want), "%lld(from %lld)", moved, la);
    if (strstr(out, want) == NULL)
        fail_msg("top gpu lacks \"%s\":\n%s", want, out);

    assert_int_equal(ts_e2e_cancel(s, a), 200);
    assert_int_equal(ts_e2e_cancel(s, b), 200);
    c->passed = true;
}

/* ---- re-pack on demand -------------------------------------------------------- */

static int setup_repack(void **state)
{
    static const struct ts_e2e_project_spec projects[] = {{"lab", 2}, {NULL, 0}};
    static const struct ts_e2e_agent_spec agents[] = {
        {"n1", "sim:2x1GiB", NULL,
         "--node-scheduler spread --gpu-reserve 256MiB --swap-reserve 512MiB"},
        {NULL, NULL, NULL, NULL}};
    return ts_e2e_setup(state, NULL, projects, agents);
}

/* A notebook of request 0.5 and limit 1 under the real shim: a 32 MiB
 * pattern kept, a 506 MiB burst (with it, 538 MiB: 70 % of the 768 MiB
 * usable), mark, given back on @drop, the pattern read back on @stop. */
static long long cuda_notebook(struct ts_e2e *c, const char *name)
{
    char steps[256], script[2048];
    snprintf(steps, sizeof(steps),
             "alloc 0 32 alloc 0 506 mark @%s-burst await @drop drop mark @%s-dropped await @stop "
             "check",
             name, name);
    ts_e2e_cuda_script(c, script, sizeof(script), steps);
    return ts_e2e_submit(&c->srv, "lab", name, "{\"portion\": 0.5, \"portion_limit\": 1}", "2s",
                         "{\"env\": {\"TESSERA_SHIM_LOG\": \"1\"}}", script);
}

static void must_output(struct ts_e2e_agent *a, long long id, const char *text)
{
    if (!ts_e2e_wait_output(a, id, 1, text, 60)) {
        char *o = ts_e2e_output(a, id, 1);
        fail_msg("job %lld has no \"%s\" in its output:\n%s", id, text, o);
    }
}

static void a_whole_gpu_job_bound_where_a_notebook_was_spread_runs_within_10_s(void **state)
{
    struct ts_e2e *c = *state;
    struct ts_it_server *s = &c->srv;
    struct ts_e2e_agent *n1 = ts_e2e_agent_named(c, "n1");
    assert_non_null(n1);
    long long a = cuda_notebook(c, "nb-a"), b = cuda_notebook(c, "nb-b");
    assert_true(a > 0 && b > 0);
    /* both hold 538 MiB at once: 1076 MiB, more than one GPU's 768 */
    assert_true(ts_e2e_flag_wait(c, "nb-a-burst", 60));
    assert_true(ts_e2e_flag_wait(c, "nb-b-burst", 60));
    long long la = device0(s, a, "index");
    assert_int_equal(la, device0(s, b, "index")); /* the cluster packed both there */
    long long pa = wait_physical(s, a, 15), pb = wait_physical(s, b, 15);
    assert_true(pa >= 0 && pb >= 0 && pa != pb);
    long long u0 = ts_e2e_gpu_used(n1, 0), u1 = ts_e2e_gpu_used(n1, 1);
    fprintf(stderr, "both bursting: gpu 0 holds %lld MiB, gpu 1 %lld MiB\n", u0 >> 20, u1 >> 20);
    assert_true(u0 >= 538LL << 20 && u1 >= 538LL << 20);
    long long spread = pa != la ? a : b, other = spread == a ? b : a, free_gpu = pa != la ? pa : pb;
    /* the bursts end; the notebooks keep their pattern */
    ts_e2e_flag_set(c, "drop");
    assert_true(ts_e2e_flag_wait(c, "nb-a-dropped", 60));
    assert_true(ts_e2e_flag_wait(c, "nb-b-dropped", 60));

    /* a whole GPU: the cluster sees the other GPU free and binds it there */
    char script[2048];
    ts_e2e_cuda_script(c, script, sizeof(script), "alloc 0 64 check idle 2");
    double t0 = ts_e2e_now(), bound = -1, ran = -1;
    long long w = ts_e2e_submit(s, "lab", "whole", "{\"count\": 1}", "2s", NULL, script);
    assert_true(w > 0);
    while (ran < 0 && ts_e2e_now() - t0 < 30) {
        json_t *j = ts_e2e_job(s, w);
        const char *st = json_string_value(json_object_get(j, "state"));
        double now = ts_e2e_now();
        if (st != NULL && bound < 0 && strcmp(st, "pending") != 0)
            bound = now;
        if (st != NULL && strcmp(st, "pending") != 0 && strcmp(st, "scheduled") != 0)
            ran = now;
        json_decref(j);
        if (ran < 0)
            ts_e2e_sleep(0.02);
    }
    assert_true(ran > 0);
    assert_int_equal(device0(s, w, "index"), free_gpu);
    fprintf(stderr,
            "whole-GPU job %lld: submitted -> bound %.2f s, bound -> running %.2f s (API polled "
            "every 20 ms)\n",
            w, bound - t0, ran - bound);
    assert_true(ran - bound <= 10.0);
    /* the notebook went back next to the other one, and says so */
    char want[96];
    snprintf(want, sizeof(want), "moved gpu %lld \u2192 gpu %lld for job %lld", free_gpu, la, w);
    assert_true(ts_e2e_wait_event(s, spread, "moved", want, 10));
    assert_int_equal(ts_e2e_event_count(s, spread, "not_moved"), 0);
    assert_int_equal(ts_e2e_event_count(s, w, "not_moved"), 0);
    long long p2 = -1;
    double end = ts_e2e_now() + 10;
    while ((p2 = device0(s, spread, "physical_index")) != la && ts_e2e_now() < end)
        ts_e2e_sleep(0.2);
    assert_int_equal(p2, la);
    char out[8192], args[64];
    snprintf(args, sizeof(args), "describe job %lld", spread);
    assert_int_equal(cli(s, args, out, sizeof(out)), 0);
    if (strstr(out, want) == NULL)
        fail_msg("describe job lacks \"%s\":\n%s", want, out);

    json_t *j = ts_e2e_wait_state(s, w, "succeeded", 60);
    assert_non_null(j);
    json_decref(j);
    ts_e2e_flag_set(c, "stop");
    long long nbs[2] = {spread, other};
    for (int i = 0; i < 2; i++) {
        must_output(n1, nbs[i], "data intact 33554432 bytes");
        json_t *e = ts_e2e_wait_state(s, nbs[i], "succeeded", 60);
        assert_non_null(e);
        json_decref(e);
    }
    c->passed = true;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_spread_notebook_shows_its_logical_and_physical_gpu_in_the_api_and_cli, setup,
            ts_e2e_teardown),
        cmocka_unit_test_setup_teardown(
            a_whole_gpu_job_bound_where_a_notebook_was_spread_runs_within_10_s, setup_repack,
            ts_e2e_teardown),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
