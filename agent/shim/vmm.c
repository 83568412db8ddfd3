/*
 * vmm.c - device allocations through the virtual memory API (swap.h), and
 * the process-local table of them that the swapper walks.
 *
 * An allocation is an address range of its own (cuMemAddressReserve at
 * the device's granularity) with one physical handle mapped over all of
 * it. While swapped out the range stays reserved and unmapped, so its
 * addresses are never handed out again; a swap-in maps a new handle there.
 */
#include <stdlib.h>
#include <string.h>

#include "agent/shim/engine.h"

struct ts_engine ts_eng = {.lock = PTHREAD_RWLOCK_INITIALIZER};

static CUmemAllocationProp device_prop(int dev)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ts_swap_real(dev);
    return prop;
}

/* The device's granularity, 0 when it has none (no VMM, or not yet
 * initialized: asked again next time). */
static size_t granularity(int dev)
{
    if (dev < 0 || dev >= TS_SWAP_MAX_DEV || !ts_eng.cu)
        return 0;
    size_t g = __atomic_load_n(&ts_eng.gran[dev], __ATOMIC_ACQUIRE);
    if (g)
        return g;
    if (!ts_eng.cu->cuMemGetAllocationGranularity)
        return 0;
    CUmemAllocationProp prop = device_prop(dev);
    if (ts_eng.cu->cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
            CUDA_SUCCESS ||
        g == 0 || (g & (g - 1)) != 0)
        return 0;
    __atomic_store_n(&ts_eng.gran[dev], g, __ATOMIC_RELEASE);
    return g;
}

/* Off until the engine's tests pass on simgpu. */
static const bool engine_ready = true;

bool ts_vmm_active(void)
{
    if (!engine_ready || !ts_eng.configured || ts_eng.reserve_path[0] == '\0')
        return false;
    int known = atomic_load(&ts_eng.vmm);
    if (known)
        return known > 0;
    /* Supported when every device hands out a granularity: a device
     * without VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED refuses the query. */
    const struct ts_cu *cu = ts_eng.cu;
    if (!cu->cuMemAddressReserve || !cu->cuMemCreate || !cu->cuMemMap || !cu->cuMemSetAccess ||
        !cu->cuMemUnmap || !cu->cuMemRelease || !cu->cuMemAddressFree) {
        atomic_store(&ts_eng.vmm, -1);
        return false;
    }
    for (int d = 0; d < ts_eng.ndev; d++) {
        if (granularity(d) == 0) {
            size_t g = 0;
            CUmemAllocationProp prop = device_prop(d);
            CUresult rc =
                cu->cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
            if (rc != CUDA_ERROR_NOT_INITIALIZED)
                atomic_store(&ts_eng.vmm, -1);
            return false;
        }
    }
    atomic_store(&ts_eng.vmm, 1);
    return true;
}

size_t ts_vmm_round(int dev, size_t bytes)
{
    size_t g = granularity(dev);
    if (!g)
        return bytes;
    if (bytes == 0)
        return g;
    if (bytes > SIZE_MAX - (g - 1))
        return SIZE_MAX & ~(g - 1);
    return (bytes + g - 1) & ~(g - 1);
}

/* Lock held: index of the entry with the greatest base <= ptr, or n. */
static size_t find(CUdeviceptr ptr)
{
    size_t lo = 0, hi = ts_eng.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ts_eng.v[mid].base <= ptr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return ts_eng.n;
    const struct ts_vmm_entry *e = &ts_eng.v[lo - 1];
    return ptr - e->base < e->size ? lo - 1 : ts_eng.n;
}

static bool insert(const struct ts_vmm_entry *e)
{
    if (ts_eng.n == ts_eng.cap) {
        size_t cap = ts_eng.cap ? ts_eng.cap * 2 : 64;
        struct ts_vmm_entry *grown = calloc(cap, sizeof *grown);
        if (!grown)
            return false;
        if (ts_eng.n)
            memcpy(grown, ts_eng.v, ts_eng.n * sizeof *grown);
        free(ts_eng.v);
        ts_eng.v = grown;
        ts_eng.cap = cap;
    }
    size_t i = ts_eng.n;
    while (i > 0 && ts_eng.v[i - 1].base > e->base) {
        ts_eng.v[i] = ts_eng.v[i - 1];
        i--;
    }
    ts_eng.v[i] = *e;
    ts_eng.n++;
    return true;
}

CUresult ts_vmm_alloc(int dev, size_t bytes, CUdeviceptr *out)
{
    const struct ts_cu *cu = ts_eng.cu;
    size_t g = granularity(dev);
    if (!out || !cu || !g || bytes == 0 || bytes % g)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = NULL;
    if (cu->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUdeviceptr base = 0;
    CUresult rc = cu->cuMemAddressReserve(&base, bytes, g, 0, 0);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUmemAllocationProp prop = device_prop(dev);
    CUmemGenericAllocationHandle h = 0;
    rc = cu->cuMemCreate(&h, bytes, &prop, 0);
    if (rc != CUDA_SUCCESS)
        goto free_range;
    rc = cu->cuMemMap(base, bytes, 0, h, 0);
    if (rc != CUDA_SUCCESS)
        goto release;
    CUmemAccessDesc access = {.location = prop.location,
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    rc = cu->cuMemSetAccess(base, bytes, &access, 1);
    if (rc != CUDA_SUCCESS)
        goto unmap;
    struct ts_vmm_entry e = {
        .base = base, .size = bytes, .dev = dev, .ctx = ctx, .handle = h, .resident = true};
    pthread_rwlock_wrlock(&ts_eng.lock);
    bool ok = insert(&e);
    pthread_rwlock_unlock(&ts_eng.lock);
    if (!ok) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto unmap;
    }
    atomic_fetch_add(&ts_eng.resident[dev], bytes);
    *out = base;
    return CUDA_SUCCESS;
unmap:
    cu->cuMemUnmap(base, bytes);
release:
    cu->cuMemRelease(h);
free_range:
    cu->cuMemAddressFree(base, bytes);
    return rc;
}

CUresult ts_vmm_free(CUdeviceptr ptr, int *dev, size_t *bytes, bool *was_resident)
{
    pthread_rwlock_wrlock(&ts_eng.lock);
    size_t i = find(ptr);
    if (i == ts_eng.n || ts_eng.v[i].base != ptr) {
        pthread_rwlock_unlock(&ts_eng.lock);
        return CUDA_ERROR_NOT_FOUND;
    }
    struct ts_vmm_entry e = ts_eng.v[i];
    memmove(&ts_eng.v[i], &ts_eng.v[i + 1], (ts_eng.n - i - 1) * sizeof e);
    ts_eng.n--;
    pthread_rwlock_unlock(&ts_eng.lock);

    const struct ts_cu *cu = ts_eng.cu;
    if (e.resident) {
        cu->cuMemUnmap(e.base, e.size);
        cu->cuMemRelease(e.handle);
        atomic_fetch_sub(&ts_eng.resident[e.dev], e.size);
    } else {
        /* Its copy in the reserve is dropped with it. */
        atomic_fetch_sub(&ts_eng.out[e.dev], e.size);
        struct ts_ledger_proc *p = ts_eng.procs[e.dev];
        if (p) {
            atomic_fetch_sub(&p->swapped_bytes, e.size);
            struct ts_ledger *l = ts_eng.ledgers[e.dev];
            if (l && p->job >= 0 && p->job < TS_LEDGER_JOBS)
                atomic_fetch_sub(&l->jobs[p->job].swapped_bytes, e.size);
        }
    }
    cu->cuMemAddressFree(e.base, e.size);
    if (dev)
        *dev = e.dev;
    if (bytes)
        *bytes = e.size;
    if (was_resident)
        *was_resident = e.resident;
    return CUDA_SUCCESS;
}

CUresult ts_vmm_lookup(CUdeviceptr ptr, CUdeviceptr *base, size_t *size)
{
    pthread_rwlock_rdlock(&ts_eng.lock);
    size_t i = find(ptr);
    CUresult rc = CUDA_ERROR_NOT_FOUND;
    if (i < ts_eng.n) {
        if (base)
            *base = ts_eng.v[i].base;
        if (size)
            *size = ts_eng.v[i].size;
        rc = CUDA_SUCCESS;
    }
    pthread_rwlock_unlock(&ts_eng.lock);
    return rc;
}

int ts_swap_real(int dev)
{
    if (!ts_eng.configured || dev < 0 || dev >= TS_SWAP_MAX_DEV)
        return dev;
    return atomic_load(&ts_eng.real[dev]);
}

uint64_t ts_swap_resident_bytes(int dev)
{
    return dev >= 0 && dev < TS_SWAP_MAX_DEV ? atomic_load(&ts_eng.resident[dev]) : 0;
}

uint64_t ts_swap_out_bytes(int dev)
{
    return dev >= 0 && dev < TS_SWAP_MAX_DEV ? atomic_load(&ts_eng.out[dev]) : 0;
}
