/*
 * series.c - the sampler and downsampler thread. Placeholder until the
 * metric series land.
 */
#include "server/series.h"

enum ts_err ts_series_start(struct ts_server *srv, struct ts_error *err)
{
    (void)srv;
    (void)err;
    return TS_OK;
}

void ts_series_stop(struct ts_server *srv)
{
    (void)srv;
}
