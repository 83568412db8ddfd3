/*
 * cuda.c - simgpu's libcuda.so.1: the CUDA driver API over host memory and
 * the shared state files of state.h.
 *
 * Device pointers are host addresses of private mappings (MAP_NORESERVE, so
 * memory is backed only where it is written); physical allocations of the
 * virtual memory API are memfd files mapped MAP_SHARED into reserved ranges,
 * so they keep their contents while unmapped. Every device range used by a
 * call is checked against this process's table before it is touched: a bad
 * pointer is CUDA_ERROR_INVALID_VALUE, never a crash. Kernels do not run
 * code; a launch keeps the GPU busy for a duration (README.md, "Kernels").
 * Nothing here exits, aborts or prints to stdout.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#pragma GCC visibility push(default)
#include "agent/abi/cuda.h"
#pragma GCC visibility pop
#include "agent/simgpu/state.h"

#include "agent/simgpu/cuda_int.h"

struct CUevent_st {
    _Atomic uint64_t at_ns; /* 0 = never recorded */
};
struct phys {
    int fd;
    int ordinal;
    size_t size;
    int maps;      /* mu; mappings that use it */
    bool released; /* mu; cuMemRelease was called */
};

/* Process-wide state, set once by cuInit. */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
CUresult init_rc = CUDA_ERROR_NOT_INITIALIZED;
int ndev;
struct ts_simgpu_dev devs[TS_SIMGPU_MAX_GPUS]; /* by visible ordinal */
static struct CUctx_st ctxs[TS_SIMGPU_MAX_GPUS];
uint64_t kernel_ns_default;
static uint64_t bandwidth_env; /* TESSERA_SIMGPU_BANDWIDTH, 0 = use the file's */

/* Tables of this process, guarded by mu. Handles are checked against them. */
pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
struct region *regions;
size_t nregions;
static size_t cap_regions;
/* Handles handed out, one table per kind, so that a bad or stale handle is
 * CUDA_ERROR_INVALID_HANDLE and never dereferenced. */
struct table streams;
static struct table events, modules, physs;
struct table funcs;
static struct table contexts; /* created contexts alive */
static struct table ctx_pool; /* destroyed ones, for reuse */

/* Each thread's context stack; the current context is its top. */
#define CTX_STACK_MAX 64
static _Thread_local struct CUctx_st *ctx_stack[CTX_STACK_MAX];
static _Thread_local int ctx_depth;

_Thread_local struct CUctx_st *reach_ctx;

struct CUctx_st *cur(void)
{
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
}

bool grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, ncap * elem);
    if (!p)
        return false;
    *arr = p;
    *cap = ncap;
    return true;
}

size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

/* mu held for the three below. */
bool table_add(struct table *t, void *h)
{
    if (!grow((void **)&t->items, &t->cap, t->n, sizeof *t->items))
        return false;
    t->items[t->n++] = h;
    return true;
}

bool table_has(const struct table *t, const void *h)
{
    for (size_t i = 0; h && i < t->n; i++)
        if (t->items[i] == h)
            return true;
    return false;
}

bool table_del(struct table *t, const void *h)
{
    for (size_t i = 0; h && i < t->n; i++)
        if (t->items[i] == h) {
            t->items[i] = t->items[--t->n];
            return true;
        }
    return false;
}

/* table_has under mu. */
bool known(const struct table *t, const void *h)
{
    pthread_mutex_lock(&mu);
    bool ok = table_has(t, h);
    pthread_mutex_unlock(&mu);
    return ok;
}

bool region_add(struct region r)
{
    if (!grow((void **)&regions, &cap_regions, nregions, sizeof *regions))
        return false;
    regions[nregions++] = r;
    return true;
}

void region_remove(size_t i)
{
    regions[i] = regions[--nregions];
}

/* The ALLOC, MAP or HOST region holding va, or NULL. mu held. */
struct region *region_at(uint64_t va)
{
    for (size_t i = 0; i < nregions; i++) {
        struct region *r = &regions[i];
        if (r->kind != REGION_RESERVE && va >= r->va && va - r->va < r->size)
            return r;
    }
    return NULL;
}

/* 0 when [va, va+n) is device memory this process may write (or read when
 * !write), contiguous over adjacent mappings; sets *ordinal. */
CUresult range_check(uint64_t va, size_t n, bool write, int *ordinal)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (va + n < va)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    uint64_t pos = va, end = va + n;
    const struct region *prev = NULL;
    while (pos < end) {
        struct region *r = region_at(pos);
        /* Only mappings of the virtual memory API continue one another;
         * two allocations that happen to be adjacent do not. */
        if (!r || (r->kind != REGION_ALLOC && !(r->prot & (write ? PROT_WRITE : PROT_READ))) ||
            (prev && (prev->kind != REGION_MAP || r->kind != REGION_MAP))) {
            rc = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        /* Memory of the virtual memory API is reached only from the
         * devices cuMemSetAccess named: not from a context of another. */
        struct CUctx_st *c = reach_ctx ? reach_ctx : cur();
        if (r->kind == REGION_MAP && c && c->ordinal >= 0 && c->ordinal < 64 &&
            !(r->access & (1ull << c->ordinal))) {
            rc = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        if (!prev && ordinal)
            *ordinal = r->ordinal;
        prev = r;
        pos = r->va + r->size;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

static void parse_visible(unsigned nfiles, const char *dir)
{
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (!vis) {
        for (unsigned i = 0; i < nfiles; i++)
            if (ts_simgpu_open(dir, i, &devs[ndev]) == 0)
                ndev++;
        return;
    }
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", vis);
    char *save = NULL;
    /* As CUDA does: stop at the first entry that is invalid. */
    for (char *tok = strtok_r(buf, ",", &save); tok && ndev < TS_SIMGPU_MAX_GPUS;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        int found = -1;
        if (strncmp(tok, "GPU-", 4) == 0) {
            for (unsigned i = 0; i < nfiles && found < 0; i++) {
                struct ts_simgpu_dev d;
                if (ts_simgpu_open(dir, i, &d) != 0)
                    continue;
                char u[48];
                ts_simgpu_uuid_format(d.st->uuid, u);
                if (strncmp(u, tok, strlen(tok)) == 0)
                    found = (int)i;
                ts_simgpu_close(&d);
            }
        } else {
            char *end;
            long v = strtol(tok, &end, 10);
            if (end != tok && *end == '\0' && v >= 0 && (unsigned long)v < nfiles)
                found = (int)v;
        }
        if (found < 0 || ts_simgpu_open(dir, (unsigned)found, &devs[ndev]) != 0)
            break;
        ndev++;
    }
}

static void init_once_fn(void)
{
    const char *dir = getenv("TESSERA_SIMGPU_DIR");
    const char *k = getenv("TESSERA_SIMGPU_KERNEL_NS");
    const char *bw = getenv("TESSERA_SIMGPU_BANDWIDTH");
    kernel_ns_default = k ? strtoull(k, NULL, 10) : 0;
    bandwidth_env = bw ? strtoull(bw, NULL, 10) : 0;
    if (!dir || !*dir) {
        ts_simgpu_log("TESSERA_SIMGPU_DIR is not set: no devices");
        init_rc = CUDA_ERROR_NO_DEVICE;
        return;
    }
    parse_visible(ts_simgpu_count(dir), dir);
    for (int i = 0; i < ndev; i++) {
        ctxs[i].ordinal = i;
        ctxs[i].primary = true;
        ctxs[i].null_stream.ctx = &ctxs[i];
    }
    init_rc = ndev > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
    ts_simgpu_log("cuInit: %d devices from %s", ndev, dir);
}

CUresult cuInit(unsigned int flags)
{
    FAIL(cuInit, CUDA_ERROR_UNKNOWN);
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&init_once, init_once_fn);
    return init_rc;
}

CUresult cuDriverGetVersion(int *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    *v = TS_CUDA_API_VERSION;
    return CUDA_SUCCESS;
}

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
    {CUDA_ERROR_UNMAP_FAILED, "CUDA_ERROR_UNMAP_FAILED", "unmapping of buffer object failed"},
    {CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {CUDA_ERROR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED", "resource not mapped"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_INVALID_SOURCE, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
    {CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
     "the operation cannot be performed in the present state"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT",
     "the launch timed out and was terminated"},
    {CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
     "primary context active"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
     "too many blocks in cooperative launch"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_TIMEOUT, "CUDA_ERROR_TIMEOUT", "wait operation timed out"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static CUresult error_lookup(CUresult e, const char **out, bool name)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == e) {
            *out = name ? errors[i].name : errors[i].text;
            return CUDA_SUCCESS;
        }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    return error_lookup(error, pStr, true);
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    return error_lookup(error, pStr, false);
}

/* ---- devices ---- */

#define NEED_DEV(d)                                                                                \
    do {                                                                                           \
        NEED_INIT();                                                                               \
        if ((d) < 0 || (d) >= ndev)                                                                \
            return CUDA_ERROR_INVALID_DEVICE;                                                      \
    } while (0)

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    FAIL(cuDeviceGet, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    FAIL(cuDeviceGetCount, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = ndev;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    NEED_DEV(dev);
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", devs[dev].st->name);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    NEED_DEV(dev);
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(uuid->bytes, devs[dev].st->uuid, sizeof uuid->bytes);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid(uuid, dev);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    NEED_DEV(dev);
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = devs[dev].st->total_bytes;
    return CUDA_SUCCESS;
}

/* Figures of an NVIDIA H100 SXM (compute capability 9.0). */
CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    NEED_DEV(dev);
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    int v;
    /* One case a line: a table. */
    /* clang-format off */
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = 132; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = (int)devs[dev].st->index + 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 5120; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 52428800; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = 2; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: v = 0; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    /* clang-format on */
    *pi = v;
    return CUDA_SUCCESS;
}

/* ---- contexts ---- */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    FAIL(cuDevicePrimaryCtxRetain, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_DEV(dev);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    /* The process shows in NVML's process list from its first context on. */
    ts_simgpu_lock(&devs[dev]);
    struct ts_simgpu_proc *me = ts_simgpu_self(&devs[dev], 1);
    ts_simgpu_unlock(&devs[dev]);
    if (!me)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    ctxs[dev].refs++;
    pthread_mutex_unlock(&mu);
    *pctx = &ctxs[dev];
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    NEED_DEV(dev);
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    if (ctxs[dev].refs == 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else
        ctxs[dev].refs--;
    pthread_mutex_unlock(&mu);
    return rc;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return cuDevicePrimaryCtxRelease_v2(dev);
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    NEED_DEV(dev);
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    *active = ctxs[dev].refs > 0;
    pthread_mutex_unlock(&mu);
    *flags = 0;
    return CUDA_SUCCESS;
}

/* A context this thread may make current: a primary one, or a created one
 * not destroyed. */
bool ctx_valid(struct CUctx_st *c)
{
    if (c >= ctxs && c < ctxs + ndev)
        return true;
    return known(&contexts, c);
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    NEED_INIT();
    if (!ctx) { /* as CUDA: pops, or nothing on an empty stack */
        if (ctx_depth > 0)
            ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (!ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == 0)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    NEED_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = cur();
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    NEED_INIT();
    if (!ctx || !ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == CTX_STACK_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    NEED_INIT();
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUctx_st *c = ctx_stack[--ctx_depth];
    if (pctx)
        *pctx = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    FAIL(cuCtxCreate_v2, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_DEV(dev);
    unsigned sched = flags & CU_CTX_SCHED_MASK;
    if (!pctx || (flags & ~(unsigned)CU_CTX_FLAGS_MASK) ||
        (sched != CU_CTX_SCHED_AUTO && sched != CU_CTX_SCHED_SPIN && sched != CU_CTX_SCHED_YIELD &&
         sched != CU_CTX_SCHED_BLOCKING_SYNC))
        return CUDA_ERROR_INVALID_VALUE;
    if (ctx_depth == CTX_STACK_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ts_simgpu_lock(&devs[dev]);
    struct ts_simgpu_proc *me = ts_simgpu_self(&devs[dev], 1);
    ts_simgpu_unlock(&devs[dev]);
    if (!me)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    struct CUctx_st *c = NULL;
    if (ctx_pool.n > 0)
        c = ctx_pool.items[--ctx_pool.n];
    else
        c = calloc(1, sizeof *c);
    bool ok = c && table_add(&contexts, c);
    if (c && !ok && !table_add(&ctx_pool, c))
        free(c);
    if (ok) {
        c->ordinal = dev;
        c->primary = false;
        c->refs = 0;
        c->null_stream.ctx = c;
        atomic_store(&c->null_stream.done_ns, 0);
        atomic_store(&c->destroyed, false);
    }
    pthread_mutex_unlock(&mu);
    if (!ok)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ctx_stack[ctx_depth++] = c;
    *pctx = c;
    return CUDA_SUCCESS;
}

/* As CUDA does: the context's streams and memory go with it, and it is
 * popped if it is current to the calling thread. */
CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    NEED_INIT();
    pthread_mutex_lock(&mu);
    if (!ctx || !table_del(&contexts, ctx)) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    atomic_store(&ctx->destroyed, true);
    for (size_t i = 0; i < streams.n;) {
        struct CUstream_st *st = streams.items[i];
        if (st->ctx == ctx) {
            table_del(&streams, st);
            free(st);
        } else {
            i++;
        }
    }
    for (size_t i = 0; i < nregions;) {
        struct region r = regions[i];
        if (r.kind == REGION_ALLOC && r.ctx == ctx) {
            region_remove(i);
            if (r.pool)
                pool_put(&r, true);
            else
                alloc_free(&r);
        } else {
            i++;
        }
    }
    arrays_ctx_gone(ctx);
    if (!table_add(&ctx_pool, ctx))
        ts_simgpu_log("cuCtxDestroy: context %p not kept for reuse", (void *)ctx);
    pthread_mutex_unlock(&mu);
    if (ctx_depth > 0 && ctx_stack[ctx_depth - 1] == ctx)
        ctx_depth--;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    NEED_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c = cur();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (atomic_load(&c->destroyed))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *device = c->ordinal;
    return CUDA_SUCCESS;
}

/* The stream a handle names in the current context, or NULL if invalid. */
struct CUstream_st *stream_of(CUstream s)
{
    struct CUctx_st *c = cur();
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return c && !atomic_load(&c->destroyed) ? &c->null_stream : NULL;
    return known(&streams, s) ? s : NULL;
}

uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

CUresult cuCtxSynchronize(void)
{
    NEED_CTX();
    struct CUctx_st *c = cur();
    uint64_t until = atomic_load(&c->null_stream.done_ns);
    bool capturing = false;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < streams.n; i++) {
        struct CUstream_st *s = streams.items[i];
        if (s->ctx != c)
            continue;
        until = max_u64(until, atomic_load(&s->done_ns));
        /* As CUDA: not while a stream of the context captures, whose
         * capture is then invalidated. */
        if (atomic_load(&s->capture) != CU_STREAM_CAPTURE_STATUS_NONE) {
            atomic_store(&s->capture, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
            capturing = true;
        }
    }
    pthread_mutex_unlock(&mu);
    if (capturing)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    ts_simgpu_sleep_until(until);
    pool_sync(c->ordinal);
    return CUDA_SUCCESS;
}

/* ---- memory ---- */

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    FAIL(cuMemAlloc_v2, CUDA_ERROR_OUT_OF_MEMORY);
    return mem_alloc(dptr, bytesize);
}

CUresult mem_alloc(CUdeviceptr *dptr, size_t bytesize)
{
    NEED_CTX();
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t size = round_up(bytesize, PAGE);
    if (size < bytesize)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct CUctx_st *c = cur();
    int ord = c->ordinal;
    if (charge_or_trim(ord, (int64_t)size) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        ts_simgpu_charge(&devs[ord], -(int64_t)size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&mu);
    /* The region is what was asked for, so copies past it are refused. */
    bool ok = region_add((struct region){.kind = REGION_ALLOC,
                                         .va = (uint64_t)(uintptr_t)p,
                                         .size = bytesize,
                                         .ordinal = ord,
                                         .ctx = c});
    pthread_mutex_unlock(&mu);
    if (!ok) {
        munmap(p, size);
        ts_simgpu_charge(&devs[ord], -(int64_t)size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    FAIL(cuMemFree_v2, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    if (dptr == 0)
        return CUDA_SUCCESS;
    struct region r = {0};
    bool found = false;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < nregions; i++)
        if (regions[i].kind == REGION_ALLOC && regions[i].va == dptr) {
            r = regions[i];
            region_remove(i);
            alloc_free(&r);
            found = true;
            break;
        }
    pthread_mutex_unlock(&mu);
    if (!found)
        return CUDA_ERROR_INVALID_VALUE;
    /* cuMemFree synchronizes: a stream-ordered allocation's pool gives back
     * what it holds above its threshold, as at any synchronize. */
    if (r.pool)
        pool_sync(r.ordinal);
    return CUDA_SUCCESS;
}

void alloc_free(const struct region *r)
{
    if (r->pool) {
        pool_put(r, false);
        return;
    }
    size_t size = round_up(r->size, PAGE);
    munmap((void *)(uintptr_t)r->va, size);
    ts_simgpu_charge(&devs[r->ordinal], -(int64_t)size);
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    FAIL(cuMemGetInfo_v2, CUDA_ERROR_UNKNOWN);
    NEED_CTX();
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    struct ts_simgpu_dev *d = &devs[cur()->ordinal];
    ts_simgpu_lock(d);
    ts_simgpu_reap(d);
    uint64_t used = atomic_load(&d->st->used_bytes);
    ts_simgpu_unlock(d);
    *total = d->st->total_bytes;
    *free_bytes = used < d->st->total_bytes ? d->st->total_bytes - used : 0;
    return CUDA_SUCCESS;
}

static uint64_t bandwidth_of(int ord)
{
    return bandwidth_env ? bandwidth_env : devs[ord].st->copy_bytes_per_s;
}

static uint64_t copy_ns(int ord, size_t n)
{
    uint64_t bw = bandwidth_of(ord);
    if (bw == 0)
        return 0;
    return (uint64_t)((double)n * 1e9 / (double)bw);
}

/* Copy n bytes. host_link: the copy crosses the host link and runs at the
 * configured bandwidth. async: the stream carries the time instead of the
 * caller (the bytes move now: a correct program cannot tell). */
CUresult do_copy(void *dst, const void *src, size_t n, int ord, bool host_link, CUstream hs,
                 bool async)
{
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return async ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
    if (!async)
        ts_simgpu_sleep_until(atomic_load(&s->done_ns)); /* the null stream's order */
    ts_simgpu_move(dst, src, n);
    uint64_t t = host_link ? copy_ns(ord, n) : 0;
    if (t == 0)
        return CUDA_SUCCESS;
    uint64_t start = max_u64(ts_simgpu_now_ns(), atomic_load(&s->done_ns));
    if (async)
        atomic_store(&s->done_ns, start + t);
    else
        ts_simgpu_sleep_until(start + t);
    return CUDA_SUCCESS;
}

static CUresult copy_htod(CUdeviceptr dst, const void *src, size_t n, CUstream s, bool async)
{
    NEED_CTX();
    int ord = 0;
    if (!src && n)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = range_check(dst, n, true, &ord);
    if (rc != CUDA_SUCCESS)
        return rc;
    return do_copy((void *)(uintptr_t)dst, src, n, ord, true, s, async);
}

static CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream s, bool async)
{
    NEED_CTX();
    int ord = 0;
    if (!dst && n)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = range_check(src, n, false, &ord);
    if (rc != CUDA_SUCCESS)
        return rc;
    return do_copy(dst, (const void *)(uintptr_t)src, n, ord, true, s, async);
}

static CUresult copy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool async)
{
    NEED_CTX();
    int ord = 0;
    CUresult rc = range_check(dst, n, true, &ord);
    if (rc == CUDA_SUCCESS)
        rc = range_check(src, n, false, NULL);
    if (rc != CUDA_SUCCESS)
        return rc;
    return do_copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, ord, false, s, async);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t n)
{
    FAIL(cuMemcpyHtoD_v2, CUDA_ERROR_UNKNOWN);
    return copy_htod(dstDevice, srcHost, n, NULL, false);
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t n)
{
    FAIL(cuMemcpyDtoH_v2, CUDA_ERROR_UNKNOWN);
    return copy_dtoh(dstHost, srcDevice, n, NULL, false);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t n)
{
    FAIL(cuMemcpyDtoD_v2, CUDA_ERROR_UNKNOWN);
    return copy_dtod(dstDevice, srcDevice, n, NULL, false);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t n, CUstream s)
{
    FAIL(cuMemcpyHtoDAsync_v2, CUDA_ERROR_UNKNOWN);
    return copy_htod(dstDevice, srcHost, n, s, true);
}

CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t n, CUstream s)
{
    FAIL(cuMemcpyDtoHAsync_v2, CUDA_ERROR_UNKNOWN);
    return copy_dtoh(dstHost, srcDevice, n, s, true);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t n, CUstream s)
{
    FAIL(cuMemcpyDtoDAsync_v2, CUDA_ERROR_UNKNOWN);
    return copy_dtod(dstDevice, srcDevice, n, s, true);
}

/* ---- page-locked host memory ----
 *
 * Ordinary host memory (not locked: a container's RLIMIT_MEMLOCK is small),
 * recorded so that it can be freed, unregistered and, with unified
 * addressing, used as a device pointer at its own address. Copies from and
 * to it run at the GPU's copy bandwidth, as pageable copies do here. */

/* mu held: the HOST region starting at p, or NULL. */
static size_t host_region(const void *p, bool registered)
{
    for (size_t i = 0; i < nregions; i++)
        if (regions[i].kind == REGION_HOST && regions[i].va == (uint64_t)(uintptr_t)p &&
            regions[i].registered == registered)
            return i;
    return SIZE_MAX;
}

/* mu held: whether [va, va+n) meets any region of this process. */
bool any_overlap(uint64_t va, uint64_t n)
{
    for (size_t i = 0; i < nregions; i++)
        if (va < regions[i].va + regions[i].size && regions[i].va < va + n)
            return true;
    return false;
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned int flags)
{
    NEED_CTX();
    if (!pp || bytesize == 0 ||
        (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    size_t size = round_up(bytesize, PAGE);
    if (size < bytesize)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    bool ok = region_add((struct region){.kind = REGION_HOST,
                                         .va = (uint64_t)(uintptr_t)p,
                                         .size = bytesize,
                                         .ordinal = cur()->ordinal,
                                         .prot = PROT_READ | PROT_WRITE});
    pthread_mutex_unlock(&mu);
    if (!ok) {
        munmap(p, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
    FAIL(cuMemHostAlloc, CUDA_ERROR_OUT_OF_MEMORY);
    return host_alloc(pp, bytesize, flags);
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    FAIL(cuMemAllocHost_v2, CUDA_ERROR_OUT_OF_MEMORY);
    return host_alloc(pp, bytesize, 0);
}

CUresult cuMemFreeHost(void *p)
{
    FAIL(cuMemFreeHost, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    pthread_mutex_lock(&mu);
    size_t i = host_region(p, false);
    struct region r = i != SIZE_MAX ? regions[i] : (struct region){0};
    if (i != SIZE_MAX)
        region_remove(i);
    pthread_mutex_unlock(&mu);
    if (i == SIZE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    munmap(p, round_up(r.size, PAGE));
    return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags)
{
    FAIL(cuMemHostRegister_v2, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_CTX();
    uint64_t va = (uint64_t)(uintptr_t)p;
    if (!p || bytesize == 0 || va + bytesize < va ||
        (flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                             CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)))
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & CU_MEMHOSTREGISTER_IOMEMORY)
        return CUDA_ERROR_NOT_SUPPORTED;
    /* The range must be mapped host memory: madvise fails with ENOMEM on a
     * hole, so a bad range is refused here rather than crashing a copy. */
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(PAGE - 1);
    size_t span = round_up((size_t)(va + bytesize - lo), PAGE);
    if (madvise((void *)lo, span, MADV_NORMAL) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    if (any_overlap(va, bytesize)) {
        bool host = false;
        for (size_t i = 0; i < nregions; i++)
            if (regions[i].kind == REGION_HOST && va < regions[i].va + regions[i].size &&
                regions[i].va < va + bytesize)
                host = true;
        rc = host ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED : CUDA_ERROR_INVALID_VALUE;
    } else if (!region_add((struct region){.kind = REGION_HOST,
                                           .va = va,
                                           .size = bytesize,
                                           .ordinal = cur()->ordinal,
                                           .prot = (flags & CU_MEMHOSTREGISTER_READ_ONLY)
                                                       ? PROT_READ
                                                       : PROT_READ | PROT_WRITE,
                                           .registered = true})) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

CUresult cuMemHostUnregister(void *p)
{
    FAIL(cuMemHostUnregister, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    pthread_mutex_lock(&mu);
    size_t i = host_region(p, true);
    if (i != SIZE_MAX)
        region_remove(i);
    pthread_mutex_unlock(&mu);
    return i == SIZE_MAX ? CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED : CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags)
{
    NEED_CTX();
    if (!pdptr || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t va = (uint64_t)(uintptr_t)p;
    pthread_mutex_lock(&mu);
    struct region *r = region_at(va);
    bool ok = r && r->kind == REGION_HOST;
    pthread_mutex_unlock(&mu);
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = va;
    return CUDA_SUCCESS;
}

/* ---- streams and events ---- */

CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    FAIL(cuStreamCreate, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_CTX();
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->ctx = cur();
    pthread_mutex_lock(&mu);
    bool ok = table_add(&streams, s);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phStream = s;
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream hs)
{
    NEED_INIT();
    pthread_mutex_lock(&mu);
    bool ok = table_del(&streams, hs);
    pthread_mutex_unlock(&mu);
    if (!ok)
        return CUDA_ERROR_INVALID_HANDLE;
    /* Work still queued completes: the stream's time is already in the
     * GPU's busy spans. */
    free(hs);
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream hs)
{
    return cuStreamDestroy_v2(hs);
}

CUresult cuStreamSynchronize(CUstream hs)
{
    FAIL(cuStreamSynchronize, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (capture_refuses_sync(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    ts_simgpu_sleep_until(atomic_load(&s->done_ns));
    pool_sync(s->ctx->ordinal);
    return CUDA_SUCCESS;
}

CUresult cuStreamQuery(CUstream hs)
{
    NEED_INIT();
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (capture_refuses_sync(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return ts_simgpu_now_ns() >= atomic_load(&s->done_ns) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int flags)
{
    FAIL(cuEventCreate, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_CTX();
    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    bool ok = table_add(&events, e);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phEvent = e;
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent e)
{
    NEED_INIT();
    pthread_mutex_lock(&mu);
    bool ok = table_del(&events, e);
    pthread_mutex_unlock(&mu);
    if (!ok)
        return CUDA_ERROR_INVALID_HANDLE;
    free(e);
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent e)
{
    return cuEventDestroy_v2(e);
}

static bool event_ok(CUevent e)
{
    return known(&events, e);
}

CUresult cuEventRecord(CUevent e, CUstream hs)
{
    FAIL(cuEventRecord, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    if (!event_ok(e))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    atomic_store(&e->at_ns, max_u64(ts_simgpu_now_ns(), atomic_load(&s->done_ns)));
    return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent e)
{
    NEED_INIT();
    if (!event_ok(e))
        return CUDA_ERROR_INVALID_HANDLE;
    return ts_simgpu_now_ns() >= atomic_load(&e->at_ns) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent e)
{
    NEED_INIT();
    if (!event_ok(e))
        return CUDA_ERROR_INVALID_HANDLE;
    ts_simgpu_sleep_until(atomic_load(&e->at_ns));
    pool_sync(-1);
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    NEED_INIT();
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    if (!event_ok(a) || !event_ok(b))
        return CUDA_ERROR_INVALID_HANDLE;
    uint64_t ta = atomic_load(&a->at_ns), tb = atomic_load(&b->at_ns);
    if (ta == 0 || tb == 0)
        return CUDA_ERROR_INVALID_HANDLE;
    uint64_t now = ts_simgpu_now_ns();
    if (now < ta || now < tb)
        return CUDA_ERROR_NOT_READY;
    *ms = (float)(((double)tb - (double)ta) / 1e6);
    return CUDA_SUCCESS;
}

/* ---- virtual memory management ---- */

static bool prop_ok(const CUmemAllocationProp *prop)
{
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
           prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && prop->location.id >= 0 &&
           prop->location.id < ndev;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    NEED_INIT();
    if (!granularity || !prop_ok(prop) ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = GRANULARITY;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    FAIL(cuMemAddressReserve, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_INIT();
    if (!ptr || size == 0 || size % GRANULARITY || flags != 0 || (alignment & (alignment - 1)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment < GRANULARITY)
        alignment = GRANULARITY;
    size_t span = size + alignment;
    char *p = mmap((void *)(uintptr_t)addr, span, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base = ((uintptr_t)p + alignment - 1) & ~(uintptr_t)(alignment - 1);
    if (base > (uintptr_t)p)
        munmap(p, base - (uintptr_t)p);
    if ((uintptr_t)p + span > base + size)
        munmap((void *)(base + size), (uintptr_t)p + span - (base + size));
    pthread_mutex_lock(&mu);
    bool ok = region_add(
        (struct region){.kind = REGION_RESERVE, .va = base, .size = size, .ordinal = -1});
    pthread_mutex_unlock(&mu);
    if (!ok) {
        munmap((void *)base, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = base;
    return CUDA_SUCCESS;
}

/* mu held. Frees a released handle that nothing maps any more. */
static void phys_put(struct phys *ph)
{
    if (!ph->released || ph->maps > 0)
        return;
    table_del(&physs, ph);
    close(ph->fd);
    ts_simgpu_charge(&devs[ph->ordinal], -(int64_t)ph->size);
    free(ph);
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    NEED_INIT();
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < nregions; i++)
        if (regions[i].kind == REGION_RESERVE && regions[i].va == ptr && regions[i].size == size) {
            rc = CUDA_SUCCESS;
            region_remove(i);
            break;
        }
    if (rc == CUDA_SUCCESS) {
        /* Mappings left inside go with the range. */
        for (size_t i = 0; i < nregions;) {
            struct region *r = &regions[i];
            if (r->kind == REGION_MAP && r->va >= ptr && r->va - ptr < size) {
                struct phys *ph = r->phys;
                region_remove(i);
                ph->maps--;
                phys_put(ph);
            } else {
                i++;
            }
        }
        munmap((void *)(uintptr_t)ptr, size);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    FAIL(cuMemCreate, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_INIT();
    if (!handle || size == 0 || size % GRANULARITY || flags != 0 || !prop_ok(prop))
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_NOT_SUPPORTED;
    int ord = prop->location.id;
    if (charge_or_trim(ord, (int64_t)size) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct phys *ph = calloc(1, sizeof *ph);
    int fd = memfd_create("simgpu", MFD_CLOEXEC);
    if (!ph || fd < 0 || ftruncate(fd, (off_t)size) < 0) {
        free(ph);
        if (fd >= 0)
            close(fd);
        ts_simgpu_charge(&devs[ord], -(int64_t)size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ph = (struct phys){.fd = fd, .ordinal = ord, .size = size};
    pthread_mutex_lock(&mu);
    bool ok = table_add(&physs, ph);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        close(fd);
        free(ph);
        ts_simgpu_charge(&devs[ord], -(int64_t)size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)ph;
    return CUDA_SUCCESS;
}

/* mu held: the phys a handle names, or NULL. */
static struct phys *phys_of(CUmemGenericAllocationHandle h)
{
    void *p = (void *)(uintptr_t)h;
    return table_has(&physs, p) ? p : NULL;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    FAIL(cuMemRelease, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct phys *ph = phys_of(handle);
    if (ph && !ph->released) {
        ph->released = true;
        phys_put(ph);
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

/* mu held: the reserved range holding all of [va, va+size). */
static bool reserved(uint64_t va, size_t size)
{
    for (size_t i = 0; i < nregions; i++) {
        const struct region *r = &regions[i];
        if (r->kind == REGION_RESERVE && va >= r->va && va + size <= r->va + r->size)
            return true;
    }
    return false;
}

static bool mapped_overlap(uint64_t va, size_t size)
{
    for (size_t i = 0; i < nregions; i++) {
        const struct region *r = &regions[i];
        if (r->kind == REGION_MAP && va < r->va + r->size && r->va < va + size)
            return true;
    }
    return false;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    FAIL(cuMemMap, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_INIT();
    if (size == 0 || flags != 0 || ptr % GRANULARITY || size % GRANULARITY || offset % GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    struct phys *ph = phys_of(handle);
    if (!ph || ph->released || offset > ph->size || size > ph->size - offset ||
        !reserved(ptr, size)) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    if (mapped_overlap(ptr, size)) {
        rc = CUDA_ERROR_ALREADY_MAPPED;
        goto out;
    }
    if (!grow((void **)&regions, &cap_regions, nregions, sizeof *regions)) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    void *p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph->fd,
                   (off_t)offset);
    if (p == MAP_FAILED) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    region_add((struct region){.kind = REGION_MAP,
                               .va = ptr,
                               .size = size,
                               .ordinal = ph->ordinal,
                               .phys = ph,
                               .prot = PROT_NONE});
    ph->maps++;
out:
    pthread_mutex_unlock(&mu);
    return rc;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    FAIL(cuMemUnmap, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    /* Whole mappings only, as CUDA asks. */
    size_t covered = 0;
    for (size_t i = 0; i < nregions; i++) {
        const struct region *r = &regions[i];
        if (r->kind != REGION_MAP || !(ptr < r->va + r->size && r->va < ptr + size))
            continue;
        if (r->va < ptr || r->va + r->size > ptr + size) {
            rc = CUDA_ERROR_INVALID_VALUE;
            goto out;
        }
        covered += r->size;
    }
    if (covered != size) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    /* Put the reservation back over the range, then drop the mappings. */
    if (mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED) {
        rc = CUDA_ERROR_UNMAP_FAILED;
        goto out;
    }
    for (size_t i = 0; i < nregions;) {
        struct region *r = &regions[i];
        if (r->kind == REGION_MAP && r->va >= ptr && r->va - ptr < size) {
            struct phys *ph = r->phys;
            region_remove(i);
            ph->maps--;
            phys_put(ph);
        } else {
            i++;
        }
    }
out:
    pthread_mutex_unlock(&mu);
    return rc;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    FAIL(cuMemSetAccess, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    int prot = -1;
    uint64_t access = 0; /* the devices that may reach it */
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
            desc[i].location.id >= ndev)
            return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE)
            access |= 1ull << desc[i].location.id;
        switch (desc[i].flags) {
        case CU_MEM_ACCESS_FLAGS_PROT_NONE:
            prot = prot < 0 ? PROT_NONE : prot;
            break;
        case CU_MEM_ACCESS_FLAGS_PROT_READ:
            prot = PROT_READ;
            break;
        case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
            prot = PROT_READ | PROT_WRITE;
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    size_t covered = 0;
    for (size_t i = 0; i < nregions; i++) {
        const struct region *r = &regions[i];
        if (r->kind == REGION_MAP && r->va >= ptr && r->va + r->size <= ptr + size)
            covered += r->size;
    }
    if (covered != size) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    if (mprotect((void *)(uintptr_t)ptr, size, prot) < 0) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (size_t i = 0; i < nregions; i++) {
        struct region *r = &regions[i];
        if (r->kind == REGION_MAP && r->va >= ptr && r->va + r->size <= ptr + size) {
            r->prot = prot;
            r->access = access;
        }
    }
out:
    pthread_mutex_unlock(&mu);
    return rc;
}

/* ---- modules and kernels ---- */

static CUresult module_load(CUmodule *module, const void *image)
{
    NEED_CTX();
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->ctx = cur();
    /* PTX is text; keep it to check function names. Binary images (cubin,
     * fatbin: ELF or fatbin magic) are accepted with any function name. */
    const unsigned char *b = image;
    bool elf = b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
    bool fatbin = b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba;
    if (!elf && !fatbin) {
        size_t n = strnlen(image, (size_t)64 << 20);
        m->image = malloc(n + 1);
        if (!m->image) {
            free(m);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(m->image, image, n);
        m->image[n] = '\0';
    }
    pthread_mutex_lock(&mu);
    bool ok = table_add(&modules, m);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        free(m->image);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *module = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    FAIL(cuModuleLoadData, CUDA_ERROR_INVALID_IMAGE);
    return module_load(module, image);
}

/* Nothing is compiled, so the logs asked for are empty. */
CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n,
                            CUjit_option *options, void **values)
{
    FAIL(cuModuleLoadDataEx, CUDA_ERROR_INVALID_IMAGE);
    if (n > 0 && (!options || !values))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        if ((options[i] == CU_JIT_INFO_LOG_BUFFER || options[i] == CU_JIT_ERROR_LOG_BUFFER) &&
            values[i]) {
            /* The size is the next option's value when given. */
            for (unsigned j = 0; j < n; j++)
                if (options[j] == options[i] + 1 && (uintptr_t)values[j] > 0)
                    *(char *)values[i] = '\0';
        }
    }
    for (unsigned i = 0; i < n; i++)
        if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
            options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            values[i] = (void *)(uintptr_t)0;
    return module_load(module, image);
}

CUresult cuModuleUnload(CUmodule m)
{
    NEED_INIT();
    pthread_mutex_lock(&mu);
    bool ok = table_del(&modules, m);
    pthread_mutex_unlock(&mu);
    if (!ok)
        return CUDA_ERROR_INVALID_HANDLE;
    free(m->image);
    free(m);
    return CUDA_SUCCESS;
}

/* PTX declares kernels as ".entry NAME(" (or ".entry NAME" then a newline). */
static bool ptx_has_entry(const char *ptx, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(ptx, ".entry"); p; p = strstr(p + 1, ".entry")) {
        const char *q = p + 6;
        while (*q == ' ' || *q == '\t')
            q++;
        if (strncmp(q, name, n) == 0 &&
            (q[n] == '(' || q[n] == ' ' || q[n] == '\t' || q[n] == '\n' || q[n] == '\r'))
            return true;
    }
    return false;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule m, const char *name)
{
    FAIL(cuModuleGetFunction, CUDA_ERROR_NOT_FOUND);
    NEED_INIT();
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!known(&modules, m))
        return CUDA_ERROR_INVALID_HANDLE;
    if (m->image && strstr(m->image, ".entry") && !ptx_has_entry(m->image, name))
        return CUDA_ERROR_NOT_FOUND;
    struct CUfunc_st *f = calloc(1, sizeof *f);
    if (!f)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t n = strlen(name);
    f->mod = m;
    f->busy_param = n >= 7 && strcmp(name + n - 7, "busy_ns") == 0;
    f->add_u32 = n >= 7 && strcmp(name + n - 7, "add_u32") == 0;
    pthread_mutex_lock(&mu);
    bool ok = table_add(&funcs, f);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        free(f);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *hfunc = f;
    return CUDA_SUCCESS;
}

/* ---- per-thread default stream flavours ----
 *
 * The null stream of these is CU_STREAM_PER_THREAD. simgpu gives a thread's
 * default stream the context's null stream (kernels of a GPU run one after
 * another anyway, so busy time and results are the same); what these
 * flavours add is their own entry points, exported and handed out by
 * cuGetProcAddress with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, as a
 * program built with --default-stream per-thread calls them. Failure
 * injection counts them with the plain calls. */

CUstream per_thread(CUstream s)
{
    return s ? s : CU_STREAM_PER_THREAD;
}

CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t n)
{
    FAIL(cuMemcpyHtoD_v2, CUDA_ERROR_UNKNOWN);
    return copy_htod(dstDevice, srcHost, n, CU_STREAM_PER_THREAD, false);
}

CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t n)
{
    FAIL(cuMemcpyDtoH_v2, CUDA_ERROR_UNKNOWN);
    return copy_dtoh(dstHost, srcDevice, n, CU_STREAM_PER_THREAD, false);
}

CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t n)
{
    FAIL(cuMemcpyDtoD_v2, CUDA_ERROR_UNKNOWN);
    return copy_dtod(dstDevice, srcDevice, n, CU_STREAM_PER_THREAD, false);
}

CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t n, CUstream s)
{
    return cuMemcpyHtoDAsync_v2(dstDevice, srcHost, n, per_thread(s));
}

CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t n, CUstream s)
{
    return cuMemcpyDtoHAsync_v2(dstHost, srcDevice, n, per_thread(s));
}

CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t n,
                                   CUstream s)
{
    return cuMemcpyDtoDAsync_v2(dstDevice, srcDevice, n, per_thread(s));
}

CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char uc, size_t n)
{
    return cuMemsetD8_v2(dst, uc, n);
}

CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int ui, size_t n)
{
    return cuMemsetD32_v2(dst, ui, n);
}

CUresult cuMemsetD16_v2_ptds(CUdeviceptr dst, unsigned short us, size_t n)
{
    return cuMemsetD16_v2(dst, us, n);
}

CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char uc, size_t n, CUstream s)
{
    return cuMemsetD8Async(dst, uc, n, per_thread(s));
}

CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int ui, size_t n, CUstream s)
{
    return cuMemsetD32Async(dst, ui, n, per_thread(s));
}

CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    return cuStreamSynchronize(per_thread(s));
}

CUresult cuStreamQuery_ptsz(CUstream s)
{
    return cuStreamQuery(per_thread(s));
}

CUresult cuEventRecord_ptsz(CUevent e, CUstream s)
{
    return cuEventRecord(e, per_thread(s));
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                             CUstream s, void **params, void **extra)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, per_thread(s), params, extra);
}

/* The runtime's private tables: simgpu has none. Cheap and safe to call
 * with any id, as the shim's lazy init expects. */
CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    if (!ppExportTable || !pExportTableId)
        return CUDA_ERROR_INVALID_VALUE;
    *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- cuGetProcAddress ---- */

static const struct {
    const char *name;
    void *fn;
} procs[] = {
#define SIMGPU_FN(name) {#name, (void *)name},
#include "agent/simgpu/cuda_fns.def"
#undef SIMGPU_FN
};

static void *proc_find(const char *name)
{
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++)
        if (strcmp(procs[i].name, name) == 0)
            return procs[i].fn;
    return NULL;
}

/* Base names whose _v2 the driver hands out only from CUDA 12.0 (the
 * version whose cuda.h calls it): the CUDA 11 programs asking for them call
 * the first version. */
static const char *const v2_from_12[] = {
    "cuGetProcAddress",    "cuStreamWriteValue32", "cuStreamWriteValue64",
    "cuStreamWaitValue32", "cuStreamWaitValue64",  "cuStreamBatchMemOp",
};

static bool v2_at(const char *symbol, int cudaVersion)
{
    for (size_t i = 0; cudaVersion < 12000 && i < sizeof v2_from_12 / sizeof v2_from_12[0]; i++)
        if (strcmp(symbol, v2_from_12[i]) == 0)
            return false;
    return true;
}

/*
 * The newest version of `symbol` (a base name, "cuMemAlloc") that exists at
 * cudaVersion, as the real driver does: _v2 where we export one, except that
 * the names of v2_from_12 are _v2 only from CUDA 12.0. With
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, the _ptds or _ptsz flavour
 * of that version where one exists; without it (DEFAULT, LEGACY_STREAM), the
 * plain one.
 */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    char name[128], pt[160];
    void *fn = NULL;
    if (v2_at(symbol, cudaVersion)) {
        snprintf(name, sizeof name, "%s_v2", symbol);
        fn = proc_find(name);
    }
    if (!fn) {
        snprintf(name, sizeof name, "%s", symbol);
        fn = proc_find(name);
    }
    if (fn && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
        void *ptfn = NULL;
        for (int i = 0; i < 2 && !ptfn; i++) {
            snprintf(pt, sizeof pt, "%s%s", name, i == 0 ? "_ptds" : "_ptsz");
            ptfn = proc_find(pt);
        }
        if (ptfn)
            fn = ptfn;
    }
    if (status)
        *status = fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    *pfn = fn;
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
