/*
 * cu.c - fill struct ts_cu (cu.h): the driver's own functions the shim and
 * the swap engine call for their own work, never the hooks.
 */
#include "agent/shim/cu.h"

#define TS_CU_FIELDS(X)                                                                            \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxSetCurrent)                                                                             \
    X(cuCtxGetDevice)                                                                              \
    X(cuCtxSynchronize)                                                                            \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceTotalMem_v2)                                                                         \
    X(cuMemGetInfo_v2)                                                                             \
    X(cuMemAddressReserve)                                                                         \
    X(cuMemAddressFree)                                                                            \
    X(cuMemCreate)                                                                                 \
    X(cuMemRelease)                                                                                \
    X(cuMemMap)                                                                                    \
    X(cuMemUnmap)                                                                                  \
    X(cuMemSetAccess)                                                                              \
    X(cuMemGetAllocationGranularity)                                                               \
    X(cuMemcpyDtoH_v2)                                                                             \
    X(cuMemcpyHtoD_v2)                                                                             \
    X(cuMemcpyDtoHAsync_v2)                                                                        \
    X(cuMemcpyHtoDAsync_v2)                                                                        \
    X(cuMemcpyDtoDAsync_v2)                                                                        \
    X(cuStreamCreate)                                                                              \
    X(cuStreamSynchronize)                                                                         \
    X(cuMemHostRegister_v2)                                                                        \
    X(cuMemHostUnregister)

int ts_cu_load(struct ts_cu *cu, void *lib, void *(*lookup)(void *, const char *))
{
    int missing = 0;
#define LOAD(name)                                                                                 \
    {                                                                                              \
        void *p = lib != NULL ? lookup(lib, #name) : NULL;                                         \
        cu->name = (__typeof__(cu->name))p;                                                        \
        missing += p == NULL;                                                                      \
    }
    TS_CU_FIELDS(LOAD)
#undef LOAD
    return missing ? -1 : 0;
}
