/*
 * objhooks.c - the hooks of the devices and objects a move re-creates
 * (objects.h): device queries by the job's device index, contexts,
 * streams, events, modules and functions, each recorded when made and
 * translated to the driver's handle of now when used.
 *
 * Fail-open, all of them: the driver's answer passes back unchanged but
 * for the handles and device indexes. Those that make an object or give
 * the GPU work are gated, so none runs while a move is under way; the
 * queries (stream and event status, elapsed time) are not, and may read an
 * object the move left behind, which stays valid.
 */
#include "agent/shim/objects.h"
#include "agent/shim/shim.h"
#include "agent/shim/swap.h"

#define NEED_REAL(name)                                                                            \
    do {                                                                                           \
        ts_shim_init();                                                                            \
        if (__builtin_expect(ts_real[TS_H_##name] == NULL, 0))                                     \
            return CUDA_ERROR_NOT_SUPPORTED;                                                       \
    } while (0)
#define ENTER()                                                                                    \
    do {                                                                                           \
        CUresult gate_rc_ = ts_gate_enter();                                                       \
        if (gate_rc_ != CUDA_SUCCESS)                                                              \
            return gate_rc_;                                                                       \
        ts_obj_sync();                                                                             \
    } while (0)

/* The driver ordinal of the job's device dev; -1 when the job does not
 * see it (more devices than ledgers: the GPUs a move may go to). */
static int real_dev(CUdevice dev)
{
    int n = ts_obj_ndevs();
    if (n == 0)
        return dev;
    return dev >= 0 && dev < n ? ts_obj_real(dev) : -1;
}

/* The job's handle of the calling thread's current context. */
static CUcontext job_ctx(void)
{
    CUcontext c = NULL;
    if (ts_shim.cu.cuCtxGetCurrent)
        ts_shim.cu.cuCtxGetCurrent(&c);
    return ts_obj_job_ctx(c);
}

/* ---- devices ---- */

TS_EXPORT CUresult cuDeviceGetCount(int *count)
{
    NEED_REAL(cuDeviceGetCount);
    CUresult rc = TS_REAL(cuDeviceGetCount)(count);
    int n = ts_obj_ndevs();
    if (rc == CUDA_SUCCESS && count && n > 0 && *count > n)
        *count = n;
    return rc;
}

TS_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    NEED_REAL(cuDeviceGet);
    int real = real_dev(ordinal);
    if (real < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc = TS_REAL(cuDeviceGet)(device, real);
    if (rc == CUDA_SUCCESS && device && ts_obj_ndevs() > 0)
        *device = ordinal; /* the job's device index */
    return rc;
}

TS_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    NEED_REAL(cuDeviceGetAttribute);
    int real = real_dev(dev);
    return real < 0 ? CUDA_ERROR_INVALID_DEVICE : TS_REAL(cuDeviceGetAttribute)(pi, attrib, real);
}

TS_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    NEED_REAL(cuDeviceGetName);
    int real = real_dev(dev);
    return real < 0 ? CUDA_ERROR_INVALID_DEVICE : TS_REAL(cuDeviceGetName)(name, len, real);
}

TS_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    NEED_REAL(cuDeviceGetUuid);
    int real = real_dev(dev);
    return real < 0 ? CUDA_ERROR_INVALID_DEVICE : TS_REAL(cuDeviceGetUuid)(uuid, real);
}

TS_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    NEED_REAL(cuDeviceGetUuid_v2);
    int real = real_dev(dev);
    return real < 0 ? CUDA_ERROR_INVALID_DEVICE : TS_REAL(cuDeviceGetUuid_v2)(uuid, real);
}

TS_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    NEED_REAL(cuDevicePrimaryCtxRetain);
    int real = real_dev(dev);
    if (real < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    ENTER();
    CUresult rc = TS_REAL(cuDevicePrimaryCtxRetain)(pctx, real);
    if (rc == CUDA_SUCCESS && pctx)
        ts_obj_add_ctx(ts_obj_job_ctx(*pctx), dev, true, 0);
    if (rc == CUDA_SUCCESS && pctx)
        *pctx = ts_obj_job_ctx(*pctx);
    ts_gate_leave();
    return rc;
}

TS_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    NEED_REAL(cuDevicePrimaryCtxRelease_v2);
    int real = real_dev(dev);
    return real < 0 ? CUDA_ERROR_INVALID_DEVICE : TS_REAL(cuDevicePrimaryCtxRelease_v2)(real);
}

/* ---- contexts ---- */

TS_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    NEED_REAL(cuCtxCreate_v2);
    int real = real_dev(dev);
    if (real < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    ENTER();
    CUresult rc = TS_REAL(cuCtxCreate_v2)(pctx, flags, real);
    if (rc == CUDA_SUCCESS && pctx)
        ts_obj_add_ctx(*pctx, dev, false, flags);
    ts_gate_leave();
    return rc;
}

TS_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    NEED_REAL(cuCtxDestroy_v2);
    ENTER();
    void *driver;
    ts_obj_del(ctx, &driver);
    CUresult rc = TS_REAL(cuCtxDestroy_v2)(driver);
    ts_gate_leave();
    return rc;
}

TS_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    NEED_REAL(cuCtxSetCurrent);
    ts_obj_sync();
    return TS_REAL(cuCtxSetCurrent)(ts_obj_xl(ctx));
}

TS_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    NEED_REAL(cuCtxGetCurrent);
    ts_obj_sync();
    CUresult rc = TS_REAL(cuCtxGetCurrent)(pctx);
    if (rc == CUDA_SUCCESS && pctx)
        *pctx = ts_obj_job_ctx(*pctx);
    return rc;
}

TS_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    NEED_REAL(cuCtxPushCurrent_v2);
    ts_obj_sync();
    return TS_REAL(cuCtxPushCurrent_v2)(ts_obj_xl(ctx));
}

TS_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    NEED_REAL(cuCtxPopCurrent_v2);
    ts_obj_sync();
    CUresult rc = TS_REAL(cuCtxPopCurrent_v2)(pctx);
    if (rc == CUDA_SUCCESS && pctx)
        *pctx = ts_obj_job_ctx(*pctx);
    /* the context below may be one a move left behind */
    CUcontext below = NULL;
    if (rc == CUDA_SUCCESS && ts_shim.cu.cuCtxGetCurrent &&
        ts_shim.cu.cuCtxGetCurrent(&below) == CUDA_SUCCESS && below && ts_obj_xl(below) != below)
        ts_shim.cu.cuCtxSetCurrent(ts_obj_xl(below));
    return rc;
}

TS_EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    NEED_REAL(cuCtxGetDevice);
    ts_obj_sync();
    CUresult rc = TS_REAL(cuCtxGetDevice)(device);
    if (rc == CUDA_SUCCESS && device && ts_obj_ndevs() > 0) {
        int v = ts_obj_virtual(*device);
        if (v >= 0)
            *device = v;
    }
    return rc;
}

TS_EXPORT CUresult cuCtxSynchronize(void)
{
    NEED_REAL(cuCtxSynchronize);
    ENTER();
    ts_shim_touch();
    CUresult rc = TS_REAL(cuCtxSynchronize)();
    ts_gate_leave();
    return rc;
}

/* ---- streams and events ---- */

TS_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    NEED_REAL(cuStreamCreate);
    ENTER();
    CUresult rc = TS_REAL(cuStreamCreate)(phStream, Flags);
    if (rc == CUDA_SUCCESS && phStream)
        ts_obj_add(TS_OBJ_STREAM, *phStream, job_ctx(), Flags);
    ts_gate_leave();
    return rc;
}

TS_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    NEED_REAL(cuStreamDestroy_v2);
    ENTER();
    void *driver;
    ts_obj_del(hStream, &driver);
    CUresult rc = TS_REAL(cuStreamDestroy_v2)(driver);
    ts_gate_leave();
    return rc;
}

TS_EXPORT CUresult cuStreamQuery(CUstream hStream)
{
    NEED_REAL(cuStreamQuery);
    ts_obj_sync();
    return TS_REAL(cuStreamQuery)(ts_obj_xl(hStream));
}

TS_EXPORT CUresult cuStreamQuery_ptsz(CUstream hStream)
{
    NEED_REAL(cuStreamQuery_ptsz);
    ts_obj_sync();
    return TS_REAL(cuStreamQuery_ptsz)(ts_obj_xl(hStream));
}

TS_EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    NEED_REAL(cuEventCreate);
    ENTER();
    CUresult rc = TS_REAL(cuEventCreate)(phEvent, Flags);
    if (rc == CUDA_SUCCESS && phEvent)
        ts_obj_add(TS_OBJ_EVENT, *phEvent, job_ctx(), Flags);
    ts_gate_leave();
    return rc;
}

TS_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent)
{
    NEED_REAL(cuEventDestroy_v2);
    ENTER();
    void *driver;
    ts_obj_del(hEvent, &driver);
    CUresult rc = TS_REAL(cuEventDestroy_v2)(driver);
    ts_gate_leave();
    return rc;
}

TS_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    NEED_REAL(cuEventRecord);
    ENTER();
    CUresult rc = TS_REAL(cuEventRecord)(ts_obj_xl(hEvent), ts_obj_xl(hStream));
    ts_gate_leave();
    return rc;
}

TS_EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    NEED_REAL(cuEventRecord_ptsz);
    ENTER();
    CUresult rc = TS_REAL(cuEventRecord_ptsz)(ts_obj_xl(hEvent), ts_obj_xl(hStream));
    ts_gate_leave();
    return rc;
}

TS_EXPORT CUresult cuEventQuery(CUevent hEvent)
{
    NEED_REAL(cuEventQuery);
    return TS_REAL(cuEventQuery)(ts_obj_xl(hEvent));
}

TS_EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    NEED_REAL(cuEventElapsedTime);
    return TS_REAL(cuEventElapsedTime)(pMilliseconds, ts_obj_xl(hStart), ts_obj_xl(hEnd));
}

/* ---- modules and functions ---- */

TS_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    NEED_REAL(cuModuleLoadData);
    ENTER();
    CUresult rc = TS_REAL(cuModuleLoadData)(module, image);
    if (rc == CUDA_SUCCESS && module)
        ts_obj_add_module(*module, job_ctx(), image);
    ts_gate_leave();
    return rc;
}

TS_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                      CUjit_option *options, void **optionValues)
{
    NEED_REAL(cuModuleLoadDataEx);
    ENTER();
    CUresult rc = TS_REAL(cuModuleLoadDataEx)(module, image, numOptions, options, optionValues);
    if (rc == CUDA_SUCCESS && module)
        ts_obj_add_module(*module, job_ctx(), image);
    ts_gate_leave();
    return rc;
}

TS_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    NEED_REAL(cuModuleUnload);
    ENTER();
    void *driver;
    ts_obj_del(hmod, &driver);
    CUresult rc = TS_REAL(cuModuleUnload)(driver);
    ts_gate_leave();
    return rc;
}

TS_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    NEED_REAL(cuModuleGetFunction);
    ENTER();
    CUresult rc = TS_REAL(cuModuleGetFunction)(hfunc, ts_obj_xl(hmod), name);
    if (rc == CUDA_SUCCESS && hfunc && name)
        ts_obj_add_func(*hfunc, hmod, name);
    ts_gate_leave();
    return rc;
}
