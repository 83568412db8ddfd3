/*
 * bench_suspend.c - how long the real agent takes to suspend and to resume
 * a job holding 4 GiB of device memory on simgpu, next to plain copies of
 * the same size made in the same run.
 *
 *     bench_suspend [ROUNDS [SIZE_MIB [BANDWIDTH]]]     (3, 4096, 0)
 *     ctest --test-dir build -R bench/suspend -V
 *
 * BANDWIDTH: the simulated GPU's host<->device copy bandwidth in bytes/s
 * (0: memcpy speed), the same for both halves.
 *
 * The plain copies come first (so their memory is gone before the agent's
 * run): one VMM allocation of SIZE filled with a pattern, and a host buffer
 * of SIZE mapped from a file in /dev/shm and registered with
 * cuMemHostRegister_v2, as the shim's swap engine maps the agent's host
 * swap reserve. Timed ROUNDS times each, median kept: DtoH and HtoD of the
 * whole allocation into pages already there (the plain copy), and the same
 * into fresh pages (DtoH into host pages given back with MADV_REMOVE and
 * populated again, HtoD into device memory created and mapped anew).
 * simgpu's reserve is not pinned and the agent gives its unused pages back
 * every 2 s, so a suspend there pays for fresh host pages and a resume for
 * fresh device memory; on a GPU node the reserve is pinned once and device
 * memory is there already.
 *
 * Then the real tessera-agent (TS_BIN_DIR) with --desired-file on one
 * simulated GPU (SIZE + 4 GiB, at least 8 GiB), --gpu-reserve 1GiB,
 * --collision swap and a host swap reserve of SIZE + 1 GiB runs one job
 * under the real libtessera-cuda.so: suspend_job (TS_SUSPEND_JOB; the
 * steps of tests/agent/cuda_job.c without its 30 s bound on a wait)
 * allocating SIZE with cuMemAlloc_v2 (request = limit = SIZE) and writing
 * every byte. Each round: the desired state says "suspend", timed until
 * DATA/report.json shows the job suspended (then its ledger charge must be
 * 0, its process stopped, its swapped_bytes SIZE); it says "run" again,
 * timed until the report shows it running (the agent says so once the
 * memory is back); then the job reads every byte back at the same address
 * and compares ("data intact", or "data lost" and exit 3: the bench fails
 * loudly). The next round waits 2.5 s first, so that the agent has given
 * the reserve's pages back, as before the first.
 *
 * A failed round still prints the figures of the rounds before it.
 * Host memory: the plain copies take 2 x SIZE; the agent's run up to
 * 2 x SIZE (the job's device memory and its copy in the reserve).
 */
#include <jansson.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "api/files.h"
#include "agent/daemon/proc.h"
#include "agent/ledger/ledger.h"
#include "tests/agent/agentharness.h"
#include "tests/shim/swap_env.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define CHUNK (64 * MiB)
#define ROUNDS_MAX 20

static const char *bin_dir, *job_exe;

static double median(const double *v, int n)
{
    double s[ROUNDS_MAX];
    memcpy(s, v, (size_t)n * sizeof(double));
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && s[k - 1] > s[k]; k--) {
            double t = s[k];
            s[k] = s[k - 1];
            s[k - 1] = t;
        }
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double gib(uint64_t bytes)
{
    return (double)bytes / (double)GiB;
}

/* ---- plain copies, without the shim ---------------------------------------- */

struct plain {
    double dtoh, htod;             /* into pages already there, seconds */
    double dtoh_fresh, htod_fresh; /* into fresh pages */
};

static struct swap_env env;

/* New device memory mapped read-write at va (reserved, size bytes). */
static CUresult create_at(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle *h)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemAccessDesc access = {.location = prop.location,
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUresult rc = env.cu.cuMemCreate(h, size, &prop, 0);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = env.cu.cuMemMap(va, size, 0, *h, 0);
    if (rc == CUDA_SUCCESS)
        rc = env.cu.cuMemSetAccess(va, size, &access, 1);
    return rc;
}

/* Every byte of [va, va+size) written with swap_env's pattern (one seed
 * per 64 MiB chunk), through a bounce buffer of CHUNK bytes. */
static int fill(CUdeviceptr va, size_t size, unsigned char *buf)
{
    for (size_t off = 0; off < size; off += CHUNK) {
        size_t n = size - off < CHUNK ? size - off : CHUNK;
        ts_swap_env_pattern(buf, n, (uint32_t)(off / CHUNK));
        if (env.cu.cuMemcpyHtoD_v2(va + off, buf, n) != CUDA_SUCCESS)
            return -1;
    }
    return 0;
}

/* Whether host holds the pattern fill wrote. */
static int check_host(const unsigned char *host, size_t size)
{
    for (size_t off = 0; off < size; off += CHUNK) {
        size_t n = size - off < CHUNK ? size - off : CHUNK;
        if (ts_swap_env_check(host + off, n, (uint32_t)(off / CHUNK)) != 0)
            return -1;
    }
    return 0;
}

static void populate(void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    madvise(p, len, MADV_POPULATE_WRITE);
#else
    (void)p, (void)len;
#endif
}

/* The plain copies (median of rounds each); 0, or -1 with a message. */
static int plain_copies(size_t size, uint64_t bw, int rounds, struct plain *out)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : NULL;
    if (ts_swap_env_setup(&env, base, 1, size + GiB, bw, size) != 0)
        return -1;
    int rc = -1;
    const char *what = "setup";
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h = 0;
    unsigned char *buf = malloc(CHUNK), *host = MAP_FAILED;
    bool registered = false;
    double dtoh[ROUNDS_MAX], htod[ROUNDS_MAX], dtoh_fresh[ROUNDS_MAX], htod_fresh[ROUNDS_MAX];
    FILE *f = fopen(env.reserve, "r+b");
    if (f != NULL) {
        host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fileno(f), 0);
        fclose(f);
    }
    if (buf == NULL || host == MAP_FAILED ||
        env.cu.cuMemAddressReserve(&va, size, 0, 0, 0) != CUDA_SUCCESS ||
        create_at(va, size, &h) != CUDA_SUCCESS)
        goto out;
    registered = env.cu.cuMemHostRegister_v2(host, size, 0) == CUDA_SUCCESS;
    what = "fill";
    if (!registered || fill(va, size, buf) != 0)
        goto out;
    for (int r = 0; r < rounds; r++) {
        /* fresh host pages: given back, then populated as the engine does */
        what = "DtoH into fresh pages";
        madvise(host, size, MADV_REMOVE);
        double t0 = ts_ah_now_s();
        populate(host, size);
        if (env.cu.cuMemcpyDtoH_v2(host, va, size) != CUDA_SUCCESS)
            goto out;
        double t1 = ts_ah_now_s();
        what = "DtoH";
        if (env.cu.cuMemcpyDtoH_v2(host, va, size) != CUDA_SUCCESS)
            goto out;
        double t2 = ts_ah_now_s();
        what = "HtoD";
        if (env.cu.cuMemcpyHtoD_v2(va, host, size) != CUDA_SUCCESS)
            goto out;
        double t3 = ts_ah_now_s();
        /* fresh device memory: released, created and mapped at va again */
        what = "HtoD into fresh device memory";
        if (env.cu.cuMemUnmap(va, size) != CUDA_SUCCESS || env.cu.cuMemRelease(h) != CUDA_SUCCESS)
            goto out;
        h = 0;
        double t4 = ts_ah_now_s();
        if (create_at(va, size, &h) != CUDA_SUCCESS ||
            env.cu.cuMemcpyHtoD_v2(va, host, size) != CUDA_SUCCESS)
            goto out;
        double t5 = ts_ah_now_s();
        dtoh_fresh[r] = t1 - t0;
        dtoh[r] = t2 - t1;
        htod[r] = t3 - t2;
        htod_fresh[r] = t5 - t4;
    }
    what = "contents";
    if (env.cu.cuMemcpyDtoH_v2(host, va, size) != CUDA_SUCCESS || check_host(host, size) != 0)
        goto out; /* the copies moved the bytes */
    out->dtoh = median(dtoh, rounds);
    out->htod = median(htod, rounds);
    out->dtoh_fresh = median(dtoh_fresh, rounds);
    out->htod_fresh = median(htod_fresh, rounds);
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "bench_suspend: plain copies failed: %s\n", what);
    if (registered)
        env.cu.cuMemHostUnregister(host);
    if (host != MAP_FAILED)
        munmap(host, size);
    if (h != 0) {
        env.cu.cuMemUnmap(va, size);
        env.cu.cuMemRelease(h);
    }
    if (va != 0)
        env.cu.cuMemAddressFree(va, size);
    free(buf);
    ts_swap_env_teardown(&env);
    unsetenv("TESSERA_SIMGPU_DIR");
    return rc;
}

/* ---- the agent's suspend and resume ----------------------------------------- */

struct round {
    double suspend, resume; /* desired state written -> report shows it */
    double agent_resume;    /* the agent's own figure (its "resumed" event), or -1 */
};

static bool data_lost;
static int rounds_done; /* rounds whose figures are in and whose data read back intact */

static void flag(char *buf, size_t len, const char *name, int i)
{
    snprintf(buf, len, "%s/%s%d", ts_ah_root, name, i);
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

/* A file of job 1's folder (new), or NULL. */
static char *job_file(const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/jobs/1-0/%s", ts_ah_data, name);
    return ts_files_read(path, 1 << 20, NULL);
}

/* Seconds from t0 until the report shows job 1 in state (polled every
 * 10 ms), its entry in *entry (new); -1 and a message with the job's events
 * and output when it ended first or after timeout_s. */
static double time_until(const char *state, double t0, double timeout_s, json_t **entry)
{
    char last[32] = "not reported";
    while (ts_ah_now_s() < t0 + timeout_s) {
        json_t *r = ts_ah_report();
        json_t *j = ts_ah_report_job(r, 1, 0);
        const char *s = json_string_value(json_object_get(j, "state"));
        if (s != NULL && strcmp(s, state) == 0) {
            double t = ts_ah_now_s() - t0;
            *entry = json_deep_copy(j);
            json_decref(r);
            return t;
        }
        if (s != NULL)
            snprintf(last, sizeof(last), "%s", s);
        json_decref(r);
        if (strcmp(last, "exited") == 0 || strcmp(last, "failed_to_start") == 0)
            break;
        ts_ah_sleep_s(0.01);
    }
    char *ev = job_file("events.log"), *out = job_file("output.log");
    fprintf(stderr,
            "bench_suspend: the job is %s, not %s, %.1f s after the desired state said so\n"
            "its events:\n%sits output:\n%s",
            last, state, ts_ah_now_s() - t0, ev ? ev : "(none)\n", out ? out : "(none)\n");
    free(ev);
    free(out);
    *entry = NULL;
    return -1;
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; p != NULL && (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

/* The figure of the k-th (from 1) "resumed" event of job 1, or -1. */
static double agent_resume_s(int k)
{
    char *log = job_file("events.log");
    double s = -1;
    int seen = 0;
    for (char *save = NULL, *line = log ? strtok_r(log, "\n", &save) : NULL; line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        json_t *e = json_loads(line, 0, NULL);
        const char *type = json_string_value(json_object_get(e, "type"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        const char *in = msg != NULL ? strstr(msg, " in ") : NULL;
        if (type != NULL && strcmp(type, "resumed") == 0 && ++seen == k && in != NULL)
            s = atof(in + 4);
        json_decref(e);
    }
    free(log);
    return s;
}

/* Job 1's ledger charge on GPU 0, or -1. */
static long long ledger_used(void)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/ledger/gpu0.ledger", ts_ah_data);
    struct ts_ledger *l = ts_ledger_open(path);
    int j = l != NULL ? ts_ledger_find_job(l, ts_ledger_key(1, 0)) : -1;
    long long u = j >= 0 ? (long long)atomic_load(&l->jobs[j].used_bytes) : -1;
    ts_ledger_close(l);
    return u;
}

static void agent_start(size_t size, uint64_t bw)
{
    char exe[PATH_MAX], gpus[64], reserve[32];
    snprintf(exe, sizeof(exe), "%s/tessera-agent", bin_dir);
    uint64_t gpu = size + 4 * GiB > 8 * GiB ? size + 4 * GiB : 8 * GiB;
    if (bw > 0)
        snprintf(gpus, sizeof(gpus), "sim:1x%lluMiB@%llu", (unsigned long long)(gpu / MiB),
                 (unsigned long long)bw);
    else
        snprintf(gpus, sizeof(gpus), "sim:1x%lluMiB", (unsigned long long)(gpu / MiB));
    snprintf(reserve, sizeof(reserve), "%lluMiB", (unsigned long long)((size + GiB) / MiB));
    const char *argv[] = {
        exe,    "--node",         "n1",          "--data-dir",    ts_ah_data, "--gpus",
        gpus,   "--desired-file", ts_ah_desired, "--gpu-reserve", "1GiB",     "--collision",
        "swap", "--swap-reserve", reserve,       "--log-level",   "info",     NULL};
    ts_ah_agent_pid = ts_ah_spawn(argv, ts_ah_agent_log);
}

/* The desired job (buf, len): suspend_job holding size bytes for rounds. */
static char *job(char *buf, size_t len, const char *action, size_t size, int rounds)
{
    snprintf(buf, len,
             "{\"id\": 1, \"attempt\": 0, \"name\": \"held\", \"project\": \"bench\", "
             "\"action\": \"%s\", \"priority\": 0, \"grace_seconds\": 2, "
             "\"gpus\": [{\"index\": 0, \"memory_bytes\": %llu, \"memory_limit_bytes\": %llu}], "
             "\"command\": [\"%s\", \"%s\", \"%llu\", \"%d\"]}",
             action, (unsigned long long)size, (unsigned long long)size, job_exe, ts_ah_root,
             (unsigned long long)(size / MiB), rounds);
    return buf;
}

static void rounds_under_the_agent(size_t size, uint64_t bw, int rounds, struct round *out)
{
    static char d[8192];
    char f[PATH_MAX];
    int gen = 1;
    agent_start(size, bw);
    ts_ah_set_desired("{\"generation\": %d, \"jobs\": [%s]}", gen++,
                      job(d, sizeof(d), "run", size, rounds));
    flag(f, sizeof(f), "ready", 0);
    REQUIRE(wait_file(f, 300)); /* allocated and written */
    json_t *j = ts_ah_wait_job(1, 0, "running", 10);
    pid_t pid = (pid_t)json_integer_value(json_object_get(j, "pid"));
    json_decref(j);
    REQUIRE(pid > 0);
    CHECK(ledger_used() == (long long)size);
    for (int i = 1; i <= rounds; i++) {
        if (i > 1)
            ts_ah_sleep_s(2.5); /* the agent gives the reserve's free pages back every 2 s */
        double t0 = ts_ah_now_s();
        ts_ah_set_desired("{\"generation\": %d, \"jobs\": [%s]}", gen++,
                          job(d, sizeof(d), "suspend", size, rounds));
        out[i - 1].suspend = time_until("suspended", t0, 300, &j);
        REQUIRE(j != NULL);
        CHECK(json_integer_value(json_object_get(j, "swapped_bytes")) == (json_int_t)size);
        json_decref(j);
        struct ts_proc_stat st;
        CHECK(ts_proc_stat(pid, &st) == 0 && st.state == 'T'); /* stopped */
        CHECK(ledger_used() == 0);                             /* off the GPU */

        t0 = ts_ah_now_s();
        ts_ah_set_desired("{\"generation\": %d, \"jobs\": [%s]}", gen++,
                          job(d, sizeof(d), "run", size, rounds));
        out[i - 1].resume = time_until("running", t0, 300, &j);
        REQUIRE(j != NULL);
        json_decref(j);
        CHECK(ledger_used() == (long long)size); /* back on the GPU */
        out[i - 1].agent_resume = agent_resume_s(i);

        /* the job reads every byte back at its address */
        char g[PATH_MAX];
        flag(g, sizeof(g), "go", i);
        flag(f, sizeof(f), "ready", i);
        ts_files_write_atomic(g, "", 0, 0644);
        bool checked = wait_file(f, 300);
        char *o = job_file("output.log");
        data_lost = count(o, "data lost") > 0;
        if (data_lost || !checked || count(o, "data intact") != i) {
            fprintf(stderr, "bench_suspend: %s after resume %d; the job's output:\n%s\n",
                    data_lost ? "DATA LOST" : "the job did not read its data back", i,
                    o ? o : "(none)");
            ts_ah_failures++;
        }
        free(o);
        REQUIRE(checked && !data_lost);
        rounds_done = i;
        printf("round %d: suspend %.3f s, resume %.3f s (the agent's figure %.2f s), "
               "data intact\n",
               i, out[i - 1].suspend, out[i - 1].resume, out[i - 1].agent_resume);
        fflush(stdout);
    }
    j = ts_ah_wait_job(1, 0, "exited", 120);
    CHECK(j != NULL && json_integer_value(json_object_get(j, "exit_code")) == 0);
    json_decref(j);
}

/* Stop the agent, remove its reserve file, kill whatever the job left and
 * remove the folder. */
static void teardown(void)
{
    ts_ah_show_agent_log();
    ts_ah_end_agent();
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/ledger/gpu0.ledger", ts_ah_data);
    struct ts_ledger *l = ts_ledger_open(path);
    if (l != NULL && l->h.swap_path[0] != '\0')
        unlink(l->h.swap_path);
    ts_ledger_close(l);
    ts_ah_end_jobs(true);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    size_t size = (size_t)(argc > 2 ? strtoull(argv[2], NULL, 10) : 4096) * MiB;
    uint64_t bw = argc > 3 ? strtoull(argv[3], NULL, 10) : 0;
    bin_dir = getenv("TS_BIN_DIR");
    job_exe = getenv("TS_SUSPEND_JOB");
    if (rounds < 1 || rounds > ROUNDS_MAX || size < 64 * MiB || size % (2 * MiB) != 0 ||
        bin_dir == NULL || job_exe == NULL) {
        fprintf(stderr,
                "usage: bench_suspend [ROUNDS (1..%d) [SIZE_MIB (a multiple of 2, at least 64) "
                "[BANDWIDTH]]], with TS_BIN_DIR and TS_SUSPEND_JOB set and simgpu's "
                "libcuda.so.1 on LD_LIBRARY_PATH\n",
                ROUNDS_MAX);
        return 2;
    }
    char bws[32] = "unthrottled";
    if (bw > 0)
        snprintf(bws, sizeof(bws), "%.1f GB/s", (double)bw / 1e9);
    printf("bench_suspend: a %.2f GiB job on simgpu (%s), %d rounds, %ld CPUs\n", gib(size), bws,
           rounds, sysconf(_SC_NPROCESSORS_ONLN));
    fflush(stdout);

    struct plain p;
    if (plain_copies(size, bw, rounds, &p) != 0)
        return 1;
    printf("plain copies of %.2f GiB, host memory in /dev/shm registered as pinned (median of "
           "%d): DtoH %.3f s, HtoD %.3f s; into fresh pages: DtoH %.3f s, HtoD %.3f s\n",
           gib(size), rounds, p.dtoh, p.htod, p.dtoh_fresh, p.htod_fresh);
    fflush(stdout);

    struct round r[ROUNDS_MAX];
    ts_ah_setup("bench-suspend");
    rounds_under_the_agent(size, bw, rounds, r);
    teardown();

    /* the figures of the rounds done, also when a later one failed */
    int n = rounds_done;
    const char *partial = n < rounds ? " [the rounds done only]" : "";
    double sus[ROUNDS_MAX], res[ROUNDS_MAX];
    for (int i = 0; i < n; i++) {
        sus[i] = r[i].suspend;
        res[i] = r[i].resume;
    }
    if (n > 0) {
        double ms = median(sus, n), mr = median(res, n);
        printf("suspend %.2f GiB: %.2f s (plain DtoH copy %.2f s, ratio %.2f; into fresh pages "
               "%.2f s, ratio %.2f)%s\n",
               gib(size), ms, p.dtoh, ms / p.dtoh, p.dtoh_fresh, ms / p.dtoh_fresh, partial);
        printf("resume %.2f GiB: %.2f s (plain HtoD copy %.2f s, ratio %.2f; into fresh device "
               "memory %.2f s, ratio %.2f)%s\n",
               gib(size), mr, p.htod, mr / p.htod, p.htod_fresh, mr / p.htod_fresh, partial);
        printf("data intact after every resume (%d reads of %.2f GiB at the same address)\n", n,
               gib(size));
    }
    if (ts_ah_failures) {
        fprintf(stderr, "bench_suspend: FAILED after %d of %d rounds%s\n", n, rounds,
                data_lost ? ": DATA LOST" : "");
        return 1;
    }
    return 0;
}
