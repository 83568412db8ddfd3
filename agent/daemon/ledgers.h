/*
 * ledgers.h - the agent's side of fraction enforcement at rest: one ledger
 * per GPU (DATA/ledger/gpu<N>.ledger, agent/ledger/ledger.h), the node's
 * host swap reserve (a file on tmpfs, mapped and mlock'ed once) and its
 * range allocator, and the job slots of fractional jobs with the hard links
 * that hand them to the shim (JOBDIR/shim/dev<K>.ledger).
 *
 * The reserve's allocator keeps no state of its own: the ranges in use are
 * those written in the processes' slots (swap_offset, swap_len) of every
 * ledger, so a restarted agent finds them as they are and a process that
 * dies gives its range back when the reaper frees its slot. Only the broker
 * thread allocates (ts_ledgers_swap_alloc), and it writes the range into
 * the slot before it allocates again.
 */
#ifndef TS_AGENT_DAEMON_LEDGERS_H
#define TS_AGENT_DAEMON_LEDGERS_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/daemon/gpus.h"
#include "agent/ledger/ledger.h"
#include "api/err.h"
#include "api/wire.h"

struct ts_ledgers {
    unsigned count;                   /* as the node's GPUs */
    unsigned index[TS_GPUS_MAX];      /* GPU index of ledger i */
    struct ts_ledger *l[TS_GPUS_MAX]; /* mapped */
    uint64_t usable[TS_GPUS_MAX];     /* memory less the per-GPU reserve */
    char dir[PATH_MAX];               /* DATA/ledger */
    enum ts_ledger_collision collision;
    char swap_path[256]; /* "" when the node has no reserve */
    uint64_t swap_bytes;
    void *swap_map;
    bool swap_pinned; /* taken and locked at start (real GPUs); else its pages come and go */
    bool swap_locked; /* mlock succeeded */
};

/* Parse "wait", "priority" or "swap". */
enum ts_ledger_collision ts_ledgers_collision_parse(const char *s);
const char *ts_ledgers_collision_name(enum ts_ledger_collision c);

/*
 * Create (or keep) a ledger per GPU and the host swap reserve of swap_bytes
 * (0: none), and write the reserve's path and size, the collision mode and
 * wait_ms into every ledger's header. swap_pin: the reserve's memory is
 * taken and locked at start (real GPUs: the driver copies to pinned
 * memory); without it (simulated GPUs, which are host memory themselves)
 * the reserve holds only the pages in use, and ts_ledgers_swap_trim gives
 * back the others. s is filled; TS_OK or an error with
 * the reason. Close with ts_ledgers_close (the files stay: jobs use them).
 */
enum ts_err ts_ledgers_open(struct ts_ledgers *s, const struct ts_gpus *gpus, const char *data_dir,
                            uint64_t gpu_reserve, enum ts_ledger_collision collision,
                            uint32_t wait_ms, uint64_t swap_bytes, bool swap_pin,
                            struct ts_error *err);
void ts_ledgers_close(struct ts_ledgers *s);

/* The ledger of GPU index gpu (borrowed), or NULL. */
struct ts_ledger *ts_ledgers_get(const struct ts_ledgers *s, unsigned gpu);
/* Position of GPU index gpu in s, or -1. */
int ts_ledgers_pos(const struct ts_ledgers *s, unsigned gpu);

/* Whether a desired job (borrowed) runs under the shim: one of its gpus[]
 * asks for less than the GPU's usable memory (memory_bytes), or may burst
 * above its request (memory_limit_bytes > memory_bytes), or the node has a
 * host swap reserve (then every GPU job can be swapped out, and sees its
 * GPUs less the per-GPU reserve, as on a real swapping node). */
bool ts_ledgers_fractional(const struct ts_ledgers *s, const struct ts_desired_job *desired);

/*
 * Give the desired job its slot in the ledger of each of its GPUs (a slot
 * it already has is kept: an agent restarted mid-start) and hard-link them
 * as jobdir/shim/dev<K>.ledger. TS_OK, or an error (slots it made are
 * freed again).
 */
enum ts_err ts_ledgers_job_add(struct ts_ledgers *s, const struct ts_desired_job *desired,
                               const char *jobdir, struct ts_error *err);
/* Bytes of job (id, attempt) in the host swap reserve, over all GPUs. */
uint64_t ts_ledgers_job_swapped(const struct ts_ledgers *s, int64_t id, int attempt);
/* Whether job (id, attempt) has a slot in the ledger of GPU gpu. */
bool ts_ledgers_job_has(const struct ts_ledgers *s, int64_t id, int attempt, unsigned gpu);
/* Under l's lock: the slot of job key, made when it has none with fig's
 * job_id, attempt, priority, request_bytes, limit_bytes and flags (its
 * usage at 0). -1 when the ledger is full. */
int ts_ledgers_slot_take_locked(struct ts_ledger *l, uint64_t key, const struct ts_ledger_job *fig);
/*
 * Free the job's slots on its GPUs once none of its processes is left in
 * them (dead ones are reaped first). Returns true when no slot is left,
 * false when a live process still holds one (call again later).
 */
bool ts_ledgers_job_remove(struct ts_ledgers *s, int64_t id, int attempt, const unsigned *gpus,
                           unsigned ngpus);

/* First fit of len bytes in the reserve among the ranges the processes'
 * slots hold. true with *off, or false (no reserve, or full). Broker only. */
bool ts_ledgers_swap_alloc(const struct ts_ledgers *s, uint64_t len, uint64_t *off);
/* An unpinned reserve: give back the pages of the ranges no slot holds.
 * Broker only (the one that hands ranges out). */
void ts_ledgers_swap_trim(const struct ts_ledgers *s);
/* Bytes of the reserve held by the processes' slots. */
uint64_t ts_ledgers_swap_used(const struct ts_ledgers *s);

#endif /* TS_AGENT_DAEMON_LEDGERS_H */
