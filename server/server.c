/*
 * server.c - tessera-server's lifecycle: database (embedded or given),
 * migrations, bootstrap admin token, HTTP; then serve until a signal.
 */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/log.h"
#include "api/sdnotify.h"
#include "server/auth.h"
#include "server/authcache.h"
#include "server/dispatch.h"
#include "server/http/tls.h"
#include "server/metrics.h"
#include "server/notify.h"
#include "server/schedloop.h"
#include "server/series.h"
#include "server/store/migrate.h"
#include "server/store/pgembed.h"
#include "server/store/store.h"

static enum ts_err write_file_0600(const char *path, const char *text, struct ts_error *err)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return ts_error_set(err, TS_ERR_IO, "could not create %s: %s", tmp, strerror(errno));
    size_t len = strlen(text);
    bool ok = write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return ts_error_set(err, TS_ERR_IO, "could not write %s: %s", path, strerror(errno));
    }
    return TS_OK;
}

/* TESSERA_ADMIN_TOKEN replaces the bootstrap admin's hash; without it the
 * first start generates one into DIR/admin.token. */
static enum ts_err bootstrap_admin(struct ts_server *srv, struct ts_dbconn *c, struct ts_error *err)
{
    char path[4096], hash[65];
    snprintf(path, sizeof(path), "%s/admin.token", srv->cfg.data_dir);
    bool created = false;
    if (srv->cfg.admin_token != NULL) {
        if (strlen(srv->cfg.admin_token) < 16)
            return ts_error_set(err, TS_ERR_CONFIG,
                                "admin token must be at least 16 characters: got %zu",
                                strlen(srv->cfg.admin_token));
        ts_auth_sha256_hex(srv->cfg.admin_token, strlen(srv->cfg.admin_token), hash);
        enum ts_err e = ts_store_token_bootstrap(c, hash, true, &created, err);
        if (e != TS_OK)
            return e;
        if (unlink(path) == 0)
            ts_log_info("removed %s: the admin token now comes from admin-token", path);
        ts_log_info("admin token set from admin-token (config file or TESSERA_ADMIN_TOKEN)");
        return TS_OK;
    }
    char secret[TS_AUTH_SECRET_LEN];
    enum ts_err e = ts_auth_new_secret(secret, err);
    if (e != TS_OK)
        return e;
    ts_auth_sha256_hex(secret, strlen(secret), hash);
    e = ts_store_token_bootstrap(c, hash, false, &created, err);
    if (e != TS_OK)
        return e;
    if (!created)
        return TS_OK;
    char line[TS_AUTH_SECRET_LEN + 2];
    snprintf(line, sizeof(line), "%s\n", secret);
    e = write_file_0600(path, line, err);
    if (e != TS_OK)
        return e;
    ts_log_info("admin token generated path=%s", path);
    return TS_OK;
}

static enum ts_err prepare_data_dir(const char *dir, struct ts_error *err)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return ts_error_set(err, TS_ERR_IO, "could not create data folder %s: %s", dir,
                            strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return ts_error_set(err, TS_ERR_IO, "data folder %s is not a folder", dir);
    return TS_OK;
}

/* The address clients can use, for scripts and tests: DIR/server.addr. */
static void write_addr(struct ts_server *srv)
{
    char path[4096], host[256], text[300];
    unsigned port;
    snprintf(path, sizeof(path), "%s/server.addr", srv->cfg.data_dir);
    if (ts_http_parse_listen(srv->cfg.listen, host, sizeof(host), &port) != 0)
        return;
    if (strcmp(host, "0.0.0.0") == 0)
        strcpy(host, "127.0.0.1");
    bool v6 = strchr(host, ':') != NULL;
    snprintf(text, sizeof(text), "%s://%s%s%s:%u\n", srv->tls ? "https" : "http", v6 ? "[" : "",
             host, v6 ? "]" : "", ts_http_port(srv->http));
    struct ts_error err;
    if (write_file_0600(path, text, &err) != TS_OK)
        ts_log_warn("%s", err.message);
}

static enum ts_err start(struct ts_server *srv, struct ts_error *err)
{
    enum ts_err e = TS_OK;
    /* the HTTPS files first: a wrong one is said at once, before the
     * database starts */
    if (srv->cfg.tls_cert != NULL || srv->cfg.tls_key != NULL) {
        e = ts_http_tls_load(srv->cfg.tls_cert, srv->cfg.tls_key, srv->cfg.tls_client_ca, &srv->tls,
                             err);
        if (e != TS_OK)
            return e;
    } else if (srv->cfg.tls_client_ca != NULL) {
        return ts_error_set(err, TS_ERR_CONFIG,
                            "--tls-client-ca needs HTTPS: give --tls-cert and --tls-key too");
    }
    e = prepare_data_dir(srv->cfg.data_dir, err);
    if (e != TS_OK)
        return e;
    const char *conninfo = srv->cfg.database;
    if (conninfo == NULL) {
        e = ts_pgembed_start(srv->cfg.data_dir, srv->cfg.pg_bindir, &srv->pg, err);
        if (e != TS_OK)
            return e;
        conninfo = ts_pgembed_conninfo(srv->pg);
        e = ts_pgembed_keep_alive(srv->pg, err);
        if (e != TS_OK)
            return e;
    }
    srv->conninfo = strdup(conninfo);
    if (srv->conninfo == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    e = ts_db_open(conninfo, (int)srv->cfg.db_pool, &srv->db, err);
    if (e != TS_OK)
        return e;
    struct ts_dbconn *c = ts_db_acquire(srv->db, 30000, err);
    if (c == NULL)
        return err->code;
    int applied = 0;
    e = ts_migrate_run(c, &applied, err);
    if (e == TS_OK)
        e = bootstrap_admin(srv, c, err);
    if (e == TS_OK)
        e = ts_store_idempotency_expire(c, srv->cfg.idempotency_ttl, NULL, err);
    ts_db_release(srv->db, c);
    if (e != TS_OK)
        return e;
    srv->metrics = ts_metrics_new();
    if (srv->metrics == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    srv->auth_cache = ts_authcache_new(srv->cfg.auth_cache_ttl);
    static const char *const channels[] = {"tessera_node", "tessera_sched", "tessera_log"};
    e = ts_notify_start(conninfo, channels, 3, &srv->notify, err);
    if (e != TS_OK)
        return e;
    struct ts_http_config hc = {
        .listen = srv->cfg.listen,
        .tls = srv->tls,
        .max_body = (size_t)srv->cfg.max_body,
        .max_connections = (unsigned)srv->cfg.max_connections,
        .connection_timeout = (unsigned)srv->cfg.connection_timeout,
        .dispatch = ts_dispatch,
        .complete = ts_dispatch_complete,
        .cls = srv,
    };
    e = ts_http_start(&hc, &srv->http, err);
    if (e != TS_OK)
        return e;
    e = ts_schedloop_start(srv, err);
    if (e != TS_OK)
        return e;
    e = ts_series_start(srv, err);
    if (e != TS_OK)
        return e;
    write_addr(srv);
    ts_log_info("tessera-server %s listening on %s port=%u scheme=%s client_certificates=%s "
                "database=%s",
                TS_VERSION, srv->cfg.listen, ts_http_port(srv->http), srv->tls ? "https" : "http",
                srv->cfg.tls_client_ca ? "agents" : "no", srv->pg ? "embedded" : "external");
    /* systemd's Type=notify: started means /readyz answers 200 now */
    char state[320];
    snprintf(state, sizeof(state), "READY=1\nSTATUS=listening on %s port %u (%s), %s database",
             srv->cfg.listen, ts_http_port(srv->http), srv->tls ? "https" : "http",
             srv->pg ? "embedded" : "external");
    ts_sdnotify(state);
    return TS_OK;
}

static void stop(struct ts_server *srv)
{
    ts_series_stop(srv);
    ts_schedloop_stop(srv);
    ts_http_stop(srv->http);
    srv->http = NULL;
    ts_notify_stop(srv->notify);
    srv->notify = NULL;
    ts_db_close(srv->db);
    srv->db = NULL;
    ts_pgembed_stop(srv->pg);
    srv->pg = NULL;
    free(srv->conninfo);
    srv->conninfo = NULL;
    ts_metrics_free(srv->metrics);
    srv->metrics = NULL;
    ts_authcache_free(srv->auth_cache);
    srv->auth_cache = NULL;
    ts_http_tls_free(srv->tls);
    srv->tls = NULL;
}

int ts_server_run(struct ts_server *srv)
{
    struct ts_error err;
    ts_error_clear(&err);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    /* every thread started from here on inherits the mask: signals come to sigwait */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    srv->started_at = time(NULL);
    if (start(srv, &err) != TS_OK) {
        ts_log_error("could not start: %s%s%s%s%s", err.message, err.detail[0] ? ": " : "",
                     err.detail, err.hint[0] ? " hint: " : "", err.hint);
        stop(srv);
        return 1;
    }
    int sig = 0;
    sigwait(&set, &sig);
    ts_log_info("stopping signal=%d", sig);
    ts_sdnotify("STOPPING=1");
    atomic_store(&srv->stopping, true);
    stop(srv);
    ts_log_info("stopped");
    return 0;
}
