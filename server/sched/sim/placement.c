/*
 * placement.c - `tessera-sim placement`: the placement replay of the
 * Alibaba GPU-sharing trace under the protocol of Weng et al. (USENIX ATC
 * '23): for each seed, shuffle the pods, append pods drawn at random with
 * replacement until the GPU request would pass 130% of the cluster's GPUs,
 * give each pod one placement attempt in that order (no retry, no
 * preemption, no departures), and read the unallocated GPU share when the
 * arrived request reaches 100% and at the end (130%). Besides the server's
 * strategies it runs the paper's baselines (fgd-paper, bestfit).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "server/sched/sim/sim.h"

struct opts {
    const char *nodes, *pods, *strategy, *output;
    int seeds;
    long long seed_base;
    double inflate;
};

static int parse(int argc, char **argv, struct opts *o)
{
    o->strategy = "binpack";
    o->output = "text";
    o->seeds = 10;
    o->seed_base = 42;
    o->inflate = 1.3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            fprintf(stderr, "tessera-sim placement: %s needs a value\n", a);
            return -1;
        }
        if (strcmp(a, "--nodes") == 0)
            o->nodes = v;
        else if (strcmp(a, "--pods") == 0)
            o->pods = v;
        else if (strcmp(a, "--strategy") == 0)
            o->strategy = v;
        else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0)
            o->output = v;
        else if (strcmp(a, "--seeds") == 0)
            o->seeds = atoi(v);
        else if (strcmp(a, "--seed-base") == 0)
            o->seed_base = atoll(v);
        else {
            fprintf(stderr, "tessera-sim placement: unknown option %s\n", a);
            return -1;
        }
        i++;
    }
    if (o->nodes == NULL || o->pods == NULL) {
        fprintf(stderr, "tessera-sim placement: --nodes and --pods are required\n");
        return -1;
    }
    if (o->seeds < 1 || o->seeds > 1000) {
        fprintf(stderr, "tessera-sim placement: --seeds must be between 1 and 1000\n");
        return -1;
    }
    if (strcmp(o->output, "text") != 0 && strcmp(o->output, "json") != 0) {
        fprintf(stderr, "tessera-sim placement: -o must be text or json\n");
        return -1;
    }
    return 0;
}

static double pod_gpus(const struct ts_sched_trace_pod *p)
{
    return p->num_gpu * p->gpu_milli / 1000.0;
}

static bool same_spec(const char *x, const char *y)
{
    return strcmp(x ? x : "", y ? y : "") == 0;
}

/* The trace's typical shapes for fgd: (GPUs, share, cpu, memory, GPU models)
 * by frequency, CPU-only pods included (they strand a node's GPUs when they
 * use up its CPU); models from the pods' requests reqs[]. */
static struct ts_sched_shape *shapes_of(const struct ts_sched_trace_pod *pods,
                                        const struct ts_sched_request *reqs, size_t n,
                                        struct ts_arena *a, size_t *ns)
{
    struct ts_sched_shape *s = ts_arena_alloc(a, (n ? n : 1) * sizeof(*s));
    size_t *first = ts_arena_alloc(a, (n ? n : 1) * sizeof(*first)); /* a pod of each shape */
    *ns = 0;
    if (s == NULL || first == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const struct ts_sched_trace_pod *p = &pods[i];
        struct ts_sched_shape x = {0};
        if (p->num_gpu == 1 && p->gpu_milli < 1000)
            x.portion = p->gpu_milli / 1000.0;
        else if (p->num_gpu > 0)
            x.count = p->num_gpu;
        x.cpu = (double)p->cpu_milli / 1000.0;
        x.host_memory_bytes = p->memory_mib << 20;
        x.gpu_models = reqs[i].gpu_models;
        x.ngpu_models = reqs[i].ngpu_models;
        size_t k;
        for (k = 0; k < *ns; k++)
            if (s[k].count == x.count && s[k].portion == x.portion && s[k].cpu == x.cpu &&
                s[k].host_memory_bytes == x.host_memory_bytes &&
                same_spec(pods[first[k]].gpu_spec, p->gpu_spec))
                break;
        if (k == *ns) {
            first[*ns] = i;
            s[(*ns)++] = x;
        }
        s[k].weight += 1;
    }
    return s;
}

static const char *trace_name(const char *path, char *buf, size_t len)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *pre = "openb_pod_list_";
    if (strncmp(b, pre, strlen(pre)) == 0)
        b += strlen(pre);
    snprintf(buf, len, "%s", b);
    char *dot = strrchr(buf, '.');
    if (dot && strcmp(dot, ".csv") == 0)
        *dot = '\0';
    return buf;
}

static void mean_sd(const double *x, int n, double *mean, double *sd)
{
    double m = 0, v = 0;
    for (int i = 0; i < n; i++)
        m += x[i];
    m /= n;
    for (int i = 0; i < n; i++)
        v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *sd = n > 1 ? sqrt(v / (n - 1)) : 0;
}

/* One placement run: the trace, its requests, and each seed's figures. */
struct placement {
    struct opts o;
    const struct ts_sched_strategy *st;
    struct ts_arena *a;
    char *nbuf, *pbuf;
    struct ts_sched_trace_node *tn;
    struct ts_sched_trace_pod *tp;
    size_t nn, np;
    struct ts_sched_snapshot snap;
    struct ts_sched_request *reqs;
    double cap; /* GPUs */
    size_t *order, max_order;
    double *u100, *u130; /* per seed */
};

/* The trace into a snapshot of its nodes and one request per pod. */
static int load(struct placement *p)
{
    struct ts_error err = {0};
    size_t nlen, plen;
    if (sim_read_file(p->o.nodes, &p->nbuf, &nlen, &err) != TS_OK ||
        sim_read_file(p->o.pods, &p->pbuf, &plen, &err) != TS_OK) {
        fprintf(stderr, "tessera-sim placement: %s\n", err.message);
        return -1;
    }
    if (ts_sched_trace_nodes_parse(p->nbuf, nlen, p->a, &p->tn, &p->nn, &err) != TS_OK) {
        fprintf(stderr, "tessera-sim placement: %s: %s\n", p->o.nodes, err.message);
        return -1;
    }
    if (ts_sched_trace_pods_parse(p->pbuf, plen, p->a, &p->tp, &p->np, &err) != TS_OK) {
        fprintf(stderr, "tessera-sim placement: %s: %s\n", p->o.pods, err.message);
        return -1;
    }
    p->snap.config.strategy = p->o.strategy;
    if (sim_nodes_snapshot(p->tn, p->nn, p->a, &p->snap, &err) != TS_OK) {
        fprintf(stderr, "tessera-sim placement: %s\n", err.message);
        return -1;
    }
    p->cap = (double)p->snap.ngpus;
    if (p->cap <= 0 || p->np == 0) {
        fprintf(stderr, "tessera-sim placement: the trace has no GPUs or no pods\n");
        return -1;
    }
    p->reqs = calloc(p->np, sizeof(*p->reqs));
    p->max_order = p->np + (size_t)(p->cap * p->o.inflate * 1000) + 16;
    p->order = malloc(p->max_order * sizeof(size_t));
    if (p->reqs == NULL || p->order == NULL) {
        fprintf(stderr, "tessera-sim placement: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < p->np; i++)
        sim_request(p->tp[i].num_gpu, p->tp[i].gpu_milli, p->tp[i].cpu_milli, p->tp[i].memory_mib,
                    p->tp[i].gpu_spec, p->a, &p->reqs[i]);
    p->snap.shapes = shapes_of(p->tp, p->reqs, p->np, p->a, &p->snap.nshapes);
    return 0;
}

/* The arrival order of one seed: every pod once, shuffled, then pods drawn
 * at random until they would ask for more than inflate times the GPUs. */
static size_t arrival_order(struct placement *p, struct sim_rng *rng)
{
    size_t n = p->np, *order = p->order;
    for (size_t i = 0; i < p->np; i++)
        order[i] = i;
    for (size_t i = p->np - 1; i > 0; i--) {
        size_t j = sim_rng_below(rng, i + 1);
        size_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    double total = 0;
    for (size_t i = 0; i < p->np; i++)
        total += pod_gpus(&p->tp[i]);
    while (n < p->max_order) {
        size_t pick = sim_rng_below(rng, p->np);
        if (total + pod_gpus(&p->tp[pick]) > p->cap * p->o.inflate)
            break;
        total += pod_gpus(&p->tp[pick]);
        order[n++] = pick;
    }
    return n;
}

/* Seed k: places the pods as they arrive; the unallocated GPU share once
 * 100 % of the GPUs have arrived, and at the end. */
static int run_seed(struct placement *p, int k)
{
    struct sim_rng rng = {(uint64_t)(p->o.seed_base + k)};
    size_t n = arrival_order(p, &rng);
    struct ts_sched_cluster *c = ts_sched_cluster_new(&p->snap);
    if (c == NULL) {
        fprintf(stderr, "tessera-sim placement: out of memory\n");
        return -1;
    }
    double arrived = 0;
    bool at100 = false;
    for (size_t i = 0; i < n; i++) {
        const struct ts_sched_request *r = &p->reqs[p->order[i]];
        int node;
        struct ts_sched_slot slots[TS_SCHED_MAX_DEVICES];
        size_t ns;
        arrived += pod_gpus(&p->tp[p->order[i]]);
        if (ts_sched_cluster_place(c, p->st, r, &node, slots, &ns))
            ts_sched_cluster_commit(c, r, node, slots, ns);
        if (!at100 && arrived >= p->cap) {
            p->u100[k] = 100.0 * (1.0 - ts_sched_cluster_allocated_gpus(c) / p->cap);
            at100 = true;
        }
    }
    p->u130[k] = 100.0 * (1.0 - ts_sched_cluster_allocated_gpus(c) / p->cap);
    if (!at100)
        p->u100[k] = p->u130[k];
    ts_sched_cluster_free(c);
    return 0;
}

static void report(const struct placement *p, double secs)
{
    const struct opts *o = &p->o;
    double m100, s100, m130, s130;
    mean_sd(p->u100, o->seeds, &m100, &s100);
    mean_sd(p->u130, o->seeds, &m130, &s130);
    char name[256];
    trace_name(o->pods, name, sizeof(name));
    if (strcmp(o->output, "json") == 0) {
        json_t *j = json_pack("{s:s,s:s,s:i,s:I,s:{s:f,s:f},s:{s:f,s:f},s:i,s:i,s:f}", "trace",
                              name, "strategy", o->strategy, "seeds", o->seeds, "seed_base",
                              (json_int_t)o->seed_base, "unallocated_pct_at_100", "mean", m100,
                              "sd", s100, "unallocated_pct_at_130", "mean", m130, "sd", s130,
                              "gpus", (int)p->cap, "pods", (int)p->np, "seconds", secs);
        char *txt = json_dumps(j, JSON_REAL_PRECISION(6));
        printf("%s\n", txt);
        free(txt);
        json_decref(j);
    } else {
        printf("%s %s: unallocated GPU %% at 100%% arrival %.2f ± %.2f, at 130%% %.2f ± %.2f "
               "(%d seeds from %lld, %d GPUs, %zu pods, %.1f s)\n",
               name, o->strategy, m100, s100, m130, s130, o->seeds, o->seed_base, (int)p->cap,
               p->np, secs);
    }
}

int sim_placement_main(int argc, char **argv)
{
    struct placement p = {0};
    if (parse(argc, argv, &p.o) != 0)
        return 2;
    p.st = ts_sched_strategy_find(p.o.strategy);
    if (p.st == NULL)
        p.st = ts_sched_reference_find(p.o.strategy);
    if (p.st == NULL) {
        fprintf(stderr,
                "tessera-sim placement: unknown strategy \"%s\": use binpack, spread, fgd, "
                "or the references fgd-paper or bestfit\n",
                p.o.strategy);
        return 2;
    }
    int rc = 1;
    p.a = ts_arena_new();
    p.u100 = calloc((size_t)p.o.seeds, sizeof(double));
    p.u130 = calloc((size_t)p.o.seeds, sizeof(double));
    if (p.a == NULL || p.u100 == NULL || p.u130 == NULL) {
        fprintf(stderr, "tessera-sim placement: out of memory\n");
        goto out;
    }
    if (load(&p) != 0)
        goto out;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; k < p.o.seeds; k++)
        if (run_seed(&p, k) != 0)
            goto out;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    report(&p, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    rc = 0;
out:
    free(p.nbuf);
    free(p.pbuf);
    free(p.u100);
    free(p.u130);
    free(p.order);
    free(p.reqs);
    ts_arena_free(p.a);
    return rc;
}
