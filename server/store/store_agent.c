/*
 * store_agent.c - the agent protocol's queries: registration, drain and the
 * node's desired state (reports are store_report.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

#define P(fmt, v) ts_arena_printf(a, fmt, v)

/* ---- registration and drain ------------------------------------------------ */

static enum ts_err upsert_gpus(struct ts_dbconn *c, const char *node_id,
                               const struct ts_node_reg *r, struct ts_arena *a,
                               struct ts_error *err)
{
    char *idx = ts_arena_alloc(a, 3 + r->ngpus * 4);
    if (idx == NULL)
        return ts_error_nomem(err);
    size_t len = 0;
    idx[len++] = '{';
    for (size_t i = 0; i < r->ngpus; i++) {
        const struct ts_gpu *g = &r->gpus[i];
        len += (size_t)snprintf(idx + len, 5, "%s%d", i ? "," : "", g->index);
        const char *p[] = {node_id, P("%d", g->index), g->uuid, g->model,
                           P("%lld", (long long)g->memory_bytes)};
        PGresult *res = NULL;
        enum ts_err e = ts_db_exec_in_tx(
            c,
            "INSERT INTO gpu (node_id, idx, uuid, model, memory_bytes)"
            " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (node_id, idx) DO UPDATE SET"
            " uuid = EXCLUDED.uuid, model = EXCLUDED.model,"
            " memory_bytes = EXCLUDED.memory_bytes"
            " WHERE (gpu.uuid, gpu.model, gpu.memory_bytes)"
            "   IS DISTINCT FROM (EXCLUDED.uuid, EXCLUDED.model, EXCLUDED.memory_bytes)",
            TS_ARRAY_LEN(p), p, &res, err);
        PQclear(res);
        if (e == TS_ERR_ALREADY_EXISTS)
            return ts_error_set(err, TS_ERR_CONFLICT,
                                "GPU %s is registered on another node; a GPU belongs to one node",
                                g->uuid);
        if (e != TS_OK)
            return e;
    }
    idx[len++] = '}';
    idx[len] = '\0';
    const char *p[] = {node_id, idx};
    PGresult *res = NULL;
    enum ts_err e =
        ts_db_exec_in_tx(c, "DELETE FROM gpu WHERE node_id = $1 AND idx <> ALL($2::int[])",
                         TS_ARRAY_LEN(p), p, &res, err);
    PQclear(res);
    return e;
}

enum ts_err ts_store_node_register(struct ts_dbconn *c, const char *name,
                                   const struct ts_node_reg *r, struct ts_arena *a,
                                   struct ts_node *out, struct ts_error *err)
{
    const char *p[] = {name,
                       r->labels,
                       P("%.17g", r->cpu),
                       P("%lld", (long long)r->memory_bytes),
                       P("%lld", (long long)r->swap_bytes),
                       P("%lld", (long long)r->gpu_reserve_bytes),
                       r->agent_version,
                       r->collision ? r->collision : "wait"};
    enum ts_err e = ts_db_begin(c, err);
    if (e != TS_OK)
        return e;
    PGresult *res = NULL;
    e = ts_db_exec_in_tx(
        c,
        "INSERT INTO node (name, state, labels, cpu, memory_bytes, swap_bytes,"
        " gpu_reserve_bytes, agent_version, collision, registered_at, last_seen_at)"
        " VALUES ($1, 'ready', $2::jsonb, $3, $4, $5, $6, $7, $8, now(), now())"
        " ON CONFLICT (name) DO UPDATE SET labels = EXCLUDED.labels,"
        " cpu = EXCLUDED.cpu, memory_bytes = EXCLUDED.memory_bytes,"
        " swap_bytes = EXCLUDED.swap_bytes,"
        " gpu_reserve_bytes = EXCLUDED.gpu_reserve_bytes,"
        " agent_version = EXCLUDED.agent_version, collision = EXCLUDED.collision,"
        " state = CASE WHEN node.state = 'drained' THEN 'drained' ELSE 'ready' END,"
        " registered_at = now(), last_seen_at = now()"
        " RETURNING id",
        TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    char *id = ts_arena_strdup(a, PQgetvalue(res, 0, 0));
    PQclear(res);
    if (id == NULL) {
        ts_db_rollback(c);
        return ts_error_nomem(err);
    }
    e = upsert_gpus(c, id, r, a, err);
    if (e == TS_OK)
        e = ts_db_commit(c, err);
    else
        ts_db_rollback(c);
    if (e != TS_OK)
        return e;
    return ts_store_node_get(c, name, a, out, err);
}

enum ts_err ts_store_node_drain(struct ts_dbconn *c, const char *name, bool drain,
                                struct ts_arena *a, struct ts_node *out, struct ts_error *err)
{
    /* undrain: ready; the leader's sweep marks it not_ready again if its
     * agent has stopped reporting */
    const char *p[] = {name, drain ? "t" : "f"};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c,
                               "UPDATE node SET state = CASE WHEN $2::boolean THEN 'drained'"
                               " ELSE 'ready' END"
                               " WHERE name = $1 AND (state = 'drained') <> $2::boolean"
                               " RETURNING id",
                               TS_ARRAY_LEN(p), p, &res, err);
    PQclear(res);
    if (e != TS_OK)
        return e;
    return ts_store_node_get(c, name, a, out, err);
}

/* ---- desired state ------------------------------------------------------- */

enum ts_err ts_store_node_generation(struct ts_dbconn *c, const char *name, int64_t *id,
                                     int64_t *generation, struct ts_error *err)
{
    const char *p[] = {name};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c, "SELECT id, generation FROM node WHERE name = $1",
                               TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "node \"%s\" is not registered", name);
    }
    *id = ts_row_i64(res, 0, 0);
    *generation = ts_row_i64(res, 0, 1);
    PQclear(res);
    return TS_OK;
}

/* A suspended job lists the GPUs it held (its processes keep them). */
static const char desired_sql[] =
    "SELECT n.id, n.name, n.state, n.generation,"
    " j.id, j.attempt, j.name, p.name, j.kind, j.priority, j.state, j.stop_reason,"
    " j.command::text, j.env::text, j.working_dir, j.cpu, j.memory_bytes, j.grace_seconds,"
    " j.max_runtime_seconds, j.checkpoint_dir, j.resume_count,"
    " g.idx, g.uuid, jg.memory_bytes,"
    " least(g.memory_bytes, CASE j.gpu_kind"
    "   WHEN 'portion' THEN greatest(jg.memory_bytes, (j.gpu_portion_limit * "
    "g.memory_bytes)::bigint)"
    "   WHEN 'memory' THEN greatest(jg.memory_bytes, j.gpu_memory_limit_bytes)"
    "   ELSE g.memory_bytes END), j.swap, j.idle_swap_after_seconds, p.job_user, p.allow_root"
    " FROM node n"
    " LEFT JOIN job j ON j.node_id = n.id"
    "   AND j.state IN ('scheduled', 'running', 'evicting', 'cancelling', 'suspending',"
    "   'suspended', 'resuming')"
    " LEFT JOIN project p ON p.id = j.project_id"
    " LEFT JOIN LATERAL (SELECT x.gpu_id, x.memory_bytes FROM job_gpu x WHERE x.job_id = j.id"
    "   UNION ALL SELECT s.gpu, s.bytes"
    "   FROM unnest(j.suspended_gpu_ids, j.suspended_gpu_bytes) AS s(gpu, bytes)"
    "   WHERE j.state = 'suspended') jg ON true"
    " LEFT JOIN gpu g ON g.id = jg.gpu_id"
    " WHERE n.name = $1 ORDER BY j.id, g.idx";

enum ts_err ts_store_node_desired(struct ts_dbconn *c, const char *name, struct ts_arena *a,
                                  struct ts_desired *out, struct ts_error *err)
{
    const char *p[] = {name};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c, desired_sql, TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    if (rows == 0) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "node \"%s\" is not registered", name);
    }
    memset(out, 0, sizeof(*out));
    out->node_id = ts_row_i64(res, 0, 0);
    out->node = ts_row_text(res, 0, 1, a);
    out->state = ts_row_text(res, 0, 2, a);
    out->generation = ts_row_i64(res, 0, 3);
    out->jobs = ts_arena_alloc(a, sizeof(*out->jobs) * (size_t)rows);
    struct ts_desired_gpu *gpus = ts_arena_alloc(a, sizeof(*gpus) * (size_t)rows);
    if (out->jobs == NULL || gpus == NULL) {
        PQclear(res);
        return ts_error_nomem(err);
    }
    for (int i = 0; i < rows && e == TS_OK; i++) { /* e: a command or env that does not decode */
        if (ts_row_null(res, i, 4))
            continue; /* a node without jobs */
        int64_t id = ts_row_i64(res, i, 4);
        if (out->njobs == 0 || out->jobs[out->njobs - 1].id != id) {
            struct ts_desired_job *j = &out->jobs[out->njobs++]; /* zeroed by the arena */
            j->id = id;
            j->attempt = (int)ts_row_i64(res, i, 5);
            j->name = ts_row_text(res, i, 6, a);
            j->project = ts_row_text(res, i, 7, a);
            j->kind = ts_row_text(res, i, 8, a);
            j->priority = (int)ts_row_i64(res, i, 9);
            const char *state = PQgetvalue(res, i, 10);
            bool stop = strcmp(state, "evicting") == 0 || strcmp(state, "cancelling") == 0;
            j->action = stop                                ? TS_DESIRED_STOP
                        : strncmp(state, "suspend", 7) == 0 ? TS_DESIRED_SUSPEND
                                                            : TS_DESIRED_RUN;
            j->swap = ts_row_bool(res, i, 25);
            j->stop_reason = ts_row_text(res, i, 11, a);
            if (stop && j->stop_reason == NULL)
                j->stop_reason = strcmp(state, "evicting") == 0 ? "evicted" : "cancelled";
            e = ts_wire_desired_job_set_text(j, ts_row_text(res, i, 12, a),
                                             ts_row_text(res, i, 13, a), a, err);
            j->working_dir = ts_row_text(res, i, 14, a);
            j->cpu = ts_row_double(res, i, 15);
            j->memory_bytes = ts_row_i64(res, i, 16);
            j->grace_seconds = (int)ts_row_i64(res, i, 17);
            j->max_runtime_seconds = ts_row_i64(res, i, 18);
            j->checkpoint_dir = ts_row_text(res, i, 19, a);
            j->resume_count = (int)ts_row_i64(res, i, 20);
            j->idle_swap_after_seconds = ts_row_i64(res, i, 26);
            j->job_user = ts_row_text(res, i, 27, a);
            j->allow_root = ts_row_bool(res, i, 28);
            j->gpus = &gpus[i];
        }
        if (!ts_row_null(res, i, 21)) {
            struct ts_desired_job *j = &out->jobs[out->njobs - 1];
            struct ts_desired_gpu *g = &j->gpus[j->ngpus++];
            *g =
                (struct ts_desired_gpu){(int)ts_row_i64(res, i, 21), -1, ts_row_text(res, i, 22, a),
                                        ts_row_i64(res, i, 23), ts_row_i64(res, i, 24)};
        }
    }
    PQclear(res);
    return e;
}
