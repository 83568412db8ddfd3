/*
 * agent.c - the agent protocol: register (PUT /nodes/{name}), desired state
 * (long-polled GET /nodes/{name}/desired), report (POST /nodes/{name}/report),
 * and the admin's drain and undrain.
 */
#include "server/handlers/handlers.h"

TS_HANDLER(ts_h_node_register)
{
    (void)ctx;
    (void)r;
    return ts_error_set(err, TS_ERR_INTERNAL, "not built yet");
}
TS_HANDLER(ts_h_node_drain)
{
    (void)ctx;
    (void)r;
    return ts_error_set(err, TS_ERR_INTERNAL, "not built yet");
}
TS_HANDLER(ts_h_node_undrain)
{
    (void)ctx;
    (void)r;
    return ts_error_set(err, TS_ERR_INTERNAL, "not built yet");
}
TS_HANDLER(ts_h_node_desired)
{
    (void)ctx;
    (void)r;
    return ts_error_set(err, TS_ERR_INTERNAL, "not built yet");
}
TS_HANDLER(ts_h_node_report)
{
    (void)ctx;
    (void)r;
    return ts_error_set(err, TS_ERR_INTERNAL, "not built yet");
}
TS_HANDLER(ts_h_queue)
{
    (void)ctx;
    (void)r;
    return ts_error_set(err, TS_ERR_INTERNAL, "not built yet");
}
