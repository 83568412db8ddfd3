/*
 * harness.c - start, stop and talk to a real tessera-server for tests.
 */
#include "tests/integration/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/clock.h"

bool ts_it_admin_from_env = true;
struct ts_it_tls ts_it_tls;

/* A client of url with token and the harness's TLS files. */
static struct ts_client *client_new(const char *url, const char *token)
{
    struct ts_client *c = ts_client_new(url, token);
    if (c != NULL && ts_client_set_tls(c, ts_it_tls.ca, ts_it_tls.cert, ts_it_tls.key) != 0) {
        ts_client_free(c);
        c = NULL;
    }
    return c;
}

static const char *bin_dir(void)
{
    const char *d = getenv("TS_BIN_DIR");
    return d ? d : "build/bin";
}

static int read_file(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    return n > 0 ? 0 : -1;
}

int ts_it_start(struct ts_it_server *s, const char *dir, const char *const *extra_args)
{
    memset(s, 0, sizeof(*s));
    if (dir) {
        snprintf(s->dir, sizeof(s->dir), "%s", dir);
    } else {
        snprintf(s->dir, sizeof(s->dir), "/tmp/tessera-it-XXXXXX");
        if (mkdtemp(s->dir) == NULL) {
            perror("mkdtemp");
            return -1;
        }
    }
    char addr_path[300], log_path[300];
    snprintf(addr_path, sizeof(addr_path), "%s/server.addr", s->dir);
    snprintf(log_path, sizeof(log_path), "%s/server.log", s->dir);
    unlink(addr_path);
    char exe[512];
    snprintf(exe, sizeof(exe), "%s/tessera-server", bin_dir());
    const char *argv[32] = {exe, "--data-dir", s->dir, "--listen", "127.0.0.1:0"};
    int argc = 5;
    for (int i = 0; extra_args && extra_args[i] && argc < 30; i++)
        argv[argc++] = extra_args[i];
    argv[argc] = NULL;
    s->pid = fork();
    if (s->pid < 0)
        return -1;
    if (s->pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (ts_it_admin_from_env)
            setenv("TESSERA_ADMIN_TOKEN", TS_IT_ADMIN_TOKEN, 1);
        else
            unsetenv("TESSERA_ADMIN_TOKEN");
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    /* wait for the address file, then for /readyz */
    for (int i = 0; i < 1200; i++) {
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            fprintf(stderr, "harness: tessera-server exited early; its log:\n");
            char cmd[400];
            snprintf(cmd, sizeof(cmd), "tail -n 30 %s >&2", log_path);
            if (system(cmd) != 0)
                fprintf(stderr, "(no log)\n");
            s->pid = 0;
            return -1;
        }
        if (s->url[0] == '\0' && read_file(addr_path, s->url, sizeof(s->url)) != 0) {
            s->url[0] = '\0';
            ts_sleep_ms(50);
            continue;
        }
        if (s->admin == NULL)
            s->admin = client_new(s->url, TS_IT_ADMIN_TOKEN);
        if (ts_it_req(s->admin, "GET", "/readyz", NULL, NULL, NULL) == 200)
            break;
        ts_sleep_ms(50);
    }
    if (s->admin == NULL) {
        fprintf(stderr, "harness: tessera-server did not become ready\n");
        return -1;
    }
    /* with TS_IT_PRISM, everything after this goes through the proxy */
    snprintf(s->direct_url, sizeof(s->direct_url), "%s", s->url);
    int proxied = ts_it_specproxy_start(&s->proxy, s->dir, s->direct_url, s->url, sizeof(s->url));
    if (proxied < 0)
        return -1;
    if (proxied > 0) {
        ts_client_free(s->admin);
        s->admin = client_new(s->url, TS_IT_ADMIN_TOKEN);
    }
    char db[300];
    snprintf(db, sizeof(db), "%s/pg/run", s->dir);
    snprintf(s->conninfo, sizeof(s->conninfo), "host=%s dbname=tessera user=tessera", db);
    return 0;
}

static void wait_exit(struct ts_it_server *s, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return;
        }
        ts_sleep_ms(20);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

/* An ASan/UBSan build of the server reports into its log; a test must fail
 * on it even though every request looked fine. */
static int sanitizer_report(const struct ts_it_server *s)
{
    char path[300], line[1024];
    snprintf(path, sizeof(path), "%s/server.log", s->dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    int found = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, "Sanitizer") || strstr(line, "runtime error:"))
            found = 1;
        if (found)
            fputs(line, stderr);
    }
    fclose(f);
    return found ? -1 : 0;
}

int ts_it_stop(struct ts_it_server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        wait_exit(s, 30000);
    }
    ts_client_free(s->admin);
    s->admin = NULL;
    int violations = ts_it_specproxy_stop(&s->proxy);
    return sanitizer_report(s) != 0 || violations != 0 ? -1 : 0;
}

void ts_it_crash(struct ts_it_server *s)
{
    ts_it_specproxy_stop(&s->proxy);
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        wait_exit(s, 5000);
    }
    ts_client_free(s->admin);
    s->admin = NULL;
}

void ts_it_cleanup(struct ts_it_server *s)
{
    if (s->dir[0] == '\0' || strncmp(s->dir, "/tmp/tessera-it-", 16) != 0)
        return;
    /* a PostgreSQL left by a crash test must not outlive the test */
    char cmd[1200];
    snprintf(cmd, sizeof(cmd),
             "pid=$(head -1 %s/pg/data/postmaster.pid 2>/dev/null) && kill -INT $pid 2>/dev/null;"
             " for i in $(seq 50); do [ -e %s/pg/data/postmaster.pid ] || break; sleep 0.1; done;"
             " rm -rf %s",
             s->dir, s->dir, s->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "harness: could not remove %s\n", s->dir);
}

long ts_it_req(struct ts_client *c, const char *method, const char *path, const char *body,
               const char *const *headers, struct ts_response *out)
{
    struct ts_response tmp = {0};
    struct ts_response *r = out ? out : &tmp;
    struct ts_error err;
    if (ts_client_do(c, method, path, body, body ? strlen(body) : 0, headers, r, &err) != TS_OK)
        return -1;
    long status = r->status;
    if (out == NULL)
        ts_response_free(&tmp);
    return status;
}

struct ts_client *ts_it_client(const struct ts_it_server *s, const char *token)
{
    return client_new(s->url, token);
}

struct ts_client *ts_it_client_direct(const struct ts_it_server *s, const char *token)
{
    return client_new(s->direct_url, token);
}

const char *ts_it_token(struct ts_it_server *s, const char *name, const char *role,
                        const char *projects_json)
{
    static _Thread_local char secret[128];
    char body[1024];
    snprintf(body, sizeof(body), "{\"name\":\"%s\",\"role\":\"%s\"%s%s}", name, role,
             projects_json ? ",\"projects\":" : "", projects_json ? projects_json : "");
    struct ts_response r;
    secret[0] = '\0';
    if (ts_it_req(s->admin, "POST", "/api/v1/tokens", body, NULL, &r) == 201)
        snprintf(secret, sizeof(secret), "%s", ts_it_str(r.json, "token"));
    else
        fprintf(stderr, "harness: token %s: %ld %s\n", name, r.status, r.body.data);
    ts_response_free(&r);
    return secret;
}

int ts_it_sql(const struct ts_it_server *s, const char *sql, char *buf, size_t len)
{
    PGconn *pg = PQconnectdb(s->conninfo);
    int rc = -1;
    if (PQstatus(pg) == CONNECTION_OK) {
        PGresult *res = PQexec(pg, sql);
        /* a test's direct write can meet the scheduler loop's rows in the
         * other order: PostgreSQL ends one side, and the test tries again */
        for (int tries = 0; tries < 5 && PQresultStatus(res) == PGRES_FATAL_ERROR; tries++) {
            const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
            if (state == NULL || (strcmp(state, "40P01") != 0 && strcmp(state, "40001") != 0))
                break;
            PQclear(res);
            usleep(20000);
            res = PQexec(pg, sql);
        }
        if (PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK) {
            rc = 0;
            snprintf(buf, len, "%s",
                     PQntuples(res) > 0 && PQnfields(res) > 0 ? PQgetvalue(res, 0, 0) : "");
        } else {
            fprintf(stderr, "harness: %s: %s", sql, PQerrorMessage(pg));
        }
        PQclear(res);
    } else {
        fprintf(stderr, "harness: %s", PQerrorMessage(pg));
    }
    PQfinish(pg);
    return rc;
}

int ts_it_db_digest(const struct ts_it_server *s, char out[33])
{
    /* every table requests write, every row, in a stable order; last_used_at
     * moves on reads and is left out, and metric_point is the sampler's (it
     * writes on its own clock) */
    static const char sql[] =
        "SELECT md5(string_agg(t, '|' ORDER BY t)) FROM ("
        " SELECT 'department' || d::text AS t FROM department d"
        " UNION ALL SELECT 'project' || p::text FROM project p"
        " UNION ALL SELECT 'token' || row(k.id, k.name, k.role, k.token_sha256)::text"
        "   FROM api_token k"
        " UNION ALL SELECT 'grant' || g::text FROM api_token_project g"
        " UNION ALL SELECT 'job' || j::text FROM job j"
        " UNION ALL SELECT 'event' || e::text FROM job_event e"
        " UNION ALL SELECT 'key' || i::text FROM idempotency_key i"
        " UNION ALL SELECT 'node' || n::text FROM node n"
        " UNION ALL SELECT 'gpu' || g::text FROM gpu g"
        " UNION ALL SELECT 'slot' || s::text FROM job_gpu s"
        " UNION ALL SELECT 'log' || l::text FROM job_log l) all_rows";
    /* the scheduler loop writes pending reasons and shares on its own
     * clock: a digest is taken once two, 50 ms apart, agree (at most 2 s) */
    char prev[33] = "";
    for (int tries = 0; tries < 40; tries++) {
        if (ts_it_sql(s, sql, out, 33) != 0)
            return -1;
        if (strcmp(prev, out) == 0)
            return 0;
        memcpy(prev, out, sizeof(prev));
        usleep(50000);
    }
    return 0;
}

const char *ts_it_str(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

long long ts_it_int(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}
