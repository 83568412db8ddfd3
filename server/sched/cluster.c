/*
 * cluster.c - free resources of nodes and GPUs, and the placement API that
 * tessera-sim's placement replay uses without projects or a cycle.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/sched/sched_int.h"

int ts_sched_cluster_model_id(const struct ts_sched_cluster *c, const char *model)
{
    for (int i = 0; i < c->nmodels; i++)
        if (strcmp(c->models[i], model) == 0)
            return i;
    return -1;
}

static size_t whole_slot(int nwhole)
{
    return nwhole < TS_SCHED_WHOLE_MAX ? (size_t)nwhole : TS_SCHED_WHOLE_MAX;
}

int ts_sched_cluster_max_whole(const struct ts_sched_cluster *c)
{
    if (c->whole_nodes[TS_SCHED_WHOLE_MAX] > 0)
        return INT_MAX;
    int w = TS_SCHED_WHOLE_MAX - 1;
    while (w > 0 && c->whole_nodes[w] == 0)
        w--;
    return w;
}

void ts_sched_cluster_node_refresh(struct ts_sched_cluster *c, int node)
{
    struct node_state *n = &c->nodes[node];
    c->whole_nodes[whole_slot(n->nwhole)]--;
    n->nwhole = 0;
    n->max_free = 0;
    n->max_free_frac = 0;
    n->free_gpus = 0;
    for (int k = 0; k < n->ngpus; k++) {
        const struct gpu_state *g = &c->gpus[c->node_gpus[n->first + k]];
        int64_t fr = g->usable - g->used;
        double frac = (double)fr / (double)g->usable;
        if (g->used == 0)
            n->nwhole++;
        if (fr > n->max_free)
            n->max_free = fr;
        if (frac > n->max_free_frac)
            n->max_free_frac = frac;
        n->free_gpus += frac;
    }
    c->whole_nodes[whole_slot(n->nwhole)]++;
    c->whole[node] = n->nwhole;
    n->frag_valid = false;
    n->pfrag_valid = false;
    n->version++;
    if (c->watch != NULL)
        c->watch->changed(c, node);
}

double ts_sched_cluster_slots_gpus(const struct ts_sched_cluster *c,
                                   const struct ts_sched_slot *slots, size_t nslots)
{
    double g = 0;
    for (size_t i = 0; i < nslots; i++)
        g += (double)slots[i].memory_bytes / (double)c->gpus[slots[i].gpu].usable;
    return g;
}

static void account(struct ts_sched_cluster *c, int node, const struct ts_sched_slot *slots,
                    size_t nslots, double cpu, int64_t host_mem, int sign)
{
    struct node_state *n = &c->nodes[node];
    for (size_t i = 0; i < nslots; i++)
        c->gpus[slots[i].gpu].used += sign * slots[i].memory_bytes;
    n->cpu_free -= sign * cpu;
    n->mem_free -= sign * host_mem;
    if (n->ready)
        c->allocated += sign * ts_sched_cluster_slots_gpus(c, slots, nslots);
    ts_sched_cluster_node_refresh(c, node);
}

void ts_sched_cluster_take(struct ts_sched_cluster *c, int node, const struct ts_sched_slot *slots,
                           size_t nslots, double cpu, int64_t host_mem)
{
    account(c, node, slots, nslots, cpu, host_mem, 1);
}

void ts_sched_cluster_give(struct ts_sched_cluster *c, int node, const struct ts_sched_slot *slots,
                           size_t nslots, double cpu, int64_t host_mem)
{
    account(c, node, slots, nslots, cpu, host_mem, -1);
}

static bool label_present(const struct ts_sched_node *n, const struct ts_sched_label *l)
{
    for (size_t i = 0; i < n->nlabels; i++)
        if (strcmp(n->labels[i].key, l->key) == 0)
            return strcmp(n->labels[i].value, l->value) == 0;
    return false;
}

/* Ready, labels, suspension pin, swap refusal: what no amount of freeing
 * changes. */
bool ts_sched_cluster_node_static_ok(const struct ts_sched_cluster *c, const struct preq *p,
                                     int node)
{
    if (!c->nodes[node].ready)
        return false;
    if (p->only_node >= 0 && p->only_node != node)
        return false;
    const struct ts_sched_node *sn = &c->snap->nodes[node];
    if (p->no_swap_node && sn->swap_resolver)
        return false;
    /* the request itself is read only where it has a selector: a victim
     * search checks nodes for a job whose request it reads nowhere else
     * (a cache miss a search, 1.5 % of a cycle at 12,500 nodes) */
    for (size_t i = 0; p->has_selector && i < p->r->nnode_selector; i++)
        if (!label_present(sn, &p->r->node_selector[i]))
            return false;
    return true;
}

/* Whether the request's limit is above what it packs (it can burst). */
static bool request_bursts(const struct ts_sched_request *r)
{
    switch (r->kind) {
    case TS_SCHED_GPU_PORTION:
        return r->portion_limit > r->portion;
    case TS_SCHED_GPU_MEMORY:
        return r->memory_limit_bytes > r->memory_bytes;
    default:
        return false;
    }
}

bool ts_sched_preq_prepare(const struct ts_sched_cluster *c, const struct ts_sched_request *r,
                           struct ts_arena *a, struct preq *p)
{
    memset(p, 0, sizeof(*p));
    p->r = r;
    p->kind = r->kind;
    p->only_node = -1;
    p->no_swap_node = r->refuses_swap && request_bursts(r);
    p->refuses_swap = r->refuses_swap;
    p->has_selector = r->nnode_selector > 0;
    p->cpu = r->cpu;
    p->host_mem = r->host_memory_bytes;
    if (!(r->cpu >= 0) || r->host_memory_bytes < 0)
        return false;
    int dev = r->devices <= 0 ? 1 : r->devices;
    switch (r->kind) {
    case TS_SCHED_GPU_NONE:
        p->ndev = 0;
        break;
    case TS_SCHED_GPU_COUNT:
        if (r->count < 1 || r->count > TS_SCHED_MAX_DEVICES)
            return false;
        p->ndev = r->count;
        p->gpus_estimate = r->count;
        break;
    case TS_SCHED_GPU_PORTION:
        if (!(r->portion > 0 && r->portion <= 1) || dev > TS_SCHED_MAX_DEVICES)
            return false;
        p->ndev = dev;
        p->portion = r->portion;
        p->gpus_estimate = r->portion * dev;
        break;
    case TS_SCHED_GPU_MEMORY:
        if (r->memory_bytes <= 0 || dev > TS_SCHED_MAX_DEVICES)
            return false;
        p->ndev = dev;
        p->mem = r->memory_bytes;
        /* before placement it counts as a share of the largest GPU */
        p->gpus_estimate = c->max_usable > 0
                               ? fmin(1.0, (double)r->memory_bytes / (double)c->max_usable) * dev
                               : dev;
        break;
    default:
        return false;
    }
    if (r->ngpu_models > 0 && p->ndev > 0) {
        bool *ok = ts_arena_alloc(a, (size_t)(c->nmodels > 0 ? c->nmodels : 1) * sizeof(bool));
        if (ok == NULL)
            return false;
        for (size_t i = 0; i < r->ngpu_models; i++) {
            int m = r->gpu_models[i] ? ts_sched_cluster_model_id(c, r->gpu_models[i]) : -1;
            if (m >= 0)
                ok[m] = true;
        }
        p->model_ok = ok;
    }
    return true;
}

static int cmp_shape(const void *x, const void *y)
{
    const struct fshape *a = x, *b = y;
    if (a->weight != b->weight)
        return a->weight > b->weight ? -1 : 1;
    if (a->count != b->count)
        return a->count < b->count ? -1 : 1;
    if (a->portion != b->portion)
        return a->portion < b->portion ? -1 : 1;
    if (a->cpu != b->cpu)
        return a->cpu < b->cpu ? -1 : 1;
    if (a->mem != b->mem)
        return a->mem < b->mem ? -1 : 1;
    return 0;
}

/* Keep the typical shapes: the most common ones that make up 95% of the
 * workload (as the paper does; at most MAX_SHAPES), weights normalised to
 * sum 1. Returns how many are kept. */
#define MAX_SHAPES 128
#define TYPICAL_SHARE 0.95
static int shapes_keep(struct fshape *s, int n)
{
    qsort(s, (size_t)n, sizeof(*s), cmp_shape);
    double total = 0;
    for (int i = 0; i < n; i++)
        total += s[i].weight;
    if (total <= 0)
        return 0;
    double acc = 0;
    int keep = 0;
    while (keep < n && keep < MAX_SHAPES && acc < TYPICAL_SHARE * total - EPS)
        acc += s[keep++].weight;
    for (int i = 0; i < keep; i++)
        s[i].weight /= acc;
    return keep;
}

/* Same models accepted (both any, or the same list of interned models). */
static bool same_models(const struct ts_sched_cluster *c, const bool *a, const bool *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return a == b || memcmp(a, b, (size_t)c->nmodels * sizeof(bool)) == 0;
}

/* Index of shape f in s[0..n), or n. */
static int shape_find(const struct ts_sched_cluster *c, const struct fshape *s, int n,
                      const struct fshape *f)
{
    int j;
    for (j = 0; j < n; j++)
        if (s[j].count == f->count && s[j].portion == f->portion && s[j].cpu == f->cpu &&
            s[j].mem == f->mem && same_models(c, s[j].model_ok, f->model_ok))
            break;
    return j;
}

/* fgd-paper's typical tasks, from the raw shapes s[0..n): the paper's task
 * is its GPUs, CPU and GPU models (host memory not in it), so shapes that
 * differ only in memory are one; then the 95% cut. Only when the cluster's
 * strategy is fgd-paper (tessera-sim), which nothing else reads. */
static void shapes_paper(struct ts_sched_cluster *c, const struct fshape *s, int n,
                         struct ts_arena *a)
{
    c->npshapes = 0;
    const char *st = c->snap->config.strategy;
    if (st == NULL || strcmp(st, "fgd-paper") != 0 || n == 0)
        return;
    struct fshape *p = ts_arena_alloc(a, (size_t)n * sizeof(*p));
    if (p == NULL)
        return;
    int np = 0;
    for (int i = 0; i < n; i++) {
        struct fshape f = s[i];
        f.mem = 0;
        int j = shape_find(c, p, np, &f);
        if (j == np) {
            f.weight = 0;
            p[np++] = f;
        }
        p[j].weight += s[i].weight;
    }
    c->pshapes = p;
    c->npshapes = shapes_keep(p, np);
}

/* A shape's weight on the nodes it can run on: its popularity over the
 * share of the cluster's GPUs whose model it accepts. The paper's workload
 * is the distribution of the next task to arrive; a task that runs only on
 * a fifth of the GPUs brings all of its popularity to that fifth, five
 * times as densely as a task that runs anywhere. Without constraints every
 * share is 1 and the weights are the popularities. Normalised to sum 1. */
static void shapes_density(struct ts_sched_cluster *c, struct fshape *s, int n, struct ts_arena *a)
{
    double *per_model =
        ts_arena_alloc(a, (size_t)(c->nmodels > 0 ? c->nmodels : 1) * sizeof(double));
    if (per_model == NULL)
        return;
    double all = 0;
    for (size_t g = 0; g < c->snap->ngpus; g++)
        if (c->nodes[c->gpus[g].node].ready) {
            per_model[c->gpus[g].model] += 1;
            all += 1;
        }
    double total = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].model_ok != NULL) {
            double gpus = 0;
            for (int m = 0; m < c->nmodels; m++)
                gpus += s[i].model_ok[m] ? per_model[m] : 0;
            if (gpus > 0)
                s[i].weight *= all / gpus;
        }
        total += s[i].weight;
    }
    for (int i = 0; total > 0 && i < n; i++)
        s[i].weight /= total;
}

/* What the workload as a whole asks beyond the cluster, per GPU: the CPU
 * cores and host memory bytes that all its typical shapes (CPU-only ones
 * included; weights are popularities, s[0..n) after the cut) ask per GPU
 * they ask, less what the ready nodes have per GPU; 0 where the cluster has
 * enough. CPU-only tasks take CPU and memory wherever they run: when the
 * cluster cannot hold them beside the GPU tasks, what they lack is taken
 * from what the GPUs' own tasks would have had. */
static void workload_short(const struct ts_sched_cluster *c, const struct fshape *s, int n,
                           double *cpu_short, double *mem_short, double *cpu_per_gpu,
                           double *mem_per_gpu)
{
    double gpus = 0, cpu = 0, mem = 0, have_cpu = 0, have_mem = 0, have_gpus = 0;
    for (int i = 0; i < n; i++) {
        gpus += s[i].weight * (s[i].count > 0 ? s[i].count : s[i].portion);
        cpu += s[i].weight * s[i].cpu;
        mem += s[i].weight * (double)s[i].mem;
    }
    for (size_t k = 0; k < c->snap->nnodes; k++)
        if (c->nodes[k].ready) {
            have_cpu += c->snap->nodes[k].cpu;
            have_mem += (double)c->snap->nodes[k].memory_bytes;
        }
    for (size_t g = 0; g < c->snap->ngpus; g++)
        have_gpus += c->nodes[c->gpus[g].node].ready;
    *cpu_short = *mem_short = *cpu_per_gpu = *mem_per_gpu = 0;
    if (gpus <= 0 || have_gpus <= 0)
        return;
    *cpu_per_gpu = have_cpu / have_gpus;
    *mem_per_gpu = have_mem / have_gpus;
    *cpu_short = fmax(0, cpu / gpus - *cpu_per_gpu);
    *mem_short = fmax(0, mem / gpus - *mem_per_gpu);
}

/* What a GPU needs beside it: its GPU tasks' ask per GPU (own), plus the
 * workload's shortfall (short), but never more than the cluster has per
 * GPU (have) unless its own tasks ask more. */
static double need_per_gpu(double own, double short_, double have)
{
    if (short_ <= 0 || own <= 0)
        return own;
    return fmax(own, fmin(own + short_, have));
}

/* The typical shapes (raw counts in s[0..*n) are cut, weighted by density
 * and normalised in place), fgd-paper's, and for each GPU model the
 * workload that may run on it: the weight of the shapes that do not
 * exclude it (all of them without constraints), and the CPU and memory a
 * GPU needs beside it: what the GPU shapes among them ask per GPU, plus the
 * workload's shortfall where the cluster's CPU or memory is short for the
 * workload as a whole (workload_short), up to what the cluster has per GPU. */
static void shapes_finish(struct ts_sched_cluster *c, struct fshape *s, int *n, struct ts_arena *a)
{
    shapes_paper(c, s, *n, a);
    int keep = shapes_keep(s, *n);
    *n = keep;
    double cpu_short, mem_short, cpu_have, mem_have;
    workload_short(c, s, keep, &cpu_short, &mem_short, &cpu_have, &mem_have);
    shapes_density(c, s, keep, a);
    c->mix = ts_arena_alloc(a, (size_t)(c->nmodels > 0 ? c->nmodels : 1) * sizeof(*c->mix));
    if (c->mix == NULL)
        return;
    for (int m = 0; m < c->nmodels; m++) {
        double gpus = 0, cpu = 0, mem = 0, w = 0;
        for (int i = 0; i < keep; i++) {
            if (!fshape_model_ok(&s[i], m))
                continue;
            w += s[i].weight;
            double g = s[i].count > 0 ? s[i].count : s[i].portion;
            if (g <= 0)
                continue; /* CPU-only tasks: what comes with a GPU is the question */
            gpus += s[i].weight * g;
            cpu += s[i].weight * s[i].cpu;
            mem += s[i].weight * (double)s[i].mem;
        }
        c->mix[m].weight = w;
        if (gpus > 0) {
            c->mix[m].cpu = need_per_gpu(cpu / gpus, cpu_short, cpu_have);
            c->mix[m].mem = need_per_gpu(mem / gpus, mem_short, mem_have);
            c->mix[m].own_cpu = cpu / gpus;
            c->mix[m].own_mem = mem / gpus;
        }
    }
}

/* The models a shape accepts as interned model flags (arena), or NULL: any. */
static const bool *shape_models(const struct ts_sched_cluster *c, const struct ts_sched_shape *s,
                                struct ts_arena *a)
{
    if (s->ngpu_models == 0 || (s->count <= 0 && s->portion <= 0))
        return NULL;
    bool *ok = ts_arena_alloc(a, (size_t)(c->nmodels > 0 ? c->nmodels : 1) * sizeof(bool));
    if (ok == NULL)
        return NULL;
    for (size_t i = 0; i < s->ngpu_models; i++) {
        int m = s->gpu_models[i] ? ts_sched_cluster_model_id(c, s->gpu_models[i]) : -1;
        if (m >= 0)
            ok[m] = true;
    }
    return ok;
}

static void shapes_from_snapshot(struct ts_sched_cluster *c, struct ts_arena *a)
{
    const struct ts_sched_snapshot *snap = c->snap;
    c->nshapes = 0;
    if (snap->nshapes == 0)
        return;
    c->shapes = ts_arena_alloc(a, snap->nshapes * sizeof(struct fshape));
    if (c->shapes == NULL)
        return;
    for (size_t i = 0; i < snap->nshapes; i++) {
        const struct ts_sched_shape *s = &snap->shapes[i];
        struct fshape *f = &c->shapes[c->nshapes++];
        f->count = s->count > 0 ? s->count : 0;
        f->portion = s->count > 0 ? 1.0 : fmin(1.0, s->portion);
        f->cpu = s->cpu;
        f->mem = s->host_memory_bytes;
        f->weight = s->weight > 0 ? s->weight : 0;
        f->model_ok = shape_models(c, s, a);
    }
    shapes_finish(c, c->shapes, &c->nshapes, a);
    c->own_shapes_fixed = true;
}

#define RAW_SHAPES_MAX 4096 /* distinct shapes counted; the rest are left out */

void ts_sched_cluster_shapes_begin(const struct ts_sched_cluster *c, struct shapes_acc *acc,
                                   struct ts_arena *a)
{
    *acc = (struct shapes_acc){0};
    if (c->own_shapes_fixed)
        return;
    /* written before read: s[0..n) only, each whole (shapes_add) */
    acc->s = ts_arena_alloc_uninit(a, RAW_SHAPES_MAX * sizeof(*acc->s));
}

void ts_sched_cluster_shapes_add(const struct ts_sched_cluster *c, struct shapes_acc *acc,
                                 const struct preq *p)
{
    if (acc->s == NULL)
        return;
    acc->nreqs++;
    struct fshape f = {0};
    if (p->kind == TS_SCHED_GPU_NONE) {
        /* CPU-only: count 0, portion 0 */
    } else if (p->kind == TS_SCHED_GPU_COUNT) {
        f.count = p->ndev;
        f.portion = 1.0;
    } else {
        double por = p->kind == TS_SCHED_GPU_PORTION
                         ? p->portion
                         : (c->max_usable > 0 ? (double)p->mem / (double)c->max_usable : 1);
        if (p->ndev > 1 || por >= 1.0) {
            f.count = p->ndev;
            f.portion = 1.0;
        } else {
            f.portion = round(por * 1000.0) / 1000.0;
        }
    }
    f.cpu = p->cpu;
    f.mem = p->host_mem;
    if (p->kind != TS_SCHED_GPU_NONE)
        f.model_ok = p->model_ok;
    int j = shape_find(c, acc->s, acc->n, &f);
    if (j == acc->n) {
        if (acc->n >= RAW_SHAPES_MAX)
            return;
        acc->s[acc->n++] = f;
    }
    acc->s[j].weight += 1;
}

void ts_sched_cluster_shapes_set(struct ts_sched_cluster *c, struct shapes_acc *acc,
                                 struct ts_arena *a)
{
    if (acc->s == NULL || acc->nreqs == 0)
        return;
    struct fshape *s = acc->s;
    int ns = acc->n;
    shapes_finish(c, s, &ns, a);
    c->shapes = s;
    c->nshapes = ns;
    if (c->watch != NULL)
        c->watch->clear(c); /* every fgd score changes with the shapes */
    for (size_t k = 0; k < c->snap->nnodes; k++)
        c->nodes[k].frag_valid = c->nodes[k].pfrag_valid = false;
}

struct ts_sched_cluster *ts_sched_cluster_build(const struct ts_sched_snapshot *snap,
                                                struct ts_arena *a)
{
    struct ts_sched_cluster *c = ts_arena_alloc(a, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->snap = snap;
    size_t nn = snap->nnodes, ng = snap->ngpus;
    c->gpus = ts_arena_alloc(a, (ng ? ng : 1) * sizeof(*c->gpus));
    c->node_gpus = ts_arena_alloc(a, (ng ? ng : 1) * sizeof(int));
    c->nodes = ts_arena_alloc(a, (nn ? nn : 1) * sizeof(*c->nodes));
    c->models = ts_arena_alloc(a, (ng ? ng : 1) * sizeof(char *));
    c->kinds = ts_arena_alloc(a, (ng ? ng : 1) * sizeof(*c->kinds));
    c->whole = ts_arena_alloc(a, (nn ? nn : 1) * sizeof(int));
    if (!c->gpus || !c->node_gpus || !c->nodes || !c->models || !c->kinds || !c->whole)
        return NULL;
    c->whole_nodes[0] = nn; /* nwhole 0 until each node's refresh below */
    for (size_t i = 0; i < nn; i++) {
        const struct ts_sched_node *sn = &snap->nodes[i];
        c->nodes[i].ready = sn->ready;
        c->nodes[i].cpu_free = sn->cpu;
        c->nodes[i].mem_free = sn->memory_bytes;
        c->nodes[i].swap_free = sn->swap_free_bytes;
        if (sn->cpu > c->max_node_cpu)
            c->max_node_cpu = sn->cpu;
    }
    for (size_t i = 0; i < ng; i++) {
        const struct ts_sched_gpu *sg = &snap->gpus[i];
        const char *model = sg->model ? sg->model : "";
        int m = ts_sched_cluster_model_id(c, model);
        if (m < 0) {
            m = c->nmodels++;
            c->models[m] = model;
        }
        c->gpus[i].node = sg->node;
        c->gpus[i].model = m;
        c->gpus[i].usable = sg->memory_bytes - sg->reserve_bytes;
        if (c->gpus[i].usable > c->max_usable)
            c->max_usable = c->gpus[i].usable;
        int k = 0;
        while (k < c->nkinds && (c->kinds[k].model != m || c->kinds[k].usable != c->gpus[i].usable))
            k++;
        if (k == c->nkinds)
            c->kinds[c->nkinds++] = (struct gpu_kind){m, c->gpus[i].usable};
        c->nodes[sg->node].ngpus++;
        if (c->nodes[sg->node].ready)
            c->capacity += 1;
    }
    int acc = 0;
    for (size_t i = 0; i < nn; i++) {
        c->nodes[i].first = acc;
        acc += c->nodes[i].ngpus;
        if (c->nodes[i].ngpus > c->max_node_gpus)
            c->max_node_gpus = c->nodes[i].ngpus;
        c->nodes[i].ngpus = 0;
    }
    for (size_t i = 0; i < ng; i++) {
        struct node_state *n = &c->nodes[snap->gpus[i].node];
        /* insertion by device index keeps each node's list sorted */
        int k = n->ngpus++;
        int *arr = &c->node_gpus[n->first];
        while (k > 0 && snap->gpus[arr[k - 1]].index > snap->gpus[i].index) {
            arr[k] = arr[k - 1];
            k--;
        }
        arr[k] = (int)i;
    }
    for (size_t i = 0; i < snap->nrunning; i++) {
        const struct ts_sched_running *j = &snap->running[i];
        struct node_state *n = &c->nodes[j->node];
        for (size_t k = 0; k < j->nslots; k++)
            c->gpus[j->slots[k].gpu].used += j->slots[k].memory_bytes;
        n->cpu_free -= j->request.cpu;
        n->mem_free -= j->request.host_memory_bytes;
        if (n->ready)
            c->allocated += ts_sched_cluster_slots_gpus(c, j->slots, j->nslots);
    }
    for (size_t i = 0; i < snap->npending; i++) {
        const struct ts_sched_pending *j = &snap->pending[i];
        if (j->suspended_node >= 0)
            c->nodes[j->suspended_node].mem_free -= j->request.host_memory_bytes;
    }
    for (size_t i = 0; i < nn; i++)
        ts_sched_cluster_node_refresh(c, (int)i);
    shapes_from_snapshot(c, a);
    return c;
}

/* ---- the public placement API ------------------------------------------ */

struct ts_sched_cluster *ts_sched_cluster_new(const struct ts_sched_snapshot *snap)
{
    struct ts_arena *a = ts_arena_new();
    if (a == NULL)
        return NULL;
    struct ts_sched_cluster *c = ts_sched_cluster_build(snap, a);
    if (c == NULL) {
        ts_arena_free(a);
        return NULL;
    }
    c->owner = a;
    return c;
}

void ts_sched_cluster_free(struct ts_sched_cluster *c)
{
    if (c == NULL)
        return;
    if (c->watch != NULL)
        c->watch->free(c);
    ts_arena_free(c->owner);
}

void ts_sched_cluster_commit(struct ts_sched_cluster *c, const struct ts_sched_request *req,
                             int node, const struct ts_sched_slot *slots, size_t nslots)
{
    ts_sched_cluster_take(c, node, slots, nslots, req->cpu, req->host_memory_bytes);
}

double ts_sched_cluster_allocated_gpus(const struct ts_sched_cluster *c)
{
    return c->allocated;
}
