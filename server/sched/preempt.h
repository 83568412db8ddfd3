/*
 * preempt.h - inside one project, a job displaces preemptible jobs of lower
 * priority (preempt.c).
 */
#ifndef TS_SERVER_SCHED_PREEMPT_H
#define TS_SERVER_SCHED_PREEMPT_H

#include "server/sched/cycle.h"

/* try; on success the decisions are made */
bool ts_sched_preempt_try(struct cycle *cy, int j, double min_free, bool dep_limit);

#endif /* TS_SERVER_SCHED_PREEMPT_H */
