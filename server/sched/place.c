/*
 * place.c - placement: which nodes and GPUs can take a request, and the
 * driver that asks a strategy (binpack.c, spread.c, fgd.c) to choose.
 *
 * A node fits when it is ready, carries the selector's labels, has the CPU
 * and host memory free, and has enough GPUs of an accepted model that can
 * take the request: whole GPUs must be empty; a portion or a memory size must
 * fit in the GPU's free bytes (its memory less reserve less what is packed).
 * A suspended job's processes keep their devices: it resumes only on the
 * GPUs it held (preq.only_slots). A job that refuses swap and can burst does
 * not go to a node whose collision resolver swaps.
 */
#include <math.h>
#include <string.h>

#include "api/array.h"
#include "server/sched/sched_int.h"

void ts_sched_node_view_of(const struct ts_sched_cluster *c, int node, int64_t *used_buf,
                           struct node_view *v)
{
    const struct node_state *n = &c->nodes[node];
    v->node = node;
    v->gpu = &c->node_gpus[n->first];
    v->ngpus = n->ngpus;
    for (int k = 0; k < n->ngpus; k++)
        used_buf[k] = c->gpus[v->gpu[k]].used;
    v->used = used_buf;
    v->cpu_free = n->cpu_free;
    v->mem_free = n->mem_free;
    v->scratch = false;
}

static bool slots_have(const struct ts_sched_slot *slots, size_t n, int gpu)
{
    for (size_t i = 0; i < n; i++)
        if (slots[i].gpu == gpu)
            return true;
    return false;
}

int ts_sched_place_candidates(const struct ts_sched_cluster *c, const struct preq *p,
                              const struct node_view *v, int *cand)
{
    if (v->cpu_free + 1e-9 < p->cpu)
        return -1;
    if (!p->host_mem_held && v->mem_free < p->host_mem)
        return -1;
    if (p->ndev == 0)
        return 0;
    int n = 0;
    for (int k = 0; k < v->ngpus; k++) {
        const struct gpu_state *g = &c->gpus[v->gpu[k]];
        if (p->model_ok && !p->model_ok[g->model])
            continue;
        if (p->only_slots != NULL && !slots_have(p->only_slots, p->nonly_slots, v->gpu[k]))
            continue;
        if (preq_gpu_fits(p, g->usable, v->used[k]))
            cand[n++] = k;
    }
    return n;
}

bool ts_sched_place_on_view(const struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                            const struct preq *p, const struct node_view *v, int *out)
{
    int cand[TS_SCHED_MAX_DEVICES * 4];
    if (v->ngpus > (int)(TS_ARRAY_LEN(cand)))
        return false;
    int n = ts_sched_place_candidates(c, p, v, cand);
    if (n < 0 || n < p->ndev)
        return false;
    if (p->ndev == 0)
        return true;
    if (p->kind == TS_SCHED_GPU_COUNT || n == p->ndev) {
        memcpy(out, cand, (size_t)p->ndev * sizeof(int));
        return true;
    }
    st->pick(c, p, v, cand, n, out);
    return true;
}

/* Cheap test on the node's summary: false when it surely cannot fit now. */
static bool summary_may_fit(const struct ts_sched_cluster *c, const struct preq *p, int node)
{
    const struct node_state *n = &c->nodes[node];
    if (n->cpu_free + 1e-9 < p->cpu)
        return false;
    if (!p->host_mem_held && n->mem_free < p->host_mem)
        return false;
    switch (p->kind) {
    case TS_SCHED_GPU_COUNT:
        return n->nwhole >= p->ndev;
    case TS_SCHED_GPU_PORTION:
        return n->ngpus >= p->ndev && n->max_free_frac + 1e-6 >= p->portion;
    case TS_SCHED_GPU_MEMORY:
        return n->ngpus >= p->ndev && n->max_free >= p->mem;
    default:
        return true;
    }
}

bool ts_sched_place_best(struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                         const struct preq *p, int *node, struct ts_sched_slot *slots,
                         size_t *nslots)
{
    return ts_sched_place_best_among(c, st, p, NULL, 0, node, slots, nslots);
}

/* Whether node i can take p, its GPUs in pick; and, where score is not
 * NULL, the strategy's score there. */
static bool node_pick(struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                      const struct preq *p, int i, double *score, int *pick)
{
    int64_t used[TS_SCHED_MAX_DEVICES * 4];
    if (c->nodes[i].ngpus > (int)(TS_ARRAY_LEN(used)))
        return false;
    if (!summary_may_fit(c, p, i) || !ts_sched_cluster_node_static_ok(c, p, i))
        return false;
    struct node_view v;
    ts_sched_node_view_of(c, i, used, &v);
    if (!ts_sched_place_on_view(c, st, p, &v, pick))
        return false;
    if (score != NULL)
        *score = st->score(c, p, &v, pick, p->ndev);
    return true;
}

bool ts_sched_place_node_score(struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                               const struct preq *p, int i, double *score, int *pick)
{
    return node_pick(c, st, p, i, score, pick);
}

bool ts_sched_place_best_among(struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                               const struct preq *p, const int *list, size_t nlist, int *node,
                               struct ts_sched_slot *slots, size_t *nslots)
{
    const struct ts_sched_snapshot *snap = c->snap;
    int best = -1;
    double best_score = 0;
    int best_pick[TS_SCHED_MAX_DEVICES];
    int pick[TS_SCHED_MAX_DEVICES];
    int found = list == NULL ? ts_sched_pindex_best(c, st, p, ts_sched_preq_signature(p, 0),
                                                    ts_sched_place_node_score)
                             : -2;
    if (found == -1)
        return false;
    if (found >= 0) {
        if (!ts_sched_place_node_score(c, st, p, found, &best_score, best_pick))
            return false; /* cannot happen: the index scored it so */
        best = found;
    } else {
        int lo = 0, hi = (int)snap->nnodes;
        if (list != NULL) {
            lo = 0;
            hi = (int)nlist;
        } else if (p->only_node >= 0) {
            lo = p->only_node;
            hi = lo + 1;
        }
        /* one node to look at (a job pinned to it): no score to compare
         * (fgd's was 4 % of a large cycle, for every preemption's bind) */
        bool one = list == NULL && hi - lo == 1;
        for (int k = lo; k < hi; k++) {
            int i = list ? list[k] : k;
            if (p->only_node >= 0 && i != p->only_node)
                continue;
            double s = 0;
            if (!node_pick(c, st, p, i, one ? NULL : &s, pick))
                continue;
            s = ts_sched_score_key(s);
            if (best < 0 || s < best_score ||
                (s == best_score && snap->nodes[i].id < snap->nodes[best].id)) {
                best = i;
                best_score = s;
                memcpy(best_pick, pick, (size_t)p->ndev * sizeof(int));
            }
        }
    }
    if (best < 0)
        return false;
    *node = best;
    const struct node_state *n = &c->nodes[best];
    for (int k = 0; k < p->ndev; k++) {
        int g = c->node_gpus[n->first + best_pick[k]];
        slots[k].gpu = g;
        slots[k].memory_bytes = preq_need(p, c->gpus[g].usable);
    }
    *nslots = (size_t)p->ndev;
    return true;
}

/* A request placed on the cluster outside a cycle (tessera-sim, tests): its
 * models resolved against the interned ones. */
bool ts_sched_cluster_place(struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                            const struct ts_sched_request *req, int *node,
                            struct ts_sched_slot *slots, size_t *nslots)
{
    struct preq p;
    bool ok_models[256];
    memset(ok_models, 0, sizeof(ok_models));
    /* a request's model list is resolved against the interned models */
    if (req->ngpu_models > 0 && c->nmodels > (int)sizeof(ok_models))
        return false;
    struct ts_sched_request plain = *req;
    plain.ngpu_models = 0;
    if (!ts_sched_preq_prepare(c, &plain, NULL, &p))
        return false;
    p.r = req;
    if (req->ngpu_models > 0 && p.ndev > 0) {
        for (size_t i = 0; i < req->ngpu_models; i++) {
            int m = req->gpu_models[i] ? ts_sched_cluster_model_id(c, req->gpu_models[i]) : -1;
            if (m >= 0)
                ok_models[m] = true;
        }
        p.model_ok = ok_models;
    }
    return ts_sched_place_best(c, st, &p, node, slots, nslots);
}

const struct ts_sched_strategy *ts_sched_strategy_find(const char *name)
{
    if (name == NULL || strcmp(name, "binpack") == 0)
        return &ts_sched_binpack;
    if (strcmp(name, "spread") == 0)
        return &ts_sched_spread;
    if (strcmp(name, "fgd") == 0)
        return &ts_sched_fgd;
    return NULL;
}

const struct ts_sched_strategy *ts_sched_reference_find(const char *name)
{
    if (name != NULL && strcmp(name, "fgd-paper") == 0)
        return &ts_sched_fgd_paper;
    if (name != NULL && strcmp(name, "bestfit") == 0)
        return &ts_sched_bestfit;
    return NULL;
}

const char *ts_sched_strategy_name(const struct ts_sched_strategy *st)
{
    return st->name;
}
