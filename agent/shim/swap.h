/*
 * swap.h - the swap engine of libtessera-cuda.so: device memory allocated
 * through the virtual memory API, so its physical memory can be copied to
 * the node's host swap reserve, released, and later mapped back at the
 * same virtual addresses; and the gate every GPU call passes, which holds
 * calls while memory is out.
 *
 * The engine knows nothing of hooks or the ledger's charging: the shim
 * (charge.c) charges before ts_vmm_alloc and uncharges after ts_vmm_free,
 * and passes the engine a charge callback for swap-in. It is written
 * against struct ts_cu, so tests drive it on simgpu without the hooks.
 */
#ifndef TS_SHIM_SWAP_H
#define TS_SHIM_SWAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/ledger/ledger.h"
#include "agent/shim/cu.h"

/* ---- the gate (gate.c) -------------------------------------------------
 * Every hook that gives the GPU work or touches device memory (launches,
 * copies, memsets, synchronizes, allocations, frees) is bracketed by
 * ts_gate_enter() / ts_gate_leave(). With no swap pending, enter is a
 * thread-local increment, a compiler barrier and one relaxed load of a
 * process-wide word: nothing measurable. The swapper makes its close of
 * the gate visible to every thread with membarrier(2) before it reads the
 * threads' depths (where membarrier is unavailable every enter takes the
 * slow path, which uses a full fence).
 *
 * A thread's first enter takes the slow path once, which registers its
 * depth counter (ts_gate_inside starts negative for that); an exiting
 * thread unregisters itself.
 *
 * While a swap is pending or memory is out, enter blocks until the memory
 * is back, the first caller bringing it back in (ts_swap_in), which waits
 * for room on its GPUs for as long as it takes: a process never fails for
 * memory it held (the agent makes the room, ledger.h "Waiting for room").
 * Only a swap-in the driver refuses makes enter return
 * CUDA_ERROR_OUT_OF_MEMORY, which the hook returns without calling the
 * driver (the next call tries again). A thread already inside a bracket (a
 * nested hook) never blocks. */
extern _Atomic uint32_t ts_gate_word; /* 0: open; otherwise a swap is pending or out */

/* Slow path of ts_gate_enter. Returns CUDA_SUCCESS once the gate is open
 * (having swapped memory back in when it was out), or an error the hook
 * returns without calling the driver. */
CUresult ts_gate_enter_slow(void);
/* Register this thread's depth counter (done by the slow path; may be
 * called early by the shim). Idempotent. */
void ts_gate_thread_register(void);

extern _Thread_local int ts_gate_inside; /* depth of this thread's brackets; < 0: unregistered */

static inline CUresult ts_gate_enter(void)
{
    int depth = ++ts_gate_inside;
    atomic_signal_fence(memory_order_seq_cst);
    if (__builtin_expect(
            (atomic_load_explicit(&ts_gate_word, memory_order_relaxed) != 0) | (depth <= 0), 0)) {
        ts_gate_inside--;
        return ts_gate_enter_slow();
    }
    return CUDA_SUCCESS;
}

static inline void ts_gate_leave(void)
{
    atomic_signal_fence(memory_order_seq_cst);
    ts_gate_inside--;
}

/* ---- VMM-backed allocations (vmm.c) ----------------------------------- */

struct ts_swap_config {
    const struct ts_cu *cu;
    int ndevices;
    /* Charge/uncharge `bytes` on device `dev` for swap-in / swap-out.
     * charge waits for room until it fits (bounded: for the ledger's
     * wait_ms, then CUDA_ERROR_TIMEOUT) and returns a CUresult; any other
     * error is final (the memory stays out). */
    CUresult (*charge)(int dev, uint64_t bytes, bool bounded);
    void (*uncharge)(int dev, uint64_t bytes);
    /* The host swap reserve (the agent's file), mapped by the engine on
     * the first swap-out; "" or NULL: no swap on this node. */
    const char *reserve_path;
    uint64_t reserve_bytes;
    /* Its pages are taken and locked (a real node): a range is faulted in
     * before the copies (MADV_POPULATE_WRITE, once). Not pinned (simgpu):
     * left as it is, so that never-written memory stays free. */
    bool reserve_pinned;
    /* Per device (ndevices entries): the ledger and this process's slot in
     * it, where the engine keeps swapped_bytes and swap_state; NULL when
     * the process runs without a ledger (tests of the engine alone). */
    struct ts_ledger *const *ledgers;
    struct ts_ledger_proc *const *procs;
    /* The home slot (device 0's): when set and the node swaps, ts_swap_init
     * starts the engine's watcher thread, which waits on home->cmd_seq and
     * carries out TS_CMD_SWAP_OUT / TS_CMD_SWAP_IN (ledger.h protocol). */
    struct ts_ledger_proc *home;
    uint32_t wait_ms; /* bound of every wait inside the user's process */
    /* TS_CMD_MOVE (the shim's move.c): run by the watcher with the home
     * slot the command came in; NULL: a move is CUDA_ERROR_NOT_SUPPORTED. */
    CUresult (*move)(struct ts_ledger_proc *home);
    /* One line about what the engine did (TESSERA_SHIM_LOG), or NULL. */
    void (*log)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
};

/* Set up once (from the shim's init; the shim calls it after claiming its
 * ledger slots). Returns 0 or -1. */
int ts_swap_init(const struct ts_swap_config *cfg);
/* Whether allocations go through the VMM path (the node swaps and the
 * device supports virtual memory management). */
bool ts_vmm_active(void);
/* The size an allocation of `bytes` on `dev` really takes (rounded up to
 * the device's granularity): what the shim charges. */
size_t ts_vmm_round(int dev, size_t bytes);
/* Reserve, create, map and enable access for `bytes` (already rounded) on
 * the current context's device `dev`. */
CUresult ts_vmm_alloc(int dev, size_t bytes, CUdeviceptr *out);
/* Free an allocation made by ts_vmm_alloc: CUDA_ERROR_NOT_FOUND when ptr
 * is not one (the shim then calls the driver's own free). *dev and *bytes
 * say what to uncharge (nothing when it was swapped out: already done). */
CUresult ts_vmm_free(CUdeviceptr ptr, int *dev, size_t *bytes, bool *was_resident);
/* The allocation that holds ptr (for cuMemGetAddressRange and frees of
 * interior pointers): base and size, or CUDA_ERROR_NOT_FOUND. */
CUresult ts_vmm_lookup(CUdeviceptr ptr, CUdeviceptr *base, size_t *size);

/* ---- swap (swap.c) ----------------------------------------------------- */

/* Close the gate, wait for the threads inside, synchronize every context,
 * copy every resident VMM allocation of every device to the reserve at
 * [offset, offset + len), unmap and release the physical memory (keeping
 * the addresses), uncharge. Returns CUDA_SUCCESS with *moved set (the
 * bytes out: 0 when there was nothing to move; what is out when it was out
 * already), or an error having left everything resident (the gate opens
 * again). A swap under way in another thread is waited for (at most the
 * wait bound), so a suspend's swap-out stops a swap-in still waiting for
 * room (ts_swap_held) and takes the memory out as it is. */
CUresult ts_swap_out(uint64_t offset, uint64_t len, uint64_t *moved);
/* Charge (waiting for room as long as it takes), create, map, copy back,
 * open the gate. Called by the gate's slow path on the next GPU call, or
 * at once for TS_CMD_SWAP_IN; a swap under way in another thread is waited
 * for. */
CUresult ts_swap_in(void);
/* Whether a suspend holds the process's memory out (TS_CMD_SUSPEND): a
 * swap-in waiting for room gives up (the charge code asks). */
bool ts_swap_held(void);
/* ---- moving to other GPUs (swap.c, for the shim's move.c) -------------
 * Hold the process at its gate (claiming it as a swap-out does, or as a
 * swap-in when the memory is out already), copy what is resident to
 * [offset, offset + len) of the reserve and release it (uncharged), call
 * between(arg) with every other thread of the process held, then bring
 * everything in (charged, mapped at the same addresses on each device's
 * driver ordinal as between left it) and open the gate. between's error
 * is returned after the memory came back where it was. *moved: the bytes
 * moved. */
CUresult ts_swap_move(uint64_t offset, uint64_t len, CUresult (*between)(void *), void *arg,
                      uint64_t *moved);
/* Inside between: device dev's allocations now live on driver ordinal
 * `real`, each reached through xl(its context) (copies, synchronizes). */
void ts_swap_retarget(int dev, int real, CUcontext (*xl)(CUcontext));
/* Inside between: the ledger and slot of device dev (the engine publishes
 * swapped_bytes there), and the home slot (the watcher waits there next). */
void ts_swap_set_slot(int dev, struct ts_ledger *l, struct ts_ledger_proc *p);
void ts_swap_set_home(struct ts_ledger_proc *home);
/* The driver ordinal of device dev (dev itself until a move). */
int ts_swap_real(int dev);

/* Bytes resident / swapped out, per device (for the ledger's figures). */
uint64_t ts_swap_resident_bytes(int dev);
uint64_t ts_swap_out_bytes(int dev);

#endif /* TS_SHIM_SWAP_H */
