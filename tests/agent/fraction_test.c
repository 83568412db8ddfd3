/*
 * fraction_test.c - tessera-agent's side of fraction enforcement, with the
 * real binary (--desired-file, one simulated GPU of 1 GiB with 768 MiB held
 * back, so 256 MiB usable) and real processes: shim_player plays shimmed
 * processes through the ledger protocol, so the broker's resolvers, the swap
 * reserve and suspend/resume are exercised by real collisions.
 *
 * Usage: fraction_test CASE, with TS_BIN_DIR, TS_AGENT_PROBE and
 * TS_SHIM_PLAYER in the environment (CTest sets them).
 */
#include <dirent.h>
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

#include "api/array.h"
#include "api/files.h"
#include "agent/daemon/proc.h"
#include "agent/ledger/ledger.h"
#include "api/units.h"
#include "tests/agent/agentharness.h"

#define MiB (1ull << 20)

static const char *bin_dir, *probe, *player, *cuda_job;
static const char *gpus_spec = "sim:1x1GiB";
static bool real_shim; /* jobs run under the real libtessera-cuda.so */

/* Start the agent with the fraction options given (NULL-terminated). */
static void agent_start(const char *const *extra)
{
    char exe[PATH_MAX];
    snprintf(exe, sizeof(exe), "%s/tessera-agent", bin_dir);
    const char *argv[40] = {exe,
                            "--node",
                            "n1",
                            "--data-dir",
                            ts_ah_data,
                            "--gpus",
                            gpus_spec,
                            "--desired-file",
                            ts_ah_desired,
                            "--report-interval",
                            "1s",
                            "--log-level",
                            "debug",
                            "--gpu-reserve",
                            "768MiB",
                            "--shim-lib",
                            "/nonexistent/libtessera-cuda.so"};
    size_t n = real_shim ? 15 : 17; /* the real shim: the default beside the binary */
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 38; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    ts_ah_agent_pid = ts_ah_spawn(argv, ts_ah_agent_log);
}

/* The job's events.log (every event it had, in order; new), once it holds
 * an event of type, or NULL after timeout_s. */
static char *wait_event(long id, const char *type, double timeout_s)
{
    char path[PATH_MAX + 64], want[64];
    snprintf(path, sizeof(path), "%s/jobs/%ld-0/events.log", ts_ah_data, id);
    snprintf(want, sizeof(want), "\"type\":\"%s\"", type);
    double until = ts_ah_now_s() + timeout_s;
    while (ts_ah_now_s() < until) {
        char *t = ts_files_read(path, 1 << 20, NULL);
        if (t != NULL && strstr(t, want) != NULL)
            return t;
        free(t);
        ts_ah_sleep_s(0.05);
    }
    fprintf(stderr, "no %s event on job %ld after %.0f s\n", type, id, timeout_s);
    return NULL;
}

/* Whether a report carrying job id's first event of type was accepted (in
 * --desired-file mode: written to report.json, after which the agent
 * records its seq in the job's events.acked and sends it no more). */
static bool reported_event(long id, const char *type, double timeout_s)
{
    char *log = wait_event(id, type, timeout_s), want[64];
    snprintf(want, sizeof(want), "\"type\":\"%s\"", type);
    const char *at = log != NULL ? strstr(log, want) : NULL;
    const char *seqp = at != NULL ? strstr(at, "\"seq\":") : NULL;
    /* the seq of that line: the last "seq": before the type on its line */
    const char *line = at;
    while (line != NULL && line > log && line[-1] != '\n')
        line--;
    seqp = line != NULL ? strstr(line, "\"seq\":") : NULL;
    int seq = seqp != NULL ? atoi(seqp + 6) : 0;
    free(log);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/jobs/%ld-0/events.acked", ts_ah_data, id);
    double until = ts_ah_now_s() + timeout_s;
    while (seq >= 1 && ts_ah_now_s() < until) {
        char *t = ts_files_read(path, 64, NULL);
        int acked = t != NULL ? atoi(t) : 0;
        free(t);
        if (acked >= seq)
            return true;
        ts_ah_sleep_s(0.05);
    }
    return false;
}

static char *job_output(long id)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/jobs/%ld-0/output.log", ts_ah_data, id);
    return ts_files_read(path, 1 << 20, NULL);
}

static struct ts_ledger *ledger(void)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/ledger/gpu0.ledger", ts_ah_data);
    return ts_ledger_open(path);
}

/* The job's figures in the ledger of GPU 0: used bytes, or -1 without a slot. */
static long long ledger_used(long id)
{
    struct ts_ledger *l = ledger();
    int j = l != NULL ? ts_ledger_find_job(l, ts_ledger_key(id, 0)) : -1;
    long long u = j >= 0 ? (long long)atomic_load(&l->jobs[j].used_bytes) : -1;
    ts_ledger_close(l);
    return u;
}

static void setup(void)
{
    bin_dir = getenv("TS_BIN_DIR");
    probe = getenv("TS_AGENT_PROBE");
    player = getenv("TS_SHIM_PLAYER");
    cuda_job = getenv("TS_CUDA_JOB");
    if (bin_dir == NULL || probe == NULL || player == NULL) {
        fprintf(stderr, "TS_BIN_DIR, TS_AGENT_PROBE and TS_SHIM_PLAYER must be set\n");
        exit(1);
    }
    ts_ah_setup("fraction-test");
}

/* Stop the agent, remove the reserve file, kill whatever jobs are left
 * (continued first) and remove the folder. */
static void teardown(void)
{
    ts_ah_end_agent();
    struct ts_ledger *l = ledger();
    if (l != NULL && l->h.swap_path[0] != '\0')
        unlink(l->h.swap_path);
    ts_ledger_close(l);
    ts_ah_end_jobs(true);
}

/* A desired job on GPU 0 with a request and a limit in MiB, a priority, and
 * shim_player steps (a JSON list's inside, after the program). */
static char *job(char *buf, size_t len, int id, const char *action, int req, int lim, int prio,
                 const char *steps)
{
    snprintf(buf, len,
             "{\"id\": %d, \"attempt\": 0, \"name\": \"j%d\", \"project\": \"p\", "
             "\"action\": \"%s\", \"priority\": %d, \"grace_seconds\": 2, "
             "\"gpus\": [{\"index\": 0, \"memory_bytes\": %llu, \"memory_limit_bytes\": %llu}], "
             "\"checkpoint_dir\": \"%s\", \"command\": [\"%s\", %s]}",
             id, id, action, prio, (unsigned long long)req * MiB, (unsigned long long)lim * MiB,
             ts_ah_shared, player, steps);
    return buf;
}

static void flag(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", ts_ah_shared, name);
}

/* ---- cases ------------------------------------------------------------------ */

static void a_fractional_job_gets_a_ledger_slot_and_the_shim_environment(void)
{
    const char *opts[] = {"--collision", "priority", "--swap-reserve", "64MiB", NULL};
    agent_start(opts);
    char a[1024], b[1024], stop[256];
    flag(stop, sizeof(stop), "stop");
    char steps[512];
    snprintf(steps, sizeof(steps), "\"await\", \"%s\"", stop);
    job(a, sizeof(a), 1, "run", 64, 128, 5, steps);
    /* a whole GPU (its request is all the GPU's usable memory): under the
     * shim too on this node, which swaps (any job can be suspended) */
    snprintf(b, sizeof(b),
             "{\"id\": 2, \"attempt\": 0, \"action\": \"run\", \"gpus\": [{\"index\": 0, "
             "\"memory_bytes\": %llu}], \"command\": [\"%s\", \"env\"]}",
             256 * MiB, probe);
    char c[1024];
    snprintf(c, sizeof(c),
             "{\"id\": 3, \"attempt\": 0, \"action\": \"run\", \"swap\": false, \"env\": "
             "{\"LD_PRELOAD\": \"/x/own.so\"}, \"gpus\": [{\"index\": 0, \"memory_bytes\": %llu}], "
             "\"command\": [\"%s\", \"env\"]}",
             32 * MiB, probe);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s, %s, %s]}", a, b, c);
    json_t *j1 = ts_ah_wait_job(1, 0, "running", 20);
    json_t *j2 = ts_ah_wait_job(2, 0, "exited", 20), *j3 = ts_ah_wait_job(3, 0, "exited", 20);
    REQUIRE(j1 != NULL && j2 != NULL && j3 != NULL);
    json_decref(j1);
    json_decref(j2);
    json_decref(j3);

    struct ts_ledger *l = ledger();
    REQUIRE(l != NULL);
    CHECK(l->h.total_bytes == 1024 * MiB && l->h.reserve_bytes == 768 * MiB);
    CHECK(l->h.collision == TS_COLLISION_PRIORITY && l->h.wait_ms == 10000);
    CHECK(strncmp(l->h.swap_path, "/dev/shm/tessera-", 17) == 0 ||
          strstr(l->h.swap_path, "/swap.reserve") != NULL);
    CHECK(l->h.swap_bytes == 64 * MiB);
    struct stat st;
    CHECK(stat(l->h.swap_path, &st) == 0 && (uint64_t)st.st_size == 64 * MiB);
    int k = ts_ledger_find_job(l, ts_ledger_key(1, 0));
    REQUIRE(k >= 0);
    CHECK(l->jobs[k].job_id == 1 && l->jobs[k].attempt == 0 && l->jobs[k].priority == 5);
    CHECK(l->jobs[k].request_bytes == 64 * MiB && l->jobs[k].limit_bytes == 128 * MiB);
    CHECK(l->jobs[k].flags == TS_LJ_SWAP_OK);
    ts_ledger_close(l);
    /* the job's own folder holds the same file */
    char path[PATH_MAX + 64], lpath[PATH_MAX + 64];
    struct stat s1, s2;
    snprintf(path, sizeof(path), "%s/jobs/1-0/shim/dev0.ledger", ts_ah_data);
    snprintf(lpath, sizeof(lpath), "%s/ledger/gpu0.ledger", ts_ah_data);
    CHECK(stat(path, &s1) == 0 && stat(lpath, &s2) == 0 && s1.st_ino == s2.st_ino);

    char *out = job_output(3), want[1024];
    REQUIRE(out != NULL);
    /* the shim before the job's own preload (a sanitizer build's agent puts
     * its runtime first of all) */
    const char *pre = strstr(out, "env LD_PRELOAD=");
    CHECK(pre != NULL);
    const char *eol = pre != NULL ? strchr(pre, '\n') : NULL;
    const char *tail = "/nonexistent/libtessera-cuda.so:/x/own.so\n";
    CHECK(eol != NULL && (size_t)(eol + 1 - pre) >= strlen(tail) &&
          strncmp(eol + 1 - strlen(tail), tail, strlen(tail)) == 0);
    snprintf(want, sizeof(want), "env TESSERA_SHIM_DIR=%s/jobs/3-0/shim\n", ts_ah_data);
    CHECK(strstr(out, want) != NULL);
    CHECK(strstr(out, "env TESSERA_SHIM_JOB=3:0\n") != NULL);
    free(out);
    out = job_output(2);
    CHECK(out != NULL && strstr(out, "env TESSERA_SHIM_JOB=2:0\n") != NULL);
    free(out);

    /* the node says how it resolves collisions and what it can swap */
    snprintf(path, sizeof(path), "%s/node.json", ts_ah_data);
    json_t *node = ts_files_read_json(path);
    CHECK(strcmp(json_string_value(json_object_get(node, "collision")), "priority") == 0);
    CHECK(json_integer_value(json_object_get(node, "swap_bytes")) == (json_int_t)(64 * MiB));
    json_decref(node);

    /* a job that is over gives its slot back */
    CHECK(ledger_used(3) == -1);
    ts_files_write_atomic(stop, "", 0, 0644);
    json_t *e = ts_ah_wait_job(1, 0, "exited", 20);
    CHECK(e != NULL && json_integer_value(json_object_get(e, "exit_code")) == 0);
    json_decref(e);
    double until = ts_ah_now_s() + 10;
    while (ledger_used(1) != -1 && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.05);
    CHECK(ledger_used(1) == -1);
}

static void wait_lets_a_request_wait_until_the_burst_holder_frees(void)
{
    const char *opts[] = {"--collision", "wait", "--collision-wait", "15s", NULL};
    agent_start(opts);
    char a[4096], b[4096], fa[256], fb[256], sa[1024], sb[1024];
    flag(fa, sizeof(fa), "a");
    flag(fb, sizeof(fb), "b");
    snprintf(sa, sizeof(sa),
             "\"alloc\", \"192\", \"mark\", \"%s\", \"idle\", \"3\", \"free\", \"await\", \"%s\"",
             fa, fb);
    snprintf(sb, sizeof(sb), "\"await\", \"%s\", \"alloc\", \"96\", \"mark\", \"%s\"", fa, fb);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s, %s]}",
                      job(a, sizeof(a), 1, "run", 32, 256, 0, sa),
                      job(b, sizeof(b), 2, "run", 96, 256, 0, sb));
    json_t *j1 = ts_ah_wait_job(1, 0, "exited", 30), *j2 = ts_ah_wait_job(2, 0, "exited", 30);
    CHECK(j1 != NULL && json_integer_value(json_object_get(j1, "exit_code")) == 0);
    CHECK(j2 != NULL && json_integer_value(json_object_get(j2, "exit_code")) == 0);
    json_decref(j1);
    json_decref(j2);
    char *oa = job_output(1), *ob = job_output(2);
    CHECK(oa != NULL && strstr(oa, "alloc ok 192") != NULL && strstr(oa, "freed") != NULL);
    CHECK(ob != NULL && strstr(ob, "alloc ok 96") != NULL); /* after waiting, not refused */
    free(oa);
    free(ob);
    char *ev = wait_event(2, "memory_wait", 5);
    CHECK(ev != NULL && strstr(ev, "waits for 96.0 MiB on GPU 0") != NULL);
    CHECK(ev != NULL && strstr(ev, "memory_ended") == NULL); /* nobody was ended */
    free(ev);
    CHECK(reported_event(2, "memory_wait", 5));
}

static void priority_ends_the_lowest_priority_burst_holder_and_the_waiter_gets_its_memory(void)
{
    const char *opts[] = {"--collision", "priority", NULL};
    agent_start(opts);
    char a[4096], b[4096], c[4096], fa[256], fc[256], sa[1024], sb[1024], sc[1024];
    flag(fa, sizeof(fa), "a");
    flag(fc, sizeof(fc), "c");
    snprintf(sa, sizeof(sa),
             "\"await\", \"%s\", \"alloc\", \"192\", \"mark\", \"%s\", \"idle\", \"30\"", fc, fa);
    snprintf(sb, sizeof(sb), "\"await\", \"%s\", \"alloc\", \"96\"", fa);
    /* lower in priority than A, but within its request: never ended */
    snprintf(sc, sizeof(sc), "\"alloc\", \"32\", \"mark\", \"%s\", \"idle\", \"30\"", fc);
    ts_ah_set_desired(
        "{\"generation\": 1, \"jobs\": [%s, %s, %s]}", job(a, sizeof(a), 1, "run", 32, 256, 0, sa),
        job(b, sizeof(b), 2, "run", 96, 256, 10, sb), job(c, sizeof(c), 3, "run", 32, 32, -5, sc));
    json_t *j1 = ts_ah_wait_job(1, 0, "exited", 30), *j2 = ts_ah_wait_job(2, 0, "exited", 30);
    /* ended as an eviction: SIGTERM (SIGKILL after the grace), reported
     * evicted with why, so the server requeues it */
    CHECK(j1 != NULL && json_integer_value(json_object_get(j1, "signal")) == SIGTERM);
    CHECK(j1 != NULL && json_is_true(json_object_get(j1, "evicted")));
    const char *why = json_string_value(json_object_get(j1, "message"));
    CHECK(why != NULL && strstr(why, "by the priority resolver to make room for job 2") != NULL);
    CHECK(j2 != NULL && json_integer_value(json_object_get(j2, "exit_code")) == 0);
    CHECK(j2 != NULL && json_object_get(j2, "evicted") == NULL);
    json_decref(j1);
    json_decref(j2);
    char *ob = job_output(2);
    CHECK(ob != NULL && strstr(ob, "alloc ok 96") != NULL);
    free(ob);
    json_t *r = ts_ah_report();
    const char *s3 = json_string_value(json_object_get(ts_ah_report_job(r, 3, 0), "state"));
    CHECK(s3 != NULL && strcmp(s3, "running") == 0);
    json_decref(r);
    char *ev = wait_event(1, "memory_ended", 5);
    CHECK(ev != NULL && strstr(ev, "to make room for job 2") != NULL &&
          strstr(ev, "goes back to the queue") != NULL);
    free(ev);
    ev = wait_event(2, "memory_ended", 5);
    CHECK(ev != NULL && strstr(ev, "job 1 (priority 0, 192.0 MiB on GPU 0) was ended") != NULL);
    free(ev);
    CHECK(reported_event(1, "memory_ended", 5) && reported_event(2, "memory_ended", 5));
}

static void swap_moves_the_idle_holder_out_and_its_data_comes_back_intact(void)
{
    const char *opts[] = {"--collision", "swap", "--swap-reserve", "192MiB", "--swap-idle",
                          "1s",          NULL};
    agent_start(opts);
    char a[4096], b[4096], fa[256], fb[256], sa[1024], sb[1024];
    flag(fa, sizeof(fa), "a");
    flag(fb, sizeof(fb), "b");
    snprintf(sa, sizeof(sa),
             "\"alloc\", \"192\", \"mark\", \"%s\", \"await\", \"%s\", \"touch\", \"idle\", \"1\"",
             fa, fb);
    snprintf(sb, sizeof(sb),
             "\"await\", \"%s\", \"idle\", \"1.5\", \"alloc\", \"96\", \"free\", \"mark\", \"%s\"",
             fa, fb);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s, %s]}",
                      job(a, sizeof(a), 1, "run", 32, 256, 0, sa),
                      job(b, sizeof(b), 2, "run", 96, 256, 0, sb));
    json_t *j1 = ts_ah_wait_job(1, 0, "exited", 30), *j2 = ts_ah_wait_job(2, 0, "exited", 30);
    CHECK(j1 != NULL && json_integer_value(json_object_get(j1, "exit_code")) == 0);
    CHECK(j2 != NULL && json_integer_value(json_object_get(j2, "exit_code")) == 0);
    json_decref(j1);
    json_decref(j2);
    char *oa = job_output(1), *ob = job_output(2);
    CHECK(ob != NULL && strstr(ob, "alloc ok 96") != NULL);
    CHECK(oa != NULL && strstr(oa, "data intact") != NULL); /* byte for byte after the trip */
    free(oa);
    free(ob);
    char *ev = wait_event(1, "swapped_in", 5);
    CHECK(ev != NULL &&
          strstr(ev, "swapped out: 192.0 MiB moved to the host swap reserve") != NULL &&
          strstr(ev, "to make room for job 2") != NULL);
    CHECK(ev != NULL && strstr(ev, "memory_ended") == NULL);
    free(ev);
    CHECK(reported_event(1, "swapped_out", 5) && reported_event(2, "swapped_out", 5) &&
          reported_event(1, "swapped_in", 5));
}

static void a_full_swap_reserve_falls_back_to_ending_the_holder(void)
{
    const char *opts[] = {"--collision", "swap", "--swap-reserve", "64MiB", "--swap-idle",
                          "1s",          NULL};
    agent_start(opts);
    char a[4096], b[4096], fa[256], sa[1024], sb[1024];
    flag(fa, sizeof(fa), "a");
    snprintf(sa, sizeof(sa), "\"alloc\", \"192\", \"mark\", \"%s\", \"idle\", \"30\"", fa);
    snprintf(sb, sizeof(sb), "\"await\", \"%s\", \"idle\", \"1.5\", \"alloc\", \"96\"", fa);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s, %s]}",
                      job(a, sizeof(a), 1, "run", 32, 256, 0, sa),
                      job(b, sizeof(b), 2, "run", 96, 256, 0, sb));
    json_t *j1 = ts_ah_wait_job(1, 0, "exited", 30), *j2 = ts_ah_wait_job(2, 0, "exited", 30);
    CHECK(j1 != NULL && json_integer_value(json_object_get(j1, "signal")) == SIGTERM);
    CHECK(j1 != NULL && json_is_true(json_object_get(j1, "evicted")));
    CHECK(j2 != NULL && json_integer_value(json_object_get(j2, "exit_code")) == 0);
    json_decref(j1);
    json_decref(j2);
    char *ev = wait_event(1, "memory_ended", 5);
    CHECK(ev != NULL && strstr(ev, "\"type\":\"fell_back_to_priority\"") != NULL &&
          strstr(ev, "has no room for 192.0 MiB") != NULL);
    free(ev);
    ev = wait_event(2, "fell_back_to_priority", 5);
    CHECK(ev != NULL && strstr(ev, "job 1 could not be swapped out") != NULL);
    free(ev);
}

static void suspend_swaps_a_job_out_and_stops_it_and_run_resumes_it_warm(void)
{
    const char *opts[] = {"--collision", "wait", "--swap-reserve", "128MiB", NULL};
    agent_start(opts);
    char a[4096], fa[256], fr[256], sa[1024];
    flag(fa, sizeof(fa), "a");
    flag(fr, sizeof(fr), "resume");
    snprintf(sa, sizeof(sa),
             "\"alloc\", \"64\", \"mark\", \"%s\", \"await\", \"%s\", \"touch\", \"idle\", \"1\"",
             fa, fr);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s]}",
                      job(a, sizeof(a), 1, "run", 64, 64, 0, sa));
    double until = ts_ah_now_s() + 20;
    while (access(fa, F_OK) != 0 && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.05);
    REQUIRE(ledger_used(1) == (long long)(64 * MiB));
    ts_ah_set_desired("{\"generation\": 2, \"jobs\": [%s]}",
                      job(a, sizeof(a), 1, "suspend", 64, 64, 0, sa));
    json_t *j = ts_ah_wait_job(1, 0, "suspended", 20);
    REQUIRE(j != NULL);
    CHECK(json_integer_value(json_object_get(j, "swapped_bytes")) == (json_int_t)(64 * MiB));
    pid_t pid = (pid_t)json_integer_value(json_object_get(j, "pid"));
    json_decref(j);
    CHECK(ledger_used(1) == 0); /* its GPU memory is free while it is suspended */
    struct ts_proc_stat st;
    CHECK(ts_proc_stat(pid, &st) == 0 && st.state == 'T');
    CHECK(reported_event(1, "suspended", 5));

    ts_files_write_atomic(fr, "", 0, 0644); /* it may go on once continued */
    ts_ah_set_desired("{\"generation\": 3, \"jobs\": [%s]}",
                      job(a, sizeof(a), 1, "run", 64, 64, 0, sa));
    j = ts_ah_wait_job(1, 0, "exited", 20);
    CHECK(j != NULL && json_integer_value(json_object_get(j, "exit_code")) == 0);
    json_decref(j);
    char *out = job_output(1);
    CHECK(out != NULL && strstr(out, "data intact") != NULL);
    free(out);
    char *ev = wait_event(1, "swapped_in", 5);
    CHECK(ev != NULL && strstr(ev, "\"type\":\"resumed\"") != NULL);
    free(ev);
}

static void a_job_that_cannot_be_swapped_out_is_stopped_instead_of_suspended(void)
{
    const char *opts[] = {"--collision", "wait", NULL}; /* no reserve */
    agent_start(opts);
    char a[4096], fa[256], sa[1024];
    flag(fa, sizeof(fa), "a");
    snprintf(sa, sizeof(sa), "\"alloc\", \"64\", \"mark\", \"%s\", \"idle\", \"30\"", fa);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s]}",
                      job(a, sizeof(a), 1, "run", 64, 64, 0, sa));
    double until = ts_ah_now_s() + 20;
    while (access(fa, F_OK) != 0 && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.05);
    ts_ah_set_desired("{\"generation\": 2, \"jobs\": [%s]}",
                      job(a, sizeof(a), 1, "suspend", 64, 64, 0, sa));
    json_t *j = ts_ah_wait_job(1, 0, "exited", 20);
    CHECK(j != NULL && json_integer_value(json_object_get(j, "signal")) == SIGTERM);
    json_decref(j);
    char *ev = wait_event(1, "swap_failed", 5);
    CHECK(ev != NULL && strstr(ev, "no host swap reserve") != NULL);
    free(ev);
    /* on a node without a reserve a job on a whole GPU runs without the shim */
    char b[1024];
    snprintf(b, sizeof(b),
             "{\"id\": 2, \"attempt\": 0, \"action\": \"run\", \"gpus\": [{\"index\": 0, "
             "\"memory_bytes\": %llu}], \"command\": [\"%s\", \"env\"]}",
             256 * MiB, probe);
    ts_ah_set_desired("{\"generation\": 3, \"jobs\": [%s]}", b);
    j = ts_ah_wait_job(2, 0, "exited", 20);
    REQUIRE(j != NULL);
    json_decref(j);
    char *out = job_output(2);
    CHECK(out != NULL && strstr(out, "LD_PRELOAD") == NULL && strstr(out, "TESSERA_SHIM") == NULL);
    free(out);
}

/* The real shim on simgpu: two tessera-gpuload jobs collide; the burst
 * holder of lower priority is ended and the other allocates and runs. */
static void under_the_real_shim_priority_ends_the_burst_holder_for_a_request(void)
{
    char lib[PATH_MAX + 64];
    snprintf(lib, sizeof(lib), "%s/../lib/libtessera-cuda.so", bin_dir);
    if (access(lib, R_OK) != 0) {
        fprintf(stderr, "no %s: skipped\n", lib);
        return;
    }
    real_shim = true;
    const char *opts[] = {"--collision", "priority", NULL};
    agent_start(opts);
    char a[4096], b[4096], sa[1024], sb[1024];
    snprintf(sa, sizeof(sa),
             "\"--pattern\", \"notebook\", \"--memory\", \"192MiB\", \"--touch\", \"1MiB\", "
             "\"--burst\", \"10ms\", \"--idle\", \"30s\"");
    snprintf(sb, sizeof(sb),
             "\"--pattern\", \"notebook\", \"--memory\", \"96MiB\", \"--touch\", \"1MiB\", "
             "\"--burst\", \"10ms\", \"--idle\", \"200ms\", \"--steps\", \"3\"");
    const char *saved = player;
    static char gl[512];
    snprintf(gl, sizeof(gl), "%s/tessera-gpuload", bin_dir);
    player = gl;
    job(a, sizeof(a), 1, "run", 32, 256, 0, sa);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s]}", a);
    double until = ts_ah_now_s() + 20;
    while (ledger_used(1) < (long long)(192 * MiB) && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.05);
    REQUIRE(ledger_used(1) >= (long long)(192 * MiB)); /* charged through the shim */
    job(b, sizeof(b), 2, "run", 96, 256, 10, sb);
    player = saved;
    ts_ah_set_desired("{\"generation\": 2, \"jobs\": [%s, %s]}", a, b);
    json_t *j1 = ts_ah_wait_job(1, 0, "exited", 30), *j2 = ts_ah_wait_job(2, 0, "exited", 30);
    /* gpuload frees its memory and ends by SIGTERM, as evicted jobs do */
    CHECK(j1 != NULL && json_integer_value(json_object_get(j1, "signal")) == SIGTERM);
    CHECK(j1 != NULL && json_is_true(json_object_get(j1, "evicted")));
    CHECK(j2 != NULL && json_integer_value(json_object_get(j2, "exit_code")) == 0);
    json_decref(j1);
    json_decref(j2);
    char *ev = wait_event(1, "memory_ended", 5);
    CHECK(ev != NULL && strstr(ev, "for job 2") != NULL);
    free(ev);
    if (ts_ah_failures) {
        char *o = job_output(2);
        fprintf(stderr, "job 2 output:\n%s\n", o ? o : "");
        free(o);
    }
}

/* ---- jobs under the real shim ------------------------------------------------ */

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

/* A desired cuda_job (buf, 8 KiB) with gpus (JSON list's inside: "index",
 * "memory_bytes", "memory_limit_bytes") and steps (space-separated). */
static char *cjob(char *buf, int id, const char *action, int prio, const char *gpus,
                  const char *steps)
{
    char argv[4096] = "", copy[2048];
    snprintf(copy, sizeof(copy), "%s", steps);
    for (char *save = NULL, *w = strtok_r(copy, " ", &save); w != NULL;
         w = strtok_r(NULL, " ", &save)) {
        size_t n = strlen(argv);
        snprintf(argv + n, sizeof(argv) - n, ", \"%s\"", w);
    }
    snprintf(buf, 8192,
             "{\"id\": %d, \"attempt\": 0, \"name\": \"j%d\", \"project\": \"p\", "
             "\"action\": \"%s\", \"priority\": %d, \"grace_seconds\": 2, \"gpus\": [%s], "
             "\"checkpoint_dir\": \"%s\", \"command\": [\"%s\"%s]}",
             id, id, action, prio, gpus, ts_ah_shared, cuda_job, argv);
    return buf;
}

/* One GPU of a desired job: index, request and limit in MiB (buf, 256). */
static char *gpu(char *buf, int index, int req, int lim)
{
    snprintf(buf, 256, "{\"index\": %d, \"memory_bytes\": %llu, \"memory_limit_bytes\": %llu}",
             index, (unsigned long long)req * MiB, (unsigned long long)lim * MiB);
    return buf;
}

/* Device memory pid holds on simulated GPU g, as `tessera-simgpu procs`
 * shows it (0 without a line), or -1 when the tool fails. */
static long long simgpu_used(int g, pid_t pid)
{
    char cmd[PATH_MAX * 2], line[256];
    snprintf(cmd, sizeof(cmd), "%s/tessera-simgpu procs %s/simgpu", bin_dir, ts_ah_data);
    FILE *f = popen(cmd, "r");
    if (f == NULL)
        return -1;
    long long used = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        int lg, lp;
        char size[64];
        int64_t b;
        if (sscanf(line, "gpu=%d pid=%d used=%63s", &lg, &lp, size) == 3 && lg == g &&
            lp == (int)pid && ts_bytesize_parse(size, &b) == 0)
            used = b;
    }
    return pclose(f) == 0 ? used : -1;
}

/* Whether simgpu shows pid holding want bytes on GPU g within timeout_s. */
static bool simgpu_shows(int g, pid_t pid, long long want, double timeout_s)
{
    double until = ts_ah_now_s() + timeout_s;
    long long u = -1;
    while ((u = simgpu_used(g, pid)) != want && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.1);
    if (u != want)
        fprintf(stderr, "simgpu: pid %d holds %lld bytes on GPU %d, not %lld\n", (int)pid, u, g,
                want);
    return u == want;
}

static bool wait_file(const char *path, double timeout_s)
{
    double until = ts_ah_now_s() + timeout_s;
    while (access(path, F_OK) != 0 && ts_ah_now_s() < until)
        ts_ah_sleep_s(0.05);
    if (access(path, F_OK) != 0)
        fprintf(stderr, "no %s after %.0f s\n", path, timeout_s);
    return access(path, F_OK) == 0;
}

/* The pid of job id once it runs (0 when it does not). */
static pid_t job_pid(long id)
{
    json_t *j = ts_ah_wait_job(id, 0, "running", 20);
    pid_t pid = (pid_t)json_integer_value(json_object_get(j, "pid"));
    json_decref(j);
    return pid;
}

/* Whether cuda_job's output shows every allocation read back intact at the
 * address it was allocated at, and the whole data intact. */
static bool intact_at_same_addresses(const char *out)
{
    if (out == NULL || strstr(out, "data intact") == NULL || strstr(out, " lost") != NULL)
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

static void dump_outputs(int n)
{
    for (int id = 1; ts_ah_failures && id <= n; id++) {
        char *o = job_output(id);
        fprintf(stderr, "job %d output:\n%s\n", id, o ? o : "(none)");
        free(o);
    }
}

/* wait: A bursts to 192 of 256 MiB usable; B's allocation within its
 * request blocks (memory_wait) until A frees, then succeeds; nobody ends. */
static void under_the_real_shim_wait_blocks_a_request_until_the_burst_holder_frees(void)
{
    if (!use_real_shim())
        return;
    const char *opts[] = {"--collision", "wait", "--collision-wait", "20s", NULL};
    agent_start(opts);
    char a[8192], b[8192], g[256], fa[256], fw[256], sa[1024], sb[1024];
    flag(fa, sizeof(fa), "a");
    flag(fw, sizeof(fw), "waited");
    snprintf(sa, sizeof(sa), "alloc 0 192 mark %s await %s idle 1 check free", fa, fw);
    snprintf(sb, sizeof(sb), "await %s alloc 0 96 check free", fa);
    cjob(a, 1, "run", 0, gpu(g, 0, 32, 256), sa);
    cjob(b, 2, "run", 0, gpu(g, 0, 96, 256), sb);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s, %s]}", a, b);
    /* B is blocked inside cuMemAlloc_v2: the broker says so */
    char *ev = wait_event(2, "memory_wait", 20);
    CHECK(ev != NULL && strstr(ev, "waits for 96.0 MiB on GPU 0") != NULL);
    free(ev);
    CHECK(ledger_used(1) == (long long)(192 * MiB) && ledger_used(2) == 0);
    char *ob = job_output(2);
    CHECK(ob != NULL && strstr(ob, "alloc ") == NULL); /* neither ok nor failed yet */
    free(ob);
    ts_files_write_atomic(fw, "", 0, 0644); /* A frees 1 s from now */
    json_t *j1 = ts_ah_wait_job(1, 0, "exited", 30), *j2 = ts_ah_wait_job(2, 0, "exited", 30);
    CHECK(j1 != NULL && json_integer_value(json_object_get(j1, "exit_code")) == 0);
    CHECK(j2 != NULL && json_integer_value(json_object_get(j2, "exit_code")) == 0);
    json_decref(j1);
    json_decref(j2);
    char *oa = job_output(1);
    ob = job_output(2);
    CHECK(intact_at_same_addresses(oa) && intact_at_same_addresses(ob));
    const char *at = ob != NULL ? strstr(ob, "alloc ok dev=0 mib=96") : NULL;
    const char *ms = at != NULL ? strstr(at, "ms=") : NULL;
    CHECK(ms != NULL && atof(ms + 3) >= 1000); /* it waited, it was not refused */
    free(oa);
    free(ob);
    ev = wait_event(1, "memory_wait", 1);
    CHECK(ev == NULL || strstr(ev, "memory_ended") == NULL);
    free(ev);
    ev = wait_event(2, "memory_wait", 5);
    CHECK(ev != NULL && strstr(ev, "memory_ended") == NULL && strstr(ev, "swapped") == NULL);
    free(ev);
    CHECK(reported_event(2, "memory_wait", 5));
    dump_outputs(2);
}

/* swap: A bursts to 192 MiB and goes idle; B's request moves A's memory
 * to the host reserve (off the simulated GPU); once B frees, A's next GPU
 * call brings it back, byte for byte at the same addresses. */
static void under_the_real_shim_swap_moves_the_idle_holder_off_the_gpu_and_back_intact(void)
{
    if (!use_real_shim())
        return;
    const char *opts[] = {"--collision", "swap", "--swap-reserve", "192MiB", "--swap-idle",
                          "1s",          NULL};
    agent_start(opts);
    char a[8192], b[8192], g[256], fa[256], fb[256], fc[256], fd[256], fh[256], fr[256];
    char sa[2048], sb[2048];
    flag(fa, sizeof(fa), "a");
    flag(fb, sizeof(fb), "b");
    flag(fc, sizeof(fc), "checked");
    flag(fd, sizeof(fd), "done");
    flag(fh, sizeof(fh), "held");
    flag(fr, sizeof(fr), "release");
    snprintf(sa, sizeof(sa), "alloc 0 96 alloc 0 96 mark %s await %s check mark %s await %s free",
             fa, fb, fc, fd);
    snprintf(sb, sizeof(sb), "await %s idle 1.5 alloc 0 96 check mark %s await %s free mark %s", fa,
             fh, fr, fb);
    cjob(a, 1, "run", 0, gpu(g, 0, 32, 256), sa);
    cjob(b, 2, "run", 0, gpu(g, 0, 96, 256), sb);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s, %s]}", a, b);
    pid_t pa = job_pid(1), pb = job_pid(2);
    REQUIRE(pa > 0 && pb > 0);
    REQUIRE(wait_file(fh, 30));
    /* B holds its 96 MiB; A's 192 MiB are in the host reserve, off the GPU */
    CHECK(simgpu_shows(0, pa, 0, 5));
    CHECK(simgpu_shows(0, pb, (long long)(96 * MiB), 5));
    char *ev = wait_event(1, "swapped_out", 5);
    CHECK(ev != NULL && strstr(ev, "192.0 MiB moved to the host swap reserve") != NULL);
    free(ev);
    struct ts_ledger *l = ledger();
    int k = l != NULL ? ts_ledger_find_job(l, ts_ledger_key(1, 0)) : -1;
    CHECK(k >= 0 && atomic_load(&l->jobs[k].swapped_bytes) == 192 * MiB &&
          atomic_load(&l->jobs[k].used_bytes) == 0);
    ts_ledger_close(l);
    char *oa = job_output(1);
    CHECK(oa != NULL && strstr(oa, "check ") == NULL); /* A has made no call yet */
    free(oa);

    ts_files_write_atomic(fr, "", 0, 0644); /* B frees; A's check brings it back */
    REQUIRE(wait_file(fc, 30));
    CHECK(simgpu_shows(0, pa, (long long)(192 * MiB), 5));
    ts_files_write_atomic(fd, "", 0, 0644);
    json_t *j1 = ts_ah_wait_job(1, 0, "exited", 30), *j2 = ts_ah_wait_job(2, 0, "exited", 30);
    CHECK(j1 != NULL && json_integer_value(json_object_get(j1, "exit_code")) == 0);
    CHECK(j2 != NULL && json_integer_value(json_object_get(j2, "exit_code")) == 0);
    json_decref(j1);
    json_decref(j2);
    oa = job_output(1);
    char *ob = job_output(2);
    CHECK(intact_at_same_addresses(oa) && strstr(oa, "data intact 201326592 bytes") != NULL);
    CHECK(intact_at_same_addresses(ob));
    free(oa);
    free(ob);
    ev = wait_event(1, "swapped_in", 5);
    CHECK(ev != NULL && strstr(ev, "memory_ended") == NULL);
    free(ev);
    CHECK(reported_event(1, "swapped_out", 5) && reported_event(2, "swapped_out", 5) &&
          reported_event(1, "swapped_in", 5));
    dump_outputs(2);
}

/* swap with a host reserve smaller than A's burst: priority instead. */
static void under_the_real_shim_a_full_swap_reserve_falls_back_to_ending_the_holder(void)
{
    if (!use_real_shim())
        return;
    const char *opts[] = {"--collision", "swap", "--swap-reserve", "64MiB", "--swap-idle",
                          "1s",          NULL};
    agent_start(opts);
    char a[8192], b[8192], g[256], fa[256], sa[1024], sb[1024];
    flag(fa, sizeof(fa), "a");
    snprintf(sa, sizeof(sa), "alloc 0 192 mark %s idle 30", fa);
    snprintf(sb, sizeof(sb), "await %s idle 1.5 alloc 0 96 check free", fa);
    cjob(a, 1, "run", 0, gpu(g, 0, 32, 256), sa);
    cjob(b, 2, "run", 0, gpu(g, 0, 96, 256), sb);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s, %s]}", a, b);
    pid_t pa = job_pid(1);
    REQUIRE(pa > 0);
    json_t *j1 = ts_ah_wait_job(1, 0, "exited", 30), *j2 = ts_ah_wait_job(2, 0, "exited", 30);
    CHECK(j1 != NULL && json_integer_value(json_object_get(j1, "signal")) == SIGTERM);
    CHECK(j1 != NULL && json_is_true(json_object_get(j1, "evicted")));
    CHECK(j2 != NULL && json_integer_value(json_object_get(j2, "exit_code")) == 0);
    json_decref(j1);
    json_decref(j2);
    char *ob = job_output(2);
    CHECK(intact_at_same_addresses(ob));
    free(ob);
    CHECK(simgpu_shows(0, pa, 0, 5)); /* the ended holder's memory is free */
    char *ev = wait_event(1, "memory_ended", 5);
    CHECK(ev != NULL && strstr(ev, "\"type\":\"fell_back_to_priority\"") != NULL &&
          strstr(ev, "has no room for 192.0 MiB") != NULL);
    CHECK(ev != NULL && strstr(ev, "for job 2") != NULL);
    free(ev);
    CHECK(reported_event(1, "fell_back_to_priority", 5) &&
          reported_event(2, "fell_back_to_priority", 5) && reported_event(1, "memory_ended", 5));
    dump_outputs(2);
}

/* Suspend through the desired file: the job is stopped and its memory is
 * off the GPU; run again in the same attempt: it goes on with its data. */
static void under_the_real_shim_suspend_stops_the_job_off_the_gpu_and_run_resumes_it_intact(void)
{
    if (!use_real_shim())
        return;
    const char *opts[] = {"--collision", "wait", "--swap-reserve", "128MiB", NULL};
    agent_start(opts);
    char a[8192], g[256], fa[256], fr[256], fc[256], fd[256], sa[2048];
    flag(fa, sizeof(fa), "a");
    flag(fr, sizeof(fr), "resume");
    flag(fc, sizeof(fc), "checked");
    flag(fd, sizeof(fd), "done");
    snprintf(sa, sizeof(sa), "alloc 0 32 alloc 0 32 mark %s await %s check mark %s await %s", fa,
             fr, fc, fd);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s]}",
                      cjob(a, 1, "run", 0, gpu(g, 0, 64, 64), sa));
    pid_t pid = job_pid(1);
    REQUIRE(pid > 0 && wait_file(fa, 20));
    CHECK(simgpu_shows(0, pid, (long long)(64 * MiB), 5));
    ts_ah_set_desired("{\"generation\": 2, \"jobs\": [%s]}",
                      cjob(a, 1, "suspend", 0, gpu(g, 0, 64, 64), sa));
    json_t *j = ts_ah_wait_job(1, 0, "suspended", 20);
    REQUIRE(j != NULL);
    CHECK(json_integer_value(json_object_get(j, "swapped_bytes")) == (json_int_t)(64 * MiB));
    CHECK((pid_t)json_integer_value(json_object_get(j, "pid")) == pid);
    json_decref(j);
    struct ts_proc_stat st;
    CHECK(ts_proc_stat(pid, &st) == 0 && st.state == 'T');
    CHECK(simgpu_shows(0, pid, 0, 5)); /* off the GPU while suspended */
    CHECK(ledger_used(1) == 0);
    CHECK(reported_event(1, "suspended", 5));

    ts_files_write_atomic(fr, "", 0, 0644); /* it may go on once continued */
    ts_ah_set_desired("{\"generation\": 3, \"jobs\": [%s]}",
                      cjob(a, 1, "run", 0, gpu(g, 0, 64, 64), sa));
    REQUIRE(wait_file(fc, 20));
    CHECK(ts_proc_stat(pid, &st) == 0 && st.state != 'T');
    CHECK(simgpu_shows(0, pid, (long long)(64 * MiB), 5)); /* back on the GPU */
    ts_files_write_atomic(fd, "", 0, 0644);
    j = ts_ah_wait_job(1, 0, "exited", 20);
    CHECK(j != NULL && json_integer_value(json_object_get(j, "exit_code")) == 0);
    json_decref(j);
    char *out = job_output(1);
    CHECK(intact_at_same_addresses(out));
    free(out);
    char *ev = wait_event(1, "swapped_in", 5);
    CHECK(ev != NULL && strstr(ev, "\"type\":\"resumed\"") != NULL);
    free(ev);
    CHECK(reported_event(1, "resumed", 5));
    dump_outputs(1);
}

/* The lines of out (a job's output) of cuda_job's second process ("w1 ",
 * taken off) or of its first (new). */
static char *worker_lines(const char *out, bool second)
{
    char *v = calloc(1, out != NULL ? strlen(out) + 1 : 1);
    for (const char *p = out; v != NULL && p != NULL && *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p + 1) : strlen(p);
        bool w1 = strncmp(p, "w1 ", 3) == 0;
        if (w1 == second)
            strncat(v, w1 ? p + 3 : p, w1 ? n - 3 : n);
        p += n;
    }
    return v;
}

/* A job of two processes (each its own driver and allocations on GPU 0):
 * suspend moves both off the GPU and stops both; run brings both back
 * intact at the same addresses. */
static void under_the_real_shim_suspend_takes_every_process_of_a_job_and_brings_all_back(void)
{
    if (!use_real_shim())
        return;
    const char *opts[] = {"--collision", "wait", "--swap-reserve", "128MiB", NULL};
    agent_start(opts);
    char a[8192], g[256], fa[256], fa1[272], fr[256], fc[256], fc1[272], fd[256], sa[2048];
    flag(fa, sizeof(fa), "a");
    flag(fr, sizeof(fr), "resume");
    flag(fc, sizeof(fc), "checked");
    flag(fd, sizeof(fd), "done");
    snprintf(fa1, sizeof(fa1), "%s.w1", fa);
    snprintf(fc1, sizeof(fc1), "%s.w1", fc);
    snprintf(sa, sizeof(sa), "fork alloc 0 16 alloc 0 16 mark %s await %s check mark %s await %s",
             fa, fr, fc, fd);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s]}",
                      cjob(a, 1, "run", 0, gpu(g, 0, 64, 64), sa));
    pid_t pid = job_pid(1);
    REQUIRE(pid > 0 && wait_file(fa, 20) && wait_file(fa1, 20));
    char *out = job_output(1);
    const char *at = out != NULL ? strstr(out, "w1 pid ") : NULL;
    pid_t second = at != NULL ? (pid_t)atoi(at + 7) : 0;
    free(out);
    REQUIRE(second > 0 && second != pid);
    CHECK(simgpu_shows(0, pid, (long long)(32 * MiB), 5));
    CHECK(simgpu_shows(0, second, (long long)(32 * MiB), 5));
    ts_ah_set_desired("{\"generation\": 2, \"jobs\": [%s]}",
                      cjob(a, 1, "suspend", 0, gpu(g, 0, 64, 64), sa));
    json_t *j = ts_ah_wait_job(1, 0, "suspended", 20);
    REQUIRE(j != NULL);
    CHECK(json_integer_value(json_object_get(j, "swapped_bytes")) == (json_int_t)(64 * MiB));
    json_decref(j);
    struct ts_proc_stat st;
    CHECK(ts_proc_stat(pid, &st) == 0 && st.state == 'T');
    CHECK(ts_proc_stat(second, &st) == 0 && st.state == 'T');
    CHECK(simgpu_shows(0, pid, 0, 5));
    CHECK(simgpu_shows(0, second, 0, 5));
    CHECK(ledger_used(1) == 0);

    ts_files_write_atomic(fr, "", 0, 0644);
    ts_ah_set_desired("{\"generation\": 3, \"jobs\": [%s]}",
                      cjob(a, 1, "run", 0, gpu(g, 0, 64, 64), sa));
    REQUIRE(wait_file(fc, 20) && wait_file(fc1, 20));
    CHECK(simgpu_shows(0, pid, (long long)(32 * MiB), 5));
    CHECK(simgpu_shows(0, second, (long long)(32 * MiB), 5));
    ts_files_write_atomic(fd, "", 0, 0644);
    j = ts_ah_wait_job(1, 0, "exited", 20);
    CHECK(j != NULL && json_integer_value(json_object_get(j, "exit_code")) == 0);
    json_decref(j);
    out = job_output(1);
    char *o0 = worker_lines(out, false), *o1 = worker_lines(out, true);
    CHECK(intact_at_same_addresses(o0) && intact_at_same_addresses(o1));
    free(o0);
    free(o1);
    free(out);
    CHECK(reported_event(1, "resumed", 5));
    dump_outputs(1);
}

/* A job fractional on two GPUs, bursting on GPU 0, is swapped out for a
 * request there: both GPUs' memory leaves, and both come back together. */
static void under_the_real_shim_a_two_gpu_job_leaves_both_gpus_and_comes_back_together(void)
{
    if (!use_real_shim())
        return;
    gpus_spec = "sim:2x1GiB";
    const char *opts[] = {"--collision", "swap", "--swap-reserve", "320MiB", "--swap-idle",
                          "1s",          NULL};
    agent_start(opts);
    char a[8192], b[8192], g0[256], g1[256], gs[600], fa[256], fb[256], fc[256], fd[256];
    char fh[256], fr[256], sa[2048], sb[2048];
    flag(fa, sizeof(fa), "a");
    flag(fb, sizeof(fb), "b");
    flag(fc, sizeof(fc), "checked");
    flag(fd, sizeof(fd), "done");
    flag(fh, sizeof(fh), "held");
    flag(fr, sizeof(fr), "release");
    snprintf(sa, sizeof(sa), "alloc 0 192 alloc 1 96 mark %s await %s check mark %s await %s free",
             fa, fb, fc, fd);
    snprintf(sb, sizeof(sb), "await %s idle 1.5 alloc 0 96 mark %s await %s free mark %s", fa, fh,
             fr, fb);
    snprintf(gs, sizeof(gs), "%s, %s", gpu(g0, 0, 32, 256), gpu(g1, 1, 32, 256));
    cjob(a, 1, "run", 0, gs, sa);
    cjob(b, 2, "run", 0, gpu(g0, 0, 96, 256), sb);
    ts_ah_set_desired("{\"generation\": 1, \"jobs\": [%s, %s]}", a, b);
    pid_t pa = job_pid(1), pb = job_pid(2);
    REQUIRE(pa > 0 && pb > 0);
    REQUIRE(wait_file(fh, 30));
    CHECK(simgpu_shows(0, pa, 0, 5)); /* both GPUs, though only GPU 0 was short */
    CHECK(simgpu_shows(1, pa, 0, 5));
    CHECK(simgpu_shows(0, pb, (long long)(96 * MiB), 5));
    char *ev = wait_event(1, "swapped_out", 5);
    CHECK(ev != NULL && strstr(ev, "288.0 MiB moved to the host swap reserve") != NULL);
    free(ev);

    ts_files_write_atomic(fr, "", 0, 0644);
    REQUIRE(wait_file(fc, 30));
    CHECK(simgpu_shows(0, pa, (long long)(192 * MiB), 5));
    CHECK(simgpu_shows(1, pa, (long long)(96 * MiB), 5));
    ts_files_write_atomic(fd, "", 0, 0644);
    json_t *j1 = ts_ah_wait_job(1, 0, "exited", 30), *j2 = ts_ah_wait_job(2, 0, "exited", 30);
    CHECK(j1 != NULL && json_integer_value(json_object_get(j1, "exit_code")) == 0);
    CHECK(j2 != NULL && json_integer_value(json_object_get(j2, "exit_code")) == 0);
    json_decref(j1);
    json_decref(j2);
    char *oa = job_output(1);
    CHECK(intact_at_same_addresses(oa) && strstr(oa, "check dev=1 ") != NULL);
    free(oa);
    ev = wait_event(1, "swapped_in", 5);
    CHECK(ev != NULL && strstr(ev, "memory_ended") == NULL);
    free(ev);
    dump_outputs(2);
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
    CASE(a_fractional_job_gets_a_ledger_slot_and_the_shim_environment),
    CASE(wait_lets_a_request_wait_until_the_burst_holder_frees),
    CASE(priority_ends_the_lowest_priority_burst_holder_and_the_waiter_gets_its_memory),
    CASE(swap_moves_the_idle_holder_out_and_its_data_comes_back_intact),
    CASE(a_full_swap_reserve_falls_back_to_ending_the_holder),
    CASE(suspend_swaps_a_job_out_and_stops_it_and_run_resumes_it_warm),
    CASE(a_job_that_cannot_be_swapped_out_is_stopped_instead_of_suspended),
    CASE(under_the_real_shim_priority_ends_the_burst_holder_for_a_request),
    CASE(under_the_real_shim_wait_blocks_a_request_until_the_burst_holder_frees),
    CASE(under_the_real_shim_swap_moves_the_idle_holder_off_the_gpu_and_back_intact),
    CASE(under_the_real_shim_a_full_swap_reserve_falls_back_to_ending_the_holder),
    CASE(under_the_real_shim_suspend_stops_the_job_off_the_gpu_and_run_resumes_it_intact),
    CASE(under_the_real_shim_a_two_gpu_job_leaves_both_gpus_and_comes_back_together),
    CASE(under_the_real_shim_suspend_takes_every_process_of_a_job_and_brings_all_back),
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fraction_test CASE\n");
        return 2;
    }
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        if (strcmp(argv[1], cases[i].name) != 0)
            continue;
        setup();
        cases[i].fn();
        ts_ah_show_agent_log();
        teardown();
        return ts_ah_result(cases[i].name);
    }
    fprintf(stderr, "no such case: %s\n", argv[1]);
    return 2;
}
