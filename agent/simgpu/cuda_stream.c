/*
 * cuda_stream.c - simgpu's libcuda.so.1: streams and events.
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

struct CUevent_st {
    _Atomic uint64_t at_ns; /* 0 = never recorded */
};

static struct table events; /* mu; created events */

/* ---- streams and events ---- */

CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    FAIL(cuStreamCreate, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_CTX();
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->ctx = cur();
    pthread_mutex_lock(&mu);
    bool ok = table_add(&streams, s);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phStream = s;
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream hs)
{
    NEED_INIT();
    pthread_mutex_lock(&mu);
    bool ok = table_del(&streams, hs);
    pthread_mutex_unlock(&mu);
    if (!ok)
        return CUDA_ERROR_INVALID_HANDLE;
    /* Work still queued completes: the stream's time is already in the
     * GPU's busy spans. */
    free(hs);
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream hs)
{
    return cuStreamDestroy_v2(hs);
}

CUresult cuStreamSynchronize(CUstream hs)
{
    FAIL(cuStreamSynchronize, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (capture_refuses_sync(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    ts_simgpu_sleep_until(atomic_load(&s->done_ns));
    pool_sync(s->ctx->ordinal);
    return CUDA_SUCCESS;
}

CUresult cuStreamQuery(CUstream hs)
{
    NEED_INIT();
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (capture_refuses_sync(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return ts_simgpu_now_ns() >= atomic_load(&s->done_ns) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int flags)
{
    FAIL(cuEventCreate, CUDA_ERROR_OUT_OF_MEMORY);
    NEED_CTX();
    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    bool ok = table_add(&events, e);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phEvent = e;
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent e)
{
    NEED_INIT();
    pthread_mutex_lock(&mu);
    bool ok = table_del(&events, e);
    pthread_mutex_unlock(&mu);
    if (!ok)
        return CUDA_ERROR_INVALID_HANDLE;
    free(e);
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent e)
{
    return cuEventDestroy_v2(e);
}

static bool event_ok(CUevent e)
{
    return known(&events, e);
}

CUresult cuEventRecord(CUevent e, CUstream hs)
{
    FAIL(cuEventRecord, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    if (!event_ok(e))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    atomic_store(&e->at_ns, max_u64(ts_simgpu_now_ns(), atomic_load(&s->done_ns)));
    return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent e)
{
    NEED_INIT();
    if (!event_ok(e))
        return CUDA_ERROR_INVALID_HANDLE;
    return ts_simgpu_now_ns() >= atomic_load(&e->at_ns) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent e)
{
    NEED_INIT();
    if (!event_ok(e))
        return CUDA_ERROR_INVALID_HANDLE;
    ts_simgpu_sleep_until(atomic_load(&e->at_ns));
    pool_sync(-1);
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    NEED_INIT();
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    if (!event_ok(a) || !event_ok(b))
        return CUDA_ERROR_INVALID_HANDLE;
    uint64_t ta = atomic_load(&a->at_ns), tb = atomic_load(&b->at_ns);
    if (ta == 0 || tb == 0)
        return CUDA_ERROR_INVALID_HANDLE;
    uint64_t now = ts_simgpu_now_ns();
    if (now < ta || now < tb)
        return CUDA_ERROR_NOT_READY;
    *ms = (float)(((double)tb - (double)ta) / 1e6);
    return CUDA_SUCCESS;
}
