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

int sim_replay_main(int argc, char **argv)
{
    const char *nodes_p = NULL, *projects_p = NULL, *jobs_p = NULL, *strategy = "binpack",
               *output = "text";
    long long min_runtime = 0, interval = 60, sample = 3600;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "--nodes") == 0)
            nodes_p = v;
        else if (strcmp(a, "--projects") == 0)
            projects_p = v;
        else if (strcmp(a, "--jobs") == 0)
            jobs_p = v;
        else if (strcmp(a, "--strategy") == 0)
            strategy = v;
        else if (strcmp(a, "--min-runtime") == 0)
            min_runtime = atoll(v);
        else if (strcmp(a, "--interval") == 0)
            interval = atoll(v);
        else if (strcmp(a, "--sample") == 0)
            sample = atoll(v);
        else if (strcmp(a, "-o") == 0)
            output = v;
        else {
            fprintf(stderr, "tessera-sim replay: unknown option %s\n", a);
            return 2;
        }
    }
    if (!nodes_p || !projects_p || !jobs_p || !ts_sched_strategy_find(strategy) || interval < 1 ||
        sample < 1) {
        fprintf(stderr, "tessera-sim replay: --nodes, --projects and --jobs are required; "
                        "--strategy binpack|spread|fgd\n");
        return 2;
    }
    struct ts_error err = {0};
    struct ts_arena *a = ts_arena_new();
    char *nb = NULL, *pb = NULL, *jb = NULL;
    size_t nl, pl, jl, nn = 0, np = 0, nj = 0;
    struct ts_sched_trace_node *tn;
    struct ts_sched_trace_project *tp;
    struct ts_sched_trace_job *tj;
    struct rjob *jobs = NULL;
    struct pstat *ps = NULL;
    struct ts_sched_running *run = NULL;
    struct ts_sched_pending *pen = NULL;
    int *run_of = NULL, *pen_of = NULL;
    int rc = 1;
    if (sim_read_file(nodes_p, &nb, &nl, &err) || sim_read_file(projects_p, &pb, &pl, &err) ||
        sim_read_file(jobs_p, &jb, &jl, &err)) {
        fprintf(stderr, "tessera-sim replay: %s\n", err.message);
        goto out;
    }
    if (ts_sched_trace_nodes_parse(nb, nl, a, &tn, &nn, &err) != TS_OK) {
        fprintf(stderr, "tessera-sim replay: %s: %s\n", nodes_p, err.message);
        goto out;
    }
    if (ts_sched_trace_projects_parse(pb, pl, a, &tp, &np, &err) != TS_OK) {
        fprintf(stderr, "tessera-sim replay: %s: %s\n", projects_p, err.message);
        goto out;
    }
    if (ts_sched_trace_jobs_parse(jb, jl, a, &tj, &nj, &err) != TS_OK) {
        fprintf(stderr, "tessera-sim replay: %s: %s\n", jobs_p, err.message);
        goto out;
    }
    struct ts_sched_snapshot s = {0};
    if (sim_nodes_snapshot(tn, nn, a, &s, &err) != TS_OK)
        goto out;
    s.config.strategy = strategy;
    s.config.min_runtime_s = min_runtime;
    /* departments by name, then projects */
    struct ts_sched_department *deps = ts_arena_alloc(a, (np ? np : 1) * sizeof(*deps));
    struct ts_sched_project *projs = ts_arena_alloc(a, (np ? np : 1) * sizeof(*projs));
    ps = calloc(np ? np : 1, sizeof(*ps));
    if (!deps || !projs || !ps)
        goto out;
    for (size_t i = 0; i < np; i++) {
        struct ts_sched_project *p = &projs[i];
        p->id = (int64_t)i + 1;
        p->name = tp[i].name;
        p->quota_gpus = tp[i].quota_gpus;
        p->over_quota_weight = tp[i].over_quota_weight;
        p->has_limit = tp[i].has_limit;
        p->limit_gpus = tp[i].limit_gpus;
        p->priority = tp[i].priority;
        p->min_runtime_s = -1;
        p->department = -1;
        if (tp[i].department[0]) {
            size_t d;
            for (d = 0; d < s.ndepartments; d++)
                if (strcmp(deps[d].name, tp[i].department) == 0)
                    break;
            if (d == s.ndepartments) {
                deps[d] = (struct ts_sched_department){
                    (int64_t)d + 1, tp[i].department, 0, 1, false, 0, 0};
                s.ndepartments++;
            }
            deps[d].quota_gpus += tp[i].quota_gpus;
            p->department = (int)d;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(tp[k].name, tp[i].name) == 0) {
                fprintf(stderr, "tessera-sim replay: project \"%s\" is listed twice\n", tp[i].name);
                goto out;
            }
    }
    s.departments = deps;
    s.projects = projs;
    s.nprojects = np;
    jobs = calloc(nj ? nj : 1, sizeof(*jobs));
    run = calloc(nj ? nj : 1, sizeof(*run));
    pen = calloc(nj ? nj : 1, sizeof(*pen));
    run_of = calloc(nj ? nj : 1, sizeof(int));
    pen_of = calloc(nj ? nj : 1, sizeof(int));
    if (!jobs || !run || !pen || !run_of || !pen_of)
        goto out;
    for (size_t p = 0; p < np; p++) {
        ps[p].wait = calloc(nj ? nj : 1, sizeof(double));
        ps[p].turn = calloc(nj ? nj : 1, sizeof(double));
        if (!ps[p].wait || !ps[p].turn)
            goto out;
    }
    for (size_t i = 0; i < nj; i++) {
        struct rjob *j = &jobs[i];
        j->t = &tj[i];
        j->project = -1;
        for (size_t p = 0; p < np; p++)
            if (strcmp(tp[p].name, tj[i].project) == 0)
                j->project = (int)p;
        if (j->project < 0) {
            fprintf(stderr, "tessera-sim replay: job \"%s\": no project \"%s\"\n", tj[i].name,
                    tj[i].project);
            goto out;
        }
        sim_request(tj[i].num_gpu, tj[i].gpu_milli, tj[i].cpu_milli, tj[i].memory_mib, "", a,
                    &j->req);
        j->remaining = (double)tj[i].duration_s;
        j->first_start = -1;
    }
    double cap = (double)s.ngpus;
    int64_t t = 0, last = 0, next_sample = 0;
    size_t done = 0, cycles = 0;
    double alloc_s = 0, util_s = 0, total_s = 0;
    json_t *series = json_array();
    double *fair = calloc(np ? np : 1, sizeof(double));
    double cur_alloc = 0, cur_util = 0;
    long long preemptions = 0;
    if (!fair)
        goto out;
    while (done < nj) {
        /* the next event: an arrival, a completion, or a retry tick */
        int64_t next = INT64_MAX;
        bool waiting = false, active = false;
        for (size_t i = 0; i < nj; i++) {
            const struct rjob *j = &jobs[i];
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
            break; /* only jobs that can never run are left */
        if (waiting && t + interval < next)
            next = t + interval;
        if (next == INT64_MAX)
            break; /* only jobs that can never run are left */
        if (next < t)
            next = t;
        /* integrate up to the event */
        double dt = (double)(next - last);
        alloc_s += cur_alloc * dt;
        util_s += cur_util * dt;
        total_s += cap * dt;
        for (size_t i = 0; i < nj; i++)
            if (jobs[i].st == J_RUNNING) {
                ps[jobs[i].project].gpu_s += jobs[i].gpus * dt;
                ps[jobs[i].project].util_s += jobs[i].gpus * jobs[i].t->utilization * dt;
            }
        for (size_t p = 0; p < np; p++)
            ps[p].fair_s += fmin(fair[p], cap) * dt;
        while (next_sample <= next) {
            json_array_append_new(series, json_pack("[I,f,f]", (json_int_t)next_sample,
                                                    100 * cur_alloc / cap, 100 * cur_util / cap));
            next_sample += sample;
        }
        t = last = next;
        for (size_t i = 0; i < nj; i++) {
            struct rjob *j = &jobs[i];
            if (j->st == J_RUNNING && j->end <= t) {
                j->st = J_DONE;
                done++;
                struct pstat *p = &ps[j->project];
                p->wait[p->done] = (double)(j->first_start - j->t->submit_s);
                p->turn[p->done] = (double)(t - j->t->submit_s);
                p->done++;
            } else if (j->st == J_FUTURE && j->t->submit_s <= t) {
                j->st = J_PENDING;
            }
        }
        /* one cycle */
        s.now = t;
        s.nrunning = s.npending = 0;
        for (size_t i = 0; i < nj; i++) {
            struct rjob *j = &jobs[i];
            if (j->st == J_RUNNING) {
                run[s.nrunning] = (struct ts_sched_running){.id = (int64_t)i + 1,
                                                            .name = j->t->name,
                                                            .project = j->project,
                                                            .priority = j->t->priority,
                                                            .preemptible = j->t->preemptible,
                                                            .request = j->req,
                                                            .node = j->node,
                                                            .slots = j->slots,
                                                            .nslots = j->nslots,
                                                            .started_at = j->started_at};
                run_of[s.nrunning++] = (int)i;
            } else if (j->st == J_PENDING) {
                pen[s.npending] = (struct ts_sched_pending){
                    (int64_t)i + 1, j->t->name,     j->project, j->t->priority, j->t->preemptible,
                    j->req,         j->t->submit_s, -1,         NULL,           0};
                pen_of[s.npending++] = (int)i;
            }
        }
        s.running = run;
        s.pending = pen;
        struct ts_sched_result *res = NULL;
        if (ts_sched_decide(&s, &res, &err) != TS_OK) {
            fprintf(stderr, "tessera-sim replay: %s\n", err.message);
            goto out;
        }
        cycles++;
        for (size_t k = 0; k < res->ndecisions; k++) {
            const struct ts_sched_decision *d = &res->decisions[k];
            struct rjob *j = &jobs[d->job_was_running ? run_of[d->job] : pen_of[d->job]];
            if (d->action != TS_SCHED_BIND && !d->job_was_running)
                continue; /* a suspension ended: the replay suspends nothing */
            if (d->action == TS_SCHED_BIND) {
                j->st = J_RUNNING;
                j->node = d->node;
                j->nslots = d->nslots;
                memcpy(j->slots, d->slots, d->nslots * sizeof(*d->slots));
                j->gpus = d->gpus;
                j->started_at = t;
                if (j->first_start < 0)
                    j->first_start = t;
                j->end = t + (int64_t)ceil(j->remaining);
            } else {
                j->remaining -= (double)(t - j->started_at);
                if (j->remaining < 1)
                    j->remaining = 1;
                j->st = J_PENDING;
                ps[j->project].preempted++;
                preemptions++;
            }
        }
        for (size_t p = 0; p < np; p++)
            fair[p] = res->shares[p].fair_share;
        ts_sched_result_free(res);
        cur_alloc = cur_util = 0;
        for (size_t i = 0; i < nj; i++)
            if (jobs[i].st == J_RUNNING) {
                cur_alloc += jobs[i].gpus;
                cur_util += jobs[i].gpus * jobs[i].t->utilization;
            }
    }
    json_t *out =
        json_pack("{s:s,s:i,s:I,s:I,s:f,s:f,s:I}", "strategy", strategy, "gpus", (int)cap, "jobs",
                  (json_int_t)nj, "cycles", (json_int_t)cycles, "allocation_pct",
                  total_s > 0 ? 100 * alloc_s / total_s : 0, "utilization_pct",
                  total_s > 0 ? 100 * util_s / total_s : 0, "preemptions", (json_int_t)preemptions);
    json_t *pj = json_array();
    if (strcmp(output, "text") == 0) {
        printf("%zu jobs on %d GPUs, %s, %zu cycles: allocation %.1f%%, utilization %.1f%%, "
               "%lld preemptions\n",
               nj, (int)cap, strategy, cycles, total_s > 0 ? 100 * alloc_s / total_s : 0,
               total_s > 0 ? 100 * util_s / total_s : 0, preemptions);
        printf("%-14s %6s %8s %8s %8s %8s %8s %8s %9s %9s %6s\n", "project", "done", "wait",
               "wait50", "wait99", "turn", "turn50", "turn99", "gpu_h", "fair_h", "preempt");
    }
    for (size_t p = 0; p < np; p++) {
        struct pstat *x = &ps[p];
        double wm = mean(x->wait, x->done), tm = mean(x->turn, x->done);
        double w50 = pct(x->wait, x->done, 0.5), w99 = pct(x->wait, x->done, 0.99);
        double t50 = pct(x->turn, x->done, 0.5), t99 = pct(x->turn, x->done, 0.99);
        if (strcmp(output, "text") == 0)
            printf("%-14s %6d %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f %9.1f %9.1f %6d\n", tp[p].name,
                   x->done, wm, w50, w99, tm, t50, t99, x->gpu_s / 3600, x->fair_s / 3600,
                   x->preempted);
        json_array_append_new(pj, json_pack("{s:s,s:i,s:{s:f,s:f,s:f},s:{s:f,s:f,s:f},s:f,s:f,s:i}",
                                            "project", tp[p].name, "done", x->done,
                                            "queueing_delay_s", "mean", wm, "p50", w50, "p99", w99,
                                            "completion_s", "mean", tm, "p50", t50, "p99", t99,
                                            "gpu_hours", x->gpu_s / 3600, "fair_share_gpu_hours",
                                            x->fair_s / 3600, "preemptions", x->preempted));
    }
    json_object_set_new(out, "projects", pj);
    json_object_set_new(out, "series", series);
    if (strcmp(output, "json") == 0) {
        char *txt = json_dumps(out, JSON_REAL_PRECISION(6));
        printf("%s\n", txt);
        free(txt);
    }
    json_decref(out);
    free(fair);
    rc = 0;
out:
    if (ps)
        for (size_t p = 0; p < np; p++) {
            free(ps[p].wait);
            free(ps[p].turn);
        }
    free(ps);
    free(jobs);
    free(run);
    free(pen);
    free(run_of);
    free(pen_of);
    free(nb);
    free(pb);
    free(jb);
    ts_arena_free(a);
    return rc;
}
