/*
 * main.c - tessera-agent: parse options, run the agent. Also the entry of
 * the job supervisor, which the agent runs as `tessera-agent --supervise
 * JOBDIR` (internal; see supervisor.c).
 */
#include <stdio.h>
#include <string.h>

#include "agent/daemon/agent.h"
#include "agent/daemon/join.h"
#include "api/log.h"
#include "api/sdnotify.h"

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--supervise") == 0)
        return ts_supervisor_main(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "--join") == 0)
        return ts_agent_join(argc, argv);
    ts_sdnotify_init(); /* before any thread, and not for job processes */
    static struct ts_agent agent;
    struct ts_error err;
    enum ts_config_result r = ts_config_load(
        ts_agent_options, ts_agent_options_count, &agent.cfg,
        "usage: tessera-agent --server URL --token-file FILE --node NAME --data-dir DIR\n"
        "                     [--gpus nvml|none|sim:NxSIZE] [OPTIONS]\n"
        "       tessera-agent --join URL TOKEN|- [--node NAME] [--config FILE]",
        argc, argv, NULL, NULL, &err);
    if (r == TS_CONFIG_HELP)
        return 0;
    if (r == TS_CONFIG_ERROR) {
        fprintf(stderr, "tessera-agent: %s\n", err.message);
        return 1;
    }
    ts_log_parse_level(agent.cfg.log_level, &ts_log_threshold);
    int status = ts_agent_run(&agent);
    ts_config_free(ts_agent_options, ts_agent_options_count, &agent.cfg);
    return status;
}
