/*
 * cuda_int.h - what the files of simgpu's libcuda.so.1 share: the context,
 * stream and region types, this process's tables and the helpers that check
 * handles and device ranges. Defined in cuda.c unless noted; hidden (the
 * library exports only the API). Nothing here is part of the ABI.
 *
 * Locking: `mu` guards every table and region of this process and the pool
 * and capture state; it may be held while taking a GPU lock
 * (ts_simgpu_charge), never the reverse.
 */
#ifndef TS_AGENT_SIMGPU_CUDA_INT_H
#define TS_AGENT_SIMGPU_CUDA_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/abi/cuda.h"
#include "agent/simgpu/state.h"

#define GRANULARITY ((size_t)2 << 20) /* VMM granularity, as on NVIDIA GPUs */
#define PAGE ((size_t)4096)

struct CUctx_st;
struct CUstream_st {
    struct CUctx_st *ctx;
    _Atomic uint64_t done_ns; /* when the last queued work ends */
    /* Stream capture (cuda_capture.c). */
    _Atomic int capture;              /* CUstreamCaptureStatus */
    CUstreamCaptureMode capture_mode; /* mu */
    pthread_t capture_thread;         /* mu; the thread that began it */
};
struct CUctx_st {
    int ordinal;  /* visible ordinal */
    bool primary; /* one per device, in ctxs[] */
    int refs;     /* mu; primary: retain count */
    /* Created ones (cuCtxCreate) are never freed: a destroyed one is kept
     * for the next cuCtxCreate, so a stale handle on another thread's stack
     * reads CUDA_ERROR_CONTEXT_IS_DESTROYED instead of freed memory. */
    _Atomic bool destroyed;
    struct CUstream_st null_stream;
};

struct CUmod_st {
    char *image;          /* NUL-terminated copy when the image is text, else NULL */
    struct CUctx_st *ctx; /* loaded in it: its functions launch only there */
};
struct CUfunc_st {
    struct CUmod_st *mod;
    bool busy_param; /* first kernel parameter is a u64 of nanoseconds */
    bool add_u32;    /* (CUdeviceptr p, unsigned n, unsigned v): p[0..n) += v */
};

/* ALLOC: device memory (cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged, and
 * stream-ordered allocations, which name their pool); HOST: page-locked host
 * memory (cuMemHostAlloc, cuMemHostRegister); with unified addressing the
 * device reaches it at its host address. */
enum region_kind { REGION_ALLOC, REGION_RESERVE, REGION_MAP, REGION_HOST };
struct region {
    enum region_kind kind;
    uint64_t va, size;    /* ALLOC, HOST: the size asked for; mappings are page-rounded */
    int ordinal;          /* ALLOC, MAP, HOST (the context's device: its copy bandwidth) */
    struct phys *phys;    /* MAP */
    int prot;             /* MAP: PROT_* set by cuMemSetAccess; HOST: PROT_READ [| WRITE] */
    uint64_t access;      /* MAP: bit d set when cuMemSetAccess let device d reach it */
    struct CUctx_st *ctx; /* ALLOC: freed with the context when it is a created one */
    bool registered;      /* HOST: cuMemHostRegister (else cuMemHostAlloc) */
    struct CUmemPoolHandle_st *pool; /* ALLOC: stream-ordered, from this pool (else NULL) */
};

/* A set of handles handed out, so that a bad or stale one is refused and
 * never dereferenced. */
struct table {
    void **items;
    size_t n, cap;
};

extern CUresult init_rc;
extern int ndev;
extern struct ts_simgpu_dev devs[TS_SIMGPU_MAX_GPUS]; /* by visible ordinal */
extern pthread_mutex_t mu;
extern struct region *regions;     /* mu */
extern size_t nregions;            /* mu */
extern size_t cap_regions;         /* mu; room in regions */
extern struct table streams;       /* mu; created streams */
extern struct table funcs;         /* mu; functions handed out */
extern uint64_t kernel_ns_default; /* TESSERA_SIMGPU_KERNEL_NS */

#define FAIL(name, dflt)                                                                           \
    do {                                                                                           \
        int fail_code_ = ts_simgpu_fail(#name, (dflt));                                            \
        if (fail_code_)                                                                            \
            return (CUresult)fail_code_;                                                           \
    } while (0)
#define NEED_INIT()                                                                                \
    do {                                                                                           \
        if (init_rc != CUDA_SUCCESS)                                                               \
            return init_rc == CUDA_ERROR_NO_DEVICE ? CUDA_ERROR_NO_DEVICE                          \
                                                   : CUDA_ERROR_NOT_INITIALIZED;                   \
    } while (0)
/* dev a valid ordinal of an initialized driver, else its error. */
#define NEED_DEV(d)                                                                                \
    do {                                                                                           \
        NEED_INIT();                                                                               \
        if ((d) < 0 || (d) >= ndev)                                                                \
            return CUDA_ERROR_INVALID_DEVICE;                                                      \
    } while (0)
#define NEED_CTX()                                                                                 \
    do {                                                                                           \
        NEED_INIT();                                                                               \
        if (!cur())                                                                                \
            return CUDA_ERROR_INVALID_CONTEXT;                                                     \
        if (atomic_load(&cur()->destroyed))                                                        \
            return CUDA_ERROR_CONTEXT_IS_DESTROYED;                                                \
    } while (0)

/* The context range_check reaches memory from when set (a peer copy's
 * side names its own), else the current one. */
extern _Thread_local struct CUctx_st *reach_ctx;
/* The calling thread's current context, or NULL. */
struct CUctx_st *cur(void);
/* A context this thread may make current: a primary one, or a created one
 * not destroyed. */
bool ctx_valid(struct CUctx_st *c);
bool grow(void **arr, size_t *cap, size_t n, size_t elem);
size_t round_up(size_t n, size_t to);
uint64_t max_u64(uint64_t a, uint64_t b);
/* mu held for these. */
bool table_add(struct table *t, void *h);
bool table_has(const struct table *t, const void *h);
bool table_del(struct table *t, const void *h);
bool region_add(struct region r);
void region_remove(size_t i);
/* The ALLOC, MAP or HOST region holding va, or NULL. */
struct region *region_at(uint64_t va);
/* Whether [va, va+n) meets any region, reservations included. */
bool any_overlap(uint64_t va, uint64_t n);
/* table_has under mu. */
bool known(const struct table *t, const void *h);
/* 0 when [va, va+n) is device memory this process may write (or read when
 * !write), in one allocation or contiguous over adjacent mappings of the
 * virtual memory API; sets *ordinal. Takes mu. */
CUresult range_check(uint64_t va, size_t n, bool write, int *ordinal);
/* The stream a handle names in the current context (NULL, LEGACY and
 * PER_THREAD: its null stream), or NULL if invalid. */
struct CUstream_st *stream_of(CUstream s);
CUstream per_thread(CUstream s);
/* Copy n bytes now; host_link: at the copy bandwidth of GPU ord; async: the
 * stream carries the time instead of the caller. */
/* memmove that keeps never-written memory free (cuda_sparse.c). */
void ts_simgpu_move(void *dst, const void *src, size_t n);
CUresult do_copy(void *dst, const void *src, size_t n, int ord, bool host_link, CUstream hs,
                 bool async);
/* A kernel launch as cuLaunchKernel does it, without failure injection:
 * checks the shape, the function and the stream, and keeps the stream's
 * GPU busy for the kernel's time. */
CUresult launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                unsigned int by, unsigned int bz, CUstream hs, void **params);
/* cuMemAlloc without failure injection: page-rounded, charged to the
 * current context's GPU, freed with the context. */
CUresult mem_alloc(CUdeviceptr *dptr, size_t bytesize);
/* An ALLOC region just taken out of the table, mu held: unmapped, and its
 * memory given back to its pool or to the GPU. */
void alloc_free(const struct region *r);

/* cuda_alloc.c: one side of a 2D copy, checked over its whole span (from
 * (x, y) over h rows of pitch bytes, w bytes each) before a byte moves:
 * DEVICE is device memory of this process, HOST mapped host memory that is
 * no device allocation, UNIFIED either; ARRAY is CUDA_ERROR_NOT_SUPPORTED.
 * Fills *out with the first byte, whether it is device memory and its GPU.
 * Takes mu. */
struct side2d {
    uint64_t va; /* first byte copied */
    bool device;
    int ord;
};
CUresult side_2d(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x, size_t y,
                 size_t pitch, size_t w, size_t h, bool write, struct side2d *out);

/* cuda_pool.c, mu held: a stream-ordered allocation taken out of the table
 * goes back to its pool (to_gpu: and the pool gives its memory back to the
 * GPU at once, as when its context is destroyed). */
void pool_put(const struct region *r, bool to_gpu);
/* cuda_pool.c: at a synchronize, the pools of GPU ord (all when -1) give
 * back to the GPU what they hold above max(used, release threshold).
 * Takes mu. */
void pool_sync(int ord);
/* cuda_pool.c: ts_simgpu_charge of bytes on GPU ord; when the GPU is full,
 * its pools first give back their idle memory. mu not held. */
int charge_or_trim(int ord, int64_t bytes);
/* cuda_alloc.c, mu held: the arrays made in ctx are destroyed with it. */
void arrays_ctx_gone(struct CUctx_st *ctx);
/* cuda_capture.c: whether s is capturing; if so, the capture is
 * invalidated, as CUDA does when a capturing stream is synchronized. */
bool capture_refuses_sync(struct CUstream_st *s);

/* The copies of cuda.c, shared with the per-thread default stream
 * flavours (cuda_ptsz.c): checked, then timed at the device's bandwidth. */
CUresult copy_htod(CUdeviceptr dst, const void *src, size_t n, CUstream s, bool async);
CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream s, bool async);
CUresult copy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool async);

#endif /* TS_AGENT_SIMGPU_CUDA_INT_H */
