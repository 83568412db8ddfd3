/*
 * options.c - tessera-server's option table: the one source of its flags,
 * environment variables, config file keys, defaults and --help.
 */
#include <stddef.h>

#include "api/array.h"
#include "api/units.h"
#include "server/server.h"

#define OPT(field) offsetof(struct ts_server_config, field)

const struct ts_option ts_server_options[] = {
    {"data-dir", TS_OPT_STRING, OPT(data_dir), NULL, "DIR",
     "folder for server state and the embedded PostgreSQL (required)", 0, 0, NULL, 0},
    {"listen", TS_OPT_HOSTPORT, OPT(listen), "127.0.0.1:8080", "HOST:PORT",
     "address to serve the API on; port 0 picks a free one", 0, 0, NULL, 0},
    {"tls-cert", TS_OPT_STRING, OPT(tls_cert), NULL, "FILE",
     "serve HTTPS on --listen with this PEM certificate (chain); needs --tls-key", 0, 0, NULL, 0},
    {"tls-key", TS_OPT_STRING, OPT(tls_key), NULL, "FILE",
     "the PEM private key of --tls-cert; refused when group or others may read it", 0, 0, NULL, 0},
    {"tls-client-ca", TS_OPT_STRING, OPT(tls_client_ca), NULL, "FILE",
     "ask clients for certificates signed by these CAs: required of agent tokens, checked when "
     "any client sends one",
     0, 0, NULL, 0},
    {"database", TS_OPT_STRING, OPT(database), NULL, "URL",
     "PostgreSQL URL; without it a private PostgreSQL runs in DIR/pg", 0, 0, NULL, 0},
    {"admin-token", TS_OPT_STRING, OPT(admin_token), NULL, "SECRET",
     "bootstrap admin token; without it one is generated into DIR/admin.token", 0, 0, NULL,
     TS_OPT_SECRET},
    {"pg-bindir", TS_OPT_STRING, OPT(pg_bindir), NULL, "DIR",
     "folder with initdb and pg_ctl for the embedded PostgreSQL", 0, 0, NULL, 0},
    {"log-level", TS_OPT_ENUM, OPT(log_level), "info", "LEVEL", "error, warn, info or debug", 0, 0,
     "error|warn|info|debug", 0},
    {"max-body", TS_OPT_BYTES, OPT(max_body), "1MiB", "SIZE",
     "largest request body accepted; larger ones get 413", 1024, 1LL << 30, NULL, 0},
    {"max-connections", TS_OPT_INT, OPT(max_connections), "1024", "N",
     "concurrent HTTP connections (one thread each)", 1, 65536, NULL, 0},
    {"connection-timeout", TS_OPT_DURATION, OPT(connection_timeout), "60s", "DURATION",
     "close HTTP connections idle this long", 1, 3600, NULL, 0},
    {"db-pool", TS_OPT_INT, OPT(db_pool), "8", "N", "PostgreSQL connections", 1, 256, NULL, 0},
    {"scheduler", TS_OPT_BOOL, OPT(scheduler), "true", "BOOL",
     "take part in electing the replica that runs the scheduler loop", 0, 0, NULL, 0},
    {"strategy", TS_OPT_ENUM, OPT(strategy), "binpack", "NAME",
     "placement: binpack, spread or fgd (fragmentation-aware)", 0, 0, "binpack|spread|fgd", 0},
    {"min-runtime", TS_OPT_DURATION, OPT(min_runtime), "0s", "DURATION",
     "a job runs at least this long before it can be preempted or reclaimed", 0, 86400 * 7, NULL,
     0},
    {"node-timeout", TS_OPT_DURATION, OPT(node_timeout), "15s", "DURATION",
     "a node whose agent has not reported for this long is not ready", 2, 3600, NULL, 0},
    {"node-lost-timeout", TS_OPT_DURATION, OPT(node_lost_timeout), "60s", "DURATION",
     "the jobs of a node silent for this long go back to the queue", 2, 86400, NULL, 0},
    {"cycle-interval", TS_OPT_INT, OPT(cycle_interval), "200", "MS",
     "shortest time from the start of one scheduler cycle to the next: changes meanwhile share "
     "one cycle; 0: a cycle for each",
     0, 10000, NULL, 0},
    {"checkpoint-root", TS_OPT_STRING, OPT(checkpoint_root), NULL, "DIR",
     "shared folder for jobs' checkpoints (ROOT/project/job-id); default DIR/checkpoints", 0, 0,
     NULL, 0},
    {"idempotency-ttl", TS_OPT_DURATION, OPT(idempotency_ttl), "24h", "DURATION",
     "how long Idempotency-Key headers are remembered (at least 24h)", 86400, 86400 * 365, NULL, 0},
    {"auth-cache-ttl", TS_OPT_INT, OPT(auth_cache_ttl), "2000", "MS",
     "milliseconds a checked token is trusted before it is checked again; 0: every request", 0,
     60000, NULL, 0},
    {"idle-swap-after", TS_OPT_DURATION, OPT(idle_swap_after), "5m", "DURATION",
     "interactive jobs' default idle_swap_after: idle this long, their GPU memory goes to host "
     "swap; 0: never",
     0, 604800, NULL, 0},
    {"log-max-bytes", TS_OPT_BYTES, OPT(log_max_bytes), "8MiB", "SIZE",
     "job output kept per job; beyond it the oldest chunks are dropped", 4096, 1LL << 40, NULL, 0},
    {"series-interval", TS_OPT_DURATION, OPT(series_interval), "10s", "DURATION",
     "seconds between metric points (a divisor of 60s)", 1, 60, NULL, 0},
    {"series-retention", TS_OPT_DURATION, OPT(series_retention), "24h", "DURATION",
     "how long metric points at series-interval are kept", 60, TS_DURATION_MAX_SECONDS, NULL, 0},
    {"series-retention-1m", TS_OPT_DURATION, OPT(series_retention_1m), "7d", "DURATION",
     "how long 1-minute metric points are kept", 3600, TS_DURATION_MAX_SECONDS, NULL, 0},
    {"series-retention-1h", TS_OPT_DURATION, OPT(series_retention_1h), "90d", "DURATION",
     "how long 1-hour metric points are kept", 86400, TS_DURATION_MAX_SECONDS, NULL, 0},
};

const size_t ts_server_options_count = TS_ARRAY_LEN(ts_server_options);
