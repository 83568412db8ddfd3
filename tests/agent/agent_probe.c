/*
 * agent_probe.c - a job for the agent's tests: it prints what a job sees.
 *
 *   agent_probe env          working folder, session and group, environment
 *   agent_probe cuda         which libcuda.so.1 and libnvidia-ml.so.1 dlopen
 *                            finds, and how many devices they show
 *   agent_probe busy MIB SHARE SECONDS
 *                            hold MIB of device memory on CUDA device 0 and
 *                            keep it busy SHARE of the time (kernels of
 *                            SHARE x 100 ms every 100 ms) for SECONDS
 *   agent_probe ignore-term N  ignore SIGTERM (and so do N children in its
 *                            process group); print their pids; wait forever
 *   agent_probe alloc LIB MIB  dlopen LIB (a name or a path) and allocate MIB
 *   agent_probe alloc-after FIRST LIB MIB  dlopen FIRST, then as alloc
 *                            of device memory on device 0 in 64 MiB pieces;
 *                            print "allocated N MiB" (how far it got)
 */
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/abi/cuda.h"
#include "agent/abi/nvml.h"
#include "agent/ledger/hostpid.h"

extern char **environ;

static int env(void)
{
    char cwd[PATH_MAX];
    printf("cwd=%s\n", getcwd(cwd, sizeof(cwd)) ? cwd : "?");
    printf("session_leader=%d\n", getsid(0) == getpid());
    printf("group_leader=%d\n", getpgrp() == getpid());
    for (char **e = environ; *e != NULL; e++)
        printf("env %s\n", *e);
    return 0;
}

static const char *path_of(void *sym)
{
    Dl_info info;
    return sym != NULL && dladdr(sym, &info) != 0 && info.dli_fname ? info.dli_fname : "?";
}

static int cuda(void)
{
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cu == NULL || nv == NULL) {
        printf("dlopen failed: %s\n", dlerror());
        return 1;
    }
    __typeof__(cuInit) *init = (__typeof__(cuInit) *)dlsym(cu, "cuInit");
    __typeof__(cuDeviceGetCount) *count =
        (__typeof__(cuDeviceGetCount) *)dlsym(cu, "cuDeviceGetCount");
    __typeof__(nvmlInit_v2) *ninit = (__typeof__(nvmlInit_v2) *)dlsym(nv, "nvmlInit_v2");
    __typeof__(nvmlDeviceGetCount_v2) *ncount =
        (__typeof__(nvmlDeviceGetCount_v2) *)dlsym(nv, "nvmlDeviceGetCount_v2");
    printf("libcuda=%s\n", path_of((void *)init));
    printf("libnvidia-ml=%s\n", path_of((void *)ninit));
    int n = -1;
    unsigned nn = 0;
    if (init == NULL || count == NULL || init(0) != CUDA_SUCCESS || count(&n) != CUDA_SUCCESS)
        n = -1;
    printf("cuda_devices=%d\n", n);
    if (ninit == NULL || ncount == NULL || ninit() != NVML_SUCCESS || ncount(&nn) != NVML_SUCCESS)
        nn = 0;
    printf("nvml_devices=%u\n", nn);
    return 0;
}

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry tessera_busy_ns(\n\t.param .u64 ns\n)\n{\n\tret;\n}\n";

#define LOOK(h, name) ((__typeof__(name) *)dlsym(h, #name))

static int busy(size_t mib, double share, double seconds)
{
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cu == NULL) {
        printf("dlopen failed: %s\n", dlerror());
        return 1;
    }
    CUcontext ctx;
    CUdevice dev;
    CUdeviceptr p;
    CUmodule m;
    CUfunction f;
    if (LOOK(cu, cuInit)(0) != CUDA_SUCCESS || LOOK(cu, cuDeviceGet)(&dev, 0) != CUDA_SUCCESS ||
        LOOK(cu, cuDevicePrimaryCtxRetain)(&ctx, dev) != CUDA_SUCCESS ||
        LOOK(cu, cuCtxSetCurrent)(ctx) != CUDA_SUCCESS ||
        LOOK(cu, cuMemAlloc_v2)(&p, mib << 20) != CUDA_SUCCESS ||
        LOOK(cu, cuModuleLoadData)(&m, ptx) != CUDA_SUCCESS ||
        LOOK(cu, cuModuleGetFunction)(&f, m, "tessera_busy_ns") != CUDA_SUCCESS) {
        printf("cuda setup failed\n");
        return 1;
    }
    printf("busy on a GPU with %zu MiB\n", mib);
    unsigned long long ns = (unsigned long long)(share * 100e6);
    void *params[] = {&ns};
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long k = 1;; k++) {
        if (ns > 0 &&
            LOOK(cu, cuLaunchKernel)(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != CUDA_SUCCESS) {
            printf("launch failed\n");
            return 1;
        }
        LOOK(cu, cuCtxSynchronize)();
        /* the next launch 100 ms after the previous one */
        struct timespec next = {t0.tv_sec + (k / 10), t0.tv_nsec + (k % 10) * 100000000L};
        if (next.tv_nsec >= 1000000000L) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000L;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 >= seconds)
            break;
    }
    printf("done\n");
    return 0;
}

static _Noreturn void ignore_term(int children)
{
    signal(SIGTERM, SIG_IGN);
    /* pids as the host sees them: a sandboxed job has a PID namespace */
    printf("pid %d\n", (int)ts_hostpid());
    for (int i = 0; i < children; i++) {
        int p[2];
        if (pipe(p) != 0)
            exit(1);
        pid_t pid = fork();
        if (pid == 0) {
            pid_t host = ts_hostpid();
            if (write(p[1], &host, sizeof(host)) != (ssize_t)sizeof(host))
                _exit(1);
            for (;;)
                pause();
        }
        pid_t host = 0;
        if (read(p[0], &host, sizeof(host)) != (ssize_t)sizeof(host))
            exit(1);
        close(p[0]);
        close(p[1]);
        printf("pid %d\n", (int)host);
    }
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}

static int alloc(const char *lib, long mib)
{
    void *cu = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    CUcontext ctx;
    CUdevice dev;
    if (cu == NULL || LOOK(cu, cuInit)(0) != CUDA_SUCCESS ||
        LOOK(cu, cuDeviceGet)(&dev, 0) != CUDA_SUCCESS ||
        LOOK(cu, cuDevicePrimaryCtxRetain)(&ctx, dev) != CUDA_SUCCESS ||
        LOOK(cu, cuCtxSetCurrent)(ctx) != CUDA_SUCCESS) {
        printf("cuda setup failed: %s\n", cu == NULL ? dlerror() : "a driver call failed");
        return 1;
    }
    printf("libcuda=%s\n", path_of((void *)LOOK(cu, cuInit)));
    long done = 0;
    while (done < mib) {
        CUdeviceptr p;
        if (LOOK(cu, cuMemAlloc_v2)(&p, 64ul << 20) != CUDA_SUCCESS)
            break;
        done += 64;
    }
    printf("allocated %ld MiB\n", done);
    return done >= mib ? 0 : 3;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2 && strcmp(argv[1], "env") == 0)
        return env();
    if (argc >= 2 && strcmp(argv[1], "cuda") == 0)
        return cuda();
    if (argc >= 5 && strcmp(argv[1], "busy") == 0)
        return busy((size_t)atol(argv[2]), atof(argv[3]), atof(argv[4]));
    if (argc >= 3 && strcmp(argv[1], "ignore-term") == 0)
        ignore_term(atoi(argv[2]));
    if (argc >= 4 && strcmp(argv[1], "alloc") == 0)
        return alloc(argv[2], atol(argv[3]));
    if (argc >= 5 && strcmp(argv[1], "alloc-after") == 0) {
        /* a program that loads the driver by its file first (a library
         * such as NVML or CuPy may), then by name (the CUDA runtime) */
        if (dlopen(argv[2], RTLD_NOW | RTLD_LOCAL) == NULL) {
            printf("dlopen %s failed: %s\n", argv[2], dlerror());
            return 1;
        }
        return alloc(argv[3], atol(argv[4]));
    }
    fprintf(stderr,
            "usage: agent_probe env|cuda|busy MIB SHARE SECONDS|ignore-term N|alloc LIB MIB|"
            "alloc-after FIRST LIB MIB\n");
    return 2;
}
