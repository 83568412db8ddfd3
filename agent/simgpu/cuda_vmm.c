/*
 * cuda_vmm.c - simgpu's libcuda.so.1: the virtual memory management
 * API (reserve, create, map, set access) over memfd files, and this
 * process's region table.
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

struct phys {
    int fd;
    int ordinal;
    size_t size;
    int maps;      /* mu; mappings that use it */
    bool released; /* mu; cuMemRelease was called */
};

static struct table physs; /* mu; physical allocations handed out */

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
