/*
 * reclaim.h - a project takes GPUs back from projects above their quota or
 * fair share (reclaim.c).
 */
#ifndef TS_SERVER_SCHED_RECLAIM_H
#define TS_SERVER_SCHED_RECLAIM_H

#include "server/sched/cycle.h"

/* try; on success the decisions are made */
bool ts_sched_reclaim_try(struct cycle *cy, int j);

#endif /* TS_SERVER_SCHED_RECLAIM_H */
