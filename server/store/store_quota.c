/*
 * store_quota.c - departments and projects: their quotas (with a revision
 * for If-Match), and their usage summed from the jobs.
 */
#include <stdio.h>
#include <string.h>

#include "api/array.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

/* Usage per project over jobs that have not finished. What a job requests,
 * in GPUs: its count, or portion x devices (job.requested_gpus, set at
 * submission); for a memory request, once placed what it is allocated (its
 * bytes over the usable memory of the GPUs it is on), before that its share
 * of the largest usable GPU of the cluster, at most 1 per device (and 1 per
 * device while there is no GPU at all): the rule by which the scheduler
 * counts a pending job's demand (ts_sched_preq_prepare in server/sched/cluster.c, over
 * every registered GPU, usable = memory - its node's reserve), so that
 * requested and the scheduler's demand agree and a project never shows less
 * requested than allocated. */
#define USAGE_SQL                                                                                  \
    "SELECT j.project_id, sum(j.allocated_gpus) AS alloc,"                                         \
    " coalesce(sum(j.allocated_gpus) FILTER (WHERE NOT j.preemptible), 0) AS alloc_np,"            \
    " sum(CASE WHEN j.gpu_kind <> 'memory' THEN j.requested_gpus"                                  \
    "   WHEN j.allocated_gpus > 0 THEN j.allocated_gpus"                                           \
    "   WHEN m.usable > 0 THEN least(1, j.gpu_memory_bytes / m.usable) * j.gpu_devices"            \
    "   ELSE j.gpu_devices END) AS req,"                                                           \
    " count(*) FILTER (WHERE j.state = 'pending') AS pending,"                                     \
    " count(*) FILTER (WHERE j.state IN ('scheduled', 'running', 'evicting', 'cancelling'))"       \
    "   AS running"                                                                                \
    " FROM job j, (SELECT max(g.memory_bytes - n.gpu_reserve_bytes)::float8 AS usable"             \
    "   FROM gpu g JOIN node n ON n.id = g.node_id WHERE n.gpu_reserve_bytes < g.memory_bytes) m"  \
    " WHERE j.state NOT IN ('succeeded', 'failed', 'cancelled') GROUP BY j.project_id"

/* clang-format off */
#define PROJECT_SQL                                                                                \
    "SELECT p.id, p.name, d.name, p.quota_gpus, p.over_quota_weight, p.limit_gpus,"                \
    " p.priority, p.revision, " TS_SQL_US("p.created_at") ","                                      \
    " coalesce(u.alloc, 0), coalesce(u.alloc_np, 0), coalesce(u.req, 0),"                          \
    " coalesce(u.pending, 0), coalesce(u.running, 0), p.deserved_gpus, p.fair_share_gpus,"         \
    " p.max_pending, coalesce(p.job_user, ''), p.allow_root"                                       \
    " FROM project p JOIN department d ON d.id = p.department_id"                                  \
    " LEFT JOIN (" USAGE_SQL ") u ON u.project_id = p.id"

#define DEPARTMENT_SQL                                                                             \
    "SELECT d.id, d.name, d.quota_gpus, d.over_quota_weight, d.limit_gpus,"                        \
    " d.priority, d.revision, " TS_SQL_US("d.created_at") ","                                      \
    " coalesce(sum(u.alloc), 0), coalesce(sum(u.alloc_np), 0), coalesce(sum(u.req), 0),"           \
    " coalesce(sum(u.pending), 0), coalesce(sum(u.running), 0),"                                   \
    " coalesce(sum(p.deserved_gpus), 0), coalesce(sum(p.fair_share_gpus), 0), count(p.id)"         \
    " FROM department d LEFT JOIN project p ON p.department_id = d.id"                             \
    " LEFT JOIN (" USAGE_SQL ") u ON u.project_id = p.id"
/* clang-format on */

static void read_quota(const PGresult *res, int row, int col, struct ts_quota *q)
{
    q->gpus = ts_row_double(res, row, col);
    q->over_quota_weight = ts_row_double(res, row, col + 1);
    q->has_limit = !ts_row_null(res, row, col + 2);
    q->limit = ts_row_double(res, row, col + 2);
    q->priority = (int)ts_row_i64(res, row, col + 3);
}

static void read_usage(const PGresult *res, int row, int col, struct ts_usage *u)
{
    u->allocated_gpus = ts_row_double(res, row, col);
    u->allocated_nonpreemptible_gpus = ts_row_double(res, row, col + 1);
    u->requested_gpus = ts_row_double(res, row, col + 2);
    u->pending_jobs = ts_row_i64(res, row, col + 3);
    u->running_jobs = ts_row_i64(res, row, col + 4);
    u->deserved_gpus = ts_row_double(res, row, col + 5);
    u->fair_share_gpus = ts_row_double(res, row, col + 6);
}

static void read_project(const PGresult *res, int row, struct ts_project *p)
{
    memset(p, 0, sizeof(*p));
    p->id = ts_row_i64(res, row, 0);
    ts_row_copy(res, row, 1, p->spec.name, sizeof(p->spec.name));
    ts_row_copy(res, row, 2, p->spec.department, sizeof(p->spec.department));
    read_quota(res, row, 3, &p->spec.quota);
    p->revision = ts_row_i64(res, row, 7);
    p->created_at_us = ts_row_i64(res, row, 8);
    read_usage(res, row, 9, &p->usage);
    p->spec.quota.has_max_pending = true;
    p->spec.quota.max_pending = ts_row_i64(res, row, 16);
    ts_row_copy(res, row, 17, p->spec.quota.job_user, sizeof(p->spec.quota.job_user));
    p->spec.quota.allow_root = strcmp(PQgetvalue(res, row, 18), "t") == 0;
}

static void read_department(const PGresult *res, int row, struct ts_department *d)
{
    memset(d, 0, sizeof(*d));
    d->id = ts_row_i64(res, row, 0);
    ts_row_copy(res, row, 1, d->spec.name, sizeof(d->spec.name));
    read_quota(res, row, 2, &d->spec.quota);
    d->revision = ts_row_i64(res, row, 6);
    d->created_at_us = ts_row_i64(res, row, 7);
    read_usage(res, row, 8, &d->usage);
    d->project_count = ts_row_i64(res, row, 15);
}

/* Text parameters for a quota: gpus, weight, limit (NULL), priority. */
struct quota_params {
    char gpus[32], weight[32], limit[32], priority[16], max_pending[24];
};

static void quota_params(const struct ts_quota *q, struct quota_params *p)
{
    snprintf(p->gpus, sizeof(p->gpus), "%.17g", q->gpus);
    snprintf(p->weight, sizeof(p->weight), "%.17g", q->over_quota_weight);
    snprintf(p->limit, sizeof(p->limit), "%.17g", q->limit);
    snprintf(p->priority, sizeof(p->priority), "%d", q->priority);
    snprintf(p->max_pending, sizeof(p->max_pending), "%lld", (long long)q->max_pending);
}

/* ---- departments ------------------------------------------------------------- */

enum ts_err ts_store_department_create(struct ts_dbconn *c, const struct ts_department_spec *s,
                                       struct ts_department *out, struct ts_error *err)
{
    struct quota_params qp;
    quota_params(&s->quota, &qp);
    const char *params[] = {s->name, qp.gpus, qp.weight, s->quota.has_limit ? qp.limit : NULL,
                            qp.priority};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(
        c,
        "INSERT INTO department (name, quota_gpus, over_quota_weight, limit_gpus, priority)"
        " VALUES ($1, $2, $3, $4, $5) RETURNING id, revision, " TS_SQL_US("created_at"),
        TS_ARRAY_LEN(params), params, &res, err);
    if (e == TS_ERR_ALREADY_EXISTS)
        return ts_error_field(err, e, "name", "department \"%s\" already exists", s->name);
    if (e != TS_OK)
        return e;
    memset(out, 0, sizeof(*out));
    out->spec = *s;
    out->id = ts_row_i64(res, 0, 0);
    out->revision = ts_row_i64(res, 0, 1);
    out->created_at_us = ts_row_i64(res, 0, 2);
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_department_get(struct ts_dbconn *c, const char *name, struct ts_arena *a,
                                    struct ts_department *out, struct ts_error *err)
{
    PGresult *res = NULL;
    const char *params[] = {name};
    enum ts_err e = ts_db_exec(c, DEPARTMENT_SQL " WHERE d.name = $1 GROUP BY d.id",
                               TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "department \"%s\" does not exist", name);
    }
    read_department(res, 0, out);
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_department_list(struct ts_dbconn *c, struct ts_arena *a,
                                     struct ts_department **out, size_t *n, struct ts_error *err)
{
    PGresult *res = NULL;
    enum ts_err e =
        ts_db_exec(c, DEPARTMENT_SQL " GROUP BY d.id ORDER BY d.name", 0, NULL, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    struct ts_department *v = ts_arena_alloc(a, sizeof(*v) * (size_t)(rows ? rows : 1));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rows; i++)
        read_department(res, i, &v[i]);
    *out = v;
    *n = (size_t)rows;
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_department_delete(struct ts_dbconn *c, const char *name, struct ts_error *err)
{
    PGresult *res = NULL;
    const char *params[] = {name};
    enum ts_err e = ts_db_exec(
        c,
        "WITH d AS (SELECT id, (SELECT count(*) FROM project p WHERE p.department_id = "
        "department.id) AS n"
        "           FROM department WHERE name = $1),"
        " del AS (DELETE FROM department WHERE id = (SELECT id FROM d WHERE n = 0) RETURNING id)"
        " SELECT (SELECT n FROM d), (SELECT count(*) FROM del)",
        TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    bool missing = ts_row_null(res, 0, 0);
    int64_t projects = ts_row_i64(res, 0, 0);
    PQclear(res);
    if (missing)
        return ts_error_set(err, TS_ERR_NOT_FOUND, "department \"%s\" does not exist", name);
    if (projects > 0) {
        ts_error_set(err, TS_ERR_IN_USE, "department \"%s\" still has %lld project%s", name,
                     (long long)projects, projects == 1 ? "" : "s");
        ts_error_hint(err, "delete or move its projects first");
        return TS_ERR_IN_USE;
    }
    return TS_OK;
}

/* Shared by departments and projects: table is a fixed identifier. */
static enum ts_err set_quota(struct ts_dbconn *c, const char *sql, const char *what,
                             const char *name, const struct ts_quota *q,
                             const struct ts_revisions *revs, struct ts_error *err)
{
    struct quota_params qp;
    quota_params(q, &qp);
    char list[3 + TS_REVISIONS_MAX * 21];
    size_t len = 0;
    list[len++] = '{';
    for (size_t i = 0; revs != NULL && i < revs->n && i < TS_REVISIONS_MAX; i++)
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%lld", i ? "," : "",
                                (long long)revs->v[i]);
    snprintf(list + len, sizeof(list) - len, "}");
    const char *params[] = {name,
                            qp.gpus,
                            qp.weight,
                            q->has_limit ? qp.limit : NULL,
                            qp.priority,
                            revs == NULL ? NULL : list,
                            qp.max_pending,
                            q->job_user[0] ? q->job_user : NULL,
                            q->allow_root ? "true" : "false"};
    PGresult *res = NULL;
    /* $7..$9, max_pending, job_user and allow_root, only in a project's statement */
    enum ts_err e = ts_db_exec(c, sql, q->has_max_pending ? 9 : 6, params, &res, err);
    if (e != TS_OK)
        return e;
    bool exists = !ts_row_null(res, 0, 0);
    bool updated = ts_row_i64(res, 0, 1) > 0;
    int64_t current = ts_row_i64(res, 0, 0);
    PQclear(res);
    if (!exists)
        return ts_error_set(err, TS_ERR_NOT_FOUND, "%s \"%s\" does not exist", what, name);
    if (!updated) {
        ts_error_set(err, TS_ERR_PRECONDITION_FAILED,
                     "%s \"%s\" was changed by someone else: revision %lld, If-Match had %s", what,
                     name, (long long)current, list);
        ts_error_hint(err, "GET it again and retry with the new ETag");
        return TS_ERR_PRECONDITION_FAILED;
    }
    return TS_OK;
}

/* The revision moves only when a value does: a PUT of the same quota keeps
 * its ETag (RFC 9110 §9.2.2, an idempotent write). The comparison comes after
 * the assignments, which give $2..$7 their types. */
#define SET_QUOTA_SQL(table, more_set, more_cols, more_vals)                                       \
    "WITH u AS (UPDATE " table " SET quota_gpus = $2, over_quota_weight = $3,"                     \
    "   limit_gpus = $4, priority = $5" more_set ","                                               \
    "   revision = revision + CASE WHEN (quota_gpus, over_quota_weight, limit_gpus,"               \
    "   priority" more_cols ") IS DISTINCT FROM ($2, $3, $4, $5" more_vals ") THEN 1 ELSE 0 END"   \
    "   WHERE name = $1 AND ($6::bigint[] IS NULL OR revision = ANY($6::bigint[]))"                \
    "   RETURNING revision)"                                                                       \
    " SELECT (SELECT revision FROM " table " WHERE name = $1), (SELECT count(*) FROM u)"

enum ts_err ts_store_department_set_quota(struct ts_dbconn *c, const char *name,
                                          const struct ts_quota *q, const struct ts_revisions *revs,
                                          struct ts_error *err)
{
    return set_quota(c, SET_QUOTA_SQL("department", "", "", ""), "department", name, q, revs, err);
}

/* ---- projects ------------------------------------------------------------------ */

enum ts_err ts_store_project_create(struct ts_dbconn *c, const struct ts_project_spec *s,
                                    struct ts_project *out, struct ts_error *err)
{
    struct quota_params qp;
    quota_params(&s->quota, &qp);
    const char *params[] = {s->name,
                            s->department,
                            qp.gpus,
                            qp.weight,
                            s->quota.has_limit ? qp.limit : NULL,
                            qp.priority,
                            qp.max_pending,
                            s->quota.job_user[0] ? s->quota.job_user : NULL,
                            s->quota.allow_root ? "true" : "false"};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(
        c,
        "INSERT INTO project (name, department_id, quota_gpus, over_quota_weight, limit_gpus,"
        " priority, max_pending, job_user, allow_root)"
        " SELECT $1, d.id, $3, $4, $5, $6, $7, $8, $9 FROM department d"
        " WHERE d.name = $2 RETURNING id, revision, " TS_SQL_US("created_at"),
        TS_ARRAY_LEN(params), params, &res, err);
    if (e == TS_ERR_ALREADY_EXISTS)
        return ts_error_field(err, e, "name", "project \"%s\" already exists", s->name);
    if (e != TS_OK)
        return e;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return ts_error_field(err, TS_ERR_UNKNOWN_REFERENCE, "department",
                              "department \"%s\" does not exist", s->department);
    }
    memset(out, 0, sizeof(*out));
    out->spec = *s;
    out->id = ts_row_i64(res, 0, 0);
    out->revision = ts_row_i64(res, 0, 1);
    out->created_at_us = ts_row_i64(res, 0, 2);
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_project_get(struct ts_dbconn *c, const char *name, struct ts_arena *a,
                                 struct ts_project *out, struct ts_error *err)
{
    PGresult *res = NULL;
    const char *params[] = {name};
    enum ts_err e =
        ts_db_exec(c, PROJECT_SQL " WHERE p.name = $1", TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "project \"%s\" does not exist", name);
    }
    read_project(res, 0, out);
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_project_list(struct ts_dbconn *c, const int64_t *ids, size_t nids,
                                  struct ts_arena *a, struct ts_project **out, size_t *n,
                                  struct ts_error *err)
{
    PGresult *res = NULL;
    char *list = NULL;
    if (ids != NULL) {
        list = ts_row_id_array(a, ids, nids);
        if (list == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    const char *params[] = {list};
    enum ts_err e = ts_db_exec(
        c, PROJECT_SQL " WHERE $1::bigint[] IS NULL OR p.id = ANY($1::bigint[]) ORDER BY p.name",
        TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    struct ts_project *v = ts_arena_alloc(a, sizeof(*v) * (size_t)(rows ? rows : 1));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rows; i++)
        read_project(res, i, &v[i]);
    *out = v;
    *n = (size_t)rows;
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_project_delete(struct ts_dbconn *c, const char *name, struct ts_error *err)
{
    PGresult *res = NULL;
    const char *params[] = {name};
    enum ts_err e = ts_db_exec(
        c,
        "WITH p AS (SELECT id, (SELECT count(*) FROM job j WHERE j.project_id = project.id"
        "           AND j.state NOT IN ('succeeded', 'failed', 'cancelled')) AS n"
        "           FROM project WHERE name = $1),"
        " del AS (DELETE FROM project WHERE id = (SELECT id FROM p WHERE n = 0) RETURNING id)"
        " SELECT (SELECT n FROM p), (SELECT count(*) FROM del)",
        TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    bool missing = ts_row_null(res, 0, 0);
    int64_t active = ts_row_i64(res, 0, 0);
    PQclear(res);
    if (missing)
        return ts_error_set(err, TS_ERR_NOT_FOUND, "project \"%s\" does not exist", name);
    if (active > 0) {
        ts_error_set(err, TS_ERR_IN_USE, "project \"%s\" still has %lld job%s not finished", name,
                     (long long)active, active == 1 ? "" : "s");
        ts_error_hint(err, "cancel its jobs first");
        return TS_ERR_IN_USE;
    }
    return TS_OK;
}

enum ts_err ts_store_project_set_quota(struct ts_dbconn *c, const char *name,
                                       const struct ts_quota *q, const struct ts_revisions *revs,
                                       struct ts_error *err)
{
    return set_quota(c,
                     SET_QUOTA_SQL("project", ", max_pending = $7, job_user = $8, allow_root = $9",
                                   ", max_pending, job_user, allow_root", ", $7, $8, $9"),
                     "project", name, q, revs, err);
}

enum ts_err ts_store_project_id(struct ts_dbconn *c, const char *name, int64_t *id,
                                struct ts_error *err)
{
    PGresult *res = NULL;
    const char *params[] = {name};
    enum ts_err e = ts_db_exec(c, "SELECT id FROM project WHERE name = $1", TS_ARRAY_LEN(params),
                               params, &res, err);
    if (e != TS_OK)
        return e;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "project \"%s\" does not exist", name);
    }
    *id = ts_row_i64(res, 0, 0);
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_project_names(struct ts_dbconn *c, const int64_t *ids, size_t n,
                                   struct ts_arena *a, const char ***out, size_t *count,
                                   struct ts_error *err)
{
    const char *p[] = {ts_row_id_array(a, ids, n)};
    if (p[0] == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    PGresult *res = NULL;
    enum ts_err e =
        ts_db_exec(c, "SELECT name FROM project WHERE id = ANY($1::bigint[]) ORDER BY name",
                   TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    const char **v = ts_arena_alloc(a, sizeof(*v) * (size_t)(rows + 1));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rows; i++)
        v[i] = ts_row_text(res, i, 0, a);
    *out = v;
    *count = (size_t)rows;
    PQclear(res);
    return TS_OK;
}
