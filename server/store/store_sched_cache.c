/*
 * store_sched_cache.c - the scheduler snapshot's job and GPU rows, read
 * incrementally (sched_cache.h).
 *
 * Reading every unfinished job and every GPU each cycle was most of the
 * loop's database time at fleet scale (issue 15: ~10,000 jobs, 160-330 ms
 * a cycle at 1,000 nodes, and 8,000 GPUs, 30-70 ms), while a cycle a fifth
 * of a second after the last one finds a few hundred of them written since
 * (reports' samples, starts, ends, binds). The leader keeps the rows
 * between cycles and reads again only those written by a transaction that
 * the previous snapshot could not see: every UPDATE or INSERT makes a row
 * version whose xmin is its transaction, and a transaction the previous
 * snapshot did not see has an id at or past that snapshot's xmin
 * (pg_snapshot_xmin: the oldest transaction running then; every older one
 * had ended). So `age(xmin) <= age(previous xmin)` selects every row that
 * changed since, and some that had not (transactions that ran during the
 * previous read, read again harmlessly). xmin is the raw transaction id
 * even once a row version is frozen.
 *
 * For jobs, one pass through job_state_idx (as the full read: a filter on
 * xmin alone would scan every job ever run) gives the unfinished jobs' ids
 * and which were written since: a job kept that is not among them ended or
 * was deleted, and those written since are read by id. GPUs are deleted (a node registered again
 * with fewer, a node deleted): when the table's count or sum of ids differs from the rows kept,
 * every GPU is read again (ids only grow, so an insert and a delete cannot leave both equal). Every
 * 10 minutes, and when this replica becomes the leader again, it reads everything, which also keeps
 * the previous xmin far within the 2^31 transactions age() compares across.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "api/clock.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/sched_cache.h"
#include "server/store/store.h"

#define FULL_EVERY_MS (10 * 60 * 1000)

/* Rows by id; each one allocation, its strings after it. */
struct rowset {
    struct ts_sjrow **rows;
    size_t n;
    int64_t idsum;
};

struct ts_sched_jobcache {
    struct rowset jobs, gpus;
    char xmin[32];   /* the previous snapshot's xmin; "" before the first read */
    int64_t full_ms; /* monotonic time of the last full read */
};

#define JOB_COLUMNS                                                                                \
    "SELECT id, name, project_id, priority, preemptible, state, node_id,"                          \
    " extract(epoch from coalesce(attempt_started_at, updated_at))::bigint,"                       \
    " extract(epoch from created_at)::bigint,"                                                     \
    " gpu_kind, gpu_count, gpu_portion, gpu_portion_limit, gpu_memory_bytes,"                      \
    " gpu_memory_limit_bytes, gpu_devices, cpu, memory_bytes, gpu_model::text,"                    \
    " node_selector::text, swap, suspend_held, array_to_string(suspended_gpu_ids, ','),"           \
    " suspended_bytes, gpu_memory_used_bytes, swapped_bytes, reason_code, reason_message,"         \
    " queue_position FROM job"

#define UNFINISHED                                                                                 \
    "'pending', 'scheduled', 'running', 'evicting', 'cancelling', 'suspending', 'suspended',"      \
    " 'resuming'"

#define SINCE " age(xmin) <= age($1::xid) ORDER BY id"
#define GPU_COLUMNS "SELECT id, node_id, idx, model, memory_bytes FROM gpu"

static const char jobs_full_sql[] = JOB_COLUMNS " WHERE state IN (" UNFINISHED ") ORDER BY id";
static const char jobs_these_sql[] = JOB_COLUMNS " WHERE id = ANY($1::bigint[]) ORDER BY id";
static const char jobs_ids_sql[] = "SELECT id, age(xmin) <= age($1::xid) FROM job"
                                   " WHERE state IN (" UNFINISHED ") ORDER BY id";
static const char gpus_full_sql[] = GPU_COLUMNS " ORDER BY id";
static const char gpus_since_sql[] = GPU_COLUMNS " WHERE" SINCE;

struct ts_sched_jobcache *ts_store_sched_jobcache_new(void)
{
    return calloc(1, sizeof(struct ts_sched_jobcache));
}

static void rowset_clear(struct rowset *rs)
{
    for (size_t i = 0; i < rs->n; i++)
        free(rs->rows[i]);
    free(rs->rows);
    *rs = (struct rowset){0};
}

void ts_store_sched_jobcache_free(struct ts_sched_jobcache *jc)
{
    if (jc == NULL)
        return;
    rowset_clear(&jc->jobs);
    rowset_clear(&jc->gpus);
    free(jc);
}

/* Row r of res (its columns, the first the id) as one allocation (new),
 * or NULL when out of memory. */
static struct ts_sjrow *row_copy(const PGresult *res, int r)
{
    int ncols = PQnfields(res);
    size_t len = sizeof(struct ts_sjrow) + (size_t)ncols * sizeof(char *);
    for (int k = 0; k < ncols; k++)
        if (!PQgetisnull(res, r, k))
            len += (size_t)PQgetlength(res, r, k) + 1;
    struct ts_sjrow *j = malloc(len);
    if (j == NULL)
        return NULL;
    char *at = (char *)&j->v[ncols];
    for (int k = 0; k < ncols; k++) {
        if (PQgetisnull(res, r, k)) {
            j->v[k] = NULL;
            continue;
        }
        size_t l = (size_t)PQgetlength(res, r, k);
        memcpy(at, PQgetvalue(res, r, k), l + 1);
        j->v[k] = at;
        at += l + 1;
    }
    j->id = strtoll(j->v[0], NULL, 10);
    return j;
}

/*
 * The rows of res (by id) merged into rs's (by id): a row read replaces the
 * one kept. full: res has them all. Copies first, so that out of memory leaves rs as it was.
 */
static enum ts_err merge(struct rowset *rs, const PGresult *res, bool full, struct ts_error *err)
{
    size_t m = (size_t)PQntuples(res), nold = full ? 0 : rs->n;
    struct ts_sjrow **got = calloc(m + 1, sizeof(*got));
    struct ts_sjrow **out = calloc(nold + m + 1, sizeof(*out));
    bool ok = got != NULL && out != NULL;
    for (size_t i = 0; ok && i < m; i++)
        ok = (got[i] = row_copy(res, (int)i)) != NULL;
    if (!ok) {
        for (size_t i = 0; got != NULL && i < m; i++)
            free(got[i]);
        free(got);
        free(out);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    size_t n = 0, i = 0, k = 0;
    while (i < nold || k < m) {
        if (k == m || (i < nold && rs->rows[i]->id < got[k]->id)) {
            out[n++] = rs->rows[i++];
            continue;
        }
        if (i < nold && rs->rows[i]->id == got[k]->id)
            free(rs->rows[i++]);
        out[n++] = got[k++];
    }
    if (full)
        rowset_clear(rs);
    free(rs->rows);
    free(got);
    rs->rows = out;
    rs->n = n;
    rs->idsum = 0;
    for (size_t r = 0; r < n; r++)
        rs->idsum += out[r]->id;
    return TS_OK;
}

/* One table's rows: every one (full), or those since_sql selects with param. */
static enum ts_err read_rows(struct ts_dbconn *c, struct rowset *rs, const char *full_sql,
                             const char *since_sql, bool full, const char *param, size_t *nread,
                             struct ts_error *err)
{
    const char *p[] = {param};
    PGresult *res = NULL;
    enum ts_err e = full ? ts_db_exec(c, full_sql, 0, NULL, &res, err)
                         : ts_db_exec(c, since_sql, TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    *nread = (size_t)PQntuples(res);
    e = merge(rs, res, full, err);
    PQclear(res);
    return e;
}

/* Whether GPUs were deleted since they were read: the table's count or
 * sum of ids differs from the rows kept. */
static enum ts_err gpus_gone(struct ts_dbconn *c, const struct rowset *rs, bool *gone,
                             struct ts_error *err)
{
    PGresult *res = NULL;
    enum ts_err e =
        ts_db_exec(c, "SELECT count(*), coalesce(sum(id), 0) FROM gpu", 0, NULL, &res, err);
    if (e != TS_OK)
        return e;
    *gone = ts_row_i64(res, 0, 0) != (int64_t)rs->n || ts_row_i64(res, 0, 1) != rs->idsum;
    PQclear(res);
    return TS_OK;
}

/*
 * The unfinished jobs' ids, and whether each was written since prev, in
 * one pass through job_state_idx (a filter on xmin alone would scan every
 * job ever run): the jobs kept that are not among them (ended, cancelled,
 * deleted) are dropped, and *changed (new, "{1,2}", NULL when none) names
 * those to read again.
 */
static enum ts_err jobs_changed(struct ts_dbconn *c, struct rowset *rs, const char *prev,
                                char **changed, struct ts_error *err)
{
    const char *p[] = {prev};
    PGresult *res = NULL;
    *changed = NULL;
    enum ts_err e = ts_db_exec(c, jobs_ids_sql, TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    size_t m = (size_t)PQntuples(res), n = 0, k = 0, nch = 0;
    for (size_t i = 0; i < m; i++)
        nch += PQgetvalue(res, (int)i, 1)[0] == 't';
    char *list = nch ? malloc(nch * 21 + 3) : NULL;
    if (nch && list == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    size_t len = 0;
    for (size_t i = 0; list != NULL && i < m; i++)
        if (PQgetvalue(res, (int)i, 1)[0] == 't')
            len += (size_t)sprintf(list + len, "%c%s", len ? ',' : '{', PQgetvalue(res, (int)i, 0));
    if (list != NULL)
        memcpy(list + len, "}", 2);
    for (size_t i = 0; i < rs->n; i++) {
        int64_t id = rs->rows[i]->id;
        while (k < m && ts_row_i64(res, (int)k, 0) < id)
            k++;
        if (k < m && ts_row_i64(res, (int)k, 0) == id)
            rs->rows[n++] = rs->rows[i];
        else {
            rs->idsum -= id;
            free(rs->rows[i]);
        }
    }
    rs->n = n;
    PQclear(res);
    *changed = list;
    return TS_OK;
}

enum ts_err ts_store_sched_cache_refresh(struct ts_dbconn *c, struct ts_sched_jobcache *jc,
                                         const char *xmin, size_t *njobs, struct ts_error *err)
{
    int64_t now = ts_now_ms();
    bool full = jc->xmin[0] == '\0' || now - jc->full_ms >= FULL_EVERY_MS;
    /* xid is 32 bits; pg_snapshot_xmin is xid8 (epoch and xid) */
    char prev[16];
    snprintf(prev, sizeof(prev), "%llu", strtoull(jc->xmin, NULL, 10) & 0xffffffffULL);
    size_t ngpus = 0;
    bool gone = false;
    enum ts_err e = full ? TS_OK : gpus_gone(c, &jc->gpus, &gone, err);
    if (e == TS_OK)
        e = read_rows(c, &jc->gpus, gpus_full_sql, gpus_since_sql, full || gone, prev, &ngpus, err);
    char *changed = NULL;
    if (e == TS_OK && !full)
        e = jobs_changed(c, &jc->jobs, prev, &changed, err);
    *njobs = 0;
    if (e == TS_OK && (full || changed != NULL))
        e = read_rows(c, &jc->jobs, jobs_full_sql, jobs_these_sql, full, changed, njobs, err);
    free(changed);
    if (e != TS_OK)
        return e;
    snprintf(jc->xmin, sizeof(jc->xmin), "%s", xmin);
    if (full)
        jc->full_ms = now;
    return TS_OK;
}

const struct ts_sjrow *const *ts_store_sched_cache_jobs(const struct ts_sched_jobcache *jc,
                                                        size_t *n)
{
    *n = jc->jobs.n;
    return (const struct ts_sjrow *const *)jc->jobs.rows;
}

const struct ts_sjrow *const *ts_store_sched_cache_gpus(const struct ts_sched_jobcache *jc,
                                                        size_t *n)
{
    *n = jc->gpus.n;
    return (const struct ts_sjrow *const *)jc->gpus.rows;
}
