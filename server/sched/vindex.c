/*
 * vindex.c - the victim index: each project's running jobs that may be
 * stopped (preemptible, past their minimum runtime), in candidate order,
 * kept as jobs are bound and stopped, for the search in victims.c; and
 * the per-node counts the search skips nodes by.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/sched/memo.h"
#include "server/sched/victims.h"

static bool ts_sched_cycle_protected(const struct cycle *cy, const struct job *v)
{
    int64_t min = cy->projs[v->project].min_runtime;
    return min > 0 && cy->snap->now - v->started_at < min;
}

bool ts_sched_victims_stoppable(const struct cycle *cy, const struct job *x)
{
    return x->preemptible && !ts_sched_cycle_protected(cy, x);
}

/* Each project's list is split by priority into buckets, lowest priority
 * first, and a bucket is kept worst candidate first: the best candidate
 * last (latest start, then highest id). A job this cycle places starts now,
 * so it joins its bucket at or near the end instead of pushing a
 * 6,000-entry list down by one (a tenth of a cycle at 100,000 GPUs, when
 * one array per project held every priority), by way of the bucket's
 * inbox (bucket_merge), and the victims an eviction
 * takes are trimmed off the end. A removed entry elsewhere keeps its place
 * (job -1, with the key it was added with, so the bucket stays sorted)
 * until half the bucket is removed and it is compacted. */
static bool vent_key_before(const struct vent *e, int64_t started_at, int64_t id)
{
    if (e->started_at != started_at)
        return e->started_at < started_at;
    return e->id < id;
}

static int cmp_vent(const void *x, const void *y)
{
    const struct vent *a = x, *b = y;
    if (vent_key_before(a, b->started_at, b->id))
        return -1;
    return vent_key_before(b, a->started_at, a->id) ? 1 : 0;
}

/* The bucket of priority prio in L (created when create), or NULL. */
/* p, of *cap elements of elem bytes, grown to hold need: the capacity
 * doubles from first. NULL (cy->nomem set, p kept) when out of memory. */
static void *grown(struct cycle *cy, void *p, size_t *cap, size_t need, size_t elem, size_t first)
{
    size_t ncap = *cap ? *cap : first;
    while (ncap < need)
        ncap *= 2;
    void *np = realloc(p, ncap * elem);
    if (np == NULL) {
        cy->nomem = true;
        return NULL;
    }
    *cap = ncap;
    return np;
}

static struct vbucket *bucket_of(struct cycle *cy, struct vlist *L, int prio, bool create)
{
    size_t lo = 0, hi = L->nvb;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (L->vb[mid].priority < prio)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < L->nvb && L->vb[lo].priority == prio)
        return &L->vb[lo];
    if (!create)
        return NULL;
    if (L->nvb == L->capvb) {
        struct vbucket *nv = grown(cy, L->vb, &L->capvb, L->nvb + 1, sizeof(*nv), 4);
        if (nv == NULL)
            return NULL;
        L->vb = nv;
    }
    memmove(&L->vb[lo + 1], &L->vb[lo], (L->nvb - lo) * sizeof(*L->vb));
    L->vb[lo] = (struct vbucket){.priority = prio};
    L->nvb++;
    return &L->vb[lo];
}

/* The first entry of b not before (started_at, id). The entries looked
 * for are near the end: a victim among the best candidates, which the
 * walk has just read, and a bound job, which starts now. So the range is
 * found from the end in steps that double (e[n - 1], e[n - 3], e[n - 7],
 * ...: the first entry before the key bounds it below, the last one not
 * before it above), then halved as before: the same entry, since the
 * entries are sorted, with the reads among the lines in cache (halving
 * from the middle of 6,000 entries read lines no walk had: 2 % of a
 * cycle at 12,500 nodes). */
static size_t bucket_pos(const struct vbucket *b, int64_t started_at, int64_t id)
{
    size_t lo = 0, hi = b->n, step = 1;
    while (step <= hi) {
        size_t k = hi - step;
        if (vent_key_before(&b->e[k], started_at, id)) {
            lo = k + 1;
            break;
        }
        hi = k;
        step *= 2;
    }
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (vent_key_before(&b->e[mid], started_at, id))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void bucket_compact(struct vbucket *b)
{
    size_t m = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->e[i].job >= 0)
            b->e[m++] = b->e[i];
    b->n = m;
    b->dead = 0;
}

void ts_sched_victims_node_changed(struct cycle *cy, int node)
{
    if (cy->node_ver != NULL)
        cy->node_ver[node]++;
}

/* Job v's entry: its order key, node and GPUs. */
static struct vent vent_of(const struct job *x, int v)
{
    return (struct vent){x->priority,
                         v,
                         x->started_at,
                         x->id,
                         x->node,
                         (int)x->nslots,
                         x->nslots > 0 ? x->slots[0].gpu : -1,
                         x->nslots > 0 ? x->slots[0].memory_bytes : 0};
}

/* The whole-GPU preemption's second list (victims.c, walk_singles): a job
 * of one GPU cannot alone empty two. */
static bool in_big(const struct job *x)
{
    return x->nslots >= 2;
}

/* b with room for m entries more; false when out of memory. */
static bool bucket_room(struct cycle *cy, struct vbucket *b, size_t m)
{
    if (b->n + m <= b->cap)
        return true;
    struct vent *nv = grown(cy, b->e, &b->cap, b->n + m, sizeof(*nv), 16);
    if (nv == NULL)
        return false;
    b->e = nv;
    return true;
}

/* The entries added to b since it was last read merged into their places:
 * sorted, then merged from the end, so that the entries after the first
 * place move once (a bound job starts now, so its place is near the end,
 * but among the other binds by id: inserted one at a time, the moves were
 * 31 M instructions of memmove at 12,500 nodes). Keys are unique: an
 * entry is added for a job without one, and one whose removed entry
 * (same key: bound this cycle, taken back, bound again) is still there
 * takes it back instead (list_put). */
static bool bucket_merge(struct cycle *cy, struct vbucket *b)
{
    if (b->nin == 0)
        return true;
    if (!bucket_room(cy, b, b->nin))
        return false;
    if (b->nin > 1)
        qsort(b->in, b->nin, sizeof(*b->in), cmp_vent);
    size_t i = b->n, k = b->nin, o = b->n + b->nin;
    while (k > 0) {
        if (i > 0 && cmp_vent(&b->e[i - 1], &b->in[k - 1]) > 0)
            b->e[--o] = b->e[--i];
        else
            b->e[--o] = b->in[--k];
    }
    b->n += b->nin;
    b->nin = 0;
    return true;
}

/* e added to L: into its bucket's entries to merge, or its own removed
 * entry; false when out of memory. */
static bool list_put(struct cycle *cy, struct vlist *L, const struct vent *e)
{
    struct vbucket *b = bucket_of(cy, L, e->priority, true);
    if (b == NULL)
        return false;
    /* its own removed entry, taken back in place (the order holds) */
    size_t k = bucket_pos(b, e->started_at, e->id);
    if (k < b->n && b->e[k].job < 0 && b->e[k].started_at == e->started_at && b->e[k].id == e->id) {
        b->e[k] = *e;
        b->dead--;
        return true;
    }
    if (b->nin == b->capin) {
        struct vent *nv = grown(cy, b->in, &b->capin, b->nin + 1, sizeof(*nv), 16);
        if (nv == NULL)
            return false;
        b->in = nv;
    }
    b->in[b->nin++] = *e;
    return true;
}

/* x's entry (job v) out of L; false when it has none. */
static bool list_drop(struct cycle *cy, struct vlist *L, const struct job *x, int v)
{
    struct vbucket *b = bucket_of(cy, L, x->priority, false);
    if (b == NULL || !bucket_merge(cy, b))
        return false;
    size_t k = bucket_pos(b, x->started_at, x->id);
    if (k >= b->n || b->e[k].job != v)
        return false;
    b->e[k].job = -1;
    b->dead++;
    while (b->n > 0 && b->e[b->n - 1].job < 0) { /* the best candidates go first */
        b->n--;
        b->dead--;
    }
    if (b->dead > 64 && b->dead * 2 > b->n)
        bucket_compact(b);
    return true;
}

bool ts_sched_victims_index_ready(struct cycle *cy, int project, int below)
{
    struct proj *P = &cy->projs[project];
    bool ok = true;
    for (size_t k = 0; k < P->all.nvb && P->all.vb[k].priority < below; k++)
        ok = bucket_merge(cy, &P->all.vb[k]) && ok;
    for (size_t k = 0; k < P->big.nvb && P->big.vb[k].priority < below; k++)
        ok = bucket_merge(cy, &P->big.vb[k]) && ok;
    return ok;
}

void ts_sched_victims_index_add(struct cycle *cy, int v)
{
    const struct job *x = &cy->jobs[v];
    if (!cy->vindex || !ts_sched_victims_stoppable(cy, x))
        return;
    struct proj *P = &cy->projs[x->project];
    struct vent e = vent_of(x, v);
    if (!list_put(cy, &P->all, &e) || (in_big(x) && !list_put(cy, &P->big, &e)))
        return;
    cy->proj_node_slots[(size_t)x->project * cy->snap->nnodes + (size_t)x->node] += (int)x->nslots;
    cy->proj_node_jobs[(size_t)x->project * cy->snap->nnodes + (size_t)x->node]++;
    cy->node_nstop[x->node]++;
    P->vlive++;
    if (x->gpus < P->vmin_gpus)
        P->vmin_gpus = x->gpus;
}

void ts_sched_victims_index_del(struct cycle *cy, int v)
{
    const struct job *x = &cy->jobs[v];
    if (!cy->vindex || !ts_sched_victims_stoppable(cy, x))
        return;
    struct proj *P = &cy->projs[x->project];
    if (!list_drop(cy, &P->all, x, v))
        return;
    if (in_big(x))
        list_drop(cy, &P->big, x, v);
    P->vlive--;
    cy->proj_node_slots[(size_t)x->project * cy->snap->nnodes + (size_t)x->node] -= (int)x->nslots;
    cy->proj_node_jobs[(size_t)x->project * cy->snap->nnodes + (size_t)x->node]--;
    cy->node_nstop[x->node]--;
}

/* e appended to L (sorted once built); false when out of memory. */
static bool list_append(struct cycle *cy, struct vlist *L, const struct vent *e)
{
    struct vbucket *b = bucket_of(cy, L, e->priority, true);
    if (b == NULL || !bucket_room(cy, b, 1))
        return false;
    b->e[b->n++] = *e;
    return true;
}

/* Each bucket in order: appended in queue order (cy->job_order: within a
 * project and priority by submission time, a running job's its start,
 * then id) they are already, and a bucket found out of order is sorted
 * (sorting 76,000 entries was 5 % of a cycle at 12,500 nodes). */
static void list_sort(struct vlist *L)
{
    for (size_t k = 0; k < L->nvb; k++) {
        const struct vbucket *b = &L->vb[k];
        size_t i = 1;
        while (i < b->n && cmp_vent(&b->e[i - 1], &b->e[i]) < 0)
            i++;
        if (i < b->n)
            qsort(L->vb[k].e, L->vb[k].n, sizeof(struct vent), cmp_vent);
    }
}

static void list_free(struct vlist *L)
{
    for (size_t k = 0; k < L->nvb; k++) {
        free(L->vb[k].e);
        free(L->vb[k].in);
    }
    free(L->vb);
}

#define VAHEAD 16 /* jobs ahead in queue order to prefetch */

bool ts_sched_victims_index_build(struct cycle *cy)
{
    cy->node_stamp = ts_arena_alloc(cy->a, (cy->snap->nnodes + 1) * sizeof(int));
    cy->node_ver = ts_arena_alloc(cy->a, (cy->snap->nnodes + 1) * sizeof(uint32_t));
    cy->node_nstop = ts_arena_alloc(cy->a, (cy->snap->nnodes + 1) * sizeof(int));
    cy->node_fail = ts_sched_memo_new();
    cy->proj_node_slots =
        ts_arena_alloc(cy->a, (cy->snap->nprojects * cy->snap->nnodes + 1) * sizeof(int));
    cy->proj_node_jobs =
        ts_arena_alloc(cy->a, (cy->snap->nprojects * cy->snap->nnodes + 1) * sizeof(int));
    if (cy->node_stamp == NULL || cy->node_ver == NULL || cy->node_nstop == NULL ||
        cy->node_fail == NULL || cy->proj_node_slots == NULL || cy->proj_node_jobs == NULL)
        return false;
    /* appended in queue order, then each bucket sorted where it is not */
    for (size_t p = 0; p < cy->snap->nprojects; p++)
        cy->projs[p].vmin_gpus = INFINITY;
    /* before the first pass the running jobs are the snapshot's, the first
     * nrunning: the pending ones are passed over without reading them, and
     * a running one a few ahead is fetched (in queue order the jobs are
     * scattered: a cache miss each was 4 % of a large cycle's time) */
    size_t nrun = cy->snap->nrunning;
    for (size_t k = 0; k < cy->njobs; k++) {
        size_t i = cy->job_order != NULL ? (size_t)cy->job_order[k] : k;
        if (k + VAHEAD < cy->njobs) {
            size_t ia = cy->job_order != NULL ? (size_t)cy->job_order[k + VAHEAD] : k + VAHEAD;
            if (ia < nrun)
                for (size_t off = 0; off < sizeof(struct job); off += 64)
                    __builtin_prefetch((const char *)&cy->jobs[ia] + off);
        }
        const struct job *x = &cy->jobs[i];
        if (i >= nrun || !x->running || !ts_sched_victims_stoppable(cy, x))
            continue;
        struct proj *P = &cy->projs[x->project];
        struct vent e = vent_of(x, (int)i);
        if (!list_append(cy, &P->all, &e) || (in_big(x) && !list_append(cy, &P->big, &e)))
            return false;
        P->vlive++;
        if (x->gpus < P->vmin_gpus)
            P->vmin_gpus = x->gpus;
        cy->proj_node_slots[(size_t)x->project * cy->snap->nnodes + (size_t)x->node] +=
            (int)x->nslots;
        cy->proj_node_jobs[(size_t)x->project * cy->snap->nnodes + (size_t)x->node]++;
        cy->node_nstop[x->node]++;
    }
    for (size_t p = 0; p < cy->snap->nprojects; p++) {
        list_sort(&cy->projs[p].all);
        list_sort(&cy->projs[p].big);
    }
    cy->vindex = true;
    return !cy->nomem;
}

void ts_sched_victims_index_free(struct cycle *cy)
{
    ts_sched_memo_free(cy->node_fail);
    cy->node_fail = NULL;
    if (cy->projs == NULL)
        return;
    for (size_t p = 0; p < cy->snap->nprojects; p++) {
        list_free(&cy->projs[p].all);
        list_free(&cy->projs[p].big);
    }
}
