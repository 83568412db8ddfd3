/*
 * cuda_ptsz.c - simgpu's libcuda.so.1: the per-thread default stream
 * flavours (_ptsz, _ptds) of the calls that take a stream.
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
