/*
 * suspend_job.c - the job bench_suspend runs under the agent and the real
 * libtessera-cuda.so. It does what tests/agent/cuda_job.c does (dlopens
 * libcuda.so.1 as a framework does, so the preloaded shim interposes it;
 * one cuMemAlloc_v2; every byte written with a pattern; later read back at
 * the same address and compared), but its waits between rounds are long:
 * cuda_job's "await" gives up after 30 s, and one suspend and resume of
 * 4 GiB on simgpu can take longer than that on a small machine.
 *
 * Usage: suspend_job DIR MiB ROUNDS
 *   allocates MiB on CUDA ordinal 0 and writes every byte, then creates
 *   DIR/ready0; for each round i from 1: waits (no GPU call; at most
 *   30 min) for DIR/go<i>, reads every byte back and compares, prints
 *   "data intact N bytes" (or "data lost", exit 3), creates DIR/ready<i>.
 *   Then frees and exits 0. Exit 4: an allocation or a copy failed;
 *   2: a usage error, no driver, or a wait that ran out.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/abi/cuda.h"

#define MiB ((size_t)1 << 20)
#define CHUNK (64 * MiB)
#define WAIT_S 1800

static struct {
    CUresult (*init)(unsigned);
    CUresult (*devget)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*setcur)(CUcontext);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
} cu;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The pattern at byte offset off (a multiple of 8), len bytes. */
static void pattern(size_t off, unsigned char *out, size_t len)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t x = (uint64_t)(off + i) * 0x9e3779b97f4a7c15ull;
        x ^= x >> 29;
        x *= 0xbf58476d1ce4e5b9ull;
        memcpy(out + i, &x, 8);
    }
}

static int load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h == NULL) {
        printf("no driver: %s\n", dlerror());
        return -1;
    }
    *(void **)&cu.init = dlsym(h, "cuInit");
    *(void **)&cu.devget = dlsym(h, "cuDeviceGet");
    *(void **)&cu.retain = dlsym(h, "cuDevicePrimaryCtxRetain");
    *(void **)&cu.setcur = dlsym(h, "cuCtxSetCurrent");
    *(void **)&cu.alloc = dlsym(h, "cuMemAlloc_v2");
    *(void **)&cu.free = dlsym(h, "cuMemFree_v2");
    *(void **)&cu.htod = dlsym(h, "cuMemcpyHtoD_v2");
    *(void **)&cu.dtoh = dlsym(h, "cuMemcpyDtoH_v2");
    if (!cu.init || !cu.devget || !cu.retain || !cu.setcur || !cu.alloc || !cu.free || !cu.htod ||
        !cu.dtoh) {
        printf("the driver lacks a function\n");
        return -1;
    }
    CUdevice d;
    CUcontext c;
    CUresult rc = cu.init(0);
    if (rc == CUDA_SUCCESS)
        rc = cu.devget(&d, 0);
    if (rc == CUDA_SUCCESS)
        rc = cu.retain(&c, d);
    if (rc == CUDA_SUCCESS)
        rc = cu.setcur(c);
    if (rc != CUDA_SUCCESS)
        printf("could not open device 0: %d\n", (int)rc);
    return rc == CUDA_SUCCESS ? 0 : -1;
}

static void mark(const char *dir, const char *name, int i)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s%d", dir, name, i);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
}

static int await(const char *dir, int i)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/go%d", dir, i);
    double until = now_s() + WAIT_S;
    while (access(path, F_OK) != 0 && now_s() < until) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (access(path, F_OK) == 0)
        return 0;
    printf("no %s after %d s\n", path, WAIT_S);
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: suspend_job DIR MiB ROUNDS\n");
        return 2;
    }
    const char *dir = argv[1];
    size_t len = (size_t)strtoull(argv[2], NULL, 10) * MiB;
    int rounds = atoi(argv[3]);
    unsigned char *host = malloc(CHUNK), *back = malloc(CHUNK);
    setvbuf(stdout, NULL, _IOLBF, 0);
    int status = 2;
    if (host == NULL || back == NULL || len == 0 || load() != 0)
        goto out;
    CUdeviceptr p = 0;
    CUresult rc = cu.alloc(&p, len);
    if (rc != CUDA_SUCCESS) {
        printf("alloc failed mib=%zu err=%d\n", len / MiB, (int)rc);
        status = 4;
        goto out;
    }
    for (size_t off = 0; off < len; off += CHUNK) {
        size_t n = len - off < CHUNK ? len - off : CHUNK;
        pattern(off, host, n);
        if ((rc = cu.htod(p + off, host, n)) != CUDA_SUCCESS) {
            printf("write failed at +%zu err=%d\n", off, (int)rc);
            status = 4;
            goto out;
        }
    }
    printf("alloc ok mib=%zu addr=0x%llx pid=%d\n", len / MiB, (unsigned long long)p,
           (int)getpid());
    mark(dir, "ready", 0);
    for (int i = 1; i <= rounds; i++) {
        if (await(dir, i) != 0)
            goto out; /* status 2 */
        for (size_t off = 0; off < len; off += CHUNK) {
            size_t n = len - off < CHUNK ? len - off : CHUNK;
            if ((rc = cu.dtoh(back, p + off, n)) != CUDA_SUCCESS) {
                printf("read failed at +%zu err=%d\n", off, (int)rc);
                status = 4;
                goto out;
            }
            pattern(off, host, n);
            if (memcmp(back, host, n) != 0) {
                printf("round %d: data lost at +%zu (addr 0x%llx)\n", i, off,
                       (unsigned long long)p);
                status = 3;
                goto out;
            }
        }
        printf("round %d: data intact %zu bytes at addr 0x%llx\n", i, len, (unsigned long long)p);
        mark(dir, "ready", i);
    }
    if ((rc = cu.free(p)) != CUDA_SUCCESS) {
        printf("free failed err=%d\n", (int)rc);
        status = 4;
        goto out;
    }
    printf("freed %zu bytes\n", len);
    status = 0;
out:
    free(host);
    free(back);
    return status;
}
