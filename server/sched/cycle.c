/*
 * cycle.c - the changes of one cycle's state that its files share: a job
 * placed (bind) or stopped (evicted, suspended, or its placement taken
 * back), the node lists, the allocations, and the cycle's sentences. It
 * calls down only (the victim index, the queue, the placement memo); the
 * driver (decide.c) and the searches (reclaim.c, preempt.c) call it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/sched/cycle.h"
#include "server/sched/memo.h"
#include "server/sched/order.h"
#include "server/sched/victims.h"

const char *ts_sched_cycle_printf(struct cycle *cy, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    const char *s = ts_arena_strdup(cy->a, buf);
    if (s == NULL) {
        cy->nomem = true;
        return "";
    }
    return s;
}

void ts_sched_cycle_msg_int(struct cycle_msg *m, long v)
{
    char d[24];
    size_t k = sizeof(d);
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    d[--k] = '\0';
    do {
        d[--k] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        d[--k] = '-';
    ts_sched_cycle_msg_addn(m, d + k, sizeof(d) - 1 - k);
}

const char *ts_sched_cycle_msg_end(struct cycle *cy, const struct cycle_msg *m)
{
    const char *s = ts_arena_strndup(cy->a, m->b, m->n);
    if (s == NULL) {
        cy->nomem = true;
        return "";
    }
    return s;
}

const char *ts_sched_cycle_held(struct cycle *cy, int p)
{
    struct proj *P = &cy->projs[p];
    if (P->held != NULL) /* the same all cycle: made once (a stop each) */
        return P->held;
    char a[32], q[32], f[32];
    ts_gpus_format(P->alloc0, a, sizeof(a));
    double shown = strtod(a, NULL); /* 0.5 GPU, 1 GPU, 0 GPUs, 1.5 GPUs */
    bool one = shown > 0 && shown <= 1;
    P->held = ts_sched_cycle_printf(cy, "held %s GPU%s of its quota %s (fair share %s)", a,
                                    one ? "" : "s",
                                    ts_gpus_format(cy->snap->projects[p].quota_gpus, q, sizeof(q)),
                                    ts_gpus_format(P->fair0, f, sizeof(f)));
    return P->held;
}

/* The next decision's place in the cycle's buffer, for the caller to
 * write whole; NULL when out of memory. Written there, not built on the
 * stack and copied: the copy's loads waited for the stack's stores behind
 * those of the bind or stop before it (3.5 % of a large cycle). */
static struct ts_sched_decision *decision_new(struct cycle *cy)
{
    struct decision_buf *b = &cy->dec;
    if (b->n == b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 64;
        struct ts_sched_decision *nv = realloc(b->v, ncap * sizeof(*nv));
        if (nv == NULL) {
            cy->nomem = true;
            return NULL;
        }
        b->v = nv;
        b->cap = ncap;
    }
    cy->pass_decisions++;
    return &b->v[b->n++];
}

void ts_sched_cycle_list_add(struct cycle *cy, int j)
{
    struct job *J = &cy->jobs[j];
    J->prev = -1;
    J->next = cy->node_head[J->node];
    if (J->next >= 0)
        cy->jobs[J->next].prev = j;
    cy->node_head[J->node] = j;
    ts_sched_victims_index_add(cy, j);
    ts_sched_victims_node_changed(cy, J->node);
}

static void list_del(struct cycle *cy, int j)
{
    struct job *J = &cy->jobs[j];
    ts_sched_victims_index_del(cy, j);
    ts_sched_victims_node_changed(cy, J->node);
    if (J->prev >= 0)
        cy->jobs[J->prev].next = J->next;
    else
        cy->node_head[J->node] = J->next;
    if (J->next >= 0)
        cy->jobs[J->next].prev = J->prev;
    J->prev = J->next = -1;
}

/* j's running state and GPUs into its struct jhot, once they changed */
static void hot_sync(struct cycle *cy, int j)
{
    const struct job *J = &cy->jobs[j];
    struct jhot *h = &cy->hot[j];
    h->running = J->running;
    h->amount = J->running ? J->gpus : J->valid ? J->p.gpus_estimate : 0;
}

void ts_sched_cycle_account(struct cycle *cy, const struct job *J, int sign)
{
    ts_sched_cycle_account_gpus(cy, J->project, J->preemptible, sign * J->gpus);
}

void ts_sched_cycle_bind(struct cycle *cy, int j, int node, const struct ts_sched_slot *slots,
                         size_t nslots, const char *code, const char *msg)
{
    struct job *J = &cy->jobs[j];
    cy->changes++;
    struct ts_sched_slot *copy = ts_arena_alloc(cy->a, (nslots ? nslots : 1) * sizeof(*copy));
    if (copy == NULL) {
        cy->nomem = true;
        return;
    }
    memcpy(copy, slots, nslots * sizeof(*copy));
    J->slots = copy;
    J->nslots = nslots;
    J->node = node;
    J->running = true;
    J->bound = true;
    J->saved_only_node = J->p.only_node;
    J->saved_only_slots = J->p.only_slots;
    J->saved_nonly_slots = J->p.nonly_slots;
    J->saved_held = J->p.host_mem_held;
    J->bind_dec = (int)cy->dec.n;
    J->gpus = ts_sched_cluster_slots_gpus(cy->c, slots, nslots);
    J->started_at = cy->snap->now;
    hot_sync(cy, j);
    ts_sched_cluster_take(cy->c, node, slots, nslots, J->p.cpu,
                          J->p.host_mem_held ? 0 : J->p.host_mem);
    ts_sched_cycle_list_add(cy, j);
    ts_sched_cycle_account(cy, J, 1);
    struct ts_sched_decision *d = decision_new(cy);
    if (d != NULL)
        *d = (struct ts_sched_decision){
            .action = TS_SCHED_BIND,
            .job_id = J->id,
            .job_was_running = J->orig_running,
            .job = J->orig,
            .node = node,
            .slots = copy,
            .nslots = nslots,
            .gpus = J->gpus,
            .code = code,
            .message = msg,
        };
    ts_sched_order_update(cy->order, J->project);
}

/* Node `node` has more room than before: placements that failed may now fit
 * there (and only there). */
static void cycle_freed(struct cycle *cy, int node)
{
    cy->free_epoch++;
    ts_sched_victims_node_changed(cy, node);
    if (cy->nfreed == cy->capfreed) {
        size_t ncap = cy->capfreed ? cy->capfreed * 2 : 256;
        int *nv = realloc(cy->freed, ncap * sizeof(int));
        if (nv == NULL) {
            ts_sched_memo_clear(cy->fail_memo); /* cannot track: forget every failure */
            cy->nfreed = 0;
            return;
        }
        cy->freed = nv;
        cy->capfreed = ncap;
    }
    cy->freed[cy->nfreed++] = node;
}

static int64_t slots_bytes(const struct ts_sched_slot *slots, size_t n)
{
    int64_t b = 0;
    for (size_t k = 0; k < n; k++)
        b += slots[k].memory_bytes;
    return b;
}

int64_t ts_sched_suspend_bytes(const struct ts_sched_running *r)
{
    int64_t held = slots_bytes(r->slots, r->nslots);
    if (r->memory_used_bytes > held)
        held = r->memory_used_bytes;
    if (r->swapped_bytes > held)
        held = r->swapped_bytes;
    return held - (r->swapped_bytes > 0 ? r->swapped_bytes : 0);
}

/* Take back a placement this cycle made: its bind decision is cancelled and
 * the job is pending again, as it was. A job that was suspended (by the
 * snapshot or by this cycle) keeps its suspension when `suspend`; otherwise
 * the suspension is dropped, as a new cycle would evict the job it sees
 * running: this cycle's suspension becomes an eviction (host memory and
 * swap room return), or an older one ends with an eviction of the pending
 * job (its host memory returns; it may resume on any node). Jobs stopped to
 * make room for it now make room for for_job, which takes its place. */
static void unbind(struct cycle *cy, int v, int for_job, bool suspend, const char *code,
                   const char *msg)
{
    struct job *V = &cy->jobs[v];
    int node_was = V->node;
    for (size_t i = 0; i < cy->dec.n; i++) {
        struct ts_sched_decision *d = &cy->dec.v[i];
        if (d->action != TS_SCHED_BIND && d->code != NULL && d->for_job_id == V->id)
            d->for_job_id = cy->jobs[for_job].id;
    }
    bool drop = ts_sched_cycle_holds_suspension(V) && !suspend;
    ts_sched_cluster_give(cy->c, node_was, V->slots, V->nslots, V->p.cpu,
                          V->saved_held && !drop ? 0 : V->p.host_mem);
    list_del(cy, v);
    ts_sched_cycle_account(cy, V, -1);
    cy->dec.v[V->bind_dec].code = NULL; /* cancelled: dropped from the result */
    V->running = false;
    V->bound = false;
    V->bind_dec = -1;
    V->gpus = 0;
    V->node = -1;
    hot_sync(cy, v);
    V->p.only_node = V->saved_only_node;
    V->p.only_slots = V->saved_only_slots;
    V->p.nonly_slots = V->saved_nonly_slots;
    V->p.host_mem_held = V->saved_held;
    if (drop) {
        V->p.only_node = -1;
        V->p.only_slots = NULL;
        V->p.nonly_slots = 0;
        V->p.host_mem_held = false;
        if (V->stop_dec >= 0) {
            struct ts_sched_decision *d = &cy->dec.v[V->stop_dec];
            d->action = TS_SCHED_EVICT;
            cy->c->nodes[d->node].swap_free += V->swap_need;
        } else {
            V->evicted = true;
            V->stop_dec = (int)cy->dec.n;
            struct ts_sched_decision *d = decision_new(cy);
            if (d != NULL)
                *d = (struct ts_sched_decision){
                    .action = TS_SCHED_EVICT,
                    .job_id = V->id,
                    .job_was_running = false,
                    .job = V->orig,
                    .node = node_was,
                    .for_job_id = cy->jobs[for_job].id,
                    .code = code,
                    .message = msg,
                };
        }
    }
    cy->pass_decisions++;
    cycle_freed(cy, node_was);
    ts_sched_order_update(cy->order, V->project);
}

void ts_sched_cycle_stop(struct cycle *cy, int v, int for_job, bool suspend_it, const char *code,
                         const char *msg)
{
    struct job *V = &cy->jobs[v];
    cy->changes++;
    if (V->bound) {
        unbind(cy, v, for_job, suspend_it, code, msg);
        return;
    }
    int node = V->node;
    /* a job that holds GPU memory, where its node's swap has room for it */
    int64_t bytes = slots_bytes(V->slots, V->nslots);
    struct node_state *n = &cy->c->nodes[node];
    bool suspend = suspend_it && bytes > 0 && n->swap_free >= V->swap_need;
    if (suspend)
        n->swap_free -= V->swap_need;
    ts_sched_cluster_give(cy->c, node, V->slots, V->nslots, V->p.cpu, suspend ? 0 : V->p.host_mem);
    list_del(cy, v);
    ts_sched_cycle_account(cy, V, -1);
    V->running = false;
    V->evicted = true;
    if (suspend) {
        /* its processes keep their devices: it resumes on the same GPUs */
        V->p.only_node = node;
        V->p.only_slots = V->nslots > 0 ? V->slots : NULL;
        V->p.nonly_slots = V->nslots;
        V->p.host_mem_held = true;
    } else {
        V->p.only_node = -1;
        V->p.only_slots = NULL;
        V->p.nonly_slots = 0;
        V->p.host_mem_held = false;
    }
    V->stop_dec = (int)cy->dec.n;
    struct ts_sched_decision *d = decision_new(cy);
    if (d != NULL)
        *d = (struct ts_sched_decision){
            .action = suspend ? TS_SCHED_SUSPEND : TS_SCHED_EVICT,
            .job_id = V->id,
            .job_was_running = V->orig_running,
            .job = V->orig,
            .node = node,
            .slots = V->slots,
            .nslots = V->nslots,
            .gpus = V->gpus,
            .for_job_id = cy->jobs[for_job].id,
            .code = code,
            .message = msg,
        };
    V->gpus = 0;
    hot_sync(cy, v);
    cycle_freed(cy, node);
    ts_sched_order_update(cy->order, V->project);
}
