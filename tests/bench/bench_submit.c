/*
 * bench_submit.c - job submissions per second with durable commits.
 *
 * Starts a real tessera-server (embedded PostgreSQL, fsync and
 * synchronous_commit on), then C concurrent clients over loopback, each with
 * a kept-alive connection, submit N jobs in all. Prints the rate, p50/p99
 * latency, and the same figures for GET /healthz (no database) from the same
 * clients in the same process as the baseline.
 *
 *   bench_submit [TOTAL [CLIENTS [PENDING]]]   default 20000 jobs, 8 clients,
 *                                              20000 pending before
 *
 * PENDING jobs are put in the project first, in one INSERT through the
 * database (the job table's triggers count them as a submission would), so
 * the submissions are measured with that queue waiting: each scheduler cycle
 * reads it and gives it reasons.
 *
 * TS_BENCH_PGSS=1 restarts the embedded PostgreSQL with pg_stat_statements
 * and prints the submission phase's 15 costliest statements.
 *
 * TS_BENCH_NO_SCHED=1 starts the server without its scheduler loop: the
 * submissions alone, next to what the loop's cycles (each reading every
 * pending job) take from them.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/bench/benchcpu.h"
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

/* A counter of /metrics (NAN when absent). */
static double metric(const char *name)
{
    double v = NAN;
    struct ts_response r;
    if (ts_it_req(srv.admin, "GET", "/metrics", NULL, NULL, &r) != 200)
        return v;
    size_t len = strlen(name);
    for (const char *p = r.body.data; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, name, len) == 0 && p[len] == ' ')
            v = atof(p + len + 1);
    ts_response_free(&r);
    return v;
}

static int pgss_start(const char *const *args)
{
    char dir[256], out[64];
    snprintf(dir, sizeof(dir), "%s", srv.dir);
    ts_it_sql(&srv, "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'", out,
              sizeof(out));
    ts_it_stop(&srv);
    if (ts_it_start(&srv, dir, args) != 0 ||
        ts_it_sql(&srv, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements", out, sizeof(out)) != 0)
        return -1;
    return 0;
}

static void pgss_print(double window)
{
    char *out = malloc(1 << 16);
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "SELECT string_agg(format('%%9s %%9s %%8s %%7s  %%s', round(calls / %.3f),"
             " round(total_exec_time / %.3f), round(mean_exec_time::numeric, 3),"
             " round(rows::numeric / greatest(calls, 1), 1),"
             " left(regexp_replace(query, '\\s+', ' ', 'g'), 100)), E'\\n'"
             " ORDER BY total_exec_time DESC)"
             " FROM (SELECT * FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 15) s",
             window, window);
    if (out != NULL && ts_it_sql(&srv, sql, out, 1 << 16) == 0)
        printf("pg_stat_statements over the submissions, by time:\n%9s %9s %8s %7s  %s\n%s\n",
               "calls/s", "ms/s", "mean ms", "rows", "statement", out);
    free(out);
}

/* PENDING jobs like the submitted ones (p0 ... pN-1, the default priority
 * 50, so the submissions queue behind them), in one statement;
 * the loop (if on) is given time for its first cycle over them. */
static int prefill(int n)
{
    char sql[1024], out[32];
    snprintf(sql, sizeof(sql),
             "WITH p AS (SELECT id FROM project WHERE name = 'bench'),"
             " j AS (INSERT INTO job (project_id, name, kind, priority, preemptible, command,"
             "   gpu_kind, gpu_portion, gpu_devices, requested_gpus, reason_code, reason_message)"
             "   SELECT p.id, 'p' || g, 'train', 50, true, '[\"sleep\", \"60\"]', 'portion', 0.5,"
             "   1, 0.5, 'not_yet_scheduled', 'waiting for the scheduler to consider it'"
             "   FROM p, generate_series(0, %d) g RETURNING id)"
             " SELECT count(*) FROM j",
             n - 1);
    if (ts_it_sql(&srv, sql, out, sizeof(out)) != 0 || atoi(out) != n) {
        fprintf(stderr, "bench_submit: could not put %d pending jobs in the project\n", n);
        return -1;
    }
    /* pending jobs inserted wake no cycle (the API's submission does) */
    ts_it_sql(&srv, "SELECT pg_notify('tessera_sched', '')", out, sizeof(out));
    sleep(3); /* the loop's first cycle over them */
    return 0;
}

int main(int argc, char **argv)
{
    int total = argc > 1 ? atoi(argv[1]) : 20000;
    int clients = argc > 2 ? atoi(argv[2]) : 8;
    int pending = argc > 3 ? atoi(argv[3]) : 20000;
    if (total < clients || clients < 1 || clients > 64 || pending < 0) {
        fprintf(stderr, "usage: bench_submit [TOTAL [CLIENTS (1-64) [PENDING (>= 0)]]]\n");
        return 1;
    }
    ts_client_global_init();
    static const char *const no_loop[] = {"--scheduler=false", NULL};
    const char *const *args = getenv("TS_BENCH_NO_SCHED") ? no_loop : NULL;
    if (ts_it_start(&srv, NULL, args) != 0)
        return 1;
    if (getenv("TS_BENCH_PGSS") && pgss_start(args) != 0)
        return 1;
    ts_it_req(srv.admin, "POST", "/api/v1/departments", "{\"name\":\"bench\"}", NULL, NULL);
    /* past max_pending's default: every submission here stays pending
     * without the loop */
    ts_it_req(srv.admin, "POST", "/api/v1/projects",
              "{\"name\":\"bench\",\"department\":\"bench\","
              "\"quota\":{\"max_pending\":100000000}}",
              NULL, NULL);
    if (pending > 0 && prefill(pending) != 0)
        return 1;
    char fsync[16], sync[16];
    ts_it_sql(&srv, "SHOW fsync", fsync, sizeof(fsync));
    ts_it_sql(&srv, "SHOW synchronous_commit", sync, sizeof(sync));
    printf("tessera-server, embedded PostgreSQL (fsync=%s synchronous_commit=%s), %d clients,"
           " %d pending before, scheduler loop %s\n",
           fsync, sync, clients, pending, getenv("TS_BENCH_NO_SCHED") ? "off" : "on");
    healthz_only = 1;
    double base = phase("GET /healthz", clients, total);
    healthz_only = 0;
    char out[64];
    if (getenv("TS_BENCH_PGSS"))
        ts_it_sql(&srv, "SELECT pg_stat_statements_reset()", out, sizeof(out));
    double c0 = metric("tessera_scheduler_cycles_total"), pg0, pg1;
    double cpu0 = ts_bench_server_cpu(srv.pid, srv.dir, &pg0);
    double t0 = now();
    double rate = phase("POST /api/v1/jobs", clients, total);
    double dt = now() - t0, c1 = metric("tessera_scheduler_cycles_total");
    double cpu1 = ts_bench_server_cpu(srv.pid, srv.dir, &pg1);
    /* CPU per submission moves less than the rate on a shared machine */
    printf("CPU per submission: %.0f us (server %.0f, PostgreSQL %.0f); scheduler cycles %.0f"
           " (%.1f/s)\n",
           (cpu1 - cpu0) * 1e6 / total, (cpu1 - cpu0 - (pg1 - pg0)) * 1e6 / total,
           (pg1 - pg0) * 1e6 / total, c1 - c0, (c1 - c0) / dt);
    if (getenv("TS_BENCH_PGSS"))
        pgss_print(dt);
    char n[32];
    ts_it_sql(&srv, "SELECT count(*) FROM job", n, sizeof(n));
    printf("jobs in the database: %s; submissions/healthz ratio: %.2f\n", n, rate / base);
    ts_it_stop(&srv);
    ts_it_cleanup(&srv);
    return rate > 0 ? 0 : 1;
}
