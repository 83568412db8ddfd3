/*
 * cuda_pool.c - stream-ordered allocation and memory pools in simgpu's
 * libcuda.so.1: cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync,
 * the default pool of each device and created ones.
 *
 * A pool's reserve is a byte count charged to its GPU: an allocation takes
 * its page-rounded size from what the pool holds idle and charges the GPU
 * only for the rest; a free gives the bytes back to the pool, which keeps
 * them until the next synchronize (cuStreamSynchronize, cuEventSynchronize,
 * cuCtxSynchronize, or cuMemFree of a pool allocation), where it gives back
 * to the GPU all it holds above max(used, RELEASE_THRESHOLD) (default 0);
 * cuMemPoolTrimTo gives back down to max(used, its argument). There is no
 * fragmentation: each allocation is its own mapping, unmapped when freed, so
 * a stale pointer is refused by copies. When the GPU is full, the pools of
 * that GPU give back their idle memory and the allocation (stream-ordered,
 * cuMemAlloc and its kinds, cuMemCreate, arrays) is tried again.
 *
 * Stream order is kept as simgpu keeps it for copies: the allocation and
 * the free happen when called (a correct program cannot tell). During
 * stream capture cuMemAllocAsync allocates at once, as if the graph's alloc
 * node had run. Allocations go with their context when it is destroyed,
 * their memory back to the GPU at once.
 */
#include <stdlib.h>
#include <sys/mman.h>

#pragma GCC visibility push(default)
#include "agent/abi/cuda.h"
#pragma GCC visibility pop
#include "agent/simgpu/cuda_int.h"

struct CUmemPoolHandle_st {
    int ordinal;
    bool dead;                        /* destroyed with allocations still out */
    uint64_t max_size;                /* 0: the GPU's memory */
    uint64_t threshold;               /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
    uint64_t reserved, reserved_high; /* charged to the GPU */
    uint64_t used, used_high;         /* page-rounded sizes of live allocations */
    int reuse[3];                     /* the CU_MEMPOOL_ATTR_REUSE_* flags, kept */
};

/* All under mu. */
static struct CUmemPoolHandle_st default_pools[TS_SIMGPU_MAX_GPUS];
static bool defaults_ready;
static struct table pools; /* created, not destroyed */

static void pool_init(struct CUmemPoolHandle_st *p, int ordinal)
{
    *p = (struct CUmemPoolHandle_st){.ordinal = ordinal, .reuse = {1, 1, 1}};
}

static struct CUmemPoolHandle_st *default_pool(int ord)
{
    if (!defaults_ready) {
        for (int i = 0; i < ndev; i++)
            pool_init(&default_pools[i], i);
        defaults_ready = true;
    }
    return &default_pools[ord];
}

static bool is_default(const struct CUmemPoolHandle_st *p)
{
    for (int i = 0; i < ndev; i++)
        if (p == &default_pools[i])
            return true;
    return false;
}

/* The pool a handle names, or NULL. */
static struct CUmemPoolHandle_st *pool_of(CUmemoryPool h)
{
    if (h && is_default(h))
        return default_pool(h->ordinal);
    return table_has(&pools, h) ? h : NULL;
}

/* Give back to the GPU what p holds above keep (>= p->used). */
static void pool_release(struct CUmemPoolHandle_st *p, uint64_t keep)
{
    if (p->reserved <= keep)
        return;
    ts_simgpu_charge(&devs[p->ordinal], -(int64_t)(p->reserved - keep));
    p->reserved = keep;
}

static void each_pool(int ord, void (*fn)(struct CUmemPoolHandle_st *p))
{
    for (int i = 0; i < ndev; i++)
        if (ord < 0 || ord == i)
            fn(default_pool(i));
    for (size_t i = 0; i < pools.n; i++) {
        struct CUmemPoolHandle_st *p = pools.items[i];
        if (ord < 0 || ord == p->ordinal)
            fn(p);
    }
}

static void release_above_threshold(struct CUmemPoolHandle_st *p)
{
    pool_release(p, max_u64(p->used, p->threshold));
}

static void release_idle(struct CUmemPoolHandle_st *p)
{
    pool_release(p, p->used);
}

void pool_sync(int ord)
{
    pthread_mutex_lock(&mu);
    each_pool(ord, release_above_threshold);
    pthread_mutex_unlock(&mu);
}

int charge_or_trim(int ord, int64_t bytes)
{
    if (ts_simgpu_charge(&devs[ord], bytes) == 0)
        return 0;
    pthread_mutex_lock(&mu);
    each_pool(ord, release_idle);
    pthread_mutex_unlock(&mu);
    return ts_simgpu_charge(&devs[ord], bytes);
}

void pool_put(const struct region *r, bool to_gpu)
{
    struct CUmemPoolHandle_st *p = r->pool;
    size_t size = round_up(r->size, PAGE);
    munmap((void *)(uintptr_t)r->va, size);
    p->used -= size;
    if (to_gpu)
        pool_release(p, p->reserved - size);
    if (p->dead) {
        pool_release(p, p->used);
        if (p->used == 0)
            free(p);
    }
}

/* mu held: make room for size more bytes in use in p, charging the GPU for
 * what p does not hold idle. */
static CUresult pool_grow(struct CUmemPoolHandle_st *p, uint64_t size)
{
    uint64_t idle = p->reserved - p->used;
    if (idle >= size)
        return CUDA_SUCCESS;
    uint64_t more = size - idle;
    if (p->max_size && p->reserved + more > p->max_size)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (ts_simgpu_charge(&devs[p->ordinal], (int64_t)more) < 0) {
        /* The GPU is full: the pools of this GPU give back their idle
         * memory, then try again. */
        each_pool(p->ordinal, release_idle);
        more = size;
        if (ts_simgpu_charge(&devs[p->ordinal], (int64_t)more) < 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->reserved += more;
    p->reserved_high = max_u64(p->reserved_high, p->reserved);
    return CUDA_SUCCESS;
}

static CUresult pool_alloc(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool hp, bool from_pool,
                           CUstream hs)
{
    NEED_CTX();
    if (!dptr || bytesize == 0 || (from_pool && !hp))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    size_t size = round_up(bytesize, PAGE);
    if (size < bytesize)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    struct CUmemPoolHandle_st *p = from_pool ? pool_of(hp) : default_pool(s->ctx->ordinal);
    if (!p) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    rc = pool_grow(p, size);
    if (rc != CUDA_SUCCESS)
        goto out;
    /* What pool_grow took stays in the pool if what follows fails. */
    void *va = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
    if (va == MAP_FAILED) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    if (!region_add((struct region){.kind = REGION_ALLOC,
                                    .va = (uint64_t)(uintptr_t)va,
                                    .size = bytesize,
                                    .ordinal = p->ordinal,
                                    .ctx = s->ctx,
                                    .pool = p})) {
        munmap(va, size);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    p->used += size;
    p->used_high = max_u64(p->used_high, p->used);
    *dptr = (CUdeviceptr)(uintptr_t)va;
out:
    pthread_mutex_unlock(&mu);
    return rc;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    FAIL(cuMemAllocAsync, CUDA_ERROR_OUT_OF_MEMORY);
    return pool_alloc(dptr, bytesize, NULL, false, hStream);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream)
{
    FAIL(cuMemAllocFromPoolAsync, CUDA_ERROR_OUT_OF_MEMORY);
    return pool_alloc(dptr, bytesize, pool, true, hStream);
}

/* Only stream-ordered allocations; cuMemFree frees those too. */
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    FAIL(cuMemFreeAsync, CUDA_ERROR_UNKNOWN);
    NEED_CTX();
    if (!stream_of(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < nregions; i++)
        if (regions[i].kind == REGION_ALLOC && regions[i].va == dptr && regions[i].pool) {
            struct region r = regions[i];
            region_remove(i);
            pool_put(&r, false);
            rc = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&mu);
    return rc;
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return cuMemAllocAsync(dptr, bytesize, per_thread(hStream));
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return cuMemFreeAsync(dptr, per_thread(hStream));
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
    return cuMemAllocFromPoolAsync(dptr, bytesize, pool, per_thread(hStream));
}

/* ---- pools ---- */

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    FAIL(cuMemPoolCreate, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_INIT();
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->location.id < 0 ||
        props->location.id >= ndev)
        return CUDA_ERROR_INVALID_VALUE;
    if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pool_init(p, props->location.id);
    p->max_size = props->maxSize;
    pthread_mutex_lock(&mu);
    bool ok = table_add(&pools, p);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pool = p;
    return CUDA_SUCCESS;
}

/* As CUDA: a pool destroyed with allocations out lives on until they are
 * freed; its idle memory goes back to the GPU at once. */
CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    FAIL(cuMemPoolDestroy, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    pthread_mutex_lock(&mu);
    bool ok = table_del(&pools, pool);
    if (ok) {
        release_idle(pool);
        if (pool->used == 0)
            free(pool);
        else
            pool->dead = true;
    }
    pthread_mutex_unlock(&mu);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    FAIL(cuMemPoolTrimTo, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    pthread_mutex_lock(&mu);
    struct CUmemPoolHandle_st *p = pool_of(pool);
    if (p)
        pool_release(p, max_u64(p->used, minBytesToKeep));
    pthread_mutex_unlock(&mu);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    FAIL(cuMemPoolSetAttribute, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    struct CUmemPoolHandle_st *p = pool_of(pool);
    cuuint64_t v64 = 0;
    if (!p) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *)value != 0;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        p->threshold = *(cuuint64_t *)value;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: /* only 0: resets to the current figure */
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        v64 = *(cuuint64_t *)value;
        if (v64 != 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
            p->reserved_high = p->reserved;
        else
            p->used_high = p->used;
        break;
    default:
        rc = CUDA_ERROR_INVALID_VALUE;
    }
out:
    pthread_mutex_unlock(&mu);
    return rc;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    FAIL(cuMemPoolGetAttribute, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    struct CUmemPoolHandle_st *p = pool_of(pool);
    if (!p) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    /* One case a line: a table. */
    /* clang-format off */
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: *(int *)value = p->reuse[0]; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: *(int *)value = p->reuse[1]; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *(int *)value = p->reuse[2]; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; break;
    default: rc = CUDA_ERROR_INVALID_VALUE;
    }
    /* clang-format on */
out:
    pthread_mutex_unlock(&mu);
    return rc;
}

/* There is no cuDeviceSetMemPool here, so a device's current pool is its
 * default one. */
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    FAIL(cuDeviceGetDefaultMemPool, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&mu);
    *pool_out = default_pool(dev);
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return cuDeviceGetDefaultMemPool(pool, dev);
}
