/*
 * variant.c - `tessera-sim variant`: a variant of an "openb" pod list with
 * one share changed, made the way the trace variants of Weng et al. (ATC
 * '23) are: by resampling the pods of the default list.
 *
 *   --gpushare F  share of the GPU request (in GPUs) that comes from sharing
 *                 pods (one GPU, gpu_milli < 1000);
 *   --multigpu F  share of the GPU request that comes from multi-GPU pods;
 *   --cpu-only F  share of the pods that ask for no GPU;
 *   --gpuspec F   share of the GPU pods that carry a GPU model constraint
 *                 (gpu_spec), drawn from the constraints of --specs-from
 *                 (default: the --pods list), from pods of the same kind
 *                 (sharing, one GPU, several) where it has any.
 *
 * Without --gpushare and --multigpu the GPU pods are the source's; with
 * either (the other keeps its proportion to the one-GPU pods' share, as in
 * the paper's gpushare traces), --gpu-pods of them (default: as many as the
 * source has) are drawn
 * one at a time from the kind (sharing, one whole GPU, several GPUs) whose
 * share of the request so far lags its target most, so each share ends
 * within two pods' GPUs of its target. Without --cpu-only the CPU-only pods
 * are the source's; with it, exactly round(F n / (1 - F)) of them for n GPU
 * pods. With --gpuspec exactly round(F n) GPU pods, chosen at random, carry
 * a constraint and the others none. Within a kind, pods are drawn as cards
 * from a shuffled deck, reshuffled when it runs out, so the kind's own mix
 * stays the source's. The output is shuffled. The same arguments and seed
 * give the same file, byte for byte.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/sched/sim/sim.h"

enum { K_SHARE, K_ONE, K_MULTI, K_CPU, NKINDS };

struct deck {
    size_t *card; /* pod indexes */
    size_t n, next;
};

struct vopts {
    const char *pods, *specs_from, *out;
    long long seed;
    double share[NKINDS]; /* --gpushare, (unused), --multigpu, --cpu-only; < 0: keep */
    double gpuspec;       /* < 0: keep */
    long gpu_pods;        /* 0: the source's */
};

static int kind_of(const struct ts_sched_trace_pod *p)
{
    if (p->num_gpu == 0 || p->gpu_milli == 0)
        return K_CPU;
    if (p->num_gpu == 1 && p->gpu_milli < 1000)
        return K_SHARE;
    return p->num_gpu == 1 ? K_ONE : K_MULTI;
}

static double gpus_of(const struct ts_sched_trace_pod *p)
{
    return p->num_gpu * p->gpu_milli / 1000.0;
}

static void shuffle(size_t *x, size_t n, struct sim_rng *r)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = sim_rng_below(r, i);
        size_t t = x[i - 1];
        x[i - 1] = x[j];
        x[j] = t;
    }
}

static size_t deck_draw(struct deck *d, struct sim_rng *r)
{
    if (d->next == d->n) {
        shuffle(d->card, d->n, r);
        d->next = 0;
    }
    return d->card[d->next++];
}

static bool parse_share(const char *a, const char *v, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !(x >= 0 && x <= 1)) {
        fprintf(stderr, "tessera-sim variant: %s must be between 0 and 1: %s\n", a, v);
        return false;
    }
    *out = x;
    return true;
}

static int parse(int argc, char **argv, struct vopts *o)
{
    o->seed = 1;
    o->gpuspec = -1;
    for (int k = 0; k < NKINDS; k++)
        o->share[k] = -1;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            fprintf(stderr, "tessera-sim variant: %s needs a value\n", a);
            return -1;
        }
        bool ok = true;
        if (strcmp(a, "--pods") == 0)
            o->pods = v;
        else if (strcmp(a, "--specs-from") == 0)
            o->specs_from = v;
        else if (strcmp(a, "-o") == 0 || strcmp(a, "--out") == 0)
            o->out = v;
        else if (strcmp(a, "--seed") == 0)
            o->seed = atoll(v);
        else if (strcmp(a, "--gpu-pods") == 0)
            o->gpu_pods = atol(v);
        else if (strcmp(a, "--gpushare") == 0)
            ok = parse_share(a, v, &o->share[K_SHARE]);
        else if (strcmp(a, "--multigpu") == 0)
            ok = parse_share(a, v, &o->share[K_MULTI]);
        else if (strcmp(a, "--cpu-only") == 0)
            ok = parse_share(a, v, &o->share[K_CPU]) && o->share[K_CPU] < 1;
        else if (strcmp(a, "--gpuspec") == 0)
            ok = parse_share(a, v, &o->gpuspec);
        else {
            fprintf(stderr, "tessera-sim variant: unknown option %s\n", a);
            return -1;
        }
        if (!ok)
            return -1;
    }
    if (o->pods == NULL) {
        fprintf(stderr, "tessera-sim variant: --pods is required\n");
        return -1;
    }
    if (o->gpu_pods < 0 || o->gpu_pods > 10000000) {
        fprintf(stderr, "tessera-sim variant: --gpu-pods must be between 1 and 10000000\n");
        return -1;
    }
    return 0;
}

static enum ts_err read_pods(const char *path, struct ts_arena *a, struct ts_sched_trace_pod **p,
                             size_t *n)
{
    struct ts_error err = {0};
    char *buf = NULL;
    size_t len;
    enum ts_err rc = sim_read_file(path, &buf, &len, &err);
    if (rc == TS_OK)
        rc = ts_sched_trace_pods_parse(buf, len, a, p, n, &err);
    if (rc != TS_OK)
        fprintf(stderr, "tessera-sim variant: %s: %s\n", path, err.message);
    free(buf);
    return rc;
}

static const char *kind_name(int k)
{
    static const char *const names[NKINDS] = {"sharing", "one-GPU", "multi-GPU", "CPU-only"};
    return names[k];
}

/* One run: the pods drawn from, their decks by kind, and what is drawn. */
struct variant {
    struct vopts o;
    struct ts_arena *a;
    struct ts_sched_trace_pod *src, *spec_src;
    size_t nsrc, nspec;
    struct deck deck[NKINDS], specs[NKINDS], anyspec;
    double sgpus[NKINDS]; /* the source's GPUs by kind */
    struct sim_rng rng;
    size_t ngpu, ncpu, n; /* pods to write: GPU pods first, then CPU-only */
    size_t *out;          /* the source pod of each */
    const char **spec;    /* its gpu_spec ("" for none) */
    size_t *uses;         /* per source pod: times written, for unique names */
};

/* The source's pods into decks by kind, and those with a gpu_spec into the
 * spec decks. */
static int build_decks(struct variant *v)
{
    for (int k = 0; k < NKINDS; k++) {
        v->deck[k].card = ts_arena_alloc(v->a, (v->nsrc ? v->nsrc : 1) * sizeof(size_t));
        v->specs[k].card = ts_arena_alloc(v->a, (v->nspec ? v->nspec : 1) * sizeof(size_t));
    }
    v->anyspec.card = ts_arena_alloc(v->a, (v->nspec ? v->nspec : 1) * sizeof(size_t));
    if (v->anyspec.card == NULL || v->deck[NKINDS - 1].card == NULL ||
        v->specs[NKINDS - 1].card == NULL)
        return -1;
    for (size_t i = 0; i < v->nsrc; i++) {
        int k = kind_of(&v->src[i]);
        v->deck[k].card[v->deck[k].n++] = i;
        v->sgpus[k] += gpus_of(&v->src[i]);
    }
    for (size_t i = 0; i < v->nspec; i++) {
        const struct ts_sched_trace_pod *p = &v->spec_src[i];
        int k = kind_of(p);
        if (k == K_CPU || p->gpu_spec == NULL || p->gpu_spec[0] == '\0')
            continue;
        v->specs[k].card[v->specs[k].n++] = i;
        v->anyspec.card[v->anyspec.n++] = i;
    }
    for (int k = 0; k < NKINDS; k++) { /* shuffled at the first draw */
        v->deck[k].next = v->deck[k].n;
        v->specs[k].next = v->specs[k].n;
    }
    v->anyspec.next = v->anyspec.n;
    return 0;
}

/* How many pods of each sort to write; refuses what the source cannot give. */
static int count_pods(struct variant *v, bool resample)
{
    const struct vopts *o = &v->o;
    size_t ngpu_src = v->deck[K_SHARE].n + v->deck[K_ONE].n + v->deck[K_MULTI].n;
    if (ngpu_src == 0) {
        fprintf(stderr, "tessera-sim variant: %s has no GPU pods\n", o->pods);
        return -1;
    }
    if (o->gpuspec > 0 && v->anyspec.n == 0) {
        fprintf(stderr, "tessera-sim variant: %s has no gpu_spec to draw from: give --specs-from\n",
                o->specs_from ? o->specs_from : o->pods);
        return -1;
    }
    v->ngpu = resample ? (o->gpu_pods > 0 ? (size_t)o->gpu_pods : ngpu_src) : ngpu_src;
    v->ncpu = v->deck[K_CPU].n;
    if (o->share[K_CPU] >= 0)
        v->ncpu = (size_t)llround(o->share[K_CPU] * (double)v->ngpu / (1.0 - o->share[K_CPU]));
    if (v->ncpu > 0 && v->deck[K_CPU].n == 0) {
        fprintf(stderr, "tessera-sim variant: %s has no CPU-only pods to draw from\n", o->pods);
        return -1;
    }
    v->n = v->ngpu + v->ncpu;
    return 0;
}

/* The GPU pods drawn to the shares asked for: each draw from the kind that
 * lags its target share of GPUs the most. A share not asked for keeps its
 * proportion to the one-GPU pods'. */
static int draw_gpu_pods(struct variant *v, size_t *m)
{
    const struct vopts *o = &v->o;
    double target[NKINDS] = {0};
    target[K_SHARE] = o->share[K_SHARE];
    target[K_MULTI] = o->share[K_MULTI];
    if (target[K_SHARE] < 0)
        target[K_SHARE] = (1.0 - target[K_MULTI]) * v->sgpus[K_SHARE] /
                          fmax(v->sgpus[K_SHARE] + v->sgpus[K_ONE], 1e-9);
    if (target[K_MULTI] < 0)
        target[K_MULTI] = (1.0 - target[K_SHARE]) * v->sgpus[K_MULTI] /
                          fmax(v->sgpus[K_MULTI] + v->sgpus[K_ONE], 1e-9);
    target[K_ONE] = 1.0 - target[K_SHARE] - target[K_MULTI];
    if (target[K_ONE] < -1e-9) {
        fprintf(stderr,
                "tessera-sim variant: the sharing and multi-GPU shares add up to more than 1: %g\n",
                target[K_SHARE] + target[K_MULTI]);
        return -1;
    }
    for (int k = K_SHARE; k <= K_MULTI; k++)
        if (target[k] > 1e-9 && v->deck[k].n == 0) {
            fprintf(stderr, "tessera-sim variant: %s has no %s pods to draw from\n", o->pods,
                    kind_name(k));
            return -1;
        }
    double got[NKINDS] = {0}, total = 0;
    for (size_t i = 0; i < v->ngpu; i++) {
        int best = -1;
        double lag = 0;
        for (int k = K_SHARE; k <= K_MULTI; k++) {
            if (target[k] <= 1e-9)
                continue;
            double l = total > 0 ? target[k] * total - got[k] : target[k];
            if (best < 0 || l > lag) {
                best = k;
                lag = l;
            }
        }
        size_t pick = deck_draw(&v->deck[best], &v->rng);
        got[best] += gpus_of(&v->src[pick]);
        total += gpus_of(&v->src[pick]);
        v->out[(*m)++] = pick;
    }
    return 0;
}

/* Exactly round(F ngpu) of the GPU pods (out[0..ngpu)) constrained, each to
 * a spec drawn from pods of its kind (of any kind when its has none). */
static int assign_specs(struct variant *v)
{
    size_t *idx = malloc((v->ngpu ? v->ngpu : 1) * sizeof(size_t));
    if (idx == NULL)
        return -1;
    for (size_t i = 0; i < v->ngpu; i++) {
        idx[i] = i;
        v->spec[i] = "";
    }
    size_t want = (size_t)llround(v->o.gpuspec * (double)v->ngpu);
    for (size_t i = 0; i < want; i++) { /* a partial Fisher-Yates */
        size_t j = i + sim_rng_below(&v->rng, v->ngpu - i);
        size_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
        int k = kind_of(&v->src[v->out[idx[i]]]);
        struct deck *d = v->specs[k].n > 0 ? &v->specs[k] : &v->anyspec;
        v->spec[idx[i]] = v->spec_src[deck_draw(d, &v->rng)].gpu_spec;
    }
    free(idx);
    return 0;
}

/* Draws every pod and its spec, then shuffles them together. */
static int draw(struct variant *v)
{
    const struct vopts *o = &v->o;
    bool resample = o->share[K_SHARE] >= 0 || o->share[K_MULTI] >= 0;
    if (count_pods(v, resample) != 0)
        return 1;
    v->out = malloc((v->n ? v->n : 1) * sizeof(size_t));
    v->spec = calloc(v->n ? v->n : 1, sizeof(char *));
    v->uses = calloc(v->nsrc ? v->nsrc : 1, sizeof(size_t));
    if (v->out == NULL || v->spec == NULL || v->uses == NULL)
        return -1;
    size_t m = 0;
    if (!resample) {
        for (size_t i = 0; i < v->nsrc; i++)
            if (kind_of(&v->src[i]) != K_CPU)
                v->out[m++] = i;
    } else if (draw_gpu_pods(v, &m) != 0) {
        return 1;
    }
    if (o->share[K_CPU] >= 0) {
        for (size_t i = 0; i < v->ncpu; i++)
            v->out[m++] = deck_draw(&v->deck[K_CPU], &v->rng);
    } else {
        for (size_t i = 0; i < v->nsrc; i++)
            if (kind_of(&v->src[i]) == K_CPU)
                v->out[m++] = i;
    }
    for (size_t i = 0; i < v->n; i++)
        v->spec[i] = v->src[v->out[i]].gpu_spec ? v->src[v->out[i]].gpu_spec : "";
    if (o->gpuspec >= 0 && assign_specs(v) != 0)
        return -1;
    for (size_t i = v->n; i > 1; i--) {
        size_t j = sim_rng_below(&v->rng, i);
        size_t t = v->out[i - 1];
        v->out[i - 1] = v->out[j];
        v->out[j] = t;
        const char *s = v->spec[i - 1];
        v->spec[i - 1] = v->spec[j];
        v->spec[j] = s;
    }
    return 0;
}

/* The pod list, its first line saying how it was made. */
static int write_variant(struct variant *v)
{
    const struct vopts *o = &v->o;
    FILE *f = o->out ? fopen(o->out, "w") : stdout;
    if (f == NULL) {
        fprintf(stderr, "tessera-sim variant: could not create %s\n", o->out);
        return -1;
    }
    fprintf(f, "# tessera-sim variant --seed %lld", o->seed);
    if (o->share[K_SHARE] >= 0)
        fprintf(f, " --gpushare %g", o->share[K_SHARE]);
    if (o->share[K_MULTI] >= 0)
        fprintf(f, " --multigpu %g", o->share[K_MULTI]);
    if (o->share[K_CPU] >= 0)
        fprintf(f, " --cpu-only %g", o->share[K_CPU]);
    if (o->gpuspec >= 0)
        fprintf(f, " --gpuspec %g", o->gpuspec);
    fprintf(f, "\nname,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n");
    for (size_t i = 0; i < v->n; i++) {
        const struct ts_sched_trace_pod *p = &v->src[v->out[i]];
        size_t u = v->uses[v->out[i]]++;
        if (u == 0)
            fprintf(f, "%s", p->name);
        else
            fprintf(f, "%s-%zu", p->name, u);
        fprintf(f, ",%lld,%lld,%d,%d,%s\n", (long long)p->cpu_milli, (long long)p->memory_mib,
                p->num_gpu, p->gpu_milli, v->spec[i]);
    }
    bool bad = ferror(f) != 0;
    if (f != stdout && fclose(f) != 0)
        bad = true;
    if (bad) {
        fprintf(stderr, "tessera-sim variant: could not write %s\n", o->out ? o->out : "stdout");
        return -1;
    }
    return 0;
}

int sim_variant_main(int argc, char **argv)
{
    struct variant v = {0};
    if (parse(argc, argv, &v.o) != 0)
        return 2;
    v.rng = (struct sim_rng){(uint64_t)v.o.seed};
    int rc = 1, r;
    v.a = ts_arena_new();
    if (v.a == NULL || read_pods(v.o.pods, v.a, &v.src, &v.nsrc) != TS_OK)
        goto out;
    v.spec_src = v.src;
    v.nspec = v.nsrc;
    if (v.o.specs_from && read_pods(v.o.specs_from, v.a, &v.spec_src, &v.nspec) != TS_OK)
        goto out;
    if (build_decks(&v) != 0 || (r = draw(&v)) < 0) {
        fprintf(stderr, "tessera-sim variant: out of memory\n");
        goto out;
    }
    if (r == 0 && write_variant(&v) == 0)
        rc = 0;
out:
    free(v.out);
    free(v.spec);
    free(v.uses);
    ts_arena_free(v.a);
    return rc;
}
