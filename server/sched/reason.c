/*
 * reason.c - why a job is still pending: a stable code and a sentence with
 * the numbers, found on the state the cycle ends with.
 *
 * Codes: invalid_request, over_limit, quota_exhausted, node_unavailable (no
 * ready node matches the labels, models or suspension node), too_large (no
 * matching node could hold it even empty), waiting_for_reclaim (its project
 * is within its quota, or below its fair share, but nothing can be reclaimed
 * now; the sentence says which tier of reclaim.c applies), fragmented
 * (enough GPU is free on matching nodes, but not in one place), no_fit (not
 * enough is free). The node scan behind the last four is cached per request
 * shape, so 10,000 pending jobs of a few shapes cost a few scans; and so is
 * the sentence, per request signature, project and stage (everything it
 * says), so 60,000 pending jobs of ten projects format a few dozen.
 *
 * The server's store writes three more codes of its own: not_yet_scheduled
 * (before a cycle has looked at a job), suspended (suspended on request,
 * until POST /resume) and waiting_for_memory (a resuming job whose node
 * waits for room to bring its GPU memory back; the agent's sentence).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/sched/memo.h"
#include "server/sched/reason.h"

struct diag {
    int not_ready, selector, model, small, matching;
    int swaps;    /* ready nodes whose resolver swaps, for a job that refuses it */
    int max_gpus; /* most GPUs of an accepted model, over nodes */
    int64_t max_usable;
    double max_cpu;
    int64_t max_mem;
    int gpu_fit_nodes; /* matching nodes whose GPUs can take it now */
    int best_count, best_count_node;
    int64_t best_free;
    double best_frac;
    int best_free_node;
    double best_cpu;
    int best_cpu_node;
    int64_t best_mem;
    int best_mem_node;
    double free_total;
};

struct diag_entry {
    uint64_t key;
    struct diag d;
};

/* A reason made once, for every job of the same key (reason_key). */
struct msg_entry {
    uint64_t key;
    const char *code, *msg;
};

struct diag_cache {
    struct diag_entry *e;
    size_t cap;
    struct msg_entry *m;
    size_t mcap, mn;
};

struct diag_cache *ts_sched_diag_cache_new(size_t n)
{
    struct diag_cache *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->cap = 64;
    while (c->cap < n * 2)
        c->cap *= 2;
    c->e = calloc(c->cap, sizeof(*c->e));
    c->mcap = 256;
    c->m = calloc(c->mcap, sizeof(*c->m));
    if (c->e == NULL || c->m == NULL) {
        free(c->e);
        free(c->m);
        free(c);
        return NULL;
    }
    return c;
}

void ts_sched_diag_cache_free(struct diag_cache *c)
{
    if (c == NULL)
        return;
    free(c->e);
    free(c->m);
    free(c);
}

static void scan(struct cycle *cy, const struct preq *p, struct diag *d)
{
    const struct ts_sched_cluster *c = cy->c;
    const struct ts_sched_snapshot *snap = cy->snap;
    memset(d, 0, sizeof(*d));
    d->best_count_node = d->best_free_node = d->best_cpu_node = d->best_mem_node = -1;
    d->best_cpu = -1;
    d->best_mem = -1;
    d->best_count = -1;
    d->best_free = -1;
    for (size_t i = 0; i < snap->nnodes; i++) {
        if (p->only_node >= 0 && (int)i != p->only_node)
            continue;
        const struct node_state *n = &c->nodes[i];
        if (!n->ready) {
            d->not_ready++;
            continue;
        }
        if (p->no_swap_node && snap->nodes[i].swap_resolver) {
            d->swaps++;
            continue;
        }
        if (!ts_sched_cluster_node_static_ok(c, p, (int)i)) {
            d->selector++;
            continue;
        }
        int nm = 0, nbig = 0, nnow = 0;
        int64_t best_free = -1;
        double best_frac = 0, free_sum = 0;
        for (int k = 0; k < n->ngpus; k++) {
            const struct gpu_state *g = &c->gpus[c->node_gpus[n->first + k]];
            if (p->model_ok && !p->model_ok[g->model])
                continue;
            nm++;
            if (g->usable > d->max_usable)
                d->max_usable = g->usable;
            if (preq_need(p, g->usable) <= g->usable)
                nbig++;
            if (preq_gpu_fits(p, g->usable, g->used))
                nnow++;
            int64_t fr = g->usable - g->used;
            if (fr > best_free) {
                best_free = fr;
                best_frac = (double)fr / (double)g->usable;
            }
            free_sum += (double)fr / (double)g->usable;
        }
        if (p->ndev > 0 && nm == 0) {
            d->model++;
            continue;
        }
        const struct ts_sched_node *sn = &snap->nodes[i];
        if (nm > d->max_gpus)
            d->max_gpus = nm;
        if (sn->cpu > d->max_cpu)
            d->max_cpu = sn->cpu;
        if (sn->memory_bytes > d->max_mem)
            d->max_mem = sn->memory_bytes;
        if (nbig < p->ndev || sn->cpu + 1e-9 < p->cpu ||
            (!p->host_mem_held && sn->memory_bytes < p->host_mem)) {
            d->small++;
            continue;
        }
        d->matching++;
        d->free_total += free_sum;
        if (nnow >= p->ndev)
            d->gpu_fit_nodes++;
        if (nnow > d->best_count) {
            d->best_count = nnow;
            d->best_count_node = (int)i;
        }
        if (best_free > d->best_free) {
            d->best_free = best_free;
            d->best_frac = best_frac;
            d->best_free_node = (int)i;
        }
        if (n->cpu_free > d->best_cpu) {
            d->best_cpu = n->cpu_free;
            d->best_cpu_node = (int)i;
        }
        if (n->mem_free > d->best_mem) {
            d->best_mem = n->mem_free;
            d->best_mem_node = (int)i;
        }
    }
}

static const struct diag *diag_of(struct cycle *cy, const struct preq *p)
{
    struct diag_cache *c = cy->diag;
    uint64_t key = ts_sched_preq_signature(p, 0x44494147ULL);
    if (key == 0)
        key = 1;
    size_t i = key & (c->cap - 1);
    while (c->e[i].key != 0 && c->e[i].key != key)
        i = (i + 1) & (c->cap - 1);
    if (c->e[i].key == 0) {
        c->e[i].key = key;
        scan(cy, p, &c->e[i].d);
    }
    return &c->e[i].d;
}

static const char *node_name(const struct cycle *cy, int n)
{
    return n >= 0 ? cy->snap->nodes[n].name : "none";
}

static void unavailable(struct cycle *cy, const struct job *J, const struct diag *d,
                        const char **msg)
{
    const struct ts_sched_request *r = J->p.r;
    char parts[640] = "";
    size_t used = 0;
    int total = (int)cy->snap->nnodes;
    if (J->p.only_node >= 0) {
        *msg = ts_sched_cycle_printf(cy, "suspended on %s, which is not ready or lacks its labels",
                                     node_name(cy, J->p.only_node));
        return;
    }
    if (d->not_ready > 0)
        used +=
            (size_t)snprintf(parts + used, sizeof(parts) - used, "%s%d of %d nodes are not ready",
                             used ? ", " : "", d->not_ready, total);
    if (d->selector > 0 && r->nnode_selector > 0 && used < sizeof(parts))
        used +=
            (size_t)snprintf(parts + used, sizeof(parts) - used, "%s%d lack label %s=%s%s",
                             used ? ", " : "", d->selector, r->node_selector[0].key,
                             r->node_selector[0].value, r->nnode_selector > 1 ? " or another" : "");
    if (d->swaps > 0 && used < sizeof(parts))
        used += (size_t)snprintf(parts + used, sizeof(parts) - used,
                                 "%s%d swap burst memory to host RAM and the job refuses swap "
                                 "(its limit is above its request)",
                                 used ? ", " : "", d->swaps);
    if (d->model > 0 && r->ngpu_models > 0 && used < sizeof(parts))
        used += (size_t)snprintf(parts + used, sizeof(parts) - used, "%s%d have no %s GPU",
                                 used ? ", " : "", d->model, r->gpu_models[0]);
    if (total == 0)
        snprintf(parts, sizeof(parts), "the cluster has no nodes");
    *msg = ts_sched_cycle_printf(cy, "no ready node matches: %s", parts);
}

static void too_large(struct cycle *cy, const struct job *J, const struct diag *d, const char **msg)
{
    const struct preq *p = &J->p;
    char a[32], b[32];
    if (p->ndev > d->max_gpus)
        *msg = ts_sched_cycle_printf(cy, "no node has %d GPUs%s; the largest matching node has %d",
                                     p->ndev, p->model_ok ? " of the accepted models" : "",
                                     d->max_gpus);
    else if (p->kind == TS_SCHED_GPU_MEMORY && p->mem > d->max_usable)
        *msg =
            ts_sched_cycle_printf(cy, "no GPU can hold %s; the largest matching GPU has %s usable",
                                  ts_bytesize_human(p->mem, a, sizeof(a)),
                                  ts_bytesize_human(d->max_usable, b, sizeof(b)));
    else if (p->cpu > d->max_cpu + 1e-9)
        *msg = ts_sched_cycle_printf(cy, "no matching node has %s cpu cores; the largest has %s",
                                     ts_gpus_format(p->cpu, a, sizeof(a)),
                                     ts_gpus_format(d->max_cpu, b, sizeof(b)));
    else if (p->host_mem > d->max_mem)
        *msg = ts_sched_cycle_printf(cy, "no matching node has %s of memory; the largest has %s",
                                     ts_bytesize_human(p->host_mem, a, sizeof(a)),
                                     ts_bytesize_human(d->max_mem, b, sizeof(b)));
    else
        *msg = ts_sched_cycle_printf(cy,
                                     "no matching node has the GPUs, %s cpu cores and %s of memory "
                                     "the job asks for together",
                                     ts_gpus_format(p->cpu, a, sizeof(a)),
                                     ts_bytesize_human(p->host_mem, b, sizeof(b)));
}

/* A suspended job resumes only on the GPUs it held: name them. */
static void suspended_gpus(struct cycle *cy, const struct job *J, const char **code,
                           const char **msg)
{
    char gpus[256] = "";
    size_t used = 0;
    for (size_t k = 0; k < J->p.nonly_slots && used < sizeof(gpus); k++)
        used += (size_t)snprintf(gpus + used, sizeof(gpus) - used, "%s%d", k ? "," : "",
                                 cy->snap->gpus[J->p.only_slots[k].gpu].index);
    *code = "no_fit";
    *msg =
        ts_sched_cycle_printf(cy,
                              "suspended on %s: it resumes only on the GPU%s it held (%s), which "
                              "lack%s the room now",
                              cy->snap->nodes[J->p.only_node].name, J->p.nonly_slots > 1 ? "s" : "",
                              gpus, J->p.nonly_slots > 1 ? "" : "s");
}

static void no_room(struct cycle *cy, const struct job *J, const struct diag *d, const char **code,
                    const char **msg)
{
    const struct preq *p = &J->p;
    char a[32], b[32], t[32];
    if (d->gpu_fit_nodes > 0 || p->ndev == 0) {
        *code = "no_fit";
        if (d->best_cpu + 1e-9 < p->cpu)
            *msg = ts_sched_cycle_printf(
                cy, "no matching node has %s cpu cores free; the most is %s on %s",
                ts_gpus_format(p->cpu, a, sizeof(a)), ts_gpus_format(d->best_cpu, b, sizeof(b)),
                node_name(cy, d->best_cpu_node));
        else if (!p->host_mem_held && d->best_mem < p->host_mem)
            *msg = ts_sched_cycle_printf(
                cy, "no matching node has %s of memory free; the most is %s on %s",
                ts_bytesize_human(p->host_mem, a, sizeof(a)),
                ts_bytesize_human(d->best_mem < 0 ? 0 : d->best_mem, b, sizeof(b)),
                node_name(cy, d->best_mem_node));
        else
            *msg = ts_sched_cycle_printf(cy,
                                         "no matching node has the GPUs, cpu cores and memory free "
                                         "together");
        return;
    }
    bool frag = d->free_total + 1e-9 >= p->gpus_estimate;
    *code = frag ? "fragmented" : "no_fit";
    char head[96] = "";
    if (frag)
        snprintf(head, sizeof(head), "%s GPUs are free on matching nodes, but ",
                 ts_gpus_format(d->free_total, t, sizeof(t)));
    int bc = d->best_count < 0 ? 0 : d->best_count;
    if (p->kind == TS_SCHED_GPU_COUNT)
        *msg = ts_sched_cycle_printf(cy, "%sno node has %d free GPU%s; the most is %d on %s", head,
                                     p->ndev, p->ndev == 1 ? "" : "s", bc,
                                     node_name(cy, d->best_count_node));
    else if (p->ndev > 1 && p->kind == TS_SCHED_GPU_MEMORY)
        *msg = ts_sched_cycle_printf(
            cy, "%sno node has %d GPUs with %s free each; the most is %d on %s", head, p->ndev,
            ts_bytesize_human(p->mem, a, sizeof(a)), bc, node_name(cy, d->best_count_node));
    else if (p->ndev > 1)
        *msg = ts_sched_cycle_printf(
            cy,
            "%sno node has %d GPUs with %s of a GPU free each; the most is %d "
            "on %s",
            head, p->ndev, ts_gpus_format(p->portion, a, sizeof(a)), bc,
            node_name(cy, d->best_count_node));
    else if (p->kind == TS_SCHED_GPU_MEMORY)
        *msg = ts_sched_cycle_printf(
            cy, "%sno node has a GPU with %s free; the largest is %s on %s", head,
            ts_bytesize_human(p->mem, a, sizeof(a)),
            ts_bytesize_human(d->best_free < 0 ? 0 : d->best_free, b, sizeof(b)),
            node_name(cy, d->best_free_node));
    else
        *msg = ts_sched_cycle_printf(
            cy, "%sno node has a GPU with %s of it free; the most is %s on %s", head,
            ts_gpus_format(p->portion, a, sizeof(a)), ts_gpus_format(d->best_frac, b, sizeof(b)),
            node_name(cy, d->best_free_node));
}

static const char *gpus_word(const char *shown)
{
    double g = strtod(shown, NULL);
    return g > 0 && g <= 1 ? "GPU" : "GPUs";
}

/* Which tier of reclaim applies, with the numbers (reclaim.c). */
static const char *waiting_for_reclaim(struct cycle *cy, const struct job *J)
{
    const struct ts_sched_project *sp = &cy->snap->projects[J->project];
    const struct proj *P = &cy->projs[J->project];
    int d = sp->department;
    double g = J->p.gpus_at_most;
    char a[32], q[32], w[32], f[32], dq[32], dw[32], x[32];
    ts_gpus_format(P->alloc, a, sizeof(a));
    ts_gpus_format(sp->quota_gpus, q, sizeof(q));
    ts_gpus_format(P->alloc + g, w, sizeof(w));
    bool dep_within = d < 0 || cy->deps[d].alloc + g <= cy->deps[d].deserved + EPS;
    const char *dname = d >= 0 ? cy->snap->departments[d].name : "";
    if (d >= 0) {
        ts_gpus_format(cy->snap->departments[d].quota_gpus, dq, sizeof(dq));
        ts_gpus_format(cy->deps[d].alloc + g, dw, sizeof(dw));
    }
    if (J->reclaim_tier1) {
        ts_gpus_format(g, x, sizeof(x));
        if (dep_within)
            return ts_sched_cycle_printf(
                cy,
                "project \"%s\" is within its quota (%s of %s GPUs, %s with this "
                "job): it may reclaim from projects above their quotas, but none "
                "has a preemptible job that can give %s %s and leave it at or "
                "above its quota%s",
                sp->name, a, q, w, x, gpus_word(x),
                cy->snap->ndepartments > 0 ? " (and its department, if another, "
                                             "at or above the department's)"
                                           : "");
        return ts_sched_cycle_printf(
            cy,
            "project \"%s\" is within its quota (%s of %s GPUs, %s with this "
            "job) but department \"%s\" is not (%s of %s GPUs with this job): "
            "it may reclaim from projects of \"%s\" above their quotas, but "
            "none has a preemptible job that can give %s %s and leave it at or "
            "above its quota",
            sp->name, a, q, w, dname, dw, dq, dname, x, gpus_word(x));
    }
    const char *quota;
    if (P->alloc + g > P->deserved + EPS)
        quota =
            ts_sched_cycle_printf(cy, "would pass its quota with this job (%s of %s GPUs)", w, q);
    else if (!dep_within)
        quota =
            ts_sched_cycle_printf(cy,
                                  "department \"%s\" would pass its quota with this job (%s of %s "
                                  "GPUs)",
                                  dname, dw, dq);
    else
        quota = ts_sched_cycle_printf(cy,
                                      "is within its quota with this job (%s of %s GPUs), but no "
                                      "project is above its quota",
                                      w, q);
    double ex = P->alloc + J->p.gpus_estimate - P->fair;
    ts_gpus_format(fabs(ex), x, sizeof(x));
    const char *excess = fabs(ex) < 0.005 ? ts_sched_cycle_printf(cy, "at it")
                                          : ts_sched_cycle_printf(cy, "%s %s %s", x, gpus_word(x),
                                                                  ex > 0 ? "above" : "below");
    return ts_sched_cycle_printf(
        cy,
        "project \"%s\" is below its fair share (%s of %s GPUs) and %s: it "
        "may reclaim from projects above their fair shares, but none has a "
        "preemptible job that can make room and leave it at least as far above "
        "its share as \"%s\" would be with this job (%s)",
        sp->name, a, ts_gpus_format(P->fair, f, sizeof(f)), quota, sp->name, excess);
}

static void reason_of(struct cycle *cy, int j, const char **code, const char **msg)
{
    const struct job *J = &cy->jobs[j];
    const struct ts_sched_project *sp = &cy->snap->projects[J->project];
    const struct proj *P = &cy->projs[J->project];
    char a[32], b[32], c[32];
    switch (J->stage) {
    case STAGE_INVALID:
        *code = "invalid_request";
        *msg =
            ts_sched_cycle_printf(cy,
                                  "the request cannot be placed as written: gpu kind %d, count %d, "
                                  "portion %g, memory %lld bytes, devices %d",
                                  (int)J->p.r->kind, J->p.r->count, J->p.r->portion,
                                  (long long)J->p.r->memory_bytes, J->p.r->devices);
        return;
    case STAGE_OVER_LIMIT:
        *code = "over_limit";
        if (P->alloc + 1e-9 >= sp->limit_gpus)
            *msg = ts_sched_cycle_printf(cy, "project \"%s\" is at its limit: %s of %s GPUs in use",
                                         sp->name, ts_gpus_format(P->alloc, a, sizeof(a)),
                                         ts_gpus_format(sp->limit_gpus, b, sizeof(b)));
        else
            *msg = ts_sched_cycle_printf(
                cy,
                "project \"%s\" would pass its limit: %s of %s GPUs in use and "
                "the job asks for %s",
                sp->name, ts_gpus_format(P->alloc, a, sizeof(a)),
                ts_gpus_format(sp->limit_gpus, b, sizeof(b)),
                ts_gpus_format(J->p.gpus_estimate, c, sizeof(c)));
        return;
    case STAGE_DEPT_LIMIT: {
        const struct ts_sched_department *d = &cy->snap->departments[sp->department];
        double used = cy->deps[sp->department].alloc;
        *code = "over_limit";
        *msg = ts_sched_cycle_printf(
            cy,
            "department \"%s\" %s its limit: %s of %s GPUs in use and the job "
            "asks for %s",
            d->name, used + 1e-9 >= d->limit_gpus ? "is at" : "would pass",
            ts_gpus_format(used, a, sizeof(a)), ts_gpus_format(d->limit_gpus, b, sizeof(b)),
            ts_gpus_format(J->p.gpus_estimate, c, sizeof(c)));
        return;
    }
    case STAGE_DESERVED:
        *code = "quota_exhausted";
        *msg =
            ts_sched_cycle_printf(cy,
                                  "non-preemptible jobs may only use the deserved share: project "
                                  "\"%s\" deserves %s, has %s in use",
                                  sp->name, ts_gpus_format(P->deserved, a, sizeof(a)),
                                  ts_gpus_format(P->alloc_np, b, sizeof(b)));
        return;
    default:
        break;
    }
    const struct diag *d = diag_of(cy, &J->p);
    if (d->matching == 0 && d->small == 0) {
        *code = "node_unavailable";
        unavailable(cy, J, d, msg);
        return;
    }
    if (d->matching == 0) {
        *code = "too_large";
        too_large(cy, J, d, msg);
        return;
    }
    if (J->reclaim_tried) {
        *code = "waiting_for_reclaim";
        *msg = waiting_for_reclaim(cy, J);
        return;
    }
    if (J->p.only_slots != NULL) {
        suspended_gpus(cy, J, code, msg);
        return;
    }
    no_room(cy, J, d, code, msg);
}

/* Everything a reason depends on besides the final state, which does not
 * change while the reasons are written: the request (its signature: shape,
 * constraints, pin, held host memory), the project (and so its department),
 * the stage and the reclaim tried. 0: not cached (an invalid request names
 * its own fields). */
static uint64_t reason_key(const struct job *J)
{
    if (J->stage == STAGE_INVALID || !J->valid)
        return 0;
    uint64_t k = ts_sched_preq_signature(&J->p, 0x5245415355ULL);
    k = ts_sched_memo_fold(k, (uint64_t)(int64_t)J->project);
    k = ts_sched_memo_fold(k, (uint64_t)J->stage);
    return ts_sched_memo_fold(k, (uint64_t)(J->reclaim_tried * 2 + J->reclaim_tier1));
}

static struct msg_entry *msg_slot(struct diag_cache *c, uint64_t key)
{
    if (2 * (c->mn + 1) > c->mcap) {
        size_t ncap = c->mcap * 2;
        struct msg_entry *nm = calloc(ncap, sizeof(*nm));
        if (nm == NULL)
            return NULL;
        for (size_t i = 0; i < c->mcap; i++) {
            if (c->m[i].key == 0)
                continue;
            size_t k = c->m[i].key & (ncap - 1);
            while (nm[k].key != 0)
                k = (k + 1) & (ncap - 1);
            nm[k] = c->m[i];
        }
        free(c->m);
        c->m = nm;
        c->mcap = ncap;
    }
    size_t i = key & (c->mcap - 1);
    while (c->m[i].key != 0 && c->m[i].key != key)
        i = (i + 1) & (c->mcap - 1);
    return &c->m[i];
}

void ts_sched_reason_of(struct cycle *cy, int j, const char **code, const char **msg)
{
    uint64_t key = reason_key(&cy->jobs[j]);
    struct msg_entry *e = key ? msg_slot(cy->diag, key) : NULL;
    if (e != NULL && e->key == key) {
        *code = e->code;
        *msg = e->msg;
        return;
    }
    reason_of(cy, j, code, msg);
    if (e != NULL) {
        *e = (struct msg_entry){key, *code, *msg};
        cy->diag->mn++;
    }
}
