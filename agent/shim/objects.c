/*
 * objects.c - the job's contexts, streams, events, modules and functions
 * as the shim keeps them (objects.h): a table of records, a hash from the
 * job's handle to its record, the translation to the driver's handle of
 * now, and making every object again on another device for a move.
 *
 * Locking: `lock` (a rwlock) guards the table; translations take it for
 * reading, only after a move (ts_obj_epoch != 0). ts_obj_move runs with
 * every other thread of the process held at the gate.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent/shim/objects.h"
#include "agent/shim/shim.h"
#include "agent/shim/swap.h"
#include "api/array.h"

struct obj {
    int kind;     /* enum ts_obj_kind; 0: free */
    void *job;    /* the handle the job holds */
    void *cur;    /* the driver's handle now */
    void *next;   /* ts_obj_move: made, not yet published */
    void *prev;   /* the driver's handle before the last move */
    void *ctx;    /* job handle of its context (streams, events, modules) */
    int vdev;     /* contexts: the job's device */
    bool primary; /* contexts: the device's primary context */
    unsigned flags;
    uint32_t mod; /* functions: index + 1 of its module */
    char *image;  /* modules: a copy of the image (NULL: cannot be made again) */
    char *name;   /* functions */
};

_Atomic uint32_t ts_obj_epoch;
_Thread_local uint32_t ts_obj_tl_epoch;

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct obj *objs;
static uint32_t nobjs, capobjs;
static uint32_t *hash; /* index + 1; 0 empty; TOMB deleted */
static uint32_t hcap, hused;
static uint32_t free_head; /* index + 1 of a free record, chained through mod */
#define TOMB UINT32_MAX
static _Atomic int real_of[TS_SHIM_MAX_DEVS];
static _Atomic int real_set; /* 0: identity */
static _Thread_local CUlaunchConfig xl_config;

bool ts_obj_tracking(void)
{
    return ts_shim.mode == TS_SHIM_ON && ts_vmm_active();
}

static uint32_t slot_of(const void *h, uint32_t cap)
{
    uintptr_t x = (uintptr_t)h;
    x ^= x >> 17;
    x *= 0x9e3779b97f4a7c15ull;
    return (uint32_t)(x >> 32) & (cap - 1);
}

/* lock held: index + 1 of the record of job handle h, or 0 */
static uint32_t find(const void *h)
{
    if (!hcap)
        return 0;
    for (uint32_t i = slot_of(h, hcap), n = 0; n < hcap; i = (i + 1) & (hcap - 1), n++) {
        uint32_t v = hash[i];
        if (v == 0)
            return 0;
        if (v != TOMB && objs[v - 1].job == h)
            return v;
    }
    return 0;
}

static bool rehash(uint32_t cap)
{
    uint32_t *h = calloc(cap, sizeof *h);
    if (!h)
        return false;
    for (uint32_t k = 0; k < nobjs; k++) {
        if (!objs[k].kind)
            continue;
        uint32_t i = slot_of(objs[k].job, cap);
        while (h[i])
            i = (i + 1) & (cap - 1);
        h[i] = k + 1;
    }
    free(hash);
    hash = h;
    hcap = cap;
    hused = 0;
    for (uint32_t k = 0; k < nobjs; k++)
        hused += objs[k].kind != 0;
    return true;
}

/* lock held: a new record for job handle h (an older one of the same
 * handle, which the driver reused after the job destroyed it, goes). */
static struct obj *add(int kind, void *h)
{
    uint32_t old = find(h);
    if (old) {
        free(objs[old - 1].image);
        free(objs[old - 1].name);
        objs[old - 1] = (struct obj){.kind = kind, .job = h, .cur = h};
        return &objs[old - 1];
    }
    if ((hused + 1) * 2 > hcap && !rehash(hcap ? hcap * 2 : 256))
        return NULL;
    uint32_t k;
    if (free_head) {
        k = free_head - 1;
        free_head = objs[k].mod;
    } else {
        if (nobjs == capobjs) {
            uint32_t cap = capobjs ? capobjs * 2 : 256;
            struct obj *grown = calloc(cap, sizeof *grown);
            if (!grown)
                return NULL;
            if (nobjs)
                memcpy(grown, objs, nobjs * sizeof *grown);
            free(objs);
            objs = grown;
            capobjs = cap;
        }
        k = nobjs++;
    }
    objs[k] = (struct obj){.kind = kind, .job = h, .cur = h};
    uint32_t i = slot_of(h, hcap);
    while (hash[i] && hash[i] != TOMB)
        i = (i + 1) & (hcap - 1);
    hash[i] = k + 1;
    hused++;
    return &objs[k];
}

void ts_obj_add_ctx(CUcontext c, int vdev, bool primary, unsigned flags)
{
    if (!c || !ts_obj_tracking())
        return;
    pthread_rwlock_wrlock(&lock);
    uint32_t have = find(c);
    if (!have || objs[have - 1].kind != TS_OBJ_CTX) {
        struct obj *o = add(TS_OBJ_CTX, c);
        if (o) {
            o->vdev = vdev;
            o->primary = primary;
            o->flags = flags;
        }
    }
    pthread_rwlock_unlock(&lock);
}

void ts_obj_add(enum ts_obj_kind kind, void *h, CUcontext ctx, unsigned flags)
{
    if (!h || !ts_obj_tracking())
        return;
    pthread_rwlock_wrlock(&lock);
    struct obj *o = add((int)kind, h);
    if (o) {
        o->ctx = ctx;
        o->flags = flags;
    }
    pthread_rwlock_unlock(&lock);
}

/* The size of a module image: PTX text up to its NUL, an ELF cubin to
 * the end of its section headers or sections, a fatbin from its header;
 * 0 when it cannot be told. */
static size_t image_size(const unsigned char *b)
{
    if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') {
        if (b[4] != 2) /* 64-bit ELF only */
            return 0;
        uint64_t shoff, end;
        uint16_t shentsize, shnum;
        memcpy(&shoff, b + 0x28, 8);
        memcpy(&shentsize, b + 0x3a, 2);
        memcpy(&shnum, b + 0x3c, 2);
        end = shoff + (uint64_t)shentsize * shnum;
        for (uint16_t i = 0; i < shnum; i++) {
            uint64_t off, size;
            uint32_t type;
            const unsigned char *sh = b + shoff + (uint64_t)i * shentsize;
            memcpy(&type, sh + 4, 4);
            memcpy(&off, sh + 0x18, 8);
            memcpy(&size, sh + 0x20, 8);
            if (type != 8 && off + size > end) /* SHT_NOBITS has no bytes */
                end = off + size;
        }
        return end < ((uint64_t)1 << 32) ? (size_t)end : 0;
    }
    if (b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba) {
        uint16_t header;
        uint64_t body;
        memcpy(&header, b + 6, 2);
        memcpy(&body, b + 8, 8);
        return body < ((uint64_t)1 << 32) ? header + (size_t)body : 0;
    }
    return strnlen((const char *)b, (size_t)64 << 20) + 1;
}

void ts_obj_add_module(CUmodule m, CUcontext ctx, const void *image)
{
    if (!m || !ts_obj_tracking())
        return;
    size_t n = image ? image_size(image) : 0;
    char *copy = n ? malloc(n) : NULL;
    if (copy)
        memcpy(copy, image, n);
    pthread_rwlock_wrlock(&lock);
    struct obj *o = add(TS_OBJ_MODULE, m);
    if (o) {
        o->ctx = ctx;
        o->image = copy;
        copy = NULL;
    }
    pthread_rwlock_unlock(&lock);
    free(copy);
}

void ts_obj_add_func(CUfunction f, CUmodule m, const char *name)
{
    if (!f || !ts_obj_tracking())
        return;
    char *copy = strdup(name);
    pthread_rwlock_wrlock(&lock);
    uint32_t mod = find(m);
    struct obj *o = add(TS_OBJ_FUNC, f);
    if (o) {
        o->mod = mod;
        o->name = copy;
        copy = NULL;
    }
    pthread_rwlock_unlock(&lock);
    free(copy);
}

bool ts_obj_del(void *job, void **driver)
{
    *driver = job;
    if (!hcap)
        return false;
    pthread_rwlock_wrlock(&lock);
    uint32_t v = find(job);
    if (v) {
        struct obj *o = &objs[v - 1];
        *driver = o->cur;
        free(o->image);
        free(o->name);
        *o = (struct obj){.mod = free_head};
        free_head = v;
        for (uint32_t i = 0; i < hcap; i++)
            if (hash[i] == v) {
                hash[i] = TOMB;
                break;
            }
        hused--;
    }
    pthread_rwlock_unlock(&lock);
    return v != 0;
}

void *ts_obj_xl(void *job)
{
    if (__builtin_expect(atomic_load_explicit(&ts_obj_epoch, memory_order_relaxed) == 0, 1) || !job)
        return job;
    pthread_rwlock_rdlock(&lock);
    uint32_t v = find(job);
    void *cur = v ? objs[v - 1].cur : job;
    pthread_rwlock_unlock(&lock);
    return cur;
}

CUcontext ts_obj_moved_ctx(CUcontext before)
{
    if (!before)
        return before;
    CUcontext now = before;
    pthread_rwlock_rdlock(&lock);
    for (uint32_t k = 0; k < nobjs; k++)
        if (objs[k].kind == TS_OBJ_CTX && objs[k].prev == before) {
            now = objs[k].cur;
            break;
        }
    pthread_rwlock_unlock(&lock);
    return now;
}

CUcontext ts_obj_job_ctx(CUcontext driver)
{
    if (atomic_load_explicit(&ts_obj_epoch, memory_order_relaxed) == 0 || !driver)
        return driver;
    CUcontext job = driver;
    pthread_rwlock_rdlock(&lock);
    for (uint32_t k = 0; k < nobjs; k++)
        if (objs[k].kind == TS_OBJ_CTX && objs[k].cur == driver) {
            job = objs[k].job;
            break;
        }
    pthread_rwlock_unlock(&lock);
    return job;
}

const CUlaunchConfig *ts_obj_xl_config(const CUlaunchConfig *config)
{
    if (atomic_load_explicit(&ts_obj_epoch, memory_order_relaxed) == 0 || !config)
        return config;
    xl_config = *config;
    xl_config.hStream = ts_obj_xl(config->hStream);
    return &xl_config;
}

void ts_obj_sync_slow(void)
{
    ts_obj_tl_epoch = atomic_load(&ts_obj_epoch);
    CUcontext c = NULL;
    if (!ts_shim.cu.cuCtxGetCurrent || ts_shim.cu.cuCtxGetCurrent(&c) != CUDA_SUCCESS || !c)
        return;
    CUcontext now = ts_obj_xl(c);
    if (now == c) /* after a second move: the driver's handle of the first */
        now = ts_obj_moved_ctx(c);
    if (now != c)
        ts_shim.cu.cuCtxSetCurrent(now);
}

int ts_obj_ndevs(void)
{
    return ts_shim.mode == TS_SHIM_ON ? ts_shim.ndevs : 0;
}

int ts_obj_real(int vdev)
{
    if (!atomic_load_explicit(&real_set, memory_order_acquire) || vdev < 0 ||
        vdev >= TS_SHIM_MAX_DEVS)
        return vdev;
    return atomic_load(&real_of[vdev]);
}

int ts_obj_virtual(int real)
{
    if (!atomic_load_explicit(&real_set, memory_order_acquire))
        return real;
    for (int k = 0; k < ts_shim.ndevs; k++)
        if (atomic_load(&real_of[k]) == real)
            return k;
    return -1;
}

bool ts_obj_movable(void)
{
    bool ok = true;
    pthread_rwlock_rdlock(&lock);
    for (uint32_t k = 0; k < nobjs && ok; k++)
        ok = objs[k].kind != TS_OBJ_MODULE || objs[k].image != NULL;
    pthread_rwlock_unlock(&lock);
    return ok;
}

void ts_obj_sync_all(void)
{
    const struct ts_cu *cu = &ts_shim.cu;
    CUcontext caller = NULL;
    cu->cuCtxGetCurrent(&caller);
    pthread_rwlock_rdlock(&lock);
    for (uint32_t k = 0; k < nobjs; k++)
        if (objs[k].kind == TS_OBJ_CTX && cu->cuCtxSetCurrent(objs[k].cur) == CUDA_SUCCESS)
            cu->cuCtxSynchronize();
    pthread_rwlock_unlock(&lock);
    cu->cuCtxSetCurrent(caller);
}

/* ---- making everything again on the new devices ---- */

typedef CUresult (*ctx_create_fn)(CUcontext *, unsigned, CUdevice);
typedef CUresult (*stream_create_fn)(CUstream *, unsigned);
typedef CUresult (*event_create_fn)(CUevent *, unsigned);
typedef CUresult (*event_record_fn)(CUevent, CUstream);
typedef CUresult (*module_load_fn)(CUmodule *, const void *);
typedef CUresult (*get_function_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*primary_retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*pop_fn)(CUcontext *);

/* lock held: the new driver handle of the context whose job handle is c */
static void *next_of(void *job)
{
    uint32_t v = find(job);
    return v ? objs[v - 1].next : NULL;
}

static CUresult make(struct obj *o, const int *real)
{
    void *h = NULL;
    CUresult rc = CUDA_SUCCESS;
    switch (o->kind) {
    case TS_OBJ_CTX:
        if (o->primary)
            rc = ((primary_retain_fn)ts_real[TS_H_cuDevicePrimaryCtxRetain])((CUcontext *)&h,
                                                                             real[o->vdev]);
        else {
            rc = ((ctx_create_fn)ts_real[TS_H_cuCtxCreate_v2])((CUcontext *)&h, o->flags,
                                                               real[o->vdev]);
            CUcontext popped;
            if (rc == CUDA_SUCCESS)
                ((pop_fn)ts_real[TS_H_cuCtxPopCurrent_v2])(&popped);
        }
        break;
    case TS_OBJ_STREAM:
        rc = ((stream_create_fn)ts_real[TS_H_cuStreamCreate])((CUstream *)&h, o->flags);
        break;
    case TS_OBJ_EVENT:
        rc = ((event_create_fn)ts_real[TS_H_cuEventCreate])((CUevent *)&h, o->flags);
        /* recorded once where nothing is queued: it reads as complete, as
         * every event of the process was when the move began */
        if (rc == CUDA_SUCCESS)
            ((event_record_fn)ts_real[TS_H_cuEventRecord])(h, NULL);
        break;
    case TS_OBJ_MODULE:
        rc = o->image ? ((module_load_fn)ts_real[TS_H_cuModuleLoadData])((CUmodule *)&h, o->image)
                      : CUDA_ERROR_NOT_SUPPORTED;
        break;
    case TS_OBJ_FUNC:
        rc = o->mod ? ((get_function_fn)ts_real[TS_H_cuModuleGetFunction])(
                          (CUfunction *)&h, objs[o->mod - 1].next, o->name)
                    : CUDA_ERROR_NOT_SUPPORTED;
        break;
    default:
        return CUDA_SUCCESS;
    }
    o->next = rc == CUDA_SUCCESS ? h : NULL;
    return rc;
}

/* The object's context's new handle, made current (contexts first). */
static CUresult enter(const struct obj *o)
{
    void *ctx = o->kind == TS_OBJ_FUNC ? objs[o->mod - 1].ctx : o->ctx;
    void *now = ctx ? next_of(ctx) : NULL;
    return now ? ts_shim.cu.cuCtxSetCurrent(now) : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult ts_obj_move(const int *real, int ndevs)
{
    const struct ts_cu *cu = &ts_shim.cu;
    CUcontext caller = NULL;
    cu->cuCtxGetCurrent(&caller);
    CUresult rc = CUDA_SUCCESS;
    pthread_rwlock_wrlock(&lock);
    /* contexts, then modules, then what lives in a context */
    static const int order[] = {TS_OBJ_CTX, TS_OBJ_MODULE, TS_OBJ_FUNC, TS_OBJ_STREAM,
                                TS_OBJ_EVENT};
    for (size_t pass = 0; pass < TS_ARRAY_LEN(order) && rc == CUDA_SUCCESS; pass++)
        for (uint32_t k = 0; k < nobjs && rc == CUDA_SUCCESS; k++) {
            struct obj *o = &objs[k];
            if (o->kind != order[pass])
                continue;
            if (o->kind == TS_OBJ_CTX && (o->vdev < 0 || o->vdev >= ndevs)) {
                o->next = o->cur; /* not one of the job's devices: stays */
                continue;
            }
            if (o->kind != TS_OBJ_CTX)
                rc = enter(o);
            if (rc == CUDA_SUCCESS)
                rc = make(o, real);
        }
    if (rc == CUDA_SUCCESS) {
        /* published: the old objects stay where they are, unused */
        for (uint32_t k = 0; k < nobjs; k++)
            if (objs[k].kind) {
                objs[k].prev = objs[k].cur;
                objs[k].cur = objs[k].next;
                objs[k].next = NULL;
            }
        for (int d = 0; d < ndevs && d < TS_SHIM_MAX_DEVS; d++)
            atomic_store(&real_of[d], real[d]);
        for (int d = ndevs; d < TS_SHIM_MAX_DEVS; d++)
            atomic_store(&real_of[d], d);
        atomic_store(&real_set, 1);
        atomic_fetch_add(&ts_obj_epoch, 1);
    } else {
        /* what was made is left unused: the job goes on where it was */
        for (uint32_t k = 0; k < nobjs; k++)
            objs[k].next = NULL;
    }
    pthread_rwlock_unlock(&lock);
    cu->cuCtxSetCurrent(caller);
    return rc;
}

void ts_obj_fork_child(void)
{
    /* the parent's objects are not the child's (CUDA state does not
     * survive fork): forget them, leaking rather than freeing its copies */
    pthread_rwlock_init(&lock, NULL);
    objs = NULL;
    nobjs = capobjs = 0;
    hash = NULL;
    hcap = hused = 0;
    free_head = 0;
    atomic_store(&real_set, 0);
    atomic_store(&ts_obj_epoch, 0);
    ts_obj_tl_epoch = 0;
}
