/*
 * preempt.c - inside one project, a job displaces preemptible jobs of lower
 * priority. Also the way a job gets in when its project is at its limit: the
 * victims must then free at least what the limit leaves short. The
 * messages tell what the project (and, under a department's limit, the
 * department) held before this cycle's decisions.
 */
#include "server/sched/cycle.h"

bool ts_sched_preempt_try(struct cycle *cy, int j, double min_free, bool dep_limit)
{
    struct job *J = &cy->jobs[j];
    uint64_t key = ts_sched_preq_signature(&J->p, 0x50524545ULL + (uint64_t)J->project * 7919u +
                                                      (uint64_t)(J->priority + 100000) * 104729u +
                                                      (uint64_t)(min_free * 1000.0));
    if (ts_sched_memo_has(cy->reclaim_memo, key))
        return false;
    struct victim_rule r = {.below_priority = J->priority, .min_free = min_free};
    int node, victims[256], nv = 0;
    bool suspend[256];
    if (!ts_sched_victims_find(cy, j, &r, &node, victims, suspend, &nv)) {
        ts_sched_memo_add(cy->reclaim_memo, key);
        return false;
    }
    const struct ts_sched_project *sp = &cy->snap->projects[J->project];
    const char *held = ts_sched_cycle_held(cy, J->project);
    char lim[32], dheld[32];
    const char *why; /* what the stop and the bind say of the project, or its limit */
    if (min_free <= 0) {
        /* the same all cycle, as held is: made once per project */
        struct proj *P = &cy->projs[J->project];
        if (P->why_preempt == NULL)
            P->why_preempt =
                ts_sched_cycle_printf(cy, "project \"%s\" %s before this cycle", sp->name, held);
        why = P->why_preempt;
    } else if (dep_limit) {
        const struct ts_sched_department *d = &cy->snap->departments[sp->department];
        ts_gpus_format(cy->deps[sp->department].alloc0, dheld, sizeof(dheld));
        why = ts_sched_cycle_printf(
            cy,
            "department \"%s\" may use at most %s GPUs and held %s before this "
            "cycle, project \"%s\" %s",
            d->name, ts_gpus_format(d->limit_gpus, lim, sizeof(lim)), dheld, sp->name, held);
    } else {
        why = ts_sched_cycle_printf(
            cy, "project \"%s\" may use at most %s GPUs and %s before this cycle", sp->name,
            ts_gpus_format(sp->limit_gpus, lim, sizeof(lim)), held);
    }
    for (int i = 0; i < nv; i++) {
        const struct job *x = &cy->jobs[victims[i]];
        ts_sched_cycle_stop(cy, victims[i], j, suspend[i], "preempt",
                            ts_sched_cycle_printf(cy,
                                                  "%s: job \"%s\" has priority %d, this job %d; %s",
                                                  min_free > 0 ? "limit" : "preempt", J->name,
                                                  J->priority, x->priority, why));
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
        cy, j, n, slots, ns, "preempt",
        ts_sched_cycle_printf(cy, "placed on %s by preempting %d lower-priority job%s%s: %s",
                              cy->snap->nodes[n].name, nv, nv == 1 ? "" : "s",
                              min_free > 0 ? " within the limit" : "", why));
    return true;
}
