/*
 * fgd.c - fragmentation-aware placement (the idea of Weng et al., "Beware of
 * Fragmentation", USENIX ATC '23; this is Tessera's own implementation).
 *
 * A node's fragmentation against the workload is the expected amount of its
 * free GPU that a typical job could not use: for each typical shape (the
 * snapshot's shapes, or else the shapes of the pending jobs, the most common
 * ones making up 95% of them) weighted by its share of the workload,
 *   - if the shape cannot run on the node at all (CPU, host memory, not
 *     enough empty GPUs for whole-GPU shapes, no GPU with room for a
 *     portion), all of the node's free GPU counts;
 *   - otherwise the free part of every GPU that cannot take the shape counts
 *     (nothing for a CPU-only shape: it only wastes GPUs by not fitting).
 * A placement is scored by how much it changes the node's fragmentation
 * (lower is better: the placement that wastes the least of what typical jobs
 * need); ties go to binpack's score. On a node, the GPUs for a fractional
 * request are chosen the same way, one device at a time.
 */
#include <string.h>

#include "server/sched/sched_int.h"

#define FGD_MAXG (TS_SCHED_MAX_DEVICES * 4)

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
        bool run = cpu_free + 1e-9 >= m->cpu && mem_free >= m->mem;
        double lost = 0;
        if (m->count == 0 && m->portion <= 0) {
            /* a CPU-only shape wastes the node's GPUs only when it cannot run */
        } else if (run && m->count > 0) {
            run = nwhole >= m->count;
            if (run)
                lost = total - nwhole; /* partly used GPUs cannot take a whole-GPU job */
        } else if (run) {
            bool any = false;
            for (int k = 0; k < v->ngpus; k++) {
                int64_t need = (int64_t)(m->portion * (double)usable[k] + 1e-6);
                if (freeb[k] >= need && freeb[k] > 0)
                    any = true;
                else
                    lost += fr[k];
            }
            run = any;
        }
        f += m->weight * (run ? lost : total);
    }
    return f;
}

double fgd_fragmentation(const struct ts_sched_cluster *c, const struct node_view *v)
{
    return frag_of(c, v, v->used, v->cpu_free, v->mem_free);
}

static double before_of(struct ts_sched_cluster *c, const struct node_view *v)
{
    if (v->scratch)
        return fgd_fragmentation(c, v);
    struct node_state *n = &c->nodes[v->node];
    if (!n->frag_valid) {
        n->frag = fgd_fragmentation(c, v);
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
        out[d] = best;
        taken[best] = true;
    }
}

static double score(struct ts_sched_cluster *c, const struct preq *p, const struct node_view *v,
                    const int *chosen, int nchosen)
{
    double delta = after_of(c, p, v, chosen, nchosen) - before_of(c, v);
    return delta + 1e-4 * binpack_leftover(c, p, v, chosen, nchosen);
}

const struct ts_sched_strategy ts_sched_fgd = {
    .name = "fgd",
    .pick = pick,
    .score = score,
};
