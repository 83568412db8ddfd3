/*
 * alloc.c - the allocation and free hooks. Every physical allocation is
 * charged once before the driver is asked (README.md, "Charging"), and
 * remembered in the process-local table so that its free uncharges
 * exactly that; a failed allocation uncharges at once; a free of a pointer
 * the table does not know passes through. On a node that swaps,
 * cuMemAlloc_v2 and cuMemAllocPitch_v2 allocate through the swap engine
 * (ts_vmm_alloc), charged at the rounded size.
 */
#include <dlfcn.h>

#include "agent/shim/shim.h"
#include "agent/shim/swap.h"

#define PITCH_ALIGN 512u /* what the shim charges ahead of the driver's pitch */

/* Charge, then enter the gate (a wait for room is never inside it). */
static CUresult begin(int ord, uint64_t bytes, bool may_wait)
{
    CUresult rc = ts_charge(ord, bytes, may_wait ? TS_CHARGE_WAIT : TS_CHARGE_NOWAIT);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ts_gate_enter();
    if (rc != CUDA_SUCCESS) {
        ts_uncharge(ord, bytes);
        return rc;
    }
    ts_shim_touch();
    return CUDA_SUCCESS;
}

/* Leave the gate; uncharge a failure, remember a success. */
static CUresult finish(CUresult rc, int ord, uint64_t bytes, enum ts_alloc_kind kind, uint64_t key)
{
    ts_gate_leave();
    if (rc != CUDA_SUCCESS)
        ts_uncharge(ord, bytes);
    else if (ts_shim_dev(ord) != NULL && bytes > 0)
        ts_alloc_put(kind, key, ord, bytes);
    return rc;
}

#define NEED_REAL(name)                                                                            \
    do {                                                                                           \
        ts_shim_init();                                                                            \
        if (ts_real[TS_H_##name] == NULL)                                                          \
            return CUDA_ERROR_NOT_SUPPORTED;                                                       \
    } while (0)

static bool use_vmm(int ord, size_t bytes)
{
    return bytes > 0 && ts_shim_dev(ord) != NULL && ts_vmm_active();
}

TS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    NEED_REAL(cuMemAlloc_v2);
    int ord = ts_shim_current_ordinal();
    bool vmm = dptr != NULL && use_vmm(ord, bytesize);
    uint64_t bytes = vmm ? ts_vmm_round(ord, bytesize) : bytesize;
    CUresult rc = begin(ord, bytes, true);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (vmm) {
        rc = ts_vmm_alloc(ord, bytes, dptr);
        ts_gate_leave();
        if (rc != CUDA_SUCCESS)
            ts_uncharge(ord, bytes);
        return rc; /* the engine's table remembers it */
    }
    rc = TS_REAL(cuMemAlloc_v2)(dptr, bytesize);
    return finish(rc, ord, bytes, TS_ALLOC_PTR, rc == CUDA_SUCCESS ? *dptr : 0);
}

TS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                      size_t Height, unsigned int ElementSizeBytes)
{
    NEED_REAL(cuMemAllocPitch_v2);
    int ord = ts_shim_current_ordinal();
    uint64_t pitch = ((uint64_t)WidthInBytes + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
    uint64_t guess = pitch * Height;
    bool vmm = dptr != NULL && pPitch != NULL && use_vmm(ord, guess);
    if (vmm)
        guess = ts_vmm_round(ord, guess);
    CUresult rc = begin(ord, guess, true);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (vmm) {
        rc = ts_vmm_alloc(ord, guess, dptr);
        ts_gate_leave();
        if (rc != CUDA_SUCCESS)
            ts_uncharge(ord, guess);
        else
            *pPitch = (size_t)pitch;
        return rc;
    }
    rc = TS_REAL(cuMemAllocPitch_v2)(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    uint64_t bytes = guess;
    if (rc == CUDA_SUCCESS && pPitch != NULL) {
        /* charge what the driver really took: pitch * height */
        uint64_t real = (uint64_t)*pPitch * Height;
        if (real > guess && ts_charge(ord, real - guess, TS_CHARGE_NOWAIT) != CUDA_SUCCESS) {
            TS_REAL(cuMemFree_v2)(*dptr);
            return finish(CUDA_ERROR_OUT_OF_MEMORY, ord, guess, TS_ALLOC_PTR, 0);
        }
        if (real < guess)
            ts_uncharge(ord, guess - real);
        bytes = real;
    }
    return finish(rc, ord, bytes, TS_ALLOC_PTR, rc == CUDA_SUCCESS ? *dptr : 0);
}

TS_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    NEED_REAL(cuMemAllocManaged);
    int ord = ts_shim_current_ordinal();
    CUresult rc = begin(ord, bytesize, true);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = TS_REAL(cuMemAllocManaged)(dptr, bytesize, flags);
    return finish(rc, ord, bytesize, TS_ALLOC_PTR, rc == CUDA_SUCCESS ? *dptr : 0);
}

TS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags)
{
    NEED_REAL(cuMemCreate);
    int ord = -1; /* not device memory: not charged */
    if (prop != NULL && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        ord = prop->location.id;
    CUresult rc = begin(ord, size, true);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = TS_REAL(cuMemCreate)(handle, size, prop, flags);
    return finish(rc, ord, size, TS_ALLOC_HANDLE, rc == CUDA_SUCCESS ? *handle : 0);
}

/* ---- stream-ordered allocation ---- */

typedef CUresult (*capturing_fn)(CUstream, CUstreamCaptureStatus *);
static capturing_fn is_capturing;
static pthread_once_t capturing_once = PTHREAD_ONCE_INIT;

static void find_is_capturing(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL)
        is_capturing = (capturing_fn)ts_real_dlsym(lib, "cuStreamIsCapturing");
}

/* Never wait for room while the stream is being captured: fail fast. */
static bool may_wait_on(CUstream s)
{
    pthread_once(&capturing_once, find_is_capturing);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (is_capturing == NULL || is_capturing(s, &st) != CUDA_SUCCESS)
        return false; /* cannot tell: do not risk a wait */
    return st == CU_STREAM_CAPTURE_STATUS_NONE;
}

static CUresult alloc_async(void *real, bool from_pool, CUdeviceptr *dptr, size_t bytesize,
                            CUmemoryPool pool, CUstream s, CUstream null_stream)
{
    int ord = ts_shim_current_ordinal();
    bool wait = ts_shim_dev(ord) != NULL && may_wait_on(s != NULL ? s : null_stream);
    CUresult rc = begin(ord, bytesize, wait);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (from_pool)
        rc = ((__typeof__(&cuMemAllocFromPoolAsync))real)(dptr, bytesize, pool, s);
    else
        rc = ((__typeof__(&cuMemAllocAsync))real)(dptr, bytesize, s);
    return finish(rc, ord, bytesize, TS_ALLOC_PTR, rc == CUDA_SUCCESS ? *dptr : 0);
}

TS_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    NEED_REAL(cuMemAllocAsync);
    return alloc_async(ts_real[TS_H_cuMemAllocAsync], false, dptr, bytesize, NULL, hStream, NULL);
}

TS_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    NEED_REAL(cuMemAllocAsync_ptsz);
    return alloc_async(ts_real[TS_H_cuMemAllocAsync_ptsz], false, dptr, bytesize, NULL, hStream,
                       CU_STREAM_PER_THREAD);
}

TS_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                           CUstream hStream)
{
    NEED_REAL(cuMemAllocFromPoolAsync);
    return alloc_async(ts_real[TS_H_cuMemAllocFromPoolAsync], true, dptr, bytesize, pool, hStream,
                       NULL);
}

TS_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream hStream)
{
    NEED_REAL(cuMemAllocFromPoolAsync_ptsz);
    return alloc_async(ts_real[TS_H_cuMemAllocFromPoolAsync_ptsz], true, dptr, bytesize, pool,
                       hStream, CU_STREAM_PER_THREAD);
}

/* ---- arrays ---- */

static uint64_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 1;
    }
}

static uint64_t array_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch)
{
    return (uint64_t)w * (h ? h : 1) * (d ? d : 1) * (ch ? ch : 1) * format_bytes(f);
}

TS_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    NEED_REAL(cuArrayCreate_v2);
    int ord = ts_shim_current_ordinal();
    uint64_t bytes =
        desc ? array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels) : 0;
    CUresult rc = begin(ord, bytes, true);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = TS_REAL(cuArrayCreate_v2)(pHandle, desc);
    return finish(rc, ord, bytes, TS_ALLOC_ARRAY,
                  rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0);
}

TS_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    NEED_REAL(cuArray3DCreate_v2);
    int ord = ts_shim_current_ordinal();
    uint64_t bytes =
        desc ? array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels)
             : 0;
    CUresult rc = begin(ord, bytes, true);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = TS_REAL(cuArray3DCreate_v2)(pHandle, desc);
    return finish(rc, ord, bytes, TS_ALLOC_ARRAY,
                  rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0);
}

/* ---- frees ---- */

/* Take the entry before the driver frees (so a concurrent allocation at
 * the same address cannot be mistaken for it), put it back if the free
 * fails, uncharge if it succeeds. */
#define FREE_BODY(kind, key, call)                                                                 \
    do {                                                                                           \
        int ord_;                                                                                  \
        uint64_t bytes_;                                                                           \
        bool known_ = ts_alloc_take(kind, key, &ord_, &bytes_);                                    \
        CUresult rc_ = ts_gate_enter();                                                            \
        if (rc_ == CUDA_SUCCESS) {                                                                 \
            ts_shim_touch();                                                                       \
            rc_ = call;                                                                            \
            ts_gate_leave();                                                                       \
        }                                                                                          \
        if (known_ && rc_ == CUDA_SUCCESS)                                                         \
            ts_uncharge(ord_, bytes_);                                                             \
        else if (known_)                                                                           \
            ts_alloc_put(kind, key, ord_, bytes_);                                                 \
        return rc_;                                                                                \
    } while (0)

static bool vmm_free(CUdeviceptr p, CUresult *rc)
{
    if (!ts_vmm_active())
        return false;
    int dev;
    size_t bytes;
    bool resident = false;
    CUresult r = ts_gate_enter();
    if (r != CUDA_SUCCESS) {
        *rc = r;
        return true;
    }
    r = ts_vmm_free(p, &dev, &bytes, &resident);
    ts_gate_leave();
    if (r == CUDA_ERROR_NOT_FOUND)
        return false;
    if (r == CUDA_SUCCESS && resident)
        ts_uncharge(dev, bytes);
    *rc = r;
    return true;
}

TS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    NEED_REAL(cuMemFree_v2);
    CUresult rc;
    if (vmm_free(dptr, &rc))
        return rc;
    FREE_BODY(TS_ALLOC_PTR, dptr, TS_REAL(cuMemFree_v2)(dptr));
}

TS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    NEED_REAL(cuMemRelease);
    FREE_BODY(TS_ALLOC_HANDLE, handle, TS_REAL(cuMemRelease)(handle));
}

/* The memory goes back to the pool in stream order and the pool may keep
 * it cached; the shim uncharges at the call (README.md, limitations). */
TS_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    NEED_REAL(cuMemFreeAsync);
    FREE_BODY(TS_ALLOC_PTR, dptr, TS_REAL(cuMemFreeAsync)(dptr, hStream));
}

TS_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    NEED_REAL(cuMemFreeAsync_ptsz);
    FREE_BODY(TS_ALLOC_PTR, dptr, TS_REAL(cuMemFreeAsync_ptsz)(dptr, hStream));
}

TS_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    NEED_REAL(cuArrayDestroy);
    FREE_BODY(TS_ALLOC_ARRAY, (uint64_t)(uintptr_t)hArray, TS_REAL(cuArrayDestroy)(hArray));
}
