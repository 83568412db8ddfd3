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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/ledger/ledger.h"
#include "api/array.h"
#include "api/files.h"
#include "tests/agent/agentharness.h"

#define MiB (1ull << 20)

static const char *bin_dir, *player, *probe, *cuda_job;
static bool real_shim; /* jobs run under the real libtessera-cuda.so */

/* The agent on sim:2x4GiB (3.25 GiB usable per GPU) with extra options. */
static void agent_start(const char *const *extra)
{
    char exe[PATH_MAX];
    snprintf(exe, sizeof(exe), "%s/tessera-agent", bin_dir);
    const char *argv[32] = {exe,           "--node",
                            "n1",          "--data-dir",
                            ts_ah_data,    "--gpus",
                            "sim:2x4GiB",  "--desired-file",
                            ts_ah_desired, "--report-interval",
                            "1s",          "--log-level",
                            "debug",       "--gpu-reserve",
                            "768MiB",      "--sandbox",
                            "off"};
    /* every case has the shim beside the binary (shim_player never calls
     * into it); the real shim's cases run sandboxed, the default, as users
     * run them (unsandboxed where the test is not root) */
    size_t n = real_shim ? 15 : 17;
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

static bool has_slot(long id, int g);
static bool dev0_is(long id, int g);

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
    /* its logical GPU after its own: where re-packing may move it */
    CHECK(launch != NULL && strstr(launch, "\"CUDA_VISIBLE_DEVICES=1,0\"") != NULL);
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
    /* shim_player acknowledges TS_CMD_MOVE without moving, as a shim
     * before ledger ABI 1.3 would: re-packing finds no slot of it on GPU 0 */
    CHECK(strstr(e2, "job 3 needs the room of gpu 1, where this job runs (allocated on gpu 0, "
                     "request 1GiB): it could not be moved back (pid ") != NULL);
    CHECK(strstr(e2, "acknowledged the move without moving") != NULL);
    CHECK(strstr(e3, "job 2 runs on gpu 1, which this job needs (it is allocated on gpu 0)") !=
          NULL);
    CHECK(strstr(e2, "\"moved\"") == NULL);
    CHECK(gpu_of(2) == 1);                  /* still there */
    CHECK(strstr(e1, "not_moved") == NULL); /* on its logical GPU: not in the way */
    free(e1);
    free(e2);
    free(e3);
    stop_notebooks();
}

/* A move the shim answers only after its deadline (shim_player slowmove:
 * 40 s, then an answer without moving): the bind waits 30 s, then starts
 * with not_moved on both jobs; the move is not undone while it may still
 * end (the folder's dev0.ledger stays GPU 0's past the broker's deadline),
 * and once the answer comes it is undone (dev0.ledger GPU 1's, no slot on
 * GPU 0). */
static void a_move_answered_after_its_deadline_lets_the_bind_start_and_is_followed_to_its_end(void)
{
    const char *opts[] = {"--swap-reserve", "64MiB", "--node-scheduler", "spread", NULL};
    agent_start(opts);
    char a[1024], b[1024];
    notebook(a, sizeof(a), 1);
    snprintf(b, sizeof(b),
             "{\"id\": 2, \"attempt\": 0, \"action\": \"run\", \"grace_seconds\": 2, "
             "\"gpus\": [{\"index\": 0, \"memory_bytes\": %llu, \"memory_limit_bytes\": %llu}], "
             "\"command\": [\"%s\", \"slowmove\", \"40\", \"await\", \"%s/stop\", \"await\", "
             "\"%s/stop\"]}",
             1024 * MiB, 3072 * MiB, player, ts_ah_shared, ts_ah_shared);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s]}", a);
    json_t *j1 = ts_ah_wait_job(1, 0, "running", 20);
    ts_ah_set_desired("{\"generation\": 2, \"jobs\": [%s, %s]}", a, b);
    json_t *j2 = ts_ah_wait_job(2, 0, "running", 20);
    CHECK(j1 != NULL && j2 != NULL);
    json_decref(j1);
    json_decref(j2);
    REQUIRE(gpu_of(2) == 1);
    double t0 = ts_ah_now_s();
    ts_ah_set_desired("{\"generation\": 3, \"jobs\": [%s, %s, {\"id\": 3, \"attempt\": 0, "
                      "\"action\": \"run\", \"gpus\": [{\"index\": 1, \"memory_bytes\": %llu}], "
                      "\"command\": [\"%s\", \"await\", \"%s/stop\"]}]}",
                      a, b, 3328 * MiB, player, ts_ah_shared);
    json_t *j3 = ts_ah_wait_job(3, 0, "running", 60);
    double took = ts_ah_now_s() - t0;
    CHECK(j3 != NULL);
    json_decref(j3);
    fprintf(stderr, "job 3 ran %.1f s after its bind\n", took);
    CHECK(took > 25 && took < 40);
    char *e3 = events_of(3);
    CHECK(strstr(e3, "job 2 runs on gpu 1, which this job needs (it is allocated on gpu 0): it "
                     "could not be moved back (") != NULL);
    CHECK(strstr(e3, "within 30 s") != NULL);
    free(e3);
    /* past the broker's deadline (30 s after the command), before the
     * answer (40 s): the move is still followed, nothing undone */
    while (ts_ah_now_s() - t0 < 35)
        ts_ah_sleep_s(0.2);
    CHECK(dev0_is(2, 0) && has_slot(2, 0));
    /* the answer: it did not move; everything is undone */
    double until = ts_ah_now_s() + 30;
    while ((!dev0_is(2, 1) || has_slot(2, 0)) && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.2);
    CHECK(dev0_is(2, 1) && has_slot(2, 1) && !has_slot(2, 0));
    char *log = ts_files_read(ts_ah_agent_log, 1 << 22, NULL);
    CHECK(log != NULL && strstr(log, "has not answered the move in time") != NULL);
    CHECK(log != NULL && strstr(log, "acknowledged the move without moving") != NULL);
    free(log);
    char *e2 = events_of(2);
    CHECK(strstr(e2, "\"type\":\"moved\"") == NULL);
    free(e2);
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

/* Multi-GPU jobs are not moved: the node never spreads one (it starts on
 * the server's GPUs, nothing to move back), so re-packing never asks; the
 * broker would refuse it ("a job on several GPUs is not moved"). Here: a
 * two-GPU fractional job beside a notebook on GPU 0, where spreading would
 * have a GPU with more room for it. */
static void a_two_gpu_job_is_never_spread_so_never_moved(void)
{
    const char *opts[] = {"--swap-reserve", "64MiB", "--node-scheduler", "spread", NULL};
    agent_start(opts);
    char a[1024];
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s]}", notebook(a, sizeof(a), 1));
    json_t *j1 = ts_ah_wait_job(1, 0, "running", 20);
    ts_ah_set_desired(
        "{\"generation\": 2, \"jobs\": [%s, {\"id\": 2, \"attempt\": 0, \"action\": \"run\", "
        "\"gpus\": [{\"index\": 1, \"memory_bytes\": %llu, \"memory_limit_bytes\": %llu}, "
        "{\"index\": 0, \"memory_bytes\": %llu, \"memory_limit_bytes\": %llu}], "
        "\"command\": [\"%s\", \"await\", \"%s/stop\"]}]}",
        a, 1024 * MiB, 3072 * MiB, 1024 * MiB, 3072 * MiB, player, ts_ah_shared);
    json_t *j2 = ts_ah_wait_job(2, 0, "running", 20);
    CHECK(j1 != NULL && j2 != NULL);
    json_decref(j1);
    json_decref(j2);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/jobs/2-0/spec.json", ts_ah_data);
    json_t *spec = ts_files_read_json(path);
    json_t *gs = json_object_get(spec, "gpus");
    CHECK(json_array_size(gs) == 2);
    for (size_t k = 0; k < json_array_size(gs); k++) {
        json_t *g = json_array_get(gs, k);
        CHECK(json_integer_value(json_object_get(g, "index")) == (k == 0 ? 1 : 0));
        CHECK(json_object_get(g, "logical_index") == NULL);
    }
    json_decref(spec);
    snprintf(path, sizeof(path), "%s/jobs/2-0/launch.json", ts_ah_data);
    char *launch = ts_files_read(path, 1 << 20, NULL);
    CHECK(launch != NULL && strstr(launch, "\"CUDA_VISIBLE_DEVICES=1,0\"") != NULL);
    free(launch);
    CHECK(gpu_of(1) == 0);
    stop_notebooks();
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

static void the_default_spreads_on_a_node_that_swaps(void)
{
    /* auto, now that a bind that needs the room moves them back */
    const char *opts[] = {"--swap-reserve", "64MiB", NULL};
    agent_start(opts);
    int g1, g2;
    two_notebooks(&g1, &g2);
    CHECK(g1 == 0 && g2 == 1);
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

/* ---- re-pack on demand, under the real shim -------------------------------- */

/* Whether the ledger of physical GPU g holds a slot of job id. */
static bool has_slot(long id, int g)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/ledger/gpu%d.ledger", ts_ah_data, g);
    struct ts_ledger *l = ts_ledger_open(path);
    bool has = l != NULL && ts_ledger_find_job(l, ts_ledger_key(id, 0)) >= 0;
    ts_ledger_close(l);
    return has;
}

/* A desired cuda_job (buf, 4 KiB) on GPU index with request and limit in
 * MiB, running steps (space-separated). */
static char *cjob(char *buf, int id, int index, unsigned req, unsigned lim, const char *steps)
{
    char argv[2048] = "", copy[1024];
    snprintf(copy, sizeof(copy), "%s", steps);
    for (char *save = NULL, *w = strtok_r(copy, " ", &save); w != NULL;
         w = strtok_r(NULL, " ", &save)) {
        size_t n = strlen(argv);
        snprintf(argv + n, sizeof(argv) - n, ", \"%s\"", w);
    }
    snprintf(buf, 4096,
             "{\"id\": %d, \"attempt\": 0, \"name\": \"j%d\", \"project\": \"p\", "
             "\"action\": \"run\", \"grace_seconds\": 2, \"gpus\": [{\"index\": %d, "
             "\"memory_bytes\": %llu, \"memory_limit_bytes\": %llu}], \"checkpoint_dir\": \"%s\", "
             "\"command\": [\"%s\"%s]}",
             id, id, index, (unsigned long long)req * MiB, (unsigned long long)lim * MiB,
             ts_ah_shared, cuda_job, argv);
    return buf;
}

static bool wait_file(const char *path, double timeout_s)
{
    double until = ts_ah_now_s() + timeout_s;
    while (access(path, F_OK) != 0 && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.05);
    return access(path, F_OK) == 0;
}

static char *job_output(long id)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/jobs/%ld-0/output.log", ts_ah_data, id);
    char *t = ts_files_read(path, 1 << 20, NULL);
    return t != NULL ? t : strdup("");
}

/* Whether cuda_job's output read every allocation back intact at the
 * address it was allocated at. */
static bool intact_at_same_addresses(const char *out)
{
    if (strstr(out, "data intact") == NULL || strstr(out, " lost") != NULL)
        return false;
    int allocs = 0;
    for (const char *p = strstr(out, "alloc ok "); p != NULL; p = strstr(p + 1, "alloc ok ")) {
        int dev;
        unsigned long mib;
        unsigned long long addr;
        if (sscanf(p, "alloc ok dev=%d mib=%lu addr=0x%llx", &dev, &mib, &addr) != 3)
            return false;
        char want[128];
        snprintf(want, sizeof(want), "check dev=%d addr=0x%llx intact\n", dev, addr);
        if (strstr(out, want) == NULL)
            return false;
        allocs++;
    }
    return allocs > 0;
}

/* The physical GPU a running job's report names for its GPU 0, or -1. */
static int reported_physical(long id)
{
    json_t *r = ts_ah_report();
    json_t *g = json_array_get(json_object_get(ts_ah_report_job(r, id, 0), "gpus"), 0);
    int p = g != NULL ? (int)json_integer_value(json_object_get(g, "physical_index")) : -1;
    json_decref(r);
    return p;
}

/* The real shim beside the agent (the agent's default --shim-lib); false
 * (the case is skipped) when it was not built. */
static bool use_real_shim(void)
{
    char lib[PATH_MAX + 64];
    snprintf(lib, sizeof(lib), "%s/../lib/libtessera-cuda.so", bin_dir);
    if (access(lib, R_OK) != 0 || cuda_job == NULL) {
        fprintf(stderr, "no %s or TS_CUDA_JOB: skipped\n", lib);
        return false;
    }
    real_shim = true;
    return true;
}

/* cjob's job with an environment (env: JSON members, "\"K\": \"V\", ..."). */
static char *cjob_env(char *buf, int id, int index, unsigned req, unsigned lim, const char *steps,
                      const char *env)
{
    char tmp[4096];
    cjob(tmp, id, index, req, lim, steps);
    const char *at = strstr(tmp, "\"action\": \"run\", ");
    if (at == NULL)
        return strcpy(buf, tmp);
    int head = (int)(at - tmp) + (int)strlen("\"action\": \"run\", ");
    snprintf(buf, 4096, "%.*s\"env\": {%s}, %s", head, tmp, env, tmp + head);
    return buf;
}

/* Two notebooks of logical GPU 0 (request 1 GiB, limit 3 GiB) under the
 * real shim, on an agent that spreads (128 MiB of swap reserve): each runs
 * its steps (nb1, nb2: cuda_job steps before "mark"), marks a flag, awaits
 * the stop flag and checks its memory. Notebook 2 (its environment env, or
 * NULL; procs processes, each marking) is spread onto GPU 1. ok is false
 * when a required step failed (the case returns). */
/* The options of an agent that spreads, with room to swap. */
static const char *spread_opts[] = {"--swap-reserve", "128MiB", "--node-scheduler", "spread", NULL};

struct two_notebooks {
    char a[4096], b[4096], c[4096], f1[300], f2[300], stop[300];
    bool ok;
};

static void two_notebooks_spread(struct two_notebooks *t, const char *nb1, const char *nb2,
                                 const char *env, int procs)
{
    t->ok = false;
    agent_start(spread_opts);
    char s1[1024], s2[1024];
    snprintf(t->f1, sizeof(t->f1), "%s/nb1", ts_ah_shared);
    snprintf(t->f2, sizeof(t->f2), "%s/nb2", ts_ah_shared);
    snprintf(t->stop, sizeof(t->stop), "%s/stop", ts_ah_shared);
    snprintf(s1, sizeof(s1), "%s mark %s await %s check", nb1, t->f1, t->stop);
    snprintf(s2, sizeof(s2), "%s mark %s await %s check", nb2, t->f2, t->stop);
    cjob(t->a, 1, 0, 1024, 3072, s1);
    if (env != NULL)
        cjob_env(t->b, 2, 0, 1024, 3072, s2, env);
    else
        cjob(t->b, 2, 0, 1024, 3072, s2);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s]}", t->a);
    REQUIRE(wait_file(t->f1, 30));
    ts_ah_set_desired("{\"generation\": 2, \"jobs\": [%s, %s]}", t->a, t->b);
    REQUIRE(wait_file(t->f2, 60));
    for (int w = 1; w < procs; w++) {
        char fw[320];
        snprintf(fw, sizeof(fw), "%s.w%d", t->f2, w);
        REQUIRE(wait_file(fw, 30));
    }
    REQUIRE(has_slot(2, 1) && !has_slot(2, 0)); /* spread onto GPU 1 */
    t->ok = true;
}

static void a_whole_gpu_bind_moves_the_spread_notebook_back_with_its_memory_intact(void)
{
    if (!use_real_shim())
        return;
    /* two notebooks of logical GPU 0 write their pattern in GPU memory,
     * wait, and read it back */
    struct two_notebooks t;
    two_notebooks_spread(&t, "alloc 0 16", "alloc 0 24 alloc 0 8", NULL, 1);
    if (!t.ok)
        return;
    char *a = t.a, *b = t.b, *c = t.c, *stop = t.stop;
    CHECK(reported_physical(2) == 1);

    /* the server binds a whole GPU (3.25 GiB usable) on logical GPU 1 */
    cjob(c, 3, 1, 3328, 3328, "alloc 0 8 idle 3 check");
    double t0 = ts_ah_now_s();
    ts_ah_set_desired("{\"generation\": 3, \"jobs\": [%s, %s, %s]}", a, b, c);
    json_t *j3 = ts_ah_wait_job(3, 0, "running", 30);
    double took = ts_ah_now_s() - t0;
    CHECK(j3 != NULL);
    json_decref(j3);
    fprintf(stderr, "whole-GPU job 3: desired state written -> running in %.2f s\n", took);
    /* notebook 2 runs on GPU 0 now: its slot moved, its spec and its
     * report say so, and it has the event */
    char *e2 = events_of(2), *e3 = events_of(3);
    fprintf(stderr, "job 2 events: %sjob 3 events: %s", e2, e3);
    CHECK(strstr(e2, "\"type\":\"moved\"") != NULL);
    CHECK(strstr(e2, "moved gpu 1 \u2192 gpu 0 for job 3 (32.0 MiB of GPU memory") != NULL);
    CHECK(strstr(e2, "not_moved") == NULL && strstr(e3, "not_moved") == NULL);
    free(e2);
    free(e3);
    CHECK(has_slot(2, 0) && !has_slot(2, 1));
    CHECK(has_slot(3, 1) && has_slot(1, 0));
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/jobs/2-0/spec.json", ts_ah_data);
    json_t *spec = ts_files_read_json(path);
    json_t *g = json_array_get(json_object_get(spec, "gpus"), 0);
    CHECK(json_integer_value(json_object_get(g, "index")) == 0);
    CHECK(json_object_get(g, "logical_index") == NULL);
    json_decref(spec);
    double until = ts_ah_now_s() + 10;
    while (reported_physical(2) != 0 && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.2);
    CHECK(reported_physical(2) == 0);
    /* the whole-GPU job ran on GPU 1 */
    json_t *e = ts_ah_wait_job(3, 0, "exited", 30);
    CHECK(e != NULL && json_integer_value(json_object_get(e, "exit_code")) == 0);
    json_decref(e);
    /* an agent restarted after SIGKILL adopts the moved notebook where it
     * runs now (same pid, reported on GPU 0, its slot there only) */
    json_t *r = ts_ah_report();
    long pid2 = (long)json_integer_value(json_object_get(ts_ah_report_job(r, 2, 0), "pid"));
    json_decref(r);
    CHECK(pid2 > 0 && ts_ah_agent_stop(SIGKILL) != -1);
    agent_start(spread_opts);
    json_t *j2 = ts_ah_wait_job(2, 0, "running", 20);
    CHECK(j2 != NULL && json_integer_value(json_object_get(j2, "pid")) == pid2);
    json_decref(j2);
    until = ts_ah_now_s() + 10;
    while (reported_physical(2) != 0 && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.2);
    CHECK(reported_physical(2) == 0);
    CHECK(has_slot(2, 0) && !has_slot(2, 1));
    /* both notebooks read their memory back intact at the same addresses */
    ts_files_write_atomic(stop, "", 0, 0644);
    json_t *e1 = ts_ah_wait_job(1, 0, "exited", 60), *x2 = ts_ah_wait_job(2, 0, "exited", 60);
    CHECK(e1 != NULL && json_integer_value(json_object_get(e1, "exit_code")) == 0);
    CHECK(x2 != NULL && json_integer_value(json_object_get(x2, "exit_code")) == 0);
    json_decref(e1);
    json_decref(x2);
    for (long id = 1; id <= 3; id++) {
        char *o = job_output(id);
        CHECK(intact_at_same_addresses(o));
        if (ts_ah_failures)
            fprintf(stderr, "job %ld output:\n%s\n", id, o);
        free(o);
    }
}

/* A fraction, not a whole GPU: 2.5 GiB bound to GPU 1, which the cluster
 * sees with 3.25 GiB free, but where notebook 2 (1 GiB request) was spread:
 * it fits nowhere on the node (2.25 GiB of room on each GPU), so it starts
 * on its logical GPU once notebook 2 is back on GPU 0. */
static void a_fraction_that_fits_only_where_the_cluster_has_room_moves_the_notebook_back(void)
{
    if (!use_real_shim())
        return;
    struct two_notebooks t;
    two_notebooks_spread(&t, "alloc 0 8", "alloc 0 8", NULL, 1);
    if (!t.ok)
        return;
    char *a = t.a, *b = t.b, *c = t.c, *stop = t.stop;
    cjob(c, 3, 1, 2560, 3328, "alloc 0 8 idle 3 check");
    ts_ah_set_desired("{\"generation\": 3, \"jobs\": [%s, %s, %s]}", a, b, c);
    json_t *j3 = ts_ah_wait_job(3, 0, "running", 30);
    CHECK(j3 != NULL);
    json_decref(j3);
    char *e2 = events_of(2), *e3 = events_of(3);
    CHECK(strstr(e2, "moved gpu 1 \u2192 gpu 0 for job 3") != NULL);
    CHECK(strstr(e3, "not_moved") == NULL);
    free(e2);
    free(e3);
    CHECK(has_slot(2, 0) && !has_slot(2, 1));
    CHECK(has_slot(3, 1) && !has_slot(3, 0)); /* where the server put it */
    ts_files_write_atomic(stop, "", 0, 0644);
    for (long id = 1; id <= 3; id++) {
        json_t *x = ts_ah_wait_job(id, 0, "exited", 60);
        CHECK(x != NULL && json_integer_value(json_object_get(x, "exit_code")) == 0);
        json_decref(x);
        char *o = job_output(id);
        CHECK(intact_at_same_addresses(o));
        free(o);
    }
}

/* Whether the job's folder's dev0.ledger is physical GPU g's ledger. */
static bool dev0_is(long id, int g)
{
    char a[PATH_MAX + 64], b[PATH_MAX + 64];
    struct stat x, y;
    snprintf(a, sizeof(a), "%s/jobs/%ld-0/shim/dev0.ledger", ts_ah_data, id);
    snprintf(b, sizeof(b), "%s/ledger/gpu%d.ledger", ts_ah_data, g);
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_ino == y.st_ino && x.st_dev == y.st_dev;
}

static void a_notebook_the_shim_cannot_move_stays_and_both_jobs_say_why(void)
{
    if (!use_real_shim())
        return;
    /* notebook 2 holds managed memory, which the shim's swap engine does
     * not hold: it refuses to move it (CUDA_ERROR_NOT_SUPPORTED) */
    struct two_notebooks t;
    two_notebooks_spread(&t, "alloc 0 16", "alloc 0 8 managed 0 4", NULL, 1);
    if (!t.ok)
        return;
    char *a = t.a, *b = t.b, *c = t.c, *stop = t.stop;

    cjob(c, 3, 1, 3328, 3328, "alloc 0 8 idle 3 check");
    ts_ah_set_desired("{\"generation\": 3, \"jobs\": [%s, %s, %s]}", a, b, c);
    json_t *j3 = ts_ah_wait_job(3, 0, "running", 30);
    CHECK(j3 != NULL);
    json_decref(j3);
    char *e2 = events_of(2), *e3 = events_of(3);
    fprintf(stderr, "job 2 events: %sjob 3 events: %s", e2, e3);
    CHECK(strstr(e2, "\"type\":\"moved\"") == NULL);
    CHECK(strstr(e2,
                 "job 3 needs the room of gpu 1, where this job runs (allocated on gpu 0, "
                 "request 1GiB): it could not be moved back (the shim cannot move pid ") != NULL);
    CHECK(strstr(e3, "job 2 runs on gpu 1, which this job needs (it is allocated on gpu 0): it "
                     "could not be moved back (the shim cannot move pid ") != NULL);
    free(e2);
    free(e3);
    /* everything the move had prepared is undone: it runs on GPU 1 */
    CHECK(has_slot(2, 1) && !has_slot(2, 0));
    CHECK(dev0_is(2, 1));
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/jobs/2-0/spec.json", ts_ah_data);
    json_t *spec = ts_files_read_json(path);
    json_t *g = json_array_get(json_object_get(spec, "gpus"), 0);
    CHECK(json_integer_value(json_object_get(g, "index")) == 1);
    CHECK(json_integer_value(json_object_get(g, "logical_index")) == 0);
    json_decref(spec);
    CHECK(reported_physical(2) == 1);
    json_t *e = ts_ah_wait_job(3, 0, "exited", 30);
    CHECK(e != NULL && json_integer_value(json_object_get(e, "exit_code")) == 0);
    json_decref(e);
    ts_files_write_atomic(stop, "", 0, 0644);
    for (long id = 1; id <= 2; id++) {
        json_t *x = ts_ah_wait_job(id, 0, "exited", 60);
        CHECK(x != NULL && json_integer_value(json_object_get(x, "exit_code")) == 0);
        json_decref(x);
        char *o = job_output(id);
        CHECK(intact_at_same_addresses(o));
        if (ts_ah_failures)
            fprintf(stderr, "job %ld output:\n%s\n", id, o);
        free(o);
    }
}

/* Two processes of notebook 2: the first holds memory the shim moves, the
 * second managed memory it cannot move. The move is all or nothing: the
 * first, moved to GPU 0, goes back to GPU 1, and the job runs there whole
 * (no slot left on GPU 0), both processes' memory intact. */
static void a_job_partly_moved_goes_back_whole_to_its_gpu(void)
{
    if (!use_real_shim())
        return;
    struct two_notebooks t;
    two_notebooks_spread(&t, "alloc 0 16", "fork alloc 0 8 managed1 0 4", NULL, 2);
    if (!t.ok)
        return;
    char *a = t.a, *b = t.b, *c = t.c, *stop = t.stop;

    cjob(c, 3, 1, 3328, 3328, "alloc 0 8 idle 3 check");
    ts_ah_set_desired("{\"generation\": 3, \"jobs\": [%s, %s, %s]}", a, b, c);
    json_t *j3 = ts_ah_wait_job(3, 0, "running", 40);
    CHECK(j3 != NULL);
    json_decref(j3);
    char *e2 = events_of(2);
    fprintf(stderr, "job 2 events: %s", e2);
    CHECK(strstr(e2, "\"type\":\"moved\"") == NULL);
    CHECK(strstr(e2, "1 of its 2 processes could not move (the shim cannot move pid ") != NULL);
    CHECK(strstr(e2, "those that had moved went back to gpu 1, where it runs whole") != NULL);
    free(e2);
    /* whole on GPU 1: no slot on GPU 0, its folder, spec and report say 1 */
    CHECK(has_slot(2, 1) && !has_slot(2, 0));
    CHECK(dev0_is(2, 1));
    CHECK(reported_physical(2) == 1);
    json_t *e = ts_ah_wait_job(3, 0, "exited", 30);
    CHECK(e != NULL && json_integer_value(json_object_get(e, "exit_code")) == 0);
    json_decref(e);
    ts_files_write_atomic(stop, "", 0, 0644);
    for (long id = 1; id <= 2; id++) {
        json_t *x = ts_ah_wait_job(id, 0, "exited", 60);
        CHECK(x != NULL && json_integer_value(json_object_get(x, "exit_code")) == 0);
        json_decref(x);
        char *o = job_output(id);
        CHECK(intact_at_same_addresses(o));
        if (id == 2)
            CHECK(strstr(o, "w1 data intact") != NULL);
        if (ts_ah_failures)
            fprintf(stderr, "job %ld output:\n%s\n", id, o);
        free(o);
    }
}

/* Whether a process of job id in the ledger of GPU g was sent TS_CMD_MOVE
 * and has not answered it yet. */
static bool move_pending(long id, int g)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/ledger/gpu%d.ledger", ts_ah_data, g);
    struct ts_ledger *l = ts_ledger_open(path);
    int j = l != NULL ? ts_ledger_find_job(l, ts_ledger_key(id, 0)) : -1;
    bool pending = false;
    for (int i = 0; j >= 0 && i < TS_LEDGER_PROCS; i++) {
        struct ts_ledger_proc *p = &l->procs[i];
        pending = pending || (atomic_load(&p->pid) != 0 && p->job == j &&
                              atomic_load(&p->cmd) == TS_CMD_MOVE &&
                              atomic_load(&p->ack_seq) != atomic_load(&p->cmd_seq));
    }
    ts_ledger_close(l);
    return pending;
}

/* Whether the agent's log holds s. */
static bool log_has(const char *s)
{
    char *log = ts_files_read(ts_ah_agent_log, 4 << 20, NULL);
    bool has = log != NULL && strstr(log, s) != NULL;
    free(log);
    return has;
}

/* The agent is SIGKILLed while it moves notebook 2 back to GPU 0 (a slow
 * move: its first device-to-device copy refused, so it goes through the
 * host at 8 MB/s, about 4 s each way). The restarted agent adopts the job,
 * takes the move up (the shim finished it meanwhile, or still does), and
 * the job ends whole on GPU 0: its slot there only, its folder, spec and
 * report saying GPU 0, the event moved; the whole-GPU job bound to GPU 1
 * starts; both notebooks read their memory back intact. */
static void a_restart_during_a_move_takes_it_up_and_the_job_ends_whole(void)
{
    if (!use_real_shim())
        return;
    struct two_notebooks t;
    two_notebooks_spread(&t, "alloc 0 16", "alloc 0 32",
                         "\"TESSERA_SIMGPU_FAIL\": \"cuMemcpyDtoDAsync_v2:1\", "
                         "\"TESSERA_SIMGPU_BANDWIDTH\": \"8000000\"",
                         1);
    if (!t.ok)
        return;
    char *a = t.a, *b = t.b, *c = t.c, *stop = t.stop;

    cjob(c, 3, 1, 3328, 3328, "alloc 0 8 idle 3 check");
    ts_ah_set_desired("{\"generation\": 3, \"jobs\": [%s, %s, %s]}", a, b, c);
    double until = ts_ah_now_s() + 20;
    while (!log_has("re-pack: TS_CMD_MOVE sent job=2") && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.02);
    REQUIRE(log_has("re-pack: TS_CMD_MOVE sent job=2"));
    CHECK(ts_ah_agent_stop(SIGKILL) != -1);
    /* under way: not answered yet, a slot in both ledgers, the folder on GPU 0 */
    CHECK(move_pending(2, 1));
    CHECK(dev0_is(2, 0) && has_slot(2, 1));
    agent_start(spread_opts);
    json_t *j3 = ts_ah_wait_job(3, 0, "running", 40);
    CHECK(j3 != NULL);
    json_decref(j3);
    CHECK(log_has("re-pack: taking up the move of job=2 from gpu 1 to gpu 0"));
    char *e2 = events_of(2);
    fprintf(stderr, "job 2 events: %s", e2);
    CHECK(strstr(e2, "\"type\":\"moved\"") != NULL);
    CHECK(strstr(e2, "moved gpu 1 \u2192 gpu 0") != NULL);
    free(e2);
    CHECK(has_slot(2, 0) && !has_slot(2, 1));
    CHECK(dev0_is(2, 0));
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/jobs/2-0/spec.json", ts_ah_data);
    json_t *spec = ts_files_read_json(path);
    json_t *g = json_array_get(json_object_get(spec, "gpus"), 0);
    CHECK(json_integer_value(json_object_get(g, "index")) == 0);
    CHECK(json_object_get(g, "logical_index") == NULL);
    json_decref(spec);
    CHECK(reported_physical(2) == 0);
    json_t *e = ts_ah_wait_job(3, 0, "exited", 30);
    CHECK(e != NULL && json_integer_value(json_object_get(e, "exit_code")) == 0);
    json_decref(e);
    ts_files_write_atomic(stop, "", 0, 0644);
    for (long id = 1; id <= 2; id++) {
        json_t *x = ts_ah_wait_job(id, 0, "exited", 60);
        CHECK(x != NULL && json_integer_value(json_object_get(x, "exit_code")) == 0);
        json_decref(x);
        char *o = job_output(id);
        CHECK(intact_at_same_addresses(o));
        if (ts_ah_failures)
            fprintf(stderr, "job %ld output:\n%s\n", id, o);
        free(o);
    }
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
    CASE(a_two_gpu_job_is_never_spread_so_never_moved),
    CASE(a_restarted_agent_keeps_a_spread_job_on_its_physical_gpu),
    CASE(off_keeps_both_notebooks_on_the_server_s_gpu),
    CASE(the_default_spreads_on_a_node_that_swaps),
    CASE(auto_does_not_spread_on_a_node_without_swap),
    CASE(a_bad_mode_is_refused_at_start),
    CASE(a_whole_gpu_bind_where_a_notebook_was_spread_says_it_is_not_moved),
    CASE(a_move_answered_after_its_deadline_lets_the_bind_start_and_is_followed_to_its_end),
    CASE(a_whole_gpu_bind_moves_the_spread_notebook_back_with_its_memory_intact),
    CASE(a_notebook_the_shim_cannot_move_stays_and_both_jobs_say_why),
    CASE(a_job_partly_moved_goes_back_whole_to_its_gpu),
    CASE(a_restart_during_a_move_takes_it_up_and_the_job_ends_whole),
    CASE(a_fraction_that_fits_only_where_the_cluster_has_room_moves_the_notebook_back),
};

int main(int argc, char **argv)
{
    bin_dir = getenv("TS_BIN_DIR");
    player = getenv("TS_SHIM_PLAYER");
    probe = getenv("TS_AGENT_PROBE");
    cuda_job = getenv("TS_CUDA_JOB");
    if (argc != 2 || bin_dir == NULL || player == NULL || probe == NULL) {
        fprintf(stderr, "usage: TS_BIN_DIR=.. TS_SHIM_PLAYER=.. TS_AGENT_PROBE=.. nodesched_test "
                        "CASE\n");
        return 2;
    }
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
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
