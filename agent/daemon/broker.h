/*
 * broker.h - the agent's broker for the CUDA interposer: a thread that
 * watches every GPU's ledger for processes waiting for room (need_bytes),
 * serves them in the ledger's order (ledger.h, "Waiting for room"), hands
 * what is missing to the node's collision resolver (wait, priority or
 * swap: resolve.c), gives room back (room_seq), tells the jobs concerned
 * (events), and carries out suspend, resume and idle detach of whole jobs
 * (jobswap.c). README.md "Fractions" is the behaviour in words.
 *
 * The broker never blocks on a process: what it asks of one (a swap-out,
 * the end of a job) is an action in flight, looked at again on every pass
 * (at most PASS_MS apart, at once when a waiter wakes it) until it is done,
 * failed or overdue. It is the only writer of commands and reserve ranges
 * in the processes' slots, and it takes the agent's lock only for short
 * looks at the job list.
 */
#ifndef TS_AGENT_DAEMON_BROKER_H
#define TS_AGENT_DAEMON_BROKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/daemon/agent.h"
#include "agent/daemon/jobtab.h"
#include "agent/daemon/repack.h"

#define TS_BROKER_ACK_MS 30000 /* longest a swap command waits for the shim, plus 10 s a GiB */
#define TS_BROKER_FREE_MS                                                                          \
    10000                    /* longest an ended job's memory takes to be freed, after its grace */
#define TS_BROKER_ACTIONS 64 /* actions in flight at once */

struct ts_broker;

/* A process waiting for room on one GPU (ledger position g, slot). */
struct ts_waiter {
    unsigned g;
    int slot;
    pid_t pid;
    uint64_t need;
    uint32_t kind; /* TS_NEED_* */
    uint64_t since_ns;
    int64_t id; /* its job */
    int attempt;
    int32_t priority;
};

/* A collision resolver: start what makes `missing` bytes of room for w on
 * its GPU (w->g). Returns the bytes the actions it started will free there
 * (0: nothing it may do now; the waiter waits). */
struct ts_resolver {
    const char *name;
    uint64_t (*resolve)(struct ts_broker *b, const struct ts_waiter *w, uint64_t missing);
};

extern const struct ts_resolver ts_resolver_wait, ts_resolver_priority, ts_resolver_swap;

enum ts_action_kind {
    TS_ACT_SWAP_OUT, /* a process's memory to the host swap reserve */
    TS_ACT_END,      /* a job ended (stopped by the main thread) to free its memory */
};

enum ts_action_why {
    TS_WHY_COLLISION, /* room for a waiter (w) */
    TS_WHY_DETACH,    /* its job was idle for its idle_swap_after */
    TS_WHY_SUSPEND,   /* its job is being suspended (TS_CMD_SUSPEND) */
};

/* Something the broker asked of a process (or, for TS_ACT_END, a job) and
 * waits for. */
struct ts_action {
    bool used;
    enum ts_action_kind kind;
    enum ts_action_why why;
    int64_t id; /* the job acted on */
    int attempt;
    int32_t priority;
    pid_t pid;                   /* SWAP_OUT: the process; END: one of its processes on g */
    unsigned home;               /* SWAP_OUT: ledger position of its home slot */
    int slot;                    /* SWAP_OUT: the home slot; END: the slot on g */
    uint32_t seq;                /* SWAP_OUT: the cmd_seq written */
    uint64_t bytes;              /* SWAP_OUT: all it moves; END: what its job holds on g */
    uint64_t frees[TS_GPUS_MAX]; /* per ledger position: room it makes there */
    int64_t started_ms, deadline_ms;
    struct ts_waiter w; /* TS_WHY_COLLISION: the waiter */
    char note[256];     /* why, for the events */
};

struct ts_broker {
    struct ts_agent *a;
    struct ts_jobtab *jobtab; /* the agent's job list (jobtab.h), handed at start */
    struct ts_ledgers *s;
    struct ts_events *ev;
    const struct ts_resolver *resolver;
    uint64_t swap_idle_ns, quantum_ns, priority_idle_ns;
    int collision_grace_s;
    uint64_t last_used[TS_GPUS_MAX];
    pid_t waiting[TS_GPUS_MAX][TS_LEDGER_PROCS]; /* whose wait was reported */
    /* each job entry's gaveup_seq as last seen, for the key it had */
    uint64_t gaveup_key[TS_GPUS_MAX][TS_LEDGER_JOBS];
    uint32_t gaveup_seq[TS_GPUS_MAX][TS_LEDGER_JOBS];
    struct ts_action act[TS_BROKER_ACTIONS];
    struct ts_repack_move mv[TS_REPACK_MOVES]; /* re-pack moves in flight (repack.c) */
    int64_t next_trim_ms, next_reap_ms;
    pthread_t thread;
};

/* Start the broker thread (a->ledgers open, a->events made). 0 or -1. */
int ts_broker_start(struct ts_agent *a);
/* Stop (a->stop is set) and join it. NULL-safe. */
void ts_broker_join(struct ts_agent *a);

/* ---- shared by the broker's files (broker_act.c) ------------------------ */

/* Whether a re-pack move of job (id, attempt) is in flight (b->mv). */
bool ts_broker_moving(const struct ts_broker *b, int64_t id, int attempt);

/* The job slot of a process slot: (id, attempt), or false when free. */
bool ts_broker_job_of(const struct ts_ledger *l, int slot, int64_t *id, int *attempt);
/* Room was made on ledger position g: bump room_seq and wake waiters. */
void ts_broker_room(struct ts_broker *b, unsigned g);
/* Usable bytes not charged on ledger position g. */
uint64_t ts_broker_free(const struct ts_broker *b, unsigned g);
/* Whether pid runs. */
bool ts_broker_alive(pid_t pid);
/* The job's GPU positions in CUDA order (device 0 first); 0 when the job
 * is not in the list. */
unsigned ts_broker_job_gpus(struct ts_broker *b, int64_t id, int attempt, unsigned *pos);
/* Whether an action or a move in flight is about job (id, attempt) /
 * process pid. */
bool ts_broker_busy_job(const struct ts_broker *b, int64_t id, int attempt);
bool ts_broker_busy_pid(const struct ts_broker *b, pid_t pid);
/* "held above their requests by job 3 (1.00 GiB), job 9 (2.00 GiB)": the
 * burst holders on ledger position g other than job `except` (0: none),
 * or "no job holds memory above its request there". */
void ts_broker_holders(struct ts_broker *b, unsigned g, int64_t except, char *buf, size_t len);

/* Start swapping process pid of job (id, attempt) out of all its GPUs: a
 * range of the reserve for its bytes, the command in its home slot.
 * hold: TS_CMD_SUSPEND (its GPU calls then wait for TS_CMD_SWAP_IN).
 * Returns the action (in flight), or NULL with why filled: no reserve room
 * (*no_room set), no slot, nothing to move (*nothing set). */
struct ts_action *ts_broker_swap_out(struct ts_broker *b, int64_t id, int attempt, pid_t pid,
                                     enum ts_action_why why, bool *no_room, bool *nothing,
                                     char *whybuf, size_t whylen);
/* Start ending job (id, attempt) for waiter w (its memory on w->g):
 * SIGTERM now, SIGKILL after the collision grace (the main thread stops
 * it); the job is reported evicted. Returns the action, or NULL. */
struct ts_action *ts_broker_end_job(struct ts_broker *b, int64_t id, int attempt, int32_t priority,
                                    pid_t pid, int slot, const struct ts_waiter *w,
                                    const char *note);
/* An action slot (zeroed, used), or NULL when all are in flight. */
struct ts_action *ts_broker_action_new(struct ts_broker *b);

/* ---- jobswap.c: suspend, resume and idle detach of whole jobs ---------- */

/* One pass over the job list: start suspends and resumes the desired
 * state asks for, finish those whose processes are done, detach idle
 * jobs. */
void ts_jobswap_pass(struct ts_broker *b);
/* A swap-out action of a suspend or a detach ended (ok or not). */
void ts_jobswap_done(struct ts_broker *b, struct ts_action *x, bool ok, const char *why);

/* What a waiter of need_kind `kind` waits for, in words ("a burst above
 * its request"...; broker_act.c). */
const char *ts_broker_need_words(uint32_t kind);
/* "1.50 GiB" into buf (broker_act.c). */
const char *ts_broker_bytes(uint64_t bytes, char *buf, size_t len);

#endif /* TS_AGENT_DAEMON_BROKER_H */
