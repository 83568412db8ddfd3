/*
 * metrics.h - request counters and latency histograms, rendered in the
 * Prometheus text format with figures read from the database at scrape time.
 * Lock-free: counters are atomics indexed by route and status.
 */
#ifndef TS_SERVER_METRICS_H
#define TS_SERVER_METRICS_H

#include <stddef.h>

#include "api/buf.h"

struct ts_metrics;

struct ts_metrics *ts_metrics_new(void); /* new; NULL when out of memory */
void ts_metrics_free(struct ts_metrics *m);
/* route_index -1: no route matched. */
void ts_metrics_observe(struct ts_metrics *m, int route_index, const char *method, int status,
                        double seconds);
/* Append the HTTP series to b. */
void ts_metrics_render(struct ts_metrics *m, struct ts_buf *b);

#endif /* TS_SERVER_METRICS_H */
