/*
 * nodesched.h - the node-level scheduler (issue 17, README.md "The
 * node-level scheduler"): the server assigns logical GPUs; on a node with
 * --node-scheduler spread the agent starts a fractional job on the physical
 * GPU where it has the most room to burst. The job's spec.json keeps both:
 * gpus[].index is the physical GPU (what its ledgers, CUDA_VISIBLE_DEVICES,
 * cgroup and samples use), gpus[].logical_index the server's.
 */
#ifndef TS_AGENT_DAEMON_NODESCHED_H
#define TS_AGENT_DAEMON_NODESCHED_H

#include <stdbool.h>

#include "agent/daemon/ledgers.h"
#include "api/arena.h"
#include "api/wire.h"

/* Whether --node-scheduler MODE (auto|off|spread) spreads on a node whose
 * host swap reserve is swap_bytes: auto spreads where the node swaps. */
bool ts_nodesched_spreads(const char *mode, uint64_t swap_bytes);

/*
 * The desired job (borrowed) as it starts on this node: a copy in arena ar
 * (its GPU there, the rest shared with desired) whose
 * one GPU is the physical GPU with the most room to burst (usable memory
 * less the requests of the jobs whose ledgers hold a slot there) among
 * those where its request fits, the logical one first on a tie, and
 * gpus[0].logical_index the server's index. NULL when the job stays where
 * the server put it: not a single-GPU fractional job (its request is the
 * whole GPU's usable memory, or it has several GPUs), or no other GPU has
 * more room.
 */
const struct ts_desired_job *ts_nodesched_place(const struct ts_ledgers *s,
                                                const struct ts_desired_job *desired,
                                                struct ts_arena *ar);

/* A running job the node spread onto a GPU that a new job needs. */
struct ts_nodesched_block {
    int64_t id;
    int attempt;
    unsigned physical, logical; /* where it runs; where the server put it */
    uint64_t request_bytes;     /* its request there */
    char why[256];              /* not moved back: why (repack.h) */
};

/*
 * Before a desired job (borrowed) starts where the server put it: the jobs
 * of list jobs (borrowed, linked by next) that the node spread onto one of
 * its GPUs, when that GPU's room (usable memory less the requests in its
 * ledger) is less than the new job's request there: the jobs re-packing
 * would move back to their logical GPUs. At most max into out; the count.
 */
struct ts_ajob;
size_t ts_nodesched_in_the_way(const struct ts_ledgers *s, const struct ts_ajob *jobs,
                               const struct ts_desired_job *desired, struct ts_nodesched_block *out,
                               size_t max);

#endif /* TS_AGENT_DAEMON_NODESCHED_H */
