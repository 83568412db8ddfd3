/*
 * server.h - tessera-server's configuration, its process-wide state, and the
 * per-request context handlers receive.
 */
#ifndef TS_SERVER_SERVER_H
#define TS_SERVER_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "api/config.h"
#include "api/err.h"
#include "api/wire.h"
#include "server/http/http.h"
#include "server/store/db.h"

struct ts_server_config {
    char *data_dir;
    char *listen;
    char *tls_cert;      /* HTTPS: PEM certificate (chain); NULL: plain HTTP */
    char *tls_key;       /* its PEM private key */
    char *tls_client_ca; /* mTLS: CAs of client certificates; agent tokens need one */
    char *database;      /* NULL: the embedded PostgreSQL in data_dir/pg */
    char *admin_token;   /* secret: environment or config file only */
    char *pg_bindir;
    char *log_level;
    int64_t max_body; /* bytes */
    int64_t max_connections;
    int64_t connection_timeout; /* seconds */
    int64_t db_pool;
    bool scheduler;            /* run for scheduler leader */
    char *strategy;            /* binpack, spread, fgd */
    int64_t min_runtime;       /* seconds */
    int64_t node_timeout;      /* seconds without a report: not ready */
    int64_t node_lost_timeout; /* seconds without a report: jobs requeued */
    int64_t cycle_interval;    /* milliseconds from a cycle's start to the next one's */
    char *checkpoint_root;     /* NULL: data_dir/checkpoints */
    int64_t idempotency_ttl;   /* seconds */
    int64_t auth_cache_ttl;    /* milliseconds; 0: off */
    int64_t idle_swap_after;   /* seconds: interactive jobs' idle_swap_after when not given */

    /* job output and the metric series */
    int64_t log_max_bytes;       /* job output kept per job; the oldest goes first */
    int64_t series_interval;     /* seconds between metric points; divides 60 */
    int64_t series_retention;    /* seconds points at series_interval are kept */
    int64_t series_retention_1m; /* seconds 60 s points are kept */
    int64_t series_retention_1h; /* seconds 3600 s points are kept */
};

/* The option table behind --help, flags, TESSERA_* and the config file. */
extern const struct ts_option ts_server_options[];
extern const size_t ts_server_options_count;

struct ts_metrics;
struct ts_authcache;
struct ts_pgembed;
struct ts_notify;
struct ts_schedloop;

struct ts_server {
    struct ts_server_config cfg;
    struct ts_pgembed *pg; /* NULL with --database */
    struct ts_db *db;
    struct ts_http *http;
    struct ts_http_tls *tls; /* the HTTPS files, read at start; NULL: plain HTTP */
    struct ts_metrics *metrics;
    struct ts_authcache *auth_cache; /* NULL: off */
    struct ts_notify *notify;        /* LISTEN: tessera_node, tessera_sched, tessera_log */
    struct ts_schedloop *loop;       /* the scheduler loop (runs while leader) */
    char *conninfo;                  /* the database this server uses */
    atomic_bool stopping;            /* set first thing on shutdown: long waits end */
    time_t started_at;
};

/* Who is calling: filled by authentication before the handler runs. */
struct ts_principal {
    int64_t token_id;
    char name[TS_NAME_MAX + 1];
    enum ts_role role;
    int64_t *project_ids; /* arena; the projects a member/viewer is limited to */
    size_t nprojects;     /* 0 with a viewer or admin: all projects */
    const char *nodes;    /* arena; an agent's node patterns, comma-separated; NULL: any */
};

/* Per-request context: r->user points at it. */
struct ts_ctx {
    struct ts_server *srv;
    struct ts_request *req;
    struct ts_principal who;
    bool authenticated;
    struct ts_dbconn *conn; /* acquired on first use, released at completion */
    /* for a project-limited caller: the projects it may not see named
     * (handlers/common.c, loaded on first use) */
    const char **hidden_projects;
    size_t nhidden_projects;
    bool hidden_projects_loaded;
};

/* The request's database connection, acquired on first use (borrowed until
 * the request completes). NULL with err filled when none can be had. */
struct ts_dbconn *ts_ctx_db(struct ts_ctx *ctx, struct ts_error *err);
/* Give the request's connection back before a long wait (long-polls,
 * followed logs); a later ts_ctx_db acquires another. */
void ts_ctx_db_release(struct ts_ctx *ctx);

/* Start everything (database, migrations, admin token, HTTP), serve until
 * SIGINT/SIGTERM, stop everything. Returns the process exit status. */
int ts_server_run(struct ts_server *srv);

#endif /* TS_SERVER_SERVER_H */
