/*
 * sched_json_enc.c - the JSON form of snapshots and results, written (see
 * sched_json.h; sched_json.c reads snapshots).
 */
#include <stdio.h>
#include <string.h>

#include "server/sched/sched_json.h"

#define GIB 1073741824.0

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

static json_t *config_json(const struct ts_sched_config *c)
{
    json_t *cfg = json_object();
    if (c->strategy)
        json_object_set_new(cfg, "strategy", json_string(c->strategy));
    json_object_set_new(cfg, "min_runtime_s", json_integer(c->min_runtime_s));
    json_object_set_new(cfg, "usage_half_life_s", json_real(c->usage_half_life_s));
    json_object_set_new(cfg, "max_passes", json_integer(c->max_passes));
    return cfg;
}

static json_t *departments_json(const struct ts_sched_snapshot *s)
{
    json_t *a = json_array();
    for (size_t i = 0; i < s->ndepartments; i++) {
        const struct ts_sched_department *d = &s->departments[i];
        json_t *x = json_pack("{s:I,s:s}", "id", (json_int_t)d->id, "name", d->name);
        json_array_append_new(a, quota_json(x, d->quota_gpus, d->over_quota_weight, d->has_limit,
                                            d->limit_gpus, d->priority));
    }
    return a;
}

static json_t *projects_json(const struct ts_sched_snapshot *s)
{
    json_t *a = json_array();
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
    return a;
}

static json_t *nodes_json(const struct ts_sched_snapshot *s)
{
    json_t *a = json_array();
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
    return a;
}

static json_t *running_json(const struct ts_sched_snapshot *s)
{
    json_t *a = json_array();
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
    return a;
}

static json_t *pending_json(const struct ts_sched_snapshot *s)
{
    json_t *a = json_array();
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
    return a;
}

static json_t *shapes_json(const struct ts_sched_snapshot *s)
{
    json_t *a = json_array();
    for (size_t i = 0; i < s->nshapes; i++) {
        const struct ts_sched_shape *sh = &s->shapes[i];
        json_t *x =
            json_pack("{s:i,s:f,s:f,s:o,s:f}", "count", sh->count, "portion", sh->portion, "cpu",
                      sh->cpu, "memory_gib", gib_json(sh->host_memory_bytes), "weight", sh->weight);
        if (sh->ngpu_models) {
            json_t *m = json_array();
            for (size_t q = 0; q < sh->ngpu_models; q++)
                json_array_append_new(m, json_string(sh->gpu_models[q]));
            json_object_set_new(x, "gpu_model", m);
        }
        json_array_append_new(a, x);
    }
    return a;
}

json_t *ts_sched_snapshot_to_json(const struct ts_sched_snapshot *s)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    json_object_set_new(o, "now", json_integer(s->now));
    json_object_set_new(o, "config", config_json(&s->config));
    json_object_set_new(o, "departments", departments_json(s));
    json_object_set_new(o, "projects", projects_json(s));
    json_object_set_new(o, "nodes", nodes_json(s));
    json_object_set_new(o, "running", running_json(s));
    json_object_set_new(o, "pending", pending_json(s));
    if (s->nshapes)
        json_object_set_new(o, "shapes", shapes_json(s));
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
