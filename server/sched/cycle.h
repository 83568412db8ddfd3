/*
 * cycle.h - the state of one scheduling cycle, shared by decide.c (the
 * driver), order.c, victims.c, vindex.c, reclaim.c, preempt.c and reason.c,
 * and the changes of it they share (cycle.c). The calls go one way:
 * decide.c -> reclaim.c, preempt.c, reason.c -> cycle.c -> victims.c and
 * vindex.c, order.c, memo.c; nothing calls back up. Each file's functions
 * are declared in its own header.
 */
#ifndef TS_SERVER_SCHED_CYCLE_H
#define TS_SERVER_SCHED_CYCLE_H

#include <string.h>

#include "api/units.h"
#include "server/sched/sched_int.h"

struct order;
struct memo;
struct diag_cache;

/* Why a job is still pending, as found by its last attempt. */
enum stage {
    STAGE_NONE,
    STAGE_INVALID,
    STAGE_OVER_LIMIT, /* project limit */
    STAGE_DEPT_LIMIT, /* department limit */
    STAGE_DESERVED,   /* non-preemptible beyond the deserved share */
    STAGE_NO_ROOM,    /* placement failed; reclaim not allowed or failed */
};

/* The fields a pass reads of every job it tries (the queue's, the
 * repeated failure's) come first, in one cache line, and the preq's it
 * reads in the next: at 160,000 jobs, 46 MB of them, each job's first read
 * is a cache miss a line (order.c prefetches two lines a job). The walks
 * over every job read struct jhot instead (below). */
struct job {
    int64_t id;
    int project;
    int priority;
    bool preemptible;
    bool valid;
    bool running;
    bool reclaim_tried; /* a reclaim was tried and found no victims */
    bool reclaim_tier1; /* ... and it was the reclaim within quota */
    enum stage stage;
    int req_class;      /* decide.c: a pending job whose request is the same as
                           its own field for field, the first such (itself) */
    double gpus;        /* allocated now */
    uint64_t failed_at; /* decide.c: cycle.changes when its attempt last failed */
    int64_t submitted_at;
    struct preq p;
    /* the rest, read where a job is tried, stopped or placed: pointers and
     * 8-byte fields first, then the 4-byte ones, then the flags, without
     * holes (240 bytes a job, not 280: fewer lines for every walk and
     * write over 160,000 jobs); the request is p.r */
    const char *name;
    int64_t started_at;
    struct ts_sched_slot *slots;                  /* current placement */
    const struct ts_sched_slot *saved_only_slots; /* the GPUs of its pending pin */
    int64_t swap_need;                            /* running: host swap its suspension takes
                                                     (ts_sched_suspend_bytes) */
    int node;
    unsigned nslots;
    int orig;                   /* index in the snapshot's running[] or pending[] */
    int bind_dec;               /* its bind decision, -1 */
    int saved_only_node;        /* its pending pin, restored when unbound */
    unsigned saved_nonly_slots; /* of saved_only_slots */
    int stop_dec;               /* its stop decision, -1 */
    int prev, next;             /* the node's list of running jobs */
    bool orig_running;
    bool bound;      /* placed by this cycle: a later victim search may
                        take the placement back (when preemptible) */
    bool saved_held; /* its host memory was held before it was placed */
    bool evicted;    /* stopped by this cycle */
};

/* An entry of a project's victim list (victims.c): the job's candidate
 * order key as it was added, so that a removed entry (job -1), kept in
 * place until the list is compacted, stays in order whatever becomes of
 * its job. */
struct vent {
    int priority;
    int job; /* -1: removed */
    int64_t started_at, id;
    int node;       /* the job's, so that the search need not read the job */
    int nslots;     /* the job's GPUs: a whole-GPU preemption passes over
                       one that cannot alone empty enough of them */
    int gpu0;       /* its first slot (-1: none): whether a job of one GPU
                       is alone there, read without the job */
    int64_t bytes0; /* the bytes it packs there */
};

/* The entries of one priority, the best candidate last (victims.c), and
 * those added since it was last read, in the order they came (vindex.c:
 * merged in before the bucket is read). */
struct vbucket {
    int priority;
    struct vent *e;
    size_t n, cap, dead; /* dead: removed entries among the n */
    struct vent *in;
    size_t nin, capin;
};

/* A project's entries by priority, lowest first (victims.c). */
struct vlist {
    struct vbucket *vb;
    size_t nvb, capvb;
};

/* What the walks over every job read (shares_update's, the queue's, the
 * positions'), 24 bytes a job beside the job's 240: at 161,844 jobs each
 * such walk over the jobs was a cache miss a job. cycle.c keeps running
 * and amount in step with the job's own (ts_sched_cycle_bind, _stop and
 * unbind, the only places after decide.c's build_jobs where a job's
 * running or gpus change). */
struct jhot {
    double amount;    /* running: its GPUs (job.gpus); else, valid: its
                         estimate (job.p.gpus_estimate); else 0 */
    int64_t position; /* decide.c: its place in this pass's queue; 0: none */
    int project;
    bool running, valid, preemptible;
};

struct proj {
    double alloc;    /* GPUs allocated now */
    double alloc_np; /* of which non-preemptible */
    double demand;
    double deserved; /* min(quota, demand, limit) */
    double fair;
    double alloc0, fair0;    /* before this cycle's decisions (the snapshot's), for
                                the messages of stops and binds */
    const char *held;        /* ts_sched_cycle_held's sentence, once made */
    const char *why_preempt; /* preempt.c: what a preemption says of it, once made */
    int64_t min_runtime;
    int heap_pos;
    int *queue; /* this pass's pending jobs, in order */
    size_t nqueue, qhead;
    int touched;      /* victims.c scratch */
    int skipped_prio; /* victims.c scratch */
    bool in_rule;     /* victims.c scratch: its jobs are candidates */
    struct vlist all; /* victims.c: its stoppable running jobs */
    struct vlist big; /* ... those of two GPUs or more (a whole-GPU preemption
                         where no node has enough empty GPUs for one GPU's
                         victim: vindex.c) */
    size_t vlive;     /* live entries in all */
    double vmin_gpus; /* no job its list held this cycle had fewer GPUs */
    double removed;   /* victims.c scratch */
};

struct dep {
    double alloc;    /* GPUs allocated now */
    double deserved; /* min(quota, demand, limit), demand as fairshare.c sums it */
    double alloc0;   /* before this cycle's decisions */
    int touched;     /* victims.c scratch */
    double removed;  /* victims.c scratch */
};

struct decision_buf {
    struct ts_sched_decision *v;
    size_t n, cap;
};

struct cycle {
    const struct ts_sched_snapshot *snap;
    struct ts_arena *a;
    struct ts_sched_cluster *c;
    const struct ts_sched_strategy *st;
    struct job *jobs;
    struct jhot *hot; /* one a job */
    size_t njobs;
    struct proj *projs;
    struct dep *deps;
    double *demand, *deserved, *fair; /* shares_update's buffers, per project */
    int *node_head;                   /* first running job on each node, -1 */
    struct decision_buf dec;
    size_t pass_decisions;
    uint64_t changes;         /* binds and stops so far (cycle.c) */
    struct memo *failed_like; /* decide.c: this pass's failed attempts, by what
                                 an attempt reads of a job -> its index + 1 */
    int64_t free_epoch;       /* bumps when resources are freed */
    struct memo *fail_memo;   /* placement failures: signature -> freed[] length then */
    int *freed;               /* nodes where resources were freed, in order */
    size_t nfreed, capfreed;
    struct memo *reclaim_memo; /* reclaim failures, valid within a pass */
    struct order *order;       /* this pass's queue */
    int *job_order;            /* order.c: every job in queue order, sorted once */
    struct diag_cache *diag;   /* reason.c: node scans by request signature */
    bool vindex;               /* victims.c: the index is built */
    int *node_stamp;           /* victims.c: nodes seen by the current search */
    int *node_nstop;           /* victims.c: stoppable running jobs on each node */
    uint32_t *node_ver;        /* victims.c: bumps when a node's jobs or room change */
    struct memo *node_fail;    /* victims.c: preemption failures by request, project
                                  and node -> node_ver << 16 | priority */
    int *proj_node_slots;      /* victims.c: GPU slots of each project's stoppable jobs
                                  on each node, [project * nnodes + node] */
    int *proj_node_jobs;       /* vindex.c: and how many they are, [project * nnodes + node] */
    void *search_buf;          /* victims.c: a search's scratch, kept for the next */
    int stamp;
    bool nomem;
};

/* cycle.c */
void ts_sched_cycle_bind(struct cycle *cy, int j, int node, const struct ts_sched_slot *slots,
                         size_t nslots, const char *code, const char *msg);
void ts_sched_cycle_stop(struct cycle *cy, int v, int for_job, bool suspend, const char *code,
                         const char *msg);
/* j, running, joins its node's list (and the victim index) */
void ts_sched_cycle_list_add(struct cycle *cy, int j);
/* gpus (negative: taken) added to the allocation of project, its
 * non-preemptible part where the job is not preemptible, and its
 * department's */
static inline void ts_sched_cycle_account_gpus(struct cycle *cy, int project, bool preemptible,
                                               double gpus)
{
    struct proj *P = &cy->projs[project];
    P->alloc += gpus;
    if (!preemptible)
        P->alloc_np += gpus;
    int d = cy->snap->projects[project].department;
    if (d >= 0)
        cy->deps[d].alloc += gpus;
}
/* J's GPUs added to (sign 1) or taken from (-1) its project's and department's */
void ts_sched_cycle_account(struct cycle *cy, const struct job *J, int sign);
const char *ts_sched_cycle_printf(struct cycle *cy, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A sentence put together from pieces, for those every bind and stop makes
 * (vsnprintf for 79,000 of them was 9 % of a large cycle); cut at 1023
 * bytes as ts_sched_cycle_printf cuts. _end: borrowed from the arena.
 * n = 0 starts one: b is read only up to n, so it is not zeroed (the
 * 1,024 bytes twice a preemption were 3 % of its time). */
struct cycle_msg {
    char b[1024];
    size_t n;
};
/* k bytes of s. */
static inline void ts_sched_cycle_msg_addn(struct cycle_msg *m, const char *s, size_t k)
{
    size_t room = sizeof(m->b) - 1 - m->n;
    if (k > room)
        k = room;
    memcpy(m->b + m->n, s, k);
    m->n += k;
}
/* Inline, so that a literal's length is known where it is written (strlen
 * of the pieces of 79,000 sentences was 2 % of a large cycle). */
static inline void ts_sched_cycle_msg_add(struct cycle_msg *m, const char *s)
{
    ts_sched_cycle_msg_addn(m, s, strlen(s));
}
void ts_sched_cycle_msg_int(struct cycle_msg *m, long v);
const char *ts_sched_cycle_msg_end(struct cycle *cy, const struct cycle_msg *m);
/* "held 0.5 GPU of its quota 2 (fair share 1.5)": project p before this
 * cycle's decisions, for the messages of stops and binds (borrowed from the
 * cycle's arena). */
const char *ts_sched_cycle_held(struct cycle *cy, int p);

/* Whether v, placed by this cycle, was suspended before (by the snapshot or
 * by this cycle): taking the placement back may keep the suspension (its
 * host memory stays held) or drop it (freed). */
static inline bool ts_sched_cycle_holds_suspension(const struct job *v)
{
    return v->bound && v->saved_held;
}

#endif /* TS_SERVER_SCHED_CYCLE_H */
