/*
 * order.h - the pass's queue (order.c).
 */
#ifndef TS_SERVER_SCHED_ORDER_H
#define TS_SERVER_SCHED_ORDER_H

#include "server/sched/cycle.h"

/* Every job in queue order (cy->job_order), once a cycle; false when out
 * of memory. ts_sched_order_new takes it then. */
bool ts_sched_order_sort(struct cycle *cy);
struct order *ts_sched_order_new(struct cycle *cy);
int ts_sched_order_next(struct order *o); /* job index, or -1 at the end */
void ts_sched_order_update(struct order *o, int project);
void ts_sched_order_free(struct order *o);

#endif /* TS_SERVER_SCHED_ORDER_H */
