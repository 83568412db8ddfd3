/*
 * spread.c - the spread strategy: the emptiest node that fits, and on it the
 * emptiest GPUs, so jobs interfere least and have the most room to burst.
 */
#include "server/sched/sched_int.h"

/* The ndev candidates with the most free bytes (ties: lower index). */
static void pick_emptiest(const struct ts_sched_cluster *c, const struct preq *p,
                          const struct node_view *v, const int *cand, int ncand, int *out)
{
    int tmp[TS_SCHED_MAX_DEVICES * 4];
    for (int i = 0; i < ncand; i++)
        tmp[i] = cand[i];
    for (int i = 1; i < ncand; i++) {
        int x = tmp[i], j = i;
        int64_t fx = c->gpus[v->gpu[x]].usable - v->used[x];
        while (j > 0) {
            int y = tmp[j - 1];
            int64_t fy = c->gpus[v->gpu[y]].usable - v->used[y];
            if (fy > fx || (fy == fx && y < x))
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

static double score(struct ts_sched_cluster *c, const struct preq *p, const struct node_view *v,
                    const int *chosen, int nchosen)
{
    return -ts_sched_binpack_leftover(c, p, v, chosen, nchosen);
}

const struct ts_sched_strategy ts_sched_spread = {
    .name = "spread",
    .pick = pick_emptiest,
    .score = score,
};
