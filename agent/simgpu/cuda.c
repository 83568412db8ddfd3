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
size_t cap_regions;
/* Handles handed out, one table per kind, so that a bad or stale handle is
 * CUDA_ERROR_INVALID_HANDLE and never dereferenced. */
struct table streams;
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

CUresult copy_htod(CUdeviceptr dst, const void *src, size_t n, CUstream s, bool async)
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

CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream s, bool async)
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

CUresult copy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool async)
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
