/*
 * agentplay.c - the agents' side of the integration tests that play them
 * over HTTP: the heartbeat thread and the requests (agentplay.h).
 */
#include "tests/integration/agentplay.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#define HB_NODES_MAX 32

static struct ts_it_server *srv;
static struct ts_client *agent;
static char *agent_token;

/* The heartbeat a real agent sends: every node listed and on reports every
 * 300 ms (to the server at url), in the order the nodes were registered. */
static struct {
    pthread_t thread;
    pthread_mutex_t mu;
    bool stop;
    char nodes[HB_NODES_MAX][16];
    bool on[HB_NODES_MAX];
    int n;
    char url[128];
} hb = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *heartbeat(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&hb.mu);
        bool stop = hb.stop;
        int n = 0;
        char nodes[HB_NODES_MAX][16];
        for (int i = 0; i < hb.n; i++)
            if (hb.on[i])
                memcpy(nodes[n++], hb.nodes[i], sizeof(nodes[0]));
        struct ts_client *c = ts_client_new(hb.url, agent_token);
        pthread_mutex_unlock(&hb.mu);
        if (stop) {
            ts_client_free(c);
            return NULL;
        }
        for (int i = 0; i < n; i++) {
            char path[256];
            snprintf(path, sizeof(path), "/api/v1/nodes/%.15s/report", nodes[i]);
            ts_it_req(c, "POST", path, "{}", NULL, NULL);
        }
        ts_client_free(c);
        usleep(300 * 1000);
    }
}

void ts_ap_heartbeat_to(const struct ts_it_server *s)
{
    pthread_mutex_lock(&hb.mu);
    snprintf(hb.url, sizeof(hb.url), "%s", s->url);
    pthread_mutex_unlock(&hb.mu);
}

void ts_ap_heartbeat(const char *node, bool on)
{
    pthread_mutex_lock(&hb.mu);
    int i = 0;
    while (i < hb.n && strcmp(hb.nodes[i], node) != 0)
        i++;
    if (i == hb.n && i < HB_NODES_MAX)
        snprintf(hb.nodes[hb.n++], sizeof(hb.nodes[0]), "%s", node);
    if (i < hb.n)
        hb.on[i] = on;
    pthread_mutex_unlock(&hb.mu);
    assert_true(i < HB_NODES_MAX);
}

int ts_ap_start(struct ts_it_server *s, const char *const *extra_args)
{
    if (ts_it_start(s, NULL, extra_args) != 0)
        return -1;
    srv = s;
    agent_token = strdup(ts_it_token(s, "agent-1", "agent", NULL));
    agent = ts_it_client(s, agent_token);
    ts_ap_heartbeat_to(s);
    pthread_create(&hb.thread, NULL, heartbeat, NULL);
    ts_ap_call_ok(s->admin, "POST", "/api/v1/departments", "{\"name\": \"research\"}", 201);
    ts_ap_call_ok(s->admin, "POST", "/api/v1/projects",
                  "{\"name\": \"owner\", \"department\": \"research\", \"quota\": {\"gpus\": 2}}",
                  201);
    ts_ap_call_ok(
        s->admin, "POST", "/api/v1/projects",
        "{\"name\": \"borrower\", \"department\": \"research\", \"quota\": {\"gpus\": 0}}", 201);
    return 0;
}

int ts_ap_stop(void)
{
    pthread_mutex_lock(&hb.mu);
    hb.stop = true;
    pthread_mutex_unlock(&hb.mu);
    pthread_join(hb.thread, NULL);
    ts_client_free(agent);
    free(agent_token);
    int rc = ts_it_stop(srv);
    ts_it_cleanup(srv);
    return rc;
}

int ts_ap_teardown(void **state)
{
    (void)state;
    return ts_ap_stop();
}

long long ts_ap_sql_int(const char *sql)
{
    char buf[64];
    if (ts_it_sql(srv, sql, buf, sizeof(buf)) != 0)
        fail_msg("sql failed: %s", sql);
    return atoll(buf);
}

long long ts_ap_sql_count(const char *fmt, ...)
{
    char q[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q, sizeof(q), fmt, ap);
    va_end(ap);
    return ts_ap_sql_int(q);
}

void ts_ap_pg_exec(PGconn *c, const char *q)
{
    PGresult *r = PQexec(c, q);
    int st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", q, PQerrorMessage(c));
    PQclear(r);
}

PGconn *ts_ap_hold_row(long long id)
{
    PGconn *c = PQconnectdb(srv->conninfo);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("could not connect: %s", PQerrorMessage(c));
    char q[256];
    snprintf(q, sizeof(q), "BEGIN; SELECT 1 FROM job WHERE id = %lld FOR UPDATE", id);
    ts_ap_pg_exec(c, q);
    return c;
}

struct ts_client *ts_ap_agent(void)
{
    return agent;
}

const char *ts_ap_agent_token(void)
{
    return agent_token;
}

double ts_ap_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

json_t *ts_ap_get_json(struct ts_client *c, const char *path, long want)
{
    return ts_ap_call(c, "GET", path, NULL, want);
}

json_t *ts_ap_call(struct ts_client *c, const char *method, const char *path, const char *body,
                   long want)
{
    struct ts_response r;
    long st = ts_it_req(c, method, path, body, NULL, &r);
    if (st != want)
        fail_msg("%s %s: %ld, want %ld: %s", method, path, st, want, r.body.data);
    json_t *v = json_incref(r.json);
    ts_response_free(&r);
    return v;
}

void ts_ap_call_ok(struct ts_client *c, const char *method, const char *path, const char *body,
                   long want)
{
    json_decref(ts_ap_call(c, method, path, body, want));
}

void ts_ap_register_node(const char *name, int gpus, const char *extra)
{
    char body[2048], path[128];
    int len = snprintf(body, sizeof(body),
                       "{\"cpu\": 32, \"memory_bytes\": 274877906944, %s%s\"gpus\": [", extra,
                       extra[0] ? ", " : "");
    for (int i = 0; i < gpus; i++)
        len += snprintf(body + len, sizeof(body) - (size_t)len,
                        "%s{\"index\": %d, \"uuid\": \"GPU-%s-%d\", \"model\": \"Sim H100\","
                        " \"memory_bytes\": 85899345920}",
                        i ? "," : "", i, name, i);
    snprintf(body + len, sizeof(body) - (size_t)len, "]}");
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
    ts_ap_call_ok(agent, "PUT", path, body, 200);
    ts_ap_heartbeat(name, true);
}

long long ts_ap_submit(const char *project, const char *name, const char *extra)
{
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"name\": \"%s\", \"project\": \"%s\", \"command\": [\"sleep\", \"100\"],"
             " \"grace_period\": \"5s\"%s%s}",
             name, project, extra[0] ? ", " : "", extra);
    json_t *j = ts_ap_call(srv->admin, "POST", "/api/v1/jobs", body, 201);
    long long id = ts_it_int(j, "id");
    json_decref(j);
    return id;
}

json_t *ts_ap_job(long long id)
{
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    return ts_ap_get_json(srv->admin, path, 200);
}

json_t *ts_ap_wait_state(long long id, const char *state, double secs)
{
    double end = ts_ap_now_s() + secs;
    for (;;) {
        json_t *j = ts_ap_job(id);
        if (strcmp(ts_it_str(j, "state"), state) == 0)
            return j;
        if (ts_ap_now_s() > end)
            fail_msg("job %lld is %s, not %s, after %.0fs", id, ts_it_str(j, "state"), state, secs);
        json_decref(j);
        usleep(100 * 1000);
    }
}

json_t *ts_ap_report(const char *node, const char *jobs_json, const char *extra, long want)
{
    char path[128];
    size_t cap = strlen(jobs_json) + strlen(extra) + 64;
    char *body = malloc(cap);
    assert_non_null(body);
    snprintf(path, sizeof(path), "/api/v1/nodes/%s/report", node);
    snprintf(body, cap, "{\"jobs\": [%s]%s%s}", jobs_json, extra[0] ? ", " : "", extra);
    json_t *v = ts_ap_call(agent, "POST", path, body, want);
    free(body);
    return v;
}

json_t *ts_ap_desired(const char *node, long long generation, const char *wait)
{
    char path[256];
    if (generation >= 0)
        snprintf(path, sizeof(path), "/api/v1/nodes/%s/desired?generation=%lld&wait=%s", node,
                 generation, wait);
    else
        snprintf(path, sizeof(path), "/api/v1/nodes/%s/desired", node);
    return ts_ap_get_json(agent, path, 200);
}

json_t *ts_ap_desired_find(json_t *d, long long id)
{
    json_t *v;
    size_t i;
    json_array_foreach(json_object_get(d, "jobs"), i, v)
        if (ts_it_int(v, "id") == id)
            return v;
    return NULL;
}

json_t *ts_ap_desired_job(const char *node, long long id)
{
    json_t *d = ts_ap_desired(node, -1, NULL);
    json_t *v = json_incref(ts_ap_desired_find(d, id));
    json_decref(d);
    return v;
}

double ts_ap_metric_of(struct ts_it_server *s, const char *name)
{
    struct ts_response r;
    assert_int_equal(ts_it_req(s->admin, "GET", "/metrics", NULL, NULL, &r), 200);
    char want[256];
    snprintf(want, sizeof(want), "\n%s ", name);
    const char *at = strstr(r.body.data, want);
    if (at == NULL)
        fail_msg("/metrics has no %s", name);
    double v = strtod(at + strlen(want), NULL);
    ts_response_free(&r);
    return v;
}

double ts_ap_metric(const char *name)
{
    return ts_ap_metric_of(srv, name);
}

void ts_ap_settle_of(struct ts_it_server *s, double quiet_s)
{
    for (double waited = 0; waited < 30; waited += quiet_s) {
        double c = ts_ap_metric_of(s, "tessera_scheduler_cycles_total");
        usleep((useconds_t)(quiet_s * 1e6));
        if (ts_ap_metric_of(s, "tessera_scheduler_cycles_total") == c)
            return;
    }
    fail_msg("the scheduler loop kept cycling for 30 s with nothing happening");
}

void ts_ap_settle(double quiet_s)
{
    ts_ap_settle_of(srv, quiet_s);
}
