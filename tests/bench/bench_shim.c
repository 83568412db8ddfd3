/*
 * bench_shim.c - what libtessera-cuda.so adds, on simgpu, against the same
 * work without it (the ratio is what counts: simgpu's calls are cheaper
 * than a real driver's, so the shim's share is overstated if anything):
 *
 *   launch   ns per cuLaunchKernel in a launch-heavy loop (goal: within 2 %)
 *   alloc    ns per cuMemAlloc_v2 + cuMemFree_v2 of 1 MiB, one process
 *   alloc8   the same with 8 processes of one job allocating at once
 *            (goal: within 2x)
 *   init128  time from a common start to the first allocation done, for
 *            128 processes starting together: p50, p99, max (goal: p99 < 1 s)
 *
 * Each figure comes from ROUNDS runs alternating with and without the
 * shim: the best round (the machine is shared) and the median. The workers are this program
 * (--worker); the GPUs, ledger and processes come from tests/shim/harness.c.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/abi/cuda.h"
#include "tests/shim/harness.h"

#define ROUNDS 9
#define MANY 128

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the worker: a job that dlopens libcuda.so.1 ---- */

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry tessera_bench()\n{\n\tret;\n}\n";

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);

static uint64_t time_launches(launch_fn fn, CUfunction f, long n)
{
    uint64_t t0 = now_ns();
    for (long i = 0; i < n; i++)
        fn(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    return (now_ns() - t0) / (uint64_t)n;
}

/* In one process, blocks of launches through the hook and through the
 * driver's own function (found with libc's dlsym, as the shim finds it),
 * interleaved; the best block of each. Load on the machine hits both. */
static int launch_ab(void *lib, launch_fn hook, CUresult (*load)(CUmodule *, const void *),
                     CUresult (*get)(CUfunction *, CUmodule, const char *), long n)
{
    void *(*libc_dlsym)(void *, const char *) =
        (void *(*)(void *, const char *))dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34");
    if (libc_dlsym == NULL)
        libc_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.2.5");
    launch_fn real = libc_dlsym ? (launch_fn)libc_dlsym(lib, "cuLaunchKernel") : NULL;
    CUmodule m;
    CUfunction f;
    if (real == NULL || load(&m, ptx) != CUDA_SUCCESS ||
        get(&f, m, "tessera_bench") != CUDA_SUCCESS)
        return 1;
    uint64_t best_hook = UINT64_MAX, best_real = UINT64_MAX;
    long block = n / 40 > 1000 ? n / 40 : 1000;
    for (int r = 0; r < 40; r++) {
        uint64_t a = time_launches(hook, f, block), b = time_launches(real, f, block);
        best_hook = a < best_hook ? a : best_hook;
        best_real = b < best_real ? b : best_real;
    }
    printf("ns=%llu real=%llu\n", (unsigned long long)best_hook, (unsigned long long)best_real);
    return 0;
}

static int worker(const char *mode, long n)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == NULL)
        return 1;
#define F(name) __typeof__(&name) f_##name = (__typeof__(&name))dlsym(lib, #name)
    F(cuInit);
    F(cuDeviceGet);
    F(cuDevicePrimaryCtxRetain);
    F(cuCtxSetCurrent);
    F(cuMemAlloc_v2);
    F(cuMemFree_v2);
    F(cuModuleLoadData);
    F(cuModuleGetFunction);
    F(cuLaunchKernel);
    F(cuStreamSynchronize);
#undef F
    /* init128: wait for the common start on stdin, then time the start-up */
    if (strcmp(mode, "init") == 0) {
        char c;
        if (read(0, &c, 1) != 1)
            return 1;
    }
    uint64_t t0 = now_ns();
    CUdevice d;
    CUcontext ctx;
    CUdeviceptr p;
    if (f_cuInit(0) != CUDA_SUCCESS || f_cuDeviceGet(&d, 0) != CUDA_SUCCESS ||
        f_cuDevicePrimaryCtxRetain(&ctx, d) != CUDA_SUCCESS ||
        f_cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 1;
    if (strcmp(mode, "init") == 0) {
        if (f_cuMemAlloc_v2(&p, 1 << 20) != CUDA_SUCCESS)
            return 1;
        printf("ns=%llu\n", (unsigned long long)(now_ns() - t0));
        f_cuMemFree_v2(p);
        return 0;
    }
    if (strcmp(mode, "launch_ab") == 0)
        return launch_ab(lib, f_cuLaunchKernel, f_cuModuleLoadData, f_cuModuleGetFunction, n);
    if (strcmp(mode, "launch") == 0) {
        CUmodule m;
        CUfunction f;
        if (f_cuModuleLoadData(&m, ptx) != CUDA_SUCCESS ||
            f_cuModuleGetFunction(&f, m, "tessera_bench") != CUDA_SUCCESS)
            return 1;
        for (long i = 0; i < n / 10; i++) /* warm up */
            f_cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        t0 = now_ns();
        for (long i = 0; i < n; i++)
            if (f_cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
                return 1;
        f_cuStreamSynchronize(NULL);
    } else {
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            if (f_cuMemAlloc_v2(&p, 1 << 20) != CUDA_SUCCESS || f_cuMemFree_v2(p) != CUDA_SUCCESS)
                return 1;
        }
    }
    printf("ns=%llu\n", (unsigned long long)((now_ns() - t0) / (uint64_t)n));
    return 0;
}

/* ---- the driver ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static const char *self;

/* Run `procs` workers at once; their ns figures into out (sorted). */
static int run(struct world *w, bool shim, const char *mode, long n, int procs, uint64_t *out)
{
    static struct probe p[MANY];
    char nbuf[32];
    snprintf(nbuf, sizeof(nbuf), "%ld", n);
    for (int i = 0; i < procs; i++)
        probe_start_bin(&p[i], self, w, 7, !shim, NULL,
                        (const char *const[]){"--worker", mode, nbuf, NULL});
    if (strcmp(mode, "init") == 0) {
        usleep(500000); /* all started and waiting */
        for (int i = 0; i < procs; i++)
            probe_go(&p[i]);
    }
    int bad = 0;
    for (int i = 0; i < procs; i++) {
        char l[128];
        if (!probe_line(&p[i], "ns=", l, sizeof(l), 120000))
            bad++;
        else
            out[i] = strtoull(l + 3, NULL, 10);
        if (probe_end(&p[i], 30000) != 0)
            bad++;
    }
    qsort(out, (size_t)procs, sizeof(out[0]), cmp_u64);
    return bad;
}

static uint64_t median(uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof(v[0]), cmp_u64);
    return v[n / 2];
}

static int compare(struct world *w, const char *what, const char *mode, long n, int procs)
{
    uint64_t with[ROUNDS], without[ROUNDS], fig[MANY];
    for (int r = 0; r < ROUNDS; r++) {
        if (run(w, false, mode, n, procs, fig) != 0)
            return 1;
        without[r] = median(fig, procs);
        if (run(w, true, mode, n, procs, fig) != 0)
            return 1;
        with[r] = median(fig, procs);
    }
    /* the machine is shared: the best round is the cost, the median shows the noise */
    uint64_t a = median(with, ROUNDS), b = median(without, ROUNDS);
    uint64_t am = with[0], bm = without[0];
    printf("%-8s %s: best of %d %llu ns with the shim, %llu without, ratio %.3f (%+.1f %%); "
           "medians %llu / %llu (%+.1f %%)\n",
           what, procs > 1 ? "per op, median process" : "per op", ROUNDS, (unsigned long long)am,
           (unsigned long long)bm, (double)am / (double)bm, 100.0 * ((double)am / (double)bm - 1),
           (unsigned long long)a, (unsigned long long)b, 100.0 * ((double)a / (double)b - 1));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "--worker") == 0)
        return worker(argv[2], atol(argv[3]));
    static char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0)
        return 1;
    self = exe;
    long launches = argc > 1 ? atol(argv[1]) : 200000;
    struct world w;
    world_make(&w, 80 * GiB, 2 * GiB, 5000, false);
    world_job(w.l[0], 7, 64 * GiB, 64 * GiB);
    int bad = 0;
    uint64_t ab[1];
    static struct probe p;
    probe_start_bin(&p, self, &w, 7, false, NULL,
                    (const char *const[]){"--worker", "launch_ab", "400000", NULL});
    char l[128];
    if (!probe_line(&p, "ns=", l, sizeof(l), 300000) || probe_end(&p, 30000) != 0) {
        bad++;
    } else {
        ab[0] = strtoull(l + 3, NULL, 10);
        uint64_t real = field(l, "real");
        printf("launch   in one process, interleaved blocks, best of 40: %llu ns through the "
               "hook, %llu ns calling the driver directly, ratio %.3f (%+.1f %%)\n",
               (unsigned long long)ab[0], (unsigned long long)real, (double)ab[0] / (double)real,
               100.0 * ((double)ab[0] / (double)real - 1));
    }
    bad += compare(&w, "launch", "launch", launches, 1);
    bad += compare(&w, "alloc", "alloc", launches / 20, 1);
    bad += compare(&w, "alloc8", "alloc", launches / 20, 8);
    uint64_t fig[MANY];
    for (int shim = 1; shim >= 0 && bad == 0; shim--) {
        if (run(&w, shim, "init", 1, MANY, fig) != 0) {
            bad++;
            break;
        }
        printf("init128  %s: p50 %.1f ms, p99 %.1f ms, max %.1f ms (cuInit to the first "
               "allocation, %d processes started together)\n",
               shim ? "with the shim" : "without     ", fig[MANY / 2] / 1e6,
               fig[MANY * 99 / 100] / 1e6, fig[MANY - 1] / 1e6, MANY);
    }
    world_free(&w);
    if (bad)
        fprintf(stderr, "bench_shim: %d runs failed\n", bad);
    return bad ? 1 : 0;
}
