/*
 * reason.h - why a job is still pending (reason.c).
 */
#ifndef TS_SERVER_SCHED_REASON_H
#define TS_SERVER_SCHED_REASON_H

#include "server/sched/cycle.h"

/* the pending reason of job j in the final state */
struct diag_cache *ts_sched_diag_cache_new(size_t n);
void ts_sched_diag_cache_free(struct diag_cache *d);
void ts_sched_reason_of(struct cycle *cy, int j, const char **code, const char **msg);

#endif /* TS_SERVER_SCHED_REASON_H */
