/*
 * metrics.h - request counters and latency histograms, rendered in the
 * Prometheus text format with figures read from the database at scrape time,
 * and the allocation and utilization gauges the series sampler last read.
 * Counters are lock-free atomics indexed by route and status; the gauges'
 * text is swapped under a mutex.
 */
#ifndef TS_SERVER_METRICS_H
#define TS_SERVER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/buf.h"

struct ts_metrics;
struct ts_series_figure;

struct ts_metrics *ts_metrics_new(void); /* new; NULL when out of memory */
void ts_metrics_free(struct ts_metrics *m);
/* route_index -1: no route matched. held: the request waited on purpose (a
 * long-poll that waited, a followed log): its time goes to
 * tessera_http_held_request_duration_seconds, not to the request latency
 * histogram, whose quantiles would otherwise mean nothing. */
void ts_metrics_observe(struct ts_metrics *m, int route_index, const char *method, int status,
                        double seconds, bool held);
/* Append the HTTP series to b, and the cluster's figures while they are
 * fresh. */
void ts_metrics_render(struct ts_metrics *m, struct ts_buf *b);
/* The current figures of the cluster, projects, nodes and GPUs (figs
 * borrowed; rendered at once), read at unix time `at` by the series sampler;
 * shown until max_age_s seconds have passed without a newer set. */
void ts_metrics_set_figures(struct ts_metrics *m, const struct ts_series_figure *figs, size_t n,
                            int64_t at, int64_t max_age_s);

#endif /* TS_SERVER_METRICS_H */
