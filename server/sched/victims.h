/*
 * victims.h - choosing the jobs to stop so that a pending job fits
 * (victims.c), and the index behind the search (vindex.c).
 */
#ifndef TS_SERVER_SCHED_VICTIMS_H
#define TS_SERVER_SCHED_VICTIMS_H

#include "server/sched/cycle.h"

/* Fewest, lowest-priority, most recently started victims on one node that
 * make room for job j. Candidates: for reclaim, jobs of the other projects
 * above their quota (tier 1) or fair share (tier 2); else jobs of j's
 * project below below_priority. min_free is what the victims must free
 * (limits). */
struct victim_rule {
    bool reclaim;
    int below_priority; /* preempt: victims' priority is lower */
    double min_free;    /* GPUs the victims must free (preempt under a limit) */
    /* reclaim: */
    bool tier1;              /* within quota: take only from projects above theirs */
    bool other_deps;         /* victims outside j's department may be taken */
    bool keep_quota_in;      /* victims' projects of j's department stay at or
                                above their quotas */
    bool keep_quota_out;     /* other victims' departments (department-less
                                projects) stay at or above their quotas */
    bool fair_rule;          /* tier 2, the anti-loop invariant: victims stay at
                                least reclaimer_excess above their fair shares */
    double reclaimer_excess; /* j's project's excess over fair share after */
};
bool ts_sched_victims_find(struct cycle *cy, int j, const struct victim_rule *r, int *node,
                           int *victims, bool *suspend, int *nvictims);
/* vindex.c: the index behind it: each project's running jobs that may be
 * stopped, in candidate order. Built once the projects are; kept by
 * cycle.c's list_add/list_del. */
bool ts_sched_victims_stoppable(const struct cycle *cy, const struct job *x);
bool ts_sched_victims_index_build(struct cycle *cy);
/* node's jobs or room changed: failures remembered there are stale */
void ts_sched_victims_node_changed(struct cycle *cy, int node);
void ts_sched_victims_index_add(struct cycle *cy, int v);
/* project's buckets below priority below (INT_MAX: all) made ready to read:
 * the entries added since merged in; false when out of memory */
bool ts_sched_victims_index_ready(struct cycle *cy, int project, int below);
void ts_sched_victims_index_del(struct cycle *cy, int v);
void ts_sched_victims_index_free(struct cycle *cy);

#endif /* TS_SERVER_SCHED_VICTIMS_H */
