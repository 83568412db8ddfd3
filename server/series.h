/*
 * series.h - the metric time series: every few seconds one replica (the
 * holder of an advisory lock) turns the latest samples and allocations into
 * metric_point rows, rolls fine resolutions up into coarse ones and drops
 * what is past retention.
 */
#ifndef TS_SERVER_SERIES_H
#define TS_SERVER_SERIES_H

#include "api/err.h"

struct ts_server;

enum ts_err ts_series_start(struct ts_server *srv, struct ts_error *err);
void ts_series_stop(struct ts_server *srv);

#endif /* TS_SERVER_SERIES_H */
