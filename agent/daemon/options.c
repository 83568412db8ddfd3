/*
 * options.c - tessera-agent's option table: the one source of its flags,
 * TESSERA_* environment variables, config file keys, defaults and --help.
 */
#include <stddef.h>

#include "agent/daemon/options.h"
#include "api/array.h"

#define OPT(field) offsetof(struct ts_agent_config, field)

const struct ts_option ts_agent_options[] = {
    {"server", TS_OPT_STRING, OPT(server), NULL, "URL",
     "the server's address, e.g. http://10.0.0.1:8080 (required without --desired-file)", 0, 0,
     NULL, 0},
    {"token-file", TS_OPT_STRING, OPT(token_file), NULL, "FILE",
     "file holding the agent token (role agent); read again after a 401", 0, 0, NULL, 0},
    {"ca", TS_OPT_STRING, OPT(ca), NULL, "FILE",
     "PEM CAs an https:// server's certificate must chain to; default: the system's", 0, 0, NULL,
     0},
    {"cert", TS_OPT_STRING, OPT(cert), NULL, "FILE",
     "PEM client certificate, which a server with --tls-client-ca requires of agents", 0, 0, NULL,
     0},
    {"key", TS_OPT_STRING, OPT(key), NULL, "FILE",
     "the PEM private key of --cert; refused when group or others may read it", 0, 0, NULL, 0},
    {"node", TS_OPT_STRING, OPT(node), NULL, "NAME", "this node's name (required)", 0, 0, NULL, 0},
    {"data-dir", TS_OPT_STRING, OPT(data_dir), NULL, "DIR",
     "folder for job folders and simulated GPUs (required)", 0, 0, NULL, 0},
    {"gpus", TS_OPT_STRING, OPT(gpus), "nvml", "nvml|none|sim:NxSIZE",
     "GPU backend: real GPUs through NVML, none, or N simulated GPUs (sim:2x80GiB)", 0, 0, NULL, 0},
    {"labels", TS_OPT_STRING, OPT(labels), NULL, "K=V,...", "node labels for node selectors", 0, 0,
     NULL, 0},
    {"cpu", TS_OPT_INT, OPT(cpu), "0", "N", "CPUs the node offers; 0: the CPUs online", 0, 1 << 20,
     NULL, 0},
    {"memory", TS_OPT_BYTES, OPT(memory), "0", "SIZE", "host memory the node offers; 0: MemTotal",
     0, -1, NULL, 0},
    {"report-interval", TS_OPT_DURATION, OPT(report_interval), "5s", "DURATION",
     "how often to report job states and samples (and at once on a job state change)", 1, 3600,
     NULL, 0},
    {"gpu-reserve", TS_OPT_BYTES, OPT(gpu_reserve), "2GiB", "SIZE",
     "memory per GPU held back for contexts, never packed", 0, -1, NULL, 0},
    {"keep-finished", TS_OPT_DURATION, OPT(keep_finished), "1h", "DURATION",
     "how long the folder of a finished, fully reported job is kept", 0, 86400 * 365, NULL, 0},
    {"poll-wait", TS_OPT_DURATION, OPT(poll_wait), "30s", "DURATION",
     "how long one long-poll of the desired state waits for a change", 1, 60, NULL, 0},
    {"log-level", TS_OPT_ENUM, OPT(log_level), "info", "LEVEL", "error, warn, info or debug", 0, 0,
     "error|warn|info|debug", 0},
    {"simgpu-lib-dir", TS_OPT_STRING, OPT(simgpu_lib_dir), NULL, "DIR",
     "folder of simgpu's libcuda.so.1 and libnvidia-ml.so.1; default: ../lib/tessera/simgpu "
     "(installed) or ../lib/simgpu beside the agent binary",
     0, 0, NULL, 0},
    {"desired-file", TS_OPT_STRING, OPT(desired_file), NULL, "FILE",
     "testing: read the desired state from FILE (again when it changes) instead of the server; "
     "reports go to DIR/report.json",
     0, 0, NULL, 0},
    {"collision", TS_OPT_ENUM, OPT(collision), "wait", "MODE",
     "how colliding GPU memory bursts are resolved: wait, priority or swap", 0, 0,
     "wait|priority|swap", 0},
    {"swap-reserve", TS_OPT_BYTES, OPT(swap_reserve), "0", "SIZE",
     "host memory for swapped-out GPU memory (suspend, idle detach, and time-sharing with "
     "--collision swap), taken and locked at start on real GPUs; 0: none",
     0, -1, NULL, 0},
    {"collision-wait", TS_OPT_DURATION, OPT(collision_wait), "10s", "DURATION",
     "longest a new allocation (within a job's request or a burst) waits for room, then "
     "out-of-memory; memory a job held coming back waits as long as it takes",
     0, 3600, NULL, 0},
    {"swap-idle", TS_OPT_DURATION, OPT(swap_idle), "2s", "DURATION",
     "with --collision swap, a burst holder that made no GPU call this long may be swapped out "
     "for another's memory at once",
     0, 86400, NULL, 0},
    {"swap-quantum", TS_OPT_DURATION, OPT(swap_quantum), "2s", "DURATION",
     "with --collision swap, a busy burst holder's turn: it is not swapped out for another's "
     "burst before it has been back (or borrowing) this long",
     0, 3600, NULL, 0},
    {"priority-idle", TS_OPT_DURATION, OPT(priority_idle), "5m", "DURATION",
     "with --collision priority, a burst holder idle this long may be ended for a burst of "
     "any priority; 0: only lower priorities",
     0, 86400 * 7, NULL, 0},
    {"collision-grace", TS_OPT_DURATION, OPT(collision_grace), "2s", "DURATION",
     "a job ended to make room gets SIGTERM, then SIGKILL after this long (or its own grace "
     "period, when shorter)",
     0, 3600, NULL, 0},
    {"shim-lib", TS_OPT_STRING, OPT(shim_lib), NULL, "PATH",
     "libtessera-cuda.so, preloaded into jobs with a GPU fraction; default: "
     "../lib/tessera/libtessera-cuda.so (installed) or ../lib/libtessera-cuda.so beside the agent "
     "binary",
     0, 0, NULL, 0},
    {"sandbox", TS_OPT_ENUM, OPT(sandbox), "on", "on|off",
     "run each job in its sandbox (its user, namespaces, cgroup, the interposer as the driver); "
     "off: as the agent's user in its namespaces, for development",
     0, 0, "on|off", 0},
    {"node-scheduler", TS_OPT_ENUM, OPT(node_scheduler), "auto", "auto|off|spread",
     "spread: start each fractional job on the GPU where it has most room to burst (the "
     "server's assignment stays logical) and move it back when a bind needs the room; auto: "
     "spread where the node swaps (--swap-reserve), else off; off: where the server put it",
     0, 0, "auto|off|spread", 0},
    {"job-user", TS_OPT_STRING, OPT(job_user), "nobody", "USER",
     "the Unix user sandboxed jobs run as", 0, 0, NULL, 0},
    {"job-pids", TS_OPT_INT, OPT(job_pids), "4096", "N",
     "most processes and threads a sandboxed job may have (its cgroup's pids.max)", 16, 1 << 22,
     NULL, 0},
    {"job-mount", TS_OPT_STRING, OPT(job_mount), NULL, "PATH[:ro|:rw],...",
     "host folders every sandboxed job sees at their real paths, read-only unless :rw (not the "
     "data folder, nor one holding it, the token or the key)",
     0, 0, NULL, 0},
    {"job-network", TS_OPT_ENUM, OPT(job_network), "host", "host|none",
     "none: each sandboxed job in a network namespace of its own with only loopback (no "
     "connection out of it); host: the node's network",
     0, 0, "host|none", 0},
};

const size_t ts_agent_options_count = TS_ARRAY_LEN(ts_agent_options);
