/*
 * cuda_hostmem.c - simgpu's libcuda.so.1: page-locked host memory
 * (cuMemHostAlloc, cuMemHostRegister and their kin).
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
