/*
 * agentharness.c - the agent's tests' harness around the real tessera-agent
 * (agentharness.h).
 */
#include "tests/agent/agentharness.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/files.h"
#include "agent/daemon/proc.h"

int ts_ah_failures;
char ts_ah_shared[216];
char ts_ah_root[200], ts_ah_data[256], ts_ah_desired[256], ts_ah_agent_log[256];
pid_t ts_ah_agent_pid;

double ts_ah_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void ts_ah_sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

void ts_ah_setup(const char *name)
{
    const char *tmp = getenv("TMPDIR");
    int len =
        snprintf(ts_ah_root, sizeof(ts_ah_root), "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    if (len >= (int)sizeof(ts_ah_root)) {
        fprintf(stderr, "TMPDIR is too long for the test: %s\n", tmp);
        exit(1);
    }
    if (mkdtemp(ts_ah_root) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(ts_ah_data, sizeof(ts_ah_data), "%s/data", ts_ah_root);
    snprintf(ts_ah_desired, sizeof(ts_ah_desired), "%s/desired.json", ts_ah_root);
    snprintf(ts_ah_agent_log, sizeof(ts_ah_agent_log), "%s/agent.log", ts_ah_root);
    /* the only folder of the case a sandboxed job sees (as its
     * checkpoint_dir): flags and marks between the test and its jobs */
    snprintf(ts_ah_shared, sizeof(ts_ah_shared), "%s/shared", ts_ah_root);
    if (mkdir(ts_ah_shared, 0777) != 0 || chmod(ts_ah_shared, 0777) != 0) {
        perror("mkdir shared");
        exit(1);
    }
    ts_ah_set_desired("{\"generation\": 0, \"jobs\": []}");
}

void ts_ah_set_desired(const char *fmt, ...)
{
    char text[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    if (v == NULL) {
        fprintf(stderr, "bad desired state in the test: %s: %s\n", je.text, text);
        exit(1);
    }
    json_decref(v);
    if (ts_files_write_atomic(ts_ah_desired, text, strlen(text), 0600) != 0) {
        perror("desired state");
        exit(1);
    }
}

pid_t ts_ah_spawn(const char *const argv[], const char *log_path)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

int ts_ah_wait_exit(pid_t pid, double timeout_s)
{
    double until = ts_ah_now_s() + timeout_s;
    int st;
    while (ts_ah_now_s() < until) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        ts_ah_sleep_s(0.02);
    }
    return -1;
}

int ts_ah_stop(pid_t pid, int sig, double timeout_s)
{
    kill(pid, sig);
    int st = ts_ah_wait_exit(pid, timeout_s);
    if (st == -1) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    return st;
}

int ts_ah_agent_stop(int sig)
{
    if (ts_ah_agent_pid <= 0)
        return -1;
    int st = ts_ah_stop(ts_ah_agent_pid, sig, 15);
    ts_ah_agent_pid = 0;
    return st;
}

json_t *ts_ah_report(void)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/report.json", ts_ah_data);
    return ts_files_read_json(path);
}

json_t *ts_ah_report_job(json_t *r, long id, int attempt)
{
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(r, "jobs"), i, j) {
        if (json_integer_value(json_object_get(j, "id")) == id &&
            json_integer_value(json_object_get(j, "attempt")) == attempt)
            return j;
    }
    return NULL;
}

json_t *ts_ah_wait_job(long id, int attempt, const char *state, double timeout_s)
{
    double until = ts_ah_now_s() + timeout_s;
    while (ts_ah_now_s() < until) {
        json_t *r = ts_ah_report();
        json_t *j = ts_ah_report_job(r, id, attempt);
        const char *s = json_string_value(json_object_get(j, "state"));
        if (s != NULL && strcmp(s, state) == 0) {
            json_t *copy = json_deep_copy(j);
            json_decref(r);
            return copy;
        }
        json_decref(r);
        ts_ah_sleep_s(0.05);
    }
    fprintf(stderr, "job %ld attempt %d not %s after %.0f s\n", id, attempt, state, timeout_s);
    return NULL;
}

void ts_ah_check_sanitizer(const char *path)
{
    char *log = ts_files_read(path, 16 << 20, NULL);
    if (log != NULL && (strstr(log, "Sanitizer") != NULL || strstr(log, "runtime error") != NULL)) {
        fprintf(stderr, "sanitizer report in %s:\n%s\n", path, log);
        ts_ah_failures++;
    }
    free(log);
}

void ts_ah_show_agent_log(void)
{
    if (ts_ah_failures == 0)
        return;
    char *log = ts_files_read(ts_ah_agent_log, 1 << 20, NULL);
    fprintf(stderr, "agent log:\n%s", log ? log : "(none)\n");
    free(log);
}

void ts_ah_end_agent(void)
{
    if (ts_ah_agent_pid > 0) {
        int st = ts_ah_agent_stop(SIGTERM);
        CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    ts_ah_check_sanitizer(ts_ah_agent_log);
}

/* A job's record field as an integer, or 0. */
static long long rec_int(const json_t *rec, const char *key)
{
    return json_integer_value(json_object_get(rec, key));
}

void ts_ah_end_jobs(bool outputs)
{
    char jobs[PATH_MAX + 16];
    snprintf(jobs, sizeof(jobs), "%s/jobs", ts_ah_data);
    DIR *d = opendir(jobs);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[PATH_MAX + 300];
        snprintf(path, sizeof(path), "%s/%s/supervisor.log", jobs, e->d_name);
        ts_ah_check_sanitizer(path);
        if (outputs) {
            snprintf(path, sizeof(path), "%s/%s/output.log", jobs, e->d_name);
            ts_ah_check_sanitizer(path);
        }
        snprintf(path, sizeof(path), "%s/%s/job.json", jobs, e->d_name);
        json_t *rec = ts_files_read_json(path);
        pid_t sids[2] = {(pid_t)rec_int(rec, "pid"), (pid_t)rec_int(rec, "supervisor_pid")};
        uint64_t ticks[2] = {(uint64_t)rec_int(rec, "start_ticks"),
                             (uint64_t)rec_int(rec, "supervisor_start_ticks")};
        for (int k = 0; k < 2; k++) {
            if (sids[k] <= 0 || !ts_proc_same(sids[k], ticks[k]))
                continue;
            pid_t pids[64];
            size_t n = ts_proc_session(sids[k], pids, 64);
            for (size_t i = 0; i < n && i < 64; i++) {
                kill(pids[i], SIGKILL);
                kill(pids[i], SIGCONT); /* a stopped (suspended) job's too */
            }
        }
        json_decref(rec);
    }
    if (d != NULL)
        closedir(d);
    if (getenv("TS_KEEP") == NULL)
        ts_files_remove_tree(ts_ah_root);
    else
        fprintf(stderr, "kept %s\n", ts_ah_root);
}

int ts_ah_result(const char *name)
{
    fprintf(stderr, "%s: %s\n", name, ts_ah_failures ? "FAILED" : "ok");
    return ts_ah_failures ? 1 : 0;
}
