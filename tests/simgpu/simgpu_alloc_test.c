/*
 * simgpu_alloc_test.c - the allocation paths the CUDA interposer must
 * charge, as a job sees them through simgpu's libcuda.so.1 (loaded with
 * dlopen through LD_LIBRARY_PATH): pitched, managed and stream-ordered
 * memory, pools, arrays, address ranges, unified copies and stream capture.
 * Each case checks the GPU's used figure in the state file (what NVML and
 * tessera-simgpu report) and this process's own figure there.
 *
 * Usage: simgpu_alloc_test CASE.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/abi/cuda.h"
#include "agent/abi/nvml.h"
#include "agent/simgpu/state.h"
#include "api/array.h"
#include "tests/simgpu/harness.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)
#define PAGE 4096ull

static void *cu_lib, *nvml_lib;
static struct ts_simgpu_dev gpu0;

/* Entry points of libcuda.so.1 and libnvidia-ml.so.1, looked up as a job
 * would. */
#define CU(name) ((__typeof__(name) *)sg_sym(cu_lib, #name))
#define NVML(name) ((__typeof__(name) *)sg_sym(nvml_lib, #name))

/* Fresh GPUs in a temporary folder, the libraries loaded, the primary
 * context of device 0 current. */
static CUcontext setup(unsigned count, uint64_t bytes)
{
    sg_make_gpus("alloc", count, bytes, 0);
    if (ts_simgpu_open(sg_dir, 0, &gpu0) < 0) {
        fprintf(stderr, "could not open GPU 0 in %s\n", sg_dir);
        exit(1);
    }
    cu_lib = sg_load("libcuda.so.1");
    nvml_lib = sg_load("libnvidia-ml.so.1");
    OK(CU(cuInit)(0));
    CUcontext ctx = NULL;
    OK(CU(cuDevicePrimaryCtxRetain)(&ctx, 0));
    OK(CU(cuCtxSetCurrent)(ctx));
    return ctx;
}

/* GPU 0's used bytes, as cuMemGetInfo_v2 reports them (total - free). */
static uint64_t gpu_used(void)
{
    size_t fr = 0, total = 0;
    OK(CU(cuMemGetInfo_v2)(&fr, &total));
    return total - fr;
}

/* This process's used bytes on GPU 0, from the state file, and NVML's
 * figure for it (the same, or the test fails). */
static uint64_t my_used(void)
{
    ts_simgpu_lock(&gpu0);
    struct ts_simgpu_proc *me = ts_simgpu_self(&gpu0, 0);
    uint64_t used = me ? me->used_bytes : 0;
    ts_simgpu_unlock(&gpu0);
    nvmlDevice_t dev;
    nvmlProcessInfo_t procs[8];
    unsigned n = 8;
    OK(NVML(nvmlInit_v2)());
    OK(NVML(nvmlDeviceGetHandleByIndex_v2)(0, &dev));
    OK(NVML(nvmlDeviceGetComputeRunningProcesses_v3)(dev, &n, procs));
    bool seen = false;
    for (unsigned i = 0; i < n; i++)
        if (procs[i].pid == (unsigned)getpid()) {
            CHECK_EQ(procs[i].usedGpuMemory, used);
            seen = true;
        }
    CHECK(seen);
    OK(NVML(nvmlShutdown)());
    return used;
}

static void fill(unsigned char *buf, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        buf[i] = (unsigned char)(x >> 24);
    }
}

static uint64_t pool_attr(CUmemoryPool p, CUmemPool_attribute a)
{
    cuuint64_t v = ~0ull;
    OK(CU(cuMemPoolGetAttribute)(p, a, &v));
    return v;
}

/* ---- cases ---- */

static void pitched_and_managed_memory_are_charged_and_freed_exactly(void)
{
    setup(1, 1 * GiB);
    CHECK_EQ(gpu_used(), 0);
    /* 1000 bytes wide: the pitch is 1024 (a multiple of 512); 64 rows. */
    CUdeviceptr p = 0, m = 0, m2 = 0;
    size_t pitch = 0;
    OK(CU(cuMemAllocPitch_v2)(&p, &pitch, 1000, 64, 4));
    CHECK_EQ(pitch, 1024);
    CHECK_EQ(gpu_used(), 1024 * 64);
    CHECK_EQ(my_used(), 1024 * 64);
    /* Width 513 -> pitch 1024; 3 rows = 3072 bytes, charged page-rounded. */
    CUdeviceptr p2 = 0;
    OK(CU(cuMemAllocPitch_v2)(&p2, &pitch, 513, 3, 16));
    CHECK_EQ(pitch, 1024);
    CHECK_EQ(gpu_used(), 1024 * 64 + PAGE);
    OK(CU(cuMemFree_v2)(p2));
    CHECK_RC(CU(cuMemAllocPitch_v2)(&p2, &pitch, 1000, 64, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemAllocPitch_v2)(&p2, &pitch, 0, 64, 4), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemAllocPitch_v2)(&p2, &pitch, 1 * GiB, 2, 4), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(gpu_used(), 1024 * 64);

    /* Rows of a pitched allocation hold what is written, byte for byte. */
    unsigned char row[1000], back[1000];
    fill(row, sizeof row, 1);
    OK(CU(cuMemcpyHtoD_v2)(p + 63 * pitch, row, sizeof row));
    OK(CU(cuMemcpyDtoH_v2)(back, p + 63 * pitch, sizeof back));
    CHECK(memcmp(row, back, sizeof row) == 0);
    CHECK_RC(CU(cuMemcpyHtoD_v2)(p + 64 * pitch - 8, row, 16), CUDA_ERROR_INVALID_VALUE);

    int managed = 0;
    OK(CU(cuDeviceGetAttribute)(&managed, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0));
    CHECK(managed == 1);
    OK(CU(cuMemAllocManaged)(&m, 8 * MiB, CU_MEM_ATTACH_GLOBAL));
    OK(CU(cuMemAllocManaged)(&m2, 5000, CU_MEM_ATTACH_HOST));
    CHECK_EQ(gpu_used(), 1024 * 64 + 8 * MiB + 2 * PAGE);
    CHECK_EQ(my_used(), 1024 * 64 + 8 * MiB + 2 * PAGE);
    CHECK_RC(CU(cuMemAllocManaged)(&m2, 4096, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemAllocManaged)(&m2, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    /* The host reaches managed memory at its address; copies reach it too. */
    unsigned char *hm = (unsigned char *)(uintptr_t)m;
    fill(hm, MiB, 2);
    unsigned char *out = malloc(MiB), *want = malloc(MiB);
    fill(want, MiB, 2);
    OK(CU(cuMemcpyDtoH_v2)(out, m, MiB));
    CHECK(memcmp(out, want, MiB) == 0);
    OK(CU(cuMemcpyDtoD_v2)(m + 4 * MiB, m, MiB));
    CHECK(memcmp(hm + 4 * MiB, want, MiB) == 0);
    free(out);
    free(want);

    OK(CU(cuMemFree_v2)(m));
    OK(CU(cuMemFree_v2)(p));
    CHECK_EQ(gpu_used(), 2 * PAGE);
    OK(CU(cuMemFree_v2)(m2));
    CHECK_EQ(gpu_used(), 0);
    CHECK_EQ(my_used(), 0);
    CHECK_RC(CU(cuMemFree_v2)(m), CUDA_ERROR_INVALID_VALUE);
}

static void arrays_charge_their_size_and_refuse_bad_formats(void)
{
    setup(1, 1 * GiB);
    CUarray a1, a2, a3, bad;
    /* 1D: height 0 counts as 1; 1000 float4 elements = 16000 bytes. */
    CUDA_ARRAY_DESCRIPTOR d1 = {
        .Width = 1000, .Height = 0, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
    OK(CU(cuArrayCreate_v2)(&a1, &d1));
    CHECK_EQ(gpu_used(), 16000);
    /* 2D: 640 x 480 half2 = 1228800 bytes. */
    CUDA_ARRAY_DESCRIPTOR d2 = {
        .Width = 640, .Height = 480, .Format = CU_AD_FORMAT_HALF, .NumChannels = 2};
    OK(CU(cuArrayCreate_v2)(&a2, &d2));
    CHECK_EQ(gpu_used(), 16000 + 1228800);
    /* 3D: 64 x 32 x 10 uchar1 = 20480 bytes; depth 0 would count as 1. */
    CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 64,
                                  .Height = 32,
                                  .Depth = 10,
                                  .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                  .NumChannels = 1};
    OK(CU(cuArray3DCreate_v2)(&a3, &d3));
    CHECK_EQ(gpu_used(), 16000 + 1228800 + 20480);
    CHECK_EQ(my_used(), 16000 + 1228800 + 20480);
    CUarray a4;
    d3.Depth = 0;
    OK(CU(cuArray3DCreate_v2)(&a4, &d3));
    CHECK_EQ(gpu_used(), 16000 + 1228800 + 20480 + 2048);
    OK(CU(cuArrayDestroy)(a4));

    /* Refused: channels other than 1, 2, 4; unknown formats; width 0. */
    CUDA_ARRAY_DESCRIPTOR b = d2;
    b.NumChannels = 3;
    CHECK_RC(CU(cuArrayCreate_v2)(&bad, &b), CUDA_ERROR_INVALID_VALUE);
    b.NumChannels = 0;
    CHECK_RC(CU(cuArrayCreate_v2)(&bad, &b), CUDA_ERROR_INVALID_VALUE);
    b = d2;
    b.Format = (CUarray_format)0x7;
    CHECK_RC(CU(cuArrayCreate_v2)(&bad, &b), CUDA_ERROR_INVALID_VALUE);
    b = d2;
    b.Width = 0;
    CHECK_RC(CU(cuArrayCreate_v2)(&bad, &b), CUDA_ERROR_INVALID_VALUE);
    CUDA_ARRAY3D_DESCRIPTOR b3 = d3;
    b3.Format = (CUarray_format)0x40;
    CHECK_RC(CU(cuArray3DCreate_v2)(&bad, &b3), CUDA_ERROR_INVALID_VALUE);
    /* Larger than the GPU. */
    b3 = (CUDA_ARRAY3D_DESCRIPTOR){
        .Width = 4096, .Height = 4096, .Depth = 64, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
    CHECK_RC(CU(cuArray3DCreate_v2)(&bad, &b3), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(gpu_used(), 16000 + 1228800 + 20480);

    OK(CU(cuArrayDestroy)(a2));
    CHECK_EQ(gpu_used(), 16000 + 20480);
    OK(CU(cuArrayDestroy)(a1));
    OK(CU(cuArrayDestroy)(a3));
    CHECK_EQ(gpu_used(), 0);
    CHECK_EQ(my_used(), 0);
    CHECK_RC(CU(cuArrayDestroy)(a1), CUDA_ERROR_INVALID_HANDLE);
}

static void stream_ordered_allocations_come_from_pools_and_return_at_synchronize(void)
{
    setup(1, 1 * GiB);
    CUstream s;
    OK(CU(cuStreamCreate)(&s, 0));
    CUmemoryPool def = NULL, cur = NULL;
    OK(CU(cuDeviceGetDefaultMemPool)(&def, 0));
    OK(CU(cuDeviceGetMemPool)(&cur, 0));
    CHECK(def != NULL && def == cur);
    CHECK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);

    /* Allocations charge the GPU through the pool. */
    CUdeviceptr a = 0, b = 0;
    OK(CU(cuMemAllocAsync)(&a, 4 * MiB, s));
    OK(CU(cuMemAllocAsync)(&b, 5000, s)); /* page-rounded: 8192 */
    CHECK_EQ(gpu_used(), 4 * MiB + 8192);
    CHECK_EQ(my_used(), 4 * MiB + 8192);
    CHECK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 4 * MiB + 8192);
    CHECK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB + 8192);

    /* Contents survive a round trip; the range ends where asked. */
    unsigned char in[5000], out[5000];
    fill(in, sizeof in, 3);
    OK(CU(cuMemcpyHtoDAsync_v2)(b, in, sizeof in, s));
    OK(CU(cuMemcpyDtoHAsync_v2)(out, b, sizeof out, s));
    OK(CU(cuStreamSynchronize)(s));
    CHECK(memcmp(in, out, sizeof in) == 0);
    CHECK_RC(CU(cuMemcpyHtoD_v2)(b + 4990, in, 20), CUDA_ERROR_INVALID_VALUE);

    /* A free returns the memory to the pool, which keeps it until the next
     * synchronize (release threshold 0), then gives it back to the GPU. */
    OK(CU(cuMemFreeAsync)(a, s));
    CHECK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 8192);
    CHECK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB + 8192);
    CHECK_EQ(gpu_used(), 4 * MiB + 8192);
    CHECK_RC(CU(cuMemcpyHtoD_v2)(a, in, 16), CUDA_ERROR_INVALID_VALUE); /* freed */
    /* Reuse before the synchronize costs the GPU nothing more. */
    OK(CU(cuMemAllocAsync)(&a, 2 * MiB, s));
    CHECK_EQ(gpu_used(), 4 * MiB + 8192);
    OK(CU(cuMemFreeAsync)(a, s));
    OK(CU(cuStreamSynchronize)(s));
    CHECK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 8192);
    CHECK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 4 * MiB + 8192);
    CHECK_EQ(gpu_used(), 8192);
    CHECK_RC(CU(cuMemFreeAsync)(a, s), CUDA_ERROR_INVALID_VALUE); /* twice */

    /* A release threshold keeps up to that much; TrimTo gives it back. */
    cuuint64_t keep = 16 * MiB;
    OK(CU(cuMemPoolSetAttribute)(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    OK(CU(cuMemAllocAsync)(&a, 32 * MiB, s));
    OK(CU(cuMemFreeAsync)(a, s));
    OK(CU(cuStreamSynchronize)(s));
    CHECK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 16 * MiB);
    CHECK_EQ(gpu_used(), 16 * MiB);
    OK(CU(cuMemPoolTrimTo)(def, 1 * MiB));
    CHECK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 1 * MiB);
    CHECK_EQ(gpu_used(), 1 * MiB);
    OK(CU(cuMemPoolTrimTo)(def, 0));
    CHECK_EQ(gpu_used(), 8192); /* what is in use stays */
    cuuint64_t v = 5;
    CHECK_RC(CU(cuMemPoolSetAttribute)(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v),
             CUDA_ERROR_INVALID_VALUE);

    /* A created pool with a maximum size; idle memory of other pools is
     * given back when the GPU is full. */
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                            .maxSize = 64 * MiB};
    CUmemoryPool pool;
    OK(CU(cuMemPoolCreate)(&pool, &props));
    CUdeviceptr c = 0, d = 0;
    OK(CU(cuMemAllocFromPoolAsync)(&c, 48 * MiB, pool, s));
    CHECK_RC(CU(cuMemAllocFromPoolAsync)(&d, 32 * MiB, pool, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 48 * MiB);
    CHECK_EQ(gpu_used(), 48 * MiB + 8192);
    OK(CU(cuMemAllocAsync)(&a, 512 * MiB, s));
    OK(CU(cuMemFreeAsync)(a, s)); /* 512 MiB idle in the default pool (threshold 16 MiB) */
    OK(CU(cuMemAllocFromPoolAsync)(&d, 16 * MiB, pool, s));
    CUdeviceptr big = 0;
    OK(CU(cuMemAlloc_v2)(&big, 1 * GiB - 64 * MiB - 8192)); /* only fits once idle is gone */
    CHECK_EQ(gpu_used(), 1 * GiB);
    OK(CU(cuMemFree_v2)(big));
    /* Destroying a pool with allocations out: they stay valid, and their
     * memory goes back when they are freed. */
    OK(CU(cuMemPoolDestroy)(pool));
    CHECK_RC(CU(cuMemPoolDestroy)(pool), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemPoolDestroy)(def), CUDA_ERROR_INVALID_VALUE);
    OK(CU(cuMemcpyHtoD_v2)(c, in, sizeof in));
    OK(CU(cuMemFreeAsync)(c, s));
    OK(CU(cuMemFree_v2)(d)); /* cuMemFree frees stream-ordered memory too */
    keep = 0;
    OK(CU(cuMemPoolSetAttribute)(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    OK(CU(cuMemFreeAsync)(b, s));
    OK(CU(cuCtxSynchronize)());
    CHECK_EQ(gpu_used(), 0);
    CHECK_EQ(my_used(), 0);
    CUdeviceptr plain;
    OK(CU(cuMemAlloc_v2)(&plain, MiB));
    CHECK_RC(CU(cuMemFreeAsync)(plain, s), CUDA_ERROR_INVALID_VALUE); /* not stream-ordered */
    OK(CU(cuMemFree_v2)(plain));
    OK(CU(cuStreamDestroy_v2)(s));
}

static void *end_capture_elsewhere(void *arg)
{
    CUstream s = arg;
    CUgraph g = NULL;
    return (void *)(intptr_t)CU(cuStreamEndCapture)(s, &g);
}

static void stream_capture_is_reported_and_refuses_synchronize(void)
{
    CUcontext ctx = setup(1, 1 * GiB);
    CUstream s;
    OK(CU(cuStreamCreate)(&s, 0));
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    OK(CU(cuStreamIsCapturing)(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
    OK(CU(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(CU(cuStreamIsCapturing)(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK_RC(CU(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_GLOBAL),
             CUDA_ERROR_ILLEGAL_STATE);
    OK(CU(cuStreamIsCapturing)(NULL, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);

    /* Stream-ordered allocation works during capture and is charged. */
    CUdeviceptr a = 0;
    OK(CU(cuMemAllocAsync)(&a, 2 * MiB, s));
    CHECK_EQ(gpu_used(), 2 * MiB);
    OK(CU(cuMemFreeAsync)(a, s));

    /* Not from another thread in GLOBAL mode. */
    pthread_t th;
    void *rc = NULL;
    pthread_create(&th, NULL, end_capture_elsewhere, s);
    pthread_join(th, &rc);
    CHECK_RC((intptr_t)rc, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);

    CUgraph g = NULL;
    OK(CU(cuStreamEndCapture)(s, &g));
    CHECK(g != NULL);
    OK(CU(cuStreamIsCapturing)(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
    OK(CU(cuGraphDestroy)(g));
    CHECK_RC(CU(cuGraphDestroy)(g), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuStreamEndCapture)(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    OK(CU(cuStreamSynchronize)(s)); /* the pool gives the 2 MiB back */
    CHECK_EQ(gpu_used(), 0);

    /* Synchronizing a capturing stream is refused and invalidates it. */
    OK(CU(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_RC(CU(cuStreamSynchronize)(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OK(CU(cuStreamIsCapturing)(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CHECK_RC(CU(cuStreamEndCapture)(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(g == NULL);
    OK(CU(cuStreamIsCapturing)(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
    /* So is synchronizing its context. */
    OK(CU(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CHECK_RC(CU(cuCtxSynchronize)(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_RC(CU(cuStreamEndCapture)(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(CU(cuCtxSynchronize)());

    /* The legacy and per-thread default streams are not captured. */
    CHECK_RC(CU(cuStreamBeginCapture_v2)(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
             CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_RC(CU(cuStreamBeginCapture_v2)(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL),
             CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_RC(CU(cuStreamBeginCapture_v2_ptsz)(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
             CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_RC(CU(cuStreamBeginCapture_v2)(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
    /* The per-thread flavours work on a created stream. */
    OK(CU(cuStreamBeginCapture_v2_ptsz)(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(CU(cuStreamIsCapturing_ptsz)(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(CU(cuStreamEndCapture_ptsz)(s, &g));
    OK(CU(cuGraphDestroy)(g));
    const char *name = NULL;
    OK(CU(cuGetErrorName)(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, &name));
    CHECK(name && strcmp(name, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED") == 0);
    OK(CU(cuStreamDestroy_v2)(s));
    (void)ctx;
}

static void unified_copies_and_address_ranges_reach_every_allocation_kind(void)
{
    setup(1, 1 * GiB);
    size_t n = 3 * MiB;
    CUstream s;
    OK(CU(cuStreamCreate)(&s, 0));
    /* One buffer of each kind. */
    CUdeviceptr dev = 0, pitched = 0, managed = 0, async = 0, vmm = 0;
    size_t pitch = 0;
    OK(CU(cuMemAlloc_v2)(&dev, n));
    OK(CU(cuMemAllocPitch_v2)(&pitched, &pitch, 1536, 2048, 4)); /* 3 MiB */
    OK(CU(cuMemAllocManaged)(&managed, n, CU_MEM_ATTACH_GLOBAL));
    OK(CU(cuMemAllocAsync)(&async, n, s));
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h;
    size_t vsize = 4 * MiB;
    OK(CU(cuMemAddressReserve)(&vmm, vsize, 0, 0, 0));
    OK(CU(cuMemCreate)(&h, vsize, &prop, 0));
    OK(CU(cuMemMap)(vmm, vsize, 0, h, 0));
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    OK(CU(cuMemSetAccess)(vmm, vsize, &acc, 1));
    void *pinned = NULL;
    OK(CU(cuMemHostAlloc)(&pinned, n, 0));
    unsigned char *host = malloc(n), *out = malloc(n);
    fill(host, n, 9);

    /* Host -> each kind -> the next -> host, all through cuMemcpy(Async). */
    CUdeviceptr chain[] = {dev, pitched, managed, async, vmm, (CUdeviceptr)(uintptr_t)pinned};
    CUdeviceptr prev = (CUdeviceptr)(uintptr_t)host;
    for (size_t i = 0; i < TS_ARRAY_LEN(chain); i++) {
        if (i % 2)
            OK(CU(cuMemcpyAsync)(chain[i], prev, n, s));
        else
            OK(CU(cuMemcpy)(chain[i], prev, n));
        prev = chain[i];
    }
    OK(CU(cuMemcpy_ptds)((CUdeviceptr)(uintptr_t)out, prev, n));
    OK(CU(cuStreamSynchronize)(s));
    CHECK(memcmp(host, out, n) == 0);
    memset(out, 0, n);
    OK(CU(cuMemcpyAsync_ptsz)((CUdeviceptr)(uintptr_t)out, async, n, NULL));
    OK(CU(cuStreamSynchronize)(NULL));
    CHECK(memcmp(host, out, n) == 0);

    /* Address ranges: base and size of the allocation holding a pointer. */
    struct {
        CUdeviceptr p;
        size_t size;
    } want[] = {{dev, n},     {pitched, pitch * 2048},
                {managed, n}, {async, n},
                {vmm, vsize}, {(CUdeviceptr)(uintptr_t)pinned, n}};
    for (size_t i = 0; i < TS_ARRAY_LEN(want); i++) {
        CUdeviceptr base = 0;
        size_t size = 0;
        OK(CU(cuMemGetAddressRange_v2)(&base, &size, want[i].p + want[i].size - 1));
        CHECK(base == want[i].p);
        CHECK_EQ(size, want[i].size);
    }
    CUdeviceptr base = 0;
    OK(CU(cuMemGetAddressRange_v2)(&base, NULL, dev + 100));
    CHECK(base == dev);
    CHECK_RC(CU(cuMemGetAddressRange_v2)(&base, NULL, (CUdeviceptr)(uintptr_t)host),
             CUDA_ERROR_NOT_FOUND);

    /* Refused: past an allocation's end, freed memory, an unmapped
     * reservation, a NULL pointer. */
    CHECK_RC(CU(cuMemcpy)(dev + n - 8, (CUdeviceptr)(uintptr_t)host, 16), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemcpy)((CUdeviceptr)(uintptr_t)out, managed + n - 8, 16),
             CUDA_ERROR_INVALID_VALUE);
    OK(CU(cuMemUnmap)(vmm, vsize));
    CHECK_RC(CU(cuMemcpy)(vmm, (CUdeviceptr)(uintptr_t)host, 16), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemGetAddressRange_v2)(&base, NULL, vmm), CUDA_ERROR_NOT_FOUND);
    OK(CU(cuMemFree_v2)(dev));
    CHECK_RC(CU(cuMemcpy)(dev, (CUdeviceptr)(uintptr_t)host, 16), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemcpy)(0, (CUdeviceptr)(uintptr_t)host, 16), CUDA_ERROR_INVALID_VALUE);

    OK(CU(cuMemRelease)(h));
    OK(CU(cuMemAddressFree)(vmm, vsize));
    OK(CU(cuMemFree_v2)(pitched));
    OK(CU(cuMemFree_v2)(managed));
    OK(CU(cuMemFreeAsync)(async, s));
    OK(CU(cuMemFreeHost)(pinned));
    OK(CU(cuStreamSynchronize)(s));
    CHECK_EQ(gpu_used(), 0);
    OK(CU(cuStreamDestroy_v2)(s));
    free(host);
    free(out);
}

static void a_destroyed_context_frees_every_new_allocation_kind(void)
{
    CUcontext primary = setup(1, 1 * GiB);
    CUdeviceptr keep = 0;
    OK(CU(cuMemAllocAsync)(&keep, MiB, NULL)); /* the primary context's: stays */
    CUcontext c;
    OK(CU(cuCtxCreate_v2)(&c, 0, 0));
    CUstream s;
    OK(CU(cuStreamCreate)(&s, 0));
    CUdeviceptr p, m, a, d;
    size_t pitch;
    CUarray arr;
    CUDA_ARRAY_DESCRIPTOR ad = {
        .Width = 4096, .Height = 16, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    OK(CU(cuMemAllocPitch_v2)(&p, &pitch, 4096, 256, 8));
    OK(CU(cuMemAllocManaged)(&m, 2 * MiB, CU_MEM_ATTACH_GLOBAL));
    OK(CU(cuMemAllocAsync)(&a, 8 * MiB, s));
    OK(CU(cuMemAllocAsync)(&d, 4 * MiB, s));
    OK(CU(cuMemFreeAsync)(d, s)); /* idle in the pool */
    OK(CU(cuArrayCreate_v2)(&arr, &ad));
    CUstreamCaptureStatus st;
    OK(CU(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(CU(cuStreamIsCapturing)(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    uint64_t all = MiB + 4096 * 256 + 2 * MiB + 8 * MiB + 4 * MiB + 4096 * 16 * 4;
    CHECK_EQ(gpu_used(), all);
    CHECK_EQ(my_used(), all);
    OK(CU(cuCtxDestroy_v2)(c));
    OK(CU(cuCtxSetCurrent)(primary));
    /* The pool still holds the 4 MiB freed before: given back at the next
     * synchronize. */
    OK(CU(cuCtxSynchronize)());
    CHECK_EQ(gpu_used(), MiB);
    CHECK_EQ(my_used(), MiB);
    CHECK_RC(CU(cuArrayDestroy)(arr), CUDA_ERROR_INVALID_HANDLE);
    CHECK_RC(CU(cuMemFree_v2)(p), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemFreeAsync)(a, NULL), CUDA_ERROR_INVALID_VALUE);
    CUmemoryPool def;
    OK(CU(cuDeviceGetDefaultMemPool)(&def, 0));
    CHECK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), MiB);
    OK(CU(cuMemFreeAsync)(keep, NULL));
    OK(CU(cuStreamSynchronize)(NULL));
    CHECK_EQ(gpu_used(), 0);
}

/* Base name -> what cuGetProcAddress hands out at CUDA 12000. */
static const struct {
    const char *base, *plain, *per_thread;
} proc_names[] = {
    {"cuMemAllocPitch", "cuMemAllocPitch_v2", NULL},
    {"cuMemAllocManaged", "cuMemAllocManaged", NULL},
    {"cuMemGetAddressRange", "cuMemGetAddressRange_v2", NULL},
    {"cuMemcpy", "cuMemcpy", "cuMemcpy_ptds"},
    {"cuMemcpyAsync", "cuMemcpyAsync", "cuMemcpyAsync_ptsz"},
    {"cuMemAllocAsync", "cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
    {"cuMemFreeAsync", "cuMemFreeAsync", "cuMemFreeAsync_ptsz"},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"},
    {"cuMemPoolCreate", "cuMemPoolCreate", NULL},
    {"cuMemPoolDestroy", "cuMemPoolDestroy", NULL},
    {"cuMemPoolTrimTo", "cuMemPoolTrimTo", NULL},
    {"cuMemPoolSetAttribute", "cuMemPoolSetAttribute", NULL},
    {"cuMemPoolGetAttribute", "cuMemPoolGetAttribute", NULL},
    {"cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool", NULL},
    {"cuDeviceGetMemPool", "cuDeviceGetMemPool", NULL},
    {"cuArrayCreate", "cuArrayCreate_v2", NULL},
    {"cuArray3DCreate", "cuArray3DCreate_v2", NULL},
    {"cuArrayDestroy", "cuArrayDestroy", NULL},
    {"cuStreamBeginCapture", "cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz"},
    {"cuStreamEndCapture", "cuStreamEndCapture", "cuStreamEndCapture_ptsz"},
    {"cuStreamIsCapturing", "cuStreamIsCapturing", "cuStreamIsCapturing_ptsz"},
    {"cuGraphDestroy", "cuGraphDestroy", NULL},
};

static void get_proc_address_hands_out_the_new_entry_points(void)
{
    setup(1, 1 * GiB);
    for (size_t i = 0; i < TS_ARRAY_LEN(proc_names); i++) {
        void *plain = sg_sym(cu_lib, proc_names[i].plain), *fn = NULL;
        void *pt = proc_names[i].per_thread ? sg_sym(cu_lib, proc_names[i].per_thread) : plain;
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        OK(CU(cuGetProcAddress_v2)(proc_names[i].base, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT,
                                   &st));
        if (fn != plain)
            fprintf(stderr, "%s: not %s\n", proc_names[i].base, proc_names[i].plain);
        CHECK(fn == plain && st == CU_GET_PROC_ADDRESS_SUCCESS);
        OK(CU(cuGetProcAddress)(proc_names[i].base, &fn, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM));
        CHECK(fn == plain);
        OK(CU(cuGetProcAddress_v2)(proc_names[i].base, &fn, 12000,
                                   CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
        if (fn != pt)
            fprintf(stderr, "%s: not its per-thread flavour\n", proc_names[i].base);
        CHECK(fn == pt);
    }
    /* What is handed out works: a pitched allocation through it. */
    void *fn = NULL;
    OK(CU(cuGetProcAddress_v2)("cuMemAllocPitch", &fn, 12000, 0, NULL));
    CUdeviceptr p;
    size_t pitch;
    OK(((__typeof__(cuMemAllocPitch_v2) *)fn)(&p, &pitch, 100, 8, 4)); /* 512 x 8 */
    CHECK_EQ(gpu_used(), PAGE);
    OK(CU(cuMemFree_v2)(p));
    CHECK_EQ(gpu_used(), 0);
}

static void injected_failures_hit_the_new_allocation_paths(void)
{
    setenv("TESSERA_SIMGPU_FAIL",
           "cuMemAllocAsync:2,cuMemAllocPitch_v2:1:2,cuArrayCreate_v2:1,cuMemcpy:2:1", 1);
    setup(1, 1 * GiB);
    CUdeviceptr a, b, c, p;
    size_t pitch;
    OK(CU(cuMemAllocAsync)(&a, MiB, NULL));
    /* The per-thread flavour counts with the plain call. */
    CHECK_RC(CU(cuMemAllocAsync_ptsz)(&b, MiB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    OK(CU(cuMemAllocAsync)(&c, MiB, NULL));
    CHECK_EQ(gpu_used(), 2 * MiB); /* the failed call charged nothing */
    CHECK_RC(CU(cuMemAllocPitch_v2)(&p, &pitch, 512, 8, 4), CUDA_ERROR_OUT_OF_MEMORY);
    OK(CU(cuMemAllocPitch_v2)(&p, &pitch, 512, 8, 4));
    CUarray arr;
    CUDA_ARRAY_DESCRIPTOR ad = {
        .Width = 256, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
    CHECK_RC(CU(cuArrayCreate_v2)(&arr, &ad), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(gpu_used(), 2 * MiB + PAGE);
    unsigned char x[16] = {1}, y[16] = {0};
    OK(CU(cuMemcpy)(a, (CUdeviceptr)(uintptr_t)x, 16));
    CHECK_RC(CU(cuMemcpy_ptds)((CUdeviceptr)(uintptr_t)y, a, 16), CUDA_ERROR_INVALID_VALUE);
    OK(CU(cuMemcpy)((CUdeviceptr)(uintptr_t)y, a, 16));
    CHECK(y[0] == 1);
    OK(CU(cuMemFreeAsync)(a, NULL));
    OK(CU(cuMemFreeAsync)(c, NULL));
    OK(CU(cuMemFree_v2)(p));
    OK(CU(cuCtxSynchronize)());
    CHECK_EQ(gpu_used(), 0);
    unsetenv("TESSERA_SIMGPU_FAIL");
}

/* ---- 2D copies, memsets, cuLaunchKernelEx, cuGraphLaunch ---- */

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void two_d_copies_move_bytes_with_pitches_and_refuse_bad_ranges(void)
{
    setup(1, 1 * GiB);
    enum { W = 100, H = 7, HP = 130, DP = 256 };
    unsigned char src[HP * H], back[HP * H];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(i * 31 + 7);
    memset(back, 0xEE, sizeof back);
    CUdeviceptr d = 0;
    OK(CU(cuMemAlloc_v2)(&d, DP * (H + 1)));
    OK(CU(cuMemsetD8_v2)(d, 0, DP * (H + 1)));

    /* Host (from x=5, y=0, pitch 130) to device (x=3, y=1, pitch 256). */
    CUDA_MEMCPY2D c = {0};
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = src;
    c.srcXInBytes = 5;
    c.srcPitch = HP;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = d;
    c.dstXInBytes = 3;
    c.dstY = 1;
    c.dstPitch = DP;
    c.WidthInBytes = W - 5;
    c.Height = H;
    OK(CU(cuMemcpy2D_v2)(&c));
    /* The whole device buffer back: each row has its bytes, the rest 0. */
    unsigned char dev[DP * (H + 1)];
    OK(CU(cuMemcpyDtoH_v2)(dev, d, sizeof dev));
    int bad = 0;
    for (size_t y = 0; y < H + 1; y++)
        for (size_t x = 0; x < DP; x++) {
            bool in = y >= 1 && x >= 3 && x < 3 + W - 5;
            unsigned char want = in ? src[(y - 1) * HP + 5 + (x - 3)] : 0;
            bad += dev[y * DP + x] != want;
        }
    CHECK_EQ(bad, 0);

    /* Device back to host (async on a stream, then unified on both sides). */
    CUstream s;
    OK(CU(cuStreamCreate)(&s, 0));
    CUDA_MEMCPY2D b = {0};
    b.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    b.srcDevice = d;
    b.srcXInBytes = 3;
    b.srcY = 1;
    b.srcPitch = DP;
    b.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    b.dstDevice = (CUdeviceptr)(uintptr_t)back;
    b.dstPitch = HP;
    b.WidthInBytes = W - 5;
    b.Height = H;
    OK(CU(cuMemcpy2DAsync_v2)(&b, s));
    OK(CU(cuStreamSynchronize)(s));
    bad = 0;
    for (size_t y = 0; y < H; y++)
        for (size_t x = 0; x < HP; x++)
            bad += back[y * HP + x] != (x < W - 5 ? src[y * HP + 5 + x] : 0xEE);
    CHECK_EQ(bad, 0);
    OK(((__typeof__(cuMemcpy2D_v2_ptds) *)sg_sym(cu_lib, "cuMemcpy2D_v2_ptds"))(&b));
    OK(CU(cuMemcpy2DAsync_v2_ptsz)(&b, NULL));

    /* Refused, nothing written: a row past the allocation, a pitch under
     * the width, an array side, a stale device pointer, a bad stream. */
    CUDA_MEMCPY2D r = c;
    r.Height = H + 1; /* the last row is y = H + 1: past the allocation */
    CHECK_RC(CU(cuMemcpy2D_v2)(&r), CUDA_ERROR_INVALID_VALUE);
    r = c;
    r.dstPitch = 10;
    CHECK_RC(CU(cuMemcpy2D_v2)(&r), CUDA_ERROR_INVALID_VALUE);
    r = c;
    r.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    CHECK_RC(CU(cuMemcpy2D_v2)(&r), CUDA_ERROR_NOT_SUPPORTED);
    r = c;
    r.dstMemoryType = (CUmemorytype)9;
    CHECK_RC(CU(cuMemcpy2D_v2)(&r), CUDA_ERROR_INVALID_VALUE);
    r = c;
    r.srcMemoryType = CU_MEMORYTYPE_HOST;
    r.srcHost = (const void *)(uintptr_t)d; /* device memory called host */
    CHECK_RC(CU(cuMemcpy2D_v2)(&r), CUDA_ERROR_INVALID_VALUE);
    r = c;
    r.srcHost = NULL;
    CHECK_RC(CU(cuMemcpy2D_v2)(&r), CUDA_ERROR_INVALID_VALUE);
    r = c;
    r.srcY = SIZE_MAX / 2;
    CHECK_RC(CU(cuMemcpy2D_v2)(&r), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemcpy2D_v2)(NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemcpy2DAsync_v2)(&c, (CUstream)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
    OK(CU(cuMemFree_v2)(d));
    CHECK_RC(CU(cuMemcpy2D_v2)(&c), CUDA_ERROR_INVALID_VALUE); /* freed */
    OK(CU(cuStreamDestroy_v2)(s));
}

static void new_memsets_fill_exactly_and_check_alignment(void)
{
    setup(1, 1 * GiB);
    CUdeviceptr d = 0;
    OK(CU(cuMemAlloc_v2)(&d, 4096));
    OK(CU(cuMemsetD8_v2)(d, 0, 4096));
    CUstream s;
    OK(CU(cuStreamCreate)(&s, 0));
    OK(CU(cuMemsetD16_v2)(d + 2, 0xBEEF, 3));
    OK(CU(cuMemsetD8Async)(d + 100, 0x5A, 7, s));
    OK(CU(cuMemsetD32Async)(d + 200, 0xA1B2C3D4u, 5, s));
    OK(CU(cuMemsetD16_v2_ptds)(d + 400, 0x1234, 1));
    OK(CU(cuMemsetD8Async_ptsz)(d + 500, 0x77, 2, NULL));
    OK(CU(cuMemsetD32Async_ptsz)(d + 600, 0x01020304u, 1, NULL));
    OK(CU(cuStreamSynchronize)(s));
    unsigned char h[4096];
    OK(CU(cuMemcpyDtoH_v2)(h, d, sizeof h));
    unsigned char want[4096] = {0};
    for (int i = 0; i < 3; i++) {
        uint16_t v = 0xBEEF;
        memcpy(want + 2 + 2 * i, &v, 2);
    }
    memset(want + 100, 0x5A, 7);
    for (int i = 0; i < 5; i++) {
        uint32_t v = 0xA1B2C3D4u;
        memcpy(want + 200 + 4 * i, &v, 4);
    }
    uint16_t v16 = 0x1234;
    memcpy(want + 400, &v16, 2);
    memset(want + 500, 0x77, 2);
    uint32_t v32 = 0x01020304u;
    memcpy(want + 600, &v32, 4);
    CHECK(memcmp(h, want, sizeof h) == 0);

    CHECK_RC(CU(cuMemsetD16_v2)(d + 1, 0, 1), CUDA_ERROR_INVALID_VALUE);      /* unaligned */
    CHECK_RC(CU(cuMemsetD32Async)(d + 2, 0, 1, s), CUDA_ERROR_INVALID_VALUE); /* unaligned */
    CHECK_RC(CU(cuMemsetD16_v2)(d, 0, 2049), CUDA_ERROR_INVALID_VALUE);       /* overruns */
    CHECK_RC(CU(cuMemsetD8Async)(d, 0, 4097, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemsetD32Async)(d, 0, SIZE_MAX / 2, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemsetD8Async)(d, 0, 1, (CUstream)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
    CHECK_RC(CU(cuMemsetD16_v2)((CUdeviceptr)(uintptr_t)h, 0, 1), CUDA_ERROR_INVALID_VALUE);
    OK(CU(cuMemcpyDtoH_v2)(h, d, sizeof h));
    CHECK(memcmp(h, want, sizeof h) == 0); /* the refused ones wrote nothing */
    OK(CU(cuMemFree_v2)(d));
    OK(CU(cuStreamDestroy_v2)(s));
}

static const char busy_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                               ".visible .entry tessera_busy_ns(\n\t.param .u64 ns\n)\n{\n\tret;"
                               "\n}\n";

static void launch_kernel_ex_keeps_the_gpu_busy_and_graphs_launch_empty(void)
{
    setup(1, 1 * GiB);
    CUmodule m;
    CUfunction f;
    OK(CU(cuModuleLoadData)(&m, busy_ptx));
    OK(CU(cuModuleGetFunction)(&f, m, "tessera_busy_ns"));
    CUstream s;
    OK(CU(cuStreamCreate)(&s, 0));
    uint64_t ns = 200 * 1000 * 1000;
    void *params[] = {&ns};
    CUlaunchAttribute attr = {0};
    attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attr.value.priority = 1;
    CUlaunchConfig cfg = {.gridDimX = 2,
                          .gridDimY = 1,
                          .gridDimZ = 1,
                          .blockDimX = 32,
                          .blockDimY = 1,
                          .blockDimZ = 1,
                          .hStream = s,
                          .attrs = &attr,
                          .numAttrs = 1};
    double t0 = mono_s();
    OK(CU(cuLaunchKernelEx)(&cfg, f, params, NULL));
    OK(CU(cuLaunchKernelEx_ptsz)(&cfg, f, params, NULL));
    CHECK(mono_s() - t0 < 0.1); /* asynchronous */
    CHECK_RC(CU(cuStreamQuery)(s), CUDA_ERROR_NOT_READY);
    OK(CU(cuStreamSynchronize)(s));
    double waited = mono_s() - t0;
    CHECK(waited >= 0.39 && waited < 2.0); /* two kernels of 200 ms, one after the other */

    CUlaunchConfig bad = cfg;
    bad.blockDimX = 2048;
    CHECK_RC(CU(cuLaunchKernelEx)(&bad, f, params, NULL), CUDA_ERROR_INVALID_VALUE);
    bad = cfg;
    bad.attrs = NULL;
    CHECK_RC(CU(cuLaunchKernelEx)(&bad, f, params, NULL), CUDA_ERROR_INVALID_VALUE);
    bad = cfg;
    bad.hStream = (CUstream)(uintptr_t)0x1234;
    CHECK_RC(CU(cuLaunchKernelEx)(&bad, f, params, NULL), CUDA_ERROR_INVALID_HANDLE);
    CHECK_RC(CU(cuLaunchKernelEx)(NULL, f, params, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuLaunchKernelEx)(&cfg, (CUfunction)(uintptr_t)0x99, params, NULL),
             CUDA_ERROR_INVALID_HANDLE);
    CHECK_RC(CU(cuLaunchKernelEx)(&cfg, f, NULL, NULL), CUDA_ERROR_INVALID_VALUE);

    /* A captured graph: the memset ran during capture; launching the
     * instantiated graph succeeds and runs nothing again. */
    CUdeviceptr d = 0;
    OK(CU(cuMemAlloc_v2)(&d, 4096));
    OK(CU(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(CU(cuMemsetD8Async)(d, 0x42, 4096, s));
    CUgraph g = NULL;
    OK(CU(cuStreamEndCapture)(s, &g));
    CUgraphExec ge = NULL;
    OK(CU(cuGraphInstantiateWithFlags)(&ge, g, 0));
    CHECK(ge != NULL);
    OK(CU(cuMemsetD8_v2)(d, 0x00, 4096));
    t0 = mono_s();
    OK(CU(cuGraphLaunch)(ge, s));
    OK(CU(cuGraphLaunch_ptsz)(ge, NULL));
    OK(CU(cuStreamSynchronize)(s));
    CHECK(mono_s() - t0 < 0.1);
    unsigned char h[4096], zero[4096] = {0};
    OK(CU(cuMemcpyDtoH_v2)(h, d, sizeof h));
    CHECK(memcmp(h, zero, sizeof h) == 0);
    CHECK_RC(CU(cuGraphLaunch)(ge, (CUstream)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
    CHECK_RC(CU(cuGraphLaunch)((CUgraphExec)(uintptr_t)0x5678, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuGraphInstantiateWithFlags)(&ge, (CUgraph)(uintptr_t)0x5678, 0),
             CUDA_ERROR_INVALID_VALUE);
    CHECK(ge == NULL);
    OK(CU(cuGraphInstantiateWithFlags)(&ge, g, 0));
    OK(CU(cuGraphExecDestroy)(ge));
    CHECK_RC(CU(cuGraphLaunch)(ge, s), CUDA_ERROR_INVALID_VALUE); /* destroyed */
    CHECK_RC(CU(cuGraphExecDestroy)(ge), CUDA_ERROR_INVALID_VALUE);
    OK(CU(cuGraphDestroy)(g));
    OK(CU(cuMemFree_v2)(d));
    OK(CU(cuStreamDestroy_v2)(s));
}

/* clang-format off */
static const struct sg_case cases[] = {
#define CASE(f) SG_CASE(f)
    CASE(pitched_and_managed_memory_are_charged_and_freed_exactly),
    CASE(arrays_charge_their_size_and_refuse_bad_formats),
    CASE(stream_ordered_allocations_come_from_pools_and_return_at_synchronize),
    CASE(stream_capture_is_reported_and_refuses_synchronize),
    CASE(unified_copies_and_address_ranges_reach_every_allocation_kind),
    CASE(a_destroyed_context_frees_every_new_allocation_kind),
    CASE(get_proc_address_hands_out_the_new_entry_points),
    CASE(injected_failures_hit_the_new_allocation_paths),
    CASE(two_d_copies_move_bytes_with_pitches_and_refuse_bad_ranges),
    CASE(new_memsets_fill_exactly_and_check_alignment),
    CASE(launch_kernel_ex_keeps_the_gpu_busy_and_graphs_launch_empty),
#undef CASE
};
/* clang-format on */

int main(int argc, char **argv)
{
    return sg_main("simgpu_alloc_test", cases, TS_ARRAY_LEN(cases), argc, argv);
}
