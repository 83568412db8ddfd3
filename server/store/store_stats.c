/*
 * store_stats.c - figures the server exports on /metrics.
 */
#include <stdlib.h>

#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

enum ts_err ts_store_report_age(struct ts_dbconn *c, double *max_age_s, int64_t *nodes,
                                struct ts_error *err)
{
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c,
                               "SELECT coalesce(extract(epoch FROM now() - min(last_seen_at)), 0),"
                               " count(*) FROM node WHERE state IN ('ready', 'drained')",
                               0, NULL, &res, err);
    if (e != TS_OK)
        return e;
    *max_age_s = PQntuples(res) > 0 ? atof(PQgetvalue(res, 0, 0)) : 0;
    *nodes = PQntuples(res) > 0 ? ts_row_i64(res, 0, 1) : 0;
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_job_counts(struct ts_dbconn *c, struct ts_arena *a, struct ts_job_count **out,
                                size_t *n, struct ts_error *err)
{
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(
        c,
        "SELECT p.name, j.state, count(*) FROM job j JOIN project p ON p.id = j.project_id"
        " GROUP BY p.name, j.state ORDER BY p.name, j.state",
        0, NULL, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    struct ts_job_count *v = ts_arena_alloc(a, sizeof(*v) * (size_t)(rows ? rows : 1));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rows; i++) {
        v[i].project = ts_row_text(res, i, 0, a);
        v[i].state = ts_row_text(res, i, 1, a);
        v[i].count = ts_row_i64(res, i, 2);
    }
    *out = v;
    *n = (size_t)rows;
    PQclear(res);
    return TS_OK;
}
