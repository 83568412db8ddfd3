/*
 * main.c - tessera-server: parse options, run the server.
 */
#include <stdio.h>
#include <stdlib.h>

#include "api/log.h"
#include "api/sdnotify.h"
#include "server/server.h"

int main(int argc, char **argv)
{
    ts_sdnotify_init(); /* before any thread, and not for the embedded PostgreSQL */
    struct ts_server srv = {0};
    struct ts_error err;
    enum ts_config_result r = ts_config_load(
        ts_server_options, ts_server_options_count, &srv.cfg,
        "usage: tessera-server --data-dir DIR [--listen HOST:PORT] [--database URL] [OPTIONS]",
        argc, argv, NULL, NULL, &err);
    if (r == TS_CONFIG_HELP)
        return 0;
    if (r == TS_CONFIG_ERROR) {
        fprintf(stderr, "tessera-server: %s\n", err.message);
        return 1;
    }
    if (srv.cfg.data_dir == NULL) {
        fprintf(stderr, "tessera-server: --data-dir is required (or TESSERA_DATA_DIR)\n");
        ts_config_free(ts_server_options, ts_server_options_count, &srv.cfg);
        return 1;
    }
    ts_log_parse_level(srv.cfg.log_level, &ts_log_threshold);
    int status = ts_server_run(&srv);
    ts_config_free(ts_server_options, ts_server_options_count, &srv.cfg);
    return status;
}
