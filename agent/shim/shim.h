/*
 * shim.h - what the parts of libtessera-cuda.so share: the hook tables
 * made from hooks.def, the process's registration with its ledgers, and
 * the charging client (charge.c). Internal: nothing here is exported.
 */
#ifndef TS_SHIM_SHIM_H
#define TS_SHIM_SHIM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "agent/abi/cuda.h"
#include "agent/abi/nvml.h"
#include "agent/ledger/ledger.h"
#include "agent/shim/cu.h"

#define TS_EXPORT __attribute__((visibility("default")))
#define TS_SHIM_MAX_DEVS 16

/* ---- hook tables (hooks.c) ---- */
enum ts_hook_id {
#define TS_HOOK(name, kind, gate, fail, params, args) TS_H_##name,
#define TS_NVML_HOOK(name, fail) TS_H_##name,
#include "agent/shim/hooks.def"
#undef TS_HOOK
#undef TS_NVML_HOOK
    TS_HOOK_COUNT
};

/* The driver's (or NVML's) own function behind each hook; NULL when the
 * library lacks it. Set once by ts_hooks_resolve(), read without a lock. */
extern void *ts_real[TS_HOOK_COUNT];
/* The real function of hook `name`, typed as the ABI header declares it. */
#define TS_REAL(name) ((__typeof__(&name))ts_real[TS_H_##name])

/* Resolve the driver's functions (idempotent, cheap after the first call). */
void ts_hooks_resolve(void);
void ts_hooks_resolve_nvml(void);
/* The real dlsym of libc (never the shim's). */
void *ts_real_dlsym(void *handle, const char *name);

/* In a job's sandbox (agent/daemon/sandbox.c) the agent binds the real
 * driver here (and this library beside it), every libcuda.so.1 the loader
 * finds is libtessera-cuda-overlay.so (overlay.c), and the
 * job's ledgers and its "ID:ATTEMPT" (file `job`) are in the folder: the
 * environment cannot switch the shim off there. */
#define TS_SHIM_SANDBOX_DRIVER "/run/tessera/lib/libcuda.so.1"
#define TS_SHIM_SANDBOX_DIR "/run/tessera/shim"
/* TS_SHIM_SANDBOX_DRIVER when it exists, else "libcuda.so.1". */
const char *ts_shim_driver_path(void);

/* ---- registration (init.c) ---- */
enum ts_shim_mode {
    TS_SHIM_OFF = 0,    /* TESSERA_SHIM_DIR unset: pure pass-through */
    TS_SHIM_ON = 1,     /* registered in every ledger of the job */
    TS_SHIM_BROKEN = 2, /* set but unusable: fail-closed (README.md) */
};

struct ts_shim_dev {
    struct ts_ledger *l;
    struct ts_ledger_job *job;
    struct ts_ledger_proc *proc;
};

struct ts_shim {
    enum ts_shim_mode mode;
    int ndevs; /* dev0..dev<ndevs-1>.ledger */
    struct ts_shim_dev dev[TS_SHIM_MAX_DEVS];
    uint32_t wait_ms;
    bool log;
    struct ts_cu cu;
    char dir[256]; /* the folder of the dev<K>.ledger files */
    uint64_t key;  /* the job's ts_ledger_key */
};

extern struct ts_shim ts_shim;

/* Register at the first hooked call (pthread_once; again in a forked
 * child). One load once done. */
extern _Atomic int ts_shim_ready;
void ts_shim_init_slow(void);
static inline void ts_shim_init(void)
{
    if (__builtin_expect(!atomic_load_explicit(&ts_shim_ready, memory_order_acquire), 0))
        ts_shim_init_slow();
}
void ts_shim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Under l's lock: a free process slot of job index `job` for this
 * process, or NULL. */
struct ts_ledger_proc *ts_shim_claim_slot(struct ts_ledger *l, int job, pid_t pid, uint64_t ticks);
/* move.c: TS_CMD_MOVE, run by the swap engine's watcher (ledger.h). */
CUresult ts_shim_move(struct ts_ledger_proc *home);

/* The governed device of CUDA ordinal `ord`, or NULL (no ledger: the
 * device passes through). */
static inline struct ts_shim_dev *ts_shim_dev(int ord)
{
    if (ts_shim.mode != TS_SHIM_ON || ord < 0 || ord >= ts_shim.ndevs)
        return NULL;
    return &ts_shim.dev[ord];
}

/* Mark the process's slots as just having used the GPU; writes at most
 * every TS_SHIM_TOUCH_NS so that a launch costs a clock read. */
#define TS_SHIM_TOUCH_NS 10000000ull
extern _Atomic uint64_t ts_shim_last_touch;
void ts_shim_touch_slow(uint64_t now);
static inline void ts_shim_touch(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (__builtin_expect(now - atomic_load_explicit(&ts_shim_last_touch, memory_order_relaxed) >=
                             TS_SHIM_TOUCH_NS,
                         0))
        ts_shim_touch_slow(now);
}

/* ---- charging (charge.c) ---- */

/* How a charge that does not fit waits (ledger.h, "Waiting for room"). */
enum ts_charge_wait {
    TS_CHARGE_NOWAIT,     /* out-of-memory at once (stream capture, a pitch correction) */
    TS_CHARGE_WAIT,       /* a new allocation: up to wait_ms, then out-of-memory, which
                             the agent reports naming the holders (gaveup_seq) */
    TS_CHARGE_SWAPIN,     /* memory the process held, coming back: until it fits */
    TS_CHARGE_SWAPIN_TRY, /* the same for up to wait_ms, then out-of-memory quietly (a
                             swap-in of several GPUs lets go of the others and retries) */
};

/* Charge `bytes` on ordinal `ord` for this process. CUDA_SUCCESS or
 * CUDA_ERROR_OUT_OF_MEMORY (over the limit: always, at once). A device
 * without a ledger is always granted. */
CUresult ts_charge(int ord, uint64_t bytes, enum ts_charge_wait how);
void ts_uncharge(int ord, uint64_t bytes);

enum ts_alloc_kind {
    TS_ALLOC_PTR = 1,    /* cuMemAlloc, pitch, managed, async, pool */
    TS_ALLOC_HANDLE = 2, /* cuMemCreate */
    TS_ALLOC_ARRAY = 3,  /* cuArrayCreate, cuArray3DCreate */
};

/* The process-local table of what was charged: key -> (ordinal, bytes). */
void ts_alloc_put(enum ts_alloc_kind kind, uint64_t key, int ord, uint64_t bytes);
/* Remove the entry; false when the key is unknown (nothing to uncharge). */
bool ts_alloc_take(enum ts_alloc_kind kind, uint64_t key, int *ord, uint64_t *bytes);
/* Fork: the table's lock is held across fork(); the child forgets every
 * entry (the charges stay the parent's). */
void ts_alloc_lock_for_fork(bool lock);
void ts_alloc_reset_in_child(void);

struct ts_swap_config;
/* Set the engine's charge/uncharge callbacks. */
void ts_charge_fill_swap_config(struct ts_swap_config *cfg);

/* The ordinal of the calling thread's current context, or -1. */
int ts_shim_current_ordinal(void);

#endif /* TS_SHIM_SHIM_H */
