/*
 * snapshot.c - checking a snapshot before a cycle: every index in range,
 * every amount sane. A malformed job request is not an error here: that job
 * alone stays pending with the code invalid_request.
 */
#include <math.h>

#include "server/sched/sched_int.h"

static bool bad_num(double x)
{
    return !isfinite(x) || x < 0;
}

static enum ts_err check_quota(const char *what, const char *name, double quota, double weight,
                               bool has_limit, double limit, struct ts_error *err)
{
    if (bad_num(quota))
        return ts_error_set(err, TS_ERR_INVALID_VALUE, "%s \"%s\": quota must be 0 or more: %g",
                            what, name, quota);
    if (bad_num(weight))
        return ts_error_set(err, TS_ERR_INVALID_VALUE,
                            "%s \"%s\": over-quota weight must be 0 or more: %g", what, name,
                            weight);
    if (has_limit && (bad_num(limit) || limit < quota))
        return ts_error_set(err, TS_ERR_INVALID_VALUE,
                            "%s \"%s\": limit must be at least the quota: %g < %g", what, name,
                            limit, quota);
    return TS_OK;
}

static enum ts_err validate_config(const struct ts_sched_snapshot *s, struct ts_error *err)
{
    if (s->config.strategy && !ts_sched_strategy_find(s->config.strategy))
        return ts_error_set(err, TS_ERR_INVALID_VALUE,
                            "unknown strategy \"%s\": use binpack, spread or fgd",
                            s->config.strategy);
    if (s->config.min_runtime_s < 0 || bad_num(s->config.usage_half_life_s))
        return ts_error_set(err, TS_ERR_INVALID_VALUE,
                            "min_runtime_s and usage_half_life_s must be 0 or more");
    return TS_OK;
}

/* Departments' and projects' quotas, and each project's department. */
static enum ts_err validate_tenants(const struct ts_sched_snapshot *s, struct ts_error *err)
{
    for (size_t i = 0; i < s->ndepartments; i++) {
        const struct ts_sched_department *d = &s->departments[i];
        enum ts_err rc = check_quota("department", d->name ? d->name : "", d->quota_gpus,
                                     d->over_quota_weight, d->has_limit, d->limit_gpus, err);
        if (rc != TS_OK)
            return rc;
    }
    for (size_t i = 0; i < s->nprojects; i++) {
        const struct ts_sched_project *p = &s->projects[i];
        const char *name = p->name ? p->name : "";
        enum ts_err rc = check_quota("project", name, p->quota_gpus, p->over_quota_weight,
                                     p->has_limit, p->limit_gpus, err);
        if (rc != TS_OK)
            return rc;
        if (p->department < -1 || p->department >= (int)s->ndepartments)
            return ts_error_set(err, TS_ERR_INVALID_VALUE,
                                "project \"%s\": department index %d is out of range (0..%zu)",
                                name, p->department, s->ndepartments);
        if (bad_num(p->usage_gpu_seconds))
            return ts_error_set(err, TS_ERR_INVALID_VALUE,
                                "project \"%s\": usage must be 0 or more: %g", name,
                                p->usage_gpu_seconds);
    }
    return TS_OK;
}

/* Nodes' sizes and labels; each GPU on a node, with more memory than its
 * reserve. */
static enum ts_err validate_nodes(const struct ts_sched_snapshot *s, struct ts_error *err)
{
    for (size_t i = 0; i < s->nnodes; i++) {
        const struct ts_sched_node *n = &s->nodes[i];
        if (bad_num(n->cpu) || n->memory_bytes < 0 || n->swap_free_bytes < 0)
            return ts_error_set(err, TS_ERR_INVALID_VALUE,
                                "node \"%s\": cpu, memory and swap must be 0 or more",
                                n->name ? n->name : "");
        for (size_t k = 0; k < n->nlabels; k++)
            if (n->labels[k].key == NULL || n->labels[k].value == NULL)
                return ts_error_set(err, TS_ERR_INVALID_VALUE, "node \"%s\": label %zu is NULL",
                                    n->name ? n->name : "", k);
    }
    for (size_t i = 0; i < s->ngpus; i++) {
        const struct ts_sched_gpu *g = &s->gpus[i];
        if (g->node < 0 || g->node >= (int)s->nnodes)
            return ts_error_set(err, TS_ERR_INVALID_VALUE,
                                "gpu %zu: node index %d is out of range (0..%zu)", i, g->node,
                                s->nnodes);
        if (g->reserve_bytes < 0 || g->memory_bytes <= g->reserve_bytes)
            return ts_error_set(err, TS_ERR_INVALID_VALUE,
                                "gpu %d of node \"%s\": memory must exceed the reserve: %lld <= "
                                "%lld bytes",
                                g->index, s->nodes[g->node].name ? s->nodes[g->node].name : "",
                                (long long)g->memory_bytes, (long long)g->reserve_bytes);
    }
    return TS_OK;
}

/* A running job: its project, node, and slots on GPUs of that node. */
static enum ts_err validate_running(const struct ts_sched_snapshot *s,
                                    const struct ts_sched_running *j, struct ts_error *err)
{
    const char *name = j->name ? j->name : "";
    if (j->project < 0 || j->project >= (int)s->nprojects)
        return ts_error_set(err, TS_ERR_INVALID_VALUE,
                            "running job \"%s\": project index %d is out of range", name,
                            j->project);
    if (j->node < 0 || j->node >= (int)s->nnodes)
        return ts_error_set(err, TS_ERR_INVALID_VALUE,
                            "running job \"%s\": node index %d is out of range", name, j->node);
    if (j->nslots > TS_SCHED_MAX_DEVICES)
        return ts_error_set(err, TS_ERR_INVALID_VALUE,
                            "running job \"%s\": %zu GPUs is more than %d", name, j->nslots,
                            TS_SCHED_MAX_DEVICES);
    if (j->memory_used_bytes < 0 || j->swapped_bytes < 0)
        return ts_error_set(err, TS_ERR_INVALID_VALUE,
                            "running job \"%s\": memory used and swapped must be 0 or more", name);
    for (size_t k = 0; k < j->nslots; k++) {
        int g = j->slots[k].gpu;
        if (g < 0 || g >= (int)s->ngpus || s->gpus[g].node != j->node)
            return ts_error_set(err, TS_ERR_INVALID_VALUE,
                                "running job \"%s\": gpu index %d is not on its node", name, g);
        if (j->slots[k].memory_bytes <= 0)
            return ts_error_set(err, TS_ERR_INVALID_VALUE,
                                "running job \"%s\": slot %zu packs no memory", name, k);
        for (size_t q = 0; q < k; q++)
            if (j->slots[q].gpu == g)
                return ts_error_set(err, TS_ERR_INVALID_VALUE,
                                    "running job \"%s\": gpu index %d is listed twice", name, g);
    }
    return TS_OK;
}

/* A pending job: its project, and where it is suspended if it is. */
static enum ts_err validate_pending(const struct ts_sched_snapshot *s,
                                    const struct ts_sched_pending *j, struct ts_error *err)
{
    const char *name = j->name ? j->name : "";
    if (j->project < 0 || j->project >= (int)s->nprojects)
        return ts_error_set(err, TS_ERR_INVALID_VALUE,
                            "pending job \"%s\": project index %d is out of range", name,
                            j->project);
    if (j->suspended_node < -1 || j->suspended_node >= (int)s->nnodes)
        return ts_error_set(err, TS_ERR_INVALID_VALUE,
                            "pending job \"%s\": suspended node index %d is out of range", name,
                            j->suspended_node);
    if (j->nsuspended_slots > 0 && (j->suspended_node < 0 || j->suspended_slots == NULL ||
                                    j->nsuspended_slots > TS_SCHED_MAX_DEVICES))
        return ts_error_set(err, TS_ERR_INVALID_VALUE,
                            "pending job \"%s\": suspended GPUs without a suspended node", name);
    for (size_t k = 0; k < j->nsuspended_slots; k++) {
        int g = j->suspended_slots[k].gpu;
        if (g < 0 || g >= (int)s->ngpus || s->gpus[g].node != j->suspended_node)
            return ts_error_set(err, TS_ERR_INVALID_VALUE,
                                "pending job \"%s\": suspended gpu index %d is not a GPU of "
                                "its node",
                                name, g);
    }
    return TS_OK;
}

enum ts_err ts_sched_snapshot_validate(const struct ts_sched_snapshot *s, struct ts_error *err)
{
    enum ts_err rc = validate_config(s, err);
    if (rc == TS_OK)
        rc = validate_tenants(s, err);
    if (rc == TS_OK)
        rc = validate_nodes(s, err);
    for (size_t i = 0; i < s->nrunning && rc == TS_OK; i++)
        rc = validate_running(s, &s->running[i], err);
    for (size_t i = 0; i < s->npending && rc == TS_OK; i++)
        rc = validate_pending(s, &s->pending[i], err);
    return rc;
}
