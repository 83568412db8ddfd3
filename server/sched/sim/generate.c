/*
 * generate.c - `tessera-sim generate`: a synthetic cluster and workload for
 * the time replay: nodes.csv, projects.csv and jobs.csv in DIR.
 *
 * Jobs arrive as a Poisson process sized so that the GPU-time asked for is
 * `load` times the cluster's over `hours`; durations are log-normal (median
 * 1 h); requests are 1 GPU (45%), a quarter or half of one (25%), 2, 4 or 8
 * GPUs (15%, 10%, 5%); one job in five is a non-preemptible one of priority
 * 100, the rest preemptible training of priority 50. Projects get uneven
 * quotas adding up to the cluster, weight 1, and every third a limit.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server/sched/sim/sim.h"

static FILE *create(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        fprintf(stderr, "tessera-sim generate: could not create %s\n", path);
    return f;
}

static double normal(struct sim_rng *r)
{
    double u = sim_rng_unit(r), v = sim_rng_unit(r);
    return sqrt(-2.0 * log(u > 1e-12 ? u : 1e-12)) * cos(2 * M_PI * v);
}

struct gopts {
    const char *dir;
    long long seed;
    int nodes, gpn, projects, jobs;
    double hours, load;
};

static int write_nodes(const struct gopts *o)
{
    FILE *f = create(o->dir, "nodes.csv");
    if (f == NULL)
        return -1;
    fprintf(f, "sn,cpu_milli,memory_mib,gpu,model\n");
    for (int i = 0; i < o->nodes; i++)
        fprintf(f, "node-%04d,%d,%d,%d,sim\n", i, 16000 * o->gpn, 131072 * o->gpn, o->gpn);
    return fclose(f) == 0 ? 0 : -1;
}

/* Quotas in proportion 1 : 2 : 3 ..., rounded down to half GPUs; every
 * third project limited to twice its quota. */
static int write_projects(const struct gopts *o, double cap)
{
    FILE *f = create(o->dir, "projects.csv");
    if (f == NULL)
        return -1;
    fprintf(f, "name,department,quota_gpus,over_quota_weight,limit_gpus,priority\n");
    double wsum = 0;
    for (int p = 0; p < o->projects; p++)
        wsum += 1.0 + p;
    for (int p = 0; p < o->projects; p++) {
        double q = floor(cap * (1.0 + p) / wsum * 2) / 2;
        if (p % 3 == 2)
            fprintf(f, "project-%d,,%g,1,%g,0\n", p, q, q * 2 > cap ? cap : q * 2);
        else
            fprintf(f, "project-%d,,%g,1,,0\n", p, q);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* Poisson arrivals at the load asked for; sizes 45 % one GPU, 25 % a
 * quarter or a half, 15 % two, 10 % four, 5 % eight; log-normal durations. */
static int write_jobs(const struct gopts *o, double cap, struct sim_rng *r)
{
    FILE *f = create(o->dir, "jobs.csv");
    if (f == NULL)
        return -1;
    fprintf(f, "name,project,submit_s,duration_s,num_gpu,gpu_milli,cpu_milli,memory_mib,priority,"
               "preemptible,utilization\n");
    /* mean GPUs per job 0.45+0.25*0.375+0.15*2+0.1*4+0.05*8 = 1.74; mean
     * duration of a log-normal with median 1 h and sigma 1: 1.65 h */
    double horizon = o->hours * 3600, mean_gpu_s = 1.74 * 3600 * exp(0.5);
    double rate = o->load * cap * horizon / mean_gpu_s / horizon; /* jobs per second */
    double t = 0;
    for (int j = 0; j < o->jobs; j++) {
        t += -log(1.0 - sim_rng_unit(r)) / rate;
        int p = (int)sim_rng_below(r, (size_t)o->projects);
        double u = sim_rng_unit(r);
        int ng = 1, milli = 1000;
        if (u < 0.45)
            ng = 1;
        else if (u < 0.70)
            milli = sim_rng_unit(r) < 0.5 ? 250 : 500;
        else if (u < 0.85)
            ng = 2;
        else if (u < 0.95)
            ng = 4;
        else
            ng = 8;
        if (ng > o->gpn)
            ng = o->gpn;
        long long dur = (long long)(3600 * exp(normal(r)));
        if (dur < 60)
            dur = 60;
        bool np = sim_rng_unit(r) < 0.2;
        fprintf(f, "job-%06d,project-%d,%lld,%lld,%d,%d,%d,%d,%d,%d,%.2f\n", j, p, (long long)t,
                dur, ng, milli, 4000 * ng, 16384 * ng, np ? 100 : 50, np ? 0 : 1,
                0.2 + 0.8 * sim_rng_unit(r));
    }
    return fclose(f) == 0 ? 0 : -1;
}

int sim_generate_main(int argc, char **argv)
{
    struct gopts o = {NULL, 1, 16, 8, 4, 2000, 48, 1.2};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "--out") == 0)
            o.dir = v;
        else if (strcmp(a, "--seed") == 0)
            o.seed = atoll(v);
        else if (strcmp(a, "--nodes") == 0)
            o.nodes = atoi(v);
        else if (strcmp(a, "--gpus-per-node") == 0)
            o.gpn = atoi(v);
        else if (strcmp(a, "--projects") == 0)
            o.projects = atoi(v);
        else if (strcmp(a, "--jobs") == 0)
            o.jobs = atoi(v);
        else if (strcmp(a, "--hours") == 0)
            o.hours = atof(v);
        else if (strcmp(a, "--load") == 0)
            o.load = atof(v);
        else {
            fprintf(stderr, "tessera-sim generate: unknown option %s\n", a);
            return 2;
        }
    }
    if (o.dir == NULL || o.nodes < 1 || o.nodes > 100000 || o.gpn < 1 || o.gpn > 64 ||
        o.projects < 1 || o.projects > 1000 || o.jobs < 0 || o.jobs > 10000000 || !(o.hours > 0) ||
        !(o.load > 0)) {
        fprintf(stderr, "tessera-sim generate: --out DIR is required; counts must be positive\n");
        return 2;
    }
    if (mkdir(o.dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "tessera-sim generate: could not create %s\n", o.dir);
        return 1;
    }
    struct sim_rng r = {(uint64_t)o.seed};
    double cap = (double)o.nodes * o.gpn;
    if (write_nodes(&o) != 0 || write_projects(&o, cap) != 0 || write_jobs(&o, cap, &r) != 0)
        return 1;
    printf("wrote %s/nodes.csv (%d nodes, %d GPUs), projects.csv (%d), jobs.csv (%d over %.0f h)\n",
           o.dir, o.nodes, o.nodes * o.gpn, o.projects, o.jobs, o.hours);
    return 0;
}
