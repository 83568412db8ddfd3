/*
 * metrics.c - tessera_http_requests_total{route,method,code} and
 * tessera_http_request_duration_seconds{route} histograms.
 */
#include "server/metrics.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "server/routes.h"

#define NSTATUS 600
static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                0.05,   0.1,   0.25,   0.5,   1,    2.5};
#define NBOUNDS (sizeof(bounds) / sizeof(bounds[0]))

struct series {
    atomic_uint_fast64_t by_status[NSTATUS];
    atomic_uint_fast64_t buckets[NBOUNDS + 1]; /* last: +Inf */
    atomic_uint_fast64_t sum_ns;
    atomic_uint_fast64_t count;
};

struct ts_metrics {
    size_t n; /* routes + 1 for "no route" */
    struct series s[];
};

struct ts_metrics *ts_metrics_new(void)
{
    size_t n = ts_routes_count + 1;
    struct ts_metrics *m = calloc(1, sizeof(*m) + n * sizeof(struct series));
    if (m)
        m->n = n;
    return m;
}

void ts_metrics_free(struct ts_metrics *m)
{
    free(m);
}

void ts_metrics_observe(struct ts_metrics *m, int route_index, const char *method, int status,
                        double seconds)
{
    if (m == NULL)
        return;
    size_t i = route_index < 0 ? m->n - 1 : (size_t)route_index;
    struct series *s = &m->s[i];
    if (status > 0 && status < NSTATUS)
        atomic_fetch_add(&s->by_status[status], 1);
    size_t b = 0;
    while (b < NBOUNDS && seconds > bounds[b])
        b++;
    atomic_fetch_add(&s->buckets[b], 1);
    atomic_fetch_add(&s->sum_ns, (uint_fast64_t)(seconds * 1e9));
    atomic_fetch_add(&s->count, 1);
}

void ts_metrics_render(struct ts_metrics *m, struct ts_buf *b)
{
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
    ts_buf_printf(b, "# HELP tessera_http_request_duration_seconds HTTP request latency by "
                     "route.\n# TYPE tessera_http_request_duration_seconds histogram\n");
    for (size_t i = 0; i < m->n; i++) {
        struct series *s = &m->s[i];
        uint_fast64_t count = atomic_load(&s->count);
        if (count == 0)
            continue;
        const char *route = i < ts_routes_count ? ts_routes[i].path : "unmatched";
        const char *method = i < ts_routes_count ? ts_routes[i].method : "any";
        uint_fast64_t cum = 0;
        for (size_t k = 0; k <= NBOUNDS; k++) {
            cum += atomic_load(&s->buckets[k]);
            if (k < NBOUNDS)
                ts_buf_printf(b,
                              "tessera_http_request_duration_seconds_bucket{route=\"%s\","
                              "method=\"%s\",le=\"%g\"} %llu\n",
                              route, method, bounds[k], (unsigned long long)cum);
            else
                ts_buf_printf(b,
                              "tessera_http_request_duration_seconds_bucket{route=\"%s\","
                              "method=\"%s\",le=\"+Inf\"} %llu\n",
                              route, method, (unsigned long long)cum);
        }
        ts_buf_printf(b,
                      "tessera_http_request_duration_seconds_sum{route=\"%s\",method=\"%s\"} "
                      "%.9f\n",
                      route, method, (double)atomic_load(&s->sum_ns) / 1e9);
        ts_buf_printf(b,
                      "tessera_http_request_duration_seconds_count{route=\"%s\",method=\"%s\"} "
                      "%llu\n",
                      route, method, (unsigned long long)count);
    }
}
