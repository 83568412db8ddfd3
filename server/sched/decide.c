/*
 * decide.c - one scheduling cycle: ts_sched_decide.
 *
 * Fair share for every project (fairshare.c); then passes over the pending
 * jobs in order (order.c): each job is placed (place.c) if its project's
 * limits allow, else room is made by reclaim (reclaim.c) and then by preempt
 * (preempt.c). Jobs stopped by a pass join the queue of the next. Passes
 * repeat until one makes no decision (at most config.max_passes). Every
 * pass starts from what a new cycle on the state so far would see (fair
 * shares taken again; jobs this cycle placed are running and may be taken
 * back like any other), so the state the decisions produce is one on which
 * a new cycle decides nothing: it never evicts what it just placed or
 * undoes its own work.
 */
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/sched/cycle.h"
#include "server/sched/memo.h"
#include "server/sched/order.h"
#include "server/sched/preempt.h"
#include "server/sched/reason.h"
#include "server/sched/reclaim.h"
#include "server/sched/victims.h"

/* ---- one attempt ---------------------------------------------------------- */

/* GPUs the request may count for, at most: for the limits. */
static double gpus_at_most(const struct cycle *cy, const struct job *J)
{
    if (J->p.kind != TS_SCHED_GPU_MEMORY)
        return J->p.gpus_estimate;
    int64_t min_usable = 0;
    for (int k = 0; k < cy->c->nkinds; k++) {
        const struct gpu_kind *g = &cy->c->kinds[k];
        if (J->p.model_ok && !J->p.model_ok[g->model])
            continue;
        if (g->usable >= J->p.mem && (min_usable == 0 || g->usable < min_usable))
            min_usable = g->usable;
    }
    if (min_usable == 0)
        return J->p.gpus_estimate;
    return fmin(1.0, (double)J->p.mem / (double)min_usable) * J->p.ndev;
}

static void attempt(struct cycle *cy, int j)
{
    struct job *J = &cy->jobs[j];
    J->stage = STAGE_NONE;
    J->reclaim_tried = false;
    J->reclaim_tier1 = false;
    if (!J->valid) {
        J->stage = STAGE_INVALID;
        return;
    }
    const struct ts_sched_project *sp = &cy->snap->projects[J->project];
    struct proj *P = &cy->projs[J->project];
    double est = J->p.gpus_at_most;
    if (!J->preemptible && est > EPS && P->alloc_np + est > P->deserved + 1e-6) {
        J->stage = STAGE_DESERVED;
        return;
    }
    double short_p = sp->has_limit ? P->alloc + est - sp->limit_gpus : 0;
    double short_d = 0;
    if (sp->department >= 0) {
        const struct ts_sched_department *d = &cy->snap->departments[sp->department];
        if (d->has_limit)
            short_d = cy->deps[sp->department].alloc + est - d->limit_gpus;
    }
    double short_all = fmax(short_p, short_d);
    if (est > EPS && short_all > 1e-6) {
        if (ts_sched_preempt_try(cy, j, short_all, short_d > short_p))
            return;
        J->stage = short_p >= short_d ? STAGE_OVER_LIMIT : STAGE_DEPT_LIMIT;
        return;
    }
    /* a request that found no room needs a look only at the nodes freed since */
    uint64_t key = ts_sched_preq_signature(&J->p, 0), since = 0;
    bool seen = ts_sched_memo_get(cy->fail_memo, key, &since);
    if (!seen || since < cy->nfreed) {
        int node;
        struct ts_sched_slot slots[TS_SCHED_MAX_DEVICES];
        size_t ns = 0;
        bool ok = seen ? ts_sched_place_best_among(cy->c, cy->st, &J->p, cy->freed + since,
                                                   cy->nfreed - since, &node, slots, &ns)
                       : ts_sched_place_best(cy->c, cy->st, &J->p, &node, slots, &ns);
        if (ok) {
            struct cycle_msg m; /* b is written before it is read: not zeroed */
            m.n = 0;
            ts_sched_cycle_msg_add(&m, "placed on ");
            ts_sched_cycle_msg_add(&m, cy->snap->nodes[node].name);
            ts_sched_cycle_msg_add(&m, " by ");
            ts_sched_cycle_msg_add(&m, cy->st->name);
            ts_sched_cycle_bind(cy, j, node, slots, ns, "fits", ts_sched_cycle_msg_end(cy, &m));
            return;
        }
        ts_sched_memo_put(cy->fail_memo, key, cy->nfreed);
    }
    if (ts_sched_reclaim_try(cy, j))
        return;
    if (ts_sched_preempt_try(cy, j, 0, false))
        return;
    J->stage = STAGE_NO_ROOM;
}

/* ---- a failure met again -------------------------------------------------- */

/* Whether two requests are the same, field for field. */
static bool same_request(const struct ts_sched_request *a, const struct ts_sched_request *b)
{
    if (a->kind != b->kind || a->count != b->count || a->portion != b->portion ||
        a->portion_limit != b->portion_limit || a->memory_bytes != b->memory_bytes ||
        a->memory_limit_bytes != b->memory_limit_bytes || a->devices != b->devices ||
        a->cpu != b->cpu || a->host_memory_bytes != b->host_memory_bytes ||
        a->refuses_swap != b->refuses_swap || a->ngpu_models != b->ngpu_models ||
        a->nnode_selector != b->nnode_selector)
        return false;
    for (size_t i = 0; i < a->ngpu_models; i++)
        if (strcmp(a->gpu_models[i], b->gpu_models[i]) != 0)
            return false;
    for (size_t i = 0; i < a->nnode_selector; i++)
        if (strcmp(a->node_selector[i].key, b->node_selector[i].key) != 0 ||
            strcmp(a->node_selector[i].value, b->node_selector[i].value) != 0)
            return false;
    return true;
}

/* A job whose attempt reads nothing of it but its project, priority,
 * preemptibility and request: valid, and not pinned to a node (a suspended
 * job resumes only where it was). */
static bool unpinned(const struct job *J)
{
    return J->valid && J->p.only_node < 0 && J->p.only_slots == NULL && !J->p.host_mem_held;
}

/* Where to look for a failed attempt like j's (the job found there is
 * compared field for field: a key shared by two kinds only costs an
 * attempt). */
static uint64_t failed_key(const struct job *J)
{
    return J->p.hash ^ (uint64_t)(uint32_t)J->project * 0x9e3779b97f4a7c15ULL ^
           (uint64_t)(uint32_t)J->priority * 0xc2b2ae3d27d4eb4fULL ^ (uint64_t)J->preemptible;
}

/* Job j's attempt, or the outcome of an attempt that failed just before it
 * for the same project, priority, preemptibility and request, with no bind
 * or stop since in this pass. Such an attempt decides the same, by
 * construction: it reads of its job only those (not its id, name or times:
 * they go into messages, written only when something is decided), and the
 * state it reads is the same (fair shares change only at a pass's start,
 * the rest only by binds and stops). What it would add to the memos is
 * there already: the placement's failure with the same count of freed nodes
 * (the same signature), and each reclaim and preemption it would try, keyed
 * by that signature, project, priority and what a limit leaves short, all
 * of them found failed by the first. So the same pending reason follows. */
static void attempt_or_repeat(struct cycle *cy, int j)
{
    struct job *J = &cy->jobs[j];
    if (!unpinned(J) || cy->failed_like == NULL) {
        attempt(cy, j);
        return;
    }
    uint64_t key = failed_key(J), v = 0;
    if (ts_sched_memo_get(cy->failed_like, key, &v)) {
        const struct job *A = &cy->jobs[v - 1];
        if (A->failed_at == cy->changes && !A->running && unpinned(A) && A->project == J->project &&
            A->priority == J->priority && A->preemptible == J->preemptible &&
            A->req_class == J->req_class) {
            J->stage = A->stage;
            J->reclaim_tried = A->reclaim_tried;
            J->reclaim_tier1 = A->reclaim_tier1;
            return;
        }
    }
    uint64_t before = cy->changes;
    attempt(cy, j);
    if (cy->changes == before && !J->running) {
        J->failed_at = before;
        ts_sched_memo_put(cy->failed_like, key, (uint64_t)j + 1);
    }
}

/* ---- the cycle ------------------------------------------------------------ */

/* What build_jobs gathers of each job while it is in cache: a walk of
 * their own over 161,844 jobs (the request classes', the workload shapes')
 * was a cache miss a job. */
struct gather {
    struct memo *first;       /* request hash -> the first pending job with it + 1 */
    struct shapes_acc shapes; /* the workload's shapes (set_workload_shapes) */
    bool want_shapes;         /* the strategy weighs placements against them */
};

/* Each pending job's request class (job.req_class), found as the jobs are
 * built, in the snapshot's order, so that a pass comparing two jobs'
 * requests reads neither (that read, a cache miss a job, was a sixth of a
 * large cycle's time). */
static void request_class(struct cycle *cy, struct memo *first, size_t i)
{
    struct job *J = &cy->jobs[i];
    J->req_class = (int)i;
    if (J->orig_running || !J->valid)
        return;
    uint64_t v = 0;
    if (!ts_sched_memo_get(first, J->p.hash, &v))
        ts_sched_memo_put(first, J->p.hash, (uint64_t)i + 1);
    else if (same_request(cy->jobs[v - 1].p.r, J->p.r))
        J->req_class = cy->jobs[v - 1].req_class;
}

static enum ts_err build_jobs(struct cycle *cy, struct gather *g)
{
    const struct ts_sched_snapshot *snap = cy->snap;
    cy->njobs = snap->nrunning + snap->npending;
    /* written whole below: zeroing 160,000 jobs first was 4 % of a large cycle */
    cy->jobs = ts_arena_alloc_uninit(cy->a, (cy->njobs ? cy->njobs : 1) * sizeof(struct job));
    cy->hot = ts_arena_alloc_uninit(cy->a, (cy->njobs ? cy->njobs : 1) * sizeof(struct jhot));
    cy->node_head = ts_arena_alloc_uninit(cy->a, (snap->nnodes ? snap->nnodes : 1) * sizeof(int));
    if (cy->jobs == NULL || cy->hot == NULL || cy->node_head == NULL)
        return TS_ERR_NOMEM;
    for (size_t i = 0; i < snap->nnodes; i++)
        cy->node_head[i] = -1;
    for (size_t i = 0; i < cy->njobs; i++) {
        struct job *J = &cy->jobs[i];
        bool run = i < snap->nrunning;
        const struct ts_sched_request *req; /* kept as J->p.r */
        *J = (struct job){.orig_running = run,
                          .orig = run ? (int)i : (int)(i - snap->nrunning),
                          .prev = -1,
                          .next = -1,
                          .bind_dec = -1,
                          .stop_dec = -1};
        if (run) {
            const struct ts_sched_running *r = &snap->running[i];
            J->id = r->id;
            J->name = r->name ? r->name : "";
            J->project = r->project;
            J->priority = r->priority;
            J->preemptible = r->preemptible;
            req = &r->request;
            J->started_at = r->started_at;
            J->submitted_at = r->started_at;
            J->running = true;
            J->node = r->node;
            /* a placement later gets slots of its own (ts_sched_cycle_bind) */
            J->slots = ts_arena_alloc(cy->a, (r->nslots + 1) * sizeof(struct ts_sched_slot));
            if (J->slots == NULL)
                return TS_ERR_NOMEM;
            if (r->nslots > 0) /* a CPU-only job holds no slots: r->slots may be NULL */
                memcpy(J->slots, r->slots, r->nslots * sizeof(struct ts_sched_slot));
            J->nslots = r->nslots;
            J->gpus = ts_sched_cluster_slots_gpus(cy->c, r->slots, r->nslots);
            J->swap_need = ts_sched_suspend_bytes(r);
        } else {
            const struct ts_sched_pending *p = &snap->pending[i - snap->nrunning];
            J->id = p->id;
            J->name = p->name ? p->name : "";
            J->project = p->project;
            J->priority = p->priority;
            J->preemptible = p->preemptible;
            req = &p->request;
            J->submitted_at = p->submitted_at;
            J->node = -1;
        }
        J->valid = ts_sched_preq_prepare(cy->c, req, cy->a, &J->p);
        if (J->valid) {
            J->p.hash = ts_sched_preq_hash(&J->p);
            J->p.gpus_at_most = gpus_at_most(cy, J);
        }
        if (!run) {
            const struct ts_sched_pending *p = &snap->pending[i - snap->nrunning];
            int sn = p->suspended_node;
            if (sn >= 0 && snap->nodes[sn].ready) {
                J->p.only_node = sn;
                J->p.host_mem_held = true;
                if (p->nsuspended_slots > 0) {
                    J->p.only_slots = p->suspended_slots;
                    J->p.nonly_slots = p->nsuspended_slots;
                }
            }
        }
        cy->hot[i] = (struct jhot){
            .amount = run        ? J->gpus
                      : J->valid ? J->p.gpus_estimate
                                 : 0,
            .project = J->project,
            .running = run,
            .valid = J->valid,
            .preemptible = J->preemptible,
        };
        if (run)
            ts_sched_cycle_list_add(cy, (int)i);
        request_class(cy, g->first, i);
        if (!run && J->valid && g->want_shapes)
            ts_sched_cluster_shapes_add(cy->c, &g->shapes, &J->p);
    }
    return TS_OK;
}

/* Allocations, demands and fair shares from the jobs as they stand: at the
 * start of every pass, so that the pass that ends the cycle sees what a new
 * cycle on the state the decisions produce would see (a memory request's
 * GPUs change when it is placed, and with them the demand). Each job's
 * queue position is cleared in the same walk (the pass gives them again;
 * a walk of its own was a cache miss a job). */
static void shares_update(struct cycle *cy)
{
    const struct ts_sched_snapshot *snap = cy->snap;
    size_t np = snap->nprojects;
    for (size_t p = 0; p < np; p++) {
        cy->projs[p].alloc = 0;
        cy->projs[p].alloc_np = 0;
        cy->demand[p] = 0;
    }
    for (size_t d = 0; d < snap->ndepartments; d++) {
        cy->deps[d].alloc = 0;
        cy->deps[d].deserved = 0; /* its demand, for now */
    }
    /* from cy->hot, in the jobs' order as before: the same sums, as
     * ts_sched_cycle_account(cy, J, 1) adds them (1 * gpus is gpus) */
    for (size_t i = 0; i < cy->njobs; i++) {
        struct jhot *h = &cy->hot[i];
        h->position = 0;
        if (h->running) {
            ts_sched_cycle_account_gpus(cy, h->project, h->preemptible, h->amount);
        } else if (h->valid) {
            cy->demand[h->project] += h->amount;
        }
    }
    for (size_t p = 0; p < np; p++) {
        struct proj *P = &cy->projs[p];
        P->demand = P->alloc + cy->demand[p];
        cy->demand[p] = P->demand;
    }
    ts_sched_fairshare(snap->departments, snap->ndepartments, snap->projects, np, cy->demand,
                       cy->c->capacity, snap->config.usage_half_life_s, cy->deserved, cy->fair);
    for (size_t p = 0; p < np; p++) {
        cy->projs[p].deserved = cy->deserved[p];
        cy->projs[p].fair = cy->fair[p];
        const struct ts_sched_project *sp = &snap->projects[p];
        if (sp->department >= 0) /* as fairshare.c sums a department's demand */
            cy->deps[sp->department].deserved +=
                sp->has_limit ? fmin(cy->demand[p], sp->limit_gpus) : cy->demand[p];
    }
    for (size_t d = 0; d < snap->ndepartments; d++) {
        const struct ts_sched_department *sd = &snap->departments[d];
        double des = fmin(cy->deps[d].deserved, sd->quota_gpus);
        if (sd->has_limit)
            des = fmin(des, sd->limit_gpus);
        cy->deps[d].deserved = fmax(0, des);
    }
}

/* What the messages of stops and binds tell: the state before this cycle's
 * decisions (the first pass sees the snapshot's). */
static void shares_keep_first(struct cycle *cy)
{
    for (size_t p = 0; p < cy->snap->nprojects; p++) {
        cy->projs[p].alloc0 = cy->projs[p].alloc;
        cy->projs[p].fair0 = cy->projs[p].fair;
        cy->projs[p].held = NULL;
        cy->projs[p].why_preempt = NULL;
    }
    for (size_t d = 0; d < cy->snap->ndepartments; d++)
        cy->deps[d].alloc0 = cy->deps[d].alloc;
}

static enum ts_err build_projects(struct cycle *cy)
{
    const struct ts_sched_snapshot *snap = cy->snap;
    size_t np = snap->nprojects;
    cy->projs = ts_arena_alloc(cy->a, (np ? np : 1) * sizeof(struct proj));
    cy->deps = ts_arena_alloc(cy->a, (snap->ndepartments + 1) * sizeof(struct dep));
    cy->demand = ts_arena_alloc(cy->a, (np ? np : 1) * sizeof(double));
    cy->deserved = ts_arena_alloc(cy->a, (np ? np : 1) * sizeof(double));
    cy->fair = ts_arena_alloc(cy->a, (np ? np : 1) * sizeof(double));
    if (!cy->projs || !cy->deps || !cy->demand || !cy->deserved || !cy->fair)
        return TS_ERR_NOMEM;
    for (size_t p = 0; p < np; p++) {
        int64_t m = snap->projects[p].min_runtime_s;
        cy->projs[p].min_runtime = m >= 0 ? m : snap->config.min_runtime_s;
    }
    return TS_OK;
}

/* The pending workload's typical shapes weigh a placement for fgd
 * (fragmentation) and binpack (stranded GPUs). */
static bool wants_shapes(const struct cycle *cy)
{
    return cy->st == &ts_sched_fgd || cy->st == &ts_sched_binpack;
}

static int cmp_reason(const void *x, const void *y)
{
    const struct ts_sched_pending_reason *a = x, *b = y;
    if (a->queue_position != b->queue_position)
        return a->queue_position < b->queue_position ? -1 : 1;
    return a->job_id < b->job_id ? -1 : a->job_id > b->job_id;
}

/* The pending jobs, in the jobs' order (that of the reasons' making), each
 * with its final queue position: those stopped after their turn in the last
 * pass (out of passes) come after the last given, pos. *placed: whether the
 * positions are 1 to *np, each once (n distinct positions of 1 or more,
 * none above n), so that each reason goes to its place. One walk over the
 * jobs (three had been, a cache miss a job each). NULL when out of memory. */
static int *pending_jobs(struct cycle *cy, int64_t pos, size_t *np, bool *placed)
{
    size_t nj = cy->njobs ? cy->njobs : 1;
    int *pend = ts_arena_alloc_uninit(cy->a, nj * sizeof(int));
    unsigned char *seen = ts_arena_alloc(cy->a, nj);
    if (pend == NULL || seen == NULL)
        return NULL;
    size_t n = 0;
    int64_t most = 0;
    bool distinct = true;
    for (size_t i = 0; i < cy->njobs; i++) {
        struct jhot *h = &cy->hot[i];
        if (h->running)
            continue;
        if (h->position == 0)
            h->position = ++pos;
        pend[n++] = (int)i;
        if (h->position < 1 || (uint64_t)h->position > cy->njobs || seen[h->position - 1]) {
            distinct = false;
            continue;
        }
        seen[h->position - 1] = 1;
        if (h->position > most)
            most = h->position;
    }
    *np = n;
    *placed = distinct && (uint64_t)most <= n;
    return pend;
}

#define REASON_AHEAD 8 /* pending jobs ahead whose reasons' reads are fetched */

static enum ts_err build_result(struct cycle *cy, int passes, int64_t pos,
                                struct ts_sched_result *r)
{
    const struct ts_sched_snapshot *snap = cy->snap;
    r->passes = passes;
    r->decisions =
        ts_arena_alloc_uninit(cy->a, (cy->dec.n ? cy->dec.n : 1) * sizeof(*r->decisions));
    if (r->decisions == NULL)
        return TS_ERR_NOMEM;
    for (size_t i = 0; i < cy->dec.n; i++)
        if (cy->dec.v[i].code != NULL)
            r->decisions[r->ndecisions++] = cy->dec.v[i];
    size_t np = 0;
    bool placed = false;
    int *pend = pending_jobs(cy, pos, &np, &placed);
    if (pend == NULL)
        return TS_ERR_NOMEM;
    r->pending = ts_arena_alloc_uninit(cy->a, (np ? np : 1) * sizeof(*r->pending));
    cy->diag = ts_sched_diag_cache_new(np);
    if (r->pending == NULL || cy->diag == NULL)
        return TS_ERR_NOMEM;
    /* in queue order: each pending job has its own position, 1 to np (the
     * last pass's, or one after it), so each goes to its place; were one
     * not, they would be sorted (sorting 100,000 was 6 % of a cycle) */
    for (size_t k = 0; k < np; k++) {
        /* what a reason's key reads of a job (its first lines, to the end
         * of its preq) fetched a few jobs ahead: each was a cache miss */
        if (k + REASON_AHEAD < np) {
            const char *next = (const char *)&cy->jobs[pend[k + REASON_AHEAD]];
            size_t end = offsetof(struct job, p) + sizeof(struct preq);
            for (size_t off = 0; off < end; off += 64)
                __builtin_prefetch(next + off);
            __builtin_prefetch(next + end - 1);
        }
        size_t i = (size_t)pend[k];
        struct job *J = &cy->jobs[i];
        struct ts_sched_pending_reason *pr =
            &r->pending[placed ? (size_t)cy->hot[i].position - 1 : r->npending];
        r->npending++;
        *pr = (struct ts_sched_pending_reason){.job_id = J->id,
                                               .job = J->orig_running ? -1 : J->orig,
                                               .queue_position = cy->hot[i].position};
        ts_sched_reason_of(cy, (int)i, &pr->code, &pr->message);
    }
    if (!placed)
        qsort(r->pending, r->npending, sizeof(*r->pending), cmp_reason);
    r->nshares = snap->nprojects;
    r->shares = ts_arena_alloc(cy->a, (r->nshares ? r->nshares : 1) * sizeof(*r->shares));
    if (r->shares == NULL)
        return TS_ERR_NOMEM;
    for (size_t p = 0; p < r->nshares; p++) {
        const struct proj *P = &cy->projs[p];
        r->shares[p] = (struct ts_sched_share){snap->projects[p].id, P->demand, P->deserved,
                                               P->fair, P->alloc};
    }
    return cy->nomem ? TS_ERR_NOMEM : TS_OK;
}

/* The arena of the last result freed, emptied but with its memory kept: the
 * next cycle allocates about as much again, and first touches of fresh pages
 * were about 30 % of a large cycle. What is in it never reaches a decision:
 * ts_arena_alloc zeroes what it hands out, and what ts_arena_alloc_uninit
 * hands out (the jobs, the result's arrays) is written whole first. */
static _Atomic(struct ts_arena *) kept_arena;

/* The decisions' buffer of the last cycle, emptied, kept the same way: it
 * grew by doubling to 10 MB every cycle at 12,500 nodes (copies and fresh
 * pages). What is in it is never read before it is written (decision_new's
 * callers write each decision whole, and the cycle reads up to dec.n). */
static _Atomic(struct decision_buf *) kept_decisions;

static void decisions_take(struct cycle *cy)
{
    struct decision_buf *k = atomic_exchange(&kept_decisions, NULL);
    if (k == NULL)
        return;
    cy->dec = (struct decision_buf){.v = k->v, .cap = k->cap};
    free(k);
}

static void decisions_keep(struct cycle *cy)
{
    struct decision_buf *k = cy->dec.v != NULL ? malloc(sizeof(*k)) : NULL;
    if (k == NULL) {
        free(cy->dec.v);
        return;
    }
    *k = (struct decision_buf){.v = cy->dec.v, .cap = cy->dec.cap};
    k = atomic_exchange(&kept_decisions, k);
    if (k != NULL) { /* another cycle's, kept meanwhile */
        free(k->v);
        free(k);
    }
}

enum ts_err ts_sched_decide(const struct ts_sched_snapshot *snap, struct ts_sched_result **out,
                            struct ts_error *err)
{
    *out = NULL;
    enum ts_err rc = ts_sched_snapshot_validate(snap, err);
    if (rc != TS_OK)
        return rc;
    struct ts_arena *a = atomic_exchange(&kept_arena, NULL);
    if (a == NULL && (a = ts_arena_new()) == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "could not allocate the scheduler's arena");
    struct ts_sched_result *r = ts_arena_alloc(a, sizeof(*r));
    struct cycle *cy = ts_arena_alloc(a, sizeof(*cy));
    if (r == NULL || cy == NULL) {
        ts_arena_free(a);
        return ts_error_set(err, TS_ERR_NOMEM, "could not allocate the scheduler's state");
    }
    r->arena = a;
    decisions_take(cy);
    cy->snap = snap;
    cy->a = a;
    cy->st = ts_sched_strategy_find(snap->config.strategy);
    cy->c = ts_sched_cluster_build(snap, a);
    cy->fail_memo = ts_sched_memo_new();
    cy->reclaim_memo = ts_sched_memo_new();
    cy->failed_like = ts_sched_memo_new();
    rc = TS_ERR_NOMEM;
    if (cy->c == NULL || cy->fail_memo == NULL || cy->reclaim_memo == NULL ||
        cy->failed_like == NULL)
        goto out;
    struct gather g = {.first = ts_sched_memo_new(), .want_shapes = wants_shapes(cy)};
    if (g.want_shapes)
        ts_sched_cluster_shapes_begin(cy->c, &g.shapes, a);
    rc = g.first == NULL ? TS_ERR_NOMEM : build_jobs(cy, &g);
    ts_sched_memo_free(g.first);
    if (rc != TS_OK || (rc = build_projects(cy)) != TS_OK)
        goto out;
    rc = TS_ERR_NOMEM;
    if (!ts_sched_order_sort(cy)) /* before the victim index, which is built in its order */
        goto out;
    if (!ts_sched_victims_index_build(cy)) {
        rc = TS_ERR_NOMEM;
        goto out;
    }
    if (g.want_shapes)
        ts_sched_cluster_shapes_set(cy->c, &g.shapes, a);
    int max_passes = snap->config.max_passes > 0 ? snap->config.max_passes : 16;
    int pass = 0;
    int64_t pos = 0; /* queue positions of the last pass */
    while (pass < max_passes) {
        pass++;
        cy->pass_decisions = 0;
        ts_sched_memo_clear(cy->reclaim_memo);
        ts_sched_memo_clear(cy->failed_like); /* fair shares are taken again */
        shares_update(cy);
        if (pass == 1)
            shares_keep_first(cy);
        cy->order = ts_sched_order_new(cy);
        if (cy->order == NULL && cy->njobs > 0) {
            rc = TS_ERR_NOMEM;
            goto out;
        }
        pos = 0; /* and every job's position 0 (shares_update) */
        for (int j; (j = ts_sched_order_next(cy->order)) >= 0;) {
            attempt_or_repeat(cy, j);
            if (!cy->jobs[j].running)
                cy->hot[j].position = ++pos;
        }
        ts_sched_order_free(cy->order);
        cy->order = NULL;
        if (cy->nomem) {
            rc = TS_ERR_NOMEM;
            goto out;
        }
        if (cy->pass_decisions == 0)
            break;
    }
    rc = build_result(cy, pass, pos, r);
out:
    ts_sched_memo_free(cy->fail_memo);
    ts_sched_memo_free(cy->reclaim_memo);
    ts_sched_memo_free(cy->failed_like);
    decisions_keep(cy);
    free(cy->freed);
    ts_sched_diag_cache_free(cy->diag);
    ts_sched_victims_index_free(cy);
    if (cy->c != NULL)
        ts_sched_pindex_free(cy->c);
    if (rc != TS_OK) {
        ts_arena_free(a);
        return ts_error_set(err, rc, "could not decide: out of memory");
    }
    *out = r;
    return TS_OK;
}

void ts_sched_result_free(struct ts_sched_result *r)
{
    if (r == NULL)
        return;
    struct ts_arena *a = r->arena; /* r lives in it */
    ts_arena_reset(a);
    ts_arena_free(atomic_exchange(&kept_arena, a));
}
