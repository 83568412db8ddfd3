/*
 * main.c - tessera-sim: the scheduler core over traces, with no database.
 *
 *   tessera-sim placement --nodes NODES.csv --pods PODS.csv --strategy S ...
 *   tessera-sim replay --nodes NODES.csv --projects P.csv --jobs J.csv ...
 *   tessera-sim generate --out DIR ...
 *   tessera-sim variant --pods PODS.csv [--gpushare F] ... -o OUT.csv
 *   tessera-sim decide SNAPSHOT.json [--strategy S] [--next]
 *   tessera-sim minimize SNAPSHOT.json [--strategy S]
 *
 * See server/sched/README.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/sched/sched_json.h"
#include "server/sched/sim/sim.h"

#define MAX_FILE (512u << 20)

enum ts_err sim_read_file(const char *path, char **out, size_t *len, struct ts_error *err)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ts_error_set(err, TS_ERR_IO, "could not open %s", path);
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    while (buf != NULL) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap)
            break;
        if (cap >= MAX_FILE) {
            free(buf);
            fclose(f);
            return ts_error_set(err, TS_ERR_IO, "%s is larger than %u MiB", path, MAX_FILE >> 20);
        }
        char *nb = malloc(cap * 2 + 1);
        if (nb != NULL)
            memcpy(nb, buf, n);
        free(buf);
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (buf == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory reading %s", path);
    if (bad) {
        free(buf);
        return ts_error_set(err, TS_ERR_IO, "could not read %s", path);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return TS_OK;
}

uint64_t sim_rng_next(struct sim_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double sim_rng_unit(struct sim_rng *r)
{
    return (double)(sim_rng_next(r) >> 11) / 9007199254740992.0;
}

size_t sim_rng_below(struct sim_rng *r, size_t n)
{
    return n ? (size_t)(sim_rng_unit(r) * (double)n) : 0;
}

enum ts_err sim_nodes_snapshot(const struct ts_sched_trace_node *tn, size_t n, struct ts_arena *a,
                               struct ts_sched_snapshot *s, struct ts_error *err)
{
    size_t ng = 0;
    for (size_t i = 0; i < n; i++)
        ng += (size_t)tn[i].gpus;
    struct ts_sched_node *nodes = ts_arena_alloc(a, (n ? n : 1) * sizeof(*nodes));
    struct ts_sched_gpu *gpus = ts_arena_alloc(a, (ng ? ng : 1) * sizeof(*gpus));
    if (nodes == NULL || gpus == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    size_t g = 0;
    for (size_t i = 0; i < n; i++) {
        nodes[i].id = (int64_t)i + 1;
        nodes[i].name = tn[i].name;
        nodes[i].ready = true;
        nodes[i].cpu = (double)tn[i].cpu_milli / 1000.0;
        nodes[i].memory_bytes = tn[i].memory_mib << 20;
        for (int k = 0; k < tn[i].gpus; k++, g++) {
            gpus[g].node = (int)i;
            gpus[g].index = k;
            gpus[g].model = tn[i].model;
            gpus[g].memory_bytes = 1000;
            gpus[g].reserve_bytes = 0;
        }
    }
    s->nodes = nodes;
    s->nnodes = n;
    s->gpus = gpus;
    s->ngpus = ng;
    return TS_OK;
}

void sim_request(int num_gpu, int gpu_milli, int64_t cpu_milli, int64_t memory_mib,
                 const char *gpu_spec, struct ts_arena *a, struct ts_sched_request *r)
{
    memset(r, 0, sizeof(*r));
    if (num_gpu == 0) {
        r->kind = TS_SCHED_GPU_NONE;
    } else if (num_gpu == 1 && gpu_milli < 1000) {
        r->kind = TS_SCHED_GPU_PORTION;
        r->portion = gpu_milli / 1000.0;
        r->devices = 1;
    } else {
        r->kind = TS_SCHED_GPU_COUNT;
        r->count = num_gpu;
    }
    r->cpu = (double)cpu_milli / 1000.0;
    r->host_memory_bytes = memory_mib << 20;
    if (gpu_spec && gpu_spec[0] && num_gpu > 0) {
        size_t cnt = 1;
        for (const char *p = gpu_spec; *p; p++)
            cnt += *p == '|';
        const char **m = ts_arena_alloc(a, cnt * sizeof(char *));
        if (m == NULL)
            return;
        size_t k = 0;
        const char *s = gpu_spec;
        for (;;) {
            const char *e = strchr(s, '|');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            m[k++] = ts_arena_strndup(a, s, len);
            if (e == NULL)
                break;
            s = e + 1;
        }
        r->gpu_models = m;
        r->ngpu_models = k;
    }
}

/* `tessera-sim decide SNAPSHOT.json [--strategy S] [--next]`: one cycle on a
 * snapshot in the fixture format; --next also prints the cycle after it. */
static int decide_main(int argc, char **argv)
{
    const char *path = NULL, *strategy = NULL;
    bool next = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--strategy") == 0 && i + 1 < argc)
            strategy = argv[++i];
        else if (strcmp(argv[i], "--next") == 0)
            next = true;
        else
            path = argv[i];
    }
    if (path == NULL) {
        fprintf(stderr, "tessera-sim decide: a snapshot file is needed\n");
        return 2;
    }
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL) {
        fprintf(stderr, "tessera-sim decide: %s:%d: %s\n", path, je.line, je.text);
        return 1;
    }
    struct ts_arena *a = ts_arena_new();
    struct ts_sched_snapshot s, nx;
    struct ts_error err = {0};
    struct ts_sched_result *r = NULL, *r2 = NULL;
    int rc = 1;
    if (ts_sched_snapshot_from_json(j, a, &s, &err) != TS_OK)
        goto out;
    if (strategy)
        s.config.strategy = strategy;
    if (ts_sched_decide(&s, &r, &err) != TS_OK)
        goto out;
    json_t *o = ts_sched_result_to_json(&s, r);
    json_dumpf(o, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(o);
    if (next) {
        if (ts_sched_apply(&s, r, a, &nx, &err) != TS_OK ||
            ts_sched_decide(&nx, &r2, &err) != TS_OK)
            goto out;
        o = ts_sched_result_to_json(&nx, r2);
        json_dumpf(o, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(o);
    }
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "tessera-sim decide: %s\n", err.message);
    ts_sched_result_free(r);
    ts_sched_result_free(r2);
    ts_arena_free(a);
    json_decref(j);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tessera-sim placement --nodes NODES.csv --pods PODS.csv "
            "--strategy binpack|spread|fgd|fgd-paper|bestfit [--seeds 10] [--seed-base 42] "
            "[-o text|json]\n"
            "       tessera-sim replay --nodes NODES.csv --projects PROJECTS.csv --jobs JOBS.csv "
            "[--strategy S] [--min-runtime S] [--interval S] [-o text|json]\n"
            "       tessera-sim generate --out DIR [--seed N] [--nodes N] [--gpus-per-node N] "
            "[--projects N] [--jobs N] [--hours H] [--load F]\n"
            "       tessera-sim variant --pods PODS.csv [--seed N] [--gpushare F] [--multigpu F] "
            "[--cpu-only F] [--gpuspec F] [--specs-from PODS.csv] [--gpu-pods N] [-o OUT.csv]\n"
            "       tessera-sim decide SNAPSHOT.json [--strategy S] [--next]\n"
            "       tessera-sim minimize SNAPSHOT.json [--strategy S]\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "placement") == 0)
        return sim_placement_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "replay") == 0)
        return sim_replay_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "decide") == 0)
        return decide_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "generate") == 0)
        return sim_generate_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "variant") == 0)
        return sim_variant_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "minimize") == 0)
        return sim_minimize_main(argc - 1, argv + 1);
    fprintf(stderr, "tessera-sim: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
