/*
 * broker.h - the agent's broker for the CUDA interposer: a thread that
 * watches every GPU's ledger for processes waiting for room (need_bytes),
 * hands each to the node's collision resolver (wait, priority or swap:
 * resolve.c), gives room back to waiters (room_seq), notices swapped-out
 * processes that came back, and carries out suspend and resume of whole
 * jobs (README.md "Collisions", "Suspend in place").
 *
 * The broker is the only writer of commands and reserve ranges in the
 * processes' slots. It takes the agent's lock only for short looks at the
 * job list, never while it waits for a process.
 */
#ifndef TS_AGENT_DAEMON_BROKER_H
#define TS_AGENT_DAEMON_BROKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/daemon/agent.h"

#define TS_BROKER_ACK_MS 30000  /* longest a swap command waits for the shim */
#define TS_BROKER_FREE_MS 10000 /* longest an ended process's memory takes to be freed */

struct ts_broker;

/* A collision resolver: make room for the process in slot w of ledger
 * position g, which misses `missing` bytes. */
struct ts_resolver {
    const char *name;
    void (*resolve)(struct ts_broker *b, unsigned g, int w, uint64_t missing);
};

extern const struct ts_resolver ts_resolver_wait, ts_resolver_priority, ts_resolver_swap;

struct ts_broker {
    struct ts_agent *a;
    struct ts_ledgers *s;
    struct ts_events *ev;
    const struct ts_resolver *resolver;
    uint64_t swap_idle_ns;
    uint64_t last_used[TS_GPUS_MAX];
    pid_t waiting[TS_GPUS_MAX][TS_LEDGER_PROCS]; /* whose wait was reported */
    pthread_t thread;
};

/* Start the broker thread (a->ledgers open, a->events made). 0 or -1. */
int ts_broker_start(struct ts_agent *a);
/* Stop (a->stop is set) and join it. NULL-safe. */
void ts_broker_join(struct ts_agent *a);

/* ---- for the resolvers (broker.c) ------------------------------------ */

/* The job slot of a process slot: (id, attempt), or false when free. */
bool ts_broker_job_of(const struct ts_ledger *l, int slot, int64_t *id, int *attempt);
/* Room was made on ledger position g: bump room_seq and wake waiters. */
void ts_broker_room(struct ts_broker *b, unsigned g);
/* Usable bytes not charged on ledger position g. */
uint64_t ts_broker_free(const struct ts_broker *b, unsigned g);

enum ts_swap_result {
    TS_SWAP_DONE,    /* moved out (or nothing to move) */
    TS_SWAP_NO_ROOM, /* the reserve has no range of that size */
    TS_SWAP_FAILURE, /* the process did not do it; why says so */
};
/* Swap process pid of job (id, attempt) out of all its GPUs: a range of the
 * reserve for its bytes, TS_CMD_SWAP_OUT in its home slot, then wait for
 * the acknowledgement (TS_BROKER_ACK_MS). hold (a suspend): TS_CMD_SUSPEND,
 * so its GPU calls wait for TS_CMD_SWAP_IN instead of taking the memory
 * back before the agent stops it. *moved: its bytes. */
enum ts_swap_result ts_broker_swap_out(struct ts_broker *b, int64_t id, int attempt, pid_t pid,
                                       bool hold, uint64_t *moved, char *why, size_t whylen);

/* "1.50 GiB" into buf. */
const char *ts_broker_bytes(uint64_t bytes, char *buf, size_t len);

#endif /* TS_AGENT_DAEMON_BROKER_H */
