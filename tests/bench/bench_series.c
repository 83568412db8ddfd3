/*
 * bench_series.c - what one tick of the metric-series sampler costs
 * (ts_store_series_tick, server/store/store_series.c) as the number of
 * running jobs grows, and so what writing a series per running job costs.
 *
 * One embedded PostgreSQL (fsync on, as the server runs it) with the
 * migrations applied and a synthetic cluster: 1,000 ready nodes of 8 GPUs
 * (80 GiB, sampled at 50 %), 10 departments, 200 projects and JOBS jobs.
 * For each running count N of the list (default 0,2500,5000), the first N
 * jobs run, one whole GPU each (a quarter at 0 % utilization: idle), the
 * rest have finished. Then:
 *   - TICKS ticks as a follower (another session holds the series' advisory
 *     lock): reading the figures only, what every replica pays;
 *   - TICKS ticks as the leader, each in a new bucket of INTERVAL seconds
 *     (the default 10 s, as the server's): figures, writing the points,
 *     expiring, and in the tick that completes a minute (one of six at
 *     10 s: in the maximum, not the median) rolling it and the hour up.
 * Printed per N: the figures a tick reads (and of those, jobs), the median
 * and range of each kind of tick in ms, and the write part (leader median
 * less follower median). The cost per running job is the slope between the
 * first and the last N.
 *
 *   build/tests/bench_series [--running 0,2500,5000] [--ticks 6] [--interval 10]
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/arena.h"
#include "api/clock.h"
#include "server/store/db.h"
#include "server/store/migrate.h"
#include "server/store/pgembed.h"
#include "server/store/store.h"
#include "tests/integration/pgtest.h"

#define NODES 1000
#define GPUS_PER_NODE 8
#define PROJECTS 200
#define DEPARTMENTS 10
#define MAX_RUNS 16
#define SERIES_LOCK "8387236820507844979" /* store_series.c's key */

struct phase {
    int running;
    size_t figures, job_figures;
    double follower[3], leader[3]; /* min, median, max in ms */
};

static int sql(PGconn *c, const char *q)
{
    PGresult *r = PQexec(c, q);
    int st = PQresultStatus(r);
    int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok)
        fprintf(stderr, "bench_series: %s\n  in: %.200s\n", PQerrorMessage(c), q);
    PQclear(r);
    return ok ? 0 : -1;
}

static int seed(PGconn *c, int jobs)
{
    char q[1024];
    if (sql(c, "INSERT INTO department (name, quota_gpus)"
               " SELECT 'd' || i, 800 FROM generate_series(0, 9) i") != 0 ||
        sql(c, "INSERT INTO project (name, department_id, quota_gpus)"
               " SELECT 'p' || i, d.id, 40 FROM generate_series(0, 199) i"
               " JOIN department d ON d.name = 'd' || (i % 10)") != 0 ||
        sql(c, "INSERT INTO node (name, state, last_seen_at, registered_at)"
               " SELECT 'n' || i, 'ready', now(), now() FROM generate_series(0, 999) i") != 0 ||
        sql(c, "INSERT INTO gpu (node_id, idx, uuid, model, memory_bytes, utilization,"
               " memory_used_bytes, sampled_at)"
               " SELECT n.id, g, 'GPU-' || n.id || '-' || g, 'H100', 85899345920, 0.5,"
               " 4294967296, now() FROM node n, generate_series(0, 7) g") != 0)
        return -1;
    snprintf(q, sizeof(q),
             "INSERT INTO job (project_id, name, kind, priority, preemptible, command,"
             " gpu_kind, gpu_count, requested_gpus, state, finished_at)"
             " SELECT p.id, 'j' || i, 'train', 50, true, '[\"sleep\",\"1\"]', 'count', 1, 1,"
             " 'succeeded', now() FROM generate_series(0, %d) i"
             " JOIN project p ON p.name = 'p' || (i %% 200)",
             jobs - 1);
    return sql(c, q) == 0 && sql(c, "ANALYZE") == 0 ? 0 : -1;
}

/* The first n jobs (by id) run on a whole GPU each, the others finished. */
static int set_running(PGconn *c, int n)
{
    char q[1024];
    if (sql(c, "DELETE FROM job_gpu") != 0 ||
        sql(c, "UPDATE job SET state = 'succeeded', node_id = NULL, allocated_gpus = 0,"
               " finished_at = now(), sampled_at = NULL") != 0)
        return -1;
    snprintf(q, sizeof(q),
             "INSERT INTO job_gpu (job_id, gpu_id, memory_bytes)"
             " SELECT j.id, g.id, g.memory_bytes"
             " FROM (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM job) j"
             " JOIN (SELECT id, memory_bytes, row_number() OVER (ORDER BY id) AS rn FROM gpu) g"
             " ON g.rn = j.rn WHERE j.rn <= %d",
             n);
    if (sql(c, q) != 0)
        return -1;
    if (sql(c, "UPDATE job SET state = 'running', finished_at = NULL, started_at = now(),"
               " node_id = g.node_id, allocated_gpus = 1,"
               " gpu_utilization = CASE WHEN job.id % 4 = 0 THEN 0 ELSE 0.6 END,"
               " gpu_memory_used_bytes = 4294967296, sampled_at = now()"
               " FROM job_gpu jg JOIN gpu g ON g.id = jg.gpu_id WHERE jg.job_id = job.id") != 0)
        return -1;
    return sql(c, "ANALYZE job; ANALYZE job_gpu");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void stats(double *v, int n, double out[3])
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    out[0] = v[0];
    out[1] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    out[2] = v[n - 1];
}

/* TICKS ticks; leader: wait for a new bucket before each. */
static int ticks(struct ts_dbconn *c, const struct ts_series_levels *lv, int n, bool want_leader,
                 struct phase *ph, double out[3])
{
    double ms[64];
    struct ts_arena *a = ts_arena_new();
    if (a == NULL)
        return -1;
    for (int i = 0; i < n; i++) {
        if (want_leader) {
            int64_t step = lv->resolution[0] * 1000, now = ts_now_ms();
            /* wall clock: the database buckets by its now() */
            ts_sleep_ms((long)((now / step + 1) * step - now + 200));
        }
        struct ts_series_figure *figs = NULL;
        size_t nf = 0;
        int64_t at = 0;
        bool leader = false;
        struct ts_error err;
        ts_arena_reset(a);
        int64_t t0 = ts_now_ns();
        enum ts_err e = ts_store_series_tick(c, lv, a, &figs, &nf, &at, &leader, &err);
        ms[i] = (double)(ts_now_ns() - t0) / 1e6;
        if (e != TS_OK || leader != want_leader) {
            fprintf(stderr, "bench_series: tick: %s (leader %d)\n", e != TS_OK ? err.message : "",
                    leader);
            ts_arena_free(a);
            return -1;
        }
        ph->figures = nf;
        ph->job_figures = 0;
        for (size_t k = 0; k < nf; k++)
            ph->job_figures += strcmp(figs[k].scope, "job") == 0;
    }
    ts_arena_free(a);
    stats(ms, n, out);
    return 0;
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    for (const char *p = s; *p && n < max;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > NODES * GPUS_PER_NODE)
            return -1;
        out[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return n;
}

int main(int argc, char **argv)
{
    int runs[MAX_RUNS] = {0, 2500, 5000}, nruns = 3, nticks = 6, interval = 10;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--running") == 0 && i + 1 < argc) {
            if ((nruns = parse_list(argv[++i], runs, MAX_RUNS)) <= 0) {
                fprintf(stderr, "bench_series: --running wants counts up to %d: %s\n",
                        NODES * GPUS_PER_NODE, argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--ticks") == 0 && i + 1 < argc) {
            nticks = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--interval") == 0 && i + 1 < argc) {
            interval = atoi(argv[++i]);
        } else {
            fprintf(stderr,
                    "usage: bench_series [--running N,N,...] [--ticks 1-64] [--interval S]\n");
            return 2;
        }
    }
    if (nticks < 1 || nticks > 64 || interval < 1 || 60 % interval != 0) {
        fprintf(stderr, "bench_series: --ticks 1 to 64, --interval a divisor of 60\n");
        return 2;
    }
    int jobs = 0;
    for (int i = 0; i < nruns; i++)
        jobs = runs[i] > jobs ? runs[i] : jobs;

    int rc = 1;
    struct ts_error err;
    struct ts_pgembed *pg = NULL;
    struct ts_db *db = NULL;
    struct ts_dbconn *c = NULL;
    PGconn *admin = NULL, *holder = NULL;
    struct phase ph[MAX_RUNS];
    memset(ph, 0, sizeof(ph));
    char *dir = ts_pgtest_tmpdir();
    if (dir == NULL)
        return 1;
    if (ts_pgembed_start(dir, NULL, &pg, &err) != TS_OK) {
        fprintf(stderr, "bench_series: could not start PostgreSQL: %s: %s\n", err.message,
                err.detail);
        goto out;
    }
    if (ts_db_open(ts_pgembed_conninfo(pg), 1, &db, &err) != TS_OK ||
        (c = ts_db_acquire(db, 5000, &err)) == NULL || ts_migrate_run(c, NULL, &err) != TS_OK) {
        fprintf(stderr, "bench_series: %s: %s\n", err.message, err.detail);
        goto out;
    }
    admin = ts_pgtest_connect(ts_pgembed_conninfo(pg));
    holder = ts_pgtest_connect(ts_pgembed_conninfo(pg));
    if (admin == NULL || holder == NULL || seed(admin, jobs > 0 ? jobs : 1) != 0)
        goto out;
    /* 24 h, 7 d and 90 d as the server keeps them */
    struct ts_series_levels lv = {3, {interval, 60, 3600}, {86400, 7 * 86400, 90 * 86400}};
    if (interval == 60)
        lv = (struct ts_series_levels){2, {60, 3600}, {7 * 86400, 90 * 86400}};
    printf("%d nodes x %d GPUs, %d projects, %d departments; %d ticks each, interval %d s\n", NODES,
           GPUS_PER_NODE, PROJECTS, DEPARTMENTS, nticks, interval);
    printf("%8s %8s %6s | %-27s | %-27s | %9s\n", "running", "figures", "jobs",
           "follower ms (min med max)", "leader ms (min med max)", "write ms");
    fflush(stdout);
    for (int r = 0; r < nruns; r++) {
        ph[r].running = runs[r];
        if (set_running(admin, runs[r]) != 0)
            goto out;
        if (sql(holder, "SELECT pg_advisory_lock(" SERIES_LOCK ")") != 0 ||
            ticks(c, &lv, nticks, false, &ph[r], ph[r].follower) != 0 ||
            sql(holder, "SELECT pg_advisory_unlock(" SERIES_LOCK ")") != 0 ||
            ticks(c, &lv, nticks, true, &ph[r], ph[r].leader) != 0)
            goto out;
        printf("%8d %8zu %6zu | %8.1f %8.1f %8.1f | %8.1f %8.1f %8.1f | %9.1f\n", runs[r],
               ph[r].figures, ph[r].job_figures, ph[r].follower[0], ph[r].follower[1],
               ph[r].follower[2], ph[r].leader[0], ph[r].leader[1], ph[r].leader[2],
               ph[r].leader[1] - ph[r].follower[1]);
        fflush(stdout);
    }
    if (nruns > 1 && runs[nruns - 1] != runs[0]) {
        double dn = runs[nruns - 1] - runs[0];
        double tick = ph[nruns - 1].leader[1] - ph[0].leader[1];
        double write = (ph[nruns - 1].leader[1] - ph[nruns - 1].follower[1]) -
                       (ph[0].leader[1] - ph[0].follower[1]);
        printf("per running job: %.1f us a tick (median leader), of which %.1f us writing, rolling"
               " up and expiring\n",
               1000 * tick / dn, 1000 * write / dn);
    }
    rc = 0;
out:
    PQfinish(holder);
    PQfinish(admin);
    if (c != NULL)
        ts_db_release(db, c);
    ts_db_close(db);
    if (pg != NULL)
        ts_pgembed_stop(pg);
    ts_pgtest_leftovers(dir);
    ts_pgtest_rmtree(dir);
    free(dir);
    return rc;
}
