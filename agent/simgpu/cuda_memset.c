/*
 * cuda_memset.c - the memsets of simgpu's libcuda.so.1: 1D (cuMemsetD8_v2,
 * cuMemsetD16_v2, cuMemsetD32_v2, cuMemsetD8Async, cuMemsetD16Async,
 * cuMemsetD32Async) and 2D (cuMemsetD2D8_v2, cuMemsetD2D16_v2,
 * cuMemsetD2D32_v2 and their Async forms), with the per-thread default
 * stream flavours of the 2D ones and cuMemsetD16Async (cuda.c has those of
 * the others).
 *
 * A 2D memset writes Height rows of Width elements, rows dstPitch bytes
 * apart; the whole span (from the first byte to the last element of the
 * last row) must be device memory of this process, and the pointer (and the
 * pitch, with more than one row) aligned to the element, else
 * CUDA_ERROR_INVALID_VALUE and nothing is written. The Async forms need a
 * valid stream and write at once, as the async copies do.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#pragma GCC visibility push(default)
#include "agent/abi/cuda.h"
#pragma GCC visibility pop
#include "agent/simgpu/cuda_int.h"

/* n elements of elem bytes (1, 2 or 4) of value v at p. */
static void fill(uint64_t p, uint32_t v, size_t elem, size_t n)
{
    if (elem == 1) {
        memset((void *)(uintptr_t)p, (int)(v & 0xFF), n);
    } else if (elem == 2) {
        uint16_t *q = (uint16_t *)(uintptr_t)p;
        for (size_t i = 0; i < n; i++)
            q[i] = (uint16_t)v;
    } else {
        uint32_t *q = (uint32_t *)(uintptr_t)p;
        for (size_t i = 0; i < n; i++)
            q[i] = v;
    }
}

/* The 1D memsets but cuMemsetD16Async: n elements of elem bytes; the
 * pointer aligned to the element and the whole range device memory of this
 * process (checked even when n is 0), else nothing is written. The async
 * forms need a valid stream and write at once, as the async copies do. */
static CUresult memset_1d(CUdeviceptr dst, uint32_t v, size_t elem, size_t n, CUstream hs,
                          bool async)
{
    NEED_CTX();
    if (async && !stream_of(hs))
        return CUDA_ERROR_INVALID_HANDLE;
    if (dst % elem != 0 || n > SIZE_MAX / elem)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = range_check(dst, n * elem, true, NULL);
    if (rc == CUDA_SUCCESS)
        fill(dst, v, elem, n);
    return rc;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n)
{
    FAIL(cuMemsetD8_v2, CUDA_ERROR_UNKNOWN);
    return memset_1d(dst, uc, 1, n, NULL, false);
}

CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short us, size_t n)
{
    FAIL(cuMemsetD16_v2, CUDA_ERROR_UNKNOWN);
    return memset_1d(dst, us, 2, n, NULL, false);
}

CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int ui, size_t n)
{
    FAIL(cuMemsetD32_v2, CUDA_ERROR_UNKNOWN);
    return memset_1d(dst, ui, 4, n, NULL, false);
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n, CUstream hs)
{
    FAIL(cuMemsetD8Async, CUDA_ERROR_UNKNOWN);
    return memset_1d(dst, uc, 1, n, hs, true);
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n, CUstream hs)
{
    FAIL(cuMemsetD32Async, CUDA_ERROR_UNKNOWN);
    return memset_1d(dst, ui, 4, n, hs, true);
}

static CUresult memset_2d(CUdeviceptr dst, size_t pitch, uint32_t v, size_t elem, size_t w,
                          size_t h, CUstream hs, bool async)
{
    NEED_CTX();
    if (async && !stream_of(hs))
        return CUDA_ERROR_INVALID_HANDLE;
    if (w == 0 || h == 0)
        return CUDA_SUCCESS;
    size_t row, span;
    if (dst % elem != 0 || (h > 1 && pitch % elem != 0) || __builtin_mul_overflow(w, elem, &row) ||
        (h > 1 && pitch < row) || __builtin_mul_overflow(h - 1, pitch, &span) ||
        __builtin_add_overflow(span, row, &span))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = range_check(dst, span, true, NULL);
    if (rc != CUDA_SUCCESS)
        return rc;
    for (size_t r = 0; r < h; r++)
        fill(dst + (uint64_t)r * pitch, v, elem, w);
    return CUDA_SUCCESS;
}

CUresult cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                         size_t Height)
{
    FAIL(cuMemsetD2D8_v2, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, dstPitch, uc, 1, Width, Height, NULL, false);
}

CUresult cuMemsetD2D16_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width,
                          size_t Height)
{
    FAIL(cuMemsetD2D16_v2, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, dstPitch, us, 2, Width, Height, NULL, false);
}

CUresult cuMemsetD2D32_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width,
                          size_t Height)
{
    FAIL(cuMemsetD2D32_v2, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, dstPitch, ui, 4, Width, Height, NULL, false);
}

CUresult cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                           size_t Height, CUstream hStream)
{
    FAIL(cuMemsetD2D8Async, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, dstPitch, uc, 1, Width, Height, hStream, true);
}

CUresult cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width,
                            size_t Height, CUstream hStream)
{
    FAIL(cuMemsetD2D16Async, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, dstPitch, us, 2, Width, Height, hStream, true);
}

CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width,
                            size_t Height, CUstream hStream)
{
    FAIL(cuMemsetD2D32Async, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, dstPitch, ui, 4, Width, Height, hStream, true);
}

/* cuMemsetD16Async: one row of N 16-bit elements. */
CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
    FAIL(cuMemsetD16Async, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, 0, us, 2, N, 1, hStream, true);
}

/* ---- per-thread default stream flavours (counted with the plain calls;
 * they call no entry point, which an interposer could catch) ---- */

CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                              size_t Width, size_t Height)
{
    FAIL(cuMemsetD2D8_v2, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, dstPitch, uc, 1, Width, Height, NULL, false);
}

CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                               size_t Width, size_t Height)
{
    FAIL(cuMemsetD2D16_v2, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, dstPitch, us, 2, Width, Height, NULL, false);
}

CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                               size_t Width, size_t Height)
{
    FAIL(cuMemsetD2D32_v2, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, dstPitch, ui, 4, Width, Height, NULL, false);
}

CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                size_t Width, size_t Height, CUstream hStream)
{
    FAIL(cuMemsetD2D8Async, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, dstPitch, uc, 1, Width, Height, per_thread(hStream), true);
}

CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                 size_t Width, size_t Height, CUstream hStream)
{
    FAIL(cuMemsetD2D16Async, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, dstPitch, us, 2, Width, Height, per_thread(hStream), true);
}

CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                 size_t Width, size_t Height, CUstream hStream)
{
    FAIL(cuMemsetD2D32Async, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, dstPitch, ui, 4, Width, Height, per_thread(hStream), true);
}

CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
    FAIL(cuMemsetD16Async, CUDA_ERROR_UNKNOWN);
    return memset_2d(dstDevice, 0, us, 2, N, 1, per_thread(hStream), true);
}
