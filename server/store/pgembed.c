/*
 * pgembed.c - the embedded default database: a private PostgreSQL cluster in
 * DIR/pg, reachable only through a unix socket in DIR/pg/run.
 *
 * Layout: DIR/pg/data (the cluster), DIR/pg/run (the socket), DIR/pg/log
 * (postgresql.log, initdb.log, pg_ctl.log), DIR/pg/start.lock (held while a
 * server starts or stops the cluster). DIR/pg and its folders are mode 0700,
 * owned by the user PostgreSQL runs as, so trust authentication on the socket
 * lets in only that user and root.
 *
 * initdb writes into DIR/pg/data.initdb, which is renamed to DIR/pg/data once
 * complete: a crash during initdb never leaves a half-made cluster behind.
 * Settings live in DIR/pg/data/tessera.conf, rewritten at every start and
 * included from postgresql.conf; ALTER SYSTEM still overrides them. Paths are
 * never passed with pg_ctl -o, which pg_ctl hands to a shell.
 *
 * Programs run through fork and execve with an argument vector (no shell of
 * ours), as the unprivileged user when we are root, with the locale forced to
 * C and every inherited descriptor above stderr closed, so the long-lived
 * postmaster holds none of the server's sockets.
 */
#include "server/store/pgembed.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/clock.h"
#include "api/files.h"
#include "api/log.h"
#include "server/store/pgembed_int.h"

/* ---- the cluster ---- */

/* Quote a libpq conninfo value. */
static void conn_quote(char *out, size_t len, const char *v)
{
    size_t o = 0;
    if (len < 3)
        return;
    out[o++] = '\'';
    for (const char *p = v; *p && o + 3 < len; p++) {
        if (*p == '\'' || *p == '\\')
            out[o++] = '\\';
        out[o++] = *p;
    }
    out[o++] = '\'';
    out[o] = '\0';
}

static enum ts_err tool_error(struct ts_error *err, const char *what, const char *prog, int status,
                              const char *logpath)
{
    char how[64];
    ts_pgembed_describe_status(status, how, sizeof(how));
    ts_error_set(err, TS_ERR_DATABASE, "could not %s: %s %s", what, prog, how);
    if (err != NULL)
        ts_pgembed_log_tail(logpath, err->detail, sizeof(err->detail));
    ts_error_hint(err, "see %s", logpath);
    ts_log_error("could not %s: %s %s log=%s", what, prog, how, logpath);
    return TS_ERR_DATABASE;
}

static enum ts_err pg_ctl(const struct ts_pgembed *pg, const char *action, int *status,
                          struct ts_error *err)
{
    char prog[PATH_MAX + 16], outlog[PATH_MAX + 16];
    snprintf(prog, sizeof(prog), "%s/pg_ctl", pg->bindir);
    snprintf(outlog, sizeof(outlog), "%s/pg_ctl.log", pg->logdir);
    char *start[] = {
        prog, "start", "-w", "-t", "60", "-D", (char *)pg->data, "-l", (char *)pg->logfile, NULL};
    char *stop[] = {prog, "stop", "-w", "-t", "60", "-D", (char *)pg->data, "-m", "fast", NULL};
    return ts_pgembed_run_prog(pg, strcmp(action, "start") == 0 ? start : stop, outlog, status,
                               err);
}

static const char TESSERA_CONF_HEAD[] =
    "# Written by tessera-server at every start of its embedded PostgreSQL:\n"
    "# edits here are lost. Use ALTER SYSTEM (postgresql.auto.conf) to override.\n"
    "listen_addresses = ''\n"
    "port = " PG_PORT "\n"
    "unix_socket_permissions = 0700\n"
    "max_connections = 100\n"
    "shared_buffers = 128MB\n"
    "fsync = on\n"
    "synchronous_commit = on\n"
    "full_page_writes = on\n"
    "logging_collector = off\n"
    "log_destination = 'stderr'\n"
    "log_line_prefix = '%m [%p] '\n"
    "log_timezone = 'UTC'\n"
    "timezone = 'UTC'\n"
    "lc_messages = 'C'\n";

static enum ts_err write_settings(const struct ts_pgembed *pg, const char *datadir,
                                  struct ts_error *err)
{
    char text[sizeof(TESSERA_CONF_HEAD) + 2 * PATH_MAX + 64];
    size_t o =
        (size_t)snprintf(text, sizeof(text), "%sunix_socket_directories = '", TESSERA_CONF_HEAD);
    for (const char *p = pg->run; *p && o + 4 < sizeof(text); p++) {
        if (*p == '\'')
            text[o++] = '\'';
        text[o++] = *p;
    }
    snprintf(text + o, sizeof(text) - o, "'\n");
    char path[PATH_MAX];
    enum ts_err e = ts_pgembed_join(path, sizeof(path), datadir, "/tessera.conf", err);
    if (e != TS_OK)
        return e;
    e = ts_pgembed_write_file(pg, path, text, err);
    if (e != TS_OK)
        return e;
    /* tessera.conf must exist: "include", not include_if_exists */
    e = ts_pgembed_join(path, sizeof(path), datadir, "/postgresql.conf", err);
    if (e == TS_OK && !ts_pgembed_file_contains(path, "include = 'tessera.conf'"))
        e = ts_pgembed_append_file(path,
                                   "\n# tessera-server settings, rewritten at every start\n"
                                   "include = 'tessera.conf'\n",
                                   err);
    return e;
}

/* initdb into DIR/pg/data.initdb, configure, then rename to DIR/pg/data. */
static enum ts_err init_cluster(const struct ts_pgembed *pg, struct ts_error *err)
{
    char tmp[PATH_MAX], path[PATH_MAX], prog[PATH_MAX], outlog[PATH_MAX];
    enum ts_err e = ts_pgembed_join(tmp, sizeof(tmp), pg->base, "/data.initdb", err);
    if (e == TS_OK)
        e = ts_pgembed_join(prog, sizeof(prog), pg->bindir, "/initdb", err);
    if (e == TS_OK)
        e = ts_pgembed_join(outlog, sizeof(outlog), pg->logdir, "/initdb.log", err);
    if (e != TS_OK)
        return e;
    if (access(tmp, F_OK) == 0) {
        ts_log_warn("removing an unfinished initdb path=%s", tmp);
        if (ts_files_remove_tree(tmp) != 0)
            return ts_pgembed_io_error(err, "remove", tmp);
    }
    char *argv[] = {prog,           "-D", tmp,    "-U",         PG_USER,
                    "--auth=trust", "-E", "UTF8", "--locale=C", NULL};
    int status = 0;
    ts_log_info("initializing PostgreSQL cluster data=%s user=%s", pg->data, pg->ru.name);
    e = ts_pgembed_run_prog(pg, argv, outlog, &status, err);
    if (e != TS_OK)
        return e;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ts_files_remove_tree(tmp);
        return tool_error(err, "initialize PostgreSQL", "initdb", status, outlog);
    }
    /* only the socket, which only the PostgreSQL user and root can reach */
    e = ts_pgembed_join(path, sizeof(path), tmp, "/pg_hba.conf", err);
    if (e == TS_OK)
        e = ts_pgembed_write_file(
            pg, path,
            "# Written by tessera-server: local socket connections only. The socket\n"
            "# folder is closed to everyone but the PostgreSQL user (and root).\n"
            "# TYPE  DATABASE  USER  METHOD\n"
            "local   all       all   trust\n",
            err);
    if (e == TS_OK)
        e = write_settings(pg, tmp, err);
    if (e != TS_OK)
        return e;
    if (ts_pgembed_is_dir(pg->data) && rmdir(pg->data) != 0)
        return ts_pgembed_io_error(err, "replace", pg->data);
    if (rename(tmp, pg->data) != 0)
        return ts_pgembed_io_error(err, "rename", tmp);
    int dfd = open(pg->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd) != 0)
            ts_log_warn("could not fsync folder path=%s", pg->base);
        close(dfd);
    }
    return TS_OK;
}

/* Wait until a running postmaster answers; false when it went away or stays silent. */
static bool wait_ready(const struct ts_pgembed *pg, long timeout_ms, bool *gone)
{
    char pidfile[PATH_MAX + 32];
    snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid", pg->data);
    long deadline = ts_now_ms() + timeout_ms;
    *gone = false;
    for (;;) {
        if (PQping(pg->admin) == PQPING_OK)
            return true;
        long pid;
        if (ts_pgembed_lock_holder(pidfile, pg->data, &pid) != HOLDER_RUNNING) {
            *gone = true;
            return false;
        }
        if (ts_now_ms() >= deadline)
            return false;
        ts_sleep_ms(100);
    }
}

static enum ts_err ensure_database(const struct ts_pgembed *pg, struct ts_error *err)
{
    enum ts_err e = TS_OK;
    PGresult *res = NULL;
    PGconn *c = PQconnectdb(pg->admin);
    if (c == NULL || PQstatus(c) != CONNECTION_OK) {
        ts_error_set(err, TS_ERR_DATABASE, "could not connect to the embedded PostgreSQL");
        if (err != NULL && c != NULL)
            snprintf(err->detail, sizeof(err->detail), "%s", PQerrorMessage(c));
        e = TS_ERR_DATABASE;
        goto out;
    }
    res = PQexec(c, "SELECT 1 FROM pg_database WHERE datname = '" PG_DBNAME "'");
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        e = ts_error_set(err, TS_ERR_DATABASE, "could not list databases: %s",
                         PQresultErrorMessage(res));
        goto out;
    }
    if (PQntuples(res) == 1)
        goto out;
    PQclear(res);
    res = PQexec(c, "CREATE DATABASE " PG_DBNAME);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        if (state != NULL && strcmp(state, "42P04") == 0) /* created meanwhile */
            goto out;
        e = ts_error_set(err, TS_ERR_DATABASE, "could not create database \"" PG_DBNAME "\"");
        if (err != NULL)
            snprintf(err->detail, sizeof(err->detail), "%s", PQresultErrorMessage(res));
        goto out;
    }
    ts_log_info("created database name=" PG_DBNAME);
out:
    PQclear(res);
    PQfinish(c);
    return e;
}

/* Characters pg_ctl would hand to its shell inside double quotes. */
static bool path_is_safe(const char *p)
{
    for (; *p; p++)
        if (*p == '"' || *p == '$' || *p == '`' || *p == '\\' || (unsigned char)*p < 0x20 ||
            *p == 0x7f)
            return false;
    return true;
}

static enum ts_err set_paths(struct ts_pgembed *pg, const char *data_dir, struct ts_error *err)
{
    char abs[PATH_MAX];
    enum ts_err e = ts_pgembed_mkdir_p(data_dir, geteuid() == 0 ? 0711 : 0700, err);
    if (e != TS_OK)
        return e;
    if (realpath(data_dir, abs) == NULL)
        return ts_pgembed_io_error(err, "resolve", data_dir);
    if (!path_is_safe(abs)) {
        ts_error_set(err, TS_ERR_CONFIG,
                     "data folder path cannot hold \", $, `, \\ or control characters: %s", abs);
        ts_error_hint(err, "pg_ctl passes the path through a shell; choose a plainer path");
        return TS_ERR_CONFIG;
    }
    const size_t sun_max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
    size_t socklen = strlen(abs) + strlen("/pg/run" SOCKET_NAME);
    if (socklen > sun_max) {
        ts_error_set(err, TS_ERR_CONFIG,
                     "data folder path is too long for a unix socket: %zu bytes, limit %zu: %s",
                     strlen(abs), sun_max - strlen("/pg/run" SOCKET_NAME), abs);
        ts_error_hint(err, "the socket lives in DIR/pg/run; choose a shorter data folder");
        return TS_ERR_CONFIG;
    }
    snprintf(pg->dir, sizeof(pg->dir), "%s", abs);
    if ((e = ts_pgembed_join(pg->base, sizeof(pg->base), abs, "/pg", err)) != TS_OK ||
        (e = ts_pgembed_join(pg->data, sizeof(pg->data), pg->base, "/data", err)) != TS_OK ||
        (e = ts_pgembed_join(pg->run, sizeof(pg->run), pg->base, "/run", err)) != TS_OK ||
        (e = ts_pgembed_join(pg->logdir, sizeof(pg->logdir), pg->base, "/log", err)) != TS_OK ||
        (e = ts_pgembed_join(pg->logfile, sizeof(pg->logfile), pg->logdir, "/postgresql.log",
                             err)) != TS_OK)
        return e;
    char host[PATH_MAX + 8];
    conn_quote(host, sizeof(host), pg->run);
    snprintf(pg->conninfo, sizeof(pg->conninfo),
             "host=%s port=" PG_PORT " user=" PG_USER " dbname=" PG_DBNAME, host);
    snprintf(pg->admin, sizeof(pg->admin),
             "host=%s port=" PG_PORT " user=" PG_USER " dbname=postgres connect_timeout=5", host);
    return TS_OK;
}

static int lock_start(const struct ts_pgembed *pg, struct ts_error *err)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/start.lock", pg->base);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        ts_pgembed_io_error(err, "open", path);
        return -1;
    }
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            ts_pgembed_io_error(err, "lock", path);
            close(fd);
            return -1;
        }
    }
    return fd;
}

static long postmaster_pid(const struct ts_pgembed *pg)
{
    char path[PATH_MAX + 32];
    long pid = 0;
    snprintf(path, sizeof(path), "%s/postmaster.pid", pg->data);
    ts_pgembed_read_lock_pid(path, &pid);
    return pid;
}

/* Start the cluster (after clearing what a crash left) and wait until it answers. */
static enum ts_err start_cluster(const struct ts_pgembed *pg, struct ts_error *err)
{
    char pidfile[PATH_MAX + 32], socklock[PATH_MAX + 32];
    snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid", pg->data);
    snprintf(socklock, sizeof(socklock), "%s" SOCKET_NAME ".lock", pg->run);

    /* orphaned backends of a killed postmaster keep its shared memory: wait for them */
    int shmid = ts_pgembed_lock_shmid(pidfile);
    ts_pgembed_clear_stale_lock(pg, pidfile);
    ts_pgembed_clear_stale_lock(pg, socklock);
    long deadline = ts_now_ms() + SHM_WAIT_MS;
    bool waited = false;
    while (ts_pgembed_shm_attached(shmid) && ts_now_ms() < deadline) {
        waited = true;
        ts_sleep_ms(100);
    }
    if (waited)
        ts_log_info("waited for processes of a stopped PostgreSQL to exit shmid=%d", shmid);

    enum ts_err e = write_settings(pg, pg->data, err);
    if (e != TS_OK)
        return e;
    int status = 0;
    e = pg_ctl(pg, "start", &status, err);
    if (e != TS_OK)
        return e;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return tool_error(err, "start PostgreSQL", "pg_ctl", status, pg->logfile);
    bool gone;
    if (!wait_ready(pg, READY_WAIT_MS, &gone)) {
        ts_error_set(err, TS_ERR_DATABASE, "PostgreSQL started but does not answer on %s", pg->run);
        if (err != NULL)
            ts_pgembed_log_tail(pg->logfile, err->detail, sizeof(err->detail));
        ts_error_hint(err, "see %s", pg->logfile);
        return TS_ERR_DATABASE;
    }
    ts_log_info("started PostgreSQL pid=%ld data=%s socket=%s", postmaster_pid(pg), pg->data,
                pg->run);
    return TS_OK;
}

static void stop_cluster(const struct ts_pgembed *pg)
{
    int status = 0;
    struct ts_error err;
    ts_error_clear(&err);
    long pid = postmaster_pid(pg);
    if (pg_ctl(pg, "stop", &status, &err) != TS_OK) {
        ts_log_error("could not stop PostgreSQL: %s", err.message);
        return;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[64];
        ts_pgembed_describe_status(status, how, sizeof(how));
        ts_log_error("could not stop PostgreSQL: pg_ctl %s log=%s/pg_ctl.log", how, pg->logdir);
        return;
    }
    ts_log_info("stopped PostgreSQL pid=%ld data=%s", pid, pg->data);
}

enum ts_err ts_pgembed_start(const char *data_dir, const char *pg_bindir, struct ts_pgembed **out,
                             struct ts_error *err)
{
    enum ts_err e = TS_OK;
    int lockfd = -1;
    bool started = false;
    struct ts_pgembed *pg = NULL;
    *out = NULL;
    if (data_dir == NULL || data_dir[0] == '\0')
        return ts_error_set(err, TS_ERR_CONFIG,
                            "data folder must be given for the embedded PostgreSQL");
    pg = calloc(1, sizeof(*pg));
    if (pg == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");

    if ((e = set_paths(pg, data_dir, err)) != TS_OK ||
        (e = ts_pgembed_find_bindir(pg, pg_bindir, err)) != TS_OK)
        goto out;
    if (mkdir(pg->base, 0700) != 0 && errno != EEXIST) {
        e = ts_pgembed_io_error(err, "create folder", pg->base);
        goto out;
    }
    if ((lockfd = lock_start(pg, err)) < 0) {
        e = TS_ERR_IO;
        goto out;
    }
    if ((e = ts_pgembed_choose_runas(pg, err)) != TS_OK ||
        (e = ts_pgembed_check_reachable(pg, pg->dir, err)) != TS_OK ||
        (e = ts_pgembed_own_dir(pg, pg->base, err)) != TS_OK ||
        (e = ts_pgembed_own_dir(pg, pg->run, err)) != TS_OK ||
        (e = ts_pgembed_own_dir(pg, pg->logdir, err)) != TS_OK)
        goto out;

    if (ts_pgembed_file_exists(pg->data, "PG_VERSION")) {
        char pidfile[PATH_MAX + 32];
        long pid;
        snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid", pg->data);
        if (ts_pgembed_lock_holder(pidfile, pg->data, &pid) == HOLDER_RUNNING) {
            bool gone;
            if (wait_ready(pg, READY_WAIT_MS, &gone)) {
                ts_log_info("adopted running PostgreSQL pid=%ld data=%s", pid, pg->data);
                goto ready;
            }
            if (!gone) {
                ts_error_set(err, TS_ERR_DATABASE,
                             "PostgreSQL (pid %ld) is running in %s but does not answer on %s", pid,
                             pg->data, pg->run);
                ts_error_hint(err, "see %s", pg->logfile);
                e = TS_ERR_DATABASE;
                goto out;
            }
            /* it went away while we waited: start it again below */
        }
    } else {
        if (ts_pgembed_is_dir(pg->data) && !ts_pgembed_dir_is_empty(pg->data)) {
            ts_error_set(err, TS_ERR_CONFIG, "\"%s\" exists but holds no PostgreSQL cluster",
                         pg->data);
            ts_error_hint(err, "move it away; tessera-server creates the cluster there");
            e = TS_ERR_CONFIG;
            goto out;
        }
        if ((e = init_cluster(pg, err)) != TS_OK)
            goto out;
    }
    if ((e = start_cluster(pg, err)) != TS_OK)
        goto out;
    started = true;
ready:
    if ((e = ensure_database(pg, err)) != TS_OK)
        goto out;
    *out = pg;
out:
    if (lockfd >= 0)
        close(lockfd);
    if (e != TS_OK) {
        if (started)
            stop_cluster(pg);
        free(pg);
    }
    return e;
}

const char *ts_pgembed_conninfo(const struct ts_pgembed *pg)
{
    return pg->conninfo;
}

/* Start the cluster again when its postmaster is gone (killed, crashed, out
 * of memory); nothing when it runs. Under the start lock, like a start. */
static enum ts_err revive(struct ts_pgembed *pg, bool *restarted, struct ts_error *err)
{
    char pidfile[PATH_MAX + 32];
    long pid;
    *restarted = false;
    snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid", pg->data);
    if (ts_pgembed_lock_holder(pidfile, pg->data, &pid) == HOLDER_RUNNING)
        return TS_OK;
    int lockfd = lock_start(pg, err);
    if (lockfd < 0)
        return TS_ERR_IO;
    enum ts_err e = TS_OK;
    if (ts_pgembed_lock_holder(pidfile, pg->data, &pid) != HOLDER_RUNNING) {
        e = start_cluster(pg, err);
        *restarted = e == TS_OK;
    }
    close(lockfd);
    return e;
}

static void *keeper_main(void *arg)
{
    struct ts_pgembed *pg = arg;
    long failing_since = 0, warned = 0;
    pthread_mutex_lock(&pg->mu);
    while (!pg->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += KEEP_ALIVE_S;
        pthread_cond_timedwait(&pg->cv, &pg->mu, &ts);
        if (pg->stop)
            break;
        pthread_mutex_unlock(&pg->mu);
        struct ts_error err;
        ts_error_clear(&err);
        bool restarted = false;
        long now = ts_now_ms();
        if (revive(pg, &restarted, &err) != TS_OK) {
            if (failing_since == 0)
                failing_since = now;
            if (now - warned >= 30000) { /* once in 30 s while it keeps failing */
                warned = now;
                ts_log_error("PostgreSQL is not running and could not be started again (for %lld "
                             "s): %s%s%s",
                             (long long)(now - failing_since) / 1000, err.message,
                             err.detail[0] ? ": " : "", err.detail);
            }
        } else if (restarted) {
            ts_log_warn("PostgreSQL had stopped (its postmaster was gone); started it again "
                        "data=%s",
                        pg->data);
            failing_since = warned = 0;
        }
        pthread_mutex_lock(&pg->mu);
    }
    pthread_mutex_unlock(&pg->mu);
    return NULL;
}

enum ts_err ts_pgembed_keep_alive(struct ts_pgembed *pg, struct ts_error *err)
{
    if (pg->keeping)
        return TS_OK;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&pg->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&pg->mu, NULL);
    pg->stop = false;
    if (pthread_create(&pg->keeper, NULL, keeper_main, pg) != 0) {
        pthread_cond_destroy(&pg->cv);
        pthread_mutex_destroy(&pg->mu);
        return ts_error_set(err, TS_ERR_INTERNAL, "cannot start the PostgreSQL keep-alive thread");
    }
    pg->keeping = true;
    return TS_OK;
}

void ts_pgembed_stop(struct ts_pgembed *pg)
{
    if (pg == NULL)
        return;
    if (pg->keeping) { /* first, or it would start the cluster again */
        pthread_mutex_lock(&pg->mu);
        pg->stop = true;
        pthread_cond_signal(&pg->cv);
        pthread_mutex_unlock(&pg->mu);
        pthread_join(pg->keeper, NULL);
        pthread_cond_destroy(&pg->cv);
        pthread_mutex_destroy(&pg->mu);
        pg->keeping = false;
    }
    struct ts_error err;
    int lockfd = lock_start(pg, &err);
    stop_cluster(pg);
    if (lockfd >= 0)
        close(lockfd);
    free(pg);
}
