/*
 * main.c - tessera-gpuload: parse options, run the workload, exit with its
 * status, or end by the signal that stopped it (README.md, --help).
 */
#include <signal.h>
#include <stdio.h>

#include "agent/gpuload/gpuload.h"

int main(int argc, char **argv)
{
    /* Lines reach the job's log as they are printed, also through a pipe. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct ts_gpuload_config cfg = {0};
    struct ts_error err;
    enum ts_config_result r = ts_config_load(
        ts_gpuload_options, ts_gpuload_options_count, &cfg,
        "usage: tessera-gpuload [--pattern train|notebook|inference] [--memory SIZE] "
        "[--duration DURATION] [OPTIONS]",
        argc, argv, NULL, NULL, &err);
    if (r == TS_CONFIG_HELP) {
        fputs(ts_gpuload_options_epilog, stdout);
        return 0;
    }
    if (r == TS_CONFIG_ERROR) {
        fprintf(stderr, "tessera-gpuload: %s\n", err.message);
        return TS_GPULOAD_EXIT_USAGE;
    }
    struct ts_gpuload_plan plan;
    int status;
    if (ts_gpuload_options_plan(&cfg, &plan, &err) != TS_OK) {
        fprintf(stderr, "tessera-gpuload: %s\n", err.message);
        status = TS_GPULOAD_EXIT_USAGE;
    } else {
        status = ts_gpuload_run(&plan);
    }
    ts_config_free(ts_gpuload_options, ts_gpuload_options_count, &cfg);
    if (status < 0) {
        /* Evicted: end by the same signal, as the agent and a shell expect. */
        fflush(stdout);
        signal(-status, SIG_DFL);
        raise(-status);
        return 128 - status;
    }
    return status;
}
