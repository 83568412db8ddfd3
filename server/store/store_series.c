/*
 * store_series.c - the metric time series: the current figures of the
 * cluster, each project, node and GPU; writing them as points, rolling them
 * up, expiring them; and reading them back in step buckets.
 *
 * Any number of replicas tick; the one that gets the transaction-level
 * advisory lock writes. Writing is idempotent (a point already in its bucket
 * is kept, a roll-up is written once or recomputed from the finer points), so two replicas
 * ticking one after the other in the same bucket write it once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

/* The series' advisory lock: "tesseras" in ASCII (migrations use
 * "tessera" 0x01). */
#define SERIES_LOCK_KEY "8387236820507844979" /* 0x7465737365726173 */

const char *const ts_series_metric_names[TS_SERIES_NMETRICS + 1] = {
    "capacity",     "allocated", "utilized", "memory_used_bytes", "running_jobs", "pending_jobs",
    "pending_gpus", "idle_gpus", NULL,
};

const char *ts_series_metric_name(enum ts_series_metric m)
{
    return (unsigned)m < TS_SERIES_NMETRICS ? ts_series_metric_names[m] : "capacity";
}

/*
 * Every scope's figures now, as defined in server/README.md: capacity in
 * GPUs (cluster: GPUs of ready nodes; department and project: its quota;
 * job: the GPUs it requested), allocated GPUs (a GPU's share is the memory
 * packed on it over its memory less the node's reserve, as the scheduler
 * counts it), utilized GPUs (the latest samples; a project's: its running
 * jobs' samples), GPU memory used, running and pending jobs, GPUs requested
 * by pending jobs, and idle GPUs: the allocation of running jobs whose own
 * latest sample is under 1 % of it (per job, so an idle job beside a busy
 * one on a shared GPU counts, and a job not yet sampled does not); and, not
 * kept as points, the GPU memory in bytes (cluster, node, GPU) and a GPU's
 * UUID and model. A department is the sum of its projects.
 */
static const char figures_sql[] =
    "WITH ga AS ("
    " SELECT jg.gpu_id, sum(jg.memory_bytes)::float8 AS bytes,"
    "  count(*) FILTER (WHERE j.state = 'running')::float8 AS running"
    " FROM job_gpu jg JOIN job j ON j.id = jg.job_id GROUP BY jg.gpu_id),"
    " g AS ("
    " SELECT g.node_id, n.name AS node, n.state AS node_state, g.idx, g.uuid, g.model,"
    "  g.memory_bytes::float8 AS total,"
    "  coalesce(coalesce(ga.bytes, 0) / nullif(g.memory_bytes - n.gpu_reserve_bytes, 0), 0)::float8"
    "   AS alloc,"
    "  g.utilization::float8 AS util, g.memory_used_bytes::float8 AS mem,"
    "  coalesce(ga.running, 0)::float8 AS running"
    " FROM gpu g JOIN node n ON n.id = g.node_id LEFT JOIN ga ON ga.gpu_id = g.id),"
    " gn AS ("
    " SELECT node_id, count(*)::float8 AS gpus, sum(alloc) AS alloc, sum(util) AS util,"
    "  sum(mem) AS mem, sum(total) AS total FROM g GROUP BY node_id),"
    " jn AS ("
    " SELECT node_id, count(*)::float8 AS running FROM job"
    " WHERE state = 'running' AND node_id IS NOT NULL GROUP BY node_id),"
    " ja AS ("
    " SELECT jg.job_id,"
    "  sum(coalesce(jg.memory_bytes::float8"
    "   / nullif(gg.memory_bytes - gn2.gpu_reserve_bytes, 0), 0)) AS alloc"
    " FROM job_gpu jg JOIN gpu gg ON gg.id = jg.gpu_id"
    " JOIN node gn2 ON gn2.id = gg.node_id GROUP BY jg.job_id),"
    " jr AS ("
    " SELECT j.id, j.project_id, j.requested_gpus::float8 AS requested,"
    "  coalesce(ja.alloc, 0)::float8 AS alloc, j.gpu_utilization::float8 AS util,"
    "  j.gpu_memory_used_bytes::float8 AS mem,"
    "  CASE WHEN j.sampled_at IS NOT NULL AND coalesce(ja.alloc, 0) > 0"
    "   AND j.gpu_utilization < 0.01 * ja.alloc THEN ja.alloc ELSE 0 END::float8 AS idle"
    " FROM job j LEFT JOIN ja ON ja.job_id = j.id WHERE j.state = 'running'),"
    " jp AS ("
    " SELECT project_id,"
    "  count(*) FILTER (WHERE state = 'running')::float8 AS running,"
    "  count(*) FILTER (WHERE state = 'pending')::float8 AS pending,"
    "  coalesce(sum(requested_gpus) FILTER (WHERE state = 'pending'), 0)::float8 AS pgpus,"
    "  coalesce(sum(gpu_utilization) FILTER (WHERE state = 'running'), 0)::float8 AS util,"
    "  coalesce(sum(gpu_memory_used_bytes) FILTER (WHERE state = 'running'), 0)::float8 AS mem"
    " FROM job WHERE state IN ('running', 'pending') GROUP BY project_id),"
    " pa AS ("
    " SELECT j.project_id, sum(ja.alloc) AS alloc FROM ja JOIN job j ON j.id = ja.job_id"
    " GROUP BY j.project_id),"
    " pi AS (SELECT project_id, sum(idle) AS idle FROM jr GROUP BY project_id),"
    " p AS ("
    " SELECT p.name, p.department_id, p.quota_gpus::float8 AS quota,"
    "  coalesce(pa.alloc, 0)::float8 AS alloc, coalesce(jp.util, 0) AS util,"
    "  coalesce(jp.mem, 0) AS mem, coalesce(jp.running, 0) AS running,"
    "  coalesce(jp.pending, 0) AS pending, coalesce(jp.pgpus, 0) AS pgpus,"
    "  coalesce(pi.idle, 0)::float8 AS idle"
    " FROM project p LEFT JOIN pa ON pa.project_id = p.id LEFT JOIN jp ON jp.project_id = p.id"
    " LEFT JOIN pi ON pi.project_id = p.id)"
    " SELECT 'cluster' AS scope, '' AS key,"
    "  (SELECT count(*) FROM g WHERE node_state = 'ready')::float8,"
    "  (SELECT coalesce(sum(alloc), 0) FROM g)::float8,"
    "  (SELECT coalesce(sum(util), 0) FROM g)::float8,"
    "  (SELECT coalesce(sum(mem), 0) FROM g)::float8,"
    "  (SELECT count(*) FROM job WHERE state = 'running')::float8,"
    "  (SELECT count(*) FROM job WHERE state = 'pending')::float8,"
    "  (SELECT coalesce(sum(pgpus), 0) FROM p)::float8,"
    "  (SELECT coalesce(sum(idle), 0) FROM jr)::float8,"
    "  (SELECT coalesce(sum(total), 0) FROM g)::float8, NULL, NULL"
    " UNION ALL"
    " SELECT 'department', d.name, d.quota_gpus::float8, coalesce(sum(p.alloc), 0)::float8,"
    "  coalesce(sum(p.util), 0)::float8, coalesce(sum(p.mem), 0)::float8,"
    "  coalesce(sum(p.running), 0)::float8, coalesce(sum(p.pending), 0)::float8,"
    "  coalesce(sum(p.pgpus), 0)::float8, coalesce(sum(p.idle), 0)::float8, 0, NULL, NULL"
    " FROM department d LEFT JOIN p ON p.department_id = d.id GROUP BY d.id, d.name"
    " UNION ALL"
    " SELECT 'project', name, quota, alloc, util, mem, running, pending, pgpus, idle, 0, NULL,"
    "  NULL FROM p"
    " UNION ALL"
    " SELECT 'node', n.name, coalesce(gn.gpus, 0), coalesce(gn.alloc, 0), coalesce(gn.util, 0),"
    "  coalesce(gn.mem, 0), coalesce(jn.running, 0), 0, 0, 0, coalesce(gn.total, 0), NULL, NULL"
    " FROM node n LEFT JOIN gn ON gn.node_id = n.id LEFT JOIN jn ON jn.node_id = n.id"
    " UNION ALL"
    " SELECT 'gpu', node || '/' || idx, 1, alloc, util, mem, running, 0, 0, 0, total, uuid, model"
    " FROM g"
    " UNION ALL"
    " SELECT 'job', id::text, requested, alloc, util, mem, 1, 0, 0, idle, 0, NULL, NULL FROM jr"
    " ORDER BY 1, 2";

static const char *const scopes[] = {"cluster", "department", "project", "node", "gpu", "job"};

static enum ts_err read_figures(struct ts_dbconn *c, struct ts_arena *a,
                                struct ts_series_figure **out, size_t *n, struct ts_error *err)
{
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c, figures_sql, 0, NULL, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    struct ts_series_figure *v = ts_arena_alloc(a, (size_t)(rows ? rows : 1) * sizeof(*v));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int r = 0; r < rows; r++) {
        const char *scope = PQgetvalue(res, r, 0);
        v[r].scope = scopes[0];
        for (size_t k = 0; k < TS_ARRAY_LEN(scopes); k++)
            if (strcmp(scope, scopes[k]) == 0)
                v[r].scope = scopes[k];
        v[r].key = ts_row_text(res, r, 1, a);
        for (int m = 0; m < TS_SERIES_NMETRICS; m++)
            v[r].v[m] = ts_row_double(res, r, 2 + m);
        v[r].memory_total_bytes = ts_row_double(res, r, 2 + TS_SERIES_NMETRICS);
        v[r].uuid = ts_row_null(res, r, 3 + TS_SERIES_NMETRICS)
                        ? NULL
                        : ts_row_text(res, r, 3 + TS_SERIES_NMETRICS, a);
        v[r].model = ts_row_null(res, r, 4 + TS_SERIES_NMETRICS)
                         ? NULL
                         : ts_row_text(res, r, 4 + TS_SERIES_NMETRICS, a);
        if (v[r].key == NULL || (v[r].scope == scopes[4] && (!v[r].uuid || !v[r].model))) {
            PQclear(res);
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        }
    }
    PQclear(res);
    *out = v;
    *n = (size_t)rows;
    return TS_OK;
}

/* The figures' scopes (scope) or keys as a text[] literal (row.h). NULL
 * when out of memory. */
static char *text_array(struct ts_arena *a, const struct ts_series_figure *f, size_t n, bool scope)
{
    const char **v = ts_arena_alloc(a, (n ? n : 1) * sizeof(*v));
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        v[i] = scope ? f[i].scope : f[i].key;
    return ts_row_text_array(a, v, n);
}

/* A float8[] literal of metric m, exact (17 significant digits). */
static char *number_array(struct ts_arena *a, const struct ts_series_figure *f, size_t n, int m)
{
    size_t cap = 3 + n * 26;
    char *s = ts_arena_alloc(a, cap);
    if (s == NULL)
        return NULL;
    size_t len = 0;
    s[len++] = '{';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s%.17g", i ? "," : "", f[i].v[m]);
    s[len] = '}';
    return s;
}

static enum ts_err exec1(struct ts_dbconn *c, const char *sql, int n, const char *const *params,
                         struct ts_error *err)
{
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c, sql, n, params, &res, err);
    PQclear(res);
    return e;
}

static enum ts_err write_points(struct ts_dbconn *c, int64_t resolution, int64_t at,
                                const struct ts_series_figure *f, size_t n, struct ts_arena *a,
                                struct ts_error *err)
{
    if (n == 0)
        return TS_OK;
    char resbuf[24], atbuf[24];
    snprintf(resbuf, sizeof(resbuf), "%lld", (long long)resolution);
    snprintf(atbuf, sizeof(atbuf), "%lld", (long long)at);
    const char *params[4 + TS_SERIES_NMETRICS] = {resbuf, atbuf, text_array(a, f, n, true),
                                                  text_array(a, f, n, false)};
    for (int m = 0; m < TS_SERIES_NMETRICS; m++)
        params[4 + m] = number_array(a, f, n, m);
    for (int i = 2; i < 4 + TS_SERIES_NMETRICS; i++)
        if (params[i] == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    return exec1(c,
                 "INSERT INTO metric_point (resolution_s, scope, key, at, capacity, allocated,"
                 " utilized, memory_used_bytes, running_jobs, pending_jobs, pending_gpus,"
                 " idle_gpus, samples)"
                 " SELECT $1::integer, s, k, to_timestamp($2::bigint), v1, v2, v3, v4, v5, v6, v7,"
                 "  v8, 1"
                 " FROM unnest($3::text[], $4::text[], $5::float8[], $6::float8[], $7::float8[],"
                 "  $8::float8[], $9::float8[], $10::float8[], $11::float8[], $12::float8[])"
                 "  AS t(s, k, v1, v2, v3, v4, v5, v6, v7, v8)"
                 " ON CONFLICT DO NOTHING",
                 4 + TS_SERIES_NMETRICS, params, err);
}

/* The roll-up's columns: a coarse point averages the finer points in its
 * bucket, `samples` counts them. */
#define ROLL_UP_INSERT                                                                             \
    "INSERT INTO metric_point (resolution_s, scope, key, at, capacity, allocated,"                 \
    " utilized, memory_used_bytes, running_jobs, pending_jobs, pending_gpus,"                      \
    " idle_gpus, samples)"                                                                         \
    " SELECT $1::integer, scope, key, to_timestamp($3::bigint), avg(capacity),"                    \
    "  avg(allocated), avg(utilized), avg(memory_used_bytes), avg(running_jobs),"                  \
    "  avg(pending_jobs), avg(pending_gpus), avg(idle_gpus), count(*)"                             \
    " FROM metric_point WHERE resolution_s = $2::integer"                                          \
    "  AND at >= to_timestamp($3::bigint)"                                                         \
    "  AND at < to_timestamp($3::bigint + $1::integer)"

/* Recompute the bucket of resolution `coarse` that starts at `bucket` from
 * the points of resolution `fine` in it. once: only when the cluster has no
 * point there yet (the cluster has one every tick: a bucket rolled up
 * already). *rows: the points written. */
static enum ts_err roll_up(struct ts_dbconn *c, int64_t coarse, int64_t fine, int64_t bucket,
                           bool once, long *rows, struct ts_error *err)
{
    char cbuf[24], fbuf[24], bbuf[24];
    snprintf(cbuf, sizeof(cbuf), "%lld", (long long)coarse);
    snprintf(fbuf, sizeof(fbuf), "%lld", (long long)fine);
    snprintf(bbuf, sizeof(bbuf), "%lld", (long long)bucket);
    const char *params[] = {cbuf, fbuf, bbuf};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(
        c,
        once ? ROLL_UP_INSERT
            "  AND NOT EXISTS (SELECT 1 FROM metric_point WHERE resolution_s = $1::integer"
            "   AND scope = 'cluster' AND key = '' AND at = to_timestamp($3::bigint))"
            " GROUP BY scope, key ON CONFLICT DO NOTHING"
             : ROLL_UP_INSERT
            " GROUP BY scope, key"
            " ON CONFLICT (resolution_s, scope, key, at) DO UPDATE SET"
            "  capacity = EXCLUDED.capacity, allocated = EXCLUDED.allocated,"
            "  utilized = EXCLUDED.utilized, memory_used_bytes = EXCLUDED.memory_used_bytes,"
            "  running_jobs = EXCLUDED.running_jobs, pending_jobs = EXCLUDED.pending_jobs,"
            "  pending_gpus = EXCLUDED.pending_gpus, idle_gpus = EXCLUDED.idle_gpus,"
            "  samples = EXCLUDED.samples",
        TS_ARRAY_LEN(params), params, &res, err);
    if (e == TS_OK)
        *rows = atol(PQcmdTuples(res));
    PQclear(res);
    return e;
}

static enum ts_err expire(struct ts_dbconn *c, int64_t resolution, int64_t retention,
                          struct ts_error *err)
{
    char rbuf[24], tbuf[24];
    snprintf(rbuf, sizeof(rbuf), "%lld", (long long)resolution);
    snprintf(tbuf, sizeof(tbuf), "%lld", (long long)retention);
    const char *params[] = {rbuf, tbuf};
    return exec1(c,
                 "DELETE FROM metric_point WHERE resolution_s = $1::integer"
                 " AND at < now() - make_interval(secs => $2::bigint)",
                 2, params, err);
}

/*
 * The coarser levels, each bucket written once, complete (issue 15:
 * recomputing the current minute from its points at every tick was the
 * sampler's largest cost; then the current hour from its minutes at every
 * minute). The minute (when the interval is shorter) is written by the tick
 * that writes its last point, or when that tick was missed, by the next one
 * (the newest complete minute is rolled up if the cluster has no point
 * there yet, one index probe otherwise). The hour, when a minute is
 * written: the hour that minute completes is computed from its minutes
 * (recomputed, so that an hour a server before this one wrote while it ran
 * is made whole); else the hour before, if the cluster has no point there
 * yet (its last minute missed), once. Readers take the buckets not rolled
 * up yet from the level below (ts_store_series_query).
 */
static enum ts_err roll_ups(struct ts_dbconn *c, const struct ts_series_levels *lv, int64_t at,
                            struct ts_error *err)
{
    int64_t base = lv->resolution[0];
    int64_t done = at; /* the newest complete bucket of the level below */
    long rows = 1;     /* what the level below gained this tick */
    enum ts_err e = TS_OK;
    for (int k = 1; k < lv->n && e == TS_OK && rows > 0; k++) {
        int64_t fine = lv->resolution[k - 1], coarse = lv->resolution[k];
        bool ends = (done + fine) % coarse == 0; /* done is the bucket's last */
        int64_t bucket = ends ? done / coarse * coarse : done / coarse * coarse - coarse;
        if (k == 1 && base < 60) {
            /* the minute this tick completes, else the one before */
            e = roll_up(c, coarse, fine, bucket, true, &rows, err);
        } else {
            e = roll_up(c, coarse, fine, bucket, !ends, &rows, err);
            rows = 0; /* levels above the hour: none */
        }
        done = bucket;
    }
    return e;
}

enum ts_err ts_store_series_tick(struct ts_dbconn *c, const struct ts_series_levels *lv,
                                 struct ts_arena *a, struct ts_series_figure **figs, size_t *n,
                                 int64_t *at, bool *leader, struct ts_error *err)
{
    int64_t base = lv->resolution[0];
    enum ts_err e = ts_db_begin(c, err);
    if (e != TS_OK)
        return e;
    char basebuf[24];
    snprintf(basebuf, sizeof(basebuf), "%lld", (long long)base);
    const char *params[] = {basebuf};
    PGresult *res = NULL;
    e = ts_db_exec(c,
                   "SELECT pg_try_advisory_xact_lock(" SERIES_LOCK_KEY "),"
                   " floor(extract(epoch FROM now()) / $1::bigint)::bigint * $1::bigint",
                   TS_ARRAY_LEN(params), params, &res, err);
    if (e == TS_OK) {
        *leader = ts_row_bool(res, 0, 0);
        *at = ts_row_i64(res, 0, 1);
        PQclear(res);
        e = read_figures(c, a, figs, n, err);
    }
    if (e == TS_OK && *leader)
        e = write_points(c, base, *at, *figs, *n, a, err);
    if (e == TS_OK && *leader)
        e = roll_ups(c, lv, *at, err);
    for (int k = 0; k < lv->n && e == TS_OK && *leader; k++)
        e = expire(c, lv->resolution[k], lv->retention[k], err);
    if (e == TS_OK)
        e = ts_db_commit(c, err);
    if (e != TS_OK)
        ts_db_rollback(c);
    return e;
}

/* The metric named by $1 of a metric_point row. */
#define METRIC_OF_1                                                                                \
    "CASE $1::text WHEN 'capacity' THEN capacity WHEN 'allocated' THEN allocated"                  \
    " WHEN 'utilized' THEN utilized WHEN 'memory_used_bytes' THEN memory_used_bytes"               \
    " WHEN 'running_jobs' THEN running_jobs WHEN 'pending_jobs' THEN pending_jobs"                 \
    " WHEN 'pending_gpus' THEN pending_gpus ELSE idle_gpus END"

/* Where the buckets of resolution R (a parameter) not rolled up yet start:
 * after the newest the cluster has (a minute or an hour is written once
 * complete, roll_ups). Readers take those buckets from the finer points,
 * so that the running minute and hour read as when they were recomputed
 * at every tick and every minute. */
#define NOT_ROLLED_UP(R)                                                                           \
    "(SELECT coalesce(max(at) + make_interval(secs => " R "::integer), '-infinity')"               \
    " FROM metric_point WHERE resolution_s = " R "::integer AND scope = 'cluster' AND key = '')"
#define NOT_ROLLED_UP_1 NOT_ROLLED_UP("$1")
#define NOT_ROLLED_UP_2 NOT_ROLLED_UP("$2")

enum ts_err ts_store_series_query(struct ts_dbconn *c, const struct ts_series_query *q,
                                  struct ts_arena *a, struct ts_series_row **out, size_t *n,
                                  struct ts_error *err)
{
    char *keys = NULL;
    if (q->keys != NULL) {
        size_t cap = 3;
        for (size_t i = 0; i < q->nkeys; i++)
            cap += 2 * strlen(q->keys[i]) + 3;
        keys = ts_arena_alloc(a, cap);
        if (keys == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        size_t len = 0;
        keys[len++] = '{';
        for (size_t i = 0; i < q->nkeys; i++) {
            if (i)
                keys[len++] = ',';
            keys[len++] = '"';
            for (const char *p = q->keys[i]; *p; p++) {
                if (*p == '"' || *p == '\\')
                    keys[len++] = '\\';
                keys[len++] = *p;
            }
            keys[len++] = '"';
        }
        keys[len] = '}';
    }
    char resbuf[24], stepbuf[24], startbuf[24], endbuf[24], limbuf[24];
    snprintf(resbuf, sizeof(resbuf), "%lld", (long long)q->resolution);
    snprintf(stepbuf, sizeof(stepbuf), "%lld", (long long)q->step);
    snprintf(startbuf, sizeof(startbuf), "%lld", (long long)q->start);
    snprintf(endbuf, sizeof(endbuf), "%lld", (long long)q->end);
    snprintf(limbuf, sizeof(limbuf), "%zu", q->max_rows + 1);
    char finerbuf[24];
    snprintf(finerbuf, sizeof(finerbuf), "%lld", (long long)q->finer);
    const char *params[] = {ts_series_metric_name(q->metric),
                            resbuf,
                            q->scope,
                            q->key,
                            keys,
                            stepbuf,
                            startbuf,
                            endbuf,
                            limbuf,
                            finerbuf};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(
        c,
        "WITH pts AS (SELECT key, at, " METRIC_OF_1 " AS v"
        " FROM metric_point WHERE resolution_s = $2::integer AND scope = $3"
        " AND ($4::text IS NULL OR key = $4) AND ($5::text[] IS NULL OR key = ANY($5::text[]))"
        " AND at >= to_timestamp($7::bigint) AND at < to_timestamp($8::bigint)"
        " UNION ALL"
        " SELECT key, to_timestamp(floor(extract(epoch FROM at) / $2::integer) * $2::integer),"
        "  avg(" METRIC_OF_1 ")"
        " FROM metric_point WHERE $10::integer > 0 AND resolution_s = $10::integer AND scope = $3"
        " AND ($4::text IS NULL OR key = $4) AND ($5::text[] IS NULL OR key = ANY($5::text[]))"
        " AND at >= greatest(to_timestamp($7::bigint), " NOT_ROLLED_UP_2 ")"
        " AND at < to_timestamp(($8::bigint + $2::integer - 1) / $2::integer * $2::integer)"
        " GROUP BY 1, 2)"
        " SELECT key, (floor(extract(epoch FROM at) / $6::bigint) * $6::bigint)::bigint AS b,"
        " avg(v) FROM pts GROUP BY 1, 2 ORDER BY 1, 2 LIMIT $9::bigint",
        TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    size_t rows = (size_t)PQntuples(res);
    if (rows > q->max_rows) {
        PQclear(res);
        ts_error_set(err, TS_ERR_BAD_PARAMETER,
                     "the answer would hold more than %zu points: narrow it", q->max_rows);
        ts_error_hint(err, "name one key, shorten from..to, or give a larger step");
        return TS_ERR_BAD_PARAMETER;
    }
    struct ts_series_row *v = ts_arena_alloc(a, (rows ? rows : 1) * sizeof(*v));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    const char *prev = NULL;
    for (size_t r = 0; r < rows; r++) {
        const char *key = PQgetvalue(res, (int)r, 0);
        if (prev == NULL || strcmp(prev, key) != 0)
            prev = ts_arena_strdup(a, key);
        if (prev == NULL) {
            PQclear(res);
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        }
        v[r].key = prev;
        v[r].bucket = ts_row_i64(res, (int)r, 1);
        v[r].value = ts_row_double(res, (int)r, 2);
    }
    PQclear(res);
    *out = v;
    *n = rows;
    return TS_OK;
}

enum ts_err ts_store_series_idle(struct ts_dbconn *c, int64_t resolution, int64_t finer,
                                 int64_t start, int64_t end, const char *const *keys, size_t nkeys,
                                 struct ts_arena *a, struct ts_series_idle **out, size_t *n,
                                 struct ts_error *err)
{
    struct ts_series_figure *f = NULL;
    if (keys != NULL) {
        f = ts_arena_alloc(a, (nkeys ? nkeys : 1) * sizeof(*f));
        if (f == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < nkeys; i++)
            f[i].key = keys[i];
    }
    char *karr = keys ? text_array(a, f, nkeys, false) : NULL;
    if (keys != NULL && karr == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    char resbuf[24], startbuf[24], endbuf[24];
    snprintf(resbuf, sizeof(resbuf), "%lld", (long long)resolution);
    snprintf(startbuf, sizeof(startbuf), "%lld", (long long)start);
    snprintf(endbuf, sizeof(endbuf), "%lld", (long long)end);
    char finerbuf[24];
    snprintf(finerbuf, sizeof(finerbuf), "%lld", (long long)finer);
    const char *params[] = {resbuf, startbuf, endbuf, karr, finerbuf};
    PGresult *res = NULL;
    /* every project, those without points at 0; a point stands for its
     * bucket's whole width */
    enum ts_err e = ts_db_exec(
        c,
        "SELECT p.name, coalesce(sum(m.idle_gpus * m.resolution_s), 0) / 3600.0,"
        " coalesce(sum(m.allocated * m.resolution_s), 0) / 3600.0,"
        " coalesce(sum(coalesce(m.utilized, 0) * m.resolution_s), 0) / 3600.0,"
        " coalesce(sum(greatest(m.allocated - coalesce(m.utilized, 0), 0) * m.resolution_s), 0)"
        "  / 3600.0"
        " FROM project p LEFT JOIN ("
        "  SELECT key, resolution_s, idle_gpus, allocated, utilized FROM metric_point"
        "  WHERE scope = 'project' AND resolution_s = $1::integer"
        "  AND at >= to_timestamp($2::bigint) AND at < to_timestamp($3::bigint)"
        "  UNION ALL"
        "  SELECT key, $1::integer, avg(idle_gpus), avg(allocated), avg(utilized) FROM metric_point"
        "  WHERE $5::integer > 0 AND scope = 'project' AND resolution_s = $5::integer"
        "  AND at >= greatest(to_timestamp($2::bigint), " NOT_ROLLED_UP_1 ")"
        "  AND at < to_timestamp(($3::bigint + $1::integer - 1) / $1::integer * $1::integer)"
        "  GROUP BY key, floor(extract(epoch FROM at) / $1::integer)) m ON m.key = p.name"
        " WHERE $4::text[] IS NULL OR p.name = ANY($4::text[])"
        " GROUP BY p.name ORDER BY 2 DESC, 1",
        TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    struct ts_series_idle *v = ts_arena_alloc(a, (size_t)(rows ? rows : 1) * sizeof(*v));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int r = 0; r < rows; r++) {
        v[r].project = ts_row_text(res, r, 0, a);
        v[r].idle_gpu_hours = ts_row_double(res, r, 1);
        v[r].allocated_gpu_hours = ts_row_double(res, r, 2);
        v[r].utilized_gpu_hours = ts_row_double(res, r, 3);
        v[r].unused_gpu_hours = ts_row_double(res, r, 4);
        if (v[r].project == NULL) {
            PQclear(res);
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        }
    }
    PQclear(res);
    *out = v;
    *n = (size_t)rows;
    return TS_OK;
}
