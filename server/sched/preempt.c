/*
 * preempt.c - inside one project, a job displaces preemptible jobs of lower
 * priority. Also the way a job gets in when its project is at its limit: the
 * victims must then free at least what the limit leaves short.
 */
#include "server/sched/cycle.h"

bool preempt_try(struct cycle *cy, int j, double min_free)
{
    struct job *J = &cy->jobs[j];
    uint64_t key = preq_signature(&J->p, 0x50524545ULL + (uint64_t)J->project * 7919u +
                                             (uint64_t)(J->priority + 100000) * 104729u +
                                             (uint64_t)(min_free * 1000.0));
    if (memo_has(cy->reclaim_memo, key))
        return false;
    struct victim_rule r = {.below_priority = J->priority, .min_free = min_free};
    int node, victims[256], nv = 0;
    bool suspend[256];
    if (!victims_find(cy, j, &r, &node, victims, suspend, &nv)) {
        memo_add(cy->reclaim_memo, key);
        return false;
    }
    const char *pname = cy->snap->projects[J->project].name;
    for (int i = 0; i < nv; i++) {
        const struct job *x = &cy->jobs[victims[i]];
        cycle_stop(cy, victims[i], j, suspend[i], "preempt",
                   cycle_printf(cy,
                                "preempt: job \"%s\" of project \"%s\" has priority %d; this "
                                "job has %d",
                                J->name, pname, J->priority, x->priority));
    }
    int saved = J->p.only_node, n;
    struct ts_sched_slot slots[TS_SCHED_MAX_DEVICES];
    size_t ns = 0;
    J->p.only_node = node;
    bool ok = place_best(cy->c, cy->st, &J->p, &n, slots, &ns);
    J->p.only_node = saved;
    if (!ok)
        return false; /* cannot happen: victims_find checked the same room */
    cycle_bind(cy, j, n, slots, ns, "preempt",
               cycle_printf(cy,
                            "placed on %s by preempting %d lower-priority job%s of "
                            "project \"%s\"",
                            cy->snap->nodes[n].name, nv, nv == 1 ? "" : "s", pname));
    return true;
}
