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

enum ts_err ts_sched_check(const struct ts_sched_snapshot *s, const struct ts_sched_result *res,
                           struct ts_error *err)
{
    enum ts_err rc = TS_OK;
    size_t ng = s->ngpus, nn = s->nnodes, np = s->nprojects, nr = s->nrunning;
    int64_t *used = calloc(ng ? ng : 1, sizeof(int64_t));
    double *cpu = calloc(nn ? nn : 1, sizeof(double));
    int64_t *mem = calloc(nn ? nn : 1, sizeof(int64_t));
    bool *touched_gpu = calloc(ng ? ng : 1, sizeof(bool));
    bool *touched_node = calloc(nn ? nn : 1, sizeof(bool));
    double *before = calloc(np ? np : 1, sizeof(double));
    double *after = calloc(np ? np : 1, sizeof(double));
    double *dbefore = calloc(s->ndepartments + 1, sizeof(double));
    double *dafter = calloc(s->ndepartments + 1, sizeof(double));
    bool *stopped = calloc(nr ? nr : 1, sizeof(bool));
    bool *ended = calloc(s->npending ? s->npending : 1, sizeof(bool)); /* suspensions */
    if (!used || !cpu || !mem || !touched_gpu || !touched_node || !before || !after || !dbefore ||
        !dafter || !stopped || !ended) {
        rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < res->ndecisions; i++) {
        const struct ts_sched_decision *d = &res->decisions[i];
        if (d->action == TS_SCHED_BIND)
            continue;
        bool served = false;
        for (size_t k = i + 1; k < res->ndecisions && !served; k++)
            served = res->decisions[k].action == TS_SCHED_BIND &&
                     res->decisions[k].job_id == d->for_job_id;
        if (!served) {
            rc = ts_error_set(err, TS_ERR_INTERNAL,
                              "job %lld was stopped for job %lld, which was not placed after it",
                              (long long)d->job_id, (long long)d->for_job_id);
            goto out;
        }
        if (d->action == TS_SCHED_SUSPEND && d->job_was_running &&
            s->running[d->job].request.refuses_swap) {
            rc = ts_error_set(err, TS_ERR_INTERNAL, "job %lld refuses swap but was suspended",
                              (long long)d->job_id);
            goto out;
        }
        if (!d->job_was_running) {
            /* the suspension of a pending job ends */
            const struct ts_sched_pending *p = &s->pending[d->job];
            if (d->action != TS_SCHED_EVICT || p->suspended_node != d->node ||
                p->suspended_node < 0 || !p->preemptible || ended[d->job]) {
                rc = ts_error_set(err, TS_ERR_INTERNAL,
                                  "job %lld was stopped but was neither running nor suspended "
                                  "there",
                                  (long long)d->job_id);
                goto out;
            }
            ended[d->job] = true;
            continue;
        }
        const struct ts_sched_running *j = &s->running[d->job];
        if (!j->preemptible) {
            rc = ts_error_set(err, TS_ERR_INTERNAL, "non-preemptible job \"%s\" was stopped",
                              j->name);
            goto out;
        }
        int64_t m = s->projects[j->project].min_runtime_s;
        if (m < 0)
            m = s->config.min_runtime_s;
        if (m > 0 && s->now - j->started_at < m) {
            rc = ts_error_set(err, TS_ERR_INTERNAL,
                              "job \"%s\" was stopped after %lld s, inside its %lld s protection",
                              j->name, (long long)(s->now - j->started_at), (long long)m);
            goto out;
        }
        if (stopped[d->job]) {
            rc = ts_error_set(err, TS_ERR_INTERNAL, "job \"%s\" was stopped twice", j->name);
            goto out;
        }
        stopped[d->job] = true;
    }
    /* state after: running jobs not stopped, plus binds */
    for (size_t i = 0; i < nr; i++) {
        const struct ts_sched_running *j = &s->running[i];
        double g = slot_gpus(s, j->slots, j->nslots);
        before[j->project] += g;
        if (s->projects[j->project].department >= 0)
            dbefore[s->projects[j->project].department] += g;
        if (stopped[i])
            continue;
        after[j->project] += g;
        if (s->projects[j->project].department >= 0)
            dafter[s->projects[j->project].department] += g;
        for (size_t k = 0; k < j->nslots; k++)
            used[j->slots[k].gpu] += j->slots[k].memory_bytes;
        cpu[j->node] += j->request.cpu;
        mem[j->node] += j->request.host_memory_bytes;
    }
    for (size_t i = 0; i < s->npending; i++)
        if (s->pending[i].suspended_node >= 0 && !ended[i])
            mem[s->pending[i].suspended_node] += s->pending[i].request.host_memory_bytes;
    for (size_t i = 0; i < res->ndecisions; i++) {
        const struct ts_sched_decision *d = &res->decisions[i];
        if (d->action == TS_SCHED_BIND)
            continue;
        if (d->action == TS_SCHED_SUSPEND && d->job_was_running)
            mem[d->node] += s->running[d->job].request.host_memory_bytes;
    }
    for (size_t i = 0; i < res->ndecisions; i++) {
        const struct ts_sched_decision *d = &res->decisions[i];
        if (d->action != TS_SCHED_BIND)
            continue;
        const struct ts_sched_request *r = req_of(s, d);
        int p = project_of(s, d);
        const struct ts_sched_node *n = &s->nodes[d->node];
        if (!n->ready) {
            rc = ts_error_set(err, TS_ERR_INTERNAL, "job %lld was placed on %s, which is not ready",
                              (long long)d->job_id, n->name);
            goto out;
        }
        for (size_t k = 0; k < r->nnode_selector; k++)
            if (!has_label(n, &r->node_selector[k])) {
                rc = ts_error_set(err, TS_ERR_INTERNAL, "job %lld was placed on %s without %s=%s",
                                  (long long)d->job_id, n->name, r->node_selector[k].key,
                                  r->node_selector[k].value);
                goto out;
            }
        if (r->refuses_swap && request_bursts(r) && n->swap_resolver) {
            rc = ts_error_set(err, TS_ERR_INTERNAL,
                              "job %lld refuses swap, can burst, and was placed on %s, whose "
                              "resolver swaps",
                              (long long)d->job_id, n->name);
            goto out;
        }
        size_t npin;
        const struct ts_sched_slot *pin = pinned_slots(s, res, i, ended, &npin);
        for (size_t k = 0; pin != NULL && k < d->nslots; k++)
            if (!slots_have(pin, npin, d->slots[k].gpu)) {
                rc = ts_error_set(err, TS_ERR_INTERNAL,
                                  "job %lld resumed on GPU %d of %s, which it did not hold",
                                  (long long)d->job_id, s->gpus[d->slots[k].gpu].index, n->name);
                goto out;
            }
        int want = r->kind == TS_SCHED_GPU_NONE    ? 0
                   : r->kind == TS_SCHED_GPU_COUNT ? r->count
                                                   : (r->devices > 0 ? r->devices : 1);
        if ((int)d->nslots != want) {
            rc = ts_error_set(err, TS_ERR_INTERNAL, "job %lld got %zu GPUs and asked for %d",
                              (long long)d->job_id, d->nslots, want);
            goto out;
        }
        for (size_t k = 0; k < d->nslots; k++) {
            const struct ts_sched_gpu *g = &s->gpus[d->slots[k].gpu];
            if (g->node != d->node) {
                rc = ts_error_set(err, TS_ERR_INTERNAL, "job %lld got a GPU of another node",
                                  (long long)d->job_id);
                goto out;
            }
            bool model_ok = r->ngpu_models == 0;
            for (size_t q = 0; q < r->ngpu_models && !model_ok; q++)
                model_ok = strcmp(r->gpu_models[q], g->model) == 0;
            if (!model_ok) {
                rc = ts_error_set(err, TS_ERR_INTERNAL, "job %lld got a %s GPU it does not accept",
                                  (long long)d->job_id, g->model);
                goto out;
            }
            if (r->kind == TS_SCHED_GPU_COUNT && used[d->slots[k].gpu] != 0) {
                rc = ts_error_set(err, TS_ERR_INTERNAL,
                                  "job %lld got GPU %d of %s whole, but it is in use",
                                  (long long)d->job_id, g->index, n->name);
                goto out;
            }
            used[d->slots[k].gpu] += d->slots[k].memory_bytes;
            touched_gpu[d->slots[k].gpu] = true;
        }
        bool resumed = d->job_was_running
                           ? stopped_suspended(res, i, d->job_id)
                           : s->pending[d->job].suspended_node >= 0 && !ended[d->job];
        cpu[d->node] += r->cpu;
        if (!resumed)
            mem[d->node] += r->host_memory_bytes;
        touched_node[d->node] = true;
        double g = slot_gpus(s, d->slots, d->nslots);
        after[p] += g;
        if (s->projects[p].department >= 0)
            dafter[s->projects[p].department] += g;
    }
    for (size_t g = 0; g < ng; g++) {
        int64_t usable = s->gpus[g].memory_bytes - s->gpus[g].reserve_bytes;
        if (touched_gpu[g] && used[g] > usable) {
            rc =
                ts_error_set(err, TS_ERR_INTERNAL,
                             "GPU %d of %s is over-committed: %lld of %lld bytes", s->gpus[g].index,
                             s->nodes[s->gpus[g].node].name, (long long)used[g], (long long)usable);
            goto out;
        }
    }
    for (size_t n = 0; n < nn; n++) {
        if (!touched_node[n])
            continue;
        if (cpu[n] > s->nodes[n].cpu + TOL || mem[n] > s->nodes[n].memory_bytes) {
            rc = ts_error_set(err, TS_ERR_INTERNAL,
                              "node %s is over-committed: %g of %g cpu, %lld of %lld bytes",
                              s->nodes[n].name, cpu[n], s->nodes[n].cpu, (long long)mem[n],
                              (long long)s->nodes[n].memory_bytes);
            goto out;
        }
    }
    for (size_t p = 0; p < np; p++) {
        const struct ts_sched_project *pr = &s->projects[p];
        if (pr->has_limit && after[p] > fmax(before[p], pr->limit_gpus) + TOL) {
            rc = ts_error_set(err, TS_ERR_INTERNAL, "project \"%s\" is over its limit: %g of %g",
                              pr->name, after[p], pr->limit_gpus);
            goto out;
        }
    }
    for (size_t d = 0; d < s->ndepartments; d++) {
        const struct ts_sched_department *dp = &s->departments[d];
        if (dp->has_limit && dafter[d] > fmax(dbefore[d], dp->limit_gpus) + TOL) {
            rc = ts_error_set(err, TS_ERR_INTERNAL, "department \"%s\" is over its limit: %g of %g",
                              dp->name, dafter[d], dp->limit_gpus);
            goto out;
        }
    }
    /* pending: every job not placed has a reason and a distinct position */
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
    if (res->npending != expect) {
        rc = ts_error_set(err, TS_ERR_INTERNAL, "%zu jobs are pending but %zu reasons were given",
                          expect, res->npending);
        goto out;
    }
    for (size_t i = 0; i < res->npending; i++) {
        const struct ts_sched_pending_reason *pr = &res->pending[i];
        if (pr->code == NULL || pr->code[0] == '\0' || pr->message == NULL ||
            pr->message[0] == '\0') {
            rc = ts_error_set(err, TS_ERR_INTERNAL, "pending job %lld has no reason",
                              (long long)pr->job_id);
            goto out;
        }
        if (pr->queue_position < 1 ||
            (i > 0 && pr->queue_position <= res->pending[i - 1].queue_position)) {
            rc = ts_error_set(err, TS_ERR_INTERNAL, "pending job %lld has queue position %lld",
                              (long long)pr->job_id, (long long)pr->queue_position);
            goto out;
        }
    }
out:
    free(used);
    free(cpu);
    free(mem);
    free(touched_gpu);
    free(touched_node);
    free(before);
    free(after);
    free(dbefore);
    free(dafter);
    free(stopped);
    free(ended);
    return rc;
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
        const struct ts_sched_running *j = &s->running[i];
        struct ts_sched_pending *p = &pen[npen++];
        memset(p, 0, sizeof(*p));
        p->id = j->id;
        p->name = j->name;
        p->project = j->project;
        p->priority = j->priority;
        p->preemptible = j->preemptible;
        p->request = j->request;
        p->submitted_at = j->started_at;
        p->suspended_node = rstate[i] == 2 ? rnode[i] : -1;
        if (rstate[i] == 2 && j->nslots > 0) {
            p->suspended_slots = j->slots;
            p->nsuspended_slots = j->nslots;
        }
    }
    for (size_t i = 0; i < nd; i++) {
        const struct ts_sched_decision *d = &res->decisions[i];
        if (d->action != TS_SCHED_BIND)
            continue;
        struct ts_sched_running *r = &run[nrun++];
        memset(r, 0, sizeof(*r));
        if (d->job_was_running) {
            const struct ts_sched_running *j = &s->running[d->job];
            *r = *j;
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
    out->running = run;
    out->nrunning = nrun;
    out->pending = pen;
    out->npending = npen;
    out->nodes = nodes;
    return TS_OK;
}
