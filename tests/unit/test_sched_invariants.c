/*
 * test_sched_invariants.c - thousands of random seeded snapshots, each walked
 * through a few cycles, every strategy: the invariants of ts_sched_check
 * hold (no GPU over-committed, no project over its limit, no non-preemptible
 * or protected job stopped, every pending job has a reason), the same
 * snapshot decides the same, no cycle runs out of passes, and a cycle on the
 * state the decisions produce stops nothing (stability). Failing cycles are
 * counted and listed; their snapshots can be saved for `tessera-sim
 * minimize`, which shrinks one to a fixture.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "server/sched/sched.h"
#include "server/sched/sched_json.h"

#define GIB (INT64_C(1) << 30)

static const char *strategies[] = {"binpack", "spread", "fgd"};

struct rng {
    uint64_t s;
};

static uint64_t next(struct rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int below(struct rng *r, int n)
{
    return (int)(next(r) % (uint64_t)n);
}

static const char *names[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
static const char *models_a[] = {"a100"};
static const char *models_b[] = {"l4", "a100"};
static const struct ts_sched_label zone_a[] = {{"zone", "a"}};
static const struct ts_sched_label zone_b[] = {{"zone", "b"}};

/* How a quota and a limit are drawn: the quota below(quota_n) / div; a
 * limit one time in limit_odds, the quota + below(limit_n) / div. */
struct quota_draw {
    int quota_n;
    double div;
    int limit_odds, limit_n;
};

/* 0 to 2 departments. */
static void draw_departments(struct rng *r, struct ts_sched_snapshot *s,
                             struct ts_sched_department *deps, const struct quota_draw *q)
{
    s->ndepartments = (size_t)below(r, 3);
    for (size_t i = 0; i < s->ndepartments; i++) {
        struct ts_sched_department *d = &deps[i];
        d->id = (int64_t)i + 1;
        d->name = i ? "ops" : "research";
        d->quota_gpus = below(r, q->quota_n) / q->div;
        d->over_quota_weight = below(r, 3);
        d->has_limit = below(r, q->limit_odds) == 0;
        d->limit_gpus = d->quota_gpus + below(r, q->limit_n) / q->div;
        d->priority = below(r, 2);
    }
    s->departments = deps;
}

/* least + below(spread) projects, in the departments drawn before. */
static void draw_projects(struct rng *r, struct ts_sched_snapshot *s,
                          struct ts_sched_project *projs, int least, int spread,
                          const struct quota_draw *q)
{
    s->nprojects = (size_t)least + (size_t)below(r, spread);
    for (size_t i = 0; i < s->nprojects; i++) {
        struct ts_sched_project *p = &projs[i];
        p->id = (int64_t)i + 1;
        p->name = names[i];
        p->department = s->ndepartments ? below(r, (int)s->ndepartments + 1) - 1 : -1;
        p->quota_gpus = below(r, q->quota_n) / q->div;
        p->over_quota_weight = below(r, 4);
        p->has_limit = below(r, q->limit_odds) == 0;
        p->limit_gpus = p->quota_gpus + below(r, q->limit_n) / q->div;
        p->priority = below(r, 3);
        p->usage_gpu_seconds = below(r, 4) * 3600.0;
        p->min_runtime_s = below(r, 4) == 0 ? 600 : -1;
    }
    s->projects = projs;
}

static void random_request(struct rng *r, struct ts_sched_request *q)
{
    memset(q, 0, sizeof(*q));
    switch (below(r, 5)) {
    case 0:
        q->kind = TS_SCHED_GPU_COUNT;
        q->count = 1 + below(r, 4);
        break;
    case 1:
    case 2:
        q->kind = TS_SCHED_GPU_PORTION;
        q->portion = (1 + below(r, 8)) / 8.0;
        q->devices = below(r, 6) == 0 ? 2 : 1;
        break;
    case 3:
        q->kind = TS_SCHED_GPU_MEMORY;
        q->memory_bytes = (4 + below(r, 40)) * GIB;
        q->devices = below(r, 6) == 0 ? 2 : 1;
        break;
    default:
        q->kind = below(r, 3) == 0 ? TS_SCHED_GPU_NONE : TS_SCHED_GPU_COUNT;
        q->count = 1;
        break;
    }
    q->cpu = below(r, 3) == 0 ? 0 : 1 + below(r, 16);
    q->host_memory_bytes = below(r, 3) == 0 ? 0 : (1 + below(r, 64)) * GIB;
    if (below(r, 8) == 0) {
        q->gpu_models = below(r, 2) ? models_a : models_b;
        q->ngpu_models = q->gpu_models == models_a ? 1 : 2;
    }
    if (below(r, 8) == 0) {
        q->node_selector = below(r, 2) ? zone_a : zone_b;
        q->nnode_selector = 1;
    }
}

struct world {
    char names[70][24]; /* job names: r<id> running, p<id> pending */
    struct ts_sched_department deps[2];
    struct ts_sched_project projs[6];
    struct ts_sched_node nodes[6];
    struct ts_sched_gpu gpus[6 * 8];
    struct ts_sched_running run[40];
    struct ts_sched_slot slots[40][TS_SCHED_MAX_DEVICES];
    struct ts_sched_pending pend[30];
    struct ts_sched_snapshot s;
};

static void random_world(uint64_t seed, struct world *w)
{
    struct rng r = {seed};
    memset(w, 0, sizeof(*w));
    struct ts_sched_snapshot *s = &w->s;
    s->now = 10000;
    s->config.min_runtime_s = below(&r, 3) == 0 ? 300 : 0;
    s->config.usage_half_life_s = below(&r, 3) == 0 ? 3600 : 0;
    static const struct quota_draw deps = {8, 1, 3, 8}, projs = {9, 2, 3, 6};
    draw_departments(&r, s, w->deps, &deps);
    draw_projects(&r, s, w->projs, 1, 5, &projs);
    s->nnodes = 1 + (size_t)below(&r, 5);
    for (size_t i = 0; i < s->nnodes; i++) {
        struct ts_sched_node *n = &w->nodes[i];
        n->id = (int64_t)i + 1;
        n->name = names[i];
        n->ready = below(&r, 8) != 0;
        n->cpu = 16 + 16 * below(&r, 4);
        n->memory_bytes = (64 + 64 * below(&r, 4)) * GIB;
        n->labels = below(&r, 2) ? zone_a : zone_b;
        n->nlabels = 1;
        n->swap_free_bytes = below(&r, 3) == 0 ? (int64_t)below(&r, 200) * GIB : 0;
        /* not drawn from r, so that the walks stay those the README counts */
        n->swap_resolver = n->swap_free_bytes > 0 && i % 2 == 0;
        int ng = 1 + below(&r, 8);
        const char *model = below(&r, 3) == 0 ? "l4" : "a100";
        int64_t mem = model[0] == 'l' ? 24 * GIB : 80 * GIB;
        int64_t res = below(&r, 2) ? 2 * GIB : 0;
        for (int k = 0; k < ng; k++) {
            struct ts_sched_gpu *g = &w->gpus[s->ngpus++];
            g->node = (int)i;
            g->index = k;
            g->model = model;
            g->memory_bytes = mem;
            g->reserve_bytes = res;
        }
    }
    s->nodes = w->nodes;
    s->gpus = w->gpus;
    /* running jobs: placed on a valid state by the placement API */
    struct ts_sched_cluster *c = ts_sched_cluster_new(s);
    assert_non_null(c);
    int want = below(&r, 40);
    for (int i = 0; i < want && s->nrunning < 40; i++) {
        struct ts_sched_running *j = &w->run[s->nrunning];
        random_request(&r, &j->request);
        j->request.refuses_swap = s->nrunning % 5 == 4; /* never suspended */
        int node;
        size_t ns;
        if (!ts_sched_cluster_place(c, ts_sched_strategy_find(strategies[below(&r, 3)]),
                                    &j->request, &node, w->slots[s->nrunning], &ns))
            continue;
        if (!w->nodes[node].ready)
            continue;
        ts_sched_cluster_commit(c, &j->request, node, w->slots[s->nrunning], ns);
        j->id = (int64_t)s->nrunning + 1;
        snprintf(w->names[s->nrunning], sizeof(w->names[0]), "r%lld", (long long)j->id);
        j->name = w->names[s->nrunning];
        j->project = below(&r, (int)s->nprojects);
        j->priority = 10 * below(&r, 10);
        j->preemptible = below(&r, 4) != 0;
        j->node = node;
        j->slots = w->slots[s->nrunning];
        j->nslots = ns;
        j->started_at = s->now - below(&r, 2000);
        s->nrunning++;
    }
    ts_sched_cluster_free(c);
    s->running = w->run;
    s->npending = (size_t)below(&r, 30);
    for (size_t i = 0; i < s->npending; i++) {
        struct ts_sched_pending *j = &w->pend[i];
        random_request(&r, &j->request);
        j->id = 100 + (int64_t)i;
        snprintf(w->names[40 + i], sizeof(w->names[0]), "p%lld", (long long)j->id);
        j->name = w->names[40 + i];
        j->project = below(&r, (int)s->nprojects);
        j->priority = 10 * below(&r, 10);
        j->preemptible = below(&r, 4) != 0;
        j->submitted_at = below(&r, 10000);
        j->suspended_node = -1;
        j->request.refuses_swap = i % 5 == 3;
    }
    s->pending = w->pend;
}

static void dump_snapshot(const struct ts_sched_snapshot *s)
{
    json_t *j = ts_sched_snapshot_to_json(s);
    char *t = json_dumps(j, JSON_INDENT(1));
    fprintf(stderr, "snapshot:\n%s\n", t);
    free(t);
    json_decref(j);
}

/* TS_SCHED_SAVE_UNSTABLE=DIR: each snapshot whose next cycle stops a job is
 * written to DIR/unstable-K.STEP-STRATEGY.json, for `tessera-sim minimize`. */
static void save_snapshot(const char *name, const struct ts_sched_snapshot *s)
{
    const char *dir = getenv("TS_SCHED_SAVE_UNSTABLE");
    if (dir == NULL)
        return;
    char path[4096];
    snprintf(path, sizeof(path), "%s/unstable-%s-%s.json", dir, name, s->config.strategy);
    json_t *j = ts_sched_snapshot_to_json(s);
    if (json_dump_file(j, path, JSON_INDENT(1)) != 0)
        fprintf(stderr, "could not write %s\n", path);
    json_decref(j);
}

/* TS_SCHED_DUMP_RESULTS=FILE: every cycle's result, one line each, so that
 * two builds can be compared decision for decision (a change meant to be
 * faster, not different). */
static void dump_result(const char *what, const struct ts_sched_snapshot *s,
                        const struct ts_sched_result *r)
{
    static FILE *f;
    const char *path = getenv("TS_SCHED_DUMP_RESULTS");
    if (path == NULL)
        return;
    if (f == NULL)
        f = fopen(path, "w");
    assert_non_null(f);
    json_t *j = ts_sched_result_to_json(s, r);
    char *t = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    fprintf(f, "%s %s\n", what, t);
    fflush(f);
    free(t);
    json_decref(j);
}

#define MAX_SHOWN 20
#define STEPS 3                         /* cycles per walk */
static int unstable[3];                 /* per strategy: cycles whose next cycle stopped a job */
static int unsettled[3];                /* per strategy: cycles that ran out of passes */
static int cycles[3];                   /* per strategy */
static int max_passes[3];               /* per strategy: the most passes a cycle took */
static char failing[3][MAX_SHOWN * 24]; /* their cases, as k.step */

/* Whether the cycle on the state r produces from s stops a job; prints the
 * first stop. */
static bool next_cycle_stops(const char *what, const struct ts_sched_snapshot *s,
                             const struct ts_sched_result *r)
{
    struct ts_error err = {0};
    struct ts_sched_result *r3 = NULL;
    struct ts_arena *ar = ts_arena_new();
    struct ts_sched_snapshot nx;
    assert_non_null(ar);
    assert_int_equal(ts_sched_apply(s, r, ar, &nx, &err), TS_OK);
    assert_int_equal(ts_sched_decide(&nx, &r3, &err), TS_OK);
    if (ts_sched_check(&nx, r3, &err) != TS_OK) {
        dump_snapshot(&nx);
        fail_msg("%s, next cycle: %s", what, err.message);
    }
    bool stops = false;
    for (size_t i = 0; i < r3->ndecisions && !stops; i++) {
        const struct ts_sched_decision *d = &r3->decisions[i];
        if (d->action == TS_SCHED_BIND)
            continue;
        stops = true;
        print_message("%s, %d passes: the next cycle stops job %lld: %s\n", what, r->passes,
                      (long long)d->job_id, d->message);
    }
    ts_sched_result_free(r3);
    ts_arena_free(ar);
    return stops;
}

static void note_failure(size_t st, int k, int step)
{
    size_t len = strlen(failing[st]);
    if (len + 24 < sizeof(failing[st]))
        snprintf(failing[st] + len, sizeof(failing[st]) - len, " %d.%d", k, step);
}

/* One cycle of a walk: every invariant; returns the result (new). */
static struct ts_sched_result *check_cycle(int k, int step, size_t st,
                                           const struct ts_sched_snapshot *s)
{
    char what[128];
    snprintf(what, sizeof(what), "case %d step %d (%s)", k, step, s->config.strategy);
    struct ts_error err = {0};
    struct ts_sched_result *r = NULL, *r2 = NULL;
    if (ts_sched_decide(s, &r, &err) != TS_OK) {
        dump_snapshot(s);
        fail_msg("%s: %s", what, err.message);
    }
    if (ts_sched_check(s, r, &err) != TS_OK) {
        dump_snapshot(s);
        fail_msg("%s: %s", what, err.message);
    }
    assert_int_equal(ts_sched_decide(s, &r2, &err), TS_OK);
    json_t *a = ts_sched_result_to_json(s, r), *b = ts_sched_result_to_json(s, r2);
    if (!json_equal(a, b)) {
        dump_snapshot(s);
        fail_msg("%s: two cycles on one snapshot decided differently", what);
    }
    json_decref(a);
    json_decref(b);
    ts_sched_result_free(r2);
    dump_result(what, s, r);
    cycles[st]++;
    if (r->passes > max_passes[st])
        max_passes[st] = r->passes;
    bool bad = false;
    if (r->passes >= 16) {
        print_message("%s: the cycle ran out of passes\n", what);
        unsettled[st]++;
        bad = true;
    }
    if (next_cycle_stops(what, s, r)) {
        unstable[st]++;
        bad = true;
    }
    if (bad) {
        note_failure(st, k, step);
        char name[64];
        snprintf(name, sizeof(name), "%d.%d", k, step);
        save_snapshot(name, s);
    }
    return r;
}

/* The state after r, then some time: running jobs end, new jobs arrive. */
static void next_step(struct rng *g, const struct ts_sched_snapshot *s,
                      const struct ts_sched_result *r, int step, struct ts_arena *a,
                      struct ts_sched_snapshot *out)
{
    struct ts_error err = {0};
    struct ts_sched_snapshot nx;
    assert_int_equal(ts_sched_apply(s, r, a, &nx, &err), TS_OK);
    *out = nx;
    out->now = nx.now + 1 + below(g, 600);
    struct ts_sched_running *run = ts_arena_alloc(a, (nx.nrunning + 1) * sizeof(*run));
    size_t narrive = (size_t)below(g, 5);
    struct ts_sched_pending *pen = ts_arena_alloc(a, (nx.npending + narrive + 1) * sizeof(*pen));
    assert_true(run != NULL && pen != NULL);
    out->nrunning = 0;
    for (size_t i = 0; i < nx.nrunning; i++) {
        if (below(g, 5) == 0)
            continue; /* one in five ends */
        struct ts_sched_running *j = &run[out->nrunning++];
        *j = nx.running[i];
        /* slots of jobs just placed are the result's: copied, as it is freed */
        struct ts_sched_slot *sl = ts_arena_alloc(a, (j->nslots + 1) * sizeof(*sl));
        assert_non_null(sl);
        if (j->nslots > 0)
            memcpy(sl, j->slots, j->nslots * sizeof(*sl));
        j->slots = sl;
    }
    memcpy(pen, nx.pending, nx.npending * sizeof(*pen));
    out->npending = nx.npending;
    for (size_t i = 0; i < narrive; i++) {
        struct ts_sched_pending *j = &pen[out->npending++];
        memset(j, 0, sizeof(*j));
        random_request(g, &j->request);
        j->id = 1000 * (step + 1) + (int64_t)i;
        char name[24];
        snprintf(name, sizeof(name), "p%lld", (long long)j->id);
        j->name = ts_arena_strdup(a, name);
        j->project = below(g, (int)s->nprojects);
        j->priority = 10 * below(g, 10);
        j->preemptible = below(g, 4) != 0;
        j->submitted_at = out->now - below(g, 100);
        j->suspended_node = -1;
        j->request.refuses_swap = i % 5 == 2;
    }
    out->running = run;
    out->pending = pen;
}

/* TS_SCHED_RANDOM_CASES (default 3000) walks, case k from seed 0xC0FFEE + k,
 * k from TS_SCHED_RANDOM_FIRST (default 0): for every strategy, a random
 * snapshot and STEPS cycles, each on the state the previous one's decisions
 * produce after some jobs ended and others arrived (so suspended jobs and
 * jobs placed a moment ago are in them). A failing cycle is printed as
 * k.step: rerun its walk alone with TS_SCHED_RANDOM_FIRST=k
 * TS_SCHED_RANDOM_CASES=1, and TS_SCHED_SAVE_UNSTABLE=DIR writes its
 * snapshot for `tessera-sim minimize`. */
static void random_snapshots_keep_every_invariant_with_every_strategy(void **state)
{
    (void)state;
    const char *env = getenv("TS_SCHED_RANDOM_CASES");
    int cases = env ? atoi(env) : 3000;
    int first = getenv("TS_SCHED_RANDOM_FIRST") ? atoi(getenv("TS_SCHED_RANDOM_FIRST")) : 0;
    struct world *w = malloc(sizeof(*w));
    assert_non_null(w);
    for (int k = first; k < first + cases; k++) {
        random_world(0xC0FFEEULL + (uint64_t)k, w);
        for (size_t st = 0; st < 3; st++) {
            struct rng g = {0xBADC0DEULL + (uint64_t)k};
            struct ts_arena *a = ts_arena_new();
            assert_non_null(a);
            struct ts_sched_snapshot s = w->s;
            s.config.strategy = strategies[st];
            for (int step = 0; step < STEPS; step++) {
                struct ts_sched_result *r = check_cycle(k, step, st, &s);
                if (step + 1 < STEPS)
                    next_step(&g, &s, r, step, a, &s);
                ts_sched_result_free(r);
            }
            ts_arena_free(a);
        }
    }
    free(w);
    int bad = 0;
    for (size_t st = 0; st < 3; st++) {
        print_message("%s: %d cycles (at most %d passes); %d ran out of passes, %d were followed "
                      "by a cycle that stopped a job%s%s\n",
                      strategies[st], cycles[st], max_passes[st], unsettled[st], unstable[st],
                      failing[st][0] ? ":" : "", failing[st]);
        bad += unsettled[st] + unstable[st];
    }
    /* stability: a cycle on the state the decisions produce stops nothing */
    assert_int_equal(bad, 0);
}

/* ---- quotas are guarantees ----------------------------------------------
 *
 * Walks of another kind, where the property is exact: every job of a walk
 * has the same size (one whole GPU, or a portion of 1/2 or 1/4), asks no
 * CPU or host memory and no labels, and no node has swap room, so one
 * victim always makes room for one job, and the victim search cannot miss
 * a set that a look at each job would find. Random departments, quotas
 * (sold beyond the GPUs or not), weights, limits, priorities, usage,
 * minimum runtimes, non-preemptible and protected jobs, nodes not ready.
 *
 * On the state each cycle's decisions produce (stops take effect at once in
 * these walks: the victims' grace is not modelled), no project P that has a
 * pending job and would stay within its deserved quota with it (allocation
 * + size <= min(quota, demand, limit), fairshare.c's numbers taken again
 * here from the state, and its department's too unless the victim is of the
 * same department; under its department's limit) is left with
 *   - room for the job on a ready node, or
 *   - a running job x of another project V, preemptible and past its
 *     minimum runtime, on a ready node, such that V stays at or above its
 *     deserved quota without x, and V's department, where it is not P's,
 *     at or above the department's, whatever the fair shares say.
 * That is: a project within its quota reaches min(quota, demand), short by
 * less than one job, in one cycle wherever preemptible jobs of projects
 * above their quotas hold what it lacks. The other invariants and
 * stability are checked on every cycle as in the walks above. */

struct qworld {
    struct ts_sched_department deps[2];
    struct ts_sched_project projs[5];
    struct ts_sched_node nodes[4];
    struct ts_sched_gpu gpus[4 * 8];
    struct ts_sched_running run[32];
    struct ts_sched_slot slots[32][1];
    struct ts_sched_pending pend[20];
    char names[52][24];
    struct ts_sched_snapshot s;
    struct ts_sched_request req; /* every job's */
};

static void quota_world(uint64_t seed, struct qworld *w)
{
    struct rng r = {seed};
    memset(w, 0, sizeof(*w));
    struct ts_sched_snapshot *s = &w->s;
    switch (below(&r, 3)) {
    case 0:
        w->req.kind = TS_SCHED_GPU_COUNT;
        w->req.count = 1;
        break;
    default:
        w->req.kind = TS_SCHED_GPU_PORTION;
        w->req.portion = below(&r, 2) ? 0.5 : 0.25;
        w->req.devices = 1;
        break;
    }
    s->now = 10000;
    s->config.min_runtime_s = below(&r, 3) == 0 ? 300 : 0;
    s->config.usage_half_life_s = below(&r, 3) == 0 ? 3600 : 0;
    static const struct quota_draw deps = {9, 2, 4, 8}, projs = {9, 2, 4, 6};
    draw_departments(&r, s, w->deps, &deps);
    draw_projects(&r, s, w->projs, 2, 4, &projs);
    s->nnodes = 1 + (size_t)below(&r, 4);
    for (size_t i = 0; i < s->nnodes; i++) {
        struct ts_sched_node *n = &w->nodes[i];
        n->id = (int64_t)i + 1;
        n->name = names[i];
        n->ready = below(&r, 8) != 0;
        n->cpu = 64;
        n->memory_bytes = 512 * GIB;
        int ng = 1 + below(&r, 8);
        for (int k = 0; k < ng; k++) {
            struct ts_sched_gpu *g = &w->gpus[s->ngpus++];
            g->node = (int)i;
            g->index = k;
            g->model = "a100";
            g->memory_bytes = 80 * GIB;
        }
    }
    s->nodes = w->nodes;
    s->gpus = w->gpus;
    struct ts_sched_cluster *c = ts_sched_cluster_new(s);
    assert_non_null(c);
    int want = below(&r, 33);
    for (int i = 0; i < want && s->nrunning < 32; i++) {
        struct ts_sched_running *j = &w->run[s->nrunning];
        j->request = w->req;
        int node;
        size_t ns;
        if (!ts_sched_cluster_place(c, ts_sched_strategy_find(strategies[below(&r, 3)]),
                                    &j->request, &node, w->slots[s->nrunning], &ns))
            break;
        ts_sched_cluster_commit(c, &j->request, node, w->slots[s->nrunning], ns);
        j->id = (int64_t)s->nrunning + 1;
        snprintf(w->names[s->nrunning], sizeof(w->names[0]), "r%lld", (long long)j->id);
        j->name = w->names[s->nrunning];
        j->project = below(&r, (int)s->nprojects);
        j->priority = 10 * below(&r, 10);
        j->preemptible = below(&r, 4) != 0;
        j->node = node;
        j->slots = w->slots[s->nrunning];
        j->nslots = ns;
        j->started_at = s->now - below(&r, 2000);
        s->nrunning++;
    }
    ts_sched_cluster_free(c);
    s->running = w->run;
    s->npending = (size_t)below(&r, 21);
    for (size_t i = 0; i < s->npending; i++) {
        struct ts_sched_pending *j = &w->pend[i];
        j->request = w->req;
        j->id = 100 + (int64_t)i;
        snprintf(w->names[32 + i], sizeof(w->names[0]), "p%lld", (long long)j->id);
        j->name = w->names[32 + i];
        j->project = below(&r, (int)s->nprojects);
        j->priority = 10 * below(&r, 10);
        j->preemptible = below(&r, 4) != 0;
        j->submitted_at = below(&r, 10000);
        j->suspended_node = -1;
    }
    s->pending = w->pend;
}

/* The state after r, then some time: running jobs end, jobs of the same
 * size arrive. */
static void quota_next_step(struct rng *g, const struct ts_sched_snapshot *s,
                            const struct ts_sched_result *r, const struct ts_sched_request *req,
                            int step, struct ts_arena *a, struct ts_sched_snapshot *out)
{
    next_step(g, s, r, step, a, out);
    for (size_t i = 0; i < out->npending; i++) {
        struct ts_sched_pending *p = (struct ts_sched_pending *)&out->pending[i];
        p->request = *req; /* the arrivals' random requests made equal */
    }
}

static int quota_violations, quota_checked, quota_tier1;

static bool stoppable_now(const struct ts_sched_snapshot *s, const struct ts_sched_running *x)
{
    int64_t m = s->projects[x->project].min_runtime_s;
    if (m < 0)
        m = s->config.min_runtime_s;
    return x->preemptible && !(m > 0 && s->now - x->started_at < m);
}

/* The property above on the state r produces from s. */
static void quota_served(const char *what, const struct ts_sched_snapshot *s,
                         const struct ts_sched_result *r, double size)
{
    for (size_t i = 0; i < r->ndecisions; i++)
        quota_tier1 += r->decisions[i].action == TS_SCHED_BIND &&
                       strstr(r->decisions[i].message, "within quota") != NULL;
    struct ts_error err = {0};
    struct ts_arena *ar = ts_arena_new();
    struct ts_sched_snapshot n;
    assert_non_null(ar);
    assert_int_equal(ts_sched_apply(s, r, ar, &n, &err), TS_OK);
    size_t np = n.nprojects, nd = n.ndepartments;
    double alloc[8] = {0}, demand[8] = {0}, des[8], fair[8], dalloc[4] = {0}, ddem[4] = {0},
           ddes[4];
    int npend[8] = {0};
    double capacity = 0, used[4 * 8] = {0};
    for (size_t k = 0; k < n.ngpus; k++)
        capacity += n.nodes[n.gpus[k].node].ready;
    for (size_t i = 0; i < n.nrunning; i++) {
        const struct ts_sched_running *x = &n.running[i];
        double gpus = 0;
        for (size_t k = 0; k < x->nslots; k++) {
            const struct ts_sched_gpu *g = &n.gpus[x->slots[k].gpu];
            double part =
                (double)x->slots[k].memory_bytes / (double)(g->memory_bytes - g->reserve_bytes);
            gpus += part;
            used[x->slots[k].gpu] += part;
        }
        alloc[x->project] += gpus;
        if (n.projects[x->project].department >= 0)
            dalloc[n.projects[x->project].department] += gpus;
    }
    for (size_t i = 0; i < n.npending; i++) {
        demand[n.pending[i].project] += size;
        npend[n.pending[i].project]++;
    }
    for (size_t p = 0; p < np; p++) {
        demand[p] += alloc[p];
        const struct ts_sched_project *sp = &n.projects[p];
        if (sp->department >= 0)
            ddem[sp->department] +=
                sp->has_limit && sp->limit_gpus < demand[p] ? sp->limit_gpus : demand[p];
    }
    ts_sched_fairshare(n.departments, nd, n.projects, np, demand, capacity,
                       n.config.usage_half_life_s, des, fair);
    for (size_t d = 0; d < nd; d++) {
        const struct ts_sched_department *sd = &n.departments[d];
        ddes[d] = ddem[d] < sd->quota_gpus ? ddem[d] : sd->quota_gpus;
        if (sd->has_limit && sd->limit_gpus < ddes[d])
            ddes[d] = sd->limit_gpus;
    }
    const double eps = 1e-9;
    bool room = false;
    for (size_t k = 0; k < n.ngpus && !room; k++)
        room = n.nodes[n.gpus[k].node].ready && 1.0 - used[k] >= size - eps;
    for (size_t p = 0; p < np; p++) {
        const struct ts_sched_project *sp = &n.projects[p];
        int d = sp->department;
        if (npend[p] == 0 || alloc[p] + size > des[p] + eps)
            continue;
        if (d >= 0 && n.departments[d].has_limit &&
            dalloc[d] + size > n.departments[d].limit_gpus + 1e-6)
            continue;
        quota_checked++;
        bool dep_within = d < 0 || dalloc[d] + size <= ddes[d] + eps;
        const char *why = room ? "a ready node has room for it" : NULL;
        const struct ts_sched_running *victim = NULL;
        for (size_t i = 0; i < n.nrunning && why == NULL; i++) {
            const struct ts_sched_running *x = &n.running[i];
            int v = x->project, e = n.projects[v].department;
            bool inside = d >= 0 && e == d;
            if (v == (int)p || !n.nodes[x->node].ready || !stoppable_now(&n, x))
                continue;
            if (alloc[v] - size < des[v] - eps)
                continue; /* V would drop below its quota */
            if (!inside && (!dep_within || (e >= 0 && dalloc[e] - size < ddes[e] - eps)))
                continue; /* P's department would pass its quota, or V's drop below */
            victim = x;
            why = "a preemptible job of a project above its quota could make room";
        }
        if (why == NULL)
            continue;
        quota_violations++;
        if (quota_violations <= MAX_SHOWN) {
            print_message("%s: project \"%s\" (%g of quota %g, deserved %g, fair share %g) waits "
                          "within its quota although %s%s%s\n",
                          what, sp->name, alloc[p], sp->quota_gpus, des[p], fair[p], why,
                          victim ? ": " : "", victim ? victim->name : "");
            if (quota_violations == 1)
                dump_snapshot(s);
        }
    }
    ts_arena_free(ar);
}

static void projects_within_their_quota_reach_it_in_one_cycle(void **state)
{
    (void)state;
    const char *env = getenv("TS_SCHED_RANDOM_CASES");
    int cases = env ? atoi(env) : 3000;
    int first = getenv("TS_SCHED_RANDOM_FIRST") ? atoi(getenv("TS_SCHED_RANDOM_FIRST")) : 0;
    struct qworld *w = malloc(sizeof(*w));
    assert_non_null(w);
    memset(cycles, 0, sizeof(cycles));
    memset(max_passes, 0, sizeof(max_passes));
    memset(unstable, 0, sizeof(unstable));
    memset(unsettled, 0, sizeof(unsettled));
    memset(failing, 0, sizeof(failing));
    for (int k = first; k < first + cases; k++) {
        quota_world(0x9A07AULL + (uint64_t)k, w);
        double size = w->req.kind == TS_SCHED_GPU_COUNT ? 1.0 : w->req.portion;
        for (size_t st = 0; st < 3; st++) {
            struct rng g = {0x5EED5ULL + (uint64_t)k};
            struct ts_arena *a = ts_arena_new();
            assert_non_null(a);
            struct ts_sched_snapshot s = w->s;
            s.config.strategy = strategies[st];
            for (int step = 0; step < STEPS; step++) {
                struct ts_sched_result *r = check_cycle(k, step, st, &s);
                char what[128];
                snprintf(what, sizeof(what), "quota case %d step %d (%s)", k, step,
                         s.config.strategy);
                quota_served(what, &s, r, size);
                if (step + 1 < STEPS)
                    quota_next_step(&g, &s, r, &w->req, step, a, &s);
                ts_sched_result_free(r);
            }
            ts_arena_free(a);
        }
    }
    free(w);
    int bad = 0;
    for (size_t st = 0; st < 3; st++) {
        print_message("quota walks, %s: %d cycles (at most %d passes); %d ran out of passes, %d "
                      "were followed by a cycle that stopped a job%s%s\n",
                      strategies[st], cycles[st], max_passes[st], unsettled[st], unstable[st],
                      failing[st][0] ? ":" : "", failing[st]);
        bad += unsettled[st] + unstable[st];
    }
    print_message("quota walks: %d binds by reclaim within quota; %d projects within their quota "
                  "with a job pending checked after their cycle, %d left short\n",
                  quota_tier1, quota_checked, quota_violations);
    assert_int_equal(bad, 0);
    assert_int_equal(quota_violations, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_snapshots_keep_every_invariant_with_every_strategy),
        cmocka_unit_test(projects_within_their_quota_reach_it_in_one_cycle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
