/*
 * preempt.c - inside one project, a job displaces preemptible jobs of lower
 * priority. Also the way a job gets in when its project is at its limit: the
 * victims must then free at least what the limit leaves short. The
 * messages tell what the project (and, under a department's limit, the
 * department) held before this cycle's decisions.
 */
#include "server/sched/memo.h"
#include "server/sched/preempt.h"
#include "server/sched/victims.h"

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
    /* what the messages read of the job and the node, far apart in memory
     * (a cache miss each, 3 % of a cycle at 12,500 nodes where they were
     * read): fetched now, while the victims are stopped */
    __builtin_prefetch(J->name);
    __builtin_prefetch(&cy->snap->nodes[node]);
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
        /* "preempt: job "a" has priority 90, this job 50; WHY" */
        struct cycle_msg m; /* b is written before it is read: not zeroed */
        m.n = 0;
        ts_sched_cycle_msg_add(&m, min_free > 0 ? "limit: job \"" : "preempt: job \"");
        ts_sched_cycle_msg_add(&m, J->name);
        ts_sched_cycle_msg_add(&m, "\" has priority ");
        ts_sched_cycle_msg_int(&m, J->priority);
        ts_sched_cycle_msg_add(&m, ", this job ");
        ts_sched_cycle_msg_int(&m, x->priority);
        ts_sched_cycle_msg_add(&m, "; ");
        ts_sched_cycle_msg_add(&m, why);
        ts_sched_cycle_stop(cy, victims[i], j, suspend[i], "preempt",
                            ts_sched_cycle_msg_end(cy, &m));
    }
    /* the node's name, its line fetched above: fetched in turn while the
     * job is placed */
    __builtin_prefetch(cy->snap->nodes[node].name);
    int saved = J->p.only_node, n;
    struct ts_sched_slot slots[TS_SCHED_MAX_DEVICES];
    size_t ns = 0;
    J->p.only_node = node;
    bool ok = ts_sched_place_best(cy->c, cy->st, &J->p, &n, slots, &ns);
    J->p.only_node = saved;
    if (!ok)
        return false; /* cannot happen: ts_sched_victims_find checked the same room */
    /* "placed on NODE by preempting 2 lower-priority jobs[ within the limit]: WHY" */
    struct cycle_msg m; /* b is written before it is read: not zeroed */
    m.n = 0;
    ts_sched_cycle_msg_add(&m, "placed on ");
    ts_sched_cycle_msg_add(&m, cy->snap->nodes[n].name);
    ts_sched_cycle_msg_add(&m, " by preempting ");
    ts_sched_cycle_msg_int(&m, nv);
    ts_sched_cycle_msg_add(&m, nv == 1 ? " lower-priority job" : " lower-priority jobs");
    ts_sched_cycle_msg_add(&m, min_free > 0 ? " within the limit: " : ": ");
    ts_sched_cycle_msg_add(&m, why);
    ts_sched_cycle_bind(cy, j, n, slots, ns, "preempt", ts_sched_cycle_msg_end(cy, &m));
    return true;
}
