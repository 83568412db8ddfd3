/*
 * shim_probe_gated.c - the probe's gated:NAME:B steps: one driver function
 * that touches device memory or gives the GPU work, called by its exported
 * name as the first GPU call of the step, then ordinary copies to check
 * every byte it could have changed (and to put the pattern back, so that
 * the next step starts from it). swapnode_test.c runs each one right after
 * a swap-out: the call itself must bring the memory back, since before it
 * nothing of the step is gated (finding contexts and loading a module are
 * not), and simgpu refuses device memory that is not mapped.
 *
 * Families, by name: cuMemcpy3D* (device -> host, 3D), cuMemcpy3DPeer*
 * (device 0 -> device 1, 3D), cuMemcpyPeer* (device 0 -> device 1),
 * cuMemsetD2D* (rows of 1 KiB in a pitch of 4 KiB), cuMemsetD16Async*,
 * cuStreamWriteValue*, cuStreamWaitValue* (a wait the pattern satisfies),
 * cuStreamBatchMemOp* (a wait and two writes), cuLaunchCooperativeKernel*
 * (checks nothing: the test reads the ledger instead). The flavour is the
 * name's: _ptds / _ptsz, Async (the NULL stream, then a synchronize), the
 * CUDA 11 stream operations or their _v2.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/shim/shim_probe.h"

#define ROW 1024 /* bytes of a row of the 2D and 3D layouts */

typedef CUresult (*f_copy)(void *, CUdeviceptr, size_t);
typedef CUresult (*f_put)(CUdeviceptr, const void *, size_t);
typedef CUresult (*f_set8)(CUdeviceptr, unsigned char, size_t);
typedef CUresult (*f_sync)(void);
typedef CUresult (*f_getctx)(CUcontext *);
typedef CUresult (*f_retain)(CUcontext *, CUdevice);
typedef CUresult (*f_3d)(const CUDA_MEMCPY3D *);
typedef CUresult (*f_3d_async)(const CUDA_MEMCPY3D *, CUstream);
typedef CUresult (*f_3dp)(const CUDA_MEMCPY3D_PEER *);
typedef CUresult (*f_3dp_async)(const CUDA_MEMCPY3D_PEER *, CUstream);
typedef CUresult (*f_peer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
typedef CUresult (*f_peer_async)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
typedef CUresult (*f_2d8)(CUdeviceptr, size_t, unsigned char, size_t, size_t);
typedef CUresult (*f_2d16)(CUdeviceptr, size_t, unsigned short, size_t, size_t);
typedef CUresult (*f_2d32)(CUdeviceptr, size_t, unsigned int, size_t, size_t);
typedef CUresult (*f_2d8_async)(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream);
typedef CUresult (*f_2d16_async)(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream);
typedef CUresult (*f_2d32_async)(CUdeviceptr, size_t, unsigned int, size_t, size_t, CUstream);
typedef CUresult (*f_d16_async)(CUdeviceptr, unsigned short, size_t, CUstream);
typedef CUresult (*f_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*f_value64)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
typedef CUresult (*f_batch)(CUstream, unsigned int, CUstreamBatchMemOpParams *, unsigned int);
typedef CUresult (*f_modload)(CUmodule *, const void *);
typedef CUresult (*f_getfn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*f_coop)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void **);

static bool has(const char *name, const char *part)
{
    return strstr(name, part) != NULL;
}

/* After the call under test: ordinary, gated calls. */
static CUresult sync_all(void)
{
    f_sync fn = (f_sync)probe_find("cuCtxSynchronize");
    return fn ? fn() : CUDA_ERROR_NOT_FOUND;
}

static CUresult read_back(void *host, CUdeviceptr dev, size_t n)
{
    f_copy fn = (f_copy)probe_find("cuMemcpyDtoH_v2");
    return fn ? fn(host, dev, n) : CUDA_ERROR_NOT_FOUND;
}

static CUresult clear(CUdeviceptr dev, size_t n)
{
    f_set8 fn = (f_set8)probe_find("cuMemsetD8_v2");
    return fn ? fn(dev, 0, n) : CUDA_ERROR_NOT_FOUND;
}

/* The pattern back over the first n bytes of dev. */
static CUresult restore(CUdeviceptr dev, size_t n)
{
    unsigned char *buf = malloc(n);
    f_put fn = (f_put)probe_find("cuMemcpyHtoD_v2");
    if (!buf || !fn) {
        free(buf);
        return CUDA_ERROR_NOT_FOUND;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = probe_pattern(i);
    CUresult rc = fn(dev, buf, n);
    free(buf);
    return rc;
}

/* The contexts of devices 0 (current) and 1: not gated. */
/* Make ctx current (device 1's memory is read and cleared from its own
 * context: memory of the virtual memory API is reached only from the
 * devices it was opened to). */
static CUresult set_ctx(CUcontext ctx)
{
    CUresult (*set)(CUcontext) = (CUresult(*)(CUcontext))probe_find("cuCtxSetCurrent");
    return set ? set(ctx) : CUDA_ERROR_NOT_FOUND;
}

static CUresult contexts(CUcontext *c0, CUcontext *c1)
{
    f_getctx get = (f_getctx)probe_find("cuCtxGetCurrent");
    f_retain retain = (f_retain)probe_find("cuDevicePrimaryCtxRetain");
    if (!get || !retain)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = get(c0);
    return rc == CUDA_SUCCESS ? retain(c1, 1) : rc;
}

/* ---- copies ---- */

/* cuMemcpy3D*: n / 4 KiB slices of 4 rows of 1 KiB (contiguous on the
 * device) into host slices of 6 rows of 1.5 KiB, from x = 128, y = 1. */
static CUresult copy_3d(const char *name, CUdeviceptr dev, size_t n, size_t *bad)
{
    enum { HP = 1536, HH = 6, X = 128 };
    size_t depth = n / (4 * ROW);
    unsigned char *host = calloc(depth * HH, HP);
    if (!host)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUDA_MEMCPY3D c = {0};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = dev;
    c.srcPitch = ROW;
    c.srcHeight = 4;
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = host;
    c.dstXInBytes = X;
    c.dstY = 1;
    c.dstPitch = HP;
    c.dstHeight = HH;
    c.WidthInBytes = ROW;
    c.Height = 4;
    c.Depth = depth;
    void *fn = probe_find(name);
    CUresult rc = !fn                  ? CUDA_ERROR_NOT_FOUND
                  : has(name, "Async") ? ((f_3d_async)fn)(&c, NULL)
                                       : ((f_3d)fn)(&c);
    if (rc == CUDA_SUCCESS && has(name, "Async"))
        rc = sync_all();
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++) {
        size_t k = i / (4 * ROW), r = i / ROW % 4, x = i % ROW;
        *bad += host[(k * HH + 1 + r) * HP + X + x] != probe_pattern(i);
    }
    free(host);
    return rc;
}

/* cuMemcpy3DPeer*: the same slices into device 1's rows of 2 KiB. */
static CUresult copy_3d_peer(const char *name, CUdeviceptr dev, CUdeviceptr peer, size_t n,
                             size_t *bad)
{
    CUcontext c0 = NULL, c1 = NULL;
    CUresult rc = contexts(&c0, &c1);
    CUDA_MEMCPY3D_PEER c = {0};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = dev;
    c.srcContext = c0;
    c.srcPitch = ROW;
    c.srcHeight = 4;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = peer;
    c.dstContext = c1;
    c.dstPitch = 2 * ROW;
    c.dstHeight = 4;
    c.WidthInBytes = ROW;
    c.Height = 4;
    c.Depth = n / (4 * ROW);
    void *fn = probe_find(name);
    if (rc == CUDA_SUCCESS)
        rc = !fn                  ? CUDA_ERROR_NOT_FOUND
             : has(name, "Async") ? ((f_3dp_async)fn)(&c, NULL)
                                  : ((f_3dp)fn)(&c);
    if (rc == CUDA_SUCCESS && has(name, "Async"))
        rc = sync_all();
    unsigned char *back = malloc(2 * n);
    if (rc == CUDA_SUCCESS)
        rc = set_ctx(c1);
    if (rc == CUDA_SUCCESS)
        rc = back ? read_back(back, peer, 2 * n) : CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++)
        *bad += back[(i / ROW) * 2 * ROW + i % ROW] != probe_pattern(i);
    free(back);
    if (rc == CUDA_SUCCESS)
        rc = clear(peer, 2 * n);
    CUresult back0 = set_ctx(c0);
    return rc == CUDA_SUCCESS ? back0 : rc;
}

/* cuMemcpyPeer*: n bytes from device 0 to device 1. */
static CUresult copy_peer(const char *name, CUdeviceptr dev, CUdeviceptr peer, size_t n,
                          size_t *bad)
{
    CUcontext c0 = NULL, c1 = NULL;
    CUresult rc = contexts(&c0, &c1);
    void *fn = probe_find(name);
    if (rc == CUDA_SUCCESS)
        rc = !fn                  ? CUDA_ERROR_NOT_FOUND
             : has(name, "Async") ? ((f_peer_async)fn)(peer, c1, dev, c0, n, NULL)
                                  : ((f_peer)fn)(peer, c1, dev, c0, n);
    if (rc == CUDA_SUCCESS && has(name, "Async"))
        rc = sync_all();
    unsigned char *back = malloc(n);
    if (rc == CUDA_SUCCESS)
        rc = set_ctx(c1);
    if (rc == CUDA_SUCCESS)
        rc = back ? read_back(back, peer, n) : CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++)
        *bad += back[i] != probe_pattern(i);
    free(back);
    if (rc == CUDA_SUCCESS)
        rc = clear(peer, n);
    CUresult back0 = set_ctx(c0);
    return rc == CUDA_SUCCESS ? back0 : rc;
}

/* ---- memsets ---- */

/* n bytes read back: where want_at(i) is >= 0 that byte, else the
 * pattern; then the pattern back. */
static CUresult check_and_restore(CUdeviceptr dev, size_t n, int (*want_at)(size_t), size_t *bad)
{
    unsigned char *back = malloc(n);
    CUresult rc = back ? read_back(back, dev, n) : CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++) {
        int w = want_at(i);
        *bad += back[i] != (w >= 0 ? (unsigned char)w : probe_pattern(i));
    }
    free(back);
    return rc == CUDA_SUCCESS ? restore(dev, n) : rc;
}

#define VALUE32 0xA5C3E1F7u /* little-endian bytes F7 E1 C3 A5 */

static int want_d2d8(size_t i)
{
    return i % (4 * ROW) < ROW ? 0xF7 : -1;
}

static int want_d2d16(size_t i)
{
    return i % (4 * ROW) < ROW ? (int)((VALUE32 >> (8 * (i % 2))) & 0xFF) : -1;
}

static int want_d2d32(size_t i)
{
    return i % (4 * ROW) < ROW ? (int)((VALUE32 >> (8 * (i % 4))) & 0xFF) : -1;
}

static int want_d16(size_t i)
{
    return (int)((VALUE32 >> (8 * (i % 2))) & 0xFF);
}

/* cuMemsetD2D*: the first 1 KiB of each 4 KiB row, the rest untouched. */
static CUresult memset_2d(const char *name, CUdeviceptr dev, size_t n, size_t *bad)
{
    void *fn = probe_find(name);
    size_t h = n / (4 * ROW);
    bool async = has(name, "Async");
    CUresult rc = CUDA_ERROR_NOT_FOUND;
    int (*want)(size_t) = want_d2d8;
    if (fn && has(name, "D2D8") && async)
        rc = ((f_2d8_async)fn)(dev, 4 * ROW, 0xF7, ROW, h, NULL);
    else if (fn && has(name, "D2D8"))
        rc = ((f_2d8)fn)(dev, 4 * ROW, 0xF7, ROW, h);
    else if (fn && has(name, "D2D16") && async)
        rc = ((f_2d16_async)fn)(dev, 4 * ROW, (unsigned short)VALUE32, ROW / 2, h, NULL);
    else if (fn && has(name, "D2D16"))
        rc = ((f_2d16)fn)(dev, 4 * ROW, (unsigned short)VALUE32, ROW / 2, h);
    else if (fn && async)
        rc = ((f_2d32_async)fn)(dev, 4 * ROW, VALUE32, ROW / 4, h, NULL);
    else if (fn)
        rc = ((f_2d32)fn)(dev, 4 * ROW, VALUE32, ROW / 4, h);
    if (has(name, "D2D16"))
        want = want_d2d16;
    else if (has(name, "D2D32"))
        want = want_d2d32;
    if (rc == CUDA_SUCCESS && async)
        rc = sync_all();
    return rc == CUDA_SUCCESS ? check_and_restore(dev, n, want, bad) : rc;
}

/* cuMemsetD16Async*: all n bytes. */
static CUresult memset_d16(const char *name, CUdeviceptr dev, size_t n, size_t *bad)
{
    f_d16_async fn = (f_d16_async)probe_find(name);
    CUresult rc = fn ? fn(dev, (unsigned short)VALUE32, n / 2, NULL) : CUDA_ERROR_NOT_FOUND;
    if (rc == CUDA_SUCCESS)
        rc = sync_all();
    return rc == CUDA_SUCCESS ? check_and_restore(dev, n, want_d16, bad) : rc;
}

/* ---- stream memory operations, on the words at offsets 8, 16 and 24 ---- */

#define WORD32 0xCAFEF00Du
#define WORD64 0x0123456789ABCDEFull

static uint64_t pattern_word(size_t off, size_t bytes)
{
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; i++)
        v |= (uint64_t)probe_pattern(off + i) << (8 * i);
    return v;
}

static int want_words(size_t i)
{
    if (i >= 16 && i < 20)
        return (int)((WORD32 >> (8 * (i - 16))) & 0xFF);
    if (i >= 24 && i < 32)
        return (int)((WORD64 >> (8 * (i - 24))) & 0xFF);
    return -1;
}

/* cuStreamWriteValue*: WORD32 at 16 or WORD64 at 24. */
static CUresult write_value(const char *name, CUdeviceptr dev, size_t *bad)
{
    void *fn = probe_find(name);
    bool wide = has(name, "64");
    CUresult rc = !fn    ? CUDA_ERROR_NOT_FOUND
                  : wide ? ((f_value64)fn)(NULL, dev + 24, WORD64, 0)
                         : ((f_value32)fn)(NULL, dev + 16, WORD32, 0);
    if (rc == CUDA_SUCCESS)
        rc = sync_all();
    unsigned char back[64];
    if (rc == CUDA_SUCCESS)
        rc = read_back(back, dev, sizeof back);
    for (size_t i = 0; rc == CUDA_SUCCESS && i < sizeof back; i++) {
        bool written = wide ? i >= 24 && i < 32 : i >= 16 && i < 20;
        *bad += back[i] != (written ? (unsigned char)want_words(i) : probe_pattern(i));
    }
    return rc == CUDA_SUCCESS ? restore(dev, sizeof back) : rc;
}

/* cuStreamWaitValue*: EQ to what the pattern holds at 8, so it returns at
 * once when the memory came back, and fails when it is not there. */
static CUresult wait_value(const char *name, CUdeviceptr dev)
{
    void *fn = probe_find(name);
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    if (has(name, "64"))
        return ((f_value64)fn)(NULL, dev + 8, pattern_word(8, 8), CU_STREAM_WAIT_VALUE_EQ);
    return ((f_value32)fn)(NULL, dev + 8, (cuuint32_t)pattern_word(8, 4), CU_STREAM_WAIT_VALUE_EQ);
}

/* cuStreamBatchMemOp*: the wait of wait_value, then both writes. */
static CUresult batch(const char *name, CUdeviceptr dev, size_t *bad)
{
    CUstreamBatchMemOpParams ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[0].waitValue.address = dev + 8;
    ops[0].waitValue.value = (cuuint32_t)pattern_word(8, 4);
    ops[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[1].writeValue.address = dev + 16;
    ops[1].writeValue.value = WORD32;
    ops[2].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[2].writeValue.address = dev + 24;
    ops[2].writeValue.value64 = WORD64;
    f_batch fn = (f_batch)probe_find(name);
    CUresult rc = fn ? fn(NULL, 3, ops, 0) : CUDA_ERROR_NOT_FOUND;
    if (rc == CUDA_SUCCESS)
        rc = sync_all();
    return rc == CUDA_SUCCESS ? check_and_restore(dev, 64, want_words, bad) : rc;
}

/* ---- cooperative launch: a busy kernel of 1 ms, nothing else gated ---- */

static CUresult launch_coop(const char *name)
{
    static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry tessera_busy_ns(\n\t.param .u64 ns\n)\n"
                              "{\n\tret;\n}\n";
    f_modload load = (f_modload)probe_find("cuModuleLoadData");
    f_getfn get = (f_getfn)probe_find("cuModuleGetFunction");
    f_coop fn = (f_coop)probe_find(name);
    if (!load || !get || !fn)
        return CUDA_ERROR_NOT_FOUND;
    CUmodule m = NULL;
    CUfunction f = NULL;
    unsigned long long ns = 1000000;
    void *params[] = {&ns};
    CUresult rc = load(&m, ptx);
    if (rc == CUDA_SUCCESS)
        rc = get(&f, m, "tessera_busy_ns");
    return rc == CUDA_SUCCESS ? fn(f, 1, 1, 1, 32, 1, 1, 0, NULL, params) : rc;
}

CUresult probe_gated(const char *name, CUdeviceptr dev, CUdeviceptr peer, size_t n, size_t *bad)
{
    *bad = 0;
    if (n == 0 || n % (4 * ROW) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (strncmp(name, "cuMemcpy3DPeer", 14) == 0)
        return copy_3d_peer(name, dev, peer, n, bad);
    if (strncmp(name, "cuMemcpy3D", 10) == 0)
        return copy_3d(name, dev, n, bad);
    if (strncmp(name, "cuMemcpyPeer", 12) == 0)
        return copy_peer(name, dev, peer, n, bad);
    if (strncmp(name, "cuMemsetD2D", 11) == 0)
        return memset_2d(name, dev, n, bad);
    if (strncmp(name, "cuMemsetD16Async", 16) == 0)
        return memset_d16(name, dev, n, bad);
    if (strncmp(name, "cuStreamWriteValue", 18) == 0)
        return write_value(name, dev, bad);
    if (strncmp(name, "cuStreamWaitValue", 17) == 0)
        return wait_value(name, dev);
    if (strncmp(name, "cuStreamBatchMemOp", 18) == 0)
        return batch(name, dev, bad);
    if (strncmp(name, "cuLaunchCooperativeKernel", 25) == 0)
        return launch_coop(name);
    return CUDA_ERROR_NOT_FOUND;
}
