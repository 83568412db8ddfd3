/*
 * bench_submit.c - job submissions per second with durable commits.
 *
 * Starts a real tessera-server (embedded PostgreSQL, fsync and
 * synchronous_commit on), then C concurrent clients over loopback, each with
 * a kept-alive connection, submit N jobs in all. Prints the rate, p50/p99
 * latency, and the same figures for GET /healthz (no database) from the same
 * clients in the same process as the baseline.
 *
 *   bench_submit [TOTAL [CLIENTS]]     default 20000 jobs, 8 clients
 *
 * TS_BENCH_NO_SCHED=1 starts the server without its scheduler loop: the
 * submissions alone, next to what the loop's cycles (each reading every
 * pending job) take from them.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/integration/harness.h"

static struct ts_it_server srv;
static int per_client;
static int healthz_only;

struct worker {
    int id;
    double *lat; /* seconds per request */
    int failures;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    char body[256];
    for (int i = 0; i < per_client; i++) {
        double t0 = now();
        long st;
        if (healthz_only) {
            st = ts_it_req(c, "GET", "/healthz", NULL, NULL, NULL);
            w->failures += st != 200;
        } else {
            snprintf(body, sizeof(body),
                     "{\"name\":\"b%d-%d\",\"project\":\"bench\",\"command\":[\"sleep\",\"60\"],"
                     "\"gpu\":{\"portion\":0.5}}",
                     w->id, i);
            st = ts_it_req(c, "POST", "/api/v1/jobs", body, NULL, NULL);
            w->failures += st != 201;
        }
        w->lat[i] = now() - t0;
    }
    ts_client_free(c);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Returns the rate. */
static double phase(const char *what, int clients, int total)
{
    per_client = total / clients;
    pthread_t t[64];
    struct worker w[64];
    double *all = calloc((size_t)per_client * (size_t)clients, sizeof(double));
    double t0 = now();
    for (int i = 0; i < clients; i++) {
        w[i] = (struct worker){.id = i, .lat = all + (size_t)i * (size_t)per_client};
        pthread_create(&t[i], NULL, run, &w[i]);
    }
    int failures = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(t[i], NULL);
        failures += w[i].failures;
    }
    double dt = now() - t0;
    size_t n = (size_t)per_client * (size_t)clients;
    qsort(all, n, sizeof(double), cmp);
    double rate = (double)n / dt;
    printf("%-22s %7zu requests in %6.2f s: %8.0f/s  p50 %6.2f ms  p99 %6.2f ms  failures %d\n",
           what, n, dt, rate, all[n / 2] * 1e3, all[n * 99 / 100] * 1e3, failures);
    free(all);
    return failures ? -1 : rate;
}

int main(int argc, char **argv)
{
    int total = argc > 1 ? atoi(argv[1]) : 20000;
    int clients = argc > 2 ? atoi(argv[2]) : 8;
    if (total < clients || clients < 1 || clients > 64) {
        fprintf(stderr, "usage: bench_submit [TOTAL [CLIENTS (1-64)]]\n");
        return 1;
    }
    ts_client_global_init();
    static const char *const no_loop[] = {"--scheduler=false", NULL};
    if (ts_it_start(&srv, NULL, getenv("TS_BENCH_NO_SCHED") ? no_loop : NULL) != 0)
        return 1;
    ts_it_req(srv.admin, "POST", "/api/v1/departments", "{\"name\":\"bench\"}", NULL, NULL);
    /* past max_pending's default: every submission here stays pending
     * without the loop */
    ts_it_req(srv.admin, "POST", "/api/v1/projects",
              "{\"name\":\"bench\",\"department\":\"bench\","
              "\"quota\":{\"max_pending\":100000000}}",
              NULL, NULL);
    char fsync[16], sync[16];
    ts_it_sql(&srv, "SHOW fsync", fsync, sizeof(fsync));
    ts_it_sql(&srv, "SHOW synchronous_commit", sync, sizeof(sync));
    printf("tessera-server, embedded PostgreSQL (fsync=%s synchronous_commit=%s), %d clients\n",
           fsync, sync, clients);
    healthz_only = 1;
    double base = phase("GET /healthz", clients, total);
    healthz_only = 0;
    double rate = phase("POST /api/v1/jobs", clients, total);
    char n[32];
    ts_it_sql(&srv, "SELECT count(*) FROM job", n, sizeof(n));
    printf("jobs in the database: %s; submissions/healthz ratio: %.2f\n", n, rate / base);
    ts_it_stop(&srv);
    ts_it_cleanup(&srv);
    return rate > 0 ? 0 : 1;
}
