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

int sim_variant_main(int argc, char **argv)
{
    struct vopts o = {0};
    if (parse(argc, argv, &o) != 0)
        return 2;
    struct ts_arena *a = ts_arena_new();
    struct ts_sched_trace_pod *src, *spec_src;
    size_t nsrc, nspec;
    size_t *out = NULL, *uses = NULL;
    const char **spec = NULL;
    struct deck deck[NKINDS] = {{0}}, specs[NKINDS] = {{0}}, anyspec = {0};
    FILE *f = NULL;
    int rc = 1;
    if (a == NULL || read_pods(o.pods, a, &src, &nsrc) != TS_OK)
        goto out;
    spec_src = src;
    nspec = nsrc;
    if (o.specs_from && read_pods(o.specs_from, a, &spec_src, &nspec) != TS_OK)
        goto out;
    for (int k = 0; k < NKINDS; k++) {
        deck[k].card = ts_arena_alloc(a, (nsrc ? nsrc : 1) * sizeof(size_t));
        specs[k].card = ts_arena_alloc(a, (nspec ? nspec : 1) * sizeof(size_t));
    }
    anyspec.card = ts_arena_alloc(a, (nspec ? nspec : 1) * sizeof(size_t));
    if (anyspec.card == NULL || deck[NKINDS - 1].card == NULL || specs[NKINDS - 1].card == NULL)
        goto nomem;
    double sgpus[NKINDS] = {0}, src_gpus = 0;
    for (size_t i = 0; i < nsrc; i++) {
        int k = kind_of(&src[i]);
        deck[k].card[deck[k].n++] = i;
        sgpus[k] += gpus_of(&src[i]);
        src_gpus += gpus_of(&src[i]);
    }
    for (int k = 0; k < NKINDS; k++)
        deck[k].next = deck[k].n; /* shuffled at the first draw */
    for (size_t i = 0; i < nspec; i++) {
        const struct ts_sched_trace_pod *p = &spec_src[i];
        int k = kind_of(p);
        if (k == K_CPU || p->gpu_spec == NULL || p->gpu_spec[0] == '\0')
            continue;
        specs[k].card[specs[k].n++] = i;
        anyspec.card[anyspec.n++] = i;
    }
    for (int k = 0; k < NKINDS; k++)
        specs[k].next = specs[k].n;
    anyspec.next = anyspec.n;
    size_t ngpu_src = deck[K_SHARE].n + deck[K_ONE].n + deck[K_MULTI].n;
    if (ngpu_src == 0) {
        fprintf(stderr, "tessera-sim variant: %s has no GPU pods\n", o.pods);
        goto out;
    }
    if (o.gpuspec > 0 && anyspec.n == 0) {
        fprintf(stderr, "tessera-sim variant: %s has no gpu_spec to draw from: give --specs-from\n",
                o.specs_from ? o.specs_from : o.pods);
        goto out;
    }
    struct sim_rng rng = {(uint64_t)o.seed};
    bool resample = o.share[K_SHARE] >= 0 || o.share[K_MULTI] >= 0;
    size_t ngpu = resample ? (o.gpu_pods > 0 ? (size_t)o.gpu_pods : ngpu_src) : ngpu_src;
    size_t ncpu = deck[K_CPU].n;
    if (o.share[K_CPU] >= 0)
        ncpu = (size_t)llround(o.share[K_CPU] * (double)ngpu / (1.0 - o.share[K_CPU]));
    if (ncpu > 0 && deck[K_CPU].n == 0) {
        fprintf(stderr, "tessera-sim variant: %s has no CPU-only pods to draw from\n", o.pods);
        goto out;
    }
    size_t n = ngpu + ncpu;
    out = malloc((n ? n : 1) * sizeof(size_t));
    spec = calloc(n ? n : 1, sizeof(char *));
    uses = calloc(nsrc ? nsrc : 1, sizeof(size_t));
    if (out == NULL || spec == NULL || uses == NULL)
        goto nomem;
    size_t m = 0;
    if (!resample) {
        for (size_t i = 0; i < nsrc; i++)
            if (kind_of(&src[i]) != K_CPU)
                out[m++] = i;
    } else {
        double target[NKINDS] = {0};
        /* a share not asked for keeps its proportion to the one-GPU pods' */
        target[K_SHARE] = o.share[K_SHARE];
        target[K_MULTI] = o.share[K_MULTI];
        if (target[K_SHARE] < 0)
            target[K_SHARE] = (1.0 - target[K_MULTI]) * sgpus[K_SHARE] /
                              fmax(sgpus[K_SHARE] + sgpus[K_ONE], 1e-9);
        if (target[K_MULTI] < 0)
            target[K_MULTI] = (1.0 - target[K_SHARE]) * sgpus[K_MULTI] /
                              fmax(sgpus[K_MULTI] + sgpus[K_ONE], 1e-9);
        target[K_ONE] = 1.0 - target[K_SHARE] - target[K_MULTI];
        if (target[K_ONE] < -1e-9) {
            fprintf(stderr,
                    "tessera-sim variant: the sharing and multi-GPU shares add up to more "
                    "than 1: %g\n",
                    target[K_SHARE] + target[K_MULTI]);
            goto out;
        }
        for (int k = K_SHARE; k <= K_MULTI; k++)
            if (target[k] > 1e-9 && deck[k].n == 0) {
                fprintf(stderr, "tessera-sim variant: %s has no %s pods to draw from\n", o.pods,
                        kind_name(k));
                goto out;
            }
        double got[NKINDS] = {0}, total = 0;
        for (size_t i = 0; i < ngpu; i++) {
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
            size_t pick = deck_draw(&deck[best], &rng);
            got[best] += gpus_of(&src[pick]);
            total += gpus_of(&src[pick]);
            out[m++] = pick;
        }
    }
    if (o.share[K_CPU] >= 0) {
        for (size_t i = 0; i < ncpu; i++)
            out[m++] = deck_draw(&deck[K_CPU], &rng);
    } else {
        for (size_t i = 0; i < nsrc; i++)
            if (kind_of(&src[i]) == K_CPU)
                out[m++] = i;
    }
    for (size_t i = 0; i < n; i++)
        spec[i] = src[out[i]].gpu_spec ? src[out[i]].gpu_spec : "";
    if (o.gpuspec >= 0) {
        /* exactly round(F ngpu) of the GPU pods (out[0..ngpu)) constrained */
        size_t *idx = malloc((ngpu ? ngpu : 1) * sizeof(size_t));
        if (idx == NULL)
            goto nomem;
        for (size_t i = 0; i < ngpu; i++) {
            idx[i] = i;
            spec[i] = "";
        }
        size_t want = (size_t)llround(o.gpuspec * (double)ngpu);
        for (size_t i = 0; i < want; i++) { /* a partial Fisher-Yates */
            size_t j = i + sim_rng_below(&rng, ngpu - i);
            size_t t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
            int k = kind_of(&src[out[idx[i]]]);
            struct deck *d = specs[k].n > 0 ? &specs[k] : &anyspec;
            spec[idx[i]] = spec_src[deck_draw(d, &rng)].gpu_spec;
        }
        free(idx);
    }
    /* shuffle pods and their specs together */
    for (size_t i = n; i > 1; i--) {
        size_t j = sim_rng_below(&rng, i);
        size_t t = out[i - 1];
        out[i - 1] = out[j];
        out[j] = t;
        const char *s = spec[i - 1];
        spec[i - 1] = spec[j];
        spec[j] = s;
    }
    f = o.out ? fopen(o.out, "w") : stdout;
    if (f == NULL) {
        fprintf(stderr, "tessera-sim variant: could not create %s\n", o.out);
        goto out;
    }
    fprintf(f, "# tessera-sim variant --seed %lld", o.seed);
    if (o.share[K_SHARE] >= 0)
        fprintf(f, " --gpushare %g", o.share[K_SHARE]);
    if (o.share[K_MULTI] >= 0)
        fprintf(f, " --multigpu %g", o.share[K_MULTI]);
    if (o.share[K_CPU] >= 0)
        fprintf(f, " --cpu-only %g", o.share[K_CPU]);
    if (o.gpuspec >= 0)
        fprintf(f, " --gpuspec %g", o.gpuspec);
    fprintf(f, "\nname,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n");
    for (size_t i = 0; i < n; i++) {
        const struct ts_sched_trace_pod *p = &src[out[i]];
        size_t u = uses[out[i]]++;
        if (u == 0)
            fprintf(f, "%s", p->name);
        else
            fprintf(f, "%s-%zu", p->name, u);
        fprintf(f, ",%lld,%lld,%d,%d,%s\n", (long long)p->cpu_milli, (long long)p->memory_mib,
                p->num_gpu, p->gpu_milli, spec[i]);
    }
    if (ferror(f) || (f != stdout && fclose(f) != 0)) {
        f = NULL;
        fprintf(stderr, "tessera-sim variant: could not write %s\n", o.out ? o.out : "stdout");
        goto out;
    }
    f = NULL;
    rc = 0;
    goto out;
nomem:
    fprintf(stderr, "tessera-sim variant: out of memory\n");
out:
    if (f != NULL && f != stdout)
        fclose(f);
    free(out);
    free(spec);
    free(uses);
    ts_arena_free(a);
    return rc;
}
