/*
 * nodesched_test.c - the node-level scheduler (issue 17) against the real
 * tessera-agent with --desired-file on two simulated GPUs: where fractional
 * jobs start with --node-scheduler spread, auto and off. The jobs are
 * shim_player (the ledger protocol as the shim speaks it), so the ledger of
 * each physical GPU shows which jobs are on it. One case per run.
 */
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "agent/ledger/ledger.h"
#include "api/files.h"
#include "tests/agent/agentharness.h"

#define MiB (1ull << 20)

static const char *bin_dir, *player, *probe;

/* The agent on sim:2x4GiB (3.25 GiB usable per GPU) with extra options. */
static void agent_start(const char *const *extra)
{
    char exe[PATH_MAX];
    snprintf(exe, sizeof(exe), "%s/tessera-agent", bin_dir);
    const char *argv[32] = {exe,
                            "--node",
                            "n1",
                            "--data-dir",
                            ts_ah_data,
                            "--gpus",
                            "sim:2x4GiB",
                            "--desired-file",
                            ts_ah_desired,
                            "--report-interval",
                            "1s",
                            "--log-level",
                            "debug",
                            "--gpu-reserve",
                            "768MiB",
                            "--sandbox",
                            "off",
                            "--shim-lib",
                            "/nonexistent/libtessera-cuda.so"};
    size_t n = 17;
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 30; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    ts_ah_agent_pid = ts_ah_spawn(argv, ts_ah_agent_log);
}

/* A notebook: logical GPU 0, request 1 GiB, limit 3 GiB, waiting for the
 * flag file "stop". */
static char *notebook(char *buf, size_t len, int id)
{
    snprintf(buf, len,
             "{\"id\": %d, \"attempt\": 0, \"name\": \"nb%d\", \"project\": \"p\", "
             "\"action\": \"run\", \"grace_seconds\": 2, \"gpus\": [{\"index\": 0, "
             "\"memory_bytes\": %llu, \"memory_limit_bytes\": %llu}], \"checkpoint_dir\": \"%s\", "
             "\"command\": [\"%s\", \"await\", \"%s/stop\"]}",
             id, id, 1024 * MiB, 3072 * MiB, ts_ah_shared, player, ts_ah_shared);
    return buf;
}

/* Physical GPU whose ledger holds a slot of job id, or -1. */
static int gpu_of(long id)
{
    for (int g = 0; g < 2; g++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/ledger/gpu%d.ledger", ts_ah_data, g);
        struct ts_ledger *l = ts_ledger_open(path);
        int k = l != NULL ? ts_ledger_find_job(l, ts_ledger_key(id, 0)) : -1;
        ts_ledger_close(l);
        if (k >= 0)
            return g;
    }
    return -1;
}

/* Start two notebooks both bound to logical GPU 0; the physical GPUs they
 * run on. */
static void two_notebooks(int *g1, int *g2)
{
    char a[1024], b[1024];
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s]}", notebook(a, sizeof(a), 1));
    json_t *j1 = ts_ah_wait_job(1, 0, "running", 20);
    ts_ah_set_desired("{\"generation\": 2, \"jobs\": [%s, %s]}", a, notebook(b, sizeof(b), 2));
    json_t *j2 = ts_ah_wait_job(2, 0, "running", 20);
    CHECK(j1 != NULL && j2 != NULL);
    json_decref(j1);
    json_decref(j2);
    *g1 = gpu_of(1);
    *g2 = gpu_of(2);
}

/* End notebook 1 (the case's end stops the others with the agent's jobs). */
static void stop_notebook_1(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/stop", ts_ah_shared);
    ts_files_write_atomic(path, "", 0, 0644);
    json_t *e1 = ts_ah_wait_job(1, 0, "exited", 20);
    CHECK(e1 != NULL && json_integer_value(json_object_get(e1, "exit_code")) == 0);
    json_decref(e1);
}

static void stop_notebooks(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/stop", ts_ah_shared);
    ts_files_write_atomic(path, "", 0, 0644);
    json_t *e1 = ts_ah_wait_job(1, 0, "exited", 20), *e2 = ts_ah_wait_job(2, 0, "exited", 20);
    CHECK(e1 != NULL && json_integer_value(json_object_get(e1, "exit_code")) == 0);
    CHECK(e2 != NULL && json_integer_value(json_object_get(e2, "exit_code")) == 0);
    json_decref(e1);
    json_decref(e2);
}

/* ---- cases ------------------------------------------------------------------ */

static void spread_starts_the_second_notebook_on_the_gpu_where_it_can_burst(void)
{
    /* auto spreads on a node that swaps */
    const char *opts[] = {"--swap-reserve", "64MiB", "--node-scheduler", "auto", NULL};
    agent_start(opts);
    int g1, g2;
    two_notebooks(&g1, &g2);
    CHECK(g1 == 0); /* a tie: the logical GPU */
    CHECK(g2 == 1); /* 3.25 GiB to burst into on GPU 1, 2.25 on GPU 0 */
    /* the job's folder keeps both: physical index, logical index */
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/jobs/2-0/spec.json", ts_ah_data);
    json_t *spec = ts_files_read_json(path);
    json_t *g = json_array_get(json_object_get(spec, "gpus"), 0);
    CHECK(json_integer_value(json_object_get(g, "index")) == 1);
    CHECK(json_integer_value(json_object_get(g, "logical_index")) == 0);
    json_decref(spec);
    snprintf(path, sizeof(path), "%s/jobs/2-0/launch.json", ts_ah_data);
    char *launch = ts_files_read(path, 1 << 20, NULL);
    CHECK(launch != NULL && strstr(launch, "\"CUDA_VISIBLE_DEVICES=1\"") != NULL);
    free(launch);
    stop_notebooks();
}

/* The job's events.log (new text, "" when absent). */
static char *events_of(int id)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/jobs/%d-0/events.log", ts_ah_data, id);
    char *t = ts_files_read(path, 1 << 20, NULL);
    return t != NULL ? t : strdup("");
}

static void a_whole_gpu_bind_where_a_notebook_was_spread_says_it_is_not_moved(void)
{
    const char *opts[] = {"--swap-reserve", "64MiB", "--node-scheduler", "spread", NULL};
    agent_start(opts);
    int g1, g2;
    two_notebooks(&g1, &g2);
    REQUIRE(g2 == 1);
    /* the server binds a whole GPU (3.25 GiB usable) on logical GPU 1,
     * where notebook 2 runs with its 1 GiB request */
    char a[1024], b[1024];
    notebook(a, sizeof(a), 1);
    notebook(b, sizeof(b), 2);
    ts_ah_set_desired("{\"generation\": 3, \"jobs\": [%s, %s, {\"id\": 3, \"attempt\": 0, "
                      "\"action\": \"run\", \"gpus\": [{\"index\": 1, \"memory_bytes\": %llu}], "
                      "\"command\": [\"%s\", \"await\", \"%s/stop\"]}]}",
                      a, b, 3328 * MiB, player, ts_ah_shared);
    json_t *j3 = ts_ah_wait_job(3, 0, "running", 20);
    CHECK(j3 != NULL);
    json_decref(j3);
    char *e2 = events_of(2), *e3 = events_of(3), *e1 = events_of(1);
    fprintf(stderr, "job 2 events: %sjob 3 events: %s", e2, e3);
    CHECK(strstr(e2, "\"not_moved\"") != NULL);
    CHECK(strstr(e2, "job 3 needs the room of gpu 1, where this job runs (allocated on gpu 0, "
                     "request 1GiB)") != NULL);
    CHECK(strstr(e3, "job 2 runs on gpu 1, which this job needs (it is allocated on gpu 0)") !=
          NULL);
    CHECK(strstr(e1, "not_moved") == NULL); /* on its logical GPU: not in the way */
    free(e1);
    free(e2);
    free(e3);
    stop_notebooks();
}

/* The mean over four fresh reports of GPU 0's and 1's utilization and of
 * job 2's; its memory in the last. false when four did not come. */
static bool four_reports(double *g0, double *g1, double *job, long long *jmem)
{
    long long last = 0;
    int n = 0;
    *g0 = *g1 = *job = 0;
    double until = ts_ah_now_s() + 15;
    while (n < 4 && ts_ah_now_s() < until) {
        json_t *r = ts_ah_report();
        long long at = json_integer_value(json_object_get(r, "reported_at"));
        json_t *rj = ts_ah_report_job(r, 2, 0);
        json_t *a = json_array_get(json_object_get(r, "gpus"), 0);
        json_t *b = json_array_get(json_object_get(r, "gpus"), 1);
        if (r != NULL && at != last && rj != NULL && a != NULL && b != NULL &&
            json_object_get(rj, "gpu_utilization") != NULL) {
            last = at;
            *g0 += json_number_value(json_object_get(a, "utilization")) / 4;
            *g1 += json_number_value(json_object_get(b, "utilization")) / 4;
            *job += json_number_value(json_object_get(rj, "gpu_utilization")) / 4;
            *jmem = json_integer_value(json_object_get(rj, "gpu_memory_used_bytes"));
            n++;
        }
        json_decref(r);
        ts_ah_sleep_s(0.1);
    }
    return n == 4;
}

static void a_spread_job_s_use_is_measured_on_its_physical_gpu(void)
{
    const char *opts[] = {"--swap-reserve", "64MiB", "--node-scheduler", "spread", NULL};
    agent_start(opts);
    char a[1024];
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s]}", notebook(a, sizeof(a), 1));
    json_t *j1 = ts_ah_wait_job(1, 0, "running", 20);
    /* bound to logical GPU 0 as well: 64 MiB busy 70 % of the time */
    ts_ah_set_desired("{\"generation\": 2, \"jobs\": [%s, {\"id\": 2, \"attempt\": 0, "
                      "\"action\": \"run\", \"gpus\": [{\"index\": 0, \"memory_bytes\": %llu, "
                      "\"memory_limit_bytes\": %llu}], \"command\": [\"%s\", \"busy\", \"64\", "
                      "\"0.7\", \"30\"]}]}",
                      a, 1024 * MiB, 3072 * MiB, probe);
    json_t *j2 = ts_ah_wait_job(2, 0, "running", 20);
    CHECK(j1 != NULL && j2 != NULL);
    json_decref(j1);
    json_decref(j2);
    CHECK(gpu_of(2) == 1);
    ts_ah_sleep_s(2.5); /* past the first second */
    double g0, g1, job;
    long long jmem = 0;
    REQUIRE(four_reports(&g0, &g1, &job, &jmem));
    fprintf(stderr, "gpu0 %.3f gpu1 %.3f job %.3f job mem %lld\n", g0, g1, job, jmem);
    CHECK(g0 == 0);                /* its logical GPU is idle */
    CHECK(g1 > 0.5 && g1 < 0.9);   /* the physical one is busy */
    CHECK(job > 0.5 && job < 0.9); /* and the job is charged for it */
    CHECK(jmem >= (long long)(64 * MiB));
    stop_notebook_1();
}

static void a_restarted_agent_keeps_a_spread_job_on_its_physical_gpu(void)
{
    const char *opts[] = {"--swap-reserve", "64MiB", "--node-scheduler", "spread", NULL};
    agent_start(opts);
    int g1, g2;
    two_notebooks(&g1, &g2);
    CHECK(g1 == 0 && g2 == 1);
    json_t *r = ts_ah_report();
    long pid2 = (long)json_integer_value(json_object_get(ts_ah_report_job(r, 2, 0), "pid"));
    json_decref(r);
    CHECK(ts_ah_agent_stop(SIGKILL) != -1);
    agent_start(opts);
    /* adopted, not started again, and still charged to GPU 1 */
    json_t *j2 = ts_ah_wait_job(2, 0, "running", 20);
    CHECK(j2 != NULL && json_integer_value(json_object_get(j2, "pid")) == pid2);
    json_decref(j2);
    CHECK(gpu_of(2) == 1 && gpu_of(1) == 0);
    /* a third notebook for GPU 0 finds both GPUs at 2.25 GiB: its logical one */
    char a[1024], b[1024], c[1024];
    ts_ah_set_desired("{\"generation\": 3, \"jobs\": [%s, %s, %s]}", notebook(a, sizeof(a), 1),
                      notebook(b, sizeof(b), 2), notebook(c, sizeof(c), 3));
    json_t *j3 = ts_ah_wait_job(3, 0, "running", 20);
    CHECK(j3 != NULL);
    json_decref(j3);
    CHECK(gpu_of(3) == 0);
    stop_notebook_1();
}

static void off_keeps_both_notebooks_on_the_server_s_gpu(void)
{
    const char *opts[] = {"--swap-reserve", "64MiB", "--node-scheduler", "off", NULL};
    agent_start(opts);
    int g1, g2;
    two_notebooks(&g1, &g2);
    CHECK(g1 == 0 && g2 == 0);
    stop_notebooks();
}

static void the_default_does_not_spread_until_re_packing_lands(void)
{
    const char *opts[] = {"--swap-reserve", "64MiB", NULL};
    agent_start(opts);
    int g1, g2;
    two_notebooks(&g1, &g2);
    CHECK(g1 == 0 && g2 == 0);
    stop_notebooks();
}

static void auto_does_not_spread_on_a_node_without_swap(void)
{
    const char *opts[] = {"--node-scheduler", "auto", NULL};
    agent_start(opts);
    int g1, g2;
    two_notebooks(&g1, &g2);
    CHECK(g1 == 0 && g2 == 0);
    stop_notebooks();
}

static void a_bad_mode_is_refused_at_start(void)
{
    const char *opts[] = {"--node-scheduler", "pack", NULL};
    agent_start(opts);
    int st = ts_ah_wait_exit(ts_ah_agent_pid, 10);
    ts_ah_agent_pid = 0;
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
    char *log = ts_files_read(ts_ah_agent_log, 1 << 20, NULL);
    CHECK(log != NULL && strstr(log, "node-scheduler") != NULL);
    free(log);
}

/* ---- main ------------------------------------------------------------------ */

#define CASE(name)                                                                                 \
    {                                                                                              \
#name, name                                                                                \
    }
static const struct {
    const char *name;
    void (*fn)(void);
} cases[] = {
    CASE(spread_starts_the_second_notebook_on_the_gpu_where_it_can_burst),
    CASE(a_spread_job_s_use_is_measured_on_its_physical_gpu),
    CASE(a_restarted_agent_keeps_a_spread_job_on_its_physical_gpu),
    CASE(off_keeps_both_notebooks_on_the_server_s_gpu),
    CASE(the_default_does_not_spread_until_re_packing_lands),
    CASE(auto_does_not_spread_on_a_node_without_swap),
    CASE(a_bad_mode_is_refused_at_start),
    CASE(a_whole_gpu_bind_where_a_notebook_was_spread_says_it_is_not_moved),
};

int main(int argc, char **argv)
{
    bin_dir = getenv("TS_BIN_DIR");
    player = getenv("TS_SHIM_PLAYER");
    probe = getenv("TS_AGENT_PROBE");
    if (argc != 2 || bin_dir == NULL || player == NULL || probe == NULL) {
        fprintf(stderr, "usage: TS_BIN_DIR=.. TS_SHIM_PLAYER=.. TS_AGENT_PROBE=.. nodesched_test "
                        "CASE\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (strcmp(argv[1], cases[i].name) != 0)
            continue;
        ts_ah_setup("nodesched-test");
        cases[i].fn();
        ts_ah_show_agent_log();
        ts_ah_end_agent();
        ts_ah_end_jobs(true);
        return ts_ah_result(cases[i].name);
    }
    fprintf(stderr, "no such case: %s\n", argv[1]);
    return 2;
}
