/*
 * meminfo.c - memory as the job sees it: cuMemGetInfo_v2,
 * cuDeviceTotalMem_v2 and NVML's memory info report the job's limit as the
 * size of the GPU, and a free figure that never underflows, keeps
 * free + used <= total and is never more than the driver's own free
 * figure. GPUs that are not the job's (no ledger; NVML: no ledger with
 * that UUID) pass through. Also cuMemGetAddressRange_v2, which must know
 * the swap engine's allocations.
 */
#include <dlfcn.h>
#include <string.h>

#include "agent/shim/objects.h"
#include "agent/shim/shim.h"
#include "agent/shim/swap.h"

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* The job's view of device d: total = limit, used <= total, free. */
static void job_view(const struct ts_shim_dev *d, uint64_t real_free, uint64_t *total,
                     uint64_t *used, uint64_t *free)
{
    uint64_t limit = d->job->limit_bytes;
    uint64_t u = min_u64(atomic_load(&d->job->used_bytes), limit);
    *total = limit;
    *used = u;
    *free = min_u64(limit - u, real_free);
}

TS_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    ts_shim_init();
    if (ts_real[TS_H_cuMemGetInfo_v2] == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    size_t rf = 0, rt = 0;
    CUresult rc = TS_REAL(cuMemGetInfo_v2)(&rf, &rt);
    if (rc == CUDA_SUCCESS) {
        struct ts_shim_dev *d = ts_shim_dev(ts_shim_current_ordinal());
        if (d != NULL) {
            uint64_t t, u, f;
            job_view(d, rf, &t, &u, &f);
            rt = (size_t)t;
            rf = (size_t)f;
        }
    }
    if (free != NULL)
        *free = rf;
    if (total != NULL)
        *total = rt;
    /* cppcheck takes rc, a CUresult made by a call through TS_REAL's
     * __typeof__ cast, for an object holding &rf and &rt */
    /* cppcheck-suppress returnDanglingLifetime */
    return rc;
}

TS_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    ts_shim_init();
    if (ts_real[TS_H_cuDeviceTotalMem_v2] == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    int n = ts_obj_ndevs();
    if (n > 0 && (dev < 0 || dev >= n))
        return CUDA_ERROR_INVALID_DEVICE; /* a GPU the job may move to: hidden */
    CUresult rc = TS_REAL(cuDeviceTotalMem_v2)(bytes, ts_obj_real(dev));
    struct ts_shim_dev *d = ts_shim_dev((int)dev);
    if (rc == CUDA_SUCCESS && bytes != NULL && d != NULL)
        *bytes = (size_t)d->job->limit_bytes;
    return rc;
}

TS_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    ts_shim_init();
    if (ts_vmm_active()) {
        CUdeviceptr base;
        size_t size;
        if (ts_vmm_lookup(dptr, &base, &size) == CUDA_SUCCESS) {
            if (pbase != NULL)
                *pbase = base;
            if (psize != NULL)
                *psize = size;
            return CUDA_SUCCESS;
        }
    }
    if (ts_real[TS_H_cuMemGetAddressRange_v2] == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    return TS_REAL(cuMemGetAddressRange_v2)(pbase, psize, dptr);
}

/* ---- NVML ---- */

typedef nvmlReturn_t (*uuid_fn)(nvmlDevice_t, char *, unsigned int);
static uuid_fn nvml_uuid;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

static void find_nvml_uuid(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL)
        nvml_uuid = (uuid_fn)ts_real_dlsym(lib, "nvmlDeviceGetUUID");
}

/* The job's device with the UUID of `device`, or NULL. */
static struct ts_shim_dev *nvml_dev(nvmlDevice_t device)
{
    if (ts_shim.mode != TS_SHIM_ON)
        return NULL;
    pthread_once(&nvml_once, find_nvml_uuid);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    if (nvml_uuid == NULL || nvml_uuid(device, uuid, sizeof(uuid)) != NVML_SUCCESS)
        return NULL;
    for (int k = 0; k < ts_shim.ndevs; k++)
        if (strncmp(ts_shim.dev[k].l->h.uuid, uuid, sizeof(ts_shim.dev[k].l->h.uuid)) == 0)
            return &ts_shim.dev[k];
    return NULL;
}

TS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    ts_shim_init();
    ts_hooks_resolve_nvml();
    if (ts_real[TS_H_nvmlDeviceGetMemoryInfo] == NULL)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = TS_REAL(nvmlDeviceGetMemoryInfo)(device, memory);
    struct ts_shim_dev *d = rc == NVML_SUCCESS && memory != NULL ? nvml_dev(device) : NULL;
    if (d != NULL) {
        uint64_t t, u, f;
        job_view(d, memory->free, &t, &u, &f);
        memory->total = t;
        memory->used = u;
        memory->free = f;
    }
    return rc;
}

TS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    ts_shim_init();
    ts_hooks_resolve_nvml();
    if (ts_real[TS_H_nvmlDeviceGetMemoryInfo_v2] == NULL)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = TS_REAL(nvmlDeviceGetMemoryInfo_v2)(device, memory);
    struct ts_shim_dev *d = rc == NVML_SUCCESS && memory != NULL ? nvml_dev(device) : NULL;
    if (d != NULL) {
        uint64_t t, u, f;
        job_view(d, memory->free, &t, &u, &f);
        memory->total = t;
        memory->reserved = 0; /* the per-GPU reserve is not the job's */
        memory->used = u;
        memory->free = f;
    }
    return rc;
}
