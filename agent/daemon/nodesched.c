/*
 * nodesched.c - the node-level scheduler: where a fractional job starts
 * (nodesched.h). The room on a GPU is read from its ledger: every job under
 * the shim on this node has a slot there with its request, so the figure
 * counts the jobs the node moved as well as those the server put there.
 */
#include <stdatomic.h>
#include <string.h>

#include "agent/daemon/ajob.h"
#include "agent/daemon/nodesched.h"

bool ts_nodesched_spreads(const char *mode, uint64_t swap_bytes)
{
    if (mode == NULL || strcmp(mode, "auto") == 0)
        return swap_bytes > 0;
    return strcmp(mode, "spread") == 0;
}

/* Usable memory of GPU at position p less the requests of its slots. */
static int64_t room(const struct ts_ledgers *s, int p)
{
    struct ts_ledger *l = s->l[p];
    uint64_t asked = 0;
    for (int j = 0; j < TS_LEDGER_JOBS; j++)
        if (atomic_load_explicit(&l->jobs[j].key, memory_order_acquire) != 0)
            asked += l->jobs[j].request_bytes;
    return (int64_t)s->usable[p] - (int64_t)asked;
}

const struct ts_desired_job *ts_nodesched_place(const struct ts_ledgers *s,
                                                const struct ts_desired_job *desired,
                                                struct ts_arena *ar)
{
    if (desired->ngpus != 1)
        return NULL;
    const struct ts_desired_gpu *g = &desired->gpus[0];
    int64_t index = g->index, req = g->memory_bytes;
    int lp = index >= 0 ? ts_ledgers_pos(s, (unsigned)index) : -1;
    if (lp < 0 || req < 0 || (uint64_t)req >= s->usable[lp])
        return NULL; /* a whole GPU, or not this node's: the server's GPU */
    int best = lp;
    int64_t best_room = room(s, lp);
    for (unsigned p = 0; p < s->count; p++) {
        int64_t r = room(s, (int)p);
        if ((int)p != lp && r >= req && r > best_room) {
            best = (int)p;
            best_room = r;
        }
    }
    if (best == lp)
        return NULL;
    struct ts_desired_job *d = ts_arena_alloc(ar, sizeof(*d));
    struct ts_desired_gpu *dg = ts_arena_alloc(ar, sizeof(*dg));
    if (d == NULL || dg == NULL)
        return NULL;
    *d = *desired;
    *dg = *g;
    dg->logical_index = (int)index;
    dg->index = (int)s->index[best];
    d->gpus = dg;
    return d;
}

size_t ts_nodesched_in_the_way(const struct ts_ledgers *s, const struct ts_ajob *jobs,
                               const struct ts_desired_job *desired, struct ts_nodesched_block *out,
                               size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < desired->ngpus; i++) {
        int64_t index = desired->gpus[i].index, req = desired->gpus[i].memory_bytes;
        int p = index >= 0 && index < TS_GPUS_MAX ? ts_ledgers_pos(s, (unsigned)index) : -1;
        if (p < 0 || req <= 0 || room(s, p) >= req)
            continue;
        for (const struct ts_ajob *j = jobs; j != NULL && n < max; j = j->next) {
            if (ts_ajob_final(j) || !j->shim)
                continue;
            for (unsigned k = 0; k < j->ngpus && n < max; k++) {
                if (j->gpus[k] != (unsigned)index || j->logical[k] == j->gpus[k])
                    continue;
                int slot = ts_ledger_find_job(s->l[p], ts_ledger_key(j->id, j->attempt));
                out[n++] = (struct ts_nodesched_block){
                    .id = j->id,
                    .attempt = j->attempt,
                    .physical = j->gpus[k],
                    .logical = j->logical[k],
                    .request_bytes = slot >= 0 ? s->l[p]->jobs[slot].request_bytes : 0};
            }
        }
    }
    return n;
}
