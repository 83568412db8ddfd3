/*
 * e2e.c - end-to-end clusters of a real server and real agents (e2e.h).
 */
#include "tests/e2e/e2e.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/simgpu/state.h"
#include "api/array.h"
#include "tests/integration/pgtest.h"

const char *ts_e2e_bin_dir(void)
{
    const char *d = getenv("TS_BIN_DIR");
    return d != NULL && d[0] != '\0' ? d : "build/bin";
}

double ts_e2e_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double ts_e2e_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void ts_e2e_sleep(double secs)
{
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int ts_e2e_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* ---- requests ---------------------------------------------------------------- */

long ts_e2e_req(struct ts_it_server *s, const char *method, const char *path, const char *body)
{
    struct ts_response r;
    long st = ts_it_req(s->admin, method, path, body, NULL, &r);
    if (st >= 300 || st < 0)
        fprintf(stderr, "e2e: %s %s: %ld %s\n", method, path, st,
                st >= 0 && r.body.data ? r.body.data : "");
    if (st >= 0)
        ts_response_free(&r);
    return st;
}

long ts_e2e_cancel(struct ts_it_server *s, long long id)
{
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    struct ts_response r;
    long st = ts_it_req(s->admin, "DELETE", path, NULL, NULL, &r);
    if (st < 0 || st >= 300)
        fprintf(stderr, "e2e: DELETE %s: %ld %s\n", path, st,
                st >= 0 && r.body.data ? r.body.data : "");
    if (st >= 0)
        ts_response_free(&r);
    return st;
}

json_t *ts_e2e_get(struct ts_it_server *s, const char *fmt, ...)
{
    char path[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    struct ts_response r;
    long st = ts_it_req(s->admin, "GET", path, NULL, NULL, &r);
    if (st < 0) {
        fprintf(stderr, "e2e: GET %s: no answer\n", path);
        return NULL;
    }
    json_t *v = st == 200 ? json_incref(r.json) : NULL;
    if (st != 200)
        fprintf(stderr, "e2e: GET %s: %ld %s\n", path, st, r.body.data ? r.body.data : "");
    ts_response_free(&r);
    return v;
}

int ts_e2e_project(struct ts_it_server *s, const char *name, double quota)
{
    char body[256];
    snprintf(body, sizeof(body),
             "{\"name\": \"%s\", \"department\": \"research\", \"quota\": {\"gpus\": %g}}", name,
             quota);
    return ts_e2e_req(s, "POST", "/api/v1/projects", body) == 201 ? 0 : -1;
}

long long ts_e2e_submit(struct ts_it_server *s, const char *project, const char *name,
                        const char *gpu, const char *grace, const char *extra, const char *script)
{
    json_error_t jerr;
    json_t *req = extra != NULL ? json_loads(extra, 0, &jerr) : json_object();
    json_t *g = json_loads(gpu, 0, &jerr);
    if (req == NULL || g == NULL) {
        fprintf(stderr, "e2e: submit %s: bad JSON: %s\n", name, jerr.text);
        json_decref(req);
        json_decref(g);
        return -1;
    }
    json_object_set_new(req, "name", json_string(name));
    json_object_set_new(req, "project", json_string(project));
    json_object_set_new(req, "command", json_pack("[s, s, s]", "sh", "-c", script));
    json_object_set_new(req, "gpu", g);
    if (grace != NULL)
        json_object_set_new(req, "grace_period", json_string(grace));
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    struct ts_response r;
    long st = ts_it_req(s->admin, "POST", "/api/v1/jobs", body, NULL, &r);
    free(body);
    long long id = -1;
    if (st == 201)
        id = ts_it_int(r.json, "id");
    else
        fprintf(stderr, "e2e: submit %s: %ld %s\n", name, st,
                st >= 0 && r.body.data ? r.body.data : "");
    if (st >= 0)
        ts_response_free(&r);
    return id;
}

json_t *ts_e2e_job(struct ts_it_server *s, long long id)
{
    return ts_e2e_get(s, "/api/v1/jobs/%lld", id);
}

json_t *ts_e2e_wait_state(struct ts_it_server *s, long long id, const char *state, double secs)
{
    double end = ts_e2e_now() + secs;
    char last[64] = "?";
    for (;;) {
        json_t *j = ts_e2e_job(s, id);
        if (j != NULL) {
            if (strcmp(ts_it_str(j, "state"), state) == 0)
                return j;
            snprintf(last, sizeof(last), "%s", ts_it_str(j, "state"));
            json_decref(j);
        }
        if (ts_e2e_now() > end) {
            fprintf(stderr, "e2e: job %lld is %s, not %s, after %.0f s\n", id, last, state, secs);
            return NULL;
        }
        ts_e2e_sleep(0.05);
    }
}

int ts_e2e_wait_node(struct ts_it_server *s, const char *node, const char *state, double secs)
{
    double end = ts_e2e_now() + secs;
    char last[64] = "unknown";
    for (;;) {
        struct ts_response r;
        char path[160];
        snprintf(path, sizeof(path), "/api/v1/nodes/%s", node);
        long st = ts_it_req(s->admin, "GET", path, NULL, NULL, &r);
        if (st == 200)
            snprintf(last, sizeof(last), "%s", ts_it_str(r.json, "state"));
        if (st >= 0)
            ts_response_free(&r);
        if (st == 200 && strcmp(last, state) == 0)
            return 0;
        if (ts_e2e_now() > end) {
            fprintf(stderr, "e2e: node %s is %s, not %s, after %.0f s\n", node, last, state, secs);
            return -1;
        }
        ts_e2e_sleep(0.05);
    }
}

double ts_e2e_parse_time(const char *text)
{
    int y, mo, d, h, mi;
    double sec;
    if (text == NULL || sscanf(text, "%d-%d-%dT%d:%d:%lfZ", &y, &mo, &d, &h, &mi, &sec) != 6)
        return -1;
    struct tm tm = {
        .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi};
    return (double)timegm(&tm) + sec;
}

/* The events of type, oldest first: a new array, or NULL. */
static json_t *events_of(struct ts_it_server *s, long long id, const char *type)
{
    json_t *ev = ts_e2e_get(s, "/api/v1/jobs/%lld/events", id);
    if (ev == NULL)
        return NULL;
    json_t *out = json_array(), *e;
    size_t i;
    json_array_foreach(json_object_get(ev, "events"), i, e) {
        if (strcmp(ts_it_str(e, "type"), type) == 0)
            json_array_append(out, e);
    }
    json_decref(ev);
    return out;
}

int ts_e2e_event_count(struct ts_it_server *s, long long id, const char *type)
{
    json_t *ev = events_of(s, id, type);
    if (ev == NULL)
        return -1;
    int n = (int)json_array_size(ev);
    json_decref(ev);
    return n;
}

bool ts_e2e_event_has(struct ts_it_server *s, long long id, const char *type, const char *text)
{
    json_t *ev = events_of(s, id, type);
    bool found = false;
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        const char *m = ts_it_str(e, "message");
        if (text == NULL || (m != NULL && strstr(m, text) != NULL))
            found = true;
    }
    json_decref(ev);
    return found;
}

bool ts_e2e_wait_event(struct ts_it_server *s, long long id, const char *type, const char *text,
                       double secs)
{
    double until = ts_e2e_now() + secs;
    do {
        if (ts_e2e_event_has(s, id, type, text))
            return true;
        ts_e2e_sleep(0.2);
    } while (ts_e2e_now() < until);
    fprintf(stderr, "e2e: job %lld has no %s event%s%s%s\n", id, type, text ? " with \"" : "",
            text ? text : "", text ? "\"" : "");
    return false;
}

double ts_e2e_event_time(struct ts_it_server *s, long long id, const char *type, int n)
{
    json_t *ev = events_of(s, id, type);
    if (ev == NULL)
        return -1;
    size_t count = json_array_size(ev);
    double t = -1;
    if (count > 0 && (n == -1 || (n >= 1 && (size_t)n <= count)))
        t = ts_e2e_parse_time(
            ts_it_str(json_array_get(ev, n == -1 ? count - 1 : (size_t)n - 1), "at"));
    json_decref(ev);
    return t;
}

/* ---- processes ------------------------------------------------------------ */

/* Field values of /proc/PID/stat: state, process group and start time. */
static int proc_stat(pid_t pid, char *state, pid_t *pgrp, uint64_t *ticks)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    /* after "pid (comm) ": state(3) ppid(4) pgrp(5) ... starttime(22) */
    char st;
    int ppid, pg;
    if (sscanf(p + 2, "%c %d %d", &st, &ppid, &pg) != 3)
        return -1;
    unsigned long long start = 0;
    char *f = p + 2;
    for (int field = 3; field < 22 && f != NULL; field++) {
        f = strchr(f, ' ');
        if (f != NULL)
            f++;
    }
    if (f == NULL || sscanf(f, "%llu", &start) != 1)
        return -1;
    if (state)
        *state = st;
    if (pgrp)
        *pgrp = pg;
    if (ticks)
        *ticks = start;
    return 0;
}

bool ts_e2e_alive(pid_t pid, uint64_t ticks)
{
    char st;
    uint64_t t;
    if (pid <= 0 || proc_stat(pid, &st, NULL, &t) != 0)
        return false;
    return st != 'Z' && st != 'X' && (ticks == 0 || t == ticks);
}

int ts_e2e_group_size(pid_t pgid)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        char st;
        pid_t pg;
        if (proc_stat((pid_t)pid, &st, &pg, NULL) == 0 && pg == pgid && st != 'Z' && st != 'X')
            n++;
    }
    closedir(d);
    return n;
}

bool ts_e2e_wait_group_gone(pid_t pgid, double secs)
{
    double end = ts_e2e_now() + secs;
    while (ts_e2e_group_size(pgid) > 0) {
        if (ts_e2e_now() > end)
            return false;
        ts_e2e_sleep(0.05);
    }
    return true;
}

static int job_proc(const struct ts_e2e_agent *a, long long id, int attempt,
                    struct ts_e2e_proc *out, bool quiet)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/jobs/%lld-%d/job.json", a->data, id, attempt);
    json_error_t jerr;
    json_t *rec = json_load_file(path, 0, &jerr);
    if (rec == NULL) {
        if (!quiet)
            fprintf(stderr, "e2e: %s: %s\n", path, jerr.text);
        return -1;
    }
    out->pid = (pid_t)ts_it_int(rec, "pid");
    out->ticks = (uint64_t)ts_it_int(rec, "start_ticks");
    out->sup_pid = (pid_t)ts_it_int(rec, "supervisor_pid");
    out->sup_ticks = (uint64_t)ts_it_int(rec, "supervisor_start_ticks");
    json_decref(rec);
    return out->pid > 0 ? 0 : -1;
}

int ts_e2e_job_proc(const struct ts_e2e_agent *a, long long id, int attempt,
                    struct ts_e2e_proc *out)
{
    return job_proc(a, id, attempt, out, false);
}

/* ---- files ---------------------------------------------------------------- */

static char *read_or_empty(const char *path)
{
    char *t = ts_pgtest_read_file(path);
    return t != NULL ? t : strdup("");
}

char *ts_e2e_checkpoint_file(struct ts_it_server *s, long long id, const char *name)
{
    json_t *j = ts_e2e_job(s, id);
    char path[700];
    snprintf(path, sizeof(path), "%s/%s",
             j != NULL ? ts_it_str(j, "checkpoint_dir") : "/nonexistent", name);
    json_decref(j);
    return read_or_empty(path);
}

/* Start of line n (from 0) of text, or NULL. */
static const char *line_at(const char *text, int n)
{
    const char *p = text;
    for (int i = 0; i < n && p != NULL; i++) {
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return p != NULL && *p != '\0' ? p : NULL;
}

static int count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; *p != '\0'; p++)
        n += *p == '\n';
    return n;
}

static bool line_value(const char *text, int n, const char *key, char *buf, size_t len)
{
    const char *line = line_at(text, n);
    if (line == NULL)
        return false;
    const char *eol = strchr(line, '\n');
    size_t ll = eol != NULL ? (size_t)(eol - line) : strlen(line);
    size_t kl = strlen(key);
    for (const char *p = line; p < line + ll; p++) {
        if ((p == line || p[-1] == ' ') && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t vl = strcspn(v, " \n");
            snprintf(buf, len, "%.*s", (int)vl, v);
            return true;
        }
    }
    return false;
}

int ts_e2e_starts(const char *text, int n, const char *key, char *buf, size_t len)
{
    if (len > 0)
        buf[0] = '\0';
    line_value(text, n, key, buf, len);
    return count_lines(text);
}

double ts_e2e_line_value(const char *text, int n, const char *key)
{
    char buf[64];
    if (!line_value(text, n, key, buf, sizeof(buf)))
        return -1;
    return strtod(buf, NULL);
}

int ts_e2e_count_lines(const char *text, const char *prefix)
{
    int n = 0;
    size_t pl = strlen(prefix);
    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, prefix, pl) == 0)
            n++;
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return n;
}

char *ts_e2e_output(const struct ts_e2e_agent *a, long long id, int attempt)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/jobs/%lld-%d/output.log", a->data, id, attempt);
    return read_or_empty(path);
}

bool ts_e2e_wait_output(const struct ts_e2e_agent *a, long long id, int attempt, const char *text,
                        double secs)
{
    double end = ts_e2e_now() + secs;
    for (;;) {
        char *out = ts_e2e_output(a, id, attempt);
        bool found = strstr(out, text) != NULL;
        if (!found && ts_e2e_now() > end)
            fprintf(stderr, "e2e: output of job %lld attempt %d on %s lacks \"%s\": %s\n", id,
                    attempt, a->node, text, out);
        free(out);
        if (found)
            return true;
        if (ts_e2e_now() > end)
            return false;
        ts_e2e_sleep(0.1);
    }
}

/* ---- agents --------------------------------------------------------------- */

struct ts_e2e_agent *ts_e2e_agent_named(struct ts_e2e *c, const char *node)
{
    for (int i = 0; i < c->nagents; i++)
        if (strcmp(c->agents[i].node, node) == 0)
            return &c->agents[i];
    return NULL;
}

int ts_e2e_agent_start(struct ts_e2e *c, struct ts_e2e_agent *a)
{
    char exe[512], flags[600];
    snprintf(exe, sizeof(exe), "%s/tessera-agent", ts_e2e_bin_dir());
    ts_e2e_flag(c, "", flags, sizeof(flags)); /* makes the folder */
    snprintf(flags, sizeof(flags), "%s/flags:rw", c->srv.dir);
    const char *argv[48] = {exe, "--server", a->server, "--token-file",
                            a->token_file[0] ? a->token_file : c->token_file, "--node", a->node,
                            "--data-dir", a->data, "--gpus", a->gpus, "--report-interval",
                            c->report_interval[0] ? c->report_interval : "1s", "--poll-wait", "10s",
                            /* sandboxed, as users run them (TS_E2E_SANDBOX=off:
                             * without, for a comparison); the jobs hand the
                             * test flag files in the folder granted them */
                            "--sandbox",
                            getenv("TS_E2E_SANDBOX") != NULL ? getenv("TS_E2E_SANDBOX") : "on",
                            "--job-mount", flags};
    int argc = 19;
    if (a->labels[0] != '\0') {
        argv[argc++] = "--labels";
        argv[argc++] = a->labels;
    }
    char args[sizeof(a->args)];
    snprintf(args, sizeof(args), "%s", a->args);
    char *save = NULL;
    for (char *w = strtok_r(args, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
        if (argc + 1 >= (int)(TS_ARRAY_LEN(argv))) {
            fprintf(stderr, "e2e: agent %s: too many options: %s\n", a->node, a->args);
            return -1;
        }
        argv[argc++] = w;
    }
    argv[argc] = NULL;
    if (mkdir(a->data, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "e2e: mkdir %s: %s\n", a->data, strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(a->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        /* the server's admin token is no business of agents and their jobs */
        unsetenv("TESSERA_ADMIN_TOKEN");
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    a->pid = pid;
    return 0;
}

int ts_e2e_agent_add(struct ts_e2e *c, const char *node, const char *gpus, const char *labels)
{
    return ts_e2e_agent_add_at(c, c->srv.url, node, gpus, labels);
}

int ts_e2e_agent_add_at(struct ts_e2e *c, const char *server, const char *node, const char *gpus,
                        const char *labels)
{
    return ts_e2e_agent_add_args(c, server, node, gpus, labels, NULL);
}

/* Write a new agent token that may act only as node into path (0600), as
 * an operator gives each agent its own. 0 or -1. */
static int write_node_token(struct ts_e2e *c, int i, const char *node, const char *path)
{
    char body[256];
    snprintf(body, sizeof(body),
             "{\"name\": \"agent-%d-%s\", \"role\": \"agent\", \"nodes\": [\"%s\"]}", i, node,
             node);
    struct ts_response r;
    long st = ts_it_req(c->srv.admin, "POST", "/api/v1/tokens", body, NULL, &r);
    const char *token = st == 201 ? ts_it_str(r.json, "token") : "";
    int fd = token[0] ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600) : -1;
    int rc = fd >= 0 && write(fd, token, strlen(token)) == (ssize_t)strlen(token) ? 0 : -1;
    if (fd >= 0)
        close(fd);
    if (rc != 0)
        fprintf(stderr, "e2e: agent %s: could not make its token (status %ld) in %s\n", node, st,
                path);
    ts_response_free(&r);
    return rc;
}

int ts_e2e_agent_add_args(struct ts_e2e *c, const char *server, const char *node, const char *gpus,
                          const char *labels, const char *args)
{
    if (c->nagents >= TS_E2E_AGENTS_MAX ||
        (args != NULL && strlen(args) >= sizeof(c->agents[0].args))) {
        fprintf(stderr, "e2e: agent %s: too many agents, or options too long\n", node);
        return -1;
    }
    int i = c->nagents++;
    struct ts_e2e_agent *a = &c->agents[i];
    memset(a, 0, sizeof(*a));
    snprintf(a->node, sizeof(a->node), "%s", node);
    snprintf(a->gpus, sizeof(a->gpus), "%s", gpus);
    snprintf(a->labels, sizeof(a->labels), "%s", labels != NULL ? labels : "");
    snprintf(a->server, sizeof(a->server), "%s", server);
    snprintf(a->args, sizeof(a->args), "%s", args != NULL ? args : "");
    char base[320]; /* a copy: GCC cannot tell that a and c->srv do not overlap */
    snprintf(base, sizeof(base), "%s/agent-%s", c->srv.dir, node);
    snprintf(a->data, sizeof(a->data), "%s", base);
    snprintf(a->log, sizeof(a->log), "%s.log", base);
    snprintf(a->token_file, sizeof(a->token_file), "%s.token", base);
    if (write_node_token(c, i, node, a->token_file) != 0)
        return -1;
    return ts_e2e_agent_start(c, a) == 0 ? i : -1;
}

int ts_e2e_agent_signal(struct ts_e2e_agent *a, int sig)
{
    if (a->pid <= 0)
        return -1;
    kill(a->pid, sig);
    double end = ts_e2e_now() + 20;
    int st = -1;
    while (ts_e2e_now() < end) {
        if (waitpid(a->pid, &st, WNOHANG) == a->pid) {
            a->pid = 0;
            return st;
        }
        ts_e2e_sleep(0.02);
    }
    kill(a->pid, SIGKILL);
    waitpid(a->pid, NULL, 0);
    a->pid = 0;
    return -1;
}

void ts_e2e_agent_kill_jobs(const struct ts_e2e_agent *a)
{
    char dir[500];
    snprintf(dir, sizeof(dir), "%s/jobs", a->data);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        long long id;
        int attempt;
        if (sscanf(de->d_name, "%lld-%d", &id, &attempt) != 2)
            continue;
        struct ts_e2e_proc p;
        if (job_proc(a, id, attempt, &p, true) != 0)
            continue;
        /* the group by its leader's id, even when the leader is gone */
        if (ts_e2e_group_size(p.pid) > 0)
            kill(-p.pid, SIGKILL);
        if (ts_e2e_alive(p.sup_pid, p.sup_ticks))
            kill(p.sup_pid, SIGKILL);
        ts_e2e_wait_group_gone(p.pid, 5);
    }
    closedir(d);
}

bool ts_e2e_log_has(const char *path, const char *text)
{
    char *log = ts_pgtest_read_file(path);
    bool found = log != NULL && strstr(log, text) != NULL;
    free(log);
    return found;
}

/* ---- the cluster ---------------------------------------------------------- */

int ts_e2e_start(struct ts_e2e *c, const char *const *server_args)
{
    char interval[sizeof(c->report_interval)];
    snprintf(interval, sizeof(interval), "%s", c->report_interval);
    memset(c, 0, sizeof(*c));
    snprintf(c->report_interval, sizeof(c->report_interval), "%s", interval);
    if (ts_it_start(&c->srv, NULL, server_args) != 0)
        return -1;
    snprintf(c->token_file, sizeof(c->token_file), "%s/agent.token", c->srv.dir);
    const char *token = ts_it_token(&c->srv, "agents", "agent", NULL);
    int fd = open(c->token_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (token[0] == '\0' || fd < 0 || write(fd, token, strlen(token)) != (ssize_t)strlen(token)) {
        fprintf(stderr, "e2e: could not write %s\n", c->token_file);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    if (ts_e2e_req(&c->srv, "POST", "/api/v1/departments", "{\"name\": \"research\"}") != 201)
        return -1;
    return 0;
}

/* Print the end of a log; true when it holds a sanitizer report. */
static bool check_log(const char *path, bool show)
{
    char *log = ts_pgtest_read_file(path);
    if (log == NULL)
        return false;
    bool bad = strstr(log, "Sanitizer") != NULL || strstr(log, "runtime error:") != NULL;
    if (bad || show) {
        size_t n = strlen(log);
        fprintf(stderr, "---- %s%s (end) ----\n%s\n", path, bad ? " HAS A SANITIZER REPORT" : "",
                n > 4000 && !bad ? log + n - 4000 : log);
    }
    free(log);
    return bad;
}

/* Sanitizer reports in the supervisors' logs of agent a. */
static bool check_supervisors(const struct ts_e2e_agent *a)
{
    char dir[500];
    snprintf(dir, sizeof(dir), "%s/jobs", a->data);
    DIR *d = opendir(dir);
    if (d == NULL)
        return false;
    bool bad = false;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[800];
        snprintf(path, sizeof(path), "%s/%s/supervisor.log", dir, de->d_name);
        bad |= check_log(path, false);
    }
    closedir(d);
    return bad;
}

int ts_e2e_stop(struct ts_e2e *c)
{
    int rc = 0;
    for (int i = 0; i < c->nagents; i++) {
        struct ts_e2e_agent *a = &c->agents[i];
        if (a->pid > 0) {
            int st = ts_e2e_agent_signal(a, SIGTERM);
            if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                fprintf(stderr, "e2e: agent %s did not exit 0 on SIGTERM (status %d)\n", a->node,
                        st);
                rc = -1;
            }
        }
    }
    for (int i = 0; i < c->nagents; i++) {
        ts_e2e_agent_kill_jobs(&c->agents[i]);
        if (check_log(c->agents[i].log, !c->passed) || check_supervisors(&c->agents[i]))
            rc = -1;
    }
    if (c->replica.dir[0] != '\0') {
        char path[300];
        snprintf(path, sizeof(path), "%s/server.log", c->replica.dir);
        check_log(path, !c->passed);
        if (ts_it_stop(&c->replica) != 0)
            rc = -1;
        ts_it_cleanup(&c->replica);
    }
    if (c->srv.dir[0] != '\0') {
        char path[300];
        snprintf(path, sizeof(path), "%s/server.log", c->srv.dir);
        check_log(path, !c->passed);
        bool crashed = c->srv.pid <= 0;
        if (ts_it_stop(&c->srv) != 0)
            rc = -1;
        /* a server stopped with SIGTERM stops its PostgreSQL; one left
         * crashed by a test leaves it to ts_it_cleanup */
        if (!crashed && ts_pgtest_leftovers(c->srv.dir) != 0) {
            fprintf(stderr, "e2e: PostgreSQL processes of %s are left\n", c->srv.dir);
            rc = -1;
        }
        ts_it_cleanup(&c->srv);
    }
    return rc;
}

int ts_e2e_setup(void **state, const char *const *server_args,
                 const struct ts_e2e_project_spec *projects, const struct ts_e2e_agent_spec *agents)
{
    int rc = -1;
    struct ts_e2e *c = calloc(1, sizeof(*c));
    *state = c;
    if (c == NULL || ts_e2e_start(c, server_args) != 0)
        goto out;
    for (size_t i = 0; projects != NULL && projects[i].name != NULL; i++)
        if (ts_e2e_project(&c->srv, projects[i].name, projects[i].quota) != 0)
            goto out;
    for (size_t i = 0; agents != NULL && agents[i].node != NULL; i++)
        if (ts_e2e_agent_add_args(c, c->srv.url, agents[i].node, agents[i].gpus, agents[i].labels,
                                  agents[i].args) < 0)
            goto out;
    for (size_t i = 0; agents != NULL && agents[i].node != NULL; i++)
        if (ts_e2e_wait_node(&c->srv, agents[i].node, "ready", 30) != 0)
            goto out;
    rc = 0;
out:
    if (rc != 0) {
        if (c != NULL)
            ts_e2e_stop(c);
        free(c);
        *state = NULL;
    }
    return rc;
}

int ts_e2e_teardown(void **state)
{
    struct ts_e2e *c = *state;
    int rc = ts_e2e_stop(c);
    free(c);
    return rc;
}

/* ---- job programs and flag files ------------------------------------------ */

const char *ts_e2e_cuda_job(void)
{
    static char path[1024];
    const char *env = getenv("TS_CUDA_JOB");
    if (env != NULL && *env != '\0')
        return env;
    snprintf(path, sizeof(path), "%s/../tests/cuda_job", ts_e2e_bin_dir());
    return path;
}

const char *ts_e2e_flag(const struct ts_e2e *c, const char *name, char *buf, size_t len)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/flags", c->srv.dir);
    /* sandboxed jobs write here as the job user: open to all, like /tmp */
    if (mkdir(dir, 01777) == 0)
        chmod(dir, 01777);
    snprintf(buf, len, "%s/%s", dir, name);
    return buf;
}

void ts_e2e_flag_set(const struct ts_e2e *c, const char *name)
{
    char path[600];
    int fd = open(ts_e2e_flag(c, name, path, sizeof(path)), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
}

bool ts_e2e_flag_wait(const struct ts_e2e *c, const char *name, double secs)
{
    char path[600];
    ts_e2e_flag(c, name, path, sizeof(path));
    double until = ts_e2e_now() + secs;
    while (access(path, F_OK) != 0) {
        if (ts_e2e_now() >= until) {
            fprintf(stderr, "e2e: no flag %s after %.0f s\n", name, secs);
            return false;
        }
        ts_e2e_sleep(0.05);
    }
    return true;
}

const char *ts_e2e_cuda_script(const struct ts_e2e *c, char *buf, size_t len, const char *steps)
{
    size_t at = (size_t)snprintf(buf, len, "exec %s ", ts_e2e_cuda_job());
    for (const char *p = steps; *p && at + 1 < len; p++) {
        if (*p != '@') {
            buf[at++] = *p;
            continue;
        }
        char name[64], path[600];
        size_t n = 0;
        while (p[1] && p[1] != ' ' && n + 1 < sizeof(name))
            name[n++] = *++p;
        name[n] = '\0';
        at += (size_t)snprintf(buf + at, len - at, "%s", ts_e2e_flag(c, name, path, sizeof(path)));
    }
    buf[at < len ? at : len - 1] = '\0';
    return buf;
}

long long ts_e2e_gpu_used(const struct ts_e2e_agent *a, unsigned index)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/simgpu", a->data);
    struct ts_simgpu_dev dev;
    if (ts_simgpu_open(dir, index, &dev) != 0)
        return -1;
    ts_simgpu_lock(&dev);
    ts_simgpu_reap(&dev); /* processes that have exited hold nothing */
    long long used = (long long)atomic_load(&dev.st->used_bytes);
    ts_simgpu_unlock(&dev);
    ts_simgpu_close(&dev);
    return used;
}
