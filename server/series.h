/*
 * series.h - the metric time series: every few seconds one replica (the
 * holder of an advisory lock) turns the latest samples and allocations into
 * metric_point rows, rolls fine resolutions up into coarse ones and drops
 * what is past retention. Every replica hands the figures it read to
 * /metrics (server/metrics.c).
 */
#ifndef TS_SERVER_SERIES_H
#define TS_SERVER_SERIES_H

#include "api/err.h"

struct ts_server;
struct ts_server_config;
struct ts_series_levels;

/* Start the sampler thread (the first tick runs at once, then one per
 * --series-interval, just after each bucket starts). TS_ERR_CONFIG when the
 * interval does not divide 60 s. */
enum ts_err ts_series_start(struct ts_server *srv, struct ts_error *err);
void ts_series_stop(struct ts_server *srv); /* waits for a tick in progress */

/* The resolutions kept: --series-interval (kept --series-retention), 60 s
 * when the interval is finer (--series-retention-1m), 3600 s
 * (--series-retention-1h). An interval of 60 s is kept
 * --series-retention-1m. */
void ts_series_levels_of(const struct ts_server_config *cfg, struct ts_series_levels *out);

#endif /* TS_SERVER_SERIES_H */
