/*
 * sandbox_test.c - the job sandbox against a real tessera-server (and its
 * PostgreSQL) and a real tessera-agent as root, playing the hostile member
 * of issue 14: a job tries to read the server's admin token from /proc, the
 * agent's token file, another project's job folder and the ledgers of GPUs
 * it does not hold, and to kill another job, the agent and the server. Each
 * attempt must fail, and the job runs as an unprivileged user without
 * capabilities, with a /tmp and a process list of its own. Skipped (77)
 * when not root. Uses tests/integration/harness.c and agentharness.c.
 */
#include <sched.h>
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

#include "api/files.h"
#include "agent/daemon/proc.h"
#include "tests/agent/agentharness.h"
#include "tests/integration/harness.h"

static struct ts_it_server srv;
static char dir[512], data[600], token_file[600], agent_log[600], agent_token[256];
/* --job-mount: DIR/shared-ro/inner:rw,DIR/shared-rw:rw,DIR/shared-ro,CLOSED/granted */
static char mounts[2800];
/* the server's --checkpoint-root: outside /tmp, which every job has its own
 * of, as on a real cluster (shared storage); under the build folder */
static char ckpt_root[600];
/* a folder only root may pass (0700, outside /tmp as /root or a closed
 * /srv would be), holding the agent's data folder, a folder an admin grants
 * every job (granted/) and a file nobody granted (secret) */
static char closed[400];
static pid_t agent_pid;

static void agent_start(void)
{
    char exe[512];
    snprintf(exe, sizeof(exe), "%s/tessera-agent", getenv("TS_BIN_DIR"));
    const char *argv[] = {
        exe, "--server", srv.url, "--token-file", token_file, "--node", "n1", "--data-dir", data,
        "--gpus", "sim:2x4GiB", "--gpu-reserve", "512MiB", "--report-interval", "1s", "--log-level",
        "debug", "--job-mount", mounts, "--sandbox",
        /* TS_TEST_SANDBOX=off: every case fails, as on an agent without one */
        getenv("TS_TEST_SANDBOX") != NULL ? getenv("TS_TEST_SANDBOX") : "on", NULL};
    agent_pid = ts_ah_spawn(argv, agent_log);
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

/* Submit a job: extra is more JobRequest fields ("" or ", ..."). */
static long long submit(const char *project, const char *name, const char *command_json,
                        const char *extra)
{
    char body[8192];
    snprintf(body, sizeof(body),
             "{\"name\": \"%s\", \"project\": \"%s\", \"command\": %s, \"grace_period\": \"2s\"%s}",
             name, project, command_json, extra);
    struct ts_response r;
    long st = ts_it_req(srv.admin, "POST", "/api/v1/jobs", body, NULL, &r);
    if (st != 201)
        fail_msg("submit: %ld %s", st, r.body.data);
    long long id = ts_it_int(r.json, "id");
    ts_response_free(&r);
    return id;
}

/* A job running `sh -c SCRIPT`. */
static long long submit_sh(const char *project, const char *name, const char *script,
                           const char *extra)
{
    json_t *cmd = json_pack("[s, s, s]", "sh", "-c", script);
    char *text = json_dumps(cmd, JSON_COMPACT);
    long long id = submit(project, name, text, extra);
    free(text);
    json_decref(cmd);
    return id;
}

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

/* The job's whole output, once it has ended (new). */
static char *output_after_end(long long id)
{
    json_t *j = wait_state(id, "succeeded", 60);
    json_decref(j);
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/logs", id);
    struct ts_response r;
    long st = ts_it_req(srv.admin, "GET", path, NULL, NULL, &r);
    char *out = strdup(st == 200 && r.body.data ? r.body.data : "");
    ts_response_free(&r);
    fprintf(stderr, "job %lld said:\n%s\n", id, out);
    return out;
}

static pid_t job_pid(long long id, int attempt, uint64_t *ticks)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/jobs/%lld-%d/job.json", data, id, attempt);
    json_t *rec = NULL;
    double end = ts_ah_now_s() + 10;
    while ((rec = ts_files_read_json(path)) == NULL && ts_ah_now_s() < end)
        usleep(50 * 1000);
    pid_t pid = (pid_t)ts_it_int(rec, "pid");
    *ticks = (uint64_t)ts_it_int(rec, "start_ticks");
    json_decref(rec);
    return pid;
}

static bool running(pid_t pid, uint64_t ticks)
{
    struct ts_proc_stat st;
    return pid > 0 && ts_proc_stat(pid, &st) == 0 && st.start_ticks == ticks && st.state != 'Z';
}

static void cancel(long long id)
{
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    struct ts_response r;
    ts_it_req(srv.admin, "DELETE", path, NULL, NULL, &r);
    ts_response_free(&r);
    json_decref(wait_state(id, "cancelled", 30));
}

static int setup(void **state)
{
    (void)state;
    snprintf(ckpt_root, sizeof(ckpt_root), "%s/../sandbox-checkpoints-%d", getenv("TS_BIN_DIR"),
             (int)getpid());
    const char *args[] = {"--checkpoint-root", ckpt_root, NULL};
    if (ts_it_start(&srv, NULL, args) != 0)
        return -1;
    snprintf(dir, sizeof(dir), "%s", srv.dir);
    snprintf(closed, sizeof(closed), "%s/../sandbox-closed-%d", getenv("TS_BIN_DIR"),
             (int)getpid());
    if (mkdir(closed, 0700) != 0 || chmod(closed, 0700) != 0)
        return -1;
    snprintf(data, sizeof(data), "%s/agent", closed);
    snprintf(token_file, sizeof(token_file), "%s/agent.token", dir);
    snprintf(agent_log, sizeof(agent_log), "%s/agent.log", dir);
    /* the inner folder first: it must not be covered by its parent's bind */
    snprintf(mounts, sizeof(mounts),
             "%s/shared-ro/inner:rw,%s/shared-rw:rw,%s/shared-ro,%s/granted", dir, dir, dir,
             closed);
    char shared[700];
    snprintf(shared, sizeof(shared), "%s/granted", closed);
    if (mkdir(shared, 0755) != 0 || chmod(shared, 0755) != 0)
        return -1;
    snprintf(shared, sizeof(shared), "%s/granted/data", closed);
    if (ts_files_write_atomic(shared, "closed-data-7\n", 14, 0644) != 0)
        return -1;
    snprintf(shared, sizeof(shared), "%s/secret", closed);
    if (ts_files_write_atomic(shared, "closed-secret-9\n", 16, 0644) != 0)
        return -1;
    snprintf(shared, sizeof(shared), "%s/shared-rw", dir);
    if (mkdir(shared, 01777) != 0 || chmod(shared, 01777) != 0)
        return -1;
    /* open to all on the host: only the read-only bind keeps the job out */
    snprintf(shared, sizeof(shared), "%s/shared-ro", dir);
    if (mkdir(shared, 01777) != 0 || chmod(shared, 01777) != 0)
        return -1;
    snprintf(shared, sizeof(shared), "%s/shared-ro/inner", dir);
    if (mkdir(shared, 01777) != 0 || chmod(shared, 01777) != 0)
        return -1;
    snprintf(shared, sizeof(shared), "%s/shared-ro/dataset", dir);
    if (ts_files_write_atomic(shared, "ro-data-42\n", 11, 0644) != 0)
        return -1;
    const char *token = ts_it_token(&srv, "agent-n1", "agent", NULL);
    if (token == NULL || ts_files_write_atomic(token_file, token, strlen(token), 0600) != 0)
        return -1;
    snprintf(agent_token, sizeof(agent_token), "%s", token);
    struct ts_response r;
    if (ts_it_req(srv.admin, "POST", "/api/v1/departments", "{\"name\": \"research\"}", NULL, &r) !=
        201)
        return -1;
    ts_response_free(&r);
    const char *projects[] = {"vision", "audio"};
    for (int i = 0; i < 2; i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"name\": \"%s\", \"department\": \"research\", \"quota\": {\"gpus\": 1}}",
                 projects[i]);
        if (ts_it_req(srv.admin, "POST", "/api/v1/projects", body, NULL, &r) != 201)
            return -1;
        ts_response_free(&r);
    }
    agent_start();
    double end = ts_ah_now_s() + 20;
    for (;;) {
        long st = ts_it_req(srv.admin, "GET", "/api/v1/nodes/n1", NULL, NULL, &r);
        bool ready = st == 200 && strcmp(ts_it_str(r.json, "state"), "ready") == 0;
        ts_response_free(&r);
        if (ready)
            break;
        if (ts_ah_now_s() > end)
            return -1;
        usleep(100 * 1000);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    int rc = 0;
    if (agent_pid > 0 && ts_ah_stop(agent_pid, SIGTERM, 20) == -1)
        rc = -1;
    char *log = ts_files_read(agent_log, 16 << 20, NULL);
    if (log != NULL) {
        size_t n = strlen(log);
        fprintf(stderr, "agent log (end):\n%s\n", n > 6000 ? log + n - 6000 : log);
        if (strstr(log, "Sanitizer") != NULL || strstr(log, "runtime error") != NULL)
            rc = -1;
    }
    free(log);
    if (ts_it_stop(&srv) != 0)
        rc = -1;
    ts_it_cleanup(&srv);
    ts_files_remove_tree(ckpt_root);
    ts_files_remove_tree(closed);
    return rc;
}

/* PUT a project's quota (any revision). */
static void set_quota(const char *project, const char *body)
{
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/projects/%s/quota", project);
    const char *ifm[] = {"If-Match: *", NULL};
    struct ts_response r;
    long st = ts_it_req(srv.admin, "PUT", path, body, ifm, &r);
    if (st != 200)
        fail_msg("PUT %s: %ld %s", path, st, r.body.data);
    ts_response_free(&r);
}

/* The job's events as text (new). */
static char *events_text(long long id)
{
    json_t *ev = get_json("/api/v1/jobs/%lld/events", id);
    char *text = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    return text;
}

static void a_job_runs_as_its_projects_job_user_checked_on_the_node(void **state)
{
    (void)state;
    /* daemon exists on every Debian machine, and is not nobody */
    set_quota("audio", "{\"gpus\": 1, \"job_user\": \"daemon\"}");
    long long id = submit_sh("audio", "as-daemon", "echo user=$(id -un) USER=$USER; echo end", "");
    char *out = output_after_end(id);
    assert_non_null(strstr(out, "user=daemon USER=daemon\n"));
    free(out);
    /* a user this node does not have: the job fails, saying why */
    set_quota("audio", "{\"gpus\": 1, \"job_user\": \"tessera-no-such-user\"}");
    id = submit_sh("audio", "as-nobody-known", "echo ran", "");
    json_decref(wait_state(id, "failed", 30));
    char *ev = events_text(id);
    fprintf(stderr, "events: %s\n", ev);
    assert_non_null(strstr(ev, "job_user_invalid"));
    assert_non_null(strstr(ev, "tessera-no-such-user"));
    free(ev);
    /* root, allowed by an admin for this project: uid 0 without capabilities */
    set_quota("audio", "{\"gpus\": 1, \"job_user\": \"root\", \"allow_root\": true}");
    id = submit_sh("audio", "as-root",
                   "echo uid=$(id -u); grep -E '^CapEff:' /proc/self/status; echo end", "");
    out = output_after_end(id);
    assert_non_null(strstr(out, "uid=0\n"));
    assert_non_null(strstr(out, "CapEff:\t0000000000000000\n"));
    free(out);
    /* back to the agent's --job-user */
    set_quota("audio", "{\"gpus\": 1}");
    id = submit_sh("audio", "as-agent-user", "echo user=$(id -un); echo end", "");
    out = output_after_end(id);
    assert_non_null(strstr(out, "user=nobody\n"));
    free(out);
}

/* The server names every job a checkpoint folder under its checkpoint root
 * (ROOT/PROJECT/ID, the folders above made 0700 by the agent): the job
 * writes there, the file is on the host, and a job of another project
 * neither reads it nor lists it. */
static void a_job_writes_its_checkpoint_and_no_other_project_reads_it(void **state)
{
    (void)state;
    long long a = submit_sh("vision", "ckpt-writer",
                            "echo ckpt-a-42 > \"$TESSERA_CHECKPOINT_DIR/state\" && "
                            "echo wrote-ckpt; echo end",
                            "");
    char *out = output_after_end(a);
    assert_non_null(strstr(out, "wrote-ckpt\n"));
    free(out);
    json_t *j = get_json("/api/v1/jobs/%lld", a);
    char state_file[4200], project_dir[4200];
    snprintf(state_file, sizeof(state_file), "%s/state", ts_it_str(j, "checkpoint_dir"));
    snprintf(project_dir, sizeof(project_dir), "%s", ts_it_str(j, "checkpoint_dir"));
    json_decref(j);
    *strrchr(project_dir, '/') = '\0';
    /* on the host, not in a tmpfs of the job's */
    char *kept = ts_files_read(state_file, 4096, NULL);
    assert_non_null(kept);
    assert_string_equal(kept, "ckpt-a-42\n");
    free(kept);
    char script[9000];
    snprintf(script, sizeof(script),
             "cat %s 2>&1; ls %s 2>&1; echo own > \"$TESSERA_CHECKPOINT_DIR/state\" && "
             "echo wrote-own-ckpt; echo end",
             state_file, project_dir);
    long long b = submit_sh("audio", "ckpt-snoop", script, "");
    out = output_after_end(b);
    assert_non_null(strstr(out, "wrote-own-ckpt\n"));
    assert_null(strstr(out, "ckpt-a-42"));
    char id_line[32];
    snprintf(id_line, sizeof(id_line), "\n%lld\n", a);
    assert_null(strstr(out, id_line));
    assert_false(strncmp(out, id_line + 1, strlen(id_line) - 1) == 0);
    free(out);
}

static void a_job_runs_unprivileged_alone_in_its_namespaces_with_a_private_tmp(void **state)
{
    (void)state;
    /* a file in the host's /tmp */
    char marker[128], script[2048];
    snprintf(marker, sizeof(marker), "/tmp/tessera-sandbox-marker-%d", (int)getpid());
    assert_int_equal(ts_files_write_atomic(marker, "x", 1, 0644), 0);
    snprintf(script, sizeof(script),
             "echo uid=$(id -u); grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status; "
             "test -e %s && echo host-tmp-visible; touch /tmp/mine && echo wrote-tmp; "
             "echo procs=$(ls /proc | grep -c '^[0-9]'); "
             "touch /etc/tessera-sandbox-probe 2>/dev/null && echo wrote-etc; "
             "touch %s/probe 2>/dev/null && echo wrote-data; "
             "touch $HOME/mine && echo wrote-own-folder; echo end",
             marker, data);
    long long id = submit_sh("vision", "whoami", script, "");
    char *out = output_after_end(id);
    assert_non_null(strstr(out, "end\n"));
    assert_null(strstr(out, "uid=0\n"));
    assert_non_null(strstr(out, "uid="));
    assert_non_null(strstr(out, "CapEff:\t0000000000000000\n"));
    assert_non_null(strstr(out, "CapBnd:\t0000000000000000\n"));
    assert_non_null(strstr(out, "NoNewPrivs:\t1\n"));
    assert_null(strstr(out, "host-tmp-visible"));
    assert_non_null(strstr(out, "wrote-tmp\n"));
    assert_false(ts_files_exists("/tmp/mine") && !ts_files_exists(marker)); /* not the host's */
    unlink(marker);
    /* the shell, its command substitution's subshell, ls and grep: no agent,
     * no server, no other job */
    const char *procs = strstr(out, "procs=");
    assert_non_null(procs);
    assert_true(atoi(procs + 6) <= 6);
    assert_null(strstr(out, "wrote-etc"));
    assert_null(strstr(out, "wrote-data"));
    assert_non_null(strstr(out, "wrote-own-folder"));
    free(out);
}

static void a_job_reads_no_token_no_other_jobs_folder_and_no_ledger_of_another_gpu(void **state)
{
    (void)state;
    long long a = submit("vision", "victim", "[\"sleep\", \"600\"]",
                         ", \"env\": {\"SECRET_A\": \"s3cret-a-42\"}, "
                         "\"gpu\": {\"portion\": 0.25}");
    json_t *j = wait_state(a, "running", 30);
    int attempt = (int)ts_it_int(j, "attempt");
    json_decref(j);
    char script[8192];
    snprintf(
        script, sizeof(script),
        "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -e TESSERA_ADMIN -e SECRET_A; "
        "cat %s 2>&1; cat %s/jobs/%lld-%d/launch.json %s/jobs/%lld-%d/spec.json 2>&1; "
        "ls %s/jobs 2>&1; "
        "echo ledger_bytes=$(cat %s/ledger/gpu0.ledger %s/ledger/gpu1.ledger 2>/dev/null | "
        "wc -c); echo end",
        token_file, data, a, attempt, data, a, attempt, data, data, data);
    long long b = submit_sh("audio", "snoop", script, "");
    char *out = output_after_end(b);
    assert_non_null(strstr(out, "end\n"));
    assert_null(strstr(out, TS_IT_ADMIN_TOKEN));
    assert_null(strstr(out, agent_token));
    assert_null(strstr(out, "s3cret-a-42"));
    assert_non_null(strstr(out, "ledger_bytes=0\n"));
    free(out);
    cancel(a);
}

static void a_job_cannot_signal_another_job_the_agent_or_the_server(void **state)
{
    (void)state;
    long long a = submit("vision", "target", "[\"sleep\", \"600\"]", "");
    json_t *j = wait_state(a, "running", 30);
    int attempt = (int)ts_it_int(j, "attempt");
    json_decref(j);
    uint64_t aticks;
    pid_t apid = job_pid(a, attempt, &aticks);
    assert_true(running(apid, aticks));
    struct ts_proc_stat ast, sst;
    assert_int_equal(ts_proc_stat(agent_pid, &ast), 0);
    assert_int_equal(ts_proc_stat(srv.pid, &sst), 0);
    char script[1024];
    snprintf(script, sizeof(script), "kill -9 %d %d %d; echo kill=$?; echo end", (int)apid,
             (int)agent_pid, (int)srv.pid);
    long long b = submit_sh("audio", "killer", script, "");
    char *out = output_after_end(b);
    assert_non_null(strstr(out, "end\n"));
    assert_null(strstr(out, "kill=0\n"));
    free(out);
    assert_true(running(apid, aticks));
    assert_true(running(agent_pid, ast.start_ticks));
    assert_true(running(srv.pid, sst.start_ticks));
    cancel(a);
}

/* A limit file of the job's v1 controller or v2 group, from the host: the
 * group named in /proc/PID/cgroup. -1 when absent. */
static long long cgroup_value(pid_t pid, const char *controller, const char *v1, const char *v2)
{
    char path[128], line[512], file[1024];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(path, "re");
    long long v = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *a = strchr(line, ':'), *b = a != NULL ? strchr(a + 1, ':') : NULL;
        if (b == NULL)
            continue;
        *b = '\0';
        if (strcmp(a + 1, controller) == 0)
            snprintf(file, sizeof(file), "/sys/fs/cgroup/%s%s/%s", controller, b + 1, v1);
        else if (strcmp(line, "0") == 0 && access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0)
            snprintf(file, sizeof(file), "/sys/fs/cgroup%s/%s", b + 1, v2);
        else
            continue;
        char *text = ts_files_read(file, 64, NULL);
        if (text != NULL)
            v = strtoll(text, NULL, 10);
        free(text);
        if (v >= 0)
            break;
    }
    if (f != NULL)
        fclose(f);
    return v;
}

static void a_job_has_its_memory_request_and_a_pids_limit_in_its_cgroup(void **state)
{
    (void)state;
    char *log = ts_files_read(agent_log, 16 << 20, NULL);
    bool no_cgroups = log != NULL && strstr(log, "jobs run without cgroup limits") != NULL;
    free(log);
    if (no_cgroups)
        skip(); /* cgroupfs is not writable here (the agent said why) */
    long long id = submit("vision", "limited", "[\"sleep\", \"600\"]",
                          ", \"memory\": \"256MiB\", \"cpu\": 0.5");
    json_t *j = wait_state(id, "running", 30);
    int attempt = (int)ts_it_int(j, "attempt");
    json_decref(j);
    uint64_t ticks;
    pid_t pid = job_pid(id, attempt, &ticks);
    assert_int_equal(cgroup_value(pid, "memory", "memory.limit_in_bytes", "memory.max"),
                     256LL << 20);
    assert_int_equal(cgroup_value(pid, "pids", "pids.max", "pids.max"), 4096);
    long long cpu = cgroup_value(pid, "cpu", "cpu.shares", "cpu.weight");
    assert_true(cpu == 512 || cpu == 50);
    cancel(id);
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = strstr(s, what); p != NULL; p = strstr(p + 1, what))
        n++;
    return n;
}

static void the_gpu_limit_holds_without_ld_preload_and_with_the_driver_opened_by_path(void **state)
{
    (void)state;
    /* 2 GiB asked of a job limited to 512 MiB: as it comes, without the
     * preload, and without the preload or the shim's variables through the
     * simulated driver's own path, and by name after the path (which found
     * the real driver by its soname while the overlay had its own; seen with
     * PyTorch on an H200) (the processes run one after another: the agent
     * frees an exited one's charge within a second) */
    char script[8192];
    const char *probe = getenv("TS_AGENT_PROBE");
    snprintf(script, sizeof(script),
             "%s alloc libcuda.so.1 2048; sleep 1.5; "
             "env -u LD_PRELOAD %s alloc libcuda.so.1 2048; sleep 1.5; "
             "env -u LD_PRELOAD -u TESSERA_SHIM_DIR -u TESSERA_SHIM_JOB %s alloc "
             "%s/simgpu/libcuda.so.1 2048; sleep 1.5; "
             "env -u LD_PRELOAD %s alloc-after %s/simgpu/libcuda.so.1 libcuda.so.1 2048; echo end",
             probe, probe, probe, getenv("TS_LIB_DIR"), probe, getenv("TS_LIB_DIR"));
    long long id = submit_sh("vision", "greedy", script, ", \"gpu\": {\"memory\": \"512MiB\"}");
    json_t *j = wait_state(id, "running", 30);
    json_decref(j);
    char *out = output_after_end(id);
    assert_non_null(strstr(out, "end\n"));
    assert_int_equal(count(out, "allocated "), 4);
    assert_int_equal(count(out, "allocated 2048 MiB"), 0);
    assert_true(count(out, "allocated 512 MiB") >= 3);
    free(out);
}

static void a_job_sees_the_folders_an_admin_granted_and_writes_only_where_granted(void **state)
{
    (void)state;
    char script[8192];
    snprintf(script, sizeof(script),
             "cat %s/shared-ro/dataset; touch %s/shared-ro/mine 2>/dev/null && echo wrote-ro; "
             "echo from-job > %s/shared-rw/result && echo wrote-rw; "
             "echo deep > %s/shared-ro/inner/deep && echo wrote-inner; "
             "test -e %s/server.log && echo server-folder-visible; "
             "cat %s/granted/data; cat %s/secret 2>/dev/null; ls %s; echo end",
             dir, dir, dir, dir, dir, closed, closed, closed);
    long long id = submit_sh("vision", "granted", script, "");
    char *out = output_after_end(id);
    assert_non_null(strstr(out, "ro-data-42\n"));
    assert_null(strstr(out, "wrote-ro"));
    assert_non_null(strstr(out, "wrote-rw\n"));
    assert_non_null(strstr(out, "wrote-inner\n"));
    assert_null(strstr(out, "server-folder-visible"));
    /* granted under a folder the job user cannot pass: reached, and the
     * folder shows nothing else of the host (the data folder is covered) */
    assert_non_null(strstr(out, "closed-data-7\n"));
    assert_null(strstr(out, "closed-secret-9"));
    assert_null(strstr(out, "secret\n"));
    assert_non_null(strstr(out, "end\n"));
    free(out);
    char path[700];
    snprintf(path, sizeof(path), "%s/shared-rw/result", dir);
    char *text = ts_files_read(path, 64, NULL);
    assert_non_null(text);
    assert_string_equal(text, "from-job\n");
    free(text);
    snprintf(path, sizeof(path), "%s/shared-ro/mine", dir);
    assert_false(ts_files_exists(path));
}

/* Start an agent on its own data folder with --job-mount value: it must
 * exit 1 at start, its log naming why. */
static void refused_with(const char *value, const char *token, const char *why)
{
    char exe[512], data2[700], log2[700];
    snprintf(exe, sizeof(exe), "%s/tessera-agent", getenv("TS_BIN_DIR"));
    snprintf(data2, sizeof(data2), "%s/agent2", dir);
    snprintf(log2, sizeof(log2), "%s/agent2.log", dir);
    unlink(log2);
    const char *argv[] = {exe,   "--server",   srv.url, "--token-file", token,  "--node",
                          "n2",  "--data-dir", data2,   "--gpus",       "none", "--job-mount",
                          value, NULL};
    int st = ts_ah_wait_exit(ts_ah_spawn(argv, log2), 20);
    char *log = ts_files_read(log2, 1 << 20, NULL);
    fprintf(stderr, "--job-mount %s: %s", value, log != NULL ? log : "(no log)\n");
    assert_true(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1);
    assert_non_null(log);
    assert_non_null(strstr(log, why));
    free(log);
}

static void refused(const char *value, const char *why)
{
    refused_with(value, token_file, why);
}

static void an_agent_refuses_a_job_mount_that_would_show_its_data_folder_or_token(void **state)
{
    (void)state;
    char v[1200];
    refused("shared-ro", "not an absolute path");
    snprintf(v, sizeof(v), "%s/no-such-folder:ro", dir);
    refused(v, "No such file or directory");
    snprintf(v, sizeof(v), "%s/shared-ro/dataset", dir);
    refused(v, "not a folder");
    snprintf(v, sizeof(v), "%s/shared-ro,%s/agent2/jobs:rw", dir, dir);
    refused(v, "would show jobs the data folder");
    refused("/", "would show jobs the data folder");
    /* the token's folder (and the data folder's parent) */
    snprintf(v, sizeof(v), "%s", dir);
    refused(v, "would show jobs the data folder");
    refused("/tmp", "would show jobs the data folder");
    /* a folder of its own that holds the token */
    char keys[700], tok[760];
    snprintf(keys, sizeof(keys), "%s/keys", dir);
    snprintf(tok, sizeof(tok), "%s/agent.token", keys);
    assert_int_equal(mkdir(keys, 0700), 0);
    assert_int_equal(ts_files_write_atomic(tok, agent_token, strlen(agent_token), 0600), 0);
    refused_with(keys, tok, "holds the agent's");
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: the sandbox needs the agent to run as root\n");
        return 77;
    }
    /* a container that refuses namespaces: the agent runs jobs unsandboxed */
    pid_t pid = fork();
    if (pid == 0)
        _exit(unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC) == 0 ? 0 : 1);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "skipped: this machine cannot make namespaces for the sandbox\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_job_runs_unprivileged_alone_in_its_namespaces_with_a_private_tmp),
        cmocka_unit_test(a_job_writes_its_checkpoint_and_no_other_project_reads_it),
        cmocka_unit_test(a_job_reads_no_token_no_other_jobs_folder_and_no_ledger_of_another_gpu),
        cmocka_unit_test(a_job_has_its_memory_request_and_a_pids_limit_in_its_cgroup),
        cmocka_unit_test(the_gpu_limit_holds_without_ld_preload_and_with_the_driver_opened_by_path),
        cmocka_unit_test(a_job_runs_as_its_projects_job_user_checked_on_the_node),
        cmocka_unit_test(a_job_sees_the_folders_an_admin_granted_and_writes_only_where_granted),
        cmocka_unit_test(an_agent_refuses_a_job_mount_that_would_show_its_data_folder_or_token),
        /* last: without a sandbox it kills the server and the agent */
        cmocka_unit_test(a_job_cannot_signal_another_job_the_agent_or_the_server),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
