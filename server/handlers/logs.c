/*
 * logs.c - job output: agents ship it (POST /nodes/{name}/logs), users read
 * and follow it (GET /jobs/{id}/logs). Placeholder until the log store lands.
 */
#include "server/handlers/handlers.h"

TS_HANDLER(ts_h_job_logs)
{
    (void)ctx;
    (void)r;
    return ts_error_set(err, TS_ERR_INTERNAL, "job logs are not built yet");
}

TS_HANDLER(ts_h_node_logs)
{
    (void)ctx;
    (void)r;
    return ts_error_set(err, TS_ERR_INTERNAL, "job logs are not built yet");
}
