/*
 * schedloop.h - the scheduler loop. Every replica started with --scheduler
 * runs one thread that tries to take a PostgreSQL session advisory lock;
 * the holder is the leader and runs cycles when something it reads changed
 * (NOTIFY tessera_sched) or the clock is due (a minimum runtime ending while
 * jobs wait), at most one every --cycle-interval so that changes under
 * churn share a cycle: sweep (silent nodes, lost nodes' jobs, jobs past their
 * maximum runtime), read a snapshot, ts_sched_decide, write the decisions in
 * one transaction. Between cycles it only sweeps, once a second, in one
 * statement; what a sweep changes wakes a cycle. When the leader dies its session ends, the
 * lock is free, and another replica takes it within a second.
 */
#ifndef TS_SERVER_SCHEDLOOP_H
#define TS_SERVER_SCHEDLOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "api/err.h"

struct ts_server;

enum ts_err ts_schedloop_start(struct ts_server *srv, struct ts_error *err);
void ts_schedloop_stop(struct ts_server *srv);

/* Whether this replica leads now. */
bool ts_schedloop_leader(const struct ts_server *srv);

/* The loop's counts since start (zero when this replica runs no loop). */
struct ts_schedloop_stats {
    bool leader;
    int64_t cycles;            /* full cycles */
    int64_t sweeps;            /* ticks that only swept */
    int64_t binds, stops;      /* decisions written (stops: evictions and suspensions) */
    double cycle_seconds;      /* in full cycles, all together */
    double last_cycle_seconds; /* the latest one */
    int64_t job_rows;          /* job rows the cycles' snapshots read from the database */
};
void ts_schedloop_stats(const struct ts_server *srv, struct ts_schedloop_stats *out);

#endif /* TS_SERVER_SCHEDLOOP_H */
