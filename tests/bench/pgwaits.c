/*
 * pgwaits.c - PostgreSQL's wait events sampled while a benchmark runs
 * (pgwaits.h).
 */
#include "pgwaits.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#define WAITS_MAX 256
#define SAMPLE_MS 20

struct wait_count {
    char what[40];  /* wait event, or CPU */
    char query[64]; /* the statement's first words */
    long n;
};

struct ts_bench_waits {
    PGconn *pg;
    pthread_t t;
    atomic_bool stop;
    long samples;
    struct wait_count v[WAITS_MAX];
    int nv;
};

static const char sample_sql[] =
    "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'),"
    " left(regexp_replace(query, '\\s+', ' ', 'g'), 60), count(*)"
    " FROM pg_stat_activity WHERE state = 'active' AND backend_type = 'client backend'"
    " AND pid <> pg_backend_pid() GROUP BY 1, 2";

static void count(struct ts_bench_waits *w, const char *what, const char *query, long n)
{
    for (int i = 0; i < w->nv; i++)
        if (strcmp(w->v[i].what, what) == 0 && strcmp(w->v[i].query, query) == 0) {
            w->v[i].n += n;
            return;
        }
    if (w->nv == WAITS_MAX)
        return; /* the rarest pairs past 256 are left out */
    struct wait_count *c = &w->v[w->nv++];
    snprintf(c->what, sizeof(c->what), "%s", what);
    snprintf(c->query, sizeof(c->query), "%s", query);
    c->n = n;
}

static void *sampler(void *arg)
{
    struct ts_bench_waits *w = arg;
    struct timespec gap = {0, SAMPLE_MS * 1000000L};
    while (!atomic_load(&w->stop)) {
        PGresult *res = PQexec(w->pg, sample_sql);
        if (PQresultStatus(res) == PGRES_TUPLES_OK) {
            w->samples++;
            for (int r = 0; r < PQntuples(res); r++)
                count(w, PQgetvalue(res, r, 0), PQgetvalue(res, r, 1), atol(PQgetvalue(res, r, 2)));
        }
        PQclear(res);
        nanosleep(&gap, NULL);
    }
    return NULL;
}

struct ts_bench_waits *ts_bench_waits_start(const char *conninfo)
{
    struct ts_bench_waits *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    w->pg = PQconnectdb(conninfo);
    if (PQstatus(w->pg) != CONNECTION_OK) {
        fprintf(stderr, "pgwaits: %s", PQerrorMessage(w->pg));
        PQfinish(w->pg);
        free(w);
        return NULL;
    }
    if (pthread_create(&w->t, NULL, sampler, w) != 0) {
        PQfinish(w->pg);
        free(w);
        return NULL;
    }
    return w;
}

static int by_count(const void *a, const void *b)
{
    const struct wait_count *x = a, *y = b;
    return (x->n < y->n) - (x->n > y->n);
}

void ts_bench_waits_stop_print(struct ts_bench_waits *w, int nodes)
{
    if (w == NULL)
        return;
    atomic_store(&w->stop, true);
    pthread_join(w->t, NULL);
    PQfinish(w->pg);
    qsort(w->v, (size_t)w->nv, sizeof(w->v[0]), by_count);
    long all = 0;
    for (int i = 0; i < w->nv; i++)
        all += w->v[i].n;
    printf("pg_stat_activity at %d nodes: %ld samples %d ms apart, %.2f active backends a"
           " sample; by wait event and statement:\n%8s %6s  %-24s %s\n",
           nodes, w->samples, SAMPLE_MS, w->samples ? (double)all / (double)w->samples : 0.0,
           "samples", "share", "wait", "statement");
    for (int i = 0; i < w->nv && i < 30; i++)
        printf("%8ld %5.1f%%  %-24s %s\n", w->v[i].n,
               all ? 100.0 * (double)w->v[i].n / (double)all : 0.0, w->v[i].what, w->v[i].query);
    free(w);
}
