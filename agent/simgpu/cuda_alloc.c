/*
 * cuda_alloc.c - the allocation paths of simgpu's libcuda.so.1 beyond
 * cuMemAlloc: pitched and managed memory, arrays, the address range of an
 * allocation, and the unified-addressing copies cuMemcpy / cuMemcpyAsync.
 *
 * Pitched and managed memory are cuMemAlloc memory (charged page-rounded,
 * freed by cuMemFree or with their context). Managed memory is charged to
 * the GPU and stays there: real managed memory migrates between host and
 * device, which simgpu does not model; since device pointers are host
 * addresses, the host reads and writes it directly, as it may in CUDA.
 * Arrays hold no contents (no copy reaches them): they only charge the GPU.
 */
#include <stdlib.h>
#include <sys/mman.h>

#pragma GCC visibility push(default)
#include "agent/abi/cuda.h"
#pragma GCC visibility pop
#include "agent/simgpu/cuda_int.h"

#define PITCH_ALIGN ((size_t)512) /* cuMemAllocPitch rounds the pitch up to this */

struct CUarray_st {
    struct CUctx_st *ctx;
    int ordinal;
    uint64_t bytes; /* charged to the GPU */
};

static struct table arrays; /* mu */

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    FAIL(cuMemAllocPitch_v2, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_CTX();
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = round_up(WidthInBytes, PITCH_ALIGN), bytes;
    if (pitch < WidthInBytes || __builtin_mul_overflow(pitch, Height, &bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = mem_alloc(dptr, bytes);
    if (rc == CUDA_SUCCESS)
        *pPitch = pitch;
    return rc;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    FAIL(cuMemAllocManaged, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_CTX();
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return mem_alloc(dptr, bytesize);
}

/* Any allocation kind: cuMemAlloc (pitched, managed, stream-ordered), a
 * mapping of the virtual memory API, page-locked host memory. */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    FAIL(cuMemGetAddressRange_v2, CUDA_ERROR_UNKNOWN);
    NEED_CTX();
    pthread_mutex_lock(&mu);
    const struct region *r = region_at(dptr);
    uint64_t base = r ? r->va : 0, size = r ? r->size : 0;
    pthread_mutex_unlock(&mu);
    if (!r)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = base;
    if (psize)
        *psize = size;
    return CUDA_SUCCESS;
}

/* ---- unified copies ---- */

/* One side of a unified copy: device memory of this process (any kind;
 * page-locked host memory counts as host), or else ordinary host memory,
 * which must be mapped and meet no region (so a stale or overrunning device
 * pointer is refused, not taken for host memory). */
static CUresult copy_side(uint64_t va, size_t n, bool write, bool *device, int *ord)
{
    pthread_mutex_lock(&mu);
    const struct region *r = region_at(va);
    bool in_region = r != NULL, host = r && r->kind == REGION_HOST;
    bool overlap = !r && any_overlap(va, n);
    pthread_mutex_unlock(&mu);
    *device = in_region && !host;
    if (in_region)
        return range_check(va, n, write, ord);
    if (overlap || va == 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* madvise fails with ENOMEM on a hole: an unmapped range is refused. */
    uintptr_t lo = (uintptr_t)va & ~(uintptr_t)(PAGE - 1);
    if (madvise((void *)lo, round_up((size_t)(va + n - lo), PAGE), MADV_NORMAL) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult copy_unified(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream hs, bool async)
{
    NEED_CTX();
    if (n == 0)
        return stream_of(hs) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    if (dst + n < dst || src + n < src)
        return CUDA_ERROR_INVALID_VALUE;
    bool ddev = false, sdev = false;
    int dord = -1, sord = -1;
    CUresult rc = copy_side(dst, n, true, &ddev, &dord);
    if (rc == CUDA_SUCCESS)
        rc = copy_side(src, n, false, &sdev, &sord);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The bandwidth is the device side's GPU's. */
    int ord = ddev ? dord : sdev ? sord : dord >= 0 ? dord : sord >= 0 ? sord : cur()->ordinal;
    return do_copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, ord, ddev != sdev, hs,
                   async);
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    FAIL(cuMemcpy, CUDA_ERROR_UNKNOWN);
    return copy_unified(dst, src, ByteCount, NULL, false);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    FAIL(cuMemcpyAsync, CUDA_ERROR_UNKNOWN);
    return copy_unified(dst, src, ByteCount, hStream, true);
}

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    FAIL(cuMemcpy, CUDA_ERROR_UNKNOWN);
    return copy_unified(dst, src, ByteCount, CU_STREAM_PER_THREAD, false);
}

CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    return cuMemcpyAsync(dst, src, ByteCount, per_thread(hStream));
}

/* ---- 2D copies ----
 *
 * HOST, DEVICE and UNIFIED sides; an ARRAY side is CUDA_ERROR_NOT_SUPPORTED
 * (simgpu's arrays hold no contents). The whole span of each side (from its
 * first byte to the last byte of its last row) is checked before a byte
 * moves: a DEVICE side must be device memory of this process, a HOST side
 * mapped host memory that is no device allocation, a UNIFIED side either. */

CUresult side_2d(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x, size_t y,
                 size_t pitch, size_t w, size_t h, bool write, struct side2d *out)
{
    if (type == CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (type != CU_MEMORYTYPE_HOST && type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t base = type == CU_MEMORYTYPE_HOST ? (uint64_t)(uintptr_t)host : dev;
    /* first = base + y*pitch + x; span = (h-1)*pitch + w, all checked. */
    if (h > 1 && pitch < w)
        return CUDA_ERROR_INVALID_VALUE;
    if (y && pitch > UINT64_MAX / y)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t off = (uint64_t)y * pitch;
    if (off > UINT64_MAX - x || base > UINT64_MAX - (off + x))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t first = base + off + x;
    if (h - 1 > 0 && pitch > (UINT64_MAX - w) / (h - 1))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t span = (uint64_t)(h - 1) * pitch + w;
    if (first > UINT64_MAX - span)
        return CUDA_ERROR_INVALID_VALUE;
    out->va = first;
    out->device = false;
    out->ord = -1;
    if (type == CU_MEMORYTYPE_DEVICE) {
        out->device = true;
        return range_check(first, span, write, &out->ord);
    }
    CUresult rc = copy_side(first, span, write, &out->device, &out->ord);
    if (rc == CUDA_SUCCESS && type == CU_MEMORYTYPE_HOST && out->device)
        return CUDA_ERROR_INVALID_VALUE;
    return rc;
}

static CUresult copy_2d(const CUDA_MEMCPY2D *c, CUstream hs, bool async)
{
    NEED_CTX();
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    if (!stream_of(hs))
        return async ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
    if (c->WidthInBytes == 0 || c->Height == 0)
        return CUDA_SUCCESS;
    struct side2d d, s;
    CUresult rc = side_2d(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY,
                          c->dstPitch, c->WidthInBytes, c->Height, true, &d);
    if (rc == CUDA_SUCCESS)
        rc = side_2d(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY,
                     c->srcPitch, c->WidthInBytes, c->Height, false, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    int ord = d.device ? d.ord : s.device ? s.ord : cur()->ordinal;
    /* Row by row: each row costs its bytes at the copy bandwidth, so the
     * whole copy costs Width x Height, as one copy of that size. */
    for (size_t row = 0; row < c->Height && rc == CUDA_SUCCESS; row++)
        rc = do_copy((void *)(uintptr_t)(d.va + (uint64_t)row * c->dstPitch),
                     (const void *)(uintptr_t)(s.va + (uint64_t)row * c->srcPitch), c->WidthInBytes,
                     ord, d.device != s.device, hs, async);
    return rc;
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    FAIL(cuMemcpy2D_v2, CUDA_ERROR_UNKNOWN);
    return copy_2d(pCopy, NULL, false);
}

CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    FAIL(cuMemcpy2DAsync_v2, CUDA_ERROR_UNKNOWN);
    return copy_2d(pCopy, hStream, true);
}

CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    FAIL(cuMemcpy2D_v2, CUDA_ERROR_UNKNOWN);
    return copy_2d(pCopy, CU_STREAM_PER_THREAD, false);
}

CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    return cuMemcpy2DAsync_v2(pCopy, per_thread(hStream));
}

/* ---- arrays ---- */

static size_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    }
    return 0;
}

/* Charges width * height * depth * element size * channels (a height or
 * depth of 0 counts as 1) to the current context's GPU. */
static CUresult array_make(CUarray *ph, size_t w, size_t h, size_t d, CUarray_format format,
                           unsigned channels)
{
    NEED_CTX();
    size_t elem = format_bytes(format), bytes;
    if (!ph || w == 0 || elem == 0 || (channels != 1 && channels != 2 && channels != 4))
        return CUDA_ERROR_INVALID_VALUE;
    if (__builtin_mul_overflow(w, h ? h : 1, &bytes) ||
        __builtin_mul_overflow(bytes, d ? d : 1, &bytes) ||
        __builtin_mul_overflow(bytes, elem * channels, &bytes) || bytes > INT64_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct CUarray_st *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *a = (struct CUarray_st){.ctx = cur(), .ordinal = cur()->ordinal, .bytes = bytes};
    if (charge_or_trim(a->ordinal, (int64_t)bytes) < 0) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&mu);
    bool ok = table_add(&arrays, a);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        ts_simgpu_charge(&devs[a->ordinal], -(int64_t)bytes);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ph = a;
    return CUDA_SUCCESS;
}

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    FAIL(cuArrayCreate_v2, CUDA_ERROR_OUT_OF_MEMORY);
    if (!desc)
        return CUDA_ERROR_INVALID_VALUE;
    return array_make(pHandle, desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
}

/* Flags (layered, surface, cubemap, ...) are accepted and do not change the
 * charge: a layered array's Depth is its number of layers. */
CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    FAIL(cuArray3DCreate_v2, CUDA_ERROR_OUT_OF_MEMORY);
    if (!desc)
        return CUDA_ERROR_INVALID_VALUE;
    return array_make(pHandle, desc->Width, desc->Height, desc->Depth, desc->Format,
                      desc->NumChannels);
}

CUresult cuArrayDestroy(CUarray hArray)
{
    FAIL(cuArrayDestroy, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    pthread_mutex_lock(&mu);
    bool ok = table_del(&arrays, hArray);
    pthread_mutex_unlock(&mu);
    if (!ok)
        return CUDA_ERROR_INVALID_HANDLE;
    ts_simgpu_charge(&devs[hArray->ordinal], -(int64_t)hArray->bytes);
    free(hArray);
    return CUDA_SUCCESS;
}

void arrays_ctx_gone(struct CUctx_st *ctx)
{
    for (size_t i = 0; i < arrays.n;) {
        struct CUarray_st *a = arrays.items[i];
        if (a->ctx == ctx) {
            table_del(&arrays, a);
            ts_simgpu_charge(&devs[a->ordinal], -(int64_t)a->bytes);
            free(a);
        } else {
            i++;
        }
    }
}
