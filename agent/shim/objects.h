/*
 * objects.h - the job's CUDA objects as the shim keeps them so that the
 * process can be moved to another GPU (move.c; README.md, "Moving a job to
 * another GPU"): contexts, streams, events, modules and functions made
 * through the hooks (objects.c, hooks in objhooks.c), with what it takes
 * to make each again on another device, and the translation from the
 * handle the job holds to the driver's handle of now.
 *
 * Until the process is moved, the driver's handle is the job's and every
 * translation is the identity at the cost of one relaxed load
 * (ts_obj_epoch == 0). After a move the job keeps its handles: each hook
 * that takes one translates it (hooks.def's PASS hooks by parameter type,
 * TS_XL), and each thread re-binds its current context on its first call
 * after the move (ts_obj_sync). The objects a move left behind on the old
 * device are kept, never destroyed, so the driver never hands out one of
 * the job's handles again for a new object.
 *
 * Devices: the job sees as many devices as it has ledgers (dev<K>.ledger);
 * a CUdevice it holds is that index K (virtual), translated to the
 * driver's ordinal (ts_obj_real) in every hook that takes one. Devices
 * the driver shows beyond them (the agent lists the GPUs a job may move
 * to after its own in CUDA_VISIBLE_DEVICES) are hidden.
 */
#ifndef TS_SHIM_OBJECTS_H
#define TS_SHIM_OBJECTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/abi/cuda.h"

enum ts_obj_kind {
    TS_OBJ_CTX = 1,
    TS_OBJ_STREAM = 2,
    TS_OBJ_EVENT = 3,
    TS_OBJ_MODULE = 4,
    TS_OBJ_FUNC = 5,
};

/* Bumped by each move (0: never moved). */
extern _Atomic uint32_t ts_obj_epoch;
extern _Thread_local uint32_t ts_obj_tl_epoch;
void ts_obj_sync_slow(void);
/* Re-bind the calling thread's current context after a move. */
static inline void ts_obj_sync(void)
{
    if (__builtin_expect(
            atomic_load_explicit(&ts_obj_epoch, memory_order_acquire) != ts_obj_tl_epoch, 0))
        ts_obj_sync_slow();
}

/* Whether the shim keeps objects (a swapping node: only there can a
 * process move). */
bool ts_obj_tracking(void);

/* Record an object the driver just made (job handle == driver handle).
 * ctx: the job handle of its context (NULL for a context); for a module,
 * image/len its image (copied; NULL: it cannot be made again, and the
 * process cannot move); for a function, mod and name. */
void ts_obj_add_ctx(CUcontext c, int vdev, bool primary, unsigned flags);
void ts_obj_add(enum ts_obj_kind kind, void *h, CUcontext ctx, unsigned flags);
void ts_obj_add_module(CUmodule m, CUcontext ctx, const void *image);
void ts_obj_add_func(CUfunction f, CUmodule m, const char *name);
/* Forget an object the job destroyed; *driver: the handle to destroy
 * (the job's when never moved). Returns false when unknown. */
bool ts_obj_del(void *job, void **driver);

/* The driver's handle for a job's handle (itself when unknown or never
 * moved). */
void *ts_obj_xl(void *job);
/* After a move: the driver's context of now for the one whose driver
 * handle was `before` until that move (itself when unknown). A job's
 * second move needs it: the swap engine holds driver handles, which are
 * not the job's once it moved. */
CUcontext ts_obj_moved_ctx(CUcontext before);
/* The job's handle of a driver context (itself when unknown). */
CUcontext ts_obj_job_ctx(CUcontext driver);
/* A copy of a launch configuration with its stream translated (valid
 * until the thread's next call). */
const CUlaunchConfig *ts_obj_xl_config(const CUlaunchConfig *config);

/* Devices: the driver ordinal of the job's device vdev, and back (-1:
 * not one of the job's). */
int ts_obj_real(int vdev);
int ts_obj_virtual(int real);
/* How many devices the job sees (its ledgers), 0: pass through. */
int ts_obj_ndevs(void);

/* move.c, with every other thread of the process held: make every object
 * again where its device now is (real[vdev] for each of the job's
 * devices), then publish the translation (ts_obj_epoch + 1). Returns
 * CUDA_SUCCESS, CUDA_ERROR_NOT_SUPPORTED (a module without its image), or
 * the driver's error, having changed nothing. */
CUresult ts_obj_move(const int *real, int ndevs);
/* Whether every object can be made again (no module without its image). */
bool ts_obj_movable(void);
/* Synchronize every context the job made (each made current in turn). */
void ts_obj_sync_all(void);

void ts_obj_fork_child(void);

/* A hooked call's argument translated by its type (objects.h's ts_obj_xl
 * for streams, functions, events and contexts; a launch configuration's
 * stream); other types unchanged. */
#define TS_XL_IS(x, T) __builtin_types_compatible_p(__typeof__(x), T)
#define TS_XL_H(x) ((__typeof__(x))(uintptr_t)ts_obj_xl((void *)(uintptr_t)(x)))
#define TS_XL(x)                                                                                   \
    __builtin_choose_expr(TS_XL_IS(x, CUstream) || TS_XL_IS(x, CUfunction) ||                      \
                              TS_XL_IS(x, CUevent) || TS_XL_IS(x, CUcontext),                      \
                          TS_XL_H(x),                                                              \
                          __builtin_choose_expr(TS_XL_IS(x, const CUlaunchConfig *),               \
                                                ((__typeof__(x))(uintptr_t)ts_obj_xl_config(       \
                                                    (const CUlaunchConfig *)(uintptr_t)(x))),      \
                                                (x)))
#define TS_XL_N(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, n, ...) n
#define TS_XL_1(a) TS_XL(a)
#define TS_XL_2(a, ...) TS_XL(a), TS_XL_1(__VA_ARGS__)
#define TS_XL_3(a, ...) TS_XL(a), TS_XL_2(__VA_ARGS__)
#define TS_XL_4(a, ...) TS_XL(a), TS_XL_3(__VA_ARGS__)
#define TS_XL_5(a, ...) TS_XL(a), TS_XL_4(__VA_ARGS__)
#define TS_XL_6(a, ...) TS_XL(a), TS_XL_5(__VA_ARGS__)
#define TS_XL_7(a, ...) TS_XL(a), TS_XL_6(__VA_ARGS__)
#define TS_XL_8(a, ...) TS_XL(a), TS_XL_7(__VA_ARGS__)
#define TS_XL_9(a, ...) TS_XL(a), TS_XL_8(__VA_ARGS__)
#define TS_XL_10(a, ...) TS_XL(a), TS_XL_9(__VA_ARGS__)
#define TS_XL_11(a, ...) TS_XL(a), TS_XL_10(__VA_ARGS__)
#define TS_XL_CAT(a, b) a##b
#define TS_XL_PICK(n) TS_XL_CAT(TS_XL_, n)
/* (a, b, ...) -> (TS_XL(a), TS_XL(b), ...): one to eleven arguments. */
#define TS_XL_ARGS(...)                                                                            \
    (TS_XL_PICK(TS_XL_N(__VA_ARGS__, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1))(__VA_ARGS__))

#endif /* TS_SHIM_OBJECTS_H */
