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

int sim_generate_main(int argc, char **argv)
{
    const char *dir = NULL;
    long long seed = 1;
    int nodes = 16, gpn = 8, projects = 4, jobs = 2000;
    double hours = 48, load = 1.2;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "--out") == 0)
            dir = v;
        else if (strcmp(a, "--seed") == 0)
            seed = atoll(v);
        else if (strcmp(a, "--nodes") == 0)
            nodes = atoi(v);
        else if (strcmp(a, "--gpus-per-node") == 0)
            gpn = atoi(v);
        else if (strcmp(a, "--projects") == 0)
            projects = atoi(v);
        else if (strcmp(a, "--jobs") == 0)
            jobs = atoi(v);
        else if (strcmp(a, "--hours") == 0)
            hours = atof(v);
        else if (strcmp(a, "--load") == 0)
            load = atof(v);
        else {
            fprintf(stderr, "tessera-sim generate: unknown option %s\n", a);
            return 2;
        }
    }
    if (dir == NULL || nodes < 1 || nodes > 100000 || gpn < 1 || gpn > 64 || projects < 1 ||
        projects > 1000 || jobs < 0 || jobs > 10000000 || !(hours > 0) || !(load > 0)) {
        fprintf(stderr, "tessera-sim generate: --out DIR is required; counts must be positive\n");
        return 2;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "tessera-sim generate: could not create %s\n", dir);
        return 1;
    }
    struct sim_rng r = {(uint64_t)seed};
    FILE *f = create(dir, "nodes.csv");
    if (f == NULL)
        return 1;
    fprintf(f, "sn,cpu_milli,memory_mib,gpu,model\n");
    for (int i = 0; i < nodes; i++)
        fprintf(f, "node-%04d,%d,%d,%d,sim\n", i, 16000 * gpn, 131072 * gpn, gpn);
    fclose(f);
    double cap = (double)nodes * gpn;
    if ((f = create(dir, "projects.csv")) == NULL)
        return 1;
    fprintf(f, "name,department,quota_gpus,over_quota_weight,limit_gpus,priority\n");
    double wsum = 0, *w = malloc((size_t)projects * sizeof(double));
    if (w == NULL) {
        fclose(f);
        return 1;
    }
    for (int p = 0; p < projects; p++)
        wsum += (w[p] = 1.0 + p);
    for (int p = 0; p < projects; p++) {
        double q = floor(cap * w[p] / wsum * 2) / 2;
        if (p % 3 == 2)
            fprintf(f, "project-%d,,%g,1,%g,0\n", p, q, q * 2 > cap ? cap : q * 2);
        else
            fprintf(f, "project-%d,,%g,1,,0\n", p, q);
    }
    fclose(f);
    if ((f = create(dir, "jobs.csv")) == NULL) {
        free(w);
        return 1;
    }
    fprintf(f, "name,project,submit_s,duration_s,num_gpu,gpu_milli,cpu_milli,memory_mib,priority,"
               "preemptible,utilization\n");
    /* mean GPUs per job 0.45+0.25*0.375+0.15*2+0.1*4+0.05*8 = 1.74; mean
     * duration of a log-normal with median 1 h and sigma 1: 1.65 h */
    double horizon = hours * 3600, mean_gpu_s = 1.74 * 3600 * exp(0.5);
    double rate = load * cap * horizon / mean_gpu_s / horizon; /* jobs per second */
    double t = 0;
    for (int j = 0; j < jobs; j++) {
        t += -log(1.0 - sim_rng_unit(&r)) / rate;
        int p = (int)sim_rng_below(&r, (size_t)projects);
        double u = sim_rng_unit(&r);
        int ng = 1, milli = 1000;
        if (u < 0.45)
            ng = 1;
        else if (u < 0.70)
            milli = sim_rng_unit(&r) < 0.5 ? 250 : 500;
        else if (u < 0.85)
            ng = 2;
        else if (u < 0.95)
            ng = 4;
        else
            ng = 8;
        if (ng > gpn)
            ng = gpn;
        long long dur = (long long)(3600 * exp(normal(&r)));
        if (dur < 60)
            dur = 60;
        bool np = sim_rng_unit(&r) < 0.2;
        fprintf(f, "job-%06d,project-%d,%lld,%lld,%d,%d,%d,%d,%d,%d,%.2f\n", j, p, (long long)t,
                dur, ng, milli, 4000 * ng, 16384 * ng, np ? 100 : 50, np ? 0 : 1,
                0.2 + 0.8 * sim_rng_unit(&r));
    }
    fclose(f);
    free(w);
    printf("wrote %s/nodes.csv (%d nodes, %d GPUs), projects.csv (%d), jobs.csv (%d over %.0f h)\n",
           dir, nodes, nodes * gpn, projects, jobs, hours);
    return 0;
}
