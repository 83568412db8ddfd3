/*
 * victims.c - choosing the jobs to stop so that a pending job fits.
 *
 * On each node that could hold the job, candidates (running, preemptible,
 * past their minimum runtime, accepted by the rule: reclaim or preempt; a job
 * this cycle placed counts too, and taking it is not an eviction: its
 * placement is taken back) are taken in order of lowest priority, then most
 * recently started, then highest id, until the job fits; then every victim
 * that is not needed after all is given back, the highest priority first.
 * Among nodes the set with the fewest victims wins, then the lowest highest
 * priority, the lowest priority sum, the most recent start, the lowest node
 * id.
 *
 * The room a victim makes is counted as if it were evicted (its GPUs, CPU
 * and host memory), so that more victims never make less room. Only then is
 * each victim, in the same order, suspended instead where its node has swap
 * room for its GPU memory and the job still fits with the victim's host
 * memory kept: the gentlest stop that makes the room. (Counting a suspension
 * first would make the room depend on the order: one suspension can use up
 * the swap that would have kept the next victim's host memory, and a cycle
 * that saw the same jobs in another order could find room this one did not.)
 */
#include <limits.h>
#include <string.h>

#include "server/sched/memo.h"
#include "server/sched/victims.h"

#define MAXG (TS_SCHED_MAX_DEVICES * 4)
#define MAXV 256 /* candidates looked at per node */
#define NPRE 16  /* victims whose room is kept for the give-back */

struct scratch {
    struct node_view v;
    int64_t used[MAXG];
    int64_t swap;
    double freed;
};

static int64_t job_bytes(const struct job *v)
{
    int64_t b = 0;
    for (size_t k = 0; k < v->nslots; k++)
        b += v->slots[k].memory_bytes;
    return b;
}

static void scratch_init(struct cycle *cy, int node, struct scratch *s)
{
    ts_sched_node_view_of(cy->c, node, s->used, &s->v);
    s->v.scratch = true;
    s->swap = cy->c->nodes[node].swap_free;
    s->freed = 0;
}

/* Whether v, stopped, could be suspended: it was running before this cycle
 * and holds GPU memory, or it was suspended before this cycle placed it. A
 * placement taken back otherwise is simply undone. A job that refuses swap
 * is never suspended. */
static bool suspendable(const struct job *v)
{
    if (v->p.refuses_swap)
        return false;
    return v->bound ? ts_sched_cycle_holds_suspension(v) : job_bytes(v) > 0;
}

/* Release v on the scratch node: evicted, or suspended (its host memory
 * stays, its GPU memory takes swap room). False when a suspension finds no
 * swap room. */
static bool scratch_release(struct scratch *s, const struct job *v, bool suspend)
{
    for (size_t k = 0; k < v->nslots; k++)
        for (int l = 0; l < s->v.ngpus; l++)
            if (s->v.gpu[l] == v->slots[k].gpu)
                s->used[l] -= v->slots[k].memory_bytes;
    s->v.cpu_free += v->p.cpu;
    s->freed += v->gpus;
    if (v->bound) {
        /* a placement taken back: its host memory returns unless the job was
         * suspended before and keeps its suspension */
        if (!v->saved_held || !suspend)
            s->v.mem_free += v->p.host_mem;
        return true;
    }
    if (suspend) {
        if (s->swap < v->swap_need)
            return false;
        s->swap -= v->swap_need;
        return true;
    }
    s->v.mem_free += v->p.host_mem;
    return true;
}

/* dst = src (its GPUs' used bytes copied, and pointed at) */
static void scratch_copy(struct scratch *dst, const struct scratch *src)
{
    dst->v = src->v;
    memcpy(dst->used, src->used, (size_t)src->v.ngpus * sizeof(dst->used[0]));
    dst->v.used = dst->used;
    dst->swap = src->swap;
    dst->freed = src->freed;
}

static bool scratch_fits(struct cycle *cy, const struct preq *p, const struct scratch *s)
{
    int cand[MAXG];
    int n = ts_sched_place_candidates(cy->c, p, &s->v, cand);
    return n >= 0 && n >= p->ndev;
}

struct vset {
    int n;
    int maxprio;
    long sumprio;
    int64_t minstart;
};

static struct vset vset_of(const struct cycle *cy, const int *v, int n)
{
    struct vset s = {n, 0, 0, INT64_MAX};
    for (int i = 0; i < n; i++) {
        const struct job *x = &cy->jobs[v[i]];
        if (i == 0 || x->priority > s.maxprio)
            s.maxprio = x->priority;
        s.sumprio += x->priority;
        if (x->started_at < s.minstart)
            s.minstart = x->started_at;
    }
    return s;
}

static bool vset_better(const struct vset *a, const struct vset *b)
{
    if (a->n != b->n)
        return a->n < b->n;
    if (a->maxprio != b->maxprio)
        return a->maxprio < b->maxprio;
    if (a->sumprio != b->sumprio)
        return a->sumprio < b->sumprio;
    return a->minstart > b->minstart;
}

/* lowest priority, then latest start, then highest id first */
static bool cand_before(const struct job *a, const struct job *b)
{
    if (a->priority != b->priority)
        return a->priority < b->priority;
    if (a->started_at != b->started_at)
        return a->started_at > b->started_at;
    return a->id > b->id;
}

/* Room after releasing set[0..n) except skip (-1: none), each evicted or,
 * where susp[i] (susp may be NULL), suspended; checks fit and min_free. */
static bool set_fits(struct cycle *cy, const struct preq *p, int node, const int *set, int n,
                     int skip, const bool *susp, double min_free)
{
    struct scratch s;
    scratch_init(cy, node, &s);
    for (int i = 0; i < n; i++)
        if (i != skip && !scratch_release(&s, &cy->jobs[set[i]], susp != NULL && susp[i]))
            return false;
    return s.freed >= min_free - EPS && scratch_fits(cy, p, &s);
}

/* Suspend each victim, in order, that can be and that the job does not need
 * the host memory of. */
static void choose_suspends(struct cycle *cy, const struct preq *p, int node, const int *set, int n,
                            double min_free, bool *susp)
{
    for (int i = 0; i < n; i++)
        susp[i] = false;
    for (int i = 0; i < n; i++) {
        if (!suspendable(&cy->jobs[set[i]]))
            continue;
        susp[i] = true;
        if (!set_fits(cy, p, node, set, n, -1, susp, min_free))
            susp[i] = false;
    }
}

/* A search's place in a project's list: the bucket, and how many entries
 * of it are left (the next candidate is the last of them). */
struct vcur {
    size_t b, left;
};

/* The next live candidate at or after c (moved there), or NULL. */
static const struct vent *vcur_live(const struct proj *P, struct vcur *c)
{
    while (c->b < P->all.nvb) {
        const struct vbucket *b = &P->all.vb[c->b];
        while (c->left > 0 && b->e[c->left - 1].job < 0)
            c->left--;
        if (c->left > 0)
            return &b->e[c->left - 1];
        if (++c->b < P->all.nvb)
            c->left = P->all.vb[c->b].n;
    }
    return NULL;
}

/* lowest priority, then latest start, then highest id first */
static bool vent_cand_before(const struct vent *a, const struct vent *b)
{
    if (a->priority != b->priority)
        return a->priority < b->priority;
    if (a->started_at != b->started_at)
        return a->started_at > b->started_at;
    return a->id > b->id;
}

/* ---- the search ---------------------------------------------------------- */

/* The jobs on node that the rule lets j stop, in candidate order. */
static int node_candidates(struct cycle *cy, int j, const struct victim_rule *r, int node,
                           int *cand)
{
    int nc = 0;
    for (int v = cy->node_head[node]; v >= 0 && nc < MAXV; v = cy->jobs[v].next) {
        const struct job *x = &cy->jobs[v];
        if (v == j || !ts_sched_victims_stoppable(cy, x) || !cy->projs[x->project].in_rule)
            continue;
        if (!r->reclaim && x->priority >= r->below_priority)
            continue;
        int k = nc++;
        while (k > 0 && cand_before(x, &cy->jobs[cand[k - 1]])) {
            cand[k] = cand[k - 1];
            k--;
        }
        cand[k] = v;
    }
    return nc;
}

/* Give back the victims not needed after all, the highest priority first:
 * the room without victim k is what the first k made (pre[k], kept by the
 * search: a give-back only ever drops victims after them) plus the rest,
 * released in the same order as set_fits would, so the same sums. */
static void give_back(struct cycle *cy, const struct preq *p, const struct victim_rule *r, int node,
                      const struct scratch *pre, int *chosen, int *nchosen)
{
    for (int k = *nchosen - 1; k >= 0 && *nchosen > 1; k--) {
        bool ok;
        if (k < NPRE) {
            struct scratch t;
            scratch_copy(&t, &pre[k]);
            for (int i = k + 1; i < *nchosen; i++)
                scratch_release(&t, &cy->jobs[chosen[i]], false);
            ok = t.freed >= r->min_free - EPS && scratch_fits(cy, p, &t);
        } else {
            ok = set_fits(cy, p, node, chosen, *nchosen, k, NULL, r->min_free);
        }
        if (ok) {
            memmove(&chosen[k], &chosen[k + 1], (size_t)(*nchosen - k - 1) * sizeof(int));
            (*nchosen)--;
        }
    }
}

/* The victims on one node: the candidates in order until the job fits, less
 * those not needed after all; false when they cannot make room. */
static bool node_victims(struct cycle *cy, int j, const struct victim_rule *r, int node,
                         int *touched, int *dtouched, int *chosen, int *out_n)
{
    const struct job *J = &cy->jobs[j];
    if (!ts_sched_cluster_node_static_ok(cy->c, &J->p, node))
        return false;
    if (cy->c->nodes[node].ngpus < J->p.ndev || cy->c->nodes[node].ngpus > MAXG)
        return false;
    int cand[MAXV];
    int nc = node_candidates(cy, j, r, node, cand);
    if (nc == 0)
        return false;
    struct scratch s, pre[NPRE]; /* pre[i]: the room the first i victims make */
    scratch_init(cy, node, &s);
    int nchosen = 0, ntouched = 0, ndtouched = 0;
    int jd = cy->snap->projects[J->project].department;
    bool fit = false;
    for (int i = 0; i < nc && !fit; i++) {
        const struct job *x = &cy->jobs[cand[i]];
        if (r->reclaim) {
            struct proj *pv = &cy->projs[x->project];
            int e = cy->snap->projects[x->project].department;
            struct dep *ev = e >= 0 ? &cy->deps[e] : NULL;
            if (pv->touched == 0) {
                touched[ntouched++] = x->project;
                pv->touched = 1;
                pv->skipped_prio = INT_MAX;
            }
            if (ev != NULL && ev->touched == 0) {
                dtouched[ndtouched++] = e;
                ev->touched = 1;
            }
            /* a project's jobs go in its own order: none of higher priority
             * than one passed over */
            if (x->priority > pv->skipped_prio)
                continue;
            double left = pv->alloc - pv->removed - x->gpus;
            bool inside = jd >= 0 && e == jd;
            /* a quota is a guarantee (reclaim.c): within j's department, the
             * victim's project's; against another department, the
             * department's, or the project's where it has none; tier 1 keeps
             * every victim's project's too */
            bool proj_floor = inside ? r->keep_quota_in : r->tier1 || (e < 0 && r->keep_quota_out);
            bool dep_floor = !inside && ev != NULL && r->keep_quota_out;
            bool ok = true;
            /* anti-loop: the victim's project stays at least as far above
             * its fair share as the reclaimer will be */
            if (r->fair_rule && left - pv->fair < r->reclaimer_excess - EPS)
                ok = false;
            if (proj_floor && left < pv->deserved - EPS)
                ok = false;
            if (dep_floor && ev->alloc - ev->removed - x->gpus < ev->deserved - EPS)
                ok = false;
            if (!ok) {
                pv->skipped_prio = x->priority;
                continue;
            }
            pv->removed += x->gpus;
            if (ev != NULL)
                ev->removed += x->gpus;
        }
        if (nchosen < NPRE)
            scratch_copy(&pre[nchosen], &s);
        scratch_release(&s, x, false);
        chosen[nchosen++] = cand[i];
        fit = s.freed >= r->min_free - EPS && scratch_fits(cy, &J->p, &s);
    }
    for (int t = 0; t < ntouched; t++) {
        cy->projs[touched[t]].touched = 0;
        cy->projs[touched[t]].removed = 0;
    }
    for (int t = 0; t < ndtouched; t++) {
        cy->deps[dtouched[t]].touched = 0;
        cy->deps[dtouched[t]].removed = 0;
    }
    if (!fit)
        return false;
    give_back(cy, &J->p, r, node, pre, chosen, &nchosen);
    *out_n = nchosen;
    return true;
}

/* Marks the projects whose jobs the rule lets j stop (in_rule) and starts
 * a cursor on each one's list; returns how many lists. */
/* Whether project q's floors leave room for its smallest stoppable job in
 * a reclaim: node_victims's checks of a victim, for one of vmin_gpus GPUs
 * taken first; a larger victim, or one after others, leaves less. Where
 * none can be taken the project's list is not walked at all (a failed
 * reclaim had looked at every node of the other projects' jobs). */
static bool can_give(const struct cycle *cy, const struct victim_rule *r, int jd, int q)
{
    const struct proj *pv = &cy->projs[q];
    int e = cy->snap->projects[q].department;
    const struct dep *ev = e >= 0 ? &cy->deps[e] : NULL;
    double g = pv->vmin_gpus, left = pv->alloc - g;
    bool inside = jd >= 0 && e == jd;
    bool proj_floor = inside ? r->keep_quota_in : r->tier1 || (e < 0 && r->keep_quota_out);
    bool dep_floor = !inside && ev != NULL && r->keep_quota_out;
    const double clear = 1e-9; /* only a clear shortfall leaves a list out */
    if (r->fair_rule && left - pv->fair < r->reclaimer_excess - EPS - clear)
        return false;
    if (proj_floor && left < pv->deserved - EPS - clear)
        return false;
    return !(dep_floor && ev->alloc - g < ev->deserved - EPS - clear);
}

static int rule_lists(struct cycle *cy, int j, const struct victim_rule *r, int *list,
                      struct vcur *cur)
{
    const struct job *J = &cy->jobs[j];
    const struct ts_sched_snapshot *snap = cy->snap;
    int nl = 0;
    int jd = snap->projects[J->project].department;
    for (size_t q = 0; q < snap->nprojects; q++) {
        struct proj *P = &cy->projs[q];
        int e = snap->projects[q].department;
        if (!r->reclaim)
            P->in_rule = (int)q == J->project;
        else if (r->tier1) /* above its quota */
            P->in_rule = (int)q != J->project && P->alloc > P->deserved + EPS &&
                         (r->other_deps || (jd >= 0 && e == jd));
        else /* above its fair share */
            P->in_rule = (int)q != J->project && P->alloc > P->fair + EPS;
        if (r->reclaim && P->in_rule && !can_give(cy, r, jd, (int)q))
            P->in_rule = false;
        if (P->in_rule && P->vlive > 0) {
            /* the buckets this search may read, with this cycle's binds in */
            if (!ts_sched_victims_index_ready(cy, (int)q, r->reclaim ? INT_MAX : r->below_priority))
                continue;
            cur[nl] = (struct vcur){0, P->all.vb[0].n};
            list[nl++] = (int)q;
        }
    }
    return nl;
}

/* The next candidate of the merged lists (taken), or NULL at the end. */
static const struct vent *next_candidate(struct cycle *cy, const struct victim_rule *r,
                                         const int *list, struct vcur *cur, int nl)
{
    if (nl == 1) { /* a preemption: its project's list alone */
        const struct proj *P = &cy->projs[list[0]];
        const struct vent *e = vcur_live(P, &cur[0]);
        if (e == NULL || (!r->reclaim && e->priority >= r->below_priority)) {
            cur[0].b = P->all.nvb;
            return NULL;
        }
        cur[0].left--;
        return e;
    }
    const struct vent *be = NULL;
    int bl = -1;
    for (int l = 0; l < nl; l++) {
        const struct proj *P = &cy->projs[list[l]];
        const struct vent *e = vcur_live(P, &cur[l]);
        if (e == NULL)
            continue;
        if (!r->reclaim && e->priority >= r->below_priority) {
            cur[l].b = P->all.nvb; /* the rest are of higher priority still */
            continue;
        }
        if (be == NULL || vent_cand_before(e, be)) {
            be = e;
            bl = l;
        }
    }
    if (be != NULL)
        cur[bl].left--;
    return be;
}

/* One search: the rule's lists, what skips a node, and the best set so
 * far. */
struct search {
    int j;
    const struct victim_rule *r;
    int *list, *touched, *dtouched;
    struct vcur *cur;
    int nl;
    const int *slots_on; /* whole-GPU preemption: the project's slots per node */
    bool remember;       /* node_fail applies */
    uint64_t base;       /* node_fail's key for this request, project and limit */
    int best_node;
    struct vset best;
    int *victims, *nvictims;
};

/* Whether node surely has no set for the search (before any candidate is
 * released there); *key: its node_fail key. */
static bool node_skipped(struct cycle *cy, const struct search *s, int node, uint64_t *key)
{
    const struct job *J = &cy->jobs[s->j];
    if (s->slots_on != NULL && cy->c->whole[node] + s->slots_on[node] < J->p.ndev)
        return true;
    if (!s->remember)
        return false;
    uint64_t seen;
    *key = ts_sched_memo_fold(s->base, (uint64_t)node);
    return ts_sched_memo_get(cy->node_fail, *key, &seen) && seen >> 16 == cy->node_ver[node] &&
           (int)(seen & 0xffff) >= s->r->below_priority;
}

/* node's set (set[0..n), whose vset is vs) against the best so far: fewer
 * victims, ..., then the lowest node id. */
static void consider_vs(struct cycle *cy, struct search *s, int node, const int *set, int n,
                        struct vset vs)
{
    if (s->best_node < 0 || vset_better(&vs, &s->best) ||
        (!vset_better(&s->best, &vs) &&
         cy->snap->nodes[node].id < cy->snap->nodes[s->best_node].id)) {
        s->best_node = node;
        s->best = vs;
        memcpy(s->victims, set, (size_t)n * sizeof(int));
        *s->nvictims = n;
    }
}

static void consider(struct cycle *cy, struct search *s, int node, const int *set, int n)
{
    consider_vs(cy, s, node, set, n, vset_of(cy, set, n));
}

/* A single victim's vset from its entry, without reading its job (a cache
 * miss, 0.8 % of a cycle at 12,500 nodes): the entry keeps the priority
 * and start its job had when it was added, and they are still the job's.
 * A job's priority never changes in a cycle; its start changes only at a
 * bind, which adds a new entry, and only after a stop, whose drop found
 * the old entry by that key and removed it (a live entry's job has not
 * been bound since it was added). */
static void consider_single(struct cycle *cy, struct search *s, const struct vent *be)
{
    struct vset vs = {1, be->priority, be->priority, be->started_at};
    consider_vs(cy, s, be->node, &be->job, 1, vs);
}

/* node_victims on node, failures remembered, a set considered. */
static void node_search(struct cycle *cy, struct search *s, int node, uint64_t key)
{
    int chosen[MAXV], nchosen;
    if (!node_victims(cy, s->j, s->r, node, s->touched, s->dtouched, chosen, &nchosen)) {
        if (s->remember)
            ts_sched_memo_put(cy->node_fail, key,
                              (uint64_t)cy->node_ver[node] << 16 | (uint64_t)s->r->below_priority);
        return;
    }
    consider(cy, s, node, chosen, nchosen);
}

/* Whether no set whose best victim is be's (min_n of them at its priority)
 * can beat the best set found: the walks end there. */
static bool beaten(const struct search *s, const struct vent *be, int min_n)
{
    if (s->best_node < 0)
        return false;
    struct vset lower = {min_n, be->priority, (long)be->priority * min_n, be->started_at};
    return vset_better(&s->best, &lower);
}

/* node looked at whole, once in the search: its set unless a remembered
 * failure says it has none. */
static void whole_node(struct cycle *cy, struct search *s, int node)
{
    cy->node_stamp[node] = cy->stamp;
    uint64_t key = 0;
    if (!node_skipped(cy, s, node, &key))
        node_search(cy, s, node, key);
}

/* Nodes are looked at in the order of their best candidate, merged from the
 * candidate projects' lists: a node first met at candidate x can do no
 * better than x alone, so the search ends at the first candidate that
 * cannot beat the best set found, and finds what a look at every node
 * would. Where no node has a single victim (min_n 2), a node first met at
 * x can do no better than two victims of x's priority, the older x. */
static void walk_sets(struct cycle *cy, struct search *s, int min_n)
{
    for (;;) {
        const struct vent *be = next_candidate(cy, s->r, s->list, s->cur, s->nl);
        if (be == NULL)
            break;
        /* the entry has what the walk needs: the job itself is not read */
        if (beaten(s, be, min_n))
            break;
        if (cy->node_stamp[be->node] != cy->stamp)
            whole_node(cy, s, be->node);
    }
}

/* Whether releasing x alone makes room for j on node. */
static bool single_fits(struct cycle *cy, const struct search *s, int node, const struct job *x)
{
    const struct job *J = &cy->jobs[s->j];
    const struct node_state *n = &cy->c->nodes[node];
    if (J->p.kind == TS_SCHED_GPU_COUNT) {
        /* whole GPUs: the empty ones and those x holds alone */
        int whole = n->nwhole;
        if (whole + (int)x->nslots < J->p.ndev)
            return false;
        for (size_t k = 0; k < x->nslots; k++)
            whole += cy->c->gpus[x->slots[k].gpu].used == x->slots[k].memory_bytes;
        if (whole < J->p.ndev)
            return false;
    }
    if (n->cpu_free + x->p.cpu + 1e-9 < J->p.cpu || x->gpus < s->r->min_free - EPS)
        return false;
    if (!ts_sched_cluster_node_static_ok(cy->c, &J->p, node) || n->ngpus < J->p.ndev ||
        n->ngpus > MAXG)
        return false;
    struct scratch t;
    scratch_init(cy, node, &t);
    scratch_release(&t, x, false);
    return t.freed >= s->r->min_free - EPS && scratch_fits(cy, &J->p, &t);
}

/* One candidate of walk_singles; false once no later one can do better. */
static bool single_step(struct cycle *cy, struct search *s, const struct vent *be, int met)
{
    if (beaten(s, be, 1))
        return false;
    int node = be->node;
    if (cy->node_stamp[node] == cy->stamp)
        return true;
    if (cy->node_stamp[node] == met || cy->node_nstop[node] >= MAXV) {
        /* a later candidate of the node (or more than node_victims looks
         * at): the node whole */
        whole_node(cy, s, node);
        return true;
    }
    /* a first candidate that alone makes room is the node's set (and no
     * remembered failure can be there); one that cannot empty enough whole
     * GPUs is passed over without reading its job */
    cy->node_stamp[node] = met;
    const struct preq *p = &cy->jobs[s->j].p;
    if (p->kind == TS_SCHED_GPU_COUNT && cy->c->whole[node] + be->nslots < p->ndev)
        return true;
    /* single_fits's first test for a job of one GPU, from the entry: the
     * GPU is emptied only where the job is alone on it (a half that
     * another shares is most of a one-GPU preemption's walk) */
    if (p->kind == TS_SCHED_GPU_COUNT && be->nslots == 1 &&
        cy->c->whole[node] + (cy->c->gpus[be->gpu0].used == be->bytes0) < p->ndev)
        return true;
    if (single_fits(cy, s, node, &cy->jobs[be->job])) {
        cy->node_stamp[node] = cy->stamp;
        consider_single(cy, s, be);
    }
    return true;
}

/* Whether x (of the rule's one project, below its priority) is node's
 * first candidate for the search: no job node_candidates would take comes
 * before it. Where x is its project's only stoppable job on the node (the
 * index counts them), no other job can be a candidate there (a candidate
 * is a stoppable job of the project): so the node's jobs, a cache miss
 * each, are read only where the project has others there. */
static bool first_on_node(const struct cycle *cy, const struct search *s, int node,
                          const struct job *x)
{
    int proj = cy->jobs[s->j].project;
    if (cy->proj_node_jobs[(size_t)proj * cy->snap->nnodes + (size_t)node] == 1)
        return true;
    for (int v = cy->node_head[node]; v >= 0; v = cy->jobs[v].next) {
        const struct job *y = &cy->jobs[v];
        if (y == x || v == s->j || y->project != proj || y->priority >= s->r->below_priority)
            continue;
        if (ts_sched_victims_stoppable(cy, y) && cand_before(y, x))
            return false;
    }
    return true;
}

/* One candidate of walk_big; false once no later one can do better. */
static bool big_step(struct cycle *cy, struct search *s, const struct vent *be)
{
    if (beaten(s, be, 1))
        return false;
    int node = be->node;
    if (cy->node_stamp[node] == cy->stamp)
        return true;
    const struct job *x = &cy->jobs[be->job];
    if (cy->node_nstop[node] >= MAXV || !first_on_node(cy, s, node, x)) {
        /* the node's set, whole (as single_step at a node met before) */
        whole_node(cy, s, node);
        return true;
    }
    /* its first candidate: its set is x alone if x alone makes room (else
     * a later entry of the node, not first, looks at it whole) */
    const struct preq *p = &cy->jobs[s->j].p;
    if (cy->c->whole[node] + be->nslots < p->ndev)
        return true;
    if (single_fits(cy, s, node, x)) {
        cy->node_stamp[node] = cy->stamp;
        consider_single(cy, s, be);
    }
    return true;
}

/* walk_singles over the project's list of jobs of two GPUs or more, where
 * the job needs at least two GPUs more than any node has empty (the
 * entries of one GPU were most of a 4-GPU job's walk at 12,500 nodes).
 * A node's set is a single x only if x alone makes room (the greedy stops
 * at the first candidate c_k whose prefix makes room and keeps c_k; the
 * set is {c_k} exactly when c_k alone makes room, more victims never
 * making less room), and x alone makes room only if its GPUs and the
 * node's empty ones are enough: so x holds two GPUs or more, and every
 * node whose set is single has its entry in this list, met in candidate
 * order. At that entry the node's set is found as walk_singles finds it:
 * by x alone where x is the node's first candidate (the greedy's first
 * step), else by node_victims. The entries passed over are no single
 * anywhere, so the walk stops where walk_singles would or at a later entry
 * no better, and the first single (the lowest node id among equals) is
 * the same. */
static bool walk_big(struct cycle *cy, struct search *s)
{
    const struct proj *P = &cy->projs[s->list[0]];
    for (size_t b = 0; b < P->big.nvb && P->big.vb[b].priority < s->r->below_priority; b++)
        for (size_t k = P->big.vb[b].n; k-- > 0;)
            if (P->big.vb[b].e[k].job >= 0 && !big_step(cy, s, &P->big.vb[b].e[k]))
                return s->best_node >= 0 && s->best.n == 1;
    return s->best_node >= 0 && s->best.n == 1;
}

/* Preemption (no floors, unlike reclaim): on a node whose first candidate
 * alone makes room, the greedy stops there and its set is that one job;
 * on another, a single victim is possible only at a later candidate, met
 * later in the walk, and the node is then looked at whole (node_victims).
 * Any single victim beats every set of two or more, so the walk looks for
 * the first single in candidate order with one release and one fit check a
 * candidate, instead of node_victims on every node met; true when found
 * (the same set the walk over sets finds). Otherwise no node has a single
 * victim. */
static bool walk_singles(struct cycle *cy, struct search *s)
{
    int met = cy->stamp - 1; /* node_stamp: met once (cy->stamp: done) */
    /* a preemption's candidates: its project's list (the one list), in
     * order, below its priority */
    const struct proj *P = s->nl == 1 ? &cy->projs[s->list[0]] : NULL;
    const struct preq *p = &cy->jobs[s->j].p;
    if (P != NULL && p->kind == TS_SCHED_GPU_COUNT &&
        p->ndev - 2 >= ts_sched_cluster_max_whole(cy->c))
        return walk_big(cy, s);
    for (size_t b = 0; P != NULL && b < P->all.nvb && P->all.vb[b].priority < s->r->below_priority;
         b++)
        for (size_t k = P->all.vb[b].n; k-- > 0;)
            if (P->all.vb[b].e[k].job >= 0 && !single_step(cy, s, &P->all.vb[b].e[k], met))
                return s->best_node >= 0 && s->best.n == 1;
    return s->best_node >= 0 && s->best.n == 1;
}

/* A fresh stamp pair for a search (stamp - 1: met, stamp: done). */
static void stamp_next(struct cycle *cy)
{
    if (cy->stamp >= INT_MAX - 2) {
        memset(cy->node_stamp, 0, cy->snap->nnodes * sizeof(int));
        cy->stamp = 0;
    }
    cy->stamp += 2;
}

static void search_walk(struct cycle *cy, struct search *s)
{
    const struct job *J = &cy->jobs[s->j];
    const struct victim_rule *r = s->r;
    s->nl = rule_lists(cy, s->j, r, s->list, s->cur);
    stamp_next(cy);
    /* preemption inside the project: a node where the candidates below
     * priority b could not make room cannot with fewer (below any lower b)
     * either, until it changes; the next job of the project with the same
     * request skips it */
    s->remember = !r->reclaim && r->below_priority >= 0 && r->below_priority <= 0xffff;
    /* preemption of whole GPUs: a node whose empty GPUs and those the
     * project's stoppable jobs hold are fewer than the job needs cannot
     * make room, whatever is stopped */
    s->slots_on = !r->reclaim && J->p.kind == TS_SCHED_GPU_COUNT && J->p.ndev > 1
                      ? cy->proj_node_slots + (size_t)J->project * cy->snap->nnodes
                      : NULL;
    s->base = s->remember
                  ? ts_sched_preq_signature(&J->p, 0x4e4f4445ULL + (uint64_t)J->project * 7919u +
                                                       (uint64_t)(r->min_free * 1000.0))
                  : 0;
    if (r->reclaim) {
        walk_sets(cy, s, 1);
        return;
    }
    if (walk_singles(cy, s))
        return;
    /* no single victim anywhere: the walk over sets, from the start */
    s->best_node = -1;
    s->nl = rule_lists(cy, s->j, r, s->list, s->cur);
    stamp_next(cy);
    walk_sets(cy, s, 2);
}

bool ts_sched_victims_find(struct cycle *cy, int j, const struct victim_rule *r, int *out_node,
                           int *victims, bool *suspend, int *nvictims)
{
    const struct ts_sched_snapshot *snap = cy->snap;
    size_t np = snap->nprojects, nd = snap->ndepartments;
    struct search s = {.j = j, .r = r, .best_node = -1, .victims = victims, .nvictims = nvictims};
    /* the search's scratch, taken from the cycle's arena at the first
     * search and kept for the others (four mallocs and frees a search were
     * 20 M instructions at 12,500 nodes) */
    if (cy->search_buf == NULL) {
        size_t npa = np ? np : 1, nda = nd ? nd : 1;
        cy->search_buf =
            ts_arena_alloc(cy->a, npa * sizeof(struct vcur) + (2 * npa + nda) * sizeof(int));
    }
    if (cy->search_buf != NULL) {
        size_t npa = np ? np : 1;
        s.cur = cy->search_buf;
        s.touched = (int *)(s.cur + npa);
        s.list = s.touched + npa;
        s.dtouched = s.list + npa;
        search_walk(cy, &s);
    } else {
        cy->nomem = true;
    }
    for (size_t q = 0; q < np; q++)
        cy->projs[q].in_rule = false;
    if (s.best_node < 0)
        return false;
    *out_node = s.best_node;
    choose_suspends(cy, &cy->jobs[j].p, s.best_node, victims, *nvictims, r->min_free, suspend);
    return true;
}
