/*
 * agent_test.c - tessera-agent on one node, without a server: the real
 * binary runs with --desired-file (the desired state is a file the test
 * writes, reports land in DATA/report.json) on two small simulated GPUs, and
 * the test looks at what the jobs, their folders and /proc show.
 *
 * Usage: agent_test CASE. CTest runs one case per test, with TS_BIN_DIR
 * (tessera-agent) and TS_AGENT_PROBE (agent_probe, the job that prints what
 * it sees) in the environment. Every case leaves no process behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/daemon/ajob.h"
#include "api/array.h"
#include "api/files.h"
#include "agent/daemon/proc.h"
#include "agent/simgpu/state.h"
#include "tests/agent/agentharness.h"

static const char *bin_dir, *probe;

/* ---- helpers --------------------------------------------------------------- */

static void setup(void)
{
    bin_dir = getenv("TS_BIN_DIR");
    probe = getenv("TS_AGENT_PROBE");
    if (bin_dir == NULL || probe == NULL) {
        fprintf(stderr, "TS_BIN_DIR and TS_AGENT_PROBE must be set (run through ctest)\n");
        exit(1);
    }
    ts_ah_setup("agent-test");
}

/* Start tessera-agent; extra: NULL-terminated extra arguments or NULL. */
static pid_t agent_start(const char *const *extra)
{
    char exe[PATH_MAX];
    snprintf(exe, sizeof(exe), "%s/tessera-agent", bin_dir);
    const char *argv[40] = {exe,           "--node",
                            "n1",          "--data-dir",
                            ts_ah_data,    "--gpus",
                            "sim:2x1GiB",  "--desired-file",
                            ts_ah_desired, "--report-interval",
                            "1s",          "--log-level",
                            "debug",       "--gpu-reserve",
                            "256MiB"};
    size_t n = 15;
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 38; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    ts_ah_agent_pid = ts_ah_spawn(argv, ts_ah_agent_log);
    return ts_ah_agent_pid;
}

static long long jint(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : -1000;
}

/* A process that exists and has not exited (zombies do not count). */
static bool running(pid_t pid)
{
    struct ts_proc_stat st;
    return pid > 0 && ts_proc_stat(pid, &st) == 0 && st.state != 'Z' && st.state != 'X';
}

static char *job_file(long id, int attempt, const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/jobs/%ld-%d/%s", ts_ah_data, id, attempt, name);
    return ts_files_read(path, 16 << 20, NULL);
}

static int count_substr(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; p != NULL && (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void teardown(void)
{
    ts_ah_end_agent();
    ts_ah_end_jobs(false);
}

/* A desired job with action run: id, attempt, extra members (JSON text
 * without braces, may be empty), command (JSON array text). */
#define JOB(id, attempt, extra, command)                                                           \
    "{\"id\": " #id ", \"attempt\": " #attempt ", \"name\": \"job" #id                             \
    "\", \"project\": \"vision\", \"action\": \"run\", \"grace_seconds\": 5, " extra               \
    " \"command\": " command "}"

/* ---- cases ------------------------------------------------------------------ */

static void a_job_sees_its_environment_folder_and_session(void)
{
    char ckpt[PATH_MAX + 32];
    snprintf(ckpt, sizeof(ckpt), "%s/shared/ckpt/7", ts_ah_root);
    setenv("TESSERA_TOKEN", "agent-secret", 1);
    setenv("SOME_AGENT_SETTING", "x", 1);
    agent_start(NULL);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [" JOB(
                          7, 2,
                          "\"checkpoint_dir\": \"%s\", \"resume_count\": 1,"
                          " \"gpus\": [{\"index\": 1}, {\"index\": 0}],"
                          " \"env\": {\"FOO\": \"bar\", \"TESSERA_JOB_ID\": \"999\","
                          " \"LD_LIBRARY_PATH\": \"/opt/x\"},",
                          "[\"%s\", \"env\"]") "]}",
                      ckpt, probe);
    json_t *j = ts_ah_wait_job(7, 2, "exited", 20);
    REQUIRE(j != NULL);
    CHECK(jint(j, "exit_code") == 0);
    json_decref(j);
    char *out = job_file(7, 2, "output.log");
    REQUIRE(out != NULL);
    char want[PATH_MAX * 2];
    snprintf(want, sizeof(want), "cwd=%s/jobs/7-2\n", ts_ah_data);
    CHECK(strstr(out, want) != NULL); /* no working_dir: its own folder */
    CHECK(strstr(out, "session_leader=1\n") != NULL);
    CHECK(strstr(out, "group_leader=1\n") != NULL);
    CHECK(strstr(out, "env TESSERA_JOB_ID=7\n") != NULL); /* not the desired env's 999 */
    CHECK(strstr(out, "env TESSERA_JOB_NAME=job7\n") != NULL);
    CHECK(strstr(out, "env TESSERA_PROJECT=vision\n") != NULL);
    CHECK(strstr(out, "env TESSERA_ATTEMPT=2\n") != NULL);
    CHECK(strstr(out, "env TESSERA_RESUME_COUNT=1\n") != NULL);
    CHECK(strstr(out, "env TESSERA_NODE=n1\n") != NULL);
    CHECK(strstr(out, "env CUDA_VISIBLE_DEVICES=1,0\n") != NULL);
    CHECK(strstr(out, "env FOO=bar\n") != NULL);
    snprintf(want, sizeof(want), "env TESSERA_CHECKPOINT_DIR=%s\n", ckpt);
    CHECK(strstr(out, want) != NULL);
    snprintf(want, sizeof(want), "env TESSERA_SIMGPU_DIR=%s/simgpu\n", ts_ah_data);
    CHECK(strstr(out, want) != NULL);
    char lib[PATH_MAX], guess[PATH_MAX + 32];
    snprintf(guess, sizeof(guess), "%s/../lib/simgpu", bin_dir);
    REQUIRE(realpath(guess, lib) != NULL);
    snprintf(want, sizeof(want), "env LD_LIBRARY_PATH=%s:/opt/x\n", lib);
    CHECK(strstr(out, want) != NULL);
    /* the agent's own settings and secrets stay out */
    CHECK(strstr(out, "agent-secret") == NULL);
    CHECK(strstr(out, "SOME_AGENT_SETTING") == NULL);
    CHECK(strstr(out, "env PATH=") != NULL);
    free(out);
    struct stat st;
    CHECK(stat(ckpt, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
}

static void a_job_finds_the_simulated_driver_through_its_library_path(void)
{
    agent_start(NULL);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [" JOB(3, 0, "\"gpus\": [{\"index\": 1}],",
                                                            "[\"%s\", \"cuda\"]") "]}",
                      probe);
    json_t *j = ts_ah_wait_job(3, 0, "exited", 20);
    REQUIRE(j != NULL);
    CHECK(jint(j, "exit_code") == 0);
    json_decref(j);
    char *out = job_file(3, 0, "output.log");
    REQUIRE(out != NULL);
    char lib[PATH_MAX], guess[PATH_MAX + 32], want[PATH_MAX + 64];
    snprintf(guess, sizeof(guess), "%s/../lib/simgpu", bin_dir);
    REQUIRE(realpath(guess, lib) != NULL);
    /* dlopen("libcuda.so.1") with no setting of the job's own */
    snprintf(want, sizeof(want), "libcuda=%s/libcuda.so.1\n", lib);
    CHECK(strstr(out, want) != NULL);
    snprintf(want, sizeof(want), "libnvidia-ml=%s/libnvidia-ml.so.1\n", lib);
    CHECK(strstr(out, want) != NULL);
    CHECK(strstr(out, "cuda_devices=1\n") != NULL); /* CUDA_VISIBLE_DEVICES=1 */
    CHECK(strstr(out, "nvml_devices=2\n") != NULL); /* NVML sees the node */
    if (ts_ah_failures)
        fprintf(stderr, "output:\n%s", out);
    free(out);
}

static void exit_codes_signals_and_failures_to_start_are_reported(void)
{
    agent_start(NULL);
    ts_ah_set_desired(
        "{\"generation\": 1, \"jobs\": [" JOB(1, 0, "", "[\"sh\", \"-c\", \"exit 3\"]") "," JOB(
            2, 0, "",
            "[\"sh\", \"-c\", \"kill -USR1 "
            "$$\"]") "," JOB(3, 0, "",
                             "[\"true\"]") "," JOB(4, 0, "",
                                                   "[\"/no/such/program\"]") "," JOB(5, 0,
                                                                                     "\"working_"
                                                                                     "dir\": "
                                                                                     "\"/no/"
                                                                                     "such/"
                                                                                     "folder\",",
                                                                                     "[\"true\""
                                                                                     "]") "," JOB(6,
                                                                                                  0,
                                                                                                  "",
                                                                                                  "[]") "]}");
    json_t *j1 = ts_ah_wait_job(1, 0, "exited", 20), *j2 = ts_ah_wait_job(2, 0, "exited", 20),
           *j3 = ts_ah_wait_job(3, 0, "exited", 20),
           *j4 = ts_ah_wait_job(4, 0, "failed_to_start", 20),
           *j5 = ts_ah_wait_job(5, 0, "failed_to_start", 20),
           *j6 = ts_ah_wait_job(6, 0, "failed_to_start", 20);
    CHECK(j1 != NULL && jint(j1, "exit_code") == 3 && json_object_get(j1, "signal") == NULL);
    CHECK(j2 != NULL && jint(j2, "signal") == SIGUSR1 && json_object_get(j2, "exit_code") == NULL);
    CHECK(j3 != NULL && jint(j3, "exit_code") == 0);
    const char *m4 = json_string_value(json_object_get(j4, "message"));
    const char *m5 = json_string_value(json_object_get(j5, "message"));
    const char *m6 = json_string_value(json_object_get(j6, "message"));
    CHECK(m4 != NULL && strstr(m4, "could not execute \"/no/such/program\"") != NULL);
    CHECK(m5 != NULL && strstr(m5, "could not change to working_dir \"/no/such/folder\"") != NULL);
    CHECK(m6 != NULL && strstr(m6, "no command") != NULL);
    /* the user's log says why too */
    char *out = job_file(4, 0, "output.log");
    CHECK(out != NULL && strstr(out, "could not execute") != NULL);
    free(out);
    json_decref(j1);
    json_decref(j2);
    json_decref(j3);
    json_decref(j4);
    json_decref(j5);
    json_decref(j6);
}

/* The command of a job that writes "start PID" once and then runs until
 * stopped. */
#define STARTS_ONCE "[\"sh\", \"-c\", \"echo start $$; exec sleep 600\"]"

static void a_restarted_agent_adopts_running_jobs_and_never_starts_them_twice(void)
{
    agent_start(NULL);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [" JOB(11, 0, "", STARTS_ONCE) "]}");
    json_t *j = ts_ah_wait_job(11, 0, "running", 20);
    REQUIRE(j != NULL);
    pid_t pid = (pid_t)jint(j, "pid");
    json_decref(j);
    CHECK(running(pid));

    /* killed: the job goes on, its supervisor too */
    CHECK(ts_ah_agent_stop(SIGKILL) != -1);
    ts_ah_sleep_s(0.5);
    CHECK(running(pid));
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/report.json", ts_ah_data);
    unlink(path);

    agent_start(NULL);
    j = ts_ah_wait_job(11, 0, "running", 20);
    REQUIRE(j != NULL);
    CHECK(jint(j, "pid") == pid);
    json_decref(j);
    ts_ah_sleep_s(1.5); /* time to start a second copy, were it going to */
    char *out = job_file(11, 0, "output.log");
    CHECK(out != NULL && count_substr(out, "start ") == 1);
    free(out);

    /* SIGTERM stops the agent only */
    int st = ts_ah_agent_stop(SIGTERM);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ts_ah_sleep_s(0.3);
    CHECK(running(pid));

    /* a third agent still adopts it, and stops it when it is no longer wanted */
    unlink(path);
    agent_start(NULL);
    j = ts_ah_wait_job(11, 0, "running", 20);
    CHECK(j != NULL && jint(j, "pid") == pid);
    json_decref(j);
    ts_ah_set_desired("{\"generation\": 2, \"jobs\": []}");
    j = ts_ah_wait_job(11, 0, "exited", 20);
    CHECK(j != NULL && jint(j, "signal") == SIGTERM);
    json_decref(j);
    CHECK(!running(pid));
}

static void an_exit_status_written_while_the_agent_was_down_is_reported_after_restart(void)
{
    agent_start(NULL);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [" JOB(
        12, 0, "", "[\"sh\", \"-c\", \"echo start; sleep 1; exit 5\"]") "]}");
    json_t *j = ts_ah_wait_job(12, 0, "running", 20);
    REQUIRE(j != NULL);
    pid_t pid = (pid_t)jint(j, "pid");
    json_decref(j);
    CHECK(ts_ah_agent_stop(SIGKILL) != -1);
    double until = ts_ah_now_s() + 10;
    while (running(pid) && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.05);
    ts_ah_sleep_s(0.3);
    char *status = job_file(12, 0, "status.json");
    CHECK(status != NULL && strstr(status, "\"exit_code\":5") != NULL);
    free(status);

    agent_start(NULL);
    j = ts_ah_wait_job(12, 0, "exited", 20);
    CHECK(j != NULL && jint(j, "exit_code") == 5 && jint(j, "pid") == pid);
    json_decref(j);
    ts_ah_sleep_s(0.5);
    char *out = job_file(12, 0, "output.log");
    CHECK(out != NULL && count_substr(out, "start") == 1); /* not run again */
    free(out);
}

static void stop_sends_sigterm_then_sigkill_to_the_whole_group_after_the_grace_period(void)
{
    agent_start(NULL);
    ts_ah_set_desired(
        "{\"generation\": 1, \"jobs\": [" JOB(
            21, 0, "", "[\"%s\", \"ignore-term\", \"2\"]") "," JOB(22, 0, "",
                                                                   "[\"sh\", \"-c\", "
                                                                   "\"trap 'exit 0' "
                                                                   "TERM; while :; do "
                                                                   "sleep 0.1; "
                                                                   "done\"]") "]}",
        probe);
    json_t *j = ts_ah_wait_job(21, 0, "running", 20);
    json_t *k = ts_ah_wait_job(22, 0, "running", 20);
    REQUIRE(j != NULL && k != NULL);
    json_decref(j);
    json_decref(k);
    /* the three processes of job 21 */
    pid_t pids[3] = {0};
    double until = ts_ah_now_s() + 10;
    while (ts_ah_now_s() < until) {
        char *out = job_file(21, 0, "output.log");
        if (out != NULL && strstr(out, "ready") != NULL) {
            sscanf(out, "pid %d\npid %d\npid %d", &pids[0], &pids[1], &pids[2]);
            free(out);
            break;
        }
        free(out);
        ts_ah_sleep_s(0.05);
    }
    REQUIRE(pids[0] > 0 && pids[1] > 0 && pids[2] > 0);

    double t0 = ts_ah_now_s();
    ts_ah_set_desired("{\"generation\": 2, \"jobs\": ["
                      "{\"id\": 21, \"attempt\": 0, \"action\": \"stop\", \"grace_seconds\": 2},"
                      "{\"id\": 22, \"attempt\": 0, \"action\": \"stop\", \"grace_seconds\": 2}]}");
    /* a job that ends on SIGTERM ends within the grace period, by itself */
    k = ts_ah_wait_job(22, 0, "exited", 10);
    CHECK(k != NULL && jint(k, "exit_code") == 0);
    CHECK(ts_ah_now_s() - t0 < 1.5);
    json_decref(k);
    /* one that ignores it, and its children, live until the grace is over */
    ts_ah_sleep_s(1.0);
    for (int i = 0; i < 3; i++)
        CHECK(running(pids[i]));
    j = ts_ah_wait_job(21, 0, "exited", 10);
    double took = ts_ah_now_s() - t0;
    CHECK(j != NULL && jint(j, "signal") == SIGKILL);
    CHECK(took >= 1.9 && took < 5);
    json_decref(j);
    ts_ah_sleep_s(0.2);
    for (int i = 0; i < 3; i++)
        CHECK(!running(pids[i]));
}

static void sigterm_stops_the_agent_cleanly_when_its_driver_has_threads(void)
{
    /* the simulated driver starts a thread when loaded, as the real one
     * does: SIGTERM must still reach the agent's loop, which stops cleanly
     * (exit 0) and removes its idle swap reserve */
    setenv("TESSERA_SIMGPU_LOAD_THREAD", "1", 1);
    const char *extra[] = {"--collision", "swap", "--swap-reserve", "64MiB", NULL};
    agent_start(extra);
    unsetenv("TESSERA_SIMGPU_LOAD_THREAD");
    json_t *r = NULL;
    for (int i = 0; i < 200 && r == NULL; i++) {
        ts_ah_sleep_s(0.05);
        r = ts_ah_report();
    }
    REQUIRE(r != NULL);
    json_decref(r);
    char *log = ts_files_read(ts_ah_agent_log, 1 << 20, NULL);
    REQUIRE(log != NULL);
    const char *p = strstr(log, "swap_path=");
    REQUIRE(p != NULL);
    char reserve[PATH_MAX];
    CHECK(sscanf(p, "swap_path=%4095s", reserve) == 1);
    free(log);
    struct stat st;
    CHECK(stat(reserve, &st) == 0);
    int status = ts_ah_agent_stop(SIGTERM);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(stat(reserve, &st) != 0 && errno == ENOENT);
    log = ts_files_read(ts_ah_agent_log, 1 << 20, NULL);
    CHECK(log != NULL && strstr(log, "stopping on SIGTERM") != NULL);
    CHECK(log != NULL && strstr(log, "swap reserve removed") != NULL);
    free(log);
}

static void a_data_folder_that_jobs_cannot_reach_is_named_at_start(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "not root: no sandbox, nothing to check\n");
        return;
    }
    /* outside the folders a sandbox mounts afresh: beside the binaries */
    char parent[PATH_MAX], data[PATH_MAX + 16], exe[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s/../agent-test-XXXXXX", bin_dir);
    REQUIRE(mkdtemp(parent) != NULL); /* 0700, as mktemp -d makes it */
    snprintf(data, sizeof(data), "%s/data", parent);
    snprintf(exe, sizeof(exe), "%s/tessera-agent", bin_dir);
    for (int open_to_others = 0; open_to_others <= 1; open_to_others++) {
        CHECK(chmod(parent, open_to_others ? 0755 : 0700) == 0);
        truncate(ts_ah_agent_log, 0);
        const char *argv[] = {exe,           "--node", "n1",         "--data-dir",
                              data,          "--gpus", "sim:1x4GiB", "--desired-file",
                              ts_ah_desired, NULL};
        ts_ah_agent_pid = ts_ah_spawn(argv, ts_ah_agent_log);
        char *log = NULL;
        for (int i = 0; i < 200; i++) {
            free(log);
            log = ts_files_read(ts_ah_agent_log, 1 << 20, NULL);
            if (log != NULL && strstr(log, "agent running") != NULL)
                break;
            ts_ah_sleep_s(0.05);
        }
        CHECK(log != NULL && strstr(log, "agent running") != NULL);
        bool warned =
            log != NULL && strstr(log, "sandboxed jobs cannot reach their folders") != NULL;
        CHECK(warned == !open_to_others);
        free(log);
        ts_ah_agent_stop(SIGTERM);
    }
    ts_files_remove_tree(parent);
}

static void a_job_left_out_of_the_desired_state_or_in_another_attempt_is_stopped(void)
{
    char marks[PATH_MAX + 16];
    snprintf(marks, sizeof(marks), "%s/marks", ts_ah_shared);
    agent_start(NULL);
    /* attempt 0 takes a second to stop; attempt 1 must not start before */
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [" JOB(
                          31, 0, "\"checkpoint_dir\": \"%s\",",
                          "[\"sh\", \"-c\", \"trap 'sleep 1; echo a0-end >> %s; exit 0' TERM; "
                          "while :; do sleep 0.1; done\"]") "," JOB(32, 0, "", STARTS_ONCE) "]}",
                      ts_ah_shared, marks);
    json_t *a0 = ts_ah_wait_job(31, 0, "running", 20), *b = ts_ah_wait_job(32, 0, "running", 20);
    REQUIRE(a0 != NULL && b != NULL);
    json_decref(a0);
    json_decref(b);
    ts_ah_set_desired("{\"generation\": 2, \"jobs\": [" JOB(
                          31, 1, "\"checkpoint_dir\": \"%s\",",
                          "[\"sh\", \"-c\", \"echo a1-start >> %s; exec sleep 600\"]") "]}",
                      ts_ah_shared, marks);
    b = ts_ah_wait_job(32, 0, "exited", 20);
    CHECK(b != NULL && jint(b, "signal") == SIGTERM);
    json_decref(b);
    a0 = ts_ah_wait_job(31, 0, "exited", 20);
    CHECK(a0 != NULL && jint(a0, "exit_code") == 0);
    json_decref(a0);
    json_t *a1 = ts_ah_wait_job(31, 1, "running", 20);
    CHECK(a1 != NULL);
    json_decref(a1);
    ts_ah_sleep_s(0.3);
    char *m = ts_files_read(marks, 4096, NULL);
    CHECK(m != NULL && strcmp(m, "a0-end\na1-start\n") == 0);
    free(m);
}

static void samples_show_gpu_and_job_utilization_and_memory(void)
{
    agent_start(NULL);
    /* 64 MiB on GPU 1, busy half the time */
    ts_ah_set_desired(
        "{\"generation\": 1, \"jobs\": [" JOB(41, 0, "\"gpus\": [{\"index\": 1}],",
                                              "[\"%s\", \"busy\", \"64\", \"0.5\", \"60\"]") "]}",
        probe);
    json_t *j = ts_ah_wait_job(41, 0, "running", 20);
    REQUIRE(j != NULL);
    json_decref(j);
    /* past the first second, then four reports */
    ts_ah_sleep_s(2.5);
    double gpu0 = 0, gpu1 = 0, job = 0;
    long long mem1 = 0, jmem = 0;
    int n = 0;
    long long last = 0;
    double until = ts_ah_now_s() + 15;
    while (n < 4 && ts_ah_now_s() < until) {
        json_t *r = ts_ah_report();
        long long at = jint(r, "reported_at");
        json_t *rj = ts_ah_report_job(r, 41, 0);
        json_t *g0 = json_array_get(json_object_get(r, "gpus"), 0);
        json_t *g1 = json_array_get(json_object_get(r, "gpus"), 1);
        if (r != NULL && at != last && rj != NULL && g0 != NULL && g1 != NULL &&
            json_object_get(rj, "gpu_utilization") != NULL) {
            last = at;
            gpu0 += json_number_value(json_object_get(g0, "utilization"));
            gpu1 += json_number_value(json_object_get(g1, "utilization"));
            job += json_number_value(json_object_get(rj, "gpu_utilization"));
            mem1 = jint(g1, "memory_used_bytes");
            jmem = jint(rj, "gpu_memory_used_bytes");
            CHECK(jint(g1, "index") == 1);
            n++;
        }
        json_decref(r);
        ts_ah_sleep_s(0.1);
    }
    REQUIRE(n == 4);
    gpu0 /= n;
    gpu1 /= n;
    job /= n;
    fprintf(stderr, "gpu0 %.3f gpu1 %.3f job %.3f mem1 %lld job mem %lld\n", gpu0, gpu1, job, mem1,
            jmem);
    CHECK(gpu0 == 0);
    CHECK(gpu1 > 0.35 && gpu1 < 0.65);
    CHECK(job > 0.35 && job < 0.65);
    CHECK(mem1 >= 64LL << 20 && mem1 < 80LL << 20);
    CHECK(jmem >= 64LL << 20 && jmem < 80LL << 20);
}

static void the_node_description_names_every_gpu(void)
{
    const char *extra[] = {"--labels", "zone=a,rack=r7", "--cpu", "3", "--memory", "8GiB", NULL};
    agent_start(extra);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/node.json", ts_ah_data);
    json_t *n = NULL;
    double until = ts_ah_now_s() + 10;
    while ((n = ts_files_read_json(path)) == NULL && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.05);
    REQUIRE(n != NULL);
    CHECK(jint(n, "cpu") == 3);
    CHECK(jint(n, "memory_bytes") == 8LL << 30);
    CHECK(jint(n, "gpu_reserve_bytes") == 256LL << 20);
    json_t *labels = json_object_get(n, "labels");
    CHECK(json_object_size(labels) == 2 &&
          strcmp(json_string_value(json_object_get(labels, "rack")), "r7") == 0);
    json_t *gpus = json_object_get(n, "gpus");
    CHECK(json_array_size(gpus) == 2);
    for (size_t i = 0; i < json_array_size(gpus); i++) {
        json_t *g = json_array_get(gpus, i);
        CHECK(jint(g, "index") == (long long)i);
        CHECK(jint(g, "memory_bytes") == 1LL << 30);
        const char *uuid = json_string_value(json_object_get(g, "uuid"));
        CHECK(uuid != NULL && strncmp(uuid, "GPU-", 4) == 0 && strlen(uuid) == 40);
        const char *model = json_string_value(json_object_get(g, "model"));
        CHECK(model != NULL && strstr(model, "SimGPU") != NULL);
    }
    json_decref(n);
    /* a second agent on the same folder is refused */
    pid_t first = ts_ah_agent_pid;
    pid_t second = agent_start(NULL);
    int st = ts_ah_wait_exit(second, 10);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
    ts_ah_agent_pid = first;
}

static void the_nvml_backend_reads_the_libnvidia_ml_the_loader_finds(void)
{
    /* simgpu's NVML stands in for NVIDIA's: found through LD_LIBRARY_PATH */
    char lib[PATH_MAX], guess[PATH_MAX + 32], gpus[PATH_MAX + 16];
    snprintf(guess, sizeof(guess), "%s/../lib/simgpu", bin_dir);
    REQUIRE(realpath(guess, lib) != NULL);
    /* in the folder a sandboxed job sees, open to its user: the stand-in
     * for /dev/nvidia* */
    snprintf(gpus, sizeof(gpus), "%s/gpus", ts_ah_shared);
    REQUIRE(ts_simgpu_create(gpus, 3, 2ull << 30, 0) == 0);
    CHECK(chmod(gpus, 0755) == 0);
    for (int i = 0; i < 3; i++) {
        char state[PATH_MAX + 64];
        snprintf(state, sizeof(state), "%s/gpu%d.state", gpus, i);
        CHECK(chmod(state, 0666) == 0);
    }
    setenv("LD_LIBRARY_PATH", lib, 1);
    setenv("TESSERA_SIMGPU_DIR", gpus, 1);
    agent_start((const char *[]){"--gpus", "nvml", NULL});
    unsetenv("LD_LIBRARY_PATH");
    unsetenv("TESSERA_SIMGPU_DIR");
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/node.json", ts_ah_data);
    json_t *n = NULL;
    double until = ts_ah_now_s() + 10;
    while ((n = ts_files_read_json(path)) == NULL && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.05);
    REQUIRE(n != NULL);
    CHECK(json_array_size(json_object_get(n, "gpus")) == 3);
    CHECK(jint(json_array_get(json_object_get(n, "gpus"), 2), "memory_bytes") == 2LL << 30);
    json_decref(n);
    snprintf(path, sizeof(path), "%s/simgpu", ts_ah_data);
    CHECK(!ts_files_exists(path)); /* nothing simulated by the agent itself */

    /* a job that brings its own driver path; the agent adds no simgpu
     * variables of its own, and orders CUDA's devices as NVML does */
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [" JOB(
                          51, 0,
                          "\"gpus\": [{\"index\": 2}], \"checkpoint_dir\": \"%s\", "
                          "\"env\": {\"LD_LIBRARY_PATH\": \"%s\", \"TESSERA_SIMGPU_DIR\": \"%s\"},",
                          "[\"%s\", \"busy\", \"32\", \"0.5\", \"60\"]") "," JOB(52, 0, "",
                                                                                 "[\"%s\", "
                                                                                 "\"env\"]") "]}",
                      ts_ah_shared, lib, gpus, probe, probe);
    json_t *j = ts_ah_wait_job(52, 0, "exited", 20);
    CHECK(j != NULL);
    json_decref(j);
    char *out = job_file(52, 0, "output.log");
    CHECK(out != NULL && strstr(out, "env CUDA_DEVICE_ORDER=PCI_BUS_ID\n") != NULL);
    CHECK(out != NULL && strstr(out, "TESSERA_SIMGPU_DIR") == NULL);
    CHECK(out != NULL && strstr(out, "env LD_LIBRARY_PATH") == NULL);
    free(out);
    REQUIRE((j = ts_ah_wait_job(51, 0, "running", 20)) != NULL);
    json_decref(j);
    /* memory per GPU and per job from NVML's process list */
    long long mem = 0, jmem = 0;
    double util = 0;
    until = ts_ah_now_s() + 15;
    while (ts_ah_now_s() < until) {
        json_t *r = ts_ah_report();
        json_t *g2 = json_array_get(json_object_get(r, "gpus"), 2);
        json_t *rj = ts_ah_report_job(r, 51, 0);
        mem = jint(g2, "memory_used_bytes");
        jmem = jint(rj, "gpu_memory_used_bytes");
        util = json_number_value(json_object_get(g2, "utilization"));
        json_decref(r);
        if (mem >= 32LL << 20 && jmem >= 32LL << 20 && util > 0.2)
            break;
        ts_ah_sleep_s(0.2);
    }
    CHECK(mem >= 32LL << 20 && mem < 48LL << 20);
    CHECK(jmem >= 32LL << 20 && jmem < 48LL << 20);
    CHECK(util > 0.2 && util < 0.8);
}

/* Start the agent with extra arguments; it must exit at once, non-zero,
 * with want in its log. */
static void refused(const char *const *extra, const char *want)
{
    truncate(ts_ah_agent_log, 0);
    pid_t p = agent_start(extra);
    int st = ts_ah_wait_exit(p, 10);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
    ts_ah_agent_pid = 0;
    char *log = ts_files_read(ts_ah_agent_log, 1 << 20, NULL);
    if (log == NULL || strstr(log, want) == NULL) {
        fprintf(stderr, "wanted \"%s\" in the agent's log\n", want);
        ts_ah_failures++;
    }
    free(log);
}

static void bad_options_are_refused_with_a_message(void)
{
    refused((const char *[]){"--gpus", "sim:0x1GiB", NULL}, "invalid value for --gpus");
    refused((const char *[]){"--gpus", "cuda", NULL}, "invalid value for --gpus");
    refused((const char *[]){"--gpu-reserve", "1GiB", NULL},
            "--gpu-reserve must be below the memory of every GPU");
    refused((const char *[]){"--labels", "zone", NULL}, "invalid value for --labels");
    refused((const char *[]){"--node", "Not_A_Name", NULL}, "invalid value for --node");
    refused((const char *[]){"--simgpu-lib-dir", "/no/such/dir", NULL},
            "could not load /no/such/dir/libnvidia-ml.so.1");
}

/* ---- the environment, without processes -------------------------------------- */

/* A desired job decoded from JSON text, as the agent decodes it. */
static enum ts_err desired_job(struct ts_arena *ar, struct ts_desired_job *d, struct ts_error *err,
                               const char *text)
{
    json_t *v = json_loads(text, 0, NULL);
    enum ts_err e = ts_wire_desired_job_decode(v, "", ar, d, err);
    json_decref(v);
    return e;
}

static void the_job_environment_puts_tessera_variables_over_the_desired_env(void)
{
    setenv("PATH", "/agent/bin", 1);
    setenv("TESSERA_TOKEN", "secret", 1);
    struct ts_gpus gpus = {.count = 2};
    snprintf(gpus.simgpu_dir, sizeof(gpus.simgpu_dir), "/data/simgpu");
    snprintf(gpus.lib_dir, sizeof(gpus.lib_dir), "/opt/tessera/lib/simgpu");
    struct ts_ajob_ctx ctx = {.data_dir = "/data", .node = "n9", .gpus = &gpus};
    struct ts_arena *ar = ts_arena_new();
    struct ts_desired_job d;
    struct ts_error err = {0};
    REQUIRE(ar != NULL);
    REQUIRE(desired_job(ar, &d, &err,
                        "{\"id\": 5, \"attempt\": 1, \"action\": \"run\", \"name\": \"x\","
                        " \"project\": \"p\", \"resume_count\": 2,"
                        " \"gpus\": [{\"index\": 3}, {\"index\": 1}],"
                        " \"env\": {\"PATH\": \"/job/bin\", \"TESSERA_ATTEMPT\": \"9\","
                        " \"CUDA_VISIBLE_DEVICES\": \"0\"}}") == TS_OK);
    char msg[256];
    char **env = ts_ajob_env_build(&ctx, &d, "/ckpt/5", msg, sizeof(msg));
    REQUIRE(env != NULL);
    const char *want[] = {"PATH=/job/bin",
                          "TESSERA_JOB_ID=5",
                          "TESSERA_JOB_NAME=x",
                          "TESSERA_PROJECT=p",
                          "TESSERA_ATTEMPT=1",
                          "TESSERA_CHECKPOINT_DIR=/ckpt/5",
                          "TESSERA_RESUME_COUNT=2",
                          "TESSERA_NODE=n9",
                          "CUDA_VISIBLE_DEVICES=3,1",
                          "TESSERA_SIMGPU_DIR=/data/simgpu",
                          "LD_LIBRARY_PATH=/opt/tessera/lib/simgpu",
                          NULL};
    for (size_t i = 0; want[i] != NULL; i++) {
        bool found = false;
        for (size_t k = 0; env[k] != NULL; k++)
            found = found || strcmp(env[k], want[i]) == 0;
        if (!found)
            fprintf(stderr, "missing %s\n", want[i]);
        CHECK(found);
    }
    size_t n = 0;
    for (size_t k = 0; env[k] != NULL; k++, n++)
        CHECK(strncmp(env[k], "TESSERA_TOKEN=", 14) != 0);
    /* each name once */
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++) {
            size_t la = strcspn(env[a], "=");
            CHECK(!(la == strcspn(env[b], "=") && strncmp(env[a], env[b], la) == 0));
        }
    ts_ajob_env_free(env);

    /* an env that is not an object of strings is refused with a reason,
     * before any job is built from it (api/wire_desired.c) */
    CHECK(desired_job(ar, &d, &err,
                      "{\"id\": 5, \"attempt\": 1, \"action\": \"run\", \"env\": {\"A\": 1}}") ==
              TS_ERR_WRONG_TYPE &&
          strcmp(err.field, "env.A") == 0);

    /* real GPUs: CUDA numbers them as NVML does */
    gpus.lib_dir[0] = '\0';
    REQUIRE(desired_job(ar, &d, &err, "{\"id\": 5, \"attempt\": 1, \"action\": \"run\"}") == TS_OK);
    env = ts_ajob_env_build(&ctx, &d, "/ckpt/5", msg, sizeof(msg));
    REQUIRE(env != NULL);
    bool order = false, simdir = false;
    for (size_t k = 0; env[k] != NULL; k++) {
        order = order || strcmp(env[k], "CUDA_DEVICE_ORDER=PCI_BUS_ID") == 0;
        simdir = simdir || strncmp(env[k], "TESSERA_SIMGPU_DIR=", 19) == 0;
    }
    CHECK(order && !simdir);
    ts_ajob_env_free(env);
    ts_arena_free(ar);
}

static void proc_stat_reads_start_time_session_and_group(void)
{
    struct ts_proc_stat st;
    REQUIRE(ts_proc_stat(getpid(), &st) == 0);
    CHECK(st.session == getsid(0));
    CHECK(st.pgrp == getpgrp());
    CHECK(st.ppid == getppid());
    CHECK(st.start_ticks > 0);
    CHECK(ts_proc_same(getpid(), st.start_ticks));
    CHECK(!ts_proc_same(getpid(), st.start_ticks + 1)); /* a reused pid */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    CHECK(ts_proc_stat(child, &st) == -ENOENT);
    CHECK(!ts_proc_same(child, 0));
}

/* ---- main ------------------------------------------------------------------ */

struct test_case {
    const char *name;
    void (*fn)(void);
    bool agent; /* runs tessera-agent */
};

#define CASE(name, agent)                                                                          \
    {                                                                                              \
#name, name, agent                                                                         \
    }
static const struct test_case cases[] = {
    CASE(a_job_sees_its_environment_folder_and_session, true),
    CASE(a_job_finds_the_simulated_driver_through_its_library_path, true),
    CASE(exit_codes_signals_and_failures_to_start_are_reported, true),
    CASE(a_restarted_agent_adopts_running_jobs_and_never_starts_them_twice, true),
    CASE(an_exit_status_written_while_the_agent_was_down_is_reported_after_restart, true),
    CASE(stop_sends_sigterm_then_sigkill_to_the_whole_group_after_the_grace_period, true),
    CASE(sigterm_stops_the_agent_cleanly_when_its_driver_has_threads, true),
    CASE(a_data_folder_that_jobs_cannot_reach_is_named_at_start, true),
    CASE(a_job_left_out_of_the_desired_state_or_in_another_attempt_is_stopped, true),
    CASE(samples_show_gpu_and_job_utilization_and_memory, true),
    CASE(the_node_description_names_every_gpu, true),
    CASE(bad_options_are_refused_with_a_message, true),
    CASE(the_nvml_backend_reads_the_libnvidia_ml_the_loader_finds, true),
    CASE(the_job_environment_puts_tessera_variables_over_the_desired_env, false),
    CASE(proc_stat_reads_start_time_session_and_group, false),
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: agent_test CASE\n");
        return 2;
    }
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        if (strcmp(argv[1], cases[i].name) != 0)
            continue;
        if (cases[i].agent)
            setup();
        cases[i].fn();
        if (cases[i].agent) {
            ts_ah_show_agent_log();
            teardown();
        }
        return ts_ah_result(cases[i].name);
    }
    fprintf(stderr, "no such case: %s\n", argv[1]);
    return 2;
}
