/*
 * replay.c - `tessera-sim replay`: the time replay. Jobs arrive at their
 * submit time and run for their duration once placed; a cycle of the
 * scheduler core runs at every arrival and every completion (and at least
 * every --interval seconds while jobs wait). Evicted jobs keep their
 * progress (they checkpoint) and go back to the queue.
 *
 * Reports GPU allocation and utilization over time, queueing delay and
 * completion time per project (mean, p50, p99), GPU-time received against
 * the fair share, and preemption counts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/sched/sim/sim.h"

enum jstate { J_FUTURE, J_PENDING, J_RUNNING, J_DONE };

struct rjob {
    const struct ts_sched_trace_job *t;
    int project;
    struct ts_sched_request req;
    enum jstate st;
    double remaining;    /* seconds of work left */
    int64_t started_at;  /* this run */
    int64_t first_start; /* -1 */
    int64_t end;
    int node;
    struct ts_sched_slot slots[TS_SCHED_MAX_DEVICES];
    size_t nslots;
    double gpus;
};

struct pstat {
    double gpu_s, fair_s, util_s;
    int preempted, done;
    double *wait, *turn;
};

struct opts {
    const char *nodes, *projects, *jobs, *strategy, *output;
    long long min_runtime, interval, sample;
};

/* The replay's whole state: the trace, the snapshot a cycle reads, and the
 * running totals. */
struct replay {
    struct opts o;
    struct ts_arena *a;
    char *nb, *pb, *jb;
    struct ts_sched_trace_node *tn;
    struct ts_sched_trace_project *tp;
    struct ts_sched_trace_job *tj;
    size_t nn, np, nj;
    struct ts_sched_snapshot s;
    struct rjob *jobs;
    struct pstat *ps;
    double *fair; /* per project, from the last cycle */
    struct ts_sched_running *run;
    struct ts_sched_pending *pen;
    int *run_of, *pen_of; /* snapshot index -> job */
    double cap;           /* GPUs */
    int64_t t, last, next_sample;
    size_t done, cycles;
    long long preemptions;
    double alloc_s, util_s, total_s, cur_alloc, cur_util;
    json_t *series;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    int i = (int)ceil(p * n) - 1;
    return v[i < 0 ? 0 : (i >= n ? n - 1 : i)];
}

static double mean(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return n ? s / n : 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.strategy = "binpack", .output = "text", .interval = 60, .sample = 3600};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "--nodes") == 0)
            o->nodes = v;
        else if (strcmp(a, "--projects") == 0)
            o->projects = v;
        else if (strcmp(a, "--jobs") == 0)
            o->jobs = v;
        else if (strcmp(a, "--strategy") == 0)
            o->strategy = v;
        else if (strcmp(a, "--min-runtime") == 0)
            o->min_runtime = atoll(v);
        else if (strcmp(a, "--interval") == 0)
            o->interval = atoll(v);
        else if (strcmp(a, "--sample") == 0)
            o->sample = atoll(v);
        else if (strcmp(a, "-o") == 0)
            o->output = v;
        else {
            fprintf(stderr, "tessera-sim replay: unknown option %s\n", a);
            return -1;
        }
    }
    if (!o->nodes || !o->projects || !o->jobs || !ts_sched_strategy_find(o->strategy) ||
        o->interval < 1 || o->sample < 1) {
        fprintf(stderr, "tessera-sim replay: --nodes, --projects and --jobs are required; "
                        "--strategy binpack|spread|fgd\n");
        return -1;
    }
    return 0;
}

static int load(struct replay *r)
{
    struct ts_error err = {0};
    size_t nl, pl, jl;
    if (sim_read_file(r->o.nodes, &r->nb, &nl, &err) ||
        sim_read_file(r->o.projects, &r->pb, &pl, &err) ||
        sim_read_file(r->o.jobs, &r->jb, &jl, &err)) {
        fprintf(stderr, "tessera-sim replay: %s\n", err.message);
        return -1;
    }
    const char *bad = r->o.nodes;
    if (ts_sched_trace_nodes_parse(r->nb, nl, r->a, &r->tn, &r->nn, &err) != TS_OK ||
        (bad = r->o.projects,
         ts_sched_trace_projects_parse(r->pb, pl, r->a, &r->tp, &r->np, &err) != TS_OK) ||
        (bad = r->o.jobs,
         ts_sched_trace_jobs_parse(r->jb, jl, r->a, &r->tj, &r->nj, &err) != TS_OK)) {
        fprintf(stderr, "tessera-sim replay: %s: %s\n", bad, err.message);
        return -1;
    }
    if (sim_nodes_snapshot(r->tn, r->nn, r->a, &r->s, &err) != TS_OK)
        return -1;
    r->s.config.strategy = r->o.strategy;
    r->s.config.min_runtime_s = r->o.min_runtime;
    r->cap = (double)r->s.ngpus;
    return 0;
}

/* The department named name (created with no quota if new): its index. */
static int department_of(struct ts_sched_snapshot *s, struct ts_sched_department *deps,
                         const char *name)
{
    size_t d;
    for (d = 0; d < s->ndepartments; d++)
        if (strcmp(deps[d].name, name) == 0)
            return (int)d;
    deps[d] = (struct ts_sched_department){(int64_t)d + 1, name, 0, 1, false, 0, 0};
    s->ndepartments++;
    return (int)d;
}

/* Departments by name, then projects, into the snapshot. */
static int build_projects(struct replay *r)
{
    size_t np = r->np, n1 = np ? np : 1;
    struct ts_sched_department *deps = ts_arena_alloc(r->a, n1 * sizeof(*deps));
    struct ts_sched_project *projs = ts_arena_alloc(r->a, n1 * sizeof(*projs));
    r->ps = calloc(n1, sizeof(*r->ps));
    r->fair = calloc(n1, sizeof(*r->fair));
    if (!deps || !projs || !r->ps || !r->fair)
        return -1;
    for (size_t i = 0; i < np; i++) {
        const struct ts_sched_trace_project *t = &r->tp[i];
        for (size_t k = 0; k < i; k++)
            if (strcmp(r->tp[k].name, t->name) == 0) {
                fprintf(stderr, "tessera-sim replay: project \"%s\" is listed twice\n", t->name);
                return -1;
            }
        projs[i] = (struct ts_sched_project){.id = (int64_t)i + 1,
                                             .name = t->name,
                                             .quota_gpus = t->quota_gpus,
                                             .over_quota_weight = t->over_quota_weight,
                                             .has_limit = t->has_limit,
                                             .limit_gpus = t->limit_gpus,
                                             .priority = t->priority,
                                             .min_runtime_s = -1,
                                             .department = -1};
        if (t->department[0]) {
            int d = department_of(&r->s, deps, t->department);
            deps[d].quota_gpus += t->quota_gpus;
            projs[i].department = d;
        }
        r->ps[i].wait = calloc(r->nj ? r->nj : 1, sizeof(double));
        r->ps[i].turn = calloc(r->nj ? r->nj : 1, sizeof(double));
        if (!r->ps[i].wait || !r->ps[i].turn)
            return -1;
    }
    r->s.departments = deps;
    r->s.projects = projs;
    r->s.nprojects = np;
    return 0;
}

static int build_jobs(struct replay *r)
{
    size_t n1 = r->nj ? r->nj : 1;
    r->jobs = calloc(n1, sizeof(*r->jobs));
    r->run = calloc(n1, sizeof(*r->run));
    r->pen = calloc(n1, sizeof(*r->pen));
    r->run_of = calloc(n1, sizeof(int));
    r->pen_of = calloc(n1, sizeof(int));
    if (!r->jobs || !r->run || !r->pen || !r->run_of || !r->pen_of)
        return -1;
    for (size_t i = 0; i < r->nj; i++) {
        const struct ts_sched_trace_job *t = &r->tj[i];
        struct rjob *j = &r->jobs[i];
        j->t = t;
        j->project = -1;
        for (size_t p = 0; p < r->np; p++)
            if (strcmp(r->tp[p].name, t->project) == 0)
                j->project = (int)p;
        if (j->project < 0) {
            fprintf(stderr, "tessera-sim replay: job \"%s\": no project \"%s\"\n", t->name,
                    t->project);
            return -1;
        }
        sim_request(t->num_gpu, t->gpu_milli, t->cpu_milli, t->memory_mib, "", r->a, &j->req);
        j->remaining = (double)t->duration_s;
        j->first_start = -1;
    }
    r->series = json_array();
    return r->series ? 0 : -1;
}

/* The time of the next event (an arrival, a completion, or a retry tick
 * while jobs wait), or -1 when no job can ever run again. */
static int64_t next_event(const struct replay *r)
{
    int64_t next = INT64_MAX;
    bool waiting = false, active = false;
    for (size_t i = 0; i < r->nj; i++) {
        const struct rjob *j = &r->jobs[i];
        if (j->st == J_FUTURE || j->st == J_RUNNING)
            active = true;
        if (j->st == J_FUTURE && j->t->submit_s < next)
            next = j->t->submit_s;
        else if (j->st == J_RUNNING && j->end < next)
            next = j->end;
        else if (j->st == J_PENDING)
            waiting = true;
    }
    if (!active)
        return -1;
    if (waiting && r->t + r->o.interval < next)
        next = r->t + r->o.interval;
    if (next == INT64_MAX)
        return -1;
    return next < r->t ? r->t : next;
}

/* Integrates the totals up to next, samples the series, then ends the jobs
 * due by then and queues those that arrived. */
static void advance(struct replay *r, int64_t next)
{
    double dt = (double)(next - r->last);
    r->alloc_s += r->cur_alloc * dt;
    r->util_s += r->cur_util * dt;
    r->total_s += r->cap * dt;
    for (size_t i = 0; i < r->nj; i++)
        if (r->jobs[i].st == J_RUNNING) {
            struct pstat *p = &r->ps[r->jobs[i].project];
            p->gpu_s += r->jobs[i].gpus * dt;
            p->util_s += r->jobs[i].gpus * r->jobs[i].t->utilization * dt;
        }
    for (size_t p = 0; p < r->np; p++)
        r->ps[p].fair_s += fmin(r->fair[p], r->cap) * dt;
    for (; r->next_sample <= next; r->next_sample += r->o.sample)
        json_array_append_new(r->series,
                              json_pack("[I,f,f]", (json_int_t)r->next_sample,
                                        100 * r->cur_alloc / r->cap, 100 * r->cur_util / r->cap));
    r->t = r->last = next;
    for (size_t i = 0; i < r->nj; i++) {
        struct rjob *j = &r->jobs[i];
        if (j->st == J_RUNNING && j->end <= r->t) {
            struct pstat *p = &r->ps[j->project];
            j->st = J_DONE;
            r->done++;
            p->wait[p->done] = (double)(j->first_start - j->t->submit_s);
            p->turn[p->done] = (double)(r->t - j->t->submit_s);
            p->done++;
        } else if (j->st == J_FUTURE && j->t->submit_s <= r->t) {
            j->st = J_PENDING;
        }
    }
}

/* The running and pending jobs into the snapshot. */
static void fill_snapshot(struct replay *r)
{
    struct ts_sched_snapshot *s = &r->s;
    s->now = r->t;
    s->nrunning = s->npending = 0;
    for (size_t i = 0; i < r->nj; i++) {
        const struct rjob *j = &r->jobs[i];
        if (j->st == J_RUNNING) {
            r->run[s->nrunning] = (struct ts_sched_running){.id = (int64_t)i + 1,
                                                            .name = j->t->name,
                                                            .project = j->project,
                                                            .priority = j->t->priority,
                                                            .preemptible = j->t->preemptible,
                                                            .request = j->req,
                                                            .node = j->node,
                                                            .slots = j->slots,
                                                            .nslots = j->nslots,
                                                            .started_at = j->started_at};
            r->run_of[s->nrunning++] = (int)i;
        } else if (j->st == J_PENDING) {
            r->pen[s->npending] = (struct ts_sched_pending){
                (int64_t)i + 1, j->t->name,     j->project, j->t->priority, j->t->preemptible,
                j->req,         j->t->submit_s, -1,         NULL,           0};
            r->pen_of[s->npending++] = (int)i;
        }
    }
    s->running = r->run;
    s->pending = r->pen;
}

/* One decision: a bind starts the job, an eviction queues it again with
 * the work it has left. */
static void apply(struct replay *r, const struct ts_sched_decision *d)
{
    if (d->action != TS_SCHED_BIND && !d->job_was_running)
        return; /* a suspension ended: the replay suspends nothing */
    struct rjob *j = &r->jobs[d->job_was_running ? r->run_of[d->job] : r->pen_of[d->job]];
    if (d->action == TS_SCHED_BIND) {
        j->st = J_RUNNING;
        j->node = d->node;
        j->nslots = d->nslots;
        memcpy(j->slots, d->slots, d->nslots * sizeof(*d->slots));
        j->gpus = d->gpus;
        j->started_at = r->t;
        if (j->first_start < 0)
            j->first_start = r->t;
        j->end = r->t + (int64_t)ceil(j->remaining);
    } else {
        j->remaining -= (double)(r->t - j->started_at);
        if (j->remaining < 1)
            j->remaining = 1;
        j->st = J_PENDING;
        r->ps[j->project].preempted++;
        r->preemptions++;
    }
}

static int cycle(struct replay *r)
{
    struct ts_error err = {0};
    struct ts_sched_result *res = NULL;
    fill_snapshot(r);
    if (ts_sched_decide(&r->s, &res, &err) != TS_OK) {
        fprintf(stderr, "tessera-sim replay: %s\n", err.message);
        return -1;
    }
    r->cycles++;
    for (size_t k = 0; k < res->ndecisions; k++)
        apply(r, &res->decisions[k]);
    for (size_t p = 0; p < r->np; p++)
        r->fair[p] = res->shares[p].fair_share;
    ts_sched_result_free(res);
    r->cur_alloc = r->cur_util = 0;
    for (size_t i = 0; i < r->nj; i++)
        if (r->jobs[i].st == J_RUNNING) {
            r->cur_alloc += r->jobs[i].gpus;
            r->cur_util += r->jobs[i].gpus * r->jobs[i].t->utilization;
        }
    return 0;
}

static void report(struct replay *r)
{
    bool text = strcmp(r->o.output, "text") == 0;
    double alloc = r->total_s > 0 ? 100 * r->alloc_s / r->total_s : 0;
    double util = r->total_s > 0 ? 100 * r->util_s / r->total_s : 0;
    json_t *out =
        json_pack("{s:s,s:i,s:I,s:I,s:f,s:f,s:I}", "strategy", r->o.strategy, "gpus", (int)r->cap,
                  "jobs", (json_int_t)r->nj, "cycles", (json_int_t)r->cycles, "allocation_pct",
                  alloc, "utilization_pct", util, "preemptions", (json_int_t)r->preemptions);
    json_t *pj = json_array();
    if (text) {
        printf("%zu jobs on %d GPUs, %s, %zu cycles: allocation %.1f%%, utilization %.1f%%, "
               "%lld preemptions\n",
               r->nj, (int)r->cap, r->o.strategy, r->cycles, alloc, util, r->preemptions);
        printf("%-14s %6s %8s %8s %8s %8s %8s %8s %9s %9s %6s\n", "project", "done", "wait",
               "wait50", "wait99", "turn", "turn50", "turn99", "gpu_h", "fair_h", "preempt");
    }
    for (size_t p = 0; p < r->np; p++) {
        struct pstat *x = &r->ps[p];
        double wm = mean(x->wait, x->done), tm = mean(x->turn, x->done);
        double w50 = pct(x->wait, x->done, 0.5), w99 = pct(x->wait, x->done, 0.99);
        double t50 = pct(x->turn, x->done, 0.5), t99 = pct(x->turn, x->done, 0.99);
        if (text)
            printf("%-14s %6d %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f %9.1f %9.1f %6d\n", r->tp[p].name,
                   x->done, wm, w50, w99, tm, t50, t99, x->gpu_s / 3600, x->fair_s / 3600,
                   x->preempted);
        json_array_append_new(pj, json_pack("{s:s,s:i,s:{s:f,s:f,s:f},s:{s:f,s:f,s:f},s:f,s:f,s:i}",
                                            "project", r->tp[p].name, "done", x->done,
                                            "queueing_delay_s", "mean", wm, "p50", w50, "p99", w99,
                                            "completion_s", "mean", tm, "p50", t50, "p99", t99,
                                            "gpu_hours", x->gpu_s / 3600, "fair_share_gpu_hours",
                                            x->fair_s / 3600, "preemptions", x->preempted));
    }
    json_object_set_new(out, "projects", pj);
    json_object_set(out, "series", r->series);
    if (!text) {
        char *txt = json_dumps(out, JSON_REAL_PRECISION(6));
        printf("%s\n", txt);
        free(txt);
    }
    json_decref(out);
}

static void replay_free(struct replay *r)
{
    if (r->ps)
        for (size_t p = 0; p < r->np; p++) {
            free(r->ps[p].wait);
            free(r->ps[p].turn);
        }
    free(r->ps);
    free(r->fair);
    free(r->jobs);
    free(r->run);
    free(r->pen);
    free(r->run_of);
    free(r->pen_of);
    free(r->nb);
    free(r->pb);
    free(r->jb);
    json_decref(r->series);
    ts_arena_free(r->a);
}

int sim_replay_main(int argc, char **argv)
{
    struct replay r = {0};
    if (parse_opts(argc, argv, &r.o) != 0)
        return 2;
    int rc = 1;
    r.a = ts_arena_new();
    if (!r.a || load(&r) != 0 || build_projects(&r) != 0 || build_jobs(&r) != 0)
        goto out;
    while (r.done < r.nj) {
        int64_t next = next_event(&r);
        if (next < 0)
            break; /* only jobs that can never run are left */
        advance(&r, next);
        if (cycle(&r) != 0)
            goto out;
    }
    report(&r);
    rc = 0;
out:
    replay_free(&r);
    return rc;
}
