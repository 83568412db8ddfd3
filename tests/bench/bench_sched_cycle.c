/*
 * bench_sched_cycle.c - the scheduler core's cycle time.
 *
 *  1. one full cycle at 1,000 nodes x 8 GPUs with 5,000 running and 10,000
 *     pending jobs (goal: 50 ms or less), for each strategy;
 *  2. filling an empty 8,000-GPU cluster from a queue of 8,000 one-GPU jobs.
 *
 * Prints the best and median wall time of 5 runs, the best and median CPU
 * time (on a machine shared with other work, CPU time moves less), the
 * median of the page faults a cycle takes (first touches of fresh memory),
 * and the process's peak resident memory. Usage:
 *   bench_sched_cycle [runs] [binpack|spread|fgd] [cycle|fill] [nodes] [pending]
 * (the next two pick one strategy or one workload, for profiling; nodes
 * (default 1000) scales the cluster, with 5 running jobs a node (as many as
 * fit) and, by default, 10 pending a node; the fill takes one one-GPU job
 * per GPU). The largest clusters: 12500 nodes (100,000 GPUs) and 100000
 * pending (goal: 100 ms or less).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <jansson.h>

#include "server/sched/sched.h"
#include "server/sched/sched_json.h"

#define GPN 8
#define GIB (INT64_C(1) << 30)

static uint64_t rs = 12345;

static unsigned rnd(unsigned n)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (unsigned)(rs % n);
}

static double clock_ms(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void request(struct ts_sched_request *r, unsigned kind)
{
    memset(r, 0, sizeof(*r));
    switch (kind % 4) {
    case 0:
    case 1:
        r->kind = TS_SCHED_GPU_COUNT;
        r->count = 1;
        break;
    case 2:
        r->kind = TS_SCHED_GPU_PORTION;
        r->portion = 0.5;
        r->devices = 1;
        break;
    default:
        r->kind = TS_SCHED_GPU_COUNT;
        r->count = 2 + 2 * (int)(kind % 2);
        break;
    }
    r->cpu = 4;
    r->host_memory_bytes = 32 * GIB;
}

/* TS_SCHED_DUMP_RESULTS=FILE: the first run's result of each cycle, one line
 * each, to compare two builds decision for decision. */
static void dump_result(const struct ts_sched_snapshot *s, const struct ts_sched_result *r, int run)
{
    static FILE *f;
    const char *path = getenv("TS_SCHED_DUMP_RESULTS");
    if (path == NULL || run > 0)
        return;
    if (f == NULL)
        f = fopen(path, "w");
    if (f == NULL)
        return;
    json_t *j = ts_sched_result_to_json(s, r);
    char *t = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    fprintf(f, "%s\n", t);
    fflush(f);
    free(t);
    json_decref(j);
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

struct timing {
    double best, median;         /* wall ms */
    double cpu_best, cpu_median; /* CPU ms */
    double faults;               /* median page faults a cycle */
};

static void time_cycle(const struct ts_sched_snapshot *s, int runs, size_t *binds,
                       size_t *evictions, struct timing *tm)
{
    double *t = calloc((size_t)runs, sizeof(double));
    double *cpu = calloc((size_t)runs, sizeof(double));
    double *flt = calloc((size_t)runs, sizeof(double));
    for (int k = 0; k < runs; k++) {
        struct ts_sched_result *r = NULL;
        struct ts_error err = {0};
        long f0 = minor_faults();
        double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        if (ts_sched_decide(s, &r, &err) != TS_OK) {
            fprintf(stderr, "bench_sched_cycle: %s\n", err.message);
            exit(1);
        }
        t[k] = clock_ms(CLOCK_MONOTONIC) - t0;
        cpu[k] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        flt[k] = (double)(minor_faults() - f0);
        dump_result(s, r, k);
        *binds = *evictions = 0;
        for (size_t i = 0; i < r->ndecisions; i++) {
            if (r->decisions[i].action == TS_SCHED_BIND)
                (*binds)++;
            else
                (*evictions)++;
        }
        ts_sched_result_free(r);
    }
    qsort(t, (size_t)runs, sizeof(double), cmp_d);
    qsort(cpu, (size_t)runs, sizeof(double), cmp_d);
    qsort(flt, (size_t)runs, sizeof(double), cmp_d);
    *tm = (struct timing){t[0], t[runs / 2], cpu[0], cpu[runs / 2], flt[runs / 2]};
    free(t);
    free(cpu);
    free(flt);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1)
        runs = 1;
    const char *only = argc > 2 && argv[2][0] ? argv[2] : NULL;
    const char *work = argc > 3 && argv[3][0] ? argv[3] : NULL;
    int NODES = argc > 4 && atoi(argv[4]) > 0 ? atoi(argv[4]) : 1000;
    int NPENDING = argc > 5 && atoi(argv[5]) > 0 ? atoi(argv[5]) : 10 * NODES;
    int NRUNNING = 5 * NODES;
    int NFILL = NODES * GPN;
    struct ts_sched_node *nodes = calloc((size_t)NODES, sizeof(*nodes));
    struct ts_sched_gpu *gpus = calloc((size_t)NODES * GPN, sizeof(*gpus));
    static struct ts_sched_project projs[10];
    char(*names)[16] = calloc((size_t)NODES, sizeof(*names));
    static const char *pnames[10] = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"};
    for (int i = 0; i < NODES; i++) {
        snprintf(names[i], sizeof(names[i]), "node-%05d", i);
        nodes[i] =
            (struct ts_sched_node){i + 1, names[i], true, 128, 1024 * GIB, NULL, 0, 0, false};
        for (int k = 0; k < GPN; k++)
            gpus[i * GPN + k] = (struct ts_sched_gpu){i, k, "h100", 80 * GIB, 2 * GIB};
    }
    for (int p = 0; p < 10; p++)
        projs[p] =
            (struct ts_sched_project){p + 1, pnames[p], -1, 0.8 * NODES, 1, false, 0, 0, 0, -1};
    struct ts_sched_snapshot s = {0};
    s.now = 100000;
    s.nodes = nodes;
    s.nnodes = NODES;
    s.gpus = gpus;
    s.ngpus = NODES * GPN;
    s.projects = projs;
    s.nprojects = 10;

    /* 1. a loaded cluster: 5 running a node (placed by binpack), 10 pending a node */
    struct ts_sched_running *run = calloc((size_t)NRUNNING, sizeof(*run));
    struct ts_sched_slot(*slots)[TS_SCHED_MAX_DEVICES] = calloc((size_t)NRUNNING, sizeof(*slots));
    int npen = NPENDING > NFILL ? NPENDING : NFILL;
    struct ts_sched_pending *pen = calloc((size_t)npen, sizeof(*pen));
    struct ts_sched_cluster *c = ts_sched_cluster_new(&s);
    const struct ts_sched_strategy *bp = ts_sched_strategy_find("binpack");
    size_t nr = 0;
    for (int i = 0; nr < (size_t)NRUNNING && i < 4 * NRUNNING; i++) {
        struct ts_sched_running *j = &run[nr];
        request(&j->request, rnd(4));
        int node;
        size_t ns;
        if (!ts_sched_cluster_place(c, bp, &j->request, &node, slots[nr], &ns))
            continue;
        ts_sched_cluster_commit(c, &j->request, node, slots[nr], ns);
        *j = (struct ts_sched_running){.id = (int64_t)nr + 1,
                                       .name = "r",
                                       .project = (int)rnd(10),
                                       .priority = 50,
                                       .preemptible = rnd(5) != 0,
                                       .request = j->request,
                                       .node = node,
                                       .slots = slots[nr],
                                       .nslots = ns,
                                       .started_at = (int64_t)rnd(90000)};
        nr++;
    }
    double allocated = ts_sched_cluster_allocated_gpus(c);
    ts_sched_cluster_free(c);
    for (int i = 0; i < NPENDING; i++) {
        pen[i] =
            (struct ts_sched_pending){100000 + i,  "q", (int)rnd(10),         10 * (int)rnd(10),
                                      rnd(5) != 0, {0}, (int64_t)rnd(100000), -1,
                                      NULL,        0};
        request(&pen[i].request, rnd(4));
    }
    s.running = run;
    s.nrunning = nr;
    s.pending = pen;
    s.npending = (size_t)NPENDING;
    printf("cycle: %d nodes x %d GPUs, %zu running (%.0f GPUs allocated), %d pending, %d runs\n",
           NODES, GPN, nr, allocated, NPENDING, runs);
    const char *st[] = {"binpack", "spread", "fgd"};
    for (int k = 0; k < 3 && (work == NULL || strcmp(work, "cycle") == 0); k++) {
        if (only != NULL && strcmp(only, st[k]) != 0)
            continue;
        size_t b, e;
        struct timing tm;
        s.config.strategy = st[k];
        time_cycle(&s, runs, &b, &e, &tm);
        printf("  %-8s best %8.1f ms  median %8.1f ms  cpu best %8.1f ms  median %8.1f ms  "
               "faults %.0f  (%zu binds, %zu evictions)\n",
               st[k], tm.best, tm.median, tm.cpu_best, tm.cpu_median, tm.faults, b, e);
    }

    /* 2. fill an empty cluster from one one-GPU job per GPU */
    for (int i = 0; i < NFILL; i++) {
        pen[i] = (struct ts_sched_pending){100000 + i, "q", i % 10, 50, true, {0}, i, -1, NULL, 0};
        pen[i].request.kind = TS_SCHED_GPU_COUNT;
        pen[i].request.count = 1;
    }
    s.running = NULL;
    s.nrunning = 0;
    s.npending = (size_t)NFILL;
    printf("fill: %d GPUs from %d one-GPU jobs\n", NODES * GPN, NFILL);
    for (int k = 0; k < 3 && (work == NULL || strcmp(work, "fill") == 0); k++) {
        if (only != NULL && strcmp(only, st[k]) != 0)
            continue;
        size_t b, e;
        struct timing tm;
        s.config.strategy = st[k];
        time_cycle(&s, runs, &b, &e, &tm);
        printf("  %-8s best %8.1f ms  median %8.1f ms  cpu best %8.1f ms  median %8.1f ms  "
               "faults %.0f  (%zu binds)\n",
               st[k], tm.best, tm.median, tm.cpu_best, tm.cpu_median, tm.faults, b);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak resident memory: %.0f MiB\n", (double)ru.ru_maxrss / 1024);
    free(run);
    free(slots);
    free(pen);
    free(nodes);
    free(gpus);
    free(names);
    return 0;
}
