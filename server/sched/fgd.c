/*
 * fgd.c - fragmentation-aware placement (the idea of Weng et al., "Beware of
 * Fragmentation", USENIX ATC '23; this is Tessera's own implementation).
 *
 * A node's fragmentation is the free GPU that the workload could not use.
 * The workload is its typical shapes (the snapshot's, or else the pending
 * jobs'; the most common ones making up 95% of them, with the GPU models
 * each accepts), each weighted by its share of the jobs over the share of
 * the cluster's GPUs it can run on (cluster.c, shapes_density: a task that
 * runs on a fifth of the GPUs is five times as dense there; 1 without
 * constraints). For each shape, as the paper defines it:
 *   - a CPU-only shape can use none of the node's free GPU;
 *   - a shape that cannot run on the node at all (CPU, host memory, not
 *     enough empty GPUs for a whole-GPU shape, no GPU with room for a
 *     portion) can use none of it either;
 *   - otherwise it can use the empty GPUs (whole-GPU shapes) or the GPUs
 *     with room for its portion, of a GPU model it accepts (a GPU of
 *     another model is all fragment to it).
 * To the expected loss over the shapes is added what the workload as a
 * whole could not use, with the weight of the shapes that may run on the
 * node's GPU model: the free GPU beyond what the node's free CPU and
 * memory cover at the CPU and memory a GPU needs beside it (GPUs stranded
 * by a node whose CPU or memory runs out first, which one task at a time
 * does not see until it is too late). What a GPU needs is what its GPU
 * tasks typically ask per GPU, and more where the cluster's CPU or memory
 * is short for the workload as a whole, CPU-only tasks included: they take
 * what they lack from what the GPUs' tasks would have had, so a GPU needs
 * the shortfall too, up to the cluster's own CPU (memory) per GPU
 * (cluster.c, shapes_finish). A CPU-only task placed on a node with free
 * GPUs is so charged for the GPUs its CPU leaves without their share.
 * A placement is scored by how much it changes the node's fragmentation
 * (lower is better); binpack's score breaks ties (scaled to stay below any
 * real difference). On a node, the GPUs for a fractional request are chosen
 * the same way, one device at a time; GPUs equally good go fullest first.
 */
#include <math.h>
#include <string.h>

#include "server/sched/sched_int.h"

#define FGD_MAXG (TS_SCHED_MAX_DEVICES * 4)

/* Whether the node's free CPU and host memory hold one task of shape m. */
static bool task_fits(const struct fshape *m, double cpu_free, int64_t mem_free)
{
    return cpu_free + 1e-9 >= m->cpu && mem_free >= m->mem;
}

static double frag_of(const struct ts_sched_cluster *c, const struct node_view *v,
                      const int64_t *used, double cpu_free, int64_t mem_free)
{
    if (v->ngpus == 0 || c->nshapes == 0)
        return 0;
    double fr[FGD_MAXG];
    int64_t freeb[FGD_MAXG], usable[FGD_MAXG];
    double total = 0;
    int nwhole = 0;
    for (int k = 0; k < v->ngpus; k++) {
        usable[k] = c->gpus[v->gpu[k]].usable;
        freeb[k] = usable[k] - used[k];
        fr[k] = (double)freeb[k] / (double)usable[k];
        total += fr[k];
        if (used[k] == 0)
            nwhole++;
    }
    if (total <= 0)
        return 0;
    double f = 0;
    for (int s = 0; s < c->nshapes; s++) {
        const struct fshape *m = &c->shapes[s];
        if (m->count == 0 && m->portion <= 0) {
            f += m->weight * total; /* a CPU-only task can use no GPU */
            continue;
        }
        double use = 0;
        if (!task_fits(m, cpu_free, mem_free)) {
            f += m->weight * total; /* it cannot run here: all of it is lost to it */
            continue;
        }
        if (m->count > 0) {
            int whole = nwhole;
            if (m->model_ok) { /* only the empty GPUs of a model it accepts */
                whole = 0;
                for (int k = 0; k < v->ngpus; k++)
                    whole += used[k] == 0 && m->model_ok[c->gpus[v->gpu[k]].model];
            }
            if (whole >= m->count)
                use = (double)whole;
        } else {
            for (int k = 0; k < v->ngpus; k++) {
                int64_t need = (int64_t)(m->portion * (double)usable[k] + 1e-6);
                if (freeb[k] >= need && freeb[k] > 0 &&
                    fshape_model_ok(m, c->gpus[v->gpu[k]].model))
                    use += fr[k];
            }
        }
        f += m->weight * (total - use);
    }
    /* what the workload as a whole could not use: GPUs left without the CPU
     * or memory that typically comes with them, for the part of the
     * workload that may run on the node's GPU model */
    const struct fmix *x = c->mix ? &c->mix[c->gpus[v->gpu[0]].model] : NULL;
    if (x == NULL || x->weight <= 0)
        return f;
    double mix = total;
    if (x->cpu > 0)
        mix = fmin(mix, cpu_free / x->cpu);
    if (x->mem > 0)
        mix = fmin(mix, (double)mem_free / x->mem);
    f += x->weight * (total - fmax(mix, 0));
    return f;
}

double ts_sched_fgd_fragmentation(const struct ts_sched_cluster *c, const struct node_view *v)
{
    return frag_of(c, v, v->used, v->cpu_free, v->mem_free);
}

static double before_of(struct ts_sched_cluster *c, const struct node_view *v)
{
    if (v->scratch)
        return ts_sched_fgd_fragmentation(c, v);
    struct node_state *n = &c->nodes[v->node];
    if (!n->frag_valid) {
        n->frag = ts_sched_fgd_fragmentation(c, v);
        n->frag_valid = true;
    }
    return n->frag;
}

static double after_of(const struct ts_sched_cluster *c, const struct preq *p,
                       const struct node_view *v, const int *chosen, int nchosen)
{
    int64_t used[FGD_MAXG];
    memcpy(used, v->used, (size_t)v->ngpus * sizeof(int64_t));
    for (int i = 0; i < nchosen; i++)
        used[chosen[i]] += preq_need(p, c->gpus[v->gpu[chosen[i]]].usable);
    return frag_of(c, v, used, v->cpu_free - p->cpu,
                   p->host_mem_held ? v->mem_free : v->mem_free - p->host_mem);
}

static void pick(const struct ts_sched_cluster *c, const struct preq *p, const struct node_view *v,
                 const int *cand, int ncand, int *out)
{
    bool taken[FGD_MAXG] = {false};
    for (int d = 0; d < p->ndev; d++) {
        int best = -1;
        double best_f = 0;
        int64_t best_free = 0;
        for (int i = 0; i < ncand; i++) {
            int k = cand[i];
            if (taken[k])
                continue;
            int64_t fk = c->gpus[v->gpu[k]].usable - v->used[k];
            /* GPUs in the same state score the same: try the first only */
            bool dup = false;
            for (int j = 0; j < i && !dup; j++) {
                int q = cand[j];
                dup = !taken[q] && v->used[q] == v->used[k] &&
                      c->gpus[v->gpu[q]].usable == c->gpus[v->gpu[k]].usable &&
                      c->gpus[v->gpu[q]].model == c->gpus[v->gpu[k]].model;
            }
            if (dup)
                continue;
            out[d] = k;
            double f = after_of(c, p, v, out, d + 1);
            if (best < 0 || f < best_f - 1e-12 || (f <= best_f + 1e-12 && fk < best_free)) {
                best = k;
                best_f = f;
                best_free = fk;
            }
        }
        if (best < 0) /* callers pass at least p->ndev candidates */
            return;
        out[d] = best;
        taken[best] = true;
    }
}

static double score(struct ts_sched_cluster *c, const struct preq *p, const struct node_view *v,
                    const int *chosen, int nchosen)
{
    double delta = after_of(c, p, v, chosen, nchosen) - before_of(c, v);
    return delta + 1e-9 * ts_sched_binpack_leftover(c, p, v, chosen, nchosen);
}

const struct ts_sched_strategy ts_sched_fgd = {
    .name = "fgd",
    .pick = pick,
    .score = score,
};
