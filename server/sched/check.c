/*
 * check.c - the invariants every cycle keeps (ts_sched_check) and the state
 * its decisions produce (ts_sched_apply). The tests run both after every
 * cycle of every fixture and of thousands of random snapshots; tessera-sim
 * uses ts_sched_apply to move time forward.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/sched/sched_int.h"

#define TOL 1e-6

static double slot_gpus(const struct ts_sched_snapshot *s, const struct ts_sched_slot *sl, size_t n)
{
    double g = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ts_sched_gpu *x = &s->gpus[sl[i].gpu];
        g += (double)sl[i].memory_bytes / (double)(x->memory_bytes - x->reserve_bytes);
    }
    return g;
}

static bool has_label(const struct ts_sched_node *n, const struct ts_sched_label *l)
{
    for (size_t i = 0; i < n->nlabels; i++)
        if (strcmp(n->labels[i].key, l->key) == 0 && strcmp(n->labels[i].value, l->value) == 0)
            return true;
    return false;
}

static const struct ts_sched_request *req_of(const struct ts_sched_snapshot *s,
                                             const struct ts_sched_decision *d)
{
    return d->job_was_running ? &s->running[d->job].request : &s->pending[d->job].request;
}

static int project_of(const struct ts_sched_snapshot *s, const struct ts_sched_decision *d)
{
    return d->job_was_running ? s->running[d->job].project : s->pending[d->job].project;
}

/* Whether the job of bind i was suspended earlier in the result: its host
 * memory is already counted on the node. */
static bool stopped_suspended(const struct ts_sched_result *res, size_t i, int64_t id)
{
    for (size_t k = 0; k < i; k++)
        if (res->decisions[k].job_id == id && res->decisions[k].action == TS_SCHED_SUSPEND)
            return true;
    return false;
}

static bool request_bursts(const struct ts_sched_request *r)
{
    return (r->kind == TS_SCHED_GPU_PORTION && r->portion_limit > r->portion) ||
           (r->kind == TS_SCHED_GPU_MEMORY && r->memory_limit_bytes > r->memory_bytes);
}

static bool slots_have(const struct ts_sched_slot *v, size_t n, int gpu)
{
    for (size_t k = 0; k < n; k++)
        if (v[k].gpu == gpu)
            return true;
    return false;
}

/* The GPUs a resumed job must take again: a pending job's suspended slots,
 * or those of a running job this result suspended before binding it; NULL
 * when the bind is free to choose. */
static const struct ts_sched_slot *pinned_slots(const struct ts_sched_snapshot *s,
                                                const struct ts_sched_result *res, size_t i,
                                                const bool *ended, size_t *n)
{
    const struct ts_sched_decision *d = &res->decisions[i];
    *n = 0;
    if (!d->job_was_running) {
        const struct ts_sched_pending *p = &s->pending[d->job];
        if (p->suspended_node < 0 || ended[d->job] || p->nsuspended_slots == 0)
            return NULL;
        *n = p->nsuspended_slots;
        return p->suspended_slots;
    }
    if (!stopped_suspended(res, i, d->job_id))
        return NULL;
    *n = s->running[d->job].nslots;
    return *n > 0 ? s->running[d->job].slots : NULL;
}

/* What ts_sched_check tallies: the state after the decisions. */
struct chk {
    const struct ts_sched_snapshot *s;
    const struct ts_sched_result *res;
    struct ts_error *err;
    int64_t *used;     /* per GPU: bytes */
    double *cpu;       /* per node */
    int64_t *mem;      /* per node: bytes */
    bool *touched_gpu; /* a bind took room there */
    bool *touched_node;
    double *before, *after;   /* per project: GPUs */
    double *dbefore, *dafter; /* per department */
    bool *stopped;            /* per running job */
    bool *ended;              /* per pending job: its suspension ended */
};

/* Stop i of a pending job: only a suspension can end, once. */
static enum ts_err check_ended(struct chk *c, const struct ts_sched_decision *d)
{
    const struct ts_sched_pending *p = &c->s->pending[d->job];
    if (d->action != TS_SCHED_EVICT || p->suspended_node != d->node || p->suspended_node < 0 ||
        !p->preemptible || c->ended[d->job])
        return ts_error_set(c->err, TS_ERR_INTERNAL,
                            "job %lld was stopped but was neither running nor suspended there",
                            (long long)d->job_id);
    c->ended[d->job] = true;
    return TS_OK;
}

/* Every stop serves a later bind, and stops only what may be stopped. */
static enum ts_err check_stops(struct chk *c)
{
    const struct ts_sched_snapshot *s = c->s;
    const struct ts_sched_result *res = c->res;
    for (size_t i = 0; i < res->ndecisions; i++) {
        const struct ts_sched_decision *d = &res->decisions[i];
        if (d->action == TS_SCHED_BIND)
            continue;
        bool served = false;
        for (size_t k = i + 1; k < res->ndecisions && !served; k++)
            served = res->decisions[k].action == TS_SCHED_BIND &&
                     res->decisions[k].job_id == d->for_job_id;
        if (!served)
            return ts_error_set(c->err, TS_ERR_INTERNAL,
                                "job %lld was stopped for job %lld, which was not placed after it",
                                (long long)d->job_id, (long long)d->for_job_id);
        if (d->action == TS_SCHED_SUSPEND && d->job_was_running &&
            s->running[d->job].request.refuses_swap)
            return ts_error_set(c->err, TS_ERR_INTERNAL, "job %lld refuses swap but was suspended",
                                (long long)d->job_id);
        if (!d->job_was_running) {
            enum ts_err rc = check_ended(c, d);
            if (rc != TS_OK)
                return rc;
            continue;
        }
        const struct ts_sched_running *j = &s->running[d->job];
        if (!j->preemptible)
            return ts_error_set(c->err, TS_ERR_INTERNAL, "non-preemptible job \"%s\" was stopped",
                                j->name);
        int64_t m = s->projects[j->project].min_runtime_s;
        if (m < 0)
            m = s->config.min_runtime_s;
        if (m > 0 && s->now - j->started_at < m)
            return ts_error_set(c->err, TS_ERR_INTERNAL,
                                "job \"%s\" was stopped after %lld s, inside its %lld s protection",
                                j->name, (long long)(s->now - j->started_at), (long long)m);
        if (c->stopped[d->job])
            return ts_error_set(c->err, TS_ERR_INTERNAL, "job \"%s\" was stopped twice", j->name);
        c->stopped[d->job] = true;
    }
    return TS_OK;
}

/* What stays: running jobs not stopped, suspended jobs' host memory. */
static void tally_kept(struct chk *c)
{
    const struct ts_sched_snapshot *s = c->s;
    for (size_t i = 0; i < s->nrunning; i++) {
        const struct ts_sched_running *j = &s->running[i];
        int dep = s->projects[j->project].department;
        double g = slot_gpus(s, j->slots, j->nslots);
        c->before[j->project] += g;
        if (dep >= 0)
            c->dbefore[dep] += g;
        if (c->stopped[i])
            continue;
        c->after[j->project] += g;
        if (dep >= 0)
            c->dafter[dep] += g;
        for (size_t k = 0; k < j->nslots; k++)
            c->used[j->slots[k].gpu] += j->slots[k].memory_bytes;
        c->cpu[j->node] += j->request.cpu;
        c->mem[j->node] += j->request.host_memory_bytes;
    }
    for (size_t i = 0; i < s->npending; i++)
        if (s->pending[i].suspended_node >= 0 && !c->ended[i])
            c->mem[s->pending[i].suspended_node] += s->pending[i].request.host_memory_bytes;
    for (size_t i = 0; i < c->res->ndecisions; i++) {
        const struct ts_sched_decision *d = &c->res->decisions[i];
        if (d->action == TS_SCHED_SUSPEND && d->job_was_running)
            c->mem[d->node] += s->running[d->job].request.host_memory_bytes;
    }
}

/* Bind i's node: ready, with the labels asked for, not swapping for a job
 * that refuses it, and a resumed job back on the GPUs it held. */
static enum ts_err check_bind_node(struct chk *c, size_t i)
{
    const struct ts_sched_snapshot *s = c->s;
    const struct ts_sched_decision *d = &c->res->decisions[i];
    const struct ts_sched_request *r = req_of(s, d);
    const struct ts_sched_node *n = &s->nodes[d->node];
    if (!n->ready)
        return ts_error_set(c->err, TS_ERR_INTERNAL,
                            "job %lld was placed on %s, which is not ready", (long long)d->job_id,
                            n->name);
    for (size_t k = 0; k < r->nnode_selector; k++)
        if (!has_label(n, &r->node_selector[k]))
            return ts_error_set(c->err, TS_ERR_INTERNAL, "job %lld was placed on %s without %s=%s",
                                (long long)d->job_id, n->name, r->node_selector[k].key,
                                r->node_selector[k].value);
    if (r->refuses_swap && request_bursts(r) && n->swap_resolver)
        return ts_error_set(c->err, TS_ERR_INTERNAL,
                            "job %lld refuses swap, can burst, and was placed on %s, whose "
                            "resolver swaps",
                            (long long)d->job_id, n->name);
    size_t npin;
    const struct ts_sched_slot *pin = pinned_slots(s, c->res, i, c->ended, &npin);
    for (size_t k = 0; pin != NULL && k < d->nslots; k++)
        if (!slots_have(pin, npin, d->slots[k].gpu))
            return ts_error_set(c->err, TS_ERR_INTERNAL,
                                "job %lld resumed on GPU %d of %s, which it did not hold",
                                (long long)d->job_id, s->gpus[d->slots[k].gpu].index, n->name);
    return TS_OK;
}

/* Bind i's GPUs: as many as asked, of its node and of a model it accepts,
 * and free when taken whole. Their room is added to the tally. */
static enum ts_err check_bind_gpus(struct chk *c, const struct ts_sched_decision *d)
{
    const struct ts_sched_snapshot *s = c->s;
    const struct ts_sched_request *r = req_of(s, d);
    int want = r->kind == TS_SCHED_GPU_NONE    ? 0
               : r->kind == TS_SCHED_GPU_COUNT ? r->count
                                               : (r->devices > 0 ? r->devices : 1);
    if ((int)d->nslots != want)
        return ts_error_set(c->err, TS_ERR_INTERNAL, "job %lld got %zu GPUs and asked for %d",
                            (long long)d->job_id, d->nslots, want);
    for (size_t k = 0; k < d->nslots; k++) {
        int gi = d->slots[k].gpu;
        const struct ts_sched_gpu *g = &s->gpus[gi];
        if (g->node != d->node)
            return ts_error_set(c->err, TS_ERR_INTERNAL, "job %lld got a GPU of another node",
                                (long long)d->job_id);
        bool model_ok = r->ngpu_models == 0;
        for (size_t q = 0; q < r->ngpu_models && !model_ok; q++)
            model_ok = strcmp(r->gpu_models[q], g->model) == 0;
        if (!model_ok)
            return ts_error_set(c->err, TS_ERR_INTERNAL, "job %lld got a %s GPU it does not accept",
                                (long long)d->job_id, g->model);
        if (r->kind == TS_SCHED_GPU_COUNT && c->used[gi] != 0)
            return ts_error_set(c->err, TS_ERR_INTERNAL,
                                "job %lld got GPU %d of %s whole, but it is in use",
                                (long long)d->job_id, g->index, s->nodes[d->node].name);
        c->used[gi] += d->slots[k].memory_bytes;
        c->touched_gpu[gi] = true;
    }
    return TS_OK;
}

static enum ts_err check_binds(struct chk *c)
{
    const struct ts_sched_snapshot *s = c->s;
    for (size_t i = 0; i < c->res->ndecisions; i++) {
        const struct ts_sched_decision *d = &c->res->decisions[i];
        if (d->action != TS_SCHED_BIND)
            continue;
        enum ts_err rc = check_bind_node(c, i);
        if (rc == TS_OK)
            rc = check_bind_gpus(c, d);
        if (rc != TS_OK)
            return rc;
        const struct ts_sched_request *r = req_of(s, d);
        int p = project_of(s, d);
        bool resumed = d->job_was_running
                           ? stopped_suspended(c->res, i, d->job_id)
                           : s->pending[d->job].suspended_node >= 0 && !c->ended[d->job];
        c->cpu[d->node] += r->cpu;
        if (!resumed)
            c->mem[d->node] += r->host_memory_bytes;
        c->touched_node[d->node] = true;
        double g = slot_gpus(s, d->slots, d->nslots);
        c->after[p] += g;
        if (s->projects[p].department >= 0)
            c->dafter[s->projects[p].department] += g;
    }
    return TS_OK;
}

/* Where something was bound: no GPU or node beyond its size; no project or
 * department pushed over its limit. */
static enum ts_err check_room(const struct chk *c)
{
    const struct ts_sched_snapshot *s = c->s;
    for (size_t g = 0; g < s->ngpus; g++) {
        int64_t usable = s->gpus[g].memory_bytes - s->gpus[g].reserve_bytes;
        if (c->touched_gpu[g] && c->used[g] > usable)
            return ts_error_set(c->err, TS_ERR_INTERNAL,
                                "GPU %d of %s is over-committed: %lld of %lld bytes",
                                s->gpus[g].index, s->nodes[s->gpus[g].node].name,
                                (long long)c->used[g], (long long)usable);
    }
    for (size_t n = 0; n < s->nnodes; n++)
        if (c->touched_node[n] &&
            (c->cpu[n] > s->nodes[n].cpu + TOL || c->mem[n] > s->nodes[n].memory_bytes))
            return ts_error_set(c->err, TS_ERR_INTERNAL,
                                "node %s is over-committed: %g of %g cpu, %lld of %lld bytes",
                                s->nodes[n].name, c->cpu[n], s->nodes[n].cpu, (long long)c->mem[n],
                                (long long)s->nodes[n].memory_bytes);
    for (size_t p = 0; p < s->nprojects; p++) {
        const struct ts_sched_project *pr = &s->projects[p];
        if (pr->has_limit && c->after[p] > fmax(c->before[p], pr->limit_gpus) + TOL)
            return ts_error_set(c->err, TS_ERR_INTERNAL,
                                "project \"%s\" is over its limit: %g of %g", pr->name, c->after[p],
                                pr->limit_gpus);
    }
    for (size_t d = 0; d < s->ndepartments; d++) {
        const struct ts_sched_department *dp = &s->departments[d];
        if (dp->has_limit && c->dafter[d] > fmax(c->dbefore[d], dp->limit_gpus) + TOL)
            return ts_error_set(c->err, TS_ERR_INTERNAL,
                                "department \"%s\" is over its limit: %g of %g", dp->name,
                                c->dafter[d], dp->limit_gpus);
    }
    return TS_OK;
}

/* Every job not placed has a reason and a distinct position. */
static enum ts_err check_pending(const struct ts_sched_snapshot *s,
                                 const struct ts_sched_result *res, struct ts_error *err)
{
    size_t expect = s->npending;
    for (size_t i = 0; i < res->ndecisions; i++) {
        const struct ts_sched_decision *d = &res->decisions[i];
        if (d->action == TS_SCHED_BIND)
            expect += d->job_was_running ? 0 : (size_t)-1;
        else if (d->job_was_running)
            expect++;
        if (d->action == TS_SCHED_BIND && d->job_was_running)
            expect--; /* stopped and placed again */
    }
    if (res->npending != expect)
        return ts_error_set(err, TS_ERR_INTERNAL, "%zu jobs are pending but %zu reasons were given",
                            expect, res->npending);
    for (size_t i = 0; i < res->npending; i++) {
        const struct ts_sched_pending_reason *pr = &res->pending[i];
        if (pr->code == NULL || pr->code[0] == '\0' || pr->message == NULL ||
            pr->message[0] == '\0')
            return ts_error_set(err, TS_ERR_INTERNAL, "pending job %lld has no reason",
                                (long long)pr->job_id);
        if (pr->queue_position < 1 ||
            (i > 0 && pr->queue_position <= res->pending[i - 1].queue_position))
            return ts_error_set(err, TS_ERR_INTERNAL, "pending job %lld has queue position %lld",
                                (long long)pr->job_id, (long long)pr->queue_position);
    }
    return TS_OK;
}

enum ts_err ts_sched_check(const struct ts_sched_snapshot *s, const struct ts_sched_result *res,
                           struct ts_error *err)
{
    size_t ng = s->ngpus ? s->ngpus : 1, nn = s->nnodes ? s->nnodes : 1,
           np = s->nprojects ? s->nprojects : 1;
    struct chk c = {
        .s = s,
        .res = res,
        .err = err,
        .used = calloc(ng, sizeof(int64_t)),
        .cpu = calloc(nn, sizeof(double)),
        .mem = calloc(nn, sizeof(int64_t)),
        .touched_gpu = calloc(ng, sizeof(bool)),
        .touched_node = calloc(nn, sizeof(bool)),
        .before = calloc(np, sizeof(double)),
        .after = calloc(np, sizeof(double)),
        .dbefore = calloc(s->ndepartments + 1, sizeof(double)),
        .dafter = calloc(s->ndepartments + 1, sizeof(double)),
        .stopped = calloc(s->nrunning ? s->nrunning : 1, sizeof(bool)),
        .ended = calloc(s->npending ? s->npending : 1, sizeof(bool)),
    };
    enum ts_err rc;
    if (!c.used || !c.cpu || !c.mem || !c.touched_gpu || !c.touched_node || !c.before || !c.after ||
        !c.dbefore || !c.dafter || !c.stopped || !c.ended)
        rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    else if ((rc = check_stops(&c)) == TS_OK) {
        tally_kept(&c);
        if ((rc = check_binds(&c)) == TS_OK && (rc = check_room(&c)) == TS_OK)
            rc = check_pending(s, res, err);
    }
    free(c.used);
    free(c.cpu);
    free(c.mem);
    free(c.touched_gpu);
    free(c.touched_node);
    free(c.before);
    free(c.after);
    free(c.dbefore);
    free(c.dafter);
    free(c.stopped);
    free(c.ended);
    return rc;
}

/* A stopped job back in the queue; suspended on node (or -1). */
static void requeue(const struct ts_sched_running *j, int node, struct ts_sched_pending *p)
{
    memset(p, 0, sizeof(*p));
    p->id = j->id;
    p->name = j->name;
    p->project = j->project;
    p->priority = j->priority;
    p->preemptible = j->preemptible;
    p->request = j->request;
    p->submitted_at = j->started_at;
    p->suspended_node = node;
    if (node >= 0 && j->nslots > 0) {
        p->suspended_slots = j->slots;
        p->nsuspended_slots = j->nslots;
    }
}

/* The job bind d places, running where it was placed. */
static void start(const struct ts_sched_snapshot *s, const struct ts_sched_decision *d,
                  struct ts_sched_running *r)
{
    memset(r, 0, sizeof(*r));
    if (d->job_was_running) {
        *r = s->running[d->job];
    } else {
        const struct ts_sched_pending *j = &s->pending[d->job];
        r->id = j->id;
        r->name = j->name;
        r->project = j->project;
        r->priority = j->priority;
        r->preemptible = j->preemptible;
        r->request = j->request;
    }
    r->node = d->node;
    r->slots = d->slots;
    r->nslots = d->nslots;
    r->started_at = s->now;
}

enum ts_err ts_sched_apply(const struct ts_sched_snapshot *s, const struct ts_sched_result *res,
                           struct ts_arena *a, struct ts_sched_snapshot *out, struct ts_error *err)
{
    *out = *s;
    size_t nr = s->nrunning, np = s->npending, nd = res->ndecisions;
    struct ts_sched_running *run = ts_arena_alloc(a, (nr + nd + 1) * sizeof(*run));
    struct ts_sched_pending *pen = ts_arena_alloc(a, (np + nd + 1) * sizeof(*pen));
    struct ts_sched_node *nodes = ts_arena_alloc(a, (s->nnodes + 1) * sizeof(*nodes));
    signed char *rstate = ts_arena_alloc(a, nr + 1); /* 1 stopped, 2 suspended */
    int *rnode = ts_arena_alloc(a, (nr + 1) * sizeof(int));
    bool *pbound = ts_arena_alloc(a, np + 1);
    bool *pended = ts_arena_alloc(a, np + 1); /* suspension ended */
    if (!run || !pen || !nodes || !rstate || !rnode || !pbound || !pended)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    memcpy(nodes, s->nodes, s->nnodes * sizeof(*nodes));
    size_t nrun = 0, npen = 0;
    for (size_t i = 0; i < nd; i++) {
        const struct ts_sched_decision *d = &res->decisions[i];
        if (d->action == TS_SCHED_BIND) {
            if (!d->job_was_running)
                pbound[d->job] = true;
            continue;
        }
        if (!d->job_was_running) {
            pended[d->job] = true;
            continue;
        }
        rstate[d->job] = d->action == TS_SCHED_SUSPEND ? 2 : 1;
        rnode[d->job] = d->node;
        if (d->action == TS_SCHED_SUSPEND)
            nodes[d->node].swap_free_bytes -= ts_sched_suspend_bytes(&s->running[d->job]);
    }
    for (size_t i = 0; i < nr; i++)
        if (rstate[i] == 0)
            run[nrun++] = s->running[i];
    for (size_t i = 0; i < np; i++) {
        if (pbound[i])
            continue;
        pen[npen] = s->pending[i];
        if (pended[i]) {
            pen[npen].suspended_node = -1;
            pen[npen].suspended_slots = NULL;
            pen[npen].nsuspended_slots = 0;
        }
        npen++;
    }
    /* stopped jobs that were not placed again go back to the queue */
    for (size_t i = 0; i < nr; i++) {
        if (rstate[i] == 0)
            continue;
        bool rebound = false;
        for (size_t k = 0; k < nd && !rebound; k++)
            rebound = res->decisions[k].action == TS_SCHED_BIND &&
                      res->decisions[k].job_was_running && res->decisions[k].job == (int)i;
        if (rebound)
            continue;
        requeue(&s->running[i], rstate[i] == 2 ? rnode[i] : -1, &pen[npen++]);
    }
    for (size_t i = 0; i < nd; i++) {
        const struct ts_sched_decision *d = &res->decisions[i];
        if (d->action != TS_SCHED_BIND)
            continue;
        start(s, d, &run[nrun++]);
    }
    out->running = run;
    out->nrunning = nrun;
    out->pending = pen;
    out->npending = npen;
    out->nodes = nodes;
    return TS_OK;
}
