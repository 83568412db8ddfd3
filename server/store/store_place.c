/*
 * store_place.c - where a job's GPUs run on its node (issue 17): the
 * node-level scheduler may run a fractional job on another physical GPU
 * than the logical one the scheduler gave it; the agent's report names
 * both per job (NodeReport jobs[].gpus) and they are kept in
 * job_gpu.physical_idx (migrations/0010), part of the report's
 * transaction (store_agent.c).
 */
#include <stdio.h>
#include <string.h>

#include "api/array.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

/* "{1,2,3}" of n integers from get(i), in the arena; NULL when out of
 * memory. */
static char *int_array(struct ts_arena *a, size_t n, const struct ts_node_report *rep, int which)
{
    char *s = ts_arena_alloc(a, 3 + n * 21);
    if (s == NULL)
        return NULL;
    size_t len = 0;
    s[len++] = '{';
    for (size_t i = 0; i < rep->njobs; i++) {
        const struct ts_report_job *r = &rep->jobs[i];
        for (size_t k = 0; k < r->nplaces; k++) {
            long long v = which == 0   ? (long long)r->id
                          : which == 1 ? (long long)r->attempt
                          : which == 2 ? (long long)r->places[k].index
                                       : (long long)r->places[k].physical_index;
            len += (size_t)snprintf(s + len, 22, "%s%lld", len > 1 ? "," : "", v);
        }
    }
    s[len++] = '}';
    s[len] = '\0';
    return s;
}

enum ts_err ts_store_report_places(struct ts_dbconn *c, const char *node_id,
                                   const struct ts_node_report *rep, struct ts_arena *a,
                                   struct ts_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < rep->njobs; i++)
        n += rep->jobs[i].nplaces;
    if (n == 0)
        return TS_OK; /* an agent before issue 17, or no job with GPUs */
    const char *p[] = {node_id, int_array(a, n, rep, 0), int_array(a, n, rep, 1),
                       int_array(a, n, rep, 2), int_array(a, n, rep, 3)};
    for (size_t i = 1; i < 5; i++)
        if (p[i] == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    /* only this node's jobs in the reported attempt, only onto a GPU of
     * this node, and only rows that change (a report every few seconds
     * writes nothing while jobs stay where they are) */
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(
        c,
        "UPDATE job_gpu jg SET physical_idx = u.phys"
        " FROM unnest($2::bigint[], $3::int[], $4::int[], $5::int[]) AS u(id, attempt, idx, phys),"
        "   job j, gpu g"
        " WHERE j.id = u.id AND j.attempt = u.attempt AND j.node_id = $1"
        "   AND jg.job_id = j.id AND g.id = jg.gpu_id AND g.node_id = $1 AND g.idx = u.idx"
        "   AND jg.physical_idx IS DISTINCT FROM u.phys"
        "   AND EXISTS (SELECT 1 FROM gpu pg WHERE pg.node_id = $1 AND pg.idx = u.phys)",
        TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK) {
        ts_db_rollback(c);
        return e;
    }
    PQclear(res);
    return TS_OK;
}
