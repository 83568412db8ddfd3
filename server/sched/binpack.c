/*
 * binpack.c - the binpack strategy: fill the fullest node that fits, and on
 * it the fullest GPUs, so whole nodes and whole GPUs stay free for large
 * requests. Score: first the GPUs a GPU task would leave stranded on the
 * node (free, without the CPU and host memory the workload's GPU tasks ask
 * per GPU); then what the node has left after the placement, GPUs and CPU
 * each as a share of the node's total (lower is better).
 */
#include <math.h>

#include "server/sched/sched_int.h"

#define GPU_WEIGHT 10.0
#define STRAND_WEIGHT 1000.0 /* first: strand no GPU; then the fullest node */

double ts_sched_binpack_gpus_left(const struct ts_sched_cluster *c, const struct preq *p,
                                  const struct node_view *v, const int *chosen, int nchosen)
{
    double gfree = 0;
    for (int k = 0; k < v->ngpus; k++) {
        const struct gpu_state *g = &c->gpus[v->gpu[k]];
        gfree += (double)(g->usable - v->used[k]) / (double)g->usable;
    }
    for (int i = 0; i < nchosen; i++) {
        const struct gpu_state *g = &c->gpus[v->gpu[chosen[i]]];
        gfree -= (double)preq_need(p, g->usable) / (double)g->usable;
    }
    return gfree;
}

/* The leftover score of a node whose GPUs left free after the placement
 * come to gfree GPUs. */
static double leftover_of(const struct ts_sched_cluster *c, const struct preq *p,
                          const struct node_view *v, double gfree)
{
    double total_cpu = c->snap->nodes[v->node].cpu;
    double s = v->ngpus > 0 ? GPU_WEIGHT * gfree / v->ngpus : 0;
    if (total_cpu > 0)
        s += (v->cpu_free - p->cpu) / total_cpu;
    return s;
}

double ts_sched_binpack_leftover(const struct ts_sched_cluster *c, const struct preq *p,
                                 const struct node_view *v, const int *chosen, int nchosen)
{
    return leftover_of(c, p, v, ts_sched_binpack_gpus_left(c, p, v, chosen, nchosen));
}

void ts_sched_binpack_pick_fullest(const struct ts_sched_cluster *c, const struct preq *p,
                                   const struct node_view *v, const int *cand, int ncand, int *out)
{
    int tmp[TS_SCHED_MAX_DEVICES * 4];
    for (int i = 0; i < ncand; i++)
        tmp[i] = cand[i];
    for (int i = 1; i < ncand; i++) { /* insertion sort: few GPUs per node */
        int x = tmp[i], j = i;
        int64_t fx = c->gpus[v->gpu[x]].usable - v->used[x];
        while (j > 0) {
            int y = tmp[j - 1];
            int64_t fy = c->gpus[v->gpu[y]].usable - v->used[y];
            if (fy < fx || (fy == fx && y < x))
                break;
            tmp[j] = y;
            j--;
        }
        tmp[j] = x;
    }
    /* callers pass at least p->ndev candidates */
    for (int i = 0; i < p->ndev && i < ncand; i++)
        out[i] = tmp[i];
}

/* GPUs a GPU task would leave on its node without the CPU or host memory
 * that the workload's GPU tasks ask per GPU (the typical workload's, for the
 * node's GPU model; 0 when the cycle has none): what packing by GPU alone
 * strands once CPU runs short. */
static double stranded(const struct ts_sched_cluster *c, const struct preq *p,
                       const struct node_view *v, double left)
{
    if (p->ndev == 0 || c->mix == NULL || v->ngpus == 0)
        return 0;
    const struct fmix *m = &c->mix[c->gpus[v->gpu[0]].model];
    double held = left;
    if (m->own_cpu > 0)
        held = fmin(held, fmax(0, v->cpu_free - p->cpu) / m->own_cpu);
    if (m->own_mem > 0)
        held = fmin(held, fmax(0, (double)(v->mem_free - p->host_mem)) / m->own_mem);
    return left - held;
}

/* The GPUs left free counted once for both terms. */
static double score(struct ts_sched_cluster *c, const struct preq *p, const struct node_view *v,
                    const int *chosen, int nchosen)
{
    double left = ts_sched_binpack_gpus_left(c, p, v, chosen, nchosen);
    double s = leftover_of(c, p, v, left);
    if (v->ngpus > 0)
        s += STRAND_WEIGHT * stranded(c, p, v, left) / v->ngpus;
    return s;
}

const struct ts_sched_strategy ts_sched_binpack = {
    .name = "binpack",
    .pick = ts_sched_binpack_pick_fullest,
    .score = score,
};
