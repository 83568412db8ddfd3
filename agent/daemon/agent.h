/*
 * agent.h - tessera-agent: its options, its process-wide state, and its
 * loop (agent.c); the pieces of the loop declare theirs beside them
 * (reconcile.h, upstream.h, jobtab.h).
 *
 * Threads: the main thread owns the job list (starts, stops, adopts, polls
 * and samples jobs, reconciles); the poll thread fetches desired states
 * (long-polled from the server, or read from --desired-file) and hands them
 * over; the ship thread registers the node, sends reports and job output.
 * `mu` guards the job list's shared fields, the hand-over and the samples.
 */
#ifndef TS_AGENT_DAEMON_AGENT_H
#define TS_AGENT_DAEMON_AGENT_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/daemon/ajob.h"
#include "agent/daemon/events.h"
#include "agent/daemon/gpus.h"
#include "agent/daemon/jobtab.h"
#include "agent/daemon/ledgers.h"
#include "agent/daemon/options.h"
#include "agent/daemon/sandbox.h"
#include "api/wire.h"

struct ts_broker; /* broker.h */

struct ts_agent {
    struct ts_agent_config cfg;
    struct ts_gpus *gpus;
    struct ts_ajob_ctx ctx;
    char lib_dir[PATH_MAX];
    char shim_lib[PATH_MAX];
    struct ts_ledgers ledgers; /* fraction enforcement (ledgers.h) */
    struct ts_sandbox sandbox; /* the job sandbox (sandbox.h) */
    struct ts_events *events;
    struct ts_broker *broker;
    int lock_fd;

    pthread_mutex_t mu;
    pthread_cond_t cond;                  /* wakes the ship thread */
    struct ts_jobtab jobtab;              /* the job list and the main loop's wake-up
                                             (jobtab.h): main thread changes the list,
                                             under mu */
    struct ts_agent_desired *desired;     /* main thread: the desired state last applied
                                             (or NULL) */
    struct ts_agent_desired *desired_new; /* mu: handed over by the poll thread */
    bool report_now;                      /* mu: a job changed state */
    /* mu: GPU samples since the last report */
    double gpu_util_sum[TS_GPUS_MAX];
    unsigned gpu_util_n[TS_GPUS_MAX];
    uint64_t gpu_mem[TS_GPUS_MAX];
    bool gpu_sampled[TS_GPUS_MAX];

    atomic_bool stop;
    atomic_bool failed; /* stopped for an error: the server refused the agent */
    atomic_bool registered;
    bool file_mode;      /* --desired-file: no server */
    bool spread;         /* the node-level scheduler spreads fractional jobs */
    bool repack_pending; /* main thread: a start waits for moves (repack.h) */
    pthread_t poll_thread, ship_thread;
    bool threads;
};

/* A desired state as decoded (api/wire.h) and the arena it lives in. */
struct ts_agent_desired {
    struct ts_arena *arena;
    struct ts_desired d;
};
/* Decode the desired state in (borrowed): new, or NULL with err set
 * (upstream.c, as _free). */
struct ts_agent_desired *ts_agent_desired_decode(const json_t *in, struct ts_error *err);
void ts_agent_desired_free(struct ts_agent_desired *d); /* NULL is a no-op */

/* Run until SIGTERM or SIGINT; jobs keep running after it returns. The
 * exit status for main. */
int ts_agent_run(struct ts_agent *a);
#endif /* TS_AGENT_DAEMON_AGENT_H */
