/*
 * reclaim.c - a project takes GPUs back from preemptible jobs of projects
 * above their quota or fair share. Two tiers:
 *
 * 1. Within quota. A project that stays within its deserved quota with the
 *    job (min(quota, demand, limit); its department too, unless the victims
 *    are of the same department) takes from projects above theirs, as long
 *    as each victim's project stays at or above its quota (and its
 *    department, where it is another, at or above the department's),
 *    whatever the fair shares say: a quota is a guarantee.
 * 2. By fair share. A project below its fair share borrows from projects
 *    above theirs, only while each victim's project stays at least as far
 *    above its fair share as the reclaimer will be (in GPUs: allocated -
 *    fair share): the anti-loop invariant.
 *
 *    A borrower takes no one below their quota where they meet: a project
 *    that ends beyond its quota takes no project of its own department
 *    below the project's quota; a department that ends beyond its quota
 *    (a department-less project beyond its own) takes no other department,
 *    nor department-less project, below its quota.
 *
 * Tier 1 goes first; tier 2 when it finds no victims. No reclaim can be
 * taken back: a tier-1 victim stays at or above its quota, so it cannot
 * reclaim within quota, and any reclaim of its would be a borrower's, which
 * cannot take the tier-1 reclaimer (within its quota) below its quota; a
 * tier-2 reclaim by a borrower leaves its victim at or above its quota (no
 * tier 1 back), one by a project that ends within its quota leaves it no
 * tier-1 victim; tier 2 against tier 2 is the anti-loop invariant (at the
 * level of departments the same holds of departments: a tier-1 reclaim from
 * another department needs its own within its quota). Without the
 * borrower's rule the random walks loop. Non-preemptible jobs are never
 * victims, nor jobs inside their minimum runtime (victims.c).
 *
 * The messages tell what the projects held before this cycle's decisions
 * (the snapshot's allocation), their quotas and fair shares; the decisions
 * themselves are made on the state so far.
 */
#include "server/sched/memo.h"
#include "server/sched/reclaim.h"
#include "server/sched/victims.h"

static bool take(struct cycle *cy, int j, const struct victim_rule *r)
{
    struct job *J = &cy->jobs[j];
    uint64_t key = ts_sched_preq_signature(&J->p, (r->tier1 ? 0x52454331ULL : 0x5245434cULL) +
                                                      (uint64_t)J->project);
    if (ts_sched_memo_has(cy->reclaim_memo, key))
        return false;
    int node, victims[256], nv = 0;
    bool suspend[256];
    if (!ts_sched_victims_find(cy, j, r, &node, victims, suspend, &nv)) {
        ts_sched_memo_add(cy->reclaim_memo, key);
        return false;
    }
    const char *pname = cy->snap->projects[J->project].name;
    const char *held = ts_sched_cycle_held(cy, J->project);
    for (int i = 0; i < nv; i++) {
        int q = cy->jobs[victims[i]].project;
        const char *msg =
            r->tier1 ? ts_sched_cycle_printf(
                           cy,
                           "reclaim within quota: project \"%s\" %s before this cycle and "
                           "stays within its quota with this job; project \"%s\" %s and "
                           "keeps at least its quota",
                           pname, held, cy->snap->projects[q].name, ts_sched_cycle_held(cy, q))
                     : ts_sched_cycle_printf(
                           cy,
                           "reclaim by fair share: project \"%s\" %s before this cycle; "
                           "project \"%s\" %s and stays at least as far above its fair "
                           "share",
                           pname, held, cy->snap->projects[q].name, ts_sched_cycle_held(cy, q));
        ts_sched_cycle_stop(cy, victims[i], j, suspend[i], "reclaim", msg);
    }
    int saved = J->p.only_node, n;
    struct ts_sched_slot slots[TS_SCHED_MAX_DEVICES];
    size_t ns = 0;
    J->p.only_node = node;
    bool ok = ts_sched_place_best(cy->c, cy->st, &J->p, &n, slots, &ns);
    J->p.only_node = saved;
    if (!ok)
        return false; /* cannot happen: ts_sched_victims_find checked the same room */
    ts_sched_cycle_bind(
        cy, j, n, slots, ns, "reclaim",
        ts_sched_cycle_printf(cy,
                              "placed on %s by reclaiming %d job%s %s: project \"%s\" %s before "
                              "this cycle",
                              cy->snap->nodes[n].name, nv, nv == 1 ? "" : "s",
                              r->tier1 ? "within quota" : "by fair share", pname, held));
    return true;
}

bool ts_sched_reclaim_try(struct cycle *cy, int j)
{
    struct job *J = &cy->jobs[j];
    const struct proj *P = &cy->projs[J->project];
    if (J->p.ndev == 0)
        return false; /* a CPU-only job brings its project no closer to its share */
    int d = cy->snap->projects[J->project].department;
    double g = J->p.gpus_at_most; /* whatever GPU it lands on */
    bool proj_within = P->alloc + g <= P->deserved + EPS;
    bool dep_within = d < 0 || cy->deps[d].alloc + g <= cy->deps[d].deserved + EPS;
    size_t np = cy->snap->nprojects;
    if (proj_within) {
        bool any = false; /* a project above its quota to take from */
        for (size_t q = 0; q < np && !any; q++) {
            const struct proj *V = &cy->projs[q];
            int e = cy->snap->projects[q].department;
            any = (int)q != J->project && V->alloc > V->deserved + EPS &&
                  (dep_within || (d >= 0 && e == d));
        }
        if (any) {
            J->reclaim_tried = true;
            J->reclaim_tier1 = true;
            struct victim_rule r = {
                .reclaim = true,
                .tier1 = true,
                .other_deps = dep_within,
                .keep_quota_in = true,
                .keep_quota_out = true,
            };
            if (take(cy, j, &r))
                return true;
        }
    }
    if (!(P->alloc + EPS < P->fair))
        return false;
    bool any = false; /* a project above its fair share to take from */
    for (size_t q = 0; q < np && !any; q++)
        any = (int)q != J->project && cy->projs[q].alloc > cy->projs[q].fair + EPS;
    if (!any)
        return false;
    J->reclaim_tried = true;
    /* a borrower takes no one below its quota, at the level where they meet */
    bool top_within = d >= 0 ? dep_within : proj_within;
    struct victim_rule r = {
        .reclaim = true,
        .other_deps = true,
        .keep_quota_in = !proj_within,
        .keep_quota_out = !top_within,
        .fair_rule = true,
        .reclaimer_excess = P->alloc + J->p.gpus_estimate - P->fair,
    };
    return take(cy, j, &r);
}
