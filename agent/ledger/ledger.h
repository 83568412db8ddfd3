/*
 * ledger.h - the per-GPU ledger the agent and the CUDA interposer
 * (libtessera-cuda.so) share, and the protocol between them.
 *
 * One file per physical GPU of the node, DATA_DIR/ledger/gpu<N>.ledger,
 * created by the agent at start (kept when valid, so a restarted agent
 * finds the charges of running jobs), mapped MAP_SHARED by the agent and
 * by every shimmed process. The agent hard-links the files of a job's GPUs
 * into the job's own folder as JOBDIR/shim/dev<K>.ledger, K being the
 * CUDA ordinal the job sees (the order of CUDA_VISIBLE_DEVICES), and hands
 * the folder over in TESSERA_SHIM_DIR; a job in a container needs only its
 * folder mounted.
 *
 * Who writes what
 *   header, jobs[].{key..flags}: the agent, under the lock.
 *   jobs[].used_bytes: every process of the job (atomic add/sub); the
 *     reaper (agent or shim, under the lock) takes a dead process's share
 *     out.
 *   procs[]: a process claims a free slot under the lock and then writes
 *     its own used/swapped/last_call figures (single writer, relaxed
 *     stores); the agent writes cmd/cmd_seq and the swap range.
 *
 * Accounting on one GPU (all figures in bytes)
 *   usable = total_bytes - reserve_bytes
 *   within request: a job whose used_bytes after the charge is <= its
 *     request_bytes is granted by that one fetch_add; when burst_bytes is
 *     0 nobody borrows, so the scheduler's packing guarantees the room.
 *   burst: used above request and <= limit_bytes, granted under the lock
 *     while sum(jobs[].used_bytes) <= usable and no waiter is ahead of it
 *     (ts_ledger_ahead_locked); burst_bytes = sum(max(0, used - request))
 *     is kept under the lock.
 *   A charge that would take a job past limit_bytes fails with
 *     CUDA_ERROR_OUT_OF_MEMORY, always.
 *
 * Waiting for room (ABI 1.1)
 *   A charge that does not fit waits; its process slot says what for:
 *   need_bytes, need_kind (TS_NEED_*) and need_since_ns. Waiters are served
 *   in rank order, first come first served within a rank:
 *     0  within the job's request (new memory or memory coming back): the
 *        scheduler guaranteed it, so it is granted whenever it fits and is
 *        never queued behind anyone;
 *     1  memory the process held coming back above its request (a swap-in
 *        of a swapped-out or suspended process);
 *     2  a new burst.
 *   A burst or a swap-in is granted only when it fits and no live waiter
 *   of a lower rank, or of its rank with an earlier need_since_ns, waits on
 *   that GPU. New bursts and within-request charges wait at most the
 *   header's wait_ms, then fail with out-of-memory (gaveup_seq and
 *   gaveup_bytes of the process's slot and, since ABI 1.2, gaveup_seq,
 *   gaveup_pid and gaveup_bytes of its job's entry, which outlives the
 *   process, tell the agent, which names the holders in an event); a
 *   swap-in waits until the memory is back: a process never fails for
 *   memory it held.
 *
 * Agent <-> shim
 *   shim -> agent: a process that needs room (a charge that does not fit,
 *     or a swapped-out process coming back) sets need_bytes, need_kind and
 *     need_since_ns in its slot, increments agent_wake and FUTEX_WAKEs it;
 *     the agent's broker, waiting on agent_wake, serves the waiters in
 *     order (ends or swaps out burst holders, as its resolver says) and
 *     increments room_seq with a FUTEX_WAKE; the waiting process re-checks
 *     ("Waiting for room" for how long it waits).
 *   agent -> shim: the agent writes the command (and, for a swap-out, the
 *     range of the host swap reserve the process may use), then increments
 *     cmd_seq with a FUTEX_WAKE; the shim's watcher thread does it, writes
 *     its outcome (swap_error: the CUresult; moved_bytes: bytes out after a
 *     swap-out, 0 when there was nothing to move), then ack_seq = cmd_seq
 *     and FUTEX_WAKEs ack_seq. The range of a swap-out that moved bytes is
 *     the process's until the agent sees it RESIDENT again with no command
 *     pending: its own next GPU call may be reading it back already.
 *   Every process of a job has its home slot in the ledger of the job's
 *   device 0 (claimed at init even before it allocates there): commands go
 *   to the home slot and act on all of the process's GPUs at once.
 *
 * Futexes are shared (not FUTEX_PRIVATE_FLAG) 32-bit words in the mapping.
 * The lock is a process-shared robust mutex: a holder that dies gives the
 * next taker EOWNERDEAD, which reaps dead slots and marks it consistent.
 */
#ifndef TS_AGENT_LEDGER_H
#define TS_AGENT_LEDGER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TS_LEDGER_MAGIC 0x4c475354u /* "TSGL" little-endian */
#define TS_LEDGER_ABI_MAJOR 1u
#define TS_LEDGER_ABI_MINOR 3u
#define TS_LEDGER_JOBS 64
#define TS_LEDGER_PROCS 256

enum ts_ledger_collision {
    TS_COLLISION_WAIT = 0,
    TS_COLLISION_PRIORITY = 1,
    TS_COLLISION_SWAP = 2,
};

/* header.flags */
#define TS_LH_SWAP_PINNED                                                                          \
    0x1u /* the swap reserve is taken and locked in memory: its pages                              \
            are there (else they come and go with the ranges in use) */

/* jobs[].flags */
#define TS_LJ_SWAP_OK 0x1u /* the job accepts being swapped out */

/* procs[].need_kind: what a waiter waits for */
#define TS_NEED_BURST 0x1u  /* the charge takes its job above its request on that GPU */
#define TS_NEED_SWAPIN 0x2u /* memory the process held, coming back */

/* procs[].cmd: what the agent asks of a process */
enum ts_ledger_cmd {
    TS_CMD_NONE = 0,
    TS_CMD_SWAP_OUT = 1, /* move every allocation to swap_offset.. of the reserve */
    TS_CMD_SWAP_IN = 2,  /* bring it back now (resume warm), not on the next call */
    TS_CMD_SUSPEND = 3,  /* swap out as TS_CMD_SWAP_OUT, and hold the process's GPU
                            calls (not swapping in on the next one) until TS_CMD_SWAP_IN:
                            the agent stops the process after the ack, so a call made
                            in between cannot bring the memory back behind its back */
    TS_CMD_MOVE = 4,     /* ABI 1.3: the job's folder's dev<K>.ledger now name other GPUs
                            (the agent gave the job a slot in each first): hold the
                            process at its gate, move its memory through swap_offset.. of
                            the reserve to those GPUs at the same addresses, re-create its
                            contexts, streams, events, modules and functions there, and
                            charge it there; its home slot is then the new dev0's (the
                            ack is in this one). An older shim acks it having done
                            nothing: the agent checks for the process's new slot */
};

/* procs[].swap_state: where the process's memory is, kept by its swap
 * engine as it moves (OUT once a swap-out released it, RESIDENT again once
 * a swap-in has copied it all back, whoever asked for either). What a
 * command did is in swap_error and moved_bytes, written before ack_seq:
 * the memory may already be on its way back by then. */
enum ts_ledger_swap_state {
    TS_SWAP_RESIDENT = 0,
    TS_SWAP_OUT = 2, /* physical memory released, contents in the reserve */
};

struct ts_ledger_header {
    uint32_t magic;
    uint32_t abi_major;
    uint32_t abi_minor;
    uint32_t size; /* sizeof(struct ts_ledger) */
    uint32_t gpu_index;
    uint32_t collision;     /* enum ts_ledger_collision */
    uint32_t wait_ms;       /* longest a new allocation waits for room */
    uint32_t flags;         /* TS_LH_* (ABI 1.1; 0 before) */
    uint64_t total_bytes;   /* device memory */
    uint64_t reserve_bytes; /* per-GPU reserve: never charged to jobs */
    char uuid[48];          /* "GPU-..." */
    char swap_path[256];    /* the node's host swap reserve file; "" when none */
    uint64_t swap_bytes;    /* its size */
};

struct ts_ledger_job {
    _Atomic uint64_t key; /* ts_ledger_key(id, attempt); 0: free slot */
    int64_t job_id;
    int32_t attempt;
    int32_t priority;
    uint64_t request_bytes;
    uint64_t limit_bytes;
    uint32_t flags; /* TS_LJ_* */
    uint32_t pad0;
    _Atomic uint64_t used_bytes;    /* charged by its processes on this GPU */
    _Atomic uint64_t swapped_bytes; /* in the host reserve: uncharged, not in used_bytes */
    /* shim -> agent (ABI 1.2): one of its processes' waits ended in
     * out-of-memory. Kept here as well as in the process's slot, which is
     * reaped as soon as the process exits (a job that exits on
     * out-of-memory at once lost its event). */
    _Atomic uint32_t gaveup_seq;   /* bumped after the two below are written */
    _Atomic int32_t gaveup_pid;    /* the process whose wait failed */
    _Atomic uint64_t gaveup_bytes; /* what that wait asked for */
    uint64_t pad1[6];
};

struct ts_ledger_proc {
    _Atomic int32_t pid;            /* host pid (ts_ledger_host_pid); 0: free slot */
    int32_t job;                    /* index into jobs[] */
    uint64_t start_ticks;           /* /proc/PID/stat field 22: a reused pid is not this one */
    _Atomic uint64_t used_bytes;    /* this process's charges on this GPU */
    _Atomic uint64_t swapped_bytes; /* in the reserve: uncharged, not in used_bytes */
    _Atomic uint64_t last_call_ns;  /* CLOCK_MONOTONIC of its last GPU call (coarse) */
    _Atomic uint64_t need_bytes;    /* room it waits for on this GPU; 0: none */
    /* agent -> shim (home slot only) */
    _Atomic uint32_t cmd;        /* enum ts_ledger_cmd */
    _Atomic uint32_t cmd_seq;    /* futex: the shim's watcher waits on it */
    _Atomic uint32_t ack_seq;    /* futex: the agent waits for it to reach cmd_seq */
    _Atomic uint32_t swap_state; /* enum ts_ledger_swap_state */
    uint64_t swap_offset;        /* the range of the reserve granted for TS_CMD_SWAP_OUT */
    uint64_t swap_len;
    _Atomic int32_t swap_error; /* CUresult of the last failed command */
    uint32_t pad0;
    /* ABI 1.1: the wait for room and the turn (shim writes, agent reads) */
    _Atomic uint64_t need_since_ns; /* when the current wait began: its place in the queue */
    _Atomic uint32_t need_kind;     /* TS_NEED_* of the current wait */
    _Atomic uint32_t gaveup_seq;    /* bumped when a wait ended in out-of-memory */
    _Atomic uint64_t gaveup_bytes;  /* what that wait asked for */
    _Atomic uint64_t turn_ns;       /* its turn began: last swap-in, or a burst after none */
    _Atomic uint64_t moved_bytes;   /* the last command's outcome: bytes out after a swap-out */
};

struct ts_ledger {
    struct ts_ledger_header h;
    pthread_mutex_t lock; /* process-shared, robust */
    char lock_pad[64 - sizeof(pthread_mutex_t) % 64];
    _Atomic uint64_t burst_bytes; /* sum of max(0, used - request) over jobs */
    _Atomic uint32_t unused0;     /* ABI 1.0's burst_closed: no longer read or written */
    _Atomic uint32_t agent_wake;  /* futex: processes that need room bump it */
    _Atomic uint32_t room_seq;    /* futex: the agent bumps it when room was made */
    uint32_t pad0;
    struct ts_ledger_job jobs[TS_LEDGER_JOBS];
    struct ts_ledger_proc procs[TS_LEDGER_PROCS];
};

static inline uint64_t ts_ledger_key(int64_t job_id, int32_t attempt)
{
    return ((uint64_t)job_id << 16) ^ (uint64_t)(uint32_t)attempt ^ 0x8000000000000000ull;
}

/* ---- shared by the agent and the shim (ledger.c) ---------------------- */

/* Create (or keep, when valid and of this GPU) DIR/gpu<index>.ledger and
 * set its header. Returns the mapping, or NULL with errno. */
struct ts_ledger *ts_ledger_create(const char *path, uint32_t gpu_index, const char *uuid,
                                   uint64_t total_bytes, uint64_t reserve_bytes,
                                   enum ts_ledger_collision collision, uint32_t wait_ms,
                                   const char *swap_path, uint64_t swap_bytes);
/* Map an existing ledger; NULL with errno (EPROTO: wrong magic, ABI major
 * or size). */
struct ts_ledger *ts_ledger_open(const char *path);
void ts_ledger_close(struct ts_ledger *l);

/* The robust lock: recovers from a dead holder (reaps, marks consistent).
 * Returns 0, or an errno (the ledger is unusable: ENOTRECOVERABLE). */
int ts_ledger_lock(struct ts_ledger *l);
void ts_ledger_unlock(struct ts_ledger *l);

/* Under the lock: free the slots of processes that have exited (pid gone,
 * zombie, or another process with that pid) and take their charges out of
 * their jobs; recompute burst_bytes. Returns the number reaped. */
int ts_ledger_reap_locked(struct ts_ledger *l);
/* Under the lock: whether a live waiter other than process slot `self`
 * comes before a charge of need_kind `kind` whose wait began at `since`
 * (UINT64_MAX: not waiting yet), in the order above. */
bool ts_ledger_ahead_locked(const struct ts_ledger *l, int self, uint32_t kind, uint64_t since);
/* The rank of a need_kind in that order: 0 request, 1 swap-in, 2 burst. */
static inline int ts_ledger_need_rank(uint32_t kind)
{
    return !(kind & TS_NEED_BURST) ? 0 : (kind & TS_NEED_SWAPIN) ? 1 : 2;
}
/* Under the lock: sum(max(0, used - request)) over the jobs. */
uint64_t ts_ledger_burst_locked(const struct ts_ledger *l);
uint64_t ts_ledger_used(const struct ts_ledger *l); /* sum of jobs[].used_bytes */

/* Slots. job: the index of the job slot with that key, or -1. */
int ts_ledger_find_job(const struct ts_ledger *l, uint64_t key);
int ts_ledger_find_proc(const struct ts_ledger *l, pid_t pid);

/* Shared futex on a 32-bit word of the mapping. wait: returns when *w !=
 * expect, on a wake, or after timeout_ms (< 0: no timeout; never used
 * inside a user's process). */
void ts_futex_wait(_Atomic uint32_t *w, uint32_t expect, int timeout_ms);
void ts_futex_wake(_Atomic uint32_t *w);

/* This process's pid as the host sees it (hostpid.h): from the job's
 * supervisor in a sandbox, else the first NSpid of /proc/self/status. */
pid_t ts_ledger_host_pid(void);
/* Field 22 of /proc/PID/stat, or 0. */
uint64_t ts_ledger_start_ticks(pid_t pid);
uint64_t ts_ledger_now_ns(void);

#endif /* TS_AGENT_LEDGER_H */
