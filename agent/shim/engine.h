/*
 * engine.h - the swap engine's private state, shared by gate.c, vmm.c,
 * swap.c and watch.c (never included by the hooks: their interface is
 * swap.h).
 *
 * ts_gate_word holds the engine's state in its low byte and, in its top
 * bit, TS_GATE_FENCED when membarrier(2) is unavailable (every enter then
 * takes the slow path, which uses a full fence). The state word is also
 * the swap lock: a swap-out claims it 0 -> CLOSING, a swap-in OUT ->
 * COMING_IN, by compare-and-swap; only the claimer moves it on.
 */
#ifndef TS_SHIM_ENGINE_H
#define TS_SHIM_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/shim/swap.h"

#define TS_GATE_OPEN 0u
#define TS_GATE_CLOSING 1u   /* a swap-out is under way */
#define TS_GATE_OUT 2u       /* memory is in the reserve */
#define TS_GATE_COMING_IN 3u /* a swap-in is under way */
#define TS_GATE_STATE 0xffu
#define TS_GATE_HELD 0x100u /* suspended: memory out stays out until TS_CMD_SWAP_IN */
#define TS_GATE_FENCED 0x80000000u
#define TS_GATE_UNREGISTERED (-(1 << 29)) /* ts_gate_inside of a new thread */

#define TS_SWAP_MAX_DEV 64
#define TS_SWAP_DEFAULT_WAIT_MS 10000u
#define TS_SWAP_CHUNK ((size_t)64 << 20)

/* One allocation of ts_vmm_alloc. */
struct ts_vmm_entry {
    CUdeviceptr base;
    size_t size;
    int dev;
    CUcontext ctx; /* current when it was allocated: synchronized and used for copies */
    CUmemGenericAllocationHandle handle; /* valid while resident */
    bool resident;
    uint64_t roff; /* offset in the reserve file while out */
};

struct ts_engine {
    bool configured;
    const struct ts_cu *cu;
    int ndev;
    CUresult (*charge)(int dev, uint64_t bytes, bool bounded);
    void (*uncharge)(int dev, uint64_t bytes);
    char reserve_path[256];
    bool reserve_pinned;
    struct ts_ledger *ledgers[TS_SWAP_MAX_DEV];
    struct ts_ledger_proc *procs[TS_SWAP_MAX_DEV];
    struct ts_ledger_proc *home;
    uint32_t wait_ms;
    void (*log)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
    CUresult (*move)(struct ts_ledger_proc *home);
    _Atomic int real[TS_SWAP_MAX_DEV]; /* driver ordinal of each device (moves change it) */

    /* The table: readers (lookups, swaps) and writers (alloc, free). */
    pthread_rwlock_t lock;
    struct ts_vmm_entry *v; /* sorted by base */
    size_t n, cap;
    _Atomic uint64_t resident[TS_SWAP_MAX_DEV];
    _Atomic uint64_t out[TS_SWAP_MAX_DEV];
    size_t gran[TS_SWAP_MAX_DEV]; /* 0: not asked yet */
    _Atomic int vmm;              /* 0: not known yet, 1: every device supports VMM, -1: not */

    /* swap.c: the reserve mapping and private streams (claimer only). */
    unsigned char *map;
    size_t map_len;
    uint64_t pop_lo, pop_hi; /* [lo, hi) of the map is known faulted in */
    bool registered;
    struct {
        CUcontext ctx;
        CUstream stream;
    } streams[TS_SWAP_MAX_DEV];
    int nstreams;

    bool watcher; /* watch.c: started in this process */
};

extern struct ts_engine ts_eng;

/* gate.c */
uint32_t ts_gate_wait_ms(void);
/* Wait (at most ms) until ts_gate_word is no longer `seen`. */
void ts_gate_wait_change(uint32_t seen, uint32_t ms);
/* After the caller closed the gate: make the close visible to every thread
 * and wait (bounded) until no thread but the caller is inside a bracket.
 * Returns 0, or -1 on timeout. */
int ts_gate_quiesce(uint32_t wait_ms);
/* Set the state (keeping the fenced bit) and wake the threads waiting. */
void ts_gate_set(uint32_t state);
/* Drop TS_GATE_HELD and wake the threads waiting on it. */
void ts_gate_release_hold(void);
/* membarrier registration (once); sets TS_GATE_FENCED when unavailable. */
void ts_gate_barrier_init(void);
void ts_gate_fork_child(void);

/* swap.c: the swap-in body, for the claimer of OUT -> COMING_IN. */
CUresult ts_swap_in_claimed(void);
/* swap.c, for the claimer of the gate (swapdirect.c too): the swap-out
 * body (CLOSING claimed); the reserve mapped (0) or not (-1); ctx made
 * current unless it is *current; ctx's private stream (ctx current) and
 * every private stream synchronized; device d's figures published
 * (delta_out: bytes gone out, negative when back); every device's charge
 * taken, waiting for room as a swap-in does. */
CUresult ts_swap_out_claimed(uint64_t offset, uint64_t len, uint64_t *moved);
int ts_swap_map_reserve(void);
CUresult ts_swap_use_ctx(CUcontext ctx, CUcontext *current);
CUstream ts_swap_stream_of(CUcontext ctx);
CUresult ts_swap_sync_streams(void);
void ts_swap_publish(int d, int64_t delta_out, uint32_t state);
CUresult ts_swap_charge_all(const uint64_t *want);
/* swapdirect.c: ts_swap_move's memory from GPU to GPU (the gate CLOSING,
 * nothing out). *handled false: it cannot go that way (memory out, a call
 * missing), nothing was done and the gate is still CLOSING; true: the move
 * ended (the gate is set) with this result. */
CUresult ts_swap_move_direct(uint64_t offset, uint64_t len, CUresult (*between)(void *), void *arg,
                             uint64_t *moved, bool *handled);
void ts_swap_fork_child(void);

/* watch.c */
int ts_watch_start(void);
void ts_watch_fork_child(void);

uint64_t ts_swap_now_ms(void);

#endif /* TS_SHIM_ENGINE_H */
