/*
 * system.c - /healthz, /readyz, /version, /metrics and the OpenAPI document.
 *
 * /metrics shows a project-limited token only its projects' series: every
 * sample with a project="..." label of another project is left out (the
 * cluster, node and GPU series count every project's jobs, without names).
 */
#include <string.h>

#include "api/embedded.h"
#include "server/auth.h"
#include "server/handlers/handlers.h"
#include "server/metrics.h"
#include "server/schedloop.h"
#include "server/store/migrate.h"
#include "server/store/store.h"
#include "api/version.h"

extern const struct ts_embedded_file ts_assets_files[];
extern const size_t ts_assets_count;

enum ts_err ts_h_healthz(void *ctx, struct ts_request *r, struct ts_error *err)
{
    ts_http_reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
    return TS_OK;
}

enum ts_err ts_h_readyz(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return ts_error_set(err, TS_ERR_NOT_READY, "database unreachable: %s", err->message);
    int current = 0;
    enum ts_err e = ts_migrate_check(conn, &current, err);
    if (e != TS_OK)
        return ts_error_set(err, TS_ERR_NOT_READY, "database schema is at version %d, need %d",
                            current, ts_migrate_latest());
    ts_http_reply_json(r, 200,
                       json_pack("{s:s,s:i}", "status", "ready", "schema_version", current));
    return TS_OK;
}

enum ts_err ts_h_version(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_protocol o =
        ts_protocol_oldest((struct ts_protocol){TS_PROTOCOL_MAJOR, TS_PROTOCOL_MINOR});
    char oldest[16];
    snprintf(oldest, sizeof(oldest), "%d.%d", o.major, o.minor);
    ts_http_reply_json(r, 200,
                       json_pack("{s:s,s:s,s:i,s:s,s:s}", "version", TS_VERSION, "api", "v1",
                                 "schema_version", ts_migrate_latest(), "protocol_version",
                                 TS_PROTOCOL_STR, "oldest_agent_protocol", oldest));
    return TS_OK;
}

enum ts_err ts_h_openapi(void *ctx, struct ts_request *r, struct ts_error *err)
{
    for (size_t i = 0; i < ts_assets_count; i++) {
        if (strcmp(ts_assets_files[i].name, "openapi.yaml") == 0) {
            r->status = 200;
            r->raw = ts_assets_files[i].data;
            r->raw_len = ts_assets_files[i].len;
            r->content_type = "application/yaml";
            return TS_OK;
        }
    }
    return ts_error_set(err, TS_ERR_NOT_FOUND, "openapi.yaml is not built in");
}

static bool name_in(const char *name, size_t len, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(names[i]) == len && strncmp(names[i], name, len) == 0)
            return true;
    return false;
}

/* Keep the lines of text (len bytes) that name no project or one of names;
 * appends them to b. Project names never hold a quote or a backslash. */
static void keep_projects(struct ts_buf *b, const char *text, size_t len, const char *const *names,
                          size_t n)
{
    static const char label[] = "project=\"";
    const char *end = text + len;
    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t ll = nl ? (size_t)(nl - line) + 1 : (size_t)(end - line);
        bool keep = true;
        if (line[0] != '#') {
            const char *l = memchr(line, '{', ll);
            const char *p = NULL;
            for (const char *q = l; q != NULL && q < line + ll; q++) {
                if (strncmp(q, label, sizeof(label) - 1) == 0 && (q[-1] == '{' || q[-1] == ',')) {
                    p = q + sizeof(label) - 1;
                    break;
                }
            }
            if (p != NULL) {
                const char *close = memchr(p, '"', (size_t)(line + ll - p));
                keep = close != NULL && name_in(p, (size_t)(close - p), names, n);
            }
        }
        if (keep)
            ts_buf_append(b, line, ll);
        line += ll;
    }
}

/* tessera_jobs: the jobs of each project and state; when limited (a
 * project-limited caller), of the projects in names only. */
static void metrics_jobs(struct ts_buf *b, const struct ts_job_count *counts, size_t n,
                         const char **names, size_t nnames, bool limited)
{
    ts_buf_printf(b, "# HELP tessera_jobs Jobs by project and state.\n"
                     "# TYPE tessera_jobs gauge\n");
    for (size_t i = 0; i < n; i++)
        if (!limited || name_in(counts[i].project, strlen(counts[i].project), names, nnames))
            ts_buf_printf(b, "tessera_jobs{project=\"%s\",state=\"%s\"} %lld\n", counts[i].project,
                          counts[i].state, (long long)counts[i].count);
}

/* The scheduler loop's figures in this replica. */
static void metrics_scheduler(struct ts_buf *b, struct ts_server *srv)
{
    struct ts_schedloop_stats st;
    ts_schedloop_stats(srv, &st);
    ts_buf_printf(b,
                  "# HELP tessera_scheduler_leader 1 when this replica runs the scheduler loop.\n"
                  "# TYPE tessera_scheduler_leader gauge\n"
                  "tessera_scheduler_leader %d\n"
                  "# HELP tessera_scheduler_cycles_total Scheduler cycles run by this replica "
                  "(snapshot, decide, write).\n"
                  "# TYPE tessera_scheduler_cycles_total counter\n"
                  "tessera_scheduler_cycles_total %lld\n"
                  "# HELP tessera_scheduler_sweeps_total Ticks of the loop that only swept "
                  "(nothing had changed).\n"
                  "# TYPE tessera_scheduler_sweeps_total counter\n"
                  "tessera_scheduler_sweeps_total %lld\n"
                  "# HELP tessera_scheduler_cycle_seconds_total Time spent in scheduler cycles.\n"
                  "# TYPE tessera_scheduler_cycle_seconds_total counter\n"
                  "tessera_scheduler_cycle_seconds_total %.6f\n"
                  "# HELP tessera_scheduler_last_cycle_seconds Duration of the latest cycle.\n"
                  "# TYPE tessera_scheduler_last_cycle_seconds gauge\n"
                  "tessera_scheduler_last_cycle_seconds %.6f\n"
                  "# HELP tessera_scheduler_decisions_total Decisions written, by action "
                  "(stop: an eviction or a suspension).\n"
                  "# TYPE tessera_scheduler_decisions_total counter\n"
                  "tessera_scheduler_decisions_total{action=\"bind\"} %lld\n"
                  "tessera_scheduler_decisions_total{action=\"stop\"} %lld\n"
                  "# HELP tessera_scheduler_job_rows_read_total Job rows the cycles' snapshots "
                  "read (the unfinished jobs at a leader's first cycle, then those written "
                  "since the previous one).\n"
                  "# TYPE tessera_scheduler_job_rows_read_total counter\n"
                  "tessera_scheduler_job_rows_read_total %lld\n",
                  st.leader ? 1 : 0, (long long)st.cycles, (long long)st.sweeps, st.cycle_seconds,
                  st.last_cycle_seconds, (long long)st.binds, (long long)st.stops,
                  (long long)st.job_rows);
}

/* The database pool's figures in this replica. */
static void metrics_pool(struct ts_buf *b, struct ts_db *db)
{
    struct ts_db_pool_stats ps;
    ts_db_pool_stats(db, &ps);
    ts_buf_printf(b,
                  "# HELP tessera_db_pool_connections Database connections in this replica's "
                  "pool (--db-pool).\n"
                  "# TYPE tessera_db_pool_connections gauge\n"
                  "tessera_db_pool_connections %d\n"
                  "# HELP tessera_db_pool_in_use Connections lent out now.\n"
                  "# TYPE tessera_db_pool_in_use gauge\n"
                  "tessera_db_pool_in_use %d\n"
                  "# HELP tessera_db_pool_acquires_total Connections lent out.\n"
                  "# TYPE tessera_db_pool_acquires_total counter\n"
                  "tessera_db_pool_acquires_total %llu\n"
                  "# HELP tessera_db_pool_waits_total Requests for a connection that found none "
                  "free and waited.\n"
                  "# TYPE tessera_db_pool_waits_total counter\n"
                  "tessera_db_pool_waits_total %llu\n"
                  "# HELP tessera_db_pool_wait_seconds_total Time spent waiting for a "
                  "connection.\n"
                  "# TYPE tessera_db_pool_wait_seconds_total counter\n"
                  "tessera_db_pool_wait_seconds_total %.6f\n"
                  "# HELP tessera_db_pool_timeouts_total Waits that ran out (the request "
                  "answered 503).\n"
                  "# TYPE tessera_db_pool_timeouts_total counter\n"
                  "tessera_db_pool_timeouts_total %llu\n",
                  ps.size, ps.in_use, (unsigned long long)ps.acquires, (unsigned long long)ps.waits,
                  ps.wait_seconds, (unsigned long long)ps.timeouts);
}

/* The reports' lag, and the build. */
static void metrics_reports(struct ts_buf *b, double age, int64_t age_nodes)
{
    ts_buf_printf(b,
                  "# HELP tessera_report_age_max_seconds Time since the stalest report among "
                  "nodes that are not lost (ready or drained): the reports' lag.\n"
                  "# TYPE tessera_report_age_max_seconds gauge\n"
                  "tessera_report_age_max_seconds %.3f\n"
                  "# HELP tessera_report_nodes Nodes whose reports count in "
                  "tessera_report_age_max_seconds.\n"
                  "# TYPE tessera_report_nodes gauge\n"
                  "tessera_report_nodes %lld\n",
                  age, (long long)age_nodes);
    ts_buf_printf(b,
                  "# HELP tessera_build_info Version of this server.\n"
                  "# TYPE tessera_build_info gauge\n"
                  "tessera_build_info{version=\"%s\"} 1\n",
                  TS_VERSION);
}

enum ts_err ts_h_metrics(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    struct ts_job_count *counts;
    size_t n;
    enum ts_err e = ts_store_job_counts(conn, r->arena, &counts, &n, err);
    double age = 0;
    int64_t age_nodes = 0;
    if (e == TS_OK)
        e = ts_store_report_age(conn, &age, &age_nodes, err);
    if (e != TS_OK)
        return e;
    /* a project-limited token: only its projects' names */
    size_t nids = 0;
    const int64_t *ids = ts_auth_project_ids(c, &nids);
    const char **names = NULL;
    size_t nnames = 0;
    if (ids != NULL && nids > 0 &&
        (e = ts_store_project_names(conn, ids, nids, r->arena, &names, &nnames, err)) != TS_OK)
        return e;
    struct ts_buf b;
    ts_buf_init(&b, 0);
    if (ids == NULL) {
        ts_metrics_render(c->srv->metrics, &b);
    } else {
        struct ts_buf all;
        ts_buf_init(&all, 0);
        ts_metrics_render(c->srv->metrics, &all);
        keep_projects(&b, all.data ? all.data : "", all.len, names, nnames);
        ts_buf_free(&all);
    }
    metrics_jobs(&b, counts, n, names, nnames, ids != NULL);
    metrics_scheduler(&b, c->srv);
    metrics_pool(&b, c->srv->db);
    metrics_reports(&b, age, age_nodes);
    r->raw = ts_arena_strndup(r->arena, b.data ? b.data : "", b.len);
    r->raw_len = b.len;
    ts_buf_free(&b);
    r->status = 200;
    r->content_type = "text/plain; version=0.0.4; charset=utf-8";
    return TS_OK;
}
