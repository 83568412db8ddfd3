/*
 * bestfit.c - the BestFit heuristic of Weng et al. (USENIX ATC '23), the
 * baseline binpack is measured against in tessera-sim (`--strategy
 * bestfit`; never a snapshot's strategy): the node whose CPU and GPU left
 * free after the placement are least, each as a share of the largest
 * node's and weighing the same; on the node, the fullest GPUs that fit.
 */
#include "server/sched/sched_int.h"

static double score(struct ts_sched_cluster *c, const struct preq *p, const struct node_view *v,
                    const int *chosen, int nchosen)
{
    double gfree = ts_sched_binpack_gpus_left(c, p, v, chosen, nchosen);
    double s = 0;
    if (c->max_node_gpus > 0)
        s += 0.5 * gfree / c->max_node_gpus;
    if (c->max_node_cpu > 0)
        s += 0.5 * (v->cpu_free - p->cpu) / c->max_node_cpu;
    return s;
}

const struct ts_sched_strategy ts_sched_bestfit = {
    .name = "bestfit",
    .pick = ts_sched_binpack_pick_fullest,
    .score = score,
};
