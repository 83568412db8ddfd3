/*
 * move_probe.c - the job of the move tests (move_test.c): dlopens
 * libcuda.so.1 as a framework does and keeps device memory, a module and
 * its kernel, a stream and an event, which a move must carry to another
 * GPU. One line on stdout per step:
 *
 *   init            devices=N dev=D (cuDeviceGetCount, cuCtxGetDevice)
 *   setup:B         B bytes of device memory holding a pattern, the add_u32
 *                   kernel of simgpu (p[0..n) += v), a stream, an event
 *   work            the kernel over all of it (+1), an event recorded on the
 *                   stream and synchronized, the bytes read back: bad=
 *                   words that are not pattern + the adds so far
 *   spin:MS         for MS ms: the kernel over the first 4 KiB (+1), then
 *                   cuStreamSynchronize, as fast as it goes; launches=,
 *                   fails=, max_gap_us= (the longest time between two
 *                   launches returning: the pause a move costs the job)
 *   managed:MB      MB of managed memory (which the swap engine does not hold)
 *   wait            "waiting", then a line on stdin
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/abi/cuda.h"

static void *lib;
#define CU(name) ((__typeof__(name) *)dlsym(lib, #name))

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry tessera_add_u32(\n"
                          ".param .u64 p, .param .u32 n, .param .u32 v)\n{\nret;\n}\n";

static CUdeviceptr mem;
static size_t words;
static uint32_t *host;
static uint32_t adds, head_adds; /* all words; the first 1024 words */
static CUfunction fn;
static CUstream stream;
static CUevent event;

static uint64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static uint32_t pattern(size_t i)
{
    return (uint32_t)(i * 2654435761u + 17u);
}

static CUresult add(unsigned int n)
{
    unsigned int v = 1;
    void *params[] = {&mem, &n, &v};
    return CU(cuLaunchKernel)(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, NULL);
}

static void step(const char *s)
{
    CUresult rc = CUDA_SUCCESS;
    if (strcmp(s, "init") == 0) {
        int n = 0;
        CUdevice d = -1;
        CUcontext ctx = NULL;
        rc = CU(cuInit)(0);
        if (rc == CUDA_SUCCESS)
            rc = CU(cuDeviceGetCount)(&n);
        if (rc == CUDA_SUCCESS)
            rc = CU(cuDeviceGet)(&d, 0);
        if (rc == CUDA_SUCCESS)
            rc = CU(cuDevicePrimaryCtxRetain)(&ctx, d);
        if (rc == CUDA_SUCCESS)
            rc = CU(cuCtxSetCurrent)(ctx);
        CUdevice cd = -1;
        if (rc == CUDA_SUCCESS)
            rc = CU(cuCtxGetDevice)(&cd);
        printf("init rc=%d devices=%d dev=%d\n", rc, n, (int)cd);
    } else if (strncmp(s, "setup:", 6) == 0) {
        size_t bytes = strtoull(s + 6, NULL, 10) << 20;
        words = bytes / 4;
        host = malloc(bytes);
        for (size_t i = 0; host && i < words; i++)
            host[i] = pattern(i);
        CUmodule m = NULL;
        rc = host ? CU(cuMemAlloc_v2)(&mem, bytes) : CUDA_ERROR_OUT_OF_MEMORY;
        if (rc == CUDA_SUCCESS)
            rc = CU(cuMemcpyHtoD_v2)(mem, host, bytes);
        if (rc == CUDA_SUCCESS)
            rc = CU(cuModuleLoadData)(&m, ptx);
        if (rc == CUDA_SUCCESS)
            rc = CU(cuModuleGetFunction)(&fn, m, "tessera_add_u32");
        if (rc == CUDA_SUCCESS)
            rc = CU(cuStreamCreate)(&stream, CU_STREAM_NON_BLOCKING);
        if (rc == CUDA_SUCCESS)
            rc = CU(cuEventCreate)(&event, 0);
        printf("setup rc=%d ptr=%llu\n", rc, (unsigned long long)mem);
    } else if (strcmp(s, "work") == 0) {
        rc = add((unsigned int)words);
        if (rc == CUDA_SUCCESS) {
            adds++;
            rc = CU(cuEventRecord)(event, stream);
        }
        if (rc == CUDA_SUCCESS)
            rc = CU(cuEventSynchronize)(event);
        if (rc == CUDA_SUCCESS)
            rc = CU(cuMemcpyDtoH_v2)(host, mem, words * 4);
        size_t bad = 0;
        for (size_t i = 0; rc == CUDA_SUCCESS && i < words; i++)
            bad += host[i] != pattern(i) + adds + (i < 1024 ? head_adds : 0);
        CUdevice cd = -1;
        CU(cuCtxGetDevice)(&cd);
        printf("work rc=%d bad=%zu ptr=%llu dev=%d\n", rc, bad, (unsigned long long)mem, (int)cd);
    } else if (strncmp(s, "spin:", 5) == 0) {
        uint64_t until = now_us() + strtoull(s + 5, NULL, 10) * 1000u, last = now_us(), gap = 0;
        unsigned launches = 0, fails = 0;
        while (now_us() < until) {
            CUresult r = add(1024);
            if (r == CUDA_SUCCESS)
                r = CU(cuStreamSynchronize)(stream);
            uint64_t t = now_us();
            if (r == CUDA_SUCCESS) {
                launches++;
                head_adds++;
            } else {
                fails++;
                rc = r;
            }
            gap = t - last > gap ? t - last : gap;
            last = t;
        }
        printf("spin rc=%d launches=%u fails=%u max_gap_us=%llu\n", rc, launches, fails,
               (unsigned long long)gap);
    } else if (strncmp(s, "managed:", 8) == 0) {
        CUdeviceptr p = 0;
        rc = CU(cuMemAllocManaged)(&p, strtoull(s + 8, NULL, 10) << 20, CU_MEM_ATTACH_GLOBAL);
        printf("managed rc=%d\n", rc);
    } else if (strcmp(s, "wait") == 0) {
        printf("waiting\n");
        fflush(stdout);
        char line[64];
        if (!fgets(line, sizeof line, stdin))
            exit(3);
        return;
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        printf("no libcuda.so.1\n");
        return 2;
    }
    for (int i = 1; i < argc; i++)
        step(argv[i]);
    return 0;
}
