/*
 * sched_json.c - the JSON form of snapshots and results (see sched_json.h).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "server/sched/sched_json.h"

#define GIB 1073741824.0

struct dec {
    struct ts_arena *a;
    struct ts_error *err;
    struct ts_sched_snapshot *s;
};

static enum ts_err fail(struct dec *d, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum ts_err fail(struct dec *d, const char *path, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return ts_error_field(d->err, TS_ERR_INVALID_VALUE, path, "%s: %s", path, msg);
}

static enum ts_err keys(struct dec *d, const json_t *o, const char *path,
                        const char *const *allowed)
{
    if (!json_is_object(o))
        return fail(d, path, "must be an object");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        bool ok = false;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = strcmp(allowed[i], k) == 0;
        if (!ok)
            return ts_error_field(d->err, TS_ERR_UNKNOWN_FIELD, path, "%s: unknown member \"%s\"",
                                  path, k);
    }
    return TS_OK;
}

static enum ts_err num(struct dec *d, const json_t *o, const char *key, const char *path,
                       double def, double *out)
{
    json_t *v = json_object_get(o, key);
    if (v == NULL || json_is_null(v)) {
        *out = def;
        return TS_OK;
    }
    if (!json_is_number(v))
        return fail(d, path, "\"%s\" must be a number", key);
    *out = json_number_value(v);
    if (!isfinite(*out))
        return fail(d, path, "\"%s\" must be finite", key);
    return TS_OK;
}

static enum ts_err integer(struct dec *d, const json_t *o, const char *key, const char *path,
                           int64_t def, int64_t *out)
{
    double x = 0;
    enum ts_err rc = num(d, o, key, path, (double)def, &x);
    if (rc != TS_OK)
        return rc;
    if (x != floor(x) || fabs(x) > 9e15)
        return fail(d, path, "\"%s\" must be an integer: %g", key, x);
    *out = (int64_t)x;
    return TS_OK;
}

static enum ts_err boolean(struct dec *d, const json_t *o, const char *key, const char *path,
                           bool def, bool *out)
{
    json_t *v = json_object_get(o, key);
    if (v == NULL) {
        *out = def;
        return TS_OK;
    }
    if (!json_is_boolean(v))
        return fail(d, path, "\"%s\" must be true or false", key);
    *out = json_is_true(v);
    return TS_OK;
}

static enum ts_err string(struct dec *d, const json_t *o, const char *key, const char *path,
                          bool required, const char **out)
{
    json_t *v = json_object_get(o, key);
    if (v == NULL || json_is_null(v)) {
        if (required)
            return fail(d, path, "\"%s\" is required", key);
        *out = NULL;
        return TS_OK;
    }
    if (!json_is_string(v))
        return fail(d, path, "\"%s\" must be a string", key);
    *out = ts_arena_strdup(d->a, json_string_value(v));
    return *out ? TS_OK : ts_error_set(d->err, TS_ERR_NOMEM, "out of memory");
}

static int64_t gib_bytes(double gib)
{
    return (int64_t)llround(gib * GIB);
}

static enum ts_err gib(struct dec *d, const json_t *o, const char *key, const char *path,
                       double def, int64_t *out)
{
    double x = 0;
    enum ts_err rc = num(d, o, key, path, def, &x);
    if (rc != TS_OK)
        return rc;
    if (x < 0 || x > 1e9)
        return fail(d, path, "\"%s\" must be between 0 and 1e9: %g", key, x);
    *out = gib_bytes(x);
    return TS_OK;
}

static const json_t *array(struct dec *d, const json_t *o, const char *key, enum ts_err *rc)
{
    json_t *v = json_object_get(o, key);
    *rc = TS_OK;
    if (v == NULL)
        return NULL;
    if (!json_is_array(v)) {
        *rc = fail(d, key, "must be an array");
        return NULL;
    }
    return v;
}

static int find_name(const char *name, size_t n, const char *(*get)(const struct dec *, size_t),
                     const struct dec *d)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(get(d, i), name) == 0)
            return (int)i;
    return -1;
}

static const char *dep_name(const struct dec *d, size_t i)
{
    return d->s->departments[i].name;
}
static const char *proj_name(const struct dec *d, size_t i)
{
    return d->s->projects[i].name;
}
static const char *node_name(const struct dec *d, size_t i)
{
    return d->s->nodes[i].name;
}

static enum ts_err labels(struct dec *d, const json_t *o, const char *key, const char *path,
                          const struct ts_sched_label **out, size_t *n)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    *n = 0;
    if (v == NULL)
        return TS_OK;
    if (!json_is_object(v))
        return fail(d, path, "\"%s\" must be an object of strings", key);
    size_t cnt = json_object_size(v);
    struct ts_sched_label *l = ts_arena_alloc(d->a, (cnt ? cnt : 1) * sizeof(*l));
    if (l == NULL)
        return ts_error_set(d->err, TS_ERR_NOMEM, "out of memory");
    const char *k;
    json_t *x;
    size_t i = 0;
    json_object_foreach(v, k, x) {
        if (!json_is_string(x))
            return fail(d, path, "label \"%s\" must be a string", k);
        l[i].key = ts_arena_strdup(d->a, k);
        l[i].value = ts_arena_strdup(d->a, json_string_value(x));
        i++;
    }
    *out = l;
    *n = i;
    return TS_OK;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        enum ts_err rc_ = (x);                                                                     \
        if (rc_ != TS_OK)                                                                          \
            return rc_;                                                                            \
    } while (0)

static enum ts_err quota(struct dec *d, const json_t *o, const char *path, double *q, double *w,
                         bool *has_limit, double *limit, int *prio)
{
    int64_t p;
    TRY(num(d, o, "quota", path, 0, q));
    TRY(num(d, o, "over_quota_weight", path, 1, w));
    json_t *l = json_object_get(o, "limit");
    *has_limit = l != NULL && !json_is_null(l);
    TRY(num(d, o, "limit", path, 0, limit));
    TRY(integer(d, o, "priority", path, 0, &p));
    *prio = (int)p;
    return TS_OK;
}

static enum ts_err request(struct dec *d, const json_t *job, const char *path,
                           struct ts_sched_request *r)
{
    memset(r, 0, sizeof(*r));
    json_t *g = json_object_get(job, "gpu");
    if (g != NULL && !json_is_null(g)) {
        static const char *const allowed[] = {
            "count", "portion", "portion_limit", "memory_gib", "memory_limit_gib", "devices", NULL};
        TRY(keys(d, g, path, allowed));
        int64_t x;
        int kinds = (json_object_get(g, "count") != NULL) +
                    (json_object_get(g, "portion") != NULL) +
                    (json_object_get(g, "memory_gib") != NULL);
        if (kinds != 1)
            return fail(d, path, "\"gpu\" needs exactly one of count, portion, memory_gib");
        if (json_object_get(g, "count")) {
            r->kind = TS_SCHED_GPU_COUNT;
            TRY(integer(d, g, "count", path, 0, &x));
            r->count = (int)x;
        } else if (json_object_get(g, "portion")) {
            r->kind = TS_SCHED_GPU_PORTION;
            TRY(num(d, g, "portion", path, 0, &r->portion));
            TRY(num(d, g, "portion_limit", path, r->portion, &r->portion_limit));
        } else {
            double m = 0, ml = 0;
            r->kind = TS_SCHED_GPU_MEMORY;
            TRY(num(d, g, "memory_gib", path, 0, &m));
            TRY(num(d, g, "memory_limit_gib", path, m, &ml));
            r->memory_bytes = gib_bytes(m);
            r->memory_limit_bytes = gib_bytes(ml);
        }
        TRY(integer(d, g, "devices", path, 1, &x));
        r->devices = (int)x;
    }
    TRY(num(d, job, "cpu", path, 0, &r->cpu));
    TRY(gib(d, job, "memory_gib", path, 0, &r->host_memory_bytes));
    bool swap = true;
    TRY(boolean(d, job, "swap", path, true, &swap));
    r->refuses_swap = !swap;
    enum ts_err rc;
    const json_t *models = array(d, job, "gpu_model", &rc);
    TRY(rc);
    if (models && json_array_size(models) > 0) {
        size_t n = json_array_size(models);
        const char **m = ts_arena_alloc(d->a, n * sizeof(char *));
        if (m == NULL)
            return ts_error_set(d->err, TS_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *x = json_array_get(models, i);
            if (!json_is_string(x))
                return fail(d, path, "\"gpu_model\" must be an array of strings");
            m[i] = ts_arena_strdup(d->a, json_string_value(x));
        }
        r->gpu_models = m;
        r->ngpu_models = n;
    }
    return labels(d, job, "node_selector", path, &r->node_selector, &r->nnode_selector);
}

static int64_t need_bytes(const struct ts_sched_request *r, const struct ts_sched_gpu *g)
{
    int64_t usable = g->memory_bytes - g->reserve_bytes;
    switch (r->kind) {
    case TS_SCHED_GPU_PORTION:
        return r->portion >= 1 ? usable : (int64_t)(r->portion * (double)usable + 1e-6);
    case TS_SCHED_GPU_MEMORY:
        return r->memory_bytes;
    default:
        return usable;
    }
}

/* "suspended_gpus": device indexes on the node it is suspended on (slots
 * with 0 bytes: only the GPUs matter to placement). */
static enum ts_err suspended_gpus(struct dec *d, const json_t *o, const char *path,
                                  const struct ts_sched_gpu *gv, size_t ngpus, struct ts_arena *a,
                                  struct ts_sched_pending *j)
{
    enum ts_err rc;
    const json_t *gl = array(d, o, "suspended_gpus", &rc);
    if (rc != TS_OK || gl == NULL)
        return rc;
    size_t ns = json_array_size(gl);
    if (j->suspended_node < 0)
        return fail(d, path, "\"suspended_gpus\" needs \"suspended_on\"");
    if (ns > TS_SCHED_MAX_DEVICES)
        return fail(d, path, "too many GPUs");
    struct ts_sched_slot *sl = ts_arena_alloc(a, (ns ? ns : 1) * sizeof(*sl));
    if (sl == NULL)
        return ts_error_set(d->err, TS_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < ns; k++) {
        json_t *gi = json_array_get(gl, k);
        if (!json_is_integer(gi))
            return fail(d, path, "\"suspended_gpus\" must list device indexes");
        int idx = (int)json_integer_value(gi), found = -1;
        for (size_t q = 0; q < ngpus && found < 0; q++)
            if (gv[q].node == j->suspended_node && gv[q].index == idx)
                found = (int)q;
        if (found < 0)
            return fail(d, path, "its node has no GPU %d", idx);
        sl[k] = (struct ts_sched_slot){.gpu = found, .memory_bytes = 0};
    }
    j->suspended_slots = sl;
    j->nsuspended_slots = ns;
    return TS_OK;
}

enum ts_err ts_sched_snapshot_from_json(const json_t *in, struct ts_arena *a,
                                        struct ts_sched_snapshot *out, struct ts_error *err)
{
    struct dec dd = {a, err, out}, *d = &dd;
    memset(out, 0, sizeof(*out));
    static const char *const top[] = {"now",    "config",      "departments", "projects",
                                      "nodes",  "running",     "pending",     "shapes",
                                      "expect", "description", NULL};
    TRY(keys(d, in, "snapshot", top));
    TRY(integer(d, in, "now", "now", 0, &out->now));
    json_t *cfg = json_object_get(in, "config");
    if (cfg) {
        static const char *const ck[] = {"strategy", "min_runtime_s", "usage_half_life_s",
                                         "max_passes", NULL};
        int64_t mp;
        TRY(keys(d, cfg, "config", ck));
        TRY(string(d, cfg, "strategy", "config", false, &out->config.strategy));
        TRY(integer(d, cfg, "min_runtime_s", "config", 0, &out->config.min_runtime_s));
        TRY(num(d, cfg, "usage_half_life_s", "config", 0, &out->config.usage_half_life_s));
        TRY(integer(d, cfg, "max_passes", "config", 0, &mp));
        out->config.max_passes = (int)mp;
    }
    enum ts_err rc;
    char path[96];

    const json_t *deps = array(d, in, "departments", &rc);
    TRY(rc);
    size_t n = deps ? json_array_size(deps) : 0;
    struct ts_sched_department *dv = ts_arena_alloc(a, (n ? n : 1) * sizeof(*dv));
    if (dv == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    out->departments = dv;
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(deps, i);
        static const char *const k[] = {"id",    "name",     "quota", "over_quota_weight",
                                        "limit", "priority", NULL};
        snprintf(path, sizeof(path), "departments[%zu]", i);
        TRY(keys(d, o, path, k));
        TRY(integer(d, o, "id", path, (int64_t)i + 1, &dv[i].id));
        TRY(string(d, o, "name", path, true, &dv[i].name));
        TRY(quota(d, o, path, &dv[i].quota_gpus, &dv[i].over_quota_weight, &dv[i].has_limit,
                  &dv[i].limit_gpus, &dv[i].priority));
        out->ndepartments++;
    }

    const json_t *projs = array(d, in, "projects", &rc);
    TRY(rc);
    n = projs ? json_array_size(projs) : 0;
    struct ts_sched_project *pv = ts_arena_alloc(a, (n ? n : 1) * sizeof(*pv));
    if (pv == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    out->projects = pv;
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(projs, i);
        static const char *const k[] = {
            "id",    "name",     "department",        "quota",         "over_quota_weight",
            "limit", "priority", "usage_gpu_seconds", "min_runtime_s", NULL};
        snprintf(path, sizeof(path), "projects[%zu]", i);
        TRY(keys(d, o, path, k));
        TRY(integer(d, o, "id", path, (int64_t)i + 1, &pv[i].id));
        TRY(string(d, o, "name", path, true, &pv[i].name));
        const char *dep;
        TRY(string(d, o, "department", path, false, &dep));
        pv[i].department = -1;
        if (dep && (pv[i].department = find_name(dep, out->ndepartments, dep_name, d)) < 0)
            return fail(d, path, "no department \"%s\"", dep);
        TRY(quota(d, o, path, &pv[i].quota_gpus, &pv[i].over_quota_weight, &pv[i].has_limit,
                  &pv[i].limit_gpus, &pv[i].priority));
        TRY(num(d, o, "usage_gpu_seconds", path, 0, &pv[i].usage_gpu_seconds));
        TRY(integer(d, o, "min_runtime_s", path, -1, &pv[i].min_runtime_s));
        out->nprojects++;
    }

    const json_t *nodes = array(d, in, "nodes", &rc);
    TRY(rc);
    n = nodes ? json_array_size(nodes) : 0;
    struct ts_sched_node *nv = ts_arena_alloc(a, (n ? n : 1) * sizeof(*nv));
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *g = json_object_get(json_array_get(nodes, i), "gpus");
        ng += json_is_integer(g) ? (size_t)json_integer_value(g) : json_array_size(g);
        if (ng > 1000000)
            return fail(d, "nodes", "too many GPUs");
    }
    struct ts_sched_gpu *gv = ts_arena_alloc(a, (ng ? ng : 1) * sizeof(*gv));
    if (nv == NULL || gv == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    out->nodes = nv;
    out->gpus = gv;
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(nodes, i);
        static const char *const k[] = {
            "id",         "name",           "ready",           "cpu",
            "memory_gib", "labels",         "swap_free_gib",   "gpus",
            "gpu_model",  "gpu_memory_gib", "gpu_reserve_gib", "collision",
            NULL};
        snprintf(path, sizeof(path), "nodes[%zu]", i);
        TRY(keys(d, o, path, k));
        TRY(integer(d, o, "id", path, (int64_t)i + 1, &nv[i].id));
        TRY(string(d, o, "name", path, true, &nv[i].name));
        TRY(boolean(d, o, "ready", path, true, &nv[i].ready));
        TRY(num(d, o, "cpu", path, 64, &nv[i].cpu));
        TRY(gib(d, o, "memory_gib", path, 512, &nv[i].memory_bytes));
        TRY(gib(d, o, "swap_free_gib", path, 0, &nv[i].swap_free_bytes));
        TRY(labels(d, o, "labels", path, &nv[i].labels, &nv[i].nlabels));
        const char *coll;
        TRY(string(d, o, "collision", path, false, &coll));
        if (coll && strcmp(coll, "wait") != 0 && strcmp(coll, "priority") != 0 &&
            strcmp(coll, "swap") != 0)
            return fail(d, path, "\"collision\" must be wait, priority or swap");
        nv[i].swap_resolver = coll && strcmp(coll, "swap") == 0;
        const char *model;
        int64_t mem, res;
        TRY(string(d, o, "gpu_model", path, false, &model));
        TRY(gib(d, o, "gpu_memory_gib", path, 80, &mem));
        TRY(gib(d, o, "gpu_reserve_gib", path, 0, &res));
        json_t *g = json_object_get(o, "gpus");
        if (json_is_integer(g)) {
            for (json_int_t k2 = 0; k2 < json_integer_value(g); k2++) {
                struct ts_sched_gpu *x = &gv[out->ngpus++];
                x->node = (int)i;
                x->index = (int)k2;
                x->model = model ? model : "";
                x->memory_bytes = mem;
                x->reserve_bytes = res;
            }
        } else if (json_is_array(g)) {
            for (size_t k2 = 0; k2 < json_array_size(g); k2++) {
                const json_t *go = json_array_get(g, k2);
                static const char *const gk[] = {"model", "memory_gib", "reserve_gib", NULL};
                TRY(keys(d, go, path, gk));
                struct ts_sched_gpu *x = &gv[out->ngpus++];
                x->node = (int)i;
                x->index = (int)k2;
                TRY(string(d, go, "model", path, false, &x->model));
                if (x->model == NULL)
                    x->model = model ? model : "";
                TRY(gib(d, go, "memory_gib", path, (double)mem / GIB, &x->memory_bytes));
                TRY(gib(d, go, "reserve_gib", path, (double)res / GIB, &x->reserve_bytes));
            }
        } else if (g != NULL) {
            return fail(d, path, "\"gpus\" must be a count or an array");
        }
        out->nnodes++;
    }

    const json_t *run = array(d, in, "running", &rc);
    TRY(rc);
    const json_t *pend = array(d, in, "pending", &rc);
    TRY(rc);
    size_t nr = run ? json_array_size(run) : 0, np = pend ? json_array_size(pend) : 0;
    struct ts_sched_running *rv = ts_arena_alloc(a, (nr ? nr : 1) * sizeof(*rv));
    struct ts_sched_pending *qv = ts_arena_alloc(a, (np ? np : 1) * sizeof(*qv));
    if (rv == NULL || qv == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    out->running = rv;
    out->pending = qv;
    for (size_t i = 0; i < nr; i++) {
        const json_t *o = json_array_get(run, i);
        static const char *const k[] = {
            "id",         "name",       "project",         "priority",      "preemptible", "gpu",
            "cpu",        "memory_gib", "gpu_model",       "node_selector", "node",        "gpus",
            "started_at", "swap",       "memory_used_gib", "swapped_gib",   NULL};
        snprintf(path, sizeof(path), "running[%zu]", i);
        TRY(keys(d, o, path, k));
        struct ts_sched_running *j = &rv[i];
        int64_t x;
        const char *pn, *nn;
        TRY(integer(d, o, "id", path, (int64_t)i + 1, &j->id));
        TRY(string(d, o, "name", path, true, &j->name));
        TRY(string(d, o, "project", path, true, &pn));
        if ((j->project = find_name(pn, out->nprojects, proj_name, d)) < 0)
            return fail(d, path, "no project \"%s\"", pn);
        TRY(integer(d, o, "priority", path, 50, &x));
        j->priority = (int)x;
        TRY(boolean(d, o, "preemptible", path, true, &j->preemptible));
        TRY(request(d, o, path, &j->request));
        TRY(string(d, o, "node", path, true, &nn));
        if ((j->node = find_name(nn, out->nnodes, node_name, d)) < 0)
            return fail(d, path, "no node \"%s\"", nn);
        TRY(integer(d, o, "started_at", path, 0, &j->started_at));
        TRY(gib(d, o, "memory_used_gib", path, 0, &j->memory_used_bytes));
        TRY(gib(d, o, "swapped_gib", path, 0, &j->swapped_bytes));
        const json_t *gl = array(d, o, "gpus", &rc);
        TRY(rc);
        size_t ns = gl ? json_array_size(gl) : 0;
        if (ns > TS_SCHED_MAX_DEVICES)
            return fail(d, path, "too many GPUs");
        struct ts_sched_slot *sl = ts_arena_alloc(a, (ns ? ns : 1) * sizeof(*sl));
        if (sl == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        for (size_t k2 = 0; k2 < ns; k2++) {
            json_t *gi = json_array_get(gl, k2);
            if (!json_is_integer(gi))
                return fail(d, path, "\"gpus\" must list device indexes");
            int idx = (int)json_integer_value(gi), found = -1;
            for (size_t q = 0; q < out->ngpus && found < 0; q++)
                if (gv[q].node == j->node && gv[q].index == idx)
                    found = (int)q;
            if (found < 0)
                return fail(d, path, "node \"%s\" has no GPU %d", nn, idx);
            sl[k2].gpu = found;
            sl[k2].memory_bytes = need_bytes(&j->request, &gv[found]);
        }
        j->slots = sl;
        j->nslots = ns;
        out->nrunning++;
    }
    for (size_t i = 0; i < np; i++) {
        const json_t *o = json_array_get(pend, i);
        static const char *const k[] = {
            "id",           "name",         "project",        "priority",  "preemptible",
            "gpu",          "cpu",          "memory_gib",     "gpu_model", "node_selector",
            "submitted_at", "suspended_on", "suspended_gpus", "swap",      NULL};
        snprintf(path, sizeof(path), "pending[%zu]", i);
        TRY(keys(d, o, path, k));
        struct ts_sched_pending *j = &qv[i];
        int64_t x;
        const char *pn, *sn;
        TRY(integer(d, o, "id", path, (int64_t)(nr + i) + 1, &j->id));
        TRY(string(d, o, "name", path, true, &j->name));
        TRY(string(d, o, "project", path, true, &pn));
        if ((j->project = find_name(pn, out->nprojects, proj_name, d)) < 0)
            return fail(d, path, "no project \"%s\"", pn);
        TRY(integer(d, o, "priority", path, 50, &x));
        j->priority = (int)x;
        TRY(boolean(d, o, "preemptible", path, true, &j->preemptible));
        TRY(request(d, o, path, &j->request));
        TRY(integer(d, o, "submitted_at", path, 0, &j->submitted_at));
        TRY(string(d, o, "suspended_on", path, false, &sn));
        j->suspended_node = -1;
        if (sn && (j->suspended_node = find_name(sn, out->nnodes, node_name, d)) < 0)
            return fail(d, path, "no node \"%s\"", sn);
        TRY(suspended_gpus(d, o, path, gv, out->ngpus, a, j));
        out->npending++;
    }
    const json_t *shapes = array(d, in, "shapes", &rc);
    TRY(rc);
    n = shapes ? json_array_size(shapes) : 0;
    struct ts_sched_shape *sv = ts_arena_alloc(a, (n ? n : 1) * sizeof(*sv));
    if (sv == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    out->shapes = sv;
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(shapes, i);
        static const char *const k[] = {"count",  "portion",   "cpu", "memory_gib",
                                        "weight", "gpu_model", NULL};
        int64_t c;
        snprintf(path, sizeof(path), "shapes[%zu]", i);
        TRY(keys(d, o, path, k));
        TRY(integer(d, o, "count", path, 0, &c));
        sv[i].count = (int)c;
        TRY(num(d, o, "portion", path, 0, &sv[i].portion));
        TRY(num(d, o, "cpu", path, 0, &sv[i].cpu));
        TRY(gib(d, o, "memory_gib", path, 0, &sv[i].host_memory_bytes));
        TRY(num(d, o, "weight", path, 1, &sv[i].weight));
        const json_t *models = array(d, o, "gpu_model", &rc);
        TRY(rc);
        size_t nm = models ? json_array_size(models) : 0;
        const char **m = ts_arena_alloc(a, (nm ? nm : 1) * sizeof(char *));
        if (m == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        for (size_t q = 0; q < nm; q++) {
            const json_t *x = json_array_get(models, q);
            if (!json_is_string(x))
                return fail(d, path, "\"gpu_model\" must be an array of strings");
            m[q] = ts_arena_strdup(a, json_string_value(x));
        }
        sv[i].gpu_models = m;
        sv[i].ngpu_models = nm;
        out->nshapes++;
    }
    return TS_OK;
}

/* ---- encoding ------------------------------------------------------------ */

const char *ts_sched_action_name(enum ts_sched_action a)
{
    switch (a) {
    case TS_SCHED_BIND:
        return "bind";
    case TS_SCHED_EVICT:
        return "evict";
    case TS_SCHED_SUSPEND:
        return "suspend";
    }
    return "unknown";
}

static json_t *gib_json(int64_t b)
{
    return json_real((double)b / GIB);
}

static json_t *quota_json(json_t *o, double q, double w, bool has_limit, double limit, int prio)
{
    json_object_set_new(o, "quota", json_real(q));
    json_object_set_new(o, "over_quota_weight", json_real(w));
    json_object_set_new(o, "limit", has_limit ? json_real(limit) : json_null());
    json_object_set_new(o, "priority", json_integer(prio));
    return o;
}

static json_t *labels_json(const struct ts_sched_label *l, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(o, l[i].key, json_string(l[i].value));
    return o;
}

static void request_json(json_t *o, const struct ts_sched_request *r)
{
    json_t *g = NULL;
    switch (r->kind) {
    case TS_SCHED_GPU_COUNT:
        g = json_pack("{s:i}", "count", r->count);
        break;
    case TS_SCHED_GPU_PORTION:
        g = json_pack("{s:f,s:i}", "portion", r->portion, "devices", r->devices ? r->devices : 1);
        if (r->portion_limit > r->portion)
            json_object_set_new(g, "portion_limit", json_real(r->portion_limit));
        break;
    case TS_SCHED_GPU_MEMORY:
        g = json_pack("{s:o,s:i}", "memory_gib", gib_json(r->memory_bytes), "devices",
                      r->devices ? r->devices : 1);
        if (r->memory_limit_bytes > r->memory_bytes)
            json_object_set_new(g, "memory_limit_gib", gib_json(r->memory_limit_bytes));
        break;
    default:
        break;
    }
    if (g)
        json_object_set_new(o, "gpu", g);
    json_object_set_new(o, "cpu", json_real(r->cpu));
    json_object_set_new(o, "memory_gib", gib_json(r->host_memory_bytes));
    if (r->ngpu_models) {
        json_t *m = json_array();
        for (size_t i = 0; i < r->ngpu_models; i++)
            json_array_append_new(m, json_string(r->gpu_models[i]));
        json_object_set_new(o, "gpu_model", m);
    }
    if (r->nnode_selector)
        json_object_set_new(o, "node_selector", labels_json(r->node_selector, r->nnode_selector));
    if (r->refuses_swap)
        json_object_set_new(o, "swap", json_false());
}

json_t *ts_sched_snapshot_to_json(const struct ts_sched_snapshot *s)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    json_object_set_new(o, "now", json_integer(s->now));
    json_t *cfg = json_object();
    if (s->config.strategy)
        json_object_set_new(cfg, "strategy", json_string(s->config.strategy));
    json_object_set_new(cfg, "min_runtime_s", json_integer(s->config.min_runtime_s));
    json_object_set_new(cfg, "usage_half_life_s", json_real(s->config.usage_half_life_s));
    json_object_set_new(cfg, "max_passes", json_integer(s->config.max_passes));
    json_object_set_new(o, "config", cfg);
    json_t *a = json_array();
    for (size_t i = 0; i < s->ndepartments; i++) {
        const struct ts_sched_department *d = &s->departments[i];
        json_t *x = json_pack("{s:I,s:s}", "id", (json_int_t)d->id, "name", d->name);
        json_array_append_new(a, quota_json(x, d->quota_gpus, d->over_quota_weight, d->has_limit,
                                            d->limit_gpus, d->priority));
    }
    json_object_set_new(o, "departments", a);
    a = json_array();
    for (size_t i = 0; i < s->nprojects; i++) {
        const struct ts_sched_project *p = &s->projects[i];
        json_t *x = json_pack("{s:I,s:s}", "id", (json_int_t)p->id, "name", p->name);
        if (p->department >= 0)
            json_object_set_new(x, "department", json_string(s->departments[p->department].name));
        quota_json(x, p->quota_gpus, p->over_quota_weight, p->has_limit, p->limit_gpus,
                   p->priority);
        json_object_set_new(x, "usage_gpu_seconds", json_real(p->usage_gpu_seconds));
        json_object_set_new(x, "min_runtime_s", json_integer(p->min_runtime_s));
        json_array_append_new(a, x);
    }
    json_object_set_new(o, "projects", a);
    a = json_array();
    for (size_t i = 0; i < s->nnodes; i++) {
        const struct ts_sched_node *n = &s->nodes[i];
        json_t *x = json_pack(
            "{s:I,s:s,s:b,s:f,s:o,s:o,s:o}", "id", (json_int_t)n->id, "name", n->name, "ready",
            n->ready, "cpu", n->cpu, "memory_gib", gib_json(n->memory_bytes), "swap_free_gib",
            gib_json(n->swap_free_bytes), "labels", labels_json(n->labels, n->nlabels));
        json_t *g = json_array();
        for (size_t k = 0; k < s->ngpus; k++)
            if (s->gpus[k].node == (int)i)
                json_array_append_new(g,
                                      json_pack("{s:s,s:o,s:o}", "model", s->gpus[k].model,
                                                "memory_gib", gib_json(s->gpus[k].memory_bytes),
                                                "reserve_gib", gib_json(s->gpus[k].reserve_bytes)));
        json_object_set_new(x, "gpus", g);
        if (n->swap_resolver)
            json_object_set_new(x, "collision", json_string("swap"));
        json_array_append_new(a, x);
    }
    json_object_set_new(o, "nodes", a);
    a = json_array();
    for (size_t i = 0; i < s->nrunning; i++) {
        const struct ts_sched_running *j = &s->running[i];
        json_t *x = json_pack("{s:I,s:s,s:s,s:i,s:b,s:s,s:I}", "id", (json_int_t)j->id, "name",
                              j->name, "project", s->projects[j->project].name, "priority",
                              j->priority, "preemptible", j->preemptible, "node",
                              s->nodes[j->node].name, "started_at", (json_int_t)j->started_at);
        request_json(x, &j->request);
        if (j->memory_used_bytes > 0)
            json_object_set_new(x, "memory_used_gib", gib_json(j->memory_used_bytes));
        if (j->swapped_bytes > 0)
            json_object_set_new(x, "swapped_gib", gib_json(j->swapped_bytes));
        json_t *g = json_array();
        for (size_t k = 0; k < j->nslots; k++)
            json_array_append_new(g, json_integer(s->gpus[j->slots[k].gpu].index));
        json_object_set_new(x, "gpus", g);
        json_array_append_new(a, x);
    }
    json_object_set_new(o, "running", a);
    a = json_array();
    for (size_t i = 0; i < s->npending; i++) {
        const struct ts_sched_pending *j = &s->pending[i];
        json_t *x =
            json_pack("{s:I,s:s,s:s,s:i,s:b,s:I}", "id", (json_int_t)j->id, "name", j->name,
                      "project", s->projects[j->project].name, "priority", j->priority,
                      "preemptible", j->preemptible, "submitted_at", (json_int_t)j->submitted_at);
        request_json(x, &j->request);
        if (j->suspended_node >= 0)
            json_object_set_new(x, "suspended_on", json_string(s->nodes[j->suspended_node].name));
        if (j->nsuspended_slots > 0) {
            json_t *g = json_array();
            for (size_t k = 0; k < j->nsuspended_slots; k++)
                json_array_append_new(g, json_integer(s->gpus[j->suspended_slots[k].gpu].index));
            json_object_set_new(x, "suspended_gpus", g);
        }
        json_array_append_new(a, x);
    }
    json_object_set_new(o, "pending", a);
    if (s->nshapes) {
        a = json_array();
        for (size_t i = 0; i < s->nshapes; i++) {
            json_t *x =
                json_pack("{s:i,s:f,s:f,s:o,s:f}", "count", s->shapes[i].count, "portion",
                          s->shapes[i].portion, "cpu", s->shapes[i].cpu, "memory_gib",
                          gib_json(s->shapes[i].host_memory_bytes), "weight", s->shapes[i].weight);
            if (s->shapes[i].ngpu_models) {
                json_t *m = json_array();
                for (size_t q = 0; q < s->shapes[i].ngpu_models; q++)
                    json_array_append_new(m, json_string(s->shapes[i].gpu_models[q]));
                json_object_set_new(x, "gpu_model", m);
            }
            json_array_append_new(a, x);
        }
        json_object_set_new(o, "shapes", a);
    }
    return o;
}

static const char *job_name(const struct ts_sched_snapshot *s, bool running, int job)
{
    if (job < 0)
        return "";
    return running ? s->running[job].name : s->pending[job].name;
}

json_t *ts_sched_result_to_json(const struct ts_sched_snapshot *s, const struct ts_sched_result *r)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    json_t *a = json_array();
    for (size_t i = 0; i < r->ndecisions; i++) {
        const struct ts_sched_decision *d = &r->decisions[i];
        json_t *x = json_pack(
            "{s:s,s:I,s:s,s:s,s:f,s:s,s:s}", "action", ts_sched_action_name(d->action), "job_id",
            (json_int_t)d->job_id, "job", job_name(s, d->job_was_running, d->job), "node",
            s->nodes[d->node].name, "gpus_total", d->gpus, "code", d->code, "message", d->message);
        json_t *g = json_array();
        for (size_t k = 0; k < d->nslots; k++)
            json_array_append_new(g, json_integer(s->gpus[d->slots[k].gpu].index));
        json_object_set_new(x, "gpus", g);
        if (d->action != TS_SCHED_BIND)
            json_object_set_new(x, "for_job_id", json_integer(d->for_job_id));
        json_array_append_new(a, x);
    }
    json_object_set_new(o, "decisions", a);
    a = json_array();
    for (size_t i = 0; i < r->npending; i++) {
        const struct ts_sched_pending_reason *p = &r->pending[i];
        const char *name = "";
        if (p->job >= 0)
            name = s->pending[p->job].name;
        else
            for (size_t k = 0; k < s->nrunning; k++)
                if (s->running[k].id == p->job_id)
                    name = s->running[k].name;
        json_array_append_new(a, json_pack("{s:s,s:I,s:s,s:s,s:I}", "job", name, "job_id",
                                           (json_int_t)p->job_id, "code", p->code, "message",
                                           p->message, "position", (json_int_t)p->queue_position));
    }
    json_object_set_new(o, "pending", a);
    a = json_array();
    for (size_t i = 0; i < r->nshares; i++) {
        const struct ts_sched_share *sh = &r->shares[i];
        json_array_append_new(a,
                              json_pack("{s:s,s:f,s:f,s:f,s:f}", "project", s->projects[i].name,
                                        "demand", sh->demand, "deserved", sh->deserved,
                                        "fair_share", sh->fair_share, "allocated", sh->allocated));
    }
    json_object_set_new(o, "shares", a);
    json_object_set_new(o, "passes", json_integer(r->passes));
    return o;
}
