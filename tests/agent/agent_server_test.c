/*
 * agent_server_test.c - tessera-agent against a real tessera-server (and its
 * PostgreSQL), end to end: the agent registers the node and its simulated
 * GPUs, jobs submitted over REST run as real processes, succeed, fail,
 * are cancelled, their output reaches the server, utilization too, and a
 * restarted agent adopts its jobs. Uses tests/integration/harness.c
 * and agentharness.c (starting and stopping the agent).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/files.h"
#include "agent/daemon/proc.h"
#include "tests/agent/agentharness.h"
#include "tests/integration/harness.h"

static struct ts_it_server srv;
static char dir[512], data[600], token_file[600], agent_log[600];
static pid_t agent_pid;

static void agent_start(void)
{
    char exe[512];
    snprintf(exe, sizeof(exe), "%s/tessera-agent", getenv("TS_BIN_DIR"));
    const char *argv[] = {exe,        "--server",      srv.url,      "--token-file",
                          token_file, "--node",        "n1",         "--data-dir",
                          data,       "--gpus",        "sim:2x4GiB", "--report-interval",
                          "1s",       "--labels",      "zone=a",     "--log-level",
                          "debug",    "--gpu-reserve", "512MiB",     NULL};
    agent_pid = ts_ah_spawn(argv, agent_log);
}

/* Signal the agent and wait for it; its wait status (-1: it would not go). */
static int agent_stop(int sig)
{
    int st = ts_ah_stop(agent_pid, sig, 20);
    agent_pid = 0;
    return st;
}

static json_t *get_json(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *get_json(const char *fmt, ...)
{
    char path[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    struct ts_response r;
    long st = ts_it_req(srv.admin, "GET", path, NULL, NULL, &r);
    if (st != 200)
        fail_msg("GET %s: %ld: %s", path, st, r.body.data);
    json_t *v = json_incref(r.json);
    ts_response_free(&r);
    return v;
}

static long long submit(const char *name, const char *command_json, const char *gpu_json)
{
    char body[2048];
    snprintf(body, sizeof(body),
             "{\"name\": \"%s\", \"project\": \"vision\", \"command\": %s, \"gpu\": %s,"
             " \"grace_period\": \"3s\"}",
             name, command_json, gpu_json);
    struct ts_response r;
    long st = ts_it_req(srv.admin, "POST", "/api/v1/jobs", body, NULL, &r);
    if (st != 201)
        fail_msg("submit: %ld %s", st, r.body.data);
    long long id = ts_it_int(r.json, "id");
    ts_response_free(&r);
    return id;
}

/* Wait for the job to reach state; the job (caller's). */
static json_t *wait_state(long long id, const char *state, double secs)
{
    double end = ts_ah_now_s() + secs;
    for (;;) {
        json_t *j = get_json("/api/v1/jobs/%lld", id);
        if (strcmp(ts_it_str(j, "state"), state) == 0)
            return j;
        if (ts_ah_now_s() > end)
            fail_msg("job %lld is %s, not %s, after %.0fs", id, ts_it_str(j, "state"), state, secs);
        json_decref(j);
        usleep(100 * 1000);
    }
}

/* The job's output as the server has it. */
static char *logs(long long id)
{
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/logs", id);
    struct ts_response r;
    long st = ts_it_req(srv.admin, "GET", path, NULL, NULL, &r);
    char *out = strdup(st == 200 && r.body.data ? r.body.data : "");
    ts_response_free(&r);
    return out;
}

/* Wait until the server's copy of the output holds text. */
static char *wait_logs(long long id, const char *text, double secs)
{
    double end = ts_ah_now_s() + secs;
    for (;;) {
        char *out = logs(id);
        if (strstr(out, text) != NULL)
            return out;
        if (ts_ah_now_s() > end)
            fail_msg("job %lld output lacks \"%s\" after %.0fs: \"%s\"", id, text, secs, out);
        free(out);
        usleep(100 * 1000);
    }
}

/* The pid the job's supervisor recorded, and its start time. */
static pid_t job_pid(long long id, int attempt, uint64_t *ticks)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/jobs/%lld-%d/job.json", data, id, attempt);
    json_t *rec = ts_files_read_json(path);
    pid_t pid = (pid_t)ts_it_int(rec, "pid");
    if (ticks != NULL)
        *ticks = (uint64_t)ts_it_int(rec, "start_ticks");
    json_decref(rec);
    return pid;
}

static bool running(pid_t pid, uint64_t ticks)
{
    struct ts_proc_stat st;
    return pid > 0 && ts_proc_stat(pid, &st) == 0 && st.start_ticks == ticks && st.state != 'Z';
}

static int setup(void **state)
{
    (void)state;
    if (ts_it_start(&srv, NULL, NULL) != 0)
        return -1;
    snprintf(dir, sizeof(dir), "%s", srv.dir);
    snprintf(data, sizeof(data), "%s/agent", dir);
    snprintf(token_file, sizeof(token_file), "%s/agent.token", dir);
    snprintf(agent_log, sizeof(agent_log), "%s/agent.log", dir);
    const char *token = ts_it_token(&srv, "agent-n1", "agent", NULL);
    if (token == NULL || ts_files_write_atomic(token_file, token, strlen(token), 0600) != 0)
        return -1;
    struct ts_response r;
    if (ts_it_req(srv.admin, "POST", "/api/v1/departments", "{\"name\": \"research\"}", NULL, &r) !=
        201)
        return -1;
    ts_response_free(&r);
    if (ts_it_req(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"vision\", \"department\": \"research\", \"quota\": {\"gpus\": 2}}",
                  NULL, &r) != 201)
        return -1;
    ts_response_free(&r);
    agent_start();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    int rc = 0;
    if (agent_pid > 0) {
        int st = agent_stop(SIGTERM);
        if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "tessera-agent did not exit cleanly on SIGTERM\n");
            rc = -1;
        }
    }
    char *log = ts_files_read(agent_log, 16 << 20, NULL);
    /* shown by ctest only when the test fails */
    if (log != NULL) {
        size_t n = strlen(log);
        fprintf(stderr, "agent log (end):\n%s\n", n > 6000 ? log + n - 6000 : log);
    }
    if (log != NULL && (strstr(log, "Sanitizer") != NULL || strstr(log, "runtime error"))) {
        fprintf(stderr, "sanitizer report in the agent's log:\n%s\n", log);
        rc = -1;
    }
    free(log);
    if (ts_it_stop(&srv) != 0)
        rc = -1;
    ts_it_cleanup(&srv);
    return rc;
}

/* ---- cases ------------------------------------------------------------------ */

static void the_agent_registers_the_node_and_its_gpus(void **state)
{
    (void)state;
    json_t *n = NULL;
    double end = ts_ah_now_s() + 20;
    for (;;) {
        struct ts_response r;
        long st = ts_it_req(srv.admin, "GET", "/api/v1/nodes/n1", NULL, NULL, &r);
        if (st == 200 && strcmp(ts_it_str(r.json, "state"), "ready") == 0) {
            n = json_incref(r.json);
            ts_response_free(&r);
            break;
        }
        ts_response_free(&r);
        if (ts_ah_now_s() > end)
            fail_msg("node n1 not ready after 20 s");
        usleep(100 * 1000);
    }
    json_t *gpus = json_object_get(n, "gpus");
    assert_int_equal(json_array_size(gpus), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *g = json_array_get(gpus, i);
        assert_int_equal(ts_it_int(g, "index"), (long long)i);
        assert_int_equal(ts_it_int(g, "memory_bytes"), 4LL << 30);
        assert_int_equal(strncmp(ts_it_str(g, "uuid"), "GPU-", 4), 0);
        assert_non_null(strstr(ts_it_str(g, "model"), "SimGPU"));
    }
    assert_string_equal(ts_it_str(json_object_get(n, "labels"), "zone"), "a");
    assert_int_equal(ts_it_int(n, "gpu_reserve_bytes"), 512LL << 20);
    json_decref(n);
}

static void a_job_runs_to_success_and_its_output_reaches_the_server(void **state)
{
    (void)state;
    long long id = submit("hello",
                          "[\"sh\", \"-c\", \"echo hello from job $TESSERA_JOB_ID attempt "
                          "$TESSERA_ATTEMPT on $CUDA_VISIBLE_DEVICES; head -c 300000 /dev/zero "
                          "| tr '\\\\0' x; echo; echo the end\"]",
                          "{\"count\": 1}");
    json_t *j = wait_state(id, "succeeded", 30);
    assert_int_equal(ts_it_int(j, "exit_code"), 0);
    assert_string_equal(ts_it_str(j, "node"), "n1");
    long long attempt = ts_it_int(j, "attempt");
    json_decref(j);
    char want[128];
    snprintf(want, sizeof(want), "hello from job %lld attempt %lld on ", id, attempt);
    char *out = wait_logs(id, "the end", 20);
    assert_non_null(strstr(out, want));
    /* over 256 KiB: shipped in several requests, every byte there once */
    char path[700];
    snprintf(path, sizeof(path), "%s/jobs/%lld-%lld/output.log", data, id, attempt);
    size_t local_len = 0;
    char *local = ts_files_read(path, 1 << 20, &local_len);
    assert_non_null(local);
    assert_true(local_len > 300000);
    assert_int_equal(strlen(out), local_len);
    assert_string_equal(out, local);
    free(local);
    free(out);
    /* the server has it all: the agent forgets the job, marking its folder */
    snprintf(path, sizeof(path), "%s/jobs/%lld-%lld/reported", data, id, attempt);
    double end = ts_ah_now_s() + 20;
    while (access(path, F_OK) != 0 && ts_ah_now_s() < end)
        usleep(100 * 1000);
    assert_int_equal(access(path, F_OK), 0);
}

static void a_failing_job_reports_its_exit_code(void **state)
{
    (void)state;
    long long id =
        submit("fails", "[\"sh\", \"-c\", \"echo about to fail; exit 3\"]", "{\"count\": 1}");
    json_t *j = wait_state(id, "failed", 30);
    assert_int_equal(ts_it_int(j, "exit_code"), 3);
    json_decref(j);
    char *out = wait_logs(id, "about to fail", 20);
    free(out);
    long long bad = submit("no-program", "[\"/no/such/program\"]", "{\"count\": 1}");
    j = wait_state(bad, "failed", 30);
    json_decref(j);
    out = wait_logs(bad, "could not execute", 20);
    free(out);
}

static void cancel_stops_a_running_job(void **state)
{
    (void)state;
    long long id =
        submit("sleeper", "[\"sh\", \"-c\", \"echo started; exec sleep 600\"]", "{\"count\": 1}");
    json_t *j = wait_state(id, "running", 30);
    int attempt = (int)ts_it_int(j, "attempt");
    json_decref(j);
    uint64_t ticks;
    pid_t pid = job_pid(id, attempt, &ticks);
    assert_true(running(pid, ticks));
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    struct ts_response r;
    long st = ts_it_req(srv.admin, "DELETE", path, NULL, NULL, &r);
    ts_response_free(&r);
    assert_true(st == 200 || st == 202);
    j = wait_state(id, "cancelled", 30);
    json_decref(j);
    assert_false(running(pid, ticks));
}

static void a_restarted_agent_adopts_its_jobs(void **state)
{
    (void)state;
    long long id =
        submit("adopted", "[\"sh\", \"-c\", \"echo start $$; exec sleep 600\"]", "{\"count\": 1}");
    json_t *j = wait_state(id, "running", 30);
    int attempt = (int)ts_it_int(j, "attempt");
    json_decref(j);
    uint64_t ticks;
    pid_t pid = job_pid(id, attempt, &ticks);
    assert_true(running(pid, ticks));

    assert_int_not_equal(agent_stop(SIGKILL), -1);
    sleep(1);
    assert_true(running(pid, ticks));
    agent_start();
    /* the new agent reports it; the server keeps it running, same attempt */
    sleep(3);
    j = wait_state(id, "running", 10);
    assert_int_equal(ts_it_int(j, "attempt"), attempt);
    json_decref(j);
    assert_true(running(pid, ticks));
    assert_int_equal(job_pid(id, attempt, NULL), pid);
    char *out = wait_logs(id, "start ", 20);
    assert_null(strstr(strstr(out, "start ") + 1, "start ")); /* started once */
    free(out);

    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    struct ts_response r;
    ts_it_req(srv.admin, "DELETE", path, NULL, NULL, &r);
    ts_response_free(&r);
    j = wait_state(id, "cancelled", 30);
    json_decref(j);
    assert_false(running(pid, ticks));
}

static void utilization_and_memory_reach_the_server(void **state)
{
    (void)state;
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "[\"%s\", \"busy\", \"64\", \"0.6\", \"60\"]",
             getenv("TS_AGENT_PROBE"));
    long long id = submit("busy", cmd, "{\"count\": 1}");
    json_t *j = wait_state(id, "running", 30);
    json_decref(j);
    double end = ts_ah_now_s() + 30;
    double job_util = 0, gpu_util = 0;
    long long job_mem = 0, gpu_mem = 0;
    while (ts_ah_now_s() < end) {
        j = get_json("/api/v1/jobs/%lld", id);
        json_t *u = json_object_get(j, "usage");
        job_util = json_number_value(json_object_get(u, "gpu_utilization"));
        job_mem = ts_it_int(u, "gpu_memory_used_bytes");
        json_decref(j);
        json_t *n = get_json("/api/v1/nodes/n1");
        gpu_util = 0;
        gpu_mem = 0;
        size_t i;
        json_t *g;
        json_array_foreach(json_object_get(n, "gpus"), i, g) {
            gpu_util += json_number_value(json_object_get(g, "utilization"));
            gpu_mem += ts_it_int(g, "memory_used_bytes");
        }
        json_decref(n);
        if (job_util > 0.3 && gpu_util > 0.3 && job_mem >= 64LL << 20 && gpu_mem >= 64LL << 20)
            break;
        usleep(200 * 1000);
    }
    fprintf(stderr, "job %.2f %lld, gpus %.2f %lld\n", job_util, job_mem, gpu_util, gpu_mem);
    assert_true(job_util > 0.3 && job_util < 0.9);
    assert_true(gpu_util > 0.3 && gpu_util < 0.9);
    assert_true(job_mem >= 64LL << 20);
    assert_true(gpu_mem >= 64LL << 20);
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    struct ts_response r;
    ts_it_req(srv.admin, "DELETE", path, NULL, NULL, &r);
    ts_response_free(&r);
    j = wait_state(id, "cancelled", 30);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_agent_registers_the_node_and_its_gpus),
        cmocka_unit_test(a_job_runs_to_success_and_its_output_reaches_the_server),
        cmocka_unit_test(a_failing_job_reports_its_exit_code),
        cmocka_unit_test(cancel_stops_a_running_job),
        cmocka_unit_test(a_restarted_agent_adopts_its_jobs),
        cmocka_unit_test(utilization_and_memory_reach_the_server),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
