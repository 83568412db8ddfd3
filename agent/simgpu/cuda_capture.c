/*
 * cuda_capture.c - stream capture in simgpu's libcuda.so.1: enough for a
 * program (and the CUDA interposer, which must never block while a stream
 * captures) to see when capture is active.
 *
 * cuStreamBeginCapture_v2 marks a created stream capturing and keeps its
 * mode; cuStreamIsCapturing reports it; cuStreamEndCapture returns an opaque
 * graph, freed with cuGraphDestroy. Work queued on a capturing stream runs at
 * once (there is no graph launch to defer it to). Synchronizing or querying
 * a capturing stream, or synchronizing its context, is
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, as in
 * CUDA; the legacy and per-thread default streams cannot be captured here.
 */
#include <stdlib.h>

#pragma GCC visibility push(default)
#include "agent/abi/cuda.h"
#pragma GCC visibility pop
#include "agent/simgpu/cuda_int.h"

struct CUgraph_st {
    int ordinal; /* the GPU of the stream it was captured from */
};

/* An instantiated graph: simgpu's graphs are empty, so launching one
 * checks its handle and stream and does nothing. */
struct CUgraphExec_st {
    int ordinal;
};

static struct table graphs; /* mu */
static struct table execs;  /* mu */

static bool default_stream(CUstream hs)
{
    return hs == NULL || hs == CU_STREAM_LEGACY || hs == CU_STREAM_PER_THREAD;
}

bool capture_refuses_sync(struct CUstream_st *s)
{
    pthread_mutex_lock(&mu);
    bool capturing = atomic_load(&s->capture) != CU_STREAM_CAPTURE_STATUS_NONE;
    if (capturing)
        atomic_store(&s->capture, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    pthread_mutex_unlock(&mu);
    return capturing;
}

CUresult cuStreamBeginCapture_v2(CUstream hs, CUstreamCaptureMode mode)
{
    FAIL(cuStreamBeginCapture_v2, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (default_stream(hs))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    if (atomic_load(&s->capture) != CU_STREAM_CAPTURE_STATUS_NONE) {
        rc = CUDA_ERROR_ILLEGAL_STATE;
    } else {
        s->capture_mode = mode;
        s->capture_thread = pthread_self();
        atomic_store(&s->capture, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

CUresult cuStreamEndCapture(CUstream hs, CUgraph *phGraph)
{
    FAIL(cuStreamEndCapture, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    *phGraph = NULL;
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->ordinal = s->ctx->ordinal;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    int st = atomic_load(&s->capture);
    if (st == CU_STREAM_CAPTURE_STATUS_NONE) {
        rc = CUDA_ERROR_ILLEGAL_STATE;
    } else if (s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
               !pthread_equal(s->capture_thread, pthread_self())) {
        rc = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    } else if (st == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        atomic_store(&s->capture, CU_STREAM_CAPTURE_STATUS_NONE);
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (!table_add(&graphs, g)) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        atomic_store(&s->capture, CU_STREAM_CAPTURE_STATUS_NONE);
        *phGraph = g;
    }
    pthread_mutex_unlock(&mu);
    if (rc != CUDA_SUCCESS)
        free(g);
    return rc;
}

CUresult cuStreamIsCapturing(CUstream hs, CUstreamCaptureStatus *captureStatus)
{
    NEED_INIT();
    if (!captureStatus)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    *captureStatus = (CUstreamCaptureStatus)atomic_load(&s->capture);
    return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
    FAIL(cuGraphDestroy, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    pthread_mutex_lock(&mu);
    bool ok = table_del(&graphs, hGraph);
    pthread_mutex_unlock(&mu);
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    free(hGraph);
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
    FAIL(cuGraphInstantiateWithFlags, CUDA_ERROR_UNKNOWN);
    NEED_CTX();
    if (!phGraphExec || (flags & ~0xfULL))
        return CUDA_ERROR_INVALID_VALUE;
    *phGraphExec = NULL;
    struct CUgraphExec_st *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mu);
    if (!table_has(&graphs, hGraph))
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (!table_add(&execs, e))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else
        e->ordinal = hGraph->ordinal;
    pthread_mutex_unlock(&mu);
    if (rc != CUDA_SUCCESS) {
        free(e);
        return rc;
    }
    *phGraphExec = e;
    return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hs)
{
    FAIL(cuGraphLaunch, CUDA_ERROR_LAUNCH_FAILED);
    NEED_CTX();
    if (!known(&execs, hGraphExec))
        return CUDA_ERROR_INVALID_VALUE;
    if (!stream_of(hs))
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS; /* the work ran during capture */
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    FAIL(cuGraphExecDestroy, CUDA_ERROR_UNKNOWN);
    NEED_INIT();
    pthread_mutex_lock(&mu);
    bool ok = table_del(&execs, hGraphExec);
    pthread_mutex_unlock(&mu);
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    free(hGraphExec);
    return CUDA_SUCCESS;
}

/* Per-thread default stream flavours: their NULL stream is
 * CU_STREAM_PER_THREAD, which simgpu does not capture. */

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hs, CUstreamCaptureMode mode)
{
    return cuStreamBeginCapture_v2(per_thread(hs), mode);
}

CUresult cuStreamEndCapture_ptsz(CUstream hs, CUgraph *phGraph)
{
    return cuStreamEndCapture(per_thread(hs), phGraph);
}

CUresult cuStreamIsCapturing_ptsz(CUstream hs, CUstreamCaptureStatus *captureStatus)
{
    return cuStreamIsCapturing(per_thread(hs), captureStatus);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hs)
{
    return cuGraphLaunch(hGraphExec, per_thread(hs));
}
