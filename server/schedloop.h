/*
 * schedloop.h - the scheduler loop. Every replica started with --scheduler
 * runs one thread that tries to take a PostgreSQL session advisory lock;
 * the holder is the leader and runs cycles, woken by NOTIFY tessera_sched
 * and at least once a second: sweep (silent nodes, lost nodes' jobs, jobs
 * past their maximum runtime), read a snapshot, ts_sched_decide, write the
 * decisions in one transaction. When the leader dies its session ends, the
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

/* Whether this replica leads now, and its cycles so far. */
bool ts_schedloop_leader(const struct ts_server *srv);
int64_t ts_schedloop_cycles(const struct ts_server *srv);

#endif /* TS_SERVER_SCHEDLOOP_H */
