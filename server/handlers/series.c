/*
 * series.c - GET /metrics/query. Placeholder until the metric series land.
 */
#include "server/handlers/handlers.h"

TS_HANDLER(ts_h_metrics_query)
{
    (void)ctx;
    (void)r;
    return ts_error_set(err, TS_ERR_INTERNAL, "metric series are not built yet");
}
