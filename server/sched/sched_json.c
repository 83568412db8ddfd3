/*
 * sched_json.c - snapshots read from their JSON form (see sched_json.h;
 * sched_json_enc.c writes snapshots and results).
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
    /* the snapshot's arrays, writable while they are decoded */
    struct ts_sched_node *nodes;
    struct ts_sched_gpu *gpus;
    struct ts_sched_running *running;
    struct ts_sched_pending *pending;
    struct ts_sched_shape *shapes;
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
        char gpath[112];
        snprintf(gpath, sizeof(gpath), "%s.gpu", path);
        TRY(keys(d, g, gpath, allowed));
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

#define NOMEM(d) ts_error_set((d)->err, TS_ERR_NOMEM, "out of memory")

static enum ts_err config(struct dec *d, const json_t *in)
{
    struct ts_sched_config *c = &d->s->config;
    json_t *cfg = json_object_get(in, "config");
    if (cfg == NULL)
        return TS_OK;
    static const char *const ck[] = {"strategy", "min_runtime_s", "usage_half_life_s", "max_passes",
                                     NULL};
    int64_t mp;
    TRY(keys(d, cfg, "config", ck));
    TRY(string(d, cfg, "strategy", "config", false, &c->strategy));
    TRY(integer(d, cfg, "min_runtime_s", "config", 0, &c->min_runtime_s));
    TRY(num(d, cfg, "usage_half_life_s", "config", 0, &c->usage_half_life_s));
    TRY(integer(d, cfg, "max_passes", "config", 0, &mp));
    c->max_passes = (int)mp;
    return TS_OK;
}

static enum ts_err departments(struct dec *d, const json_t *in)
{
    enum ts_err rc;
    char path[96];
    const json_t *deps = array(d, in, "departments", &rc);
    TRY(rc);
    size_t n = deps ? json_array_size(deps) : 0;
    struct ts_sched_department *dv = ts_arena_alloc(d->a, (n ? n : 1) * sizeof(*dv));
    if (dv == NULL)
        return NOMEM(d);
    d->s->departments = dv;
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
        d->s->ndepartments++;
    }
    return TS_OK;
}

static enum ts_err projects(struct dec *d, const json_t *in)
{
    enum ts_err rc;
    char path[96];
    const json_t *projs = array(d, in, "projects", &rc);
    TRY(rc);
    size_t n = projs ? json_array_size(projs) : 0;
    struct ts_sched_project *pv = ts_arena_alloc(d->a, (n ? n : 1) * sizeof(*pv));
    if (pv == NULL)
        return NOMEM(d);
    d->s->projects = pv;
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
        if (dep && (pv[i].department = find_name(dep, d->s->ndepartments, dep_name, d)) < 0)
            return fail(d, path, "no department \"%s\"", dep);
        TRY(quota(d, o, path, &pv[i].quota_gpus, &pv[i].over_quota_weight, &pv[i].has_limit,
                  &pv[i].limit_gpus, &pv[i].priority));
        TRY(num(d, o, "usage_gpu_seconds", path, 0, &pv[i].usage_gpu_seconds));
        TRY(integer(d, o, "min_runtime_s", path, -1, &pv[i].min_runtime_s));
        d->s->nprojects++;
    }
    return TS_OK;
}

/* Node i's GPUs ("gpus": a count of GPUs like the node's defaults, or an
 * array of objects that override them) appended to the snapshot's. */
static enum ts_err node_gpus(struct dec *d, const json_t *o, const char *path, size_t i)
{
    struct ts_sched_snapshot *s = d->s;
    const char *model;
    int64_t mem, res;
    TRY(string(d, o, "gpu_model", path, false, &model));
    TRY(gib(d, o, "gpu_memory_gib", path, 80, &mem));
    TRY(gib(d, o, "gpu_reserve_gib", path, 0, &res));
    json_t *g = json_object_get(o, "gpus");
    if (json_is_integer(g)) {
        for (json_int_t k = 0; k < json_integer_value(g); k++) {
            struct ts_sched_gpu *x = &d->gpus[s->ngpus++];
            x->node = (int)i;
            x->index = (int)k;
            x->model = model ? model : "";
            x->memory_bytes = mem;
            x->reserve_bytes = res;
        }
    } else if (json_is_array(g)) {
        for (size_t k = 0; k < json_array_size(g); k++) {
            const json_t *go = json_array_get(g, k);
            static const char *const gk[] = {"model", "memory_gib", "reserve_gib", NULL};
            TRY(keys(d, go, path, gk));
            struct ts_sched_gpu *x = &d->gpus[s->ngpus++];
            x->node = (int)i;
            x->index = (int)k;
            TRY(string(d, go, "model", path, false, &x->model));
            if (x->model == NULL)
                x->model = model ? model : "";
            TRY(gib(d, go, "memory_gib", path, (double)mem / GIB, &x->memory_bytes));
            TRY(gib(d, go, "reserve_gib", path, (double)res / GIB, &x->reserve_bytes));
        }
    } else if (g != NULL) {
        return fail(d, path, "\"gpus\" must be a count or an array");
    }
    return TS_OK;
}

static enum ts_err node(struct dec *d, const json_t *o, const char *path, size_t i)
{
    struct ts_sched_node *nd = &d->nodes[i];
    static const char *const k[] = {"id",         "name",           "ready",           "cpu",
                                    "memory_gib", "labels",         "swap_free_gib",   "gpus",
                                    "gpu_model",  "gpu_memory_gib", "gpu_reserve_gib", "collision",
                                    NULL};
    TRY(keys(d, o, path, k));
    TRY(integer(d, o, "id", path, (int64_t)i + 1, &nd->id));
    TRY(string(d, o, "name", path, true, &nd->name));
    TRY(boolean(d, o, "ready", path, true, &nd->ready));
    TRY(num(d, o, "cpu", path, 64, &nd->cpu));
    TRY(gib(d, o, "memory_gib", path, 512, &nd->memory_bytes));
    TRY(gib(d, o, "swap_free_gib", path, 0, &nd->swap_free_bytes));
    TRY(labels(d, o, "labels", path, &nd->labels, &nd->nlabels));
    const char *coll;
    TRY(string(d, o, "collision", path, false, &coll));
    if (coll && strcmp(coll, "wait") != 0 && strcmp(coll, "priority") != 0 &&
        strcmp(coll, "swap") != 0)
        return fail(d, path, "\"collision\" must be wait, priority or swap");
    nd->swap_resolver = coll && strcmp(coll, "swap") == 0;
    return node_gpus(d, o, path, i);
}

static enum ts_err nodes(struct dec *d, const json_t *in)
{
    enum ts_err rc;
    char path[96];
    const json_t *nodes = array(d, in, "nodes", &rc);
    TRY(rc);
    size_t n = nodes ? json_array_size(nodes) : 0, ng = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *g = json_object_get(json_array_get(nodes, i), "gpus");
        ng += json_is_integer(g) ? (size_t)json_integer_value(g) : json_array_size(g);
        if (ng > 1000000)
            return fail(d, "nodes", "too many GPUs");
    }
    d->s->nodes = d->nodes = ts_arena_alloc(d->a, (n ? n : 1) * sizeof(*d->nodes));
    d->s->gpus = d->gpus = ts_arena_alloc(d->a, (ng ? ng : 1) * sizeof(*d->gpus));
    if (d->nodes == NULL || d->gpus == NULL)
        return NOMEM(d);
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "nodes[%zu]", i);
        TRY(node(d, json_array_get(nodes, i), path, i));
        d->s->nnodes++;
    }
    return TS_OK;
}

/* A running job's "gpus": device indexes on its node, into slots. */
static enum ts_err running_slots(struct dec *d, const json_t *o, const char *path, const char *nn,
                                 struct ts_sched_running *j)
{
    const struct ts_sched_snapshot *s = d->s;
    enum ts_err rc;
    const json_t *gl = array(d, o, "gpus", &rc);
    TRY(rc);
    size_t ns = gl ? json_array_size(gl) : 0;
    if (ns > TS_SCHED_MAX_DEVICES)
        return fail(d, path, "too many GPUs");
    struct ts_sched_slot *sl = ts_arena_alloc(d->a, (ns ? ns : 1) * sizeof(*sl));
    if (sl == NULL)
        return NOMEM(d);
    for (size_t k = 0; k < ns; k++) {
        json_t *gi = json_array_get(gl, k);
        if (!json_is_integer(gi))
            return fail(d, path, "\"gpus\" must list device indexes");
        int idx = (int)json_integer_value(gi), found = -1;
        for (size_t q = 0; q < s->ngpus && found < 0; q++)
            if (s->gpus[q].node == j->node && s->gpus[q].index == idx)
                found = (int)q;
        if (found < 0)
            return fail(d, path, "node \"%s\" has no GPU %d", nn, idx);
        sl[k].gpu = found;
        sl[k].memory_bytes = need_bytes(&j->request, &s->gpus[found]);
    }
    j->slots = sl;
    j->nslots = ns;
    return TS_OK;
}

static enum ts_err running(struct dec *d, const json_t *o, const char *path, size_t i)
{
    static const char *const k[] = {
        "id",         "name",       "project",         "priority",      "preemptible", "gpu",
        "cpu",        "memory_gib", "gpu_model",       "node_selector", "node",        "gpus",
        "started_at", "swap",       "memory_used_gib", "swapped_gib",   NULL};
    struct ts_sched_running *j = &d->running[i];
    int64_t x;
    const char *pn, *nn;
    TRY(keys(d, o, path, k));
    TRY(integer(d, o, "id", path, (int64_t)i + 1, &j->id));
    TRY(string(d, o, "name", path, true, &j->name));
    TRY(string(d, o, "project", path, true, &pn));
    if ((j->project = find_name(pn, d->s->nprojects, proj_name, d)) < 0)
        return fail(d, path, "no project \"%s\"", pn);
    TRY(integer(d, o, "priority", path, 50, &x));
    j->priority = (int)x;
    TRY(boolean(d, o, "preemptible", path, true, &j->preemptible));
    TRY(request(d, o, path, &j->request));
    TRY(string(d, o, "node", path, true, &nn));
    if ((j->node = find_name(nn, d->s->nnodes, node_name, d)) < 0)
        return fail(d, path, "no node \"%s\"", nn);
    TRY(integer(d, o, "started_at", path, 0, &j->started_at));
    TRY(gib(d, o, "memory_used_gib", path, 0, &j->memory_used_bytes));
    TRY(gib(d, o, "swapped_gib", path, 0, &j->swapped_bytes));
    return running_slots(d, o, path, nn, j);
}

static enum ts_err pending(struct dec *d, const json_t *o, const char *path, size_t i, size_t nr)
{
    static const char *const k[] = {
        "id",           "name",         "project",        "priority",  "preemptible",
        "gpu",          "cpu",          "memory_gib",     "gpu_model", "node_selector",
        "submitted_at", "suspended_on", "suspended_gpus", "swap",      NULL};
    struct ts_sched_pending *j = &d->pending[i];
    int64_t x;
    const char *pn, *sn;
    TRY(keys(d, o, path, k));
    TRY(integer(d, o, "id", path, (int64_t)(nr + i) + 1, &j->id));
    TRY(string(d, o, "name", path, true, &j->name));
    TRY(string(d, o, "project", path, true, &pn));
    if ((j->project = find_name(pn, d->s->nprojects, proj_name, d)) < 0)
        return fail(d, path, "no project \"%s\"", pn);
    TRY(integer(d, o, "priority", path, 50, &x));
    j->priority = (int)x;
    TRY(boolean(d, o, "preemptible", path, true, &j->preemptible));
    TRY(request(d, o, path, &j->request));
    TRY(integer(d, o, "submitted_at", path, 0, &j->submitted_at));
    TRY(string(d, o, "suspended_on", path, false, &sn));
    j->suspended_node = -1;
    if (sn && (j->suspended_node = find_name(sn, d->s->nnodes, node_name, d)) < 0)
        return fail(d, path, "no node \"%s\"", sn);
    return suspended_gpus(d, o, path, d->s->gpus, d->s->ngpus, d->a, j);
}

/* The running jobs, then the pending ones (whose ids follow by default). */
static enum ts_err jobs(struct dec *d, const json_t *in)
{
    enum ts_err rc;
    char path[96];
    const json_t *run = array(d, in, "running", &rc);
    TRY(rc);
    const json_t *pend = array(d, in, "pending", &rc);
    TRY(rc);
    size_t nr = run ? json_array_size(run) : 0, np = pend ? json_array_size(pend) : 0;
    d->s->running = d->running = ts_arena_alloc(d->a, (nr ? nr : 1) * sizeof(*d->running));
    d->s->pending = d->pending = ts_arena_alloc(d->a, (np ? np : 1) * sizeof(*d->pending));
    if (d->running == NULL || d->pending == NULL)
        return NOMEM(d);
    for (size_t i = 0; i < nr; i++) {
        snprintf(path, sizeof(path), "running[%zu]", i);
        TRY(running(d, json_array_get(run, i), path, i));
        d->s->nrunning++;
    }
    for (size_t i = 0; i < np; i++) {
        snprintf(path, sizeof(path), "pending[%zu]", i);
        TRY(pending(d, json_array_get(pend, i), path, i, nr));
        d->s->npending++;
    }
    return TS_OK;
}

static enum ts_err shape(struct dec *d, const json_t *o, const char *path,
                         struct ts_sched_shape *sh)
{
    static const char *const k[] = {"count",  "portion",   "cpu", "memory_gib",
                                    "weight", "gpu_model", NULL};
    enum ts_err rc;
    int64_t c;
    TRY(keys(d, o, path, k));
    TRY(integer(d, o, "count", path, 0, &c));
    sh->count = (int)c;
    TRY(num(d, o, "portion", path, 0, &sh->portion));
    TRY(num(d, o, "cpu", path, 0, &sh->cpu));
    TRY(gib(d, o, "memory_gib", path, 0, &sh->host_memory_bytes));
    TRY(num(d, o, "weight", path, 1, &sh->weight));
    const json_t *models = array(d, o, "gpu_model", &rc);
    TRY(rc);
    size_t nm = models ? json_array_size(models) : 0;
    const char **m = ts_arena_alloc(d->a, (nm ? nm : 1) * sizeof(char *));
    if (m == NULL)
        return NOMEM(d);
    for (size_t q = 0; q < nm; q++) {
        const json_t *x = json_array_get(models, q);
        if (!json_is_string(x))
            return fail(d, path, "\"gpu_model\" must be an array of strings");
        m[q] = ts_arena_strdup(d->a, json_string_value(x));
    }
    sh->gpu_models = m;
    sh->ngpu_models = nm;
    return TS_OK;
}

static enum ts_err shapes(struct dec *d, const json_t *in)
{
    enum ts_err rc;
    char path[96];
    const json_t *shapes = array(d, in, "shapes", &rc);
    TRY(rc);
    size_t n = shapes ? json_array_size(shapes) : 0;
    d->s->shapes = d->shapes = ts_arena_alloc(d->a, (n ? n : 1) * sizeof(*d->shapes));
    if (d->shapes == NULL)
        return NOMEM(d);
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "shapes[%zu]", i);
        TRY(shape(d, json_array_get(shapes, i), path, &d->shapes[i]));
        d->s->nshapes++;
    }
    return TS_OK;
}

enum ts_err ts_sched_snapshot_from_json(const json_t *in, struct ts_arena *a,
                                        struct ts_sched_snapshot *out, struct ts_error *err)
{
    struct dec dd = {.a = a, .err = err, .s = out}, *d = &dd;
    memset(out, 0, sizeof(*out));
    static const char *const top[] = {"now",    "config",      "departments", "projects",
                                      "nodes",  "running",     "pending",     "shapes",
                                      "expect", "description", NULL};
    TRY(keys(d, in, "snapshot", top));
    TRY(integer(d, in, "now", "now", 0, &out->now));
    TRY(config(d, in));
    TRY(departments(d, in));
    TRY(projects(d, in));
    TRY(nodes(d, in));
    TRY(jobs(d, in));
    return shapes(d, in);
}
