/*
 * cu.h - the real driver entry points the shim calls for its own work
 * (charging, queries, the swap engine), resolved once from libcuda.so.1
 * by the shim's init (or by a test with dlsym). Hooks call the real
 * function of their own name through the hooks.def table instead.
 */
#ifndef TS_SHIM_CU_H
#define TS_SHIM_CU_H

#include "agent/abi/cuda.h"

struct ts_cu {
    CUresult (*cuCtxGetCurrent)(CUcontext *pctx);
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuCtxGetDevice)(CUdevice *device);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *pctx, CUdevice dev);
    CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceTotalMem_v2)(size_t *bytes, CUdevice dev);
    CUresult (*cuMemGetInfo_v2)(size_t *free, size_t *total);
    CUresult (*cuMemAddressReserve)(CUdeviceptr *ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags);
    CUresult (*cuMemAddressFree)(CUdeviceptr ptr, size_t size);
    CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags);
    CUresult (*cuMemRelease)(CUmemGenericAllocationHandle handle);
    CUresult (*cuMemMap)(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags);
    CUresult (*cuMemUnmap)(CUdeviceptr ptr, size_t size);
    CUresult (*cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                               size_t count);
    CUresult (*cuMemGetAllocationGranularity)(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option);
    CUresult (*cuMemcpyDtoH_v2)(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount);
    CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount);
    CUresult (*cuMemcpyDtoHAsync_v2)(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                     CUstream hStream);
    CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                     CUstream hStream);
    CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                     CUstream hStream);
    CUresult (*cuStreamCreate)(CUstream *phStream, unsigned int Flags);
    CUresult (*cuStreamSynchronize)(CUstream hStream);
    CUresult (*cuMemHostRegister_v2)(void *p, size_t bytesize, unsigned int Flags);
    CUresult (*cuMemHostUnregister)(void *p);
};

/* Fill *cu from a handle of libcuda.so.1 with the given lookup (the real
 * dlsym). Returns 0, or -1 when a function is missing (the table is then
 * partial: every pointer that was found is set, the rest are NULL). */
int ts_cu_load(struct ts_cu *cu, void *lib, void *(*lookup)(void *, const char *));

#endif /* TS_SHIM_CU_H */
