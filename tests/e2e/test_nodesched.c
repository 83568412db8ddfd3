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

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_spread_notebook_shows_its_logical_and_physical_gpu_in_the_api_and_cli, setup,
            ts_e2e_teardown),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
