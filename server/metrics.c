/*
 * metrics.c - tessera_http_requests_total{route,method,code} and
 * tessera_http_request_duration_seconds{route} histograms, with held
 * requests (long-polls that waited, followed logs) in a histogram of their
 * own, tessera_http_held_request_duration_seconds; the cluster,
 * project, node and GPU gauges of allocation and utilization (the figures
 * the series sampler read last, see server/series.c).
 */
#include "server/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/array.h"
#include "server/routes.h"
#include "server/store/store.h"

#define NSTATUS 600
static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                0.05,   0.1,   0.25,   0.5,   1,    2.5};
#define NBOUNDS (TS_ARRAY_LEN(bounds))
/* held requests: a long-poll waits up to 60 s, a follower for hours */
static const double held_bounds[] = {0.1, 1, 5, 10, 20, 30, 45, 60, 300, 3600, 14400, 86400};
_Static_assert(sizeof(held_bounds) == sizeof(bounds), "one bucket array for both");

struct series {
    atomic_uint_fast64_t by_status[NSTATUS];
    atomic_uint_fast64_t buckets[NBOUNDS + 1]; /* last: +Inf */
    atomic_uint_fast64_t sum_ns;
    atomic_uint_fast64_t count;
};

struct ts_metrics {
    pthread_mutex_t mu;   /* guards gauges */
    struct ts_buf gauges; /* Prometheus text of the latest figures */
    time_t gauges_until;  /* shown until then */
    size_t n;             /* routes + 1 for "no route" */
    struct series s[];    /* n of other requests, then n of held ones */
};

struct ts_metrics *ts_metrics_new(void)
{
    size_t n = ts_routes_count + 1;
    struct ts_metrics *m = calloc(1, sizeof(*m) + 2 * n * sizeof(struct series));
    if (m) {
        m->n = n;
        pthread_mutex_init(&m->mu, NULL);
        ts_buf_init(&m->gauges, 0);
    }
    return m;
}

void ts_metrics_free(struct ts_metrics *m)
{
    if (m == NULL)
        return;
    ts_buf_free(&m->gauges);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void ts_metrics_observe(struct ts_metrics *m, int route_index, const char *method, int status,
                        double seconds, bool held)
{
    (void)method; /* a route is one method; a HEAD counts with its GET route */
    if (m == NULL)
        return;
    size_t i = route_index < 0 ? m->n - 1 : (size_t)route_index;
    if (status > 0 && status < NSTATUS)
        atomic_fetch_add(&m->s[i].by_status[status], 1); /* every request counts here */
    struct series *s = &m->s[held ? m->n + i : i];
    const double *bd = held ? held_bounds : bounds;
    size_t b = 0;
    while (b < NBOUNDS && seconds > bd[b])
        b++;
    atomic_fetch_add(&s->buckets[b], 1);
    atomic_fetch_add(&s->sum_ns, (uint_fast64_t)(seconds * 1e9));
    atomic_fetch_add(&s->count, 1);
}

/* A label value with \\, \" and \\n escaped, as the text format wants. */
static void label(struct ts_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i]; i++) {
        if (s[i] == '\\' || s[i] == '"')
            ts_buf_append(b, "\\", 1);
        if (s[i] == '\n')
            ts_buf_append(b, "\\n", 2);
        else
            ts_buf_append(b, &s[i], 1);
    }
}

/* What a family reads of a figure besides its series metrics. */
enum {
    FIG_MEMORY_TOTAL = -1, /* memory_total_bytes */
    FIG_MEMORY_FREE = -2,  /* memory_total_bytes less the memory in use, at least 0 */
};

/* One gauge family over the figures of one scope. */
struct family {
    const char *scope;
    int metric; /* enum ts_series_metric, or FIG_* */
    const char *name;
    const char *help;
};

/* Names after Prometheus's conventions: a base unit as the suffix (_bytes,
 * _seconds), _ratio for 0..1, _gpus for counts of GPUs (fractions count). */
static const struct family families[] = {
    {"cluster", TS_SERIES_CAPACITY, "tessera_cluster_gpus", "GPUs on ready nodes."},
    {"cluster", TS_SERIES_ALLOCATED, "tessera_cluster_allocated_gpus",
     "GPUs allocated to jobs (fractions count by memory)."},
    {"cluster", TS_SERIES_UTILIZED, "tessera_cluster_utilized_gpus",
     "Sum of the GPUs' utilization at their latest samples."},
    {"cluster", TS_SERIES_MEMORY_USED_BYTES, "tessera_cluster_gpu_memory_used_bytes",
     "GPU memory in use at the latest samples."},
    {"cluster", FIG_MEMORY_TOTAL, "tessera_cluster_gpu_memory_total_bytes",
     "GPU memory of every registered GPU."},
    {"cluster", FIG_MEMORY_FREE, "tessera_cluster_gpu_memory_free_bytes",
     "GPU memory not in use at the latest samples."},
    {"cluster", TS_SERIES_RUNNING_JOBS, "tessera_cluster_running_jobs", "Jobs running."},
    {"cluster", TS_SERIES_PENDING_JOBS, "tessera_cluster_pending_jobs", "Jobs pending."},
    {"project", TS_SERIES_CAPACITY, "tessera_project_quota_gpus", "The project's quota in GPUs."},
    {"project", TS_SERIES_ALLOCATED, "tessera_project_allocated_gpus",
     "GPUs allocated to the project's jobs."},
    {"project", TS_SERIES_UTILIZED, "tessera_project_utilized_gpus",
     "Sum of the GPU utilization of the project's running jobs."},
    {"project", TS_SERIES_MEMORY_USED_BYTES, "tessera_project_gpu_memory_used_bytes",
     "GPU memory the project's running jobs use."},
    {"node", TS_SERIES_CAPACITY, "tessera_node_gpus", "GPUs of the node."},
    {"node", TS_SERIES_ALLOCATED, "tessera_node_allocated_gpus",
     "GPUs of the node allocated to jobs."},
    {"node", TS_SERIES_UTILIZED, "tessera_node_utilized_gpus",
     "Sum of the node's GPU utilization at the latest samples."},
    {"node", TS_SERIES_MEMORY_USED_BYTES, "tessera_node_gpu_memory_used_bytes",
     "GPU memory in use on the node."},
    {"node", FIG_MEMORY_TOTAL, "tessera_node_gpu_memory_total_bytes",
     "GPU memory of the node's GPUs."},
    {"node", FIG_MEMORY_FREE, "tessera_node_gpu_memory_free_bytes",
     "GPU memory of the node not in use at the latest samples."},
    {"node", TS_SERIES_RUNNING_JOBS, "tessera_node_running_jobs", "Jobs running on the node."},
    {"gpu", TS_SERIES_ALLOCATED, "tessera_gpu_allocated_ratio",
     "Share of the GPU allocated to jobs, 0 to 1."},
    {"gpu", TS_SERIES_UTILIZED, "tessera_gpu_utilization_ratio",
     "The GPU's latest utilization, 0 to 1."},
    {"gpu", TS_SERIES_MEMORY_USED_BYTES, "tessera_gpu_memory_used_bytes",
     "The GPU's memory in use at its latest sample."},
    {"gpu", FIG_MEMORY_TOTAL, "tessera_gpu_memory_total_bytes", "The GPU's memory."},
    {"gpu", FIG_MEMORY_FREE, "tessera_gpu_memory_free_bytes",
     "The GPU's memory not in use at its latest sample."},
    {"gpu", TS_SERIES_RUNNING_JOBS, "tessera_gpu_running_jobs", "Running jobs placed on the GPU."},
};

static double figure_value(const struct family *fam, const struct ts_series_figure *f)
{
    if (fam->metric == FIG_MEMORY_TOTAL)
        return f->memory_total_bytes;
    if (fam->metric == FIG_MEMORY_FREE) {
        double free = f->memory_total_bytes - f->v[TS_SERIES_MEMORY_USED_BYTES];
        return free > 0 ? free : 0;
    }
    return f->v[fam->metric];
}

/* A GPU's labels: node and gpu (its index) as before, and DCGM-exporter's
 * gpu, UUID, modelName and Hostname (the node's name, which is its host
 * name unless the agent was given --node), so that a query can join
 * tessera_gpu_* with DCGM_FI_* on UUID or on Hostname and gpu. */
static void gpu_labels(struct ts_buf *b, const struct ts_series_figure *f)
{
    const char *key = f->key;
    const char *slash = strrchr(key, '/');
    size_t nl = slash ? (size_t)(slash - key) : strlen(key);
    ts_buf_printf(b, "{node=\"");
    label(b, key, nl);
    ts_buf_printf(b, "\",gpu=\"");
    label(b, slash ? slash + 1 : "", SIZE_MAX);
    ts_buf_printf(b, "\",UUID=\"");
    label(b, f->uuid ? f->uuid : "", SIZE_MAX);
    ts_buf_printf(b, "\",modelName=\"");
    label(b, f->model ? f->model : "", SIZE_MAX);
    ts_buf_printf(b, "\",Hostname=\"");
    label(b, key, nl);
    ts_buf_printf(b, "\"}");
}

static void render_figures(struct ts_buf *b, const struct ts_series_figure *f, size_t n, int64_t at)
{
    for (size_t k = 0; k < TS_ARRAY_LEN(families); k++) {
        const struct family *fam = &families[k];
        ts_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", fam->name, fam->help, fam->name);
        for (size_t i = 0; i < n; i++) {
            if (strcmp(f[i].scope, fam->scope) != 0)
                continue;
            ts_buf_printf(b, "%s", fam->name);
            if (strcmp(fam->scope, "gpu") == 0) {
                gpu_labels(b, &f[i]);
            } else if (strcmp(fam->scope, "cluster") != 0) {
                ts_buf_printf(b, "{%s=\"", fam->scope);
                label(b, f[i].key, SIZE_MAX);
                ts_buf_printf(b, "\"}");
            }
            ts_buf_printf(b, " %.15g\n", figure_value(fam, &f[i]));
        }
    }
    ts_buf_printf(b,
                  "# HELP tessera_series_sampled_at_seconds When the figures above were read.\n"
                  "# TYPE tessera_series_sampled_at_seconds gauge\n"
                  "tessera_series_sampled_at_seconds %lld\n",
                  (long long)at);
}

void ts_metrics_set_figures(struct ts_metrics *m, const struct ts_series_figure *figs, size_t n,
                            int64_t at, int64_t max_age_s)
{
    if (m == NULL)
        return;
    struct ts_buf b;
    ts_buf_init(&b, 0);
    render_figures(&b, figs, n, at);
    pthread_mutex_lock(&m->mu);
    struct ts_buf old = m->gauges;
    m->gauges = b;
    m->gauges_until = time(NULL) + (time_t)max_age_s;
    pthread_mutex_unlock(&m->mu);
    ts_buf_free(&old);
}

/* One histogram family over the routes' series ser (n of them). */
static void histogram(struct ts_buf *b, const struct ts_metrics *m, struct series *ser,
                      const double *bd, const char *name, const char *help)
{
    ts_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (size_t i = 0; i < m->n; i++) {
        struct series *s = &ser[i];
        uint_fast64_t count = atomic_load(&s->count);
        if (count == 0)
            continue;
        const char *route = i < ts_routes_count ? ts_routes[i].path : "unmatched";
        const char *method = i < ts_routes_count ? ts_routes[i].method : "any";
        uint_fast64_t cum = 0;
        for (size_t k = 0; k <= NBOUNDS; k++) {
            cum += atomic_load(&s->buckets[k]);
            if (k < NBOUNDS)
                ts_buf_printf(b, "%s_bucket{route=\"%s\",method=\"%s\",le=\"%g\"} %llu\n", name,
                              route, method, bd[k], (unsigned long long)cum);
            else
                ts_buf_printf(b, "%s_bucket{route=\"%s\",method=\"%s\",le=\"+Inf\"} %llu\n", name,
                              route, method, (unsigned long long)cum);
        }
        ts_buf_printf(b, "%s_sum{route=\"%s\",method=\"%s\"} %.9f\n", name, route, method,
                      (double)atomic_load(&s->sum_ns) / 1e9);
        ts_buf_printf(b, "%s_count{route=\"%s\",method=\"%s\"} %llu\n", name, route, method,
                      (unsigned long long)count);
    }
}

void ts_metrics_render(struct ts_metrics *m, struct ts_buf *b)
{
    pthread_mutex_lock(&m->mu);
    if (m->gauges.len > 0 && time(NULL) <= m->gauges_until)
        ts_buf_append(b, m->gauges.data, m->gauges.len);
    pthread_mutex_unlock(&m->mu);
    ts_buf_printf(b, "# HELP tessera_http_requests_total HTTP requests by route, method and "
                     "status code.\n# TYPE tessera_http_requests_total counter\n");
    for (size_t i = 0; i < m->n; i++) {
        const char *route = i < ts_routes_count ? ts_routes[i].path : "unmatched";
        const char *method = i < ts_routes_count ? ts_routes[i].method : "any";
        for (int st = 0; st < NSTATUS; st++) {
            uint_fast64_t v = atomic_load(&m->s[i].by_status[st]);
            if (v)
                ts_buf_printf(b,
                              "tessera_http_requests_total{route=\"%s\",method=\"%s\",code=\"%d\"}"
                              " %llu\n",
                              route, method, st, (unsigned long long)v);
        }
    }
    histogram(b, m, m->s, bounds, "tessera_http_request_duration_seconds",
              "HTTP request latency by route (held requests apart).");
    histogram(b, m, m->s + m->n, held_bounds, "tessera_http_held_request_duration_seconds",
              "How long requests that wait on purpose were held: long-polls of a node's "
              "desired state that waited, followed job output.");
}
