/*
 * cuda_copy.c - the copies of simgpu's libcuda.so.1 beyond the plain, unified
 * and 2D ones: 3D copies (cuMemcpy3D_v2, cuMemcpy3DAsync_v2), their
 * cross-context form (cuMemcpy3DPeer, cuMemcpy3DPeerAsync), peer copies
 * (cuMemcpyPeer, cuMemcpyPeerAsync), and their per-thread default stream
 * flavours.
 *
 * A 3D copy is Depth slices of Height rows of WidthInBytes; a side's rows are
 * Pitch bytes apart and its slices Height-of-the-side rows apart, so the
 * whole copy lies in one span of the side, which is checked (as a 2D side,
 * side_2d) before a byte moves. Device pointers of every GPU are addresses
 * of this process, so a copy between two GPUs is a memmove like any other;
 * what the peer forms add is the check that each device range is memory of
 * the GPU of the context named for it. A copy that crosses the host link or
 * goes from one GPU to another runs at the copy bandwidth (simgpu has no
 * NVLink); within one GPU it is not throttled. Array sides are
 * CUDA_ERROR_NOT_SUPPORTED: arrays hold no contents.
 */
#include <stdbool.h>
#include <stdint.h>

#pragma GCC visibility push(default)
#include "agent/abi/cuda.h"
#pragma GCC visibility pop
#include "agent/simgpu/cuda_int.h"

/* One side of a 3D copy, from either struct. */
struct side3d {
    CUmemorytype type;
    const void *host;
    CUdeviceptr dev;
    CUcontext ctx; /* peer forms: the context of a device side */
    size_t x, y, z, lod, pitch, height;
};

struct shape3d {
    size_t w, h, d;
    bool peer; /* contexts are named and checked */
};

/* A context named by a peer copy: one this process may use. */
static CUresult peer_ctx(CUcontext c)
{
    if (!c || !ctx_valid(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (atomic_load(&c->destroyed))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    return CUDA_SUCCESS;
}

/* Checks a side over its whole span; the row of slice k, row r starts at
 * out->va + (k * side->height + r) * side->pitch. */
static CUresult side_3d(const struct side3d *sd, const struct shape3d *sh, bool write,
                        struct side2d *out)
{
    if (sd->type == CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (sd->lod != 0) /* a mipmap level: arrays only */
        return CUDA_ERROR_INVALID_VALUE;
    bool named = sh->peer && (sd->type == CU_MEMORYTYPE_DEVICE || sd->ctx != NULL);
    if (named) {
        CUresult rc = peer_ctx(sd->ctx);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    /* The side's Height may be 0 when there is one slice at z = 0. */
    if ((sh->d > 1 || sd->z > 0) && sd->height < sh->h)
        return CUDA_ERROR_INVALID_VALUE;
    size_t first_row, rows;
    if (__builtin_mul_overflow(sd->z, sd->height, &first_row) ||
        __builtin_add_overflow(first_row, sd->y, &first_row) ||
        __builtin_mul_overflow(sh->d - 1, sd->height, &rows) ||
        __builtin_add_overflow(rows, sh->h, &rows))
        return CUDA_ERROR_INVALID_VALUE;
    if (named) /* the side is reached from the context named for it */
        reach_ctx = sd->ctx;
    CUresult rc =
        side_2d(sd->type, sd->host, sd->dev, sd->x, first_row, sd->pitch, sh->w, rows, write, out);
    reach_ctx = NULL;
    if (rc == CUDA_SUCCESS && named && out->device && out->ord != sd->ctx->ordinal)
        return CUDA_ERROR_INVALID_VALUE; /* another GPU's memory */
    return rc;
}

static CUresult copy_3d(const struct side3d *dst, const struct side3d *src,
                        const struct shape3d *sh, CUstream hs, bool async)
{
    NEED_CTX();
    if (!stream_of(hs))
        return async ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
    if (sh->w == 0 || sh->h == 0 || sh->d == 0)
        return CUDA_SUCCESS;
    struct side2d d, s;
    CUresult rc = side_3d(dst, sh, true, &d);
    if (rc == CUDA_SUCCESS)
        rc = side_3d(src, sh, false, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    int ord = d.device ? d.ord : s.device ? s.ord : cur()->ordinal;
    bool link = d.device != s.device || (d.device && d.ord != s.ord);
    /* Row by row: the whole copy costs Width x Height x Depth bytes at the
     * copy bandwidth when it crosses a link. */
    for (size_t k = 0; k < sh->d && rc == CUDA_SUCCESS; k++)
        for (size_t r = 0; r < sh->h && rc == CUDA_SUCCESS; r++) {
            uint64_t drow = (uint64_t)k * dst->height + r, srow = (uint64_t)k * src->height + r;
            rc = do_copy((void *)(uintptr_t)(d.va + drow * dst->pitch),
                         (const void *)(uintptr_t)(s.va + srow * src->pitch), sh->w, ord, link, hs,
                         async);
        }
    return rc;
}

/* ---- 3D copies ---- */

/* The sides of either struct: the same members, named alike. */
#define SIDE(c, p, context)                                                                        \
    ((struct side3d){.type = (c)->p##MemoryType,                                                   \
                     .host = (c)->p##Host,                                                         \
                     .dev = (c)->p##Device,                                                        \
                     .ctx = (context),                                                             \
                     .x = (c)->p##XInBytes,                                                        \
                     .y = (c)->p##Y,                                                               \
                     .z = (c)->p##Z,                                                               \
                     .lod = (c)->p##LOD,                                                           \
                     .pitch = (c)->p##Pitch,                                                       \
                     .height = (c)->p##Height})

static CUresult copy_3d_plain(const CUDA_MEMCPY3D *c, CUstream hs, bool async)
{
    if (!c || c->reserved0 || c->reserved1)
        return CUDA_ERROR_INVALID_VALUE;
    struct side3d src = SIDE(c, src, NULL), dst = SIDE(c, dst, NULL);
    struct shape3d sh = {c->WidthInBytes, c->Height, c->Depth, false};
    return copy_3d(&dst, &src, &sh, hs, async);
}

static CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER *c, CUstream hs, bool async)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    struct side3d src = SIDE(c, src, c->srcContext), dst = SIDE(c, dst, c->dstContext);
    struct shape3d sh = {c->WidthInBytes, c->Height, c->Depth, true};
    return copy_3d(&dst, &src, &sh, hs, async);
}

CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
    FAIL(cuMemcpy3D_v2, CUDA_ERROR_UNKNOWN);
    return copy_3d_plain(pCopy, NULL, false);
}

CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    FAIL(cuMemcpy3DAsync_v2, CUDA_ERROR_UNKNOWN);
    return copy_3d_plain(pCopy, hStream, true);
}

CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy)
{
    FAIL(cuMemcpy3DPeer, CUDA_ERROR_UNKNOWN);
    return copy_3d_peer(pCopy, NULL, false);
}

CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    FAIL(cuMemcpy3DPeerAsync, CUDA_ERROR_UNKNOWN);
    return copy_3d_peer(pCopy, hStream, true);
}

/* ---- peer copies: one row of ByteCount, device to device ---- */

static CUresult copy_peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                          size_t n, CUstream hs, bool async)
{
    struct side3d d = {.type = CU_MEMORYTYPE_DEVICE, .dev = dst, .ctx = dctx, .pitch = n};
    struct side3d s = {.type = CU_MEMORYTYPE_DEVICE, .dev = src, .ctx = sctx, .pitch = n};
    struct shape3d sh = {n, 1, 1, true};
    if (n == 0) { /* nothing moves, but the contexts are still checked */
        CUresult rc = peer_ctx(dctx);
        return rc == CUDA_SUCCESS ? peer_ctx(sctx) : rc;
    }
    return copy_3d(&d, &s, &sh, hs, async);
}

CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                      CUcontext srcContext, size_t ByteCount)
{
    FAIL(cuMemcpyPeer, CUDA_ERROR_UNKNOWN);
    return copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL, false);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    FAIL(cuMemcpyPeerAsync, CUDA_ERROR_UNKNOWN);
    return copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, true);
}

/* ---- per-thread default stream flavours ----
 *
 * Counted with the plain calls by failure injection; none calls an entry
 * point (inside the library that call would go through the PLT, and so
 * through an interposer's hook of it, which a real driver never does). */

CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy)
{
    FAIL(cuMemcpy3D_v2, CUDA_ERROR_UNKNOWN);
    return copy_3d_plain(pCopy, CU_STREAM_PER_THREAD, false);
}

CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    FAIL(cuMemcpy3DAsync_v2, CUDA_ERROR_UNKNOWN);
    return copy_3d_plain(pCopy, per_thread(hStream), true);
}

CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy)
{
    FAIL(cuMemcpy3DPeer, CUDA_ERROR_UNKNOWN);
    return copy_3d_peer(pCopy, CU_STREAM_PER_THREAD, false);
}

CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    FAIL(cuMemcpy3DPeerAsync, CUDA_ERROR_UNKNOWN);
    return copy_3d_peer(pCopy, per_thread(hStream), true);
}

CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount)
{
    FAIL(cuMemcpyPeer, CUDA_ERROR_UNKNOWN);
    return copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, CU_STREAM_PER_THREAD,
                     false);
}

CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    FAIL(cuMemcpyPeerAsync, CUDA_ERROR_UNKNOWN);
    return copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, per_thread(hStream),
                     true);
}
