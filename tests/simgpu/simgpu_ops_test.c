/*
 * simgpu_ops_test.c - the calls that touch device memory or give the GPU
 * work beyond plain copies and launches, as a job sees them through
 * simgpu's libcuda.so.1 (loaded with dlopen through LD_LIBRARY_PATH): 3D
 * copies, peer copies between two GPUs (plain and 3D), 2D memsets and
 * cuMemsetD16Async, stream memory operations (write, wait, batch) and
 * cooperative launches, with their per-thread default stream flavours.
 * Each case checks every byte it could have changed.
 *
 * Usage: simgpu_ops_test CASE.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/abi/cuda.h"
#include "agent/simgpu/state.h"
#include "api/array.h"
#include "tests/simgpu/harness.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

static void *cu_lib;
/* An entry point of libcuda.so.1, looked up as a job would. */
#define CU(name) ((__typeof__(name) *)sg_sym(cu_lib, #name))

/* Fresh GPUs in a temporary folder, libcuda.so.1 loaded, the primary
 * context of device 0 current; *ctx1 (if asked) device 1's. */
static CUcontext setup(unsigned count, CUcontext *ctx1)
{
    sg_make_gpus("ops", count, 1 * GiB, 0);
    cu_lib = sg_load("libcuda.so.1");
    OK(CU(cuInit)(0));
    CUcontext ctx = NULL;
    if (ctx1)
        OK(CU(cuDevicePrimaryCtxRetain)(ctx1, 1));
    OK(CU(cuDevicePrimaryCtxRetain)(&ctx, 0));
    OK(CU(cuCtxSetCurrent)(ctx));
    return ctx;
}

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static unsigned char pattern(size_t i)
{
    return (unsigned char)(i * 131 + 7);
}

/* n bytes of device memory holding pattern(). */
static CUdeviceptr alloc_filled(size_t n)
{
    CUdeviceptr d = 0;
    unsigned char *h = malloc(n);
    for (size_t i = 0; h && i < n; i++)
        h[i] = pattern(i);
    OK(CU(cuMemAlloc_v2)(&d, n));
    OK(CU(cuMemcpyHtoD_v2)(d, h, n));
    free(h);
    return d;
}

/* ---- 3D copies ---- */

enum { W = 40, H = 3, D = 4 };

/* Device (x=2, y=1, z=1 of slices of 5 rows of 64) -> host (x=3, y=0,
 * z=0 of slices of 4 rows of 50); everything else in the host buffer keeps
 * 0xEE. */
static void check_3d_to_host(const unsigned char *host)
{
    int bad = 0;
    for (size_t z = 0; z < D; z++)
        for (size_t y = 0; y < 4; y++)
            for (size_t x = 0; x < 50; x++) {
                bool in = y < H && x >= 3 && x < 3 + W;
                size_t src = ((z + 1) * 5 + y + 1) * 64 + 2 + (x - 3);
                bad += host[(z * 4 + y) * 50 + x] != (in ? pattern(src) : 0xEE);
            }
    CHECK_EQ(bad, 0);
}

static CUDA_MEMCPY3D dtoh_3d(CUdeviceptr d, unsigned char *host)
{
    CUDA_MEMCPY3D c = {0};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = d;
    c.srcXInBytes = 2;
    c.srcY = 1;
    c.srcZ = 1;
    c.srcPitch = 64;
    c.srcHeight = 5;
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = host;
    c.dstXInBytes = 3;
    c.dstPitch = 50;
    c.dstHeight = 4;
    c.WidthInBytes = W;
    c.Height = H;
    c.Depth = D;
    return c;
}

static void three_d_copies_move_slices_with_pitches_and_refuse_bad_ranges(void)
{
    setup(1, NULL);
    enum { DEV = 64 * 5 * (D + 1) };
    CUdeviceptr d = alloc_filled(DEV);
    unsigned char host[50 * 4 * D];
    memset(host, 0xEE, sizeof host);
    CUDA_MEMCPY3D c = dtoh_3d(d, host);
    OK(CU(cuMemcpy3D_v2)(&c));
    check_3d_to_host(host);

    /* Each flavour, the async ones on a stream and on the per-thread one. */
    CUstream s;
    OK(CU(cuStreamCreate)(&s, 0));
    memset(host, 0xEE, sizeof host);
    OK(CU(cuMemcpy3DAsync_v2)(&c, s));
    OK(CU(cuStreamSynchronize)(s));
    check_3d_to_host(host);
    memset(host, 0xEE, sizeof host);
    OK(CU(cuMemcpy3D_v2_ptds)(&c));
    check_3d_to_host(host);
    memset(host, 0xEE, sizeof host);
    OK(CU(cuMemcpy3DAsync_v2_ptsz)(&c, NULL));
    OK(CU(cuCtxSynchronize)());
    check_3d_to_host(host);

    /* Host -> device, into a second allocation, and device -> device: the
     * bytes come back where they were. */
    CUdeviceptr e = 0;
    OK(CU(cuMemAlloc_v2)(&e, DEV));
    OK(CU(cuMemsetD8_v2)(e, 0, DEV));
    CUDA_MEMCPY3D back = {0};
    back.srcMemoryType = CU_MEMORYTYPE_HOST;
    back.srcHost = host;
    back.srcXInBytes = 3;
    back.srcPitch = 50;
    back.srcHeight = 4;
    back.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    back.dstDevice = e;
    back.dstXInBytes = 2;
    back.dstY = 1;
    back.dstZ = 1;
    back.dstPitch = 64;
    back.dstHeight = 5;
    back.WidthInBytes = W;
    back.Height = H;
    back.Depth = D;
    OK(CU(cuMemcpy3D_v2)(&back));
    memset(host, 0xEE, sizeof host);
    c.srcDevice = e;
    OK(CU(cuMemcpy3D_v2)(&c));
    check_3d_to_host(host);

    /* Refused, nothing written. */
    memset(host, 0xEE, sizeof host);
    CUDA_MEMCPY3D r = c;
    r.Depth = D + 1; /* the source's last slice is past the allocation */
    CHECK_RC(CU(cuMemcpy3D_v2)(&r), CUDA_ERROR_INVALID_VALUE);
    r = c;
    r.srcHeight = H - 1; /* slices would overlap */
    CHECK_RC(CU(cuMemcpy3D_v2)(&r), CUDA_ERROR_INVALID_VALUE);
    r = c;
    r.reserved0 = host;
    CHECK_RC(CU(cuMemcpy3D_v2)(&r), CUDA_ERROR_INVALID_VALUE);
    r = c;
    r.srcLOD = 1;
    CHECK_RC(CU(cuMemcpy3D_v2)(&r), CUDA_ERROR_INVALID_VALUE);
    r = c;
    r.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    CHECK_RC(CU(cuMemcpy3D_v2)(&r), CUDA_ERROR_NOT_SUPPORTED);
    r = c;
    r.srcZ = SIZE_MAX / 4;
    CHECK_RC(CU(cuMemcpy3D_v2)(&r), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemcpy3D_v2)(NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemcpy3DAsync_v2)(&c, (CUstream)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
    unsigned char untouched[sizeof host];
    memset(untouched, 0xEE, sizeof untouched);
    CHECK(memcmp(host, untouched, sizeof host) == 0);
    OK(CU(cuMemFree_v2)(e));
    CHECK_RC(CU(cuMemcpy3D_v2)(&c), CUDA_ERROR_INVALID_VALUE); /* freed */
    r = c;
    r.Depth = 1;
    r.srcZ = 0;
    r.srcDevice = d;
    r.srcHeight = 0; /* one slice at z = 0: the height may be 0 */
    OK(CU(cuMemcpy3D_v2)(&r));
    OK(CU(cuMemFree_v2)(d));
    OK(CU(cuStreamDestroy_v2)(s));
}

/* ---- peer copies ---- */

static void peer_copies_move_bytes_between_two_gpus_and_check_contexts(void)
{
    setenv("TESSERA_SIMGPU_BANDWIDTH", "50000000", 1); /* 50 MB/s */
    CUcontext c1 = NULL, c0 = setup(2, &c1);
    enum { N = 20 * MiB };
    CUdeviceptr a = alloc_filled(N), b = 0, a2 = 0;
    OK(CU(cuMemAlloc_v2)(&a2, N));
    /* written once, so that the copy below does not pay for faulting its
     * destination in (seconds a GiB on a loaded VM) */
    OK(CU(cuMemsetD8_v2)(a2, 0, N));
    OK(CU(cuCtxSetCurrent)(c1));
    OK(CU(cuMemAlloc_v2)(&b, N));
    OK(CU(cuMemsetD8_v2)(b, 0, N));
    OK(CU(cuCtxSetCurrent)(c0));

    /* GPU 0 -> GPU 1 crosses the host link: 20 MiB at 50 MB/s. */
    double t0 = mono_s();
    OK(CU(cuMemcpyPeer)(b, c1, a, c0, N));
    double took = mono_s() - t0;
    CHECK(took >= 0.41);
    unsigned char *h = malloc(N);
    OK(CU(cuMemcpyDtoH_v2)(h, b, N));
    size_t bad = 0;
    for (size_t i = 0; i < N; i++)
        bad += h[i] != pattern(i);
    CHECK_EQ(bad, 0);
    /* Within one GPU it is not throttled. */
    t0 = mono_s();
    OK(CU(cuMemcpyPeer)(a2, c0, a, c0, N));
    CHECK(mono_s() - t0 < took / 2);

    /* The flavours, 16 bytes each, at offsets of their own. */
    CUstream s;
    OK(CU(cuStreamCreate)(&s, 0));
    OK(CU(cuMemsetD8_v2)(b, 0, 64));
    OK(CU(cuMemcpyPeerAsync)(b, c1, a, c0, 16, s));
    OK(CU(cuMemcpyPeer_ptds)(b + 16, c1, a + 16, c0, 16));
    OK(CU(cuMemcpyPeerAsync_ptsz)(b + 32, c1, a + 32, c0, 16, NULL));
    OK(CU(cuStreamSynchronize)(s));
    OK(CU(cuCtxSynchronize)());
    OK(CU(cuMemcpyDtoH_v2)(h, b, 64));
    bad = 0;
    for (size_t i = 0; i < 64; i++)
        bad += h[i] != (i < 48 ? pattern(i) : 0);
    CHECK_EQ(bad, 0);

    /* A context that is not the memory's, none, a bad one, a bad range. */
    CHECK_RC(CU(cuMemcpyPeer)(b, c0, a, c0, 16), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemcpyPeer)(b, c1, a, c1, 16), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemcpyPeer)(b, NULL, a, c0, 16), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_RC(CU(cuMemcpyPeer)(b, (CUcontext)(uintptr_t)0x40, a, c0, 16),
             CUDA_ERROR_INVALID_CONTEXT);
    CHECK_RC(CU(cuMemcpyPeer)(b, c1, a, c0, N + 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemcpyPeerAsync)(b, c1, a, c0, 16, (CUstream)(uintptr_t)0x1234),
             CUDA_ERROR_INVALID_HANDLE);

    /* 3D peer: GPU 0 (rows of 64) -> GPU 1 (rows of 128, from y = 1). */
    OK(CU(cuMemsetD8_v2)(b, 0, 4096));
    CUDA_MEMCPY3D_PEER p = {0};
    p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    p.srcDevice = a;
    p.srcContext = c0;
    p.srcPitch = 64;
    p.srcHeight = 2;
    p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    p.dstDevice = b;
    p.dstContext = c1;
    p.dstY = 1;
    p.dstPitch = 128;
    p.dstHeight = 3;
    p.WidthInBytes = 64;
    p.Height = 2;
    p.Depth = 3;
    OK(CU(cuMemcpy3DPeer)(&p));
    OK(CU(cuMemcpy3DPeerAsync)(&p, s));
    OK(CU(cuMemcpy3DPeer_ptds)(&p));
    OK(CU(cuMemcpy3DPeerAsync_ptsz)(&p, NULL));
    OK(CU(cuCtxSynchronize)());
    OK(CU(cuMemcpyDtoH_v2)(h, b, 4096));
    bad = 0;
    for (size_t row = 0; row < 32; row++)
        for (size_t x = 0; x < 128; x++) {
            size_t z = row / 3, y = row % 3;
            bool in = z < 3 && y >= 1 && x < 64;
            bad += h[row * 128 + x] != (in ? pattern((z * 2 + y - 1) * 64 + x) : 0);
        }
    CHECK_EQ(bad, 0);
    p.dstContext = c0; /* GPU 1's memory named as GPU 0's */
    CHECK_RC(CU(cuMemcpy3DPeer)(&p), CUDA_ERROR_INVALID_VALUE);
    p.dstContext = NULL;
    CHECK_RC(CU(cuMemcpy3DPeer)(&p), CUDA_ERROR_INVALID_CONTEXT);
    /* A host side needs no context. */
    p.dstMemoryType = CU_MEMORYTYPE_HOST;
    p.dstHost = h;
    p.dstY = 0;
    OK(CU(cuMemcpy3DPeer)(&p));
    CHECK(h[128] == pattern(64));
    free(h);
    OK(CU(cuStreamDestroy_v2)(s));
    unsetenv("TESSERA_SIMGPU_BANDWIDTH");
}

/* ---- memsets ---- */

static void two_d_memsets_fill_rows_and_leave_the_gaps(void)
{
    setup(1, NULL);
    enum { P = 64, ROWS = 6, N = P * ROWS };
    CUdeviceptr d = 0;
    OK(CU(cuMemAlloc_v2)(&d, N));
    OK(CU(cuMemsetD8_v2)(d, 0, N));
    CUstream s;
    OK(CU(cuStreamCreate)(&s, 0));
    /* Row r gets one call: width in elements, the rest of the row stays 0. */
    OK(CU(cuMemsetD2D8_v2)(d + 0 * P, 2 * P, 0x11, 5, 1));
    OK(CU(cuMemsetD2D16_v2)(d + 1 * P, 2 * P, 0x2233, 3, 1));
    OK(CU(cuMemsetD2D32_v2)(d + 2 * P + 4, 2 * P, 0x44556677u, 2, 2)); /* rows 2 and 4 */
    OK(CU(cuMemsetD2D8Async)(d + 3 * P + 1, 2 * P, 0x88, 2, 2, s));    /* rows 3 and 5 */
    OK(CU(cuMemsetD2D16Async)(d + 1 * P + 40, P, 0x99AA, 1, 3, s));    /* rows 1..3 */
    OK(CU(cuMemsetD2D32Async)(d + 0 * P + 60, P, 0xBBCCDDEEu, 1, 1, s));
    OK(CU(cuMemsetD16Async)(d + 0 * P + 20, 0xF00D, 4, s));
    OK(CU(cuStreamSynchronize)(s));
    unsigned char want[N] = {0};
    memset(want, 0x11, 5);
    for (int i = 0; i < 3; i++)
        memcpy(want + P + 2 * i, &(uint16_t){0x2233}, 2);
    for (int r = 2; r <= 4; r += 2)
        for (int i = 0; i < 2; i++)
            memcpy(want + r * P + 4 + 4 * i, &(uint32_t){0x44556677u}, 4);
    for (int r = 3; r <= 5; r += 2)
        memset(want + r * P + 1, 0x88, 2);
    for (int r = 1; r <= 3; r++)
        memcpy(want + r * P + 40, &(uint16_t){0x99AA}, 2);
    memcpy(want + 60, &(uint32_t){0xBBCCDDEEu}, 4);
    for (int i = 0; i < 4; i++)
        memcpy(want + 20 + 2 * i, &(uint16_t){0xF00D}, 2);
    unsigned char h[N];
    OK(CU(cuMemcpyDtoH_v2)(h, d, N));
    CHECK(memcmp(h, want, N) == 0);

    /* The flavours write what the plain calls do. */
    OK(CU(cuMemsetD2D8_v2_ptds)(d, P, 0x11, 5, 1));
    OK(CU(cuMemsetD2D16_v2_ptds)(d + P, P, 0x2233, 3, 1));
    OK(CU(cuMemsetD2D32_v2_ptds)(d + 2 * P + 4, 2 * P, 0x44556677u, 2, 2));
    OK(CU(cuMemsetD2D8Async_ptsz)(d + 3 * P + 1, 2 * P, 0x88, 2, 2, NULL));
    OK(CU(cuMemsetD2D16Async_ptsz)(d + P + 40, P, 0x99AA, 1, 3, NULL));
    OK(CU(cuMemsetD2D32Async_ptsz)(d + 60, P, 0xBBCCDDEEu, 1, 1, NULL));
    OK(CU(cuMemsetD16Async_ptsz)(d + 20, 0xF00D, 4, NULL));
    OK(CU(cuCtxSynchronize)());
    OK(CU(cuMemcpyDtoH_v2)(h, d, N));
    CHECK(memcmp(h, want, N) == 0);

    /* Refused, nothing written: unaligned pointer or pitch, a pitch under
     * the width, a last row past the allocation, an overflow, a bad
     * stream, host memory. */
    CHECK_RC(CU(cuMemsetD2D16_v2)(d + 1, P, 0, 1, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemsetD2D32_v2)(d, P + 2, 0, 1, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemsetD2D8_v2)(d, 4, 0, 5, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemsetD2D8_v2)(d, P, 0, P, ROWS + 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemsetD2D32Async)(d, P, 0, SIZE_MAX / 2, 1, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemsetD2D8Async)(d, P, 0, 1, 1, (CUstream)(uintptr_t)0x1234),
             CUDA_ERROR_INVALID_HANDLE);
    CHECK_RC(CU(cuMemsetD16Async)(d + 1, 0, 1, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemsetD16Async)(d, 0, N / 2 + 1, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemsetD2D8_v2)((CUdeviceptr)(uintptr_t)h, P, 0, 1, 1), CUDA_ERROR_INVALID_VALUE);
    OK(CU(cuMemsetD2D8_v2)(d, P, 0, 0, 3)); /* nothing to do */
    OK(CU(cuMemcpyDtoH_v2)(h, d, N));
    CHECK(memcmp(h, want, N) == 0);
    OK(CU(cuMemFree_v2)(d));
    OK(CU(cuStreamDestroy_v2)(s));
}

/* ---- stream memory operations ---- */

struct later_write {
    CUcontext ctx;
    CUdeviceptr addr;
    uint32_t value;
};

/* Another thread: 100 ms later, a stream write of the word. */
static void *write_later(void *arg)
{
    struct later_write *w = arg;
    usleep(100 * 1000);
    CU(cuCtxSetCurrent)(w->ctx);
    CU(cuStreamWriteValue32_v2)(NULL, w->addr, w->value, 0);
    return NULL;
}

static uint64_t word_at(CUdeviceptr d, size_t off, size_t n)
{
    uint64_t v = 0;
    OK(CU(cuMemcpyDtoH_v2)(&v, d + off, n));
    return v;
}

static void stream_memory_operations_write_and_wait_on_device_words(void)
{
    CUcontext ctx = setup(1, NULL);
    CUdeviceptr d = 0;
    OK(CU(cuMemAlloc_v2)(&d, 4096));
    OK(CU(cuMemsetD8_v2)(d, 0, 4096));
    CUstream s;
    OK(CU(cuStreamCreate)(&s, 0));

    /* Writes, each entry point at a word of its own. */
    OK(CU(cuStreamWriteValue32_v2)(s, d, 0x12345678u, 0));
    OK(CU(cuStreamWriteValue64_v2)(s, d + 8, 0x1122334455667788ull, 0));
    OK(CU(cuStreamWriteValue32)(s, d + 16, 7, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER));
    OK(CU(cuStreamWriteValue64)(s, d + 24, 8, 0));
    OK(CU(cuStreamWriteValue32_v2_ptsz)(NULL, d + 32, 9, 0));
    OK(CU(cuStreamWriteValue64_v2_ptsz)(NULL, d + 40, 10, 0));
    OK(CU(cuStreamWriteValue32_ptsz)(NULL, d + 48, 11, 0));
    OK(CU(cuStreamWriteValue64_ptsz)(NULL, d + 56, 12, 0));
    OK(CU(cuStreamSynchronize)(s));
    CHECK_EQ(word_at(d, 0, 8), 0x12345678u); /* the next 4 bytes untouched */
    CHECK_EQ(word_at(d, 8, 8), 0x1122334455667788ull);
    for (size_t i = 0; i < 6; i++)
        CHECK_EQ(word_at(d, 16 + 8 * i, 8), 7 + i);

    /* Waits already satisfied return at once, by each condition. */
    double t0 = mono_s();
    OK(CU(cuStreamWaitValue32_v2)(s, d, 0x12345678u, CU_STREAM_WAIT_VALUE_EQ));
    OK(CU(cuStreamWaitValue32_v2)(s, d, 0x12345670u, CU_STREAM_WAIT_VALUE_GEQ));
    OK(CU(cuStreamWaitValue32_v2)(s, d, 0xFFFFFFF0u, CU_STREAM_WAIT_VALUE_GEQ)); /* cyclic */
    OK(CU(cuStreamWaitValue32_v2)(s, d, 0x8u, CU_STREAM_WAIT_VALUE_AND));
    OK(CU(cuStreamWaitValue32_v2)(s, d, 0x0u, CU_STREAM_WAIT_VALUE_NOR));
    OK(CU(cuStreamWaitValue64_v2)(s, d + 8, 0x1122334455667788ull, CU_STREAM_WAIT_VALUE_EQ));
    OK(CU(cuStreamWaitValue32)(s, d + 16, 7, CU_STREAM_WAIT_VALUE_EQ | CU_STREAM_WAIT_VALUE_FLUSH));
    OK(CU(cuStreamWaitValue64)(s, d + 24, 8, CU_STREAM_WAIT_VALUE_GEQ));
    OK(CU(cuStreamWaitValue32_v2_ptsz)(NULL, d + 32, 9, CU_STREAM_WAIT_VALUE_EQ));
    OK(CU(cuStreamWaitValue64_v2_ptsz)(NULL, d + 40, 10, CU_STREAM_WAIT_VALUE_EQ));
    OK(CU(cuStreamWaitValue32_ptsz)(NULL, d + 48, 11, CU_STREAM_WAIT_VALUE_EQ));
    OK(CU(cuStreamWaitValue64_ptsz)(NULL, d + 56, 12, CU_STREAM_WAIT_VALUE_EQ));
    CHECK(mono_s() - t0 < 0.5);

    /* A wait that another thread's write satisfies 100 ms later. */
    struct later_write lw = {ctx, d + 64, 5};
    pthread_t th;
    t0 = mono_s();
    pthread_create(&th, NULL, write_later, &lw);
    OK(CU(cuStreamWaitValue32_v2)(s, d + 64, 5, CU_STREAM_WAIT_VALUE_EQ));
    double waited = mono_s() - t0;
    pthread_join(th, NULL);
    CHECK(waited >= 0.09 && waited < 5.0);

    /* A batch: a wait, two writes, a barrier and a flush, in order. */
    CUstreamBatchMemOpParams ops[5];
    memset(ops, 0, sizeof ops);
    ops[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[0].waitValue.address = d + 64;
    ops[0].waitValue.value = 5;
    ops[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[1].writeValue.address = d + 72;
    ops[1].writeValue.value = 0xCAFEF00Du;
    ops[2].operation = CU_STREAM_MEM_OP_BARRIER;
    ops[3].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[3].writeValue.address = d + 80;
    ops[3].writeValue.value64 = 0x0123456789ABCDEFull;
    ops[4].operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
    OK(CU(cuStreamBatchMemOp_v2)(s, 5, ops, 0));
    CHECK_EQ(word_at(d, 72, 8), 0xCAFEF00Du);
    CHECK_EQ(word_at(d, 80, 8), 0x0123456789ABCDEFull);
    ops[1].writeValue.value = 1;
    OK(CU(cuStreamBatchMemOp)(s, 2, ops, 0));
    CHECK_EQ(word_at(d, 72, 4), 1);
    ops[1].writeValue.value = 2;
    OK(CU(cuStreamBatchMemOp_v2_ptsz)(NULL, 2, ops, 0));
    CHECK_EQ(word_at(d, 72, 4), 2);
    ops[1].writeValue.value = 3;
    OK(CU(cuStreamBatchMemOp_ptsz)(NULL, 2, ops, 0));
    CHECK_EQ(word_at(d, 72, 4), 3);

    /* Refused before anything runs: a bad operation later in the batch,
     * unaligned words, unknown flags, too many operations, flags, a bad
     * stream, a word past the allocation. */
    ops[1].writeValue.value = 4;
    ops[2].operation = (CUstreamBatchMemOpType)9;
    CHECK_RC(CU(cuStreamBatchMemOp_v2)(s, 3, ops, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(word_at(d, 72, 4), 3);
    CHECK_RC(CU(cuStreamBatchMemOp_v2)(s, 256, ops, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuStreamBatchMemOp_v2)(s, 1, ops, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuStreamBatchMemOp_v2)(s, 1, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuStreamWriteValue32_v2)(s, d + 2, 1, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuStreamWriteValue64_v2)(s, d + 4, 1, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuStreamWriteValue32_v2)(s, d, 1, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuStreamWaitValue32_v2)(s, d, 0, 4), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuStreamWriteValue32_v2)((CUstream)(uintptr_t)0x1234, d, 1, 0),
             CUDA_ERROR_INVALID_HANDLE);
    CHECK_RC(CU(cuStreamWriteValue64_v2)(s, d + 4096, 1, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(word_at(d, 0, 8), 0x12345678u);
    OK(CU(cuMemFree_v2)(d));
    CHECK_RC(CU(cuStreamWaitValue32_v2)(s, d, 0, CU_STREAM_WAIT_VALUE_GEQ),
             CUDA_ERROR_INVALID_VALUE); /* freed */
    OK(CU(cuStreamDestroy_v2)(s));
}

/* ---- cooperative launch ---- */

static const char busy_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                               ".visible .entry tessera_busy_ns(\n\t.param .u64 ns\n)\n{\n\tret;"
                               "\n}\n";

static void cooperative_launches_keep_the_gpu_busy_and_refuse_a_grid_too_large(void)
{
    setup(1, NULL);
    int coop = 0, sms = 0;
    OK(CU(cuDeviceGetAttribute)(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 0));
    OK(CU(cuDeviceGetAttribute)(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    CHECK_EQ(coop, 1);
    CUmodule m;
    CUfunction f;
    OK(CU(cuModuleLoadData)(&m, busy_ptx));
    OK(CU(cuModuleGetFunction)(&f, m, "tessera_busy_ns"));
    CUstream s;
    OK(CU(cuStreamCreate)(&s, 0));
    uint64_t ns = 150 * 1000 * 1000;
    void *params[] = {&ns};
    double t0 = mono_s();
    /* Two blocks of 1024 threads per multiprocessor (2048 threads) fit. */
    OK(CU(cuLaunchCooperativeKernel)(f, (unsigned)sms, 2, 1, 1024, 1, 1, 0, s, params));
    OK(CU(cuLaunchCooperativeKernel_ptsz)(f, 1, 1, 1, 32, 1, 1, 0, s, params));
    CHECK(mono_s() - t0 < 0.1); /* asynchronous */
    CHECK_RC(CU(cuStreamQuery)(s), CUDA_ERROR_NOT_READY);
    OK(CU(cuStreamSynchronize)(s));
    double waited = mono_s() - t0;
    CHECK(waited >= 0.29 && waited < 2.0); /* two kernels of 150 ms */

    CHECK_RC(
        CU(cuLaunchCooperativeKernel)(f, (unsigned)sms * 2 + 1, 1, 1, 1024, 1, 1, 0, s, params),
        CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    CHECK_RC(CU(cuLaunchCooperativeKernel)(f, 1, 1, 1, 2048, 1, 1, 0, s, params),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuLaunchCooperativeKernel)(f, 0, 1, 1, 32, 1, 1, 0, s, params),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(
        CU(cuLaunchCooperativeKernel)(f, 1, 1, 1, 32, 1, 1, 0, (CUstream)(uintptr_t)0x1234, params),
        CUDA_ERROR_INVALID_HANDLE);
    CHECK_RC(
        CU(cuLaunchCooperativeKernel)((CUfunction)(uintptr_t)0x99, 1, 1, 1, 32, 1, 1, 0, s, params),
        CUDA_ERROR_INVALID_HANDLE);
    OK(CU(cuStreamDestroy_v2)(s));
}

/* ---- lookup and failure injection ---- */

/* Base name -> what cuGetProcAddress hands out at CUDA 12000, plain and
 * per-thread. */
static const struct {
    const char *base, *plain, *per_thread;
} proc_names[] = {
    {"cuMemcpy3D", "cuMemcpy3D_v2", "cuMemcpy3D_v2_ptds"},
    {"cuMemcpy3DAsync", "cuMemcpy3DAsync_v2", "cuMemcpy3DAsync_v2_ptsz"},
    {"cuMemcpy3DPeer", "cuMemcpy3DPeer", "cuMemcpy3DPeer_ptds"},
    {"cuMemcpy3DPeerAsync", "cuMemcpy3DPeerAsync", "cuMemcpy3DPeerAsync_ptsz"},
    {"cuMemcpyPeer", "cuMemcpyPeer", "cuMemcpyPeer_ptds"},
    {"cuMemcpyPeerAsync", "cuMemcpyPeerAsync", "cuMemcpyPeerAsync_ptsz"},
    {"cuMemsetD16Async", "cuMemsetD16Async", "cuMemsetD16Async_ptsz"},
    {"cuMemsetD2D8", "cuMemsetD2D8_v2", "cuMemsetD2D8_v2_ptds"},
    {"cuMemsetD2D16", "cuMemsetD2D16_v2", "cuMemsetD2D16_v2_ptds"},
    {"cuMemsetD2D32", "cuMemsetD2D32_v2", "cuMemsetD2D32_v2_ptds"},
    {"cuMemsetD2D8Async", "cuMemsetD2D8Async", "cuMemsetD2D8Async_ptsz"},
    {"cuMemsetD2D16Async", "cuMemsetD2D16Async", "cuMemsetD2D16Async_ptsz"},
    {"cuMemsetD2D32Async", "cuMemsetD2D32Async", "cuMemsetD2D32Async_ptsz"},
    {"cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz"},
    {"cuStreamWriteValue32", "cuStreamWriteValue32_v2", "cuStreamWriteValue32_v2_ptsz"},
    {"cuStreamWriteValue64", "cuStreamWriteValue64_v2", "cuStreamWriteValue64_v2_ptsz"},
    {"cuStreamWaitValue32", "cuStreamWaitValue32_v2", "cuStreamWaitValue32_v2_ptsz"},
    {"cuStreamWaitValue64", "cuStreamWaitValue64_v2", "cuStreamWaitValue64_v2_ptsz"},
    {"cuStreamBatchMemOp", "cuStreamBatchMemOp_v2", "cuStreamBatchMemOp_v2_ptsz"},
};

static void *proc(const char *base, int version, cuuint64_t flags)
{
    void *fn = NULL;
    OK(CU(cuGetProcAddress_v2)(base, &fn, version, flags, NULL));
    return fn;
}

static void get_proc_address_hands_out_each_version_and_flavour(void)
{
    setup(1, NULL);
    for (size_t i = 0; i < TS_ARRAY_LEN(proc_names); i++) {
        const char *b = proc_names[i].base;
        void *plain = sg_sym(cu_lib, proc_names[i].plain);
        void *pt = sg_sym(cu_lib, proc_names[i].per_thread);
        if (proc(b, 12000, CU_GET_PROC_ADDRESS_DEFAULT) != plain ||
            proc(b, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM) != plain ||
            proc(b, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != pt) {
            fprintf(stderr, "%s: not %s / %s\n", b, proc_names[i].plain, proc_names[i].per_thread);
            sg_failures++;
        }
    }
    /* CUDA 11 programs get the first version of the stream memory
     * operations (and its per-thread flavour). */
    CHECK(proc("cuStreamWaitValue32", 11080, 0) == sg_sym(cu_lib, "cuStreamWaitValue32"));
    CHECK(proc("cuStreamBatchMemOp", 11030, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ==
          sg_sym(cu_lib, "cuStreamBatchMemOp_ptsz"));
    CHECK(proc("cuMemcpy3D", 11030, 0) == sg_sym(cu_lib, "cuMemcpy3D_v2"));
}

static void injected_failures_count_the_flavours_with_the_plain_call(void)
{
    setenv("TESSERA_SIMGPU_FAIL",
           "cuMemcpyPeer:2,cuMemsetD2D8_v2:1,cuStreamWriteValue32_v2:2,cuLaunchCooperativeKernel:1",
           1);
    CUcontext c = setup(1, NULL);
    CUdeviceptr d = alloc_filled(64);
    OK(CU(cuMemcpyPeer)(d, c, d + 32, c, 16));
    CHECK_RC(CU(cuMemcpyPeer_ptds)(d, c, d + 32, c, 16), CUDA_ERROR_UNKNOWN);
    CHECK_RC(CU(cuMemsetD2D8_v2_ptds)(d, 64, 0, 1, 1), CUDA_ERROR_UNKNOWN);
    OK(CU(cuMemsetD2D8_v2)(d, 64, 0, 1, 1));
    OK(CU(cuStreamWriteValue32)(NULL, d, 1, 0));
    CHECK_RC(CU(cuStreamWriteValue32_v2_ptsz)(NULL, d, 2, 0), CUDA_ERROR_UNKNOWN);
    CHECK_EQ(word_at(d, 0, 4), 1);
    CUmodule m;
    CUfunction f;
    OK(CU(cuModuleLoadData)(&m, busy_ptx));
    OK(CU(cuModuleGetFunction)(&f, m, "tessera_busy_ns"));
    uint64_t ns = 0;
    void *params[] = {&ns};
    CHECK_RC(CU(cuLaunchCooperativeKernel_ptsz)(f, 1, 1, 1, 32, 1, 1, 0, NULL, params),
             CUDA_ERROR_LAUNCH_FAILED);
    OK(CU(cuLaunchCooperativeKernel)(f, 1, 1, 1, 32, 1, 1, 0, NULL, params));
    OK(CU(cuMemFree_v2)(d));
    unsetenv("TESSERA_SIMGPU_FAIL");
}

/* A context is bound to one device, as on a GPU: a function loaded in the
 * context of GPU 0 and a stream made there launch only in it, and memory
 * of the virtual memory API created on GPU 1 and opened to GPU 1 only is
 * reached by copies and by the computing kernel (add_u32) from GPU 1's
 * context, never from GPU 0's. Kernels count on the GPU of their context. */
static const char add_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry tessera_add_u32(\n"
                              ".param .u64 p, .param .u32 n, .param .u32 v)\n{\nret;\n}\n";

static void a_context_reaches_only_its_own_device(void)
{
    CUcontext c1 = NULL, c0 = setup(2, &c1);
    CUmodule m0, m1;
    CUfunction f0, f1;
    CUstream s0, s1;
    OK(CU(cuModuleLoadData)(&m0, add_ptx));
    OK(CU(cuModuleGetFunction)(&f0, m0, "tessera_add_u32"));
    OK(CU(cuStreamCreate)(&s0, 0));
    OK(CU(cuCtxSetCurrent)(c1));
    OK(CU(cuModuleLoadData)(&m1, add_ptx));
    OK(CU(cuModuleGetFunction)(&f1, m1, "tessera_add_u32"));
    OK(CU(cuStreamCreate)(&s1, 0));
    /* 2 MiB on GPU 1, mapped, opened to GPU 1 */
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 1;
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h = 0;
    OK(CU(cuMemAddressReserve)(&va, 2 * MiB, 0, 0, 0));
    OK(CU(cuMemCreate)(&h, 2 * MiB, &prop, 0));
    OK(CU(cuMemMap)(va, 2 * MiB, 0, h, 0));
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    OK(CU(cuMemSetAccess)(va, 2 * MiB, &acc, 1));
    uint32_t words[4] = {1, 2, 3, 4}, back[4] = {0};
    OK(CU(cuMemcpyHtoD_v2)(va, words, sizeof words));
    unsigned int n = 4, v = 10;
    void *params[] = {&va, &n, &v};
    uint64_t k0 = 0, k1 = 0;
    struct ts_simgpu_dev g0, g1;
    OK(ts_simgpu_open(sg_dir, 0, &g0));
    OK(ts_simgpu_open(sg_dir, 1, &g1));
    k0 = atomic_load(&g0.st->kernels);
    k1 = atomic_load(&g1.st->kernels);
    /* in GPU 1's context: its function, its stream, its memory */
    OK(CU(cuLaunchKernel)(f1, 1, 1, 1, 32, 1, 1, 0, s1, params, NULL));
    OK(CU(cuStreamSynchronize)(s1));
    OK(CU(cuMemcpyDtoH_v2)(back, va, sizeof back));
    CHECK_EQ(back[0], 11);
    CHECK_EQ(back[3], 14);
    CHECK_EQ(atomic_load(&g1.st->kernels), k1 + 1);
    CHECK_EQ(atomic_load(&g0.st->kernels), k0);
    /* GPU 0's function or stream in GPU 1's context */
    CHECK_RC(CU(cuLaunchKernel)(f0, 1, 1, 1, 32, 1, 1, 0, s1, params, NULL),
             CUDA_ERROR_INVALID_CONTEXT);
    CHECK_RC(CU(cuLaunchKernel)(f1, 1, 1, 1, 32, 1, 1, 0, s0, params, NULL),
             CUDA_ERROR_INVALID_CONTEXT);
    /* GPU 0's context cannot reach GPU 1's mapping: copies nor kernels */
    OK(CU(cuCtxSetCurrent)(c0));
    CHECK_RC(CU(cuMemcpyDtoH_v2)(back, va, sizeof back), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemcpyHtoD_v2)(va, words, sizeof words), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuMemsetD8_v2)(va, 0, 16), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(CU(cuLaunchKernel)(f0, 1, 1, 1, 32, 1, 1, 0, s0, params, NULL),
             CUDA_ERROR_ILLEGAL_ADDRESS);
    /* opened to GPU 0 as well, the copy reaches it; the kernel of GPU 0
     * still faults on memory that lives on GPU 1 (no peer access here) */
    CUmemAccessDesc both[2] = {acc, acc};
    both[1].location.id = 0;
    OK(CU(cuMemSetAccess)(va, 2 * MiB, both, 2));
    OK(CU(cuMemcpyDtoH_v2)(back, va, sizeof back));
    CHECK_EQ(back[0], 11);
    CHECK_RC(CU(cuLaunchKernel)(f0, 1, 1, 1, 32, 1, 1, 0, s0, params, NULL),
             CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_EQ(atomic_load(&g0.st->kernels), k0);
    OK(CU(cuMemUnmap)(va, 2 * MiB));
    OK(CU(cuMemRelease)(h));
    OK(CU(cuMemAddressFree)(va, 2 * MiB));
    ts_simgpu_close(&g0);
    ts_simgpu_close(&g1);
}

/* clang-format off */
static const struct sg_case cases[] = {
#define CASE(f) SG_CASE(f)
    CASE(three_d_copies_move_slices_with_pitches_and_refuse_bad_ranges),
    CASE(peer_copies_move_bytes_between_two_gpus_and_check_contexts),
    CASE(two_d_memsets_fill_rows_and_leave_the_gaps),
    CASE(stream_memory_operations_write_and_wait_on_device_words),
    CASE(cooperative_launches_keep_the_gpu_busy_and_refuse_a_grid_too_large),
    CASE(get_proc_address_hands_out_each_version_and_flavour),
    CASE(injected_failures_count_the_flavours_with_the_plain_call),
    CASE(a_context_reaches_only_its_own_device),
#undef CASE
};
/* clang-format on */

int main(int argc, char **argv)
{
    return sg_main("simgpu_ops_test", cases, TS_ARRAY_LEN(cases), argc, argv);
}
