/*
 * sched.h - the scheduler core: a snapshot in, decisions out.
 *
 * Pure: no I/O, no SQL, no clock, no randomness. The same snapshot always
 * gives the same decisions. The server fills a snapshot from PostgreSQL once
 * per cycle; tessera-sim fills it from traces; the tests from JSON fixtures
 * (sched_json.c). See server/sched/README.md for the algorithm.
 *
 * Ownership: every pointer inside a snapshot is borrowed from the caller and
 * must stay valid during the call that receives the snapshot. Cross
 * references are indexes into the snapshot's own arrays (project, node,
 * gpu), never ids; ids are carried for the output and for tie-breaks.
 *
 * Units: GPU amounts in GPUs (fractional), GPU and host memory in bytes,
 * CPU in cores, times in seconds on the caller's clock (`now` and the
 * started/submitted times must use the same one).
 */
#ifndef TS_SERVER_SCHED_SCHED_H
#define TS_SERVER_SCHED_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/err.h"

#define TS_SCHED_MAX_DEVICES 64 /* GPUs one job may take on one node */

/* ---- the snapshot ----------------------------------------------------- */

struct ts_sched_label {
    const char *key;
    const char *value;
};

struct ts_sched_department {
    int64_t id;
    const char *name;
    double quota_gpus;        /* >= 0, fractional */
    double over_quota_weight; /* >= 0 */
    bool has_limit;
    double limit_gpus; /* >= quota_gpus when has_limit */
    int priority;      /* higher is served surplus first */
};

struct ts_sched_project {
    int64_t id;
    const char *name;
    int department; /* index into departments, or -1 for none */
    double quota_gpus;
    double over_quota_weight;
    bool has_limit;
    double limit_gpus;
    int priority;
    double usage_gpu_seconds; /* decayed recent usage (ts_sched_usage_decay) */
    int64_t min_runtime_s;    /* protection; -1: the cluster's default */
};

struct ts_sched_node {
    int64_t id;
    const char *name;
    bool ready;           /* false: nothing new goes there */
    double cpu;           /* cores */
    int64_t memory_bytes; /* host memory */
    const struct ts_sched_label *labels;
    size_t nlabels;
    int64_t swap_free_bytes; /* host swap room for suspends; 0: none */
    bool swap_resolver;      /* its agent resolves GPU memory collisions by
                                swapping burst holders out (collision=swap) */
};

struct ts_sched_gpu {
    int node;              /* index into nodes */
    int index;             /* device index on its node */
    const char *model;     /* "" when unknown */
    int64_t memory_bytes;  /* > reserve_bytes */
    int64_t reserve_bytes; /* held back for contexts (default 2 GiB on real nodes) */
};

enum ts_sched_gpu_kind {
    TS_SCHED_GPU_NONE,    /* CPU-only job */
    TS_SCHED_GPU_COUNT,   /* `count` whole GPUs of one node */
    TS_SCHED_GPU_PORTION, /* `portion` of each of `devices` GPUs of one node */
    TS_SCHED_GPU_MEMORY,  /* `memory_bytes` on each of `devices` GPUs of one node */
};

struct ts_sched_request {
    enum ts_sched_gpu_kind kind;
    int count;                     /* COUNT: 1..64 */
    double portion;                /* PORTION: (0, 1] */
    double portion_limit;          /* burst limit; not packed (0: = portion) */
    int64_t memory_bytes;          /* MEMORY: per GPU */
    int64_t memory_limit_bytes;    /* burst limit; not packed */
    int devices;                   /* PORTION/MEMORY: 1..64 GPUs (0 reads as 1) */
    double cpu;                    /* cores; 0 = not requested */
    int64_t host_memory_bytes;     /* 0 = not requested */
    const char *const *gpu_models; /* accepted models; none = any */
    size_t ngpu_models;
    const struct ts_sched_label *node_selector; /* labels the node must have */
    size_t nnode_selector;
    bool refuses_swap; /* never suspended; when it can burst (limit above its
                          request), never placed on a swap_resolver node */
};

/* One GPU a job holds: the GPU (index into gpus) and the bytes it packs there. */
struct ts_sched_slot {
    int gpu;
    int64_t memory_bytes;
};

struct ts_sched_running {
    int64_t id;
    const char *name;
    int project; /* index into projects */
    int priority;
    bool preemptible;
    struct ts_sched_request request;
    int node;                          /* index into nodes */
    const struct ts_sched_slot *slots; /* one per GPU held; none for CPU-only */
    size_t nslots;
    int64_t started_at;        /* seconds; protection counts from here */
    int64_t memory_used_bytes; /* GPU memory it last reported using, all its GPUs
                                  (0: unknown) */
    int64_t swapped_bytes;     /* of its GPU memory, what its node keeps in host
                                  swap while it runs (idle detach); already out
                                  of its node's swap_free_bytes */
};

/* The host swap a suspension of r takes beyond what it already holds there:
 * what it holds (the greater of its packed bytes, memory_used_bytes and
 * swapped_bytes) less swapped_bytes. The server's store counts the same
 * when it writes the suspension. */
int64_t ts_sched_suspend_bytes(const struct ts_sched_running *r);

struct ts_sched_pending {
    int64_t id;
    const char *name;
    int project;
    int priority;
    bool preemptible;
    struct ts_sched_request request;
    int64_t submitted_at;                        /* seconds; older goes first at equal priority */
    int suspended_node;                          /* -1, or the node it is suspended on: it resumes
                                                    only there, and its host memory is still held */
    const struct ts_sched_slot *suspended_slots; /* the GPUs it held there (none:
                             any of the node's): its processes keep those
                             devices, so it resumes only on them */
    size_t nsuspended_slots;
};

/* A typical pending shape for fgd; `weight` is its share of the workload. */
struct ts_sched_shape {
    int count;      /* whole GPUs, or 0 */
    double portion; /* share of one GPU when count is 0 */
    double cpu;
    int64_t host_memory_bytes;
    double weight;
    const char *const *gpu_models; /* the GPU models it accepts (a job's gpu_models); none: any */
    size_t ngpu_models;
};

struct ts_sched_config {
    const char *strategy;     /* "binpack" (NULL), "spread" or "fgd" */
    int64_t min_runtime_s;    /* default protection; 0: none */
    double usage_half_life_s; /* > 0: usage lowers the over-quota weight */
    int max_passes;           /* 0: 16 */
};

struct ts_sched_snapshot {
    int64_t now;
    struct ts_sched_config config;
    const struct ts_sched_department *departments;
    size_t ndepartments;
    const struct ts_sched_project *projects;
    size_t nprojects;
    const struct ts_sched_node *nodes;
    size_t nnodes;
    const struct ts_sched_gpu *gpus;
    size_t ngpus;
    const struct ts_sched_running *running;
    size_t nrunning;
    const struct ts_sched_pending *pending;
    size_t npending;
    const struct ts_sched_shape *shapes; /* fgd's workload; none: the pending jobs' */
    size_t nshapes;
};

/* ---- the result ------------------------------------------------------- */

enum ts_sched_action {
    TS_SCHED_BIND,    /* start a pending job on node + slots */
    TS_SCHED_EVICT,   /* stop a running job; it goes back to the queue. With
                         job_was_running false: end the suspension of a
                         pending job suspended on `node` (its processes end,
                         its host memory is freed, it may resume anywhere) */
    TS_SCHED_SUSPEND, /* stop it in place: its GPU memory moves to host swap */
};

struct ts_sched_decision {
    enum ts_sched_action action;
    int64_t job_id;
    bool job_was_running; /* job indexes running[] (true) or pending[] */
    int job;
    int node;                          /* BIND: where; EVICT/SUSPEND: where it was */
    const struct ts_sched_slot *slots; /* BIND: the GPUs and bytes granted */
    size_t nslots;
    double gpus;         /* GPUs this decision binds or frees */
    int64_t for_job_id;  /* EVICT/SUSPEND: the job it makes room for */
    const char *code;    /* "fits", "reclaim", "preempt", ... */
    const char *message; /* sentence with the numbers */
};

struct ts_sched_pending_reason {
    int64_t job_id;
    int job;          /* index into pending[] of the snapshot, or -1
                         for a job evicted by this cycle */
    const char *code; /* stable: over_limit, quota_exhausted, ... */
    const char *message;
    int64_t queue_position; /* 1 = next */
};

struct ts_sched_share {
    int64_t project_id;
    double demand;   /* GPUs: allocated + requested */
    double deserved; /* min(quota, demand) */
    double fair_share;
    double allocated; /* after the decisions */
};

struct ts_sched_result {
    struct ts_sched_decision *decisions; /* evictions come before the bind they serve */
    size_t ndecisions;
    struct ts_sched_pending_reason *pending; /* in queue order */
    size_t npending;
    struct ts_sched_share *shares; /* one per project, snapshot order */
    size_t nshares;
    int passes;             /* passes the cycle took */
    struct ts_arena *arena; /* owns all of the above */
};

/* One cycle. *out is new (ts_sched_result_free). Fails only on a snapshot
 * that is malformed (a bad index, a negative quota, ...), naming the entry. */
enum ts_err ts_sched_decide(const struct ts_sched_snapshot *snap, struct ts_sched_result **out,
                            struct ts_error *err);
/* NULL is a no-op. The result's memory is kept, emptied, for the next
 * ts_sched_decide (one arena at a time, for any thread). */
void ts_sched_result_free(struct ts_sched_result *r);

/* Check a snapshot without deciding: indexes in range, amounts sane. */
enum ts_err ts_sched_snapshot_validate(const struct ts_sched_snapshot *snap, struct ts_error *err);

/* Usage with half-life decay: usage after `elapsed_s` more seconds. */
double ts_sched_usage_decay(double usage, double elapsed_s, double half_life_s);

/* ---- checking and applying decisions ----------------------------------- */

/* Check a result against its snapshot: no GPU packed beyond its memory less
 * reserve, no node's CPU or memory beyond its size where something was bound,
 * no project or department pushed over its limit, no non-preemptible or
 * protected job stopped, no job placed and stopped by the same cycle, every
 * stop serving a bind of the same cycle, every job left pending with a code,
 * a message and a distinct queue position. TS_OK, or the first breach. */
enum ts_err ts_sched_check(const struct ts_sched_snapshot *snap, const struct ts_sched_result *res,
                           struct ts_error *err);

/* The state the decisions produce, as a new snapshot: bound jobs run (started
 * `now`), stopped jobs are pending again (suspended ones pinned to their node,
 * their swap room taken). *out's arrays are allocated from `a` (borrowed
 * until it is freed); strings and requests are borrowed from snap. */
enum ts_err ts_sched_apply(const struct ts_sched_snapshot *snap, const struct ts_sched_result *res,
                           struct ts_arena *a, struct ts_sched_snapshot *out, struct ts_error *err);

/* ---- fair share alone ------------------------------------------------- */

/* Fair share of every project from quotas and demands (GPUs); `capacity` is
 * the cluster's GPUs. out_deserved/out_fair have nprojects entries (caller's).
 * `usage_half_life_s` > 0 enables the usage factor. */
void ts_sched_fairshare(const struct ts_sched_department *deps, size_t ndeps,
                        const struct ts_sched_project *projs, size_t nprojs, const double *demand,
                        double capacity, double usage_half_life_s, double *out_deserved,
                        double *out_fair);

/* ---- placement alone (tessera-sim's placement replay) ----------------- */

struct ts_sched_strategy; /* the vtable behind binpack, spread and fgd */
struct ts_sched_cluster;  /* free resources of nodes and GPUs */

/* Static strategy by name, or NULL when unknown. */
const struct ts_sched_strategy *ts_sched_strategy_find(const char *name);
const char *ts_sched_strategy_name(const struct ts_sched_strategy *st);
/* The published baselines of Weng et al. (ATC '23), for tessera-sim's
 * comparisons only (never a snapshot's strategy): "fgd-paper" (fgd_paper.c)
 * and "bestfit" (bestfit.c); NULL when unknown. */
const struct ts_sched_strategy *ts_sched_reference_find(const char *name);

/* New cluster from the snapshot's nodes, GPUs, running jobs and shapes
 * (projects and pending jobs are not used). NULL when out of memory. The
 * snapshot must be valid and outlive the cluster. */
struct ts_sched_cluster *ts_sched_cluster_new(const struct ts_sched_snapshot *snap);
void ts_sched_cluster_free(struct ts_sched_cluster *c);

/* Where `req` would go now; false when nowhere. slots[] has room for
 * TS_SCHED_MAX_DEVICES entries; *nslots is set. */
bool ts_sched_cluster_place(struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                            const struct ts_sched_request *req, int *node,
                            struct ts_sched_slot *slots, size_t *nslots);
/* Take the resources of a placement (from ts_sched_cluster_place). */
void ts_sched_cluster_commit(struct ts_sched_cluster *c, const struct ts_sched_request *req,
                             int node, const struct ts_sched_slot *slots, size_t nslots);
/* GPUs allocated now, fractional, over ready nodes. */
double ts_sched_cluster_allocated_gpus(const struct ts_sched_cluster *c);

#endif /* TS_SERVER_SCHED_SCHED_H */
