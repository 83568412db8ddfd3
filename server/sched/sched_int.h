/*
 * sched_int.h - the scheduler core's internal types, shared by its files only.
 *
 * The cluster (cluster.c) keeps free resources per GPU and per node and a
 * summary per node for quick rejection. A prepared request (struct preq)
 * caches what placement needs. Strategies (binpack.c, spread.c, fgd.c)
 * implement struct ts_sched_strategy; place.c drives them. The cycle
 * (decide.c) adds projects and jobs on top (struct cycle).
 */
#ifndef TS_SERVER_SCHED_SCHED_INT_H
#define TS_SERVER_SCHED_SCHED_INT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/arena.h"
#include "server/sched/sched.h"

#define EPS 1e-9

/* ---- cluster ---------------------------------------------------------- */

struct gpu_state {
    int node;
    int model;      /* interned model id */
    int64_t usable; /* memory less reserve */
    int64_t used;   /* bytes packed by requests */
};

struct node_state {
    int first; /* into cluster.node_gpus */
    int ngpus;
    bool ready;
    double cpu_free;
    int64_t mem_free;
    int64_t swap_free;
    int nwhole;       /* GPUs with nothing on them */
    int64_t max_free; /* most free bytes on one GPU */
    double max_free_frac;
    double free_gpus; /* sum of free fractions */
    double frag;      /* fgd: cached fragmentation */
    bool frag_valid;
    double pfrag; /* fgd-paper: cached fragmentation */
    bool pfrag_valid;
    uint32_t version; /* bumps with every change of the above (pindex.c) */
};

/* A typical shape for fgd, in the cluster's terms. */
struct fshape {
    int count;
    double portion;
    double cpu;
    int64_t mem;
    double weight;
    const bool *model_ok; /* per interned model; NULL: any */
};

#define TS_SCHED_WHOLE_MAX 16

struct ts_sched_cluster {
    const struct ts_sched_snapshot *snap;
    struct gpu_state *gpus;   /* snapshot order */
    int *node_gpus;           /* GPU indexes grouped by node, by device index */
    struct node_state *nodes; /* snapshot order */
    int *whole;               /* nodes[i].nwhole again, packed: the victim walks read it
                                 for nodes met in no order, 4 bytes a node, not a line */
    const char **models;      /* interned model names */
    int nmodels;
    int64_t max_usable; /* largest usable GPU memory */
    struct gpu_kind {
        int model;
        int64_t usable;
    } * kinds; /* the distinct (model, usable) pairs */
    int nkinds;
    struct fshape *shapes;
    int nshapes;
    struct fmix {       /* fgd: the typical workload that may run on a GPU model */
        double weight;  /* the weight of the shapes that do not exclude it */
        double cpu;     /* CPU cores its GPU shapes ask per GPU; 0: none */
        double mem;     /* host memory bytes they ask per GPU; 0: none */
        double own_cpu; /* binpack: the same without the workload's shortfall */
        double own_mem;
    } * mix;                /* per interned model, or NULL */
    bool own_shapes_fixed;  /* shapes came from the snapshot */
    struct fshape *pshapes; /* fgd-paper: the paper's typical tasks (no host memory) */
    int npshapes;
    double max_node_cpu; /* bestfit: the largest node's CPU and GPUs */
    int max_node_gpus;
    double capacity;        /* GPUs on ready nodes */
    double allocated;       /* GPUs allocated on ready nodes */
    struct ts_arena *owner; /* ts_sched_cluster_new's arena; NULL inside a cycle */
    /* nodes by their empty GPUs (nwhole), the last counting all with
     * TS_SCHED_WHOLE_MAX or more: ts_sched_cluster_max_whole's bound */
    size_t whole_nodes[TS_SCHED_WHOLE_MAX + 1];
    struct pindex *pidx;                        /* pindex.c: placement index, or NULL */
    const struct ts_sched_cluster_watch *watch; /* the index's, with pidx; or NULL */
};

/* What the cluster tells the placement index (pindex.c) of its changes: set
 * by the index when it is made, so that cluster.c calls nothing above it. */
struct ts_sched_cluster_watch {
    void (*changed)(struct ts_sched_cluster *c, int node); /* node's state changed */
    void (*clear)(struct ts_sched_cluster *c);             /* every score changed */
    void (*free)(struct ts_sched_cluster *c);
};

/* A request made ready for placement. What a pass reads of a pending job's
 * request before it tries it comes first (cycle.h, struct job). */
struct preq {
    uint64_t hash;                          /* of what does not change in a cycle; 0: not taken */
    double gpus_estimate;                   /* GPUs it counts for before placement */
    const struct ts_sched_slot *only_slots; /* with only_node: the GPUs it must
                                               take (a suspended job's), or NULL */
    int only_node;                          /* -1, or the node it must go to */
    bool host_mem_held;                     /* suspended: its host memory is already counted */
    bool no_swap_node;                      /* refuses swap and can burst: no swap_resolver node */
    bool refuses_swap;                      /* r->refuses_swap, read without r */
    bool has_selector;                      /* r->nnode_selector > 0, read without r */
    const struct ts_sched_request *r;
    enum ts_sched_gpu_kind kind;
    int ndev; /* GPUs needed on the node (0 for CPU-only) */
    double portion;
    int64_t mem; /* MEMORY: bytes per GPU */
    double cpu;
    int64_t host_mem;
    const bool *model_ok; /* per interned model; NULL: any */
    size_t nonly_slots;
    double gpus_at_most; /* GPUs it may count for once placed: for limits */
};

/* Bytes a request packs on a GPU of this usable size. */
static inline int64_t preq_need(const struct preq *p, int64_t usable)
{
    switch (p->kind) {
    case TS_SCHED_GPU_COUNT:
        return usable;
    case TS_SCHED_GPU_PORTION: {
        if (p->portion >= 1.0)
            return usable;
        int64_t n = (int64_t)(p->portion * (double)usable + 1e-6);
        return n < 1 ? 1 : n;
    }
    case TS_SCHED_GPU_MEMORY:
        return p->mem;
    default:
        return 0;
    }
}

/* Whether GPU state (usable, used) can take the request. */
static inline bool preq_gpu_fits(const struct preq *p, int64_t usable, int64_t used)
{
    if (p->kind == TS_SCHED_GPU_COUNT)
        return used == 0;
    return usable - used >= preq_need(p, usable);
}

/* cluster.c */
struct ts_sched_cluster *ts_sched_cluster_build(const struct ts_sched_snapshot *snap,
                                                struct ts_arena *a);
int ts_sched_cluster_model_id(const struct ts_sched_cluster *c, const char *model);
bool ts_sched_cluster_node_static_ok(const struct ts_sched_cluster *c, const struct preq *p,
                                     int node);
void ts_sched_cluster_node_refresh(struct ts_sched_cluster *c, int node);
/* No node has more empty GPUs than this (INT_MAX when some node has
 * TS_SCHED_WHOLE_MAX or more). */
int ts_sched_cluster_max_whole(const struct ts_sched_cluster *c);
void ts_sched_cluster_take(struct ts_sched_cluster *c, int node, const struct ts_sched_slot *slots,
                           size_t nslots, double cpu, int64_t host_mem);
void ts_sched_cluster_give(struct ts_sched_cluster *c, int node, const struct ts_sched_slot *slots,
                           size_t nslots, double cpu, int64_t host_mem);
double ts_sched_cluster_slots_gpus(const struct ts_sched_cluster *c,
                                   const struct ts_sched_slot *slots, size_t nslots);
/* Fill p from r; model_ok is allocated from a (NULL a: a static buffer is not
 * used; the caller passes an arena). Returns false when the request is malformed. */
bool ts_sched_preq_prepare(const struct ts_sched_cluster *c, const struct ts_sched_request *r,
                           struct ts_arena *a, struct preq *p);
/* The workload's typical shapes from the requests of the pending jobs,
 * given one at a time (_add, in the jobs' order) while each is in cache (a
 * walk of their own over 100,000 jobs was a cache miss a job), then set
 * (_set: none when no request was given or the snapshot has its own). */
struct shapes_acc {
    struct fshape *s; /* distinct shapes so far, with their counts as weights */
    int n;
    size_t nreqs; /* requests given */
};
void ts_sched_cluster_shapes_begin(const struct ts_sched_cluster *c, struct shapes_acc *acc,
                                   struct ts_arena *a);
void ts_sched_cluster_shapes_add(const struct ts_sched_cluster *c, struct shapes_acc *acc,
                                 const struct preq *p);
void ts_sched_cluster_shapes_set(struct ts_sched_cluster *c, struct shapes_acc *acc,
                                 struct ts_arena *a);

/* memo.c: a request's signature: its shape, constraints, pin and salt.
 * ts_sched_preq_hash is the part that does not change in a cycle (kept in preq.hash). */
uint64_t ts_sched_preq_signature(const struct preq *p, uint64_t salt);
uint64_t ts_sched_preq_hash(const struct preq *p);

/* Node i's score for p by st and the local GPUs it would take; false when
 * it cannot take p (place.c's ts_sched_place_node_score, handed to the
 * index, which so calls nothing above it). */
typedef bool (*ts_sched_node_score_fn)(struct ts_sched_cluster *c,
                                       const struct ts_sched_strategy *st, const struct preq *p,
                                       int i, double *score, int *pick);
/* pindex.c: the best node for p by st, as score scores nodes (kept per
 * request class); -1 when none, -2 when the index cannot say (place by a
 * scan). Made at the first call, it watches the cluster (c->watch). */
int ts_sched_pindex_best(struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                         const struct preq *p, uint64_t sig, ts_sched_node_score_fn score);
void ts_sched_pindex_free(struct ts_sched_cluster *c); /* NULL index: a no-op */

/* ---- strategies (place.c, binpack.c, spread.c, fgd.c) ------------------ */

/* A view of one node while deciding: its GPUs' used bytes may be a scratch copy. */
struct node_view {
    int node;
    const int *gpu; /* snapshot GPU indexes, ngpus of them */
    int ngpus;
    const int64_t *used; /* used bytes per local GPU */
    double cpu_free;
    int64_t mem_free;
    bool scratch; /* used[] is not the node's real state */
};

struct ts_sched_strategy {
    const char *name;
    /* Choose p->ndev of the ncand fitting local GPUs cand[] (fractional
     * requests only; whole GPUs take the lowest free indexes). */
    void (*pick)(const struct ts_sched_cluster *c, const struct preq *p, const struct node_view *v,
                 const int *cand, int ncand, int *out);
    /* Score the node with the chosen local GPUs; lower is better. */
    double (*score)(struct ts_sched_cluster *c, const struct preq *p, const struct node_view *v,
                    const int *chosen, int nchosen);
};

extern const struct ts_sched_strategy ts_sched_binpack;
extern const struct ts_sched_strategy ts_sched_spread;
extern const struct ts_sched_strategy ts_sched_fgd;
extern const struct ts_sched_strategy ts_sched_fgd_paper;
extern const struct ts_sched_strategy ts_sched_bestfit;

/* Local GPUs of the view that can take the request; -1 when the node's CPU
 * or memory cannot. cand has room for v->ngpus entries. */
int ts_sched_place_candidates(const struct ts_sched_cluster *c, const struct preq *p,
                              const struct node_view *v, int *cand);
/* Choose GPUs on the view: true when it fits; out gets p->ndev local GPUs. */
bool ts_sched_place_on_view(const struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                            const struct preq *p, const struct node_view *v, int *out);
/* Node i's score for p and the local GPUs it would take; false when it
 * cannot take p. */
bool ts_sched_place_node_score(struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                               const struct preq *p, int i, double *score, int *pick);
/* A node score as the placement (place.c, pindex.c) compares it: rounded
 * to 1e-12, so that scores equal but for rounding are equal, and the
 * lowest node id wins. */
static inline double ts_sched_score_key(double score)
{
    /* past 1e6 a double is coarser than 1e-12 already */
    return fabs(score) < 1e6 ? nearbyint(score * 1e12) : score * 1e12;
}
/* Best node for p among nodes[0..n) (NULL: all); false when none. */
bool ts_sched_place_best_among(struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                               const struct preq *p, const int *nodes, size_t n, int *node,
                               struct ts_sched_slot *slots, size_t *nslots);
/* Best node for p; false when none. slots gets p->ndev entries. */
bool ts_sched_place_best(struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                         const struct preq *p, int *node, struct ts_sched_slot *slots,
                         size_t *nslots);
void ts_sched_node_view_of(const struct ts_sched_cluster *c, int node, int64_t *used_buf,
                           struct node_view *v);

/* binpack.c: the GPUs left free on the node after placing p on chosen[],
 * each GPU as a share of its usable memory (binpack's and bestfit's GPU
 * term). */
double ts_sched_binpack_gpus_left(const struct ts_sched_cluster *c, const struct preq *p,
                                  const struct node_view *v, const int *chosen, int nchosen);
/* binpack.c: the node's share of GPU and CPU left free after placing p on
 * chosen[] (0 = full); the base of binpack's and spread's scores. */
double ts_sched_binpack_leftover(const struct ts_sched_cluster *c, const struct preq *p,
                                 const struct node_view *v, const int *chosen, int nchosen);
/* binpack.c: the ndev candidates with the least free bytes (ties: lower index). */
void ts_sched_binpack_pick_fullest(const struct ts_sched_cluster *c, const struct preq *p,
                                   const struct node_view *v, const int *cand, int ncand, int *out);
/* cluster.c: whether a shape accepts GPU model m. */
static inline bool fshape_model_ok(const struct fshape *s, int m)
{
    return s->model_ok == NULL || s->model_ok[m];
}

/* fgd.c: fragmentation of a node view against the cluster's shapes. */
double ts_sched_fgd_fragmentation(const struct ts_sched_cluster *c, const struct node_view *v);

/* fairshare.c */
double ts_sched_fairshare_usage_factor(double usage, double total_usage, double weight,
                                       double total_weight);

#endif /* TS_SERVER_SCHED_SCHED_INT_H */
