/*
 * reclaim.c - a project below its fair share takes GPUs back from preemptible
 * jobs of projects above theirs.
 *
 * Taken only when, after it, the reclaiming project is still no further above
 * its fair share than each victim's project (in GPUs: allocated - fair share);
 * this is the invariant that keeps two projects from reclaiming from each
 * other in turn. Non-preemptible jobs are never victims, nor jobs inside
 * their minimum runtime (victims.c).
 */
#include "server/sched/cycle.h"

bool reclaim_try(struct cycle *cy, int j)
{
    struct job *J = &cy->jobs[j];
    struct proj *P = &cy->projs[J->project];
    if (!(P->alloc + EPS < P->fair))
        return false;
    if (J->p.ndev == 0)
        return false; /* a CPU-only job brings its project no closer to its share */
    bool any = false; /* a project above its fair share to take from */
    for (size_t q = 0; q < cy->snap->nprojects && !any; q++)
        any = (int)q != J->project && cy->projs[q].alloc > cy->projs[q].fair + EPS;
    if (!any)
        return false;
    J->reclaim_tried = true;
    uint64_t key = preq_signature(&J->p, 0x5245434cULL + (uint64_t)J->project);
    if (memo_has(cy->reclaim_memo, key))
        return false;
    struct victim_rule r = {
        .reclaim = true,
        .reclaimer_excess = P->alloc + J->p.gpus_estimate - P->fair,
    };
    int node, victims[256], nv = 0;
    bool suspend[256];
    if (!victims_find(cy, j, &r, &node, victims, suspend, &nv)) {
        memo_add(cy->reclaim_memo, key);
        return false;
    }
    const char *pname = cy->snap->projects[J->project].name;
    char a[32], f[32], va[32], vf[32];
    fmt_gpus(a, sizeof(a), P->alloc);
    fmt_gpus(f, sizeof(f), P->fair);
    for (int i = 0; i < nv; i++) {
        const struct job *x = &cy->jobs[victims[i]];
        const struct proj *pv = &cy->projs[x->project];
        fmt_gpus(va, sizeof(va), pv->alloc);
        fmt_gpus(vf, sizeof(vf), pv->fair);
        cycle_stop(cy, victims[i], j, suspend[i], "reclaim",
                   cycle_printf(cy,
                                "reclaim: project \"%s\" is below its fair share (%s of %s); "
                                "project \"%s\" is above its (%s of %s)",
                                pname, a, f, cy->snap->projects[x->project].name, va, vf));
    }
    int saved = J->p.only_node, n;
    struct ts_sched_slot slots[TS_SCHED_MAX_DEVICES];
    size_t ns = 0;
    J->p.only_node = node;
    bool ok = place_best(cy->c, cy->st, &J->p, &n, slots, &ns);
    J->p.only_node = saved;
    if (!ok)
        return false; /* cannot happen: victims_find checked the same room */
    cycle_bind(cy, j, n, slots, ns, "reclaim",
               cycle_printf(cy,
                            "placed on %s by reclaiming %d job%s: project \"%s\" is "
                            "below its fair share (%s of %s)",
                            cy->snap->nodes[n].name, nv, nv == 1 ? "" : "s", pname, a, f));
    return true;
}
