/*
 * gpu_sim.c - the `sim` backend: simulated GPUs (agent/simgpu) created or
 * reopened in DATA/simgpu and read through simgpu's libnvidia-ml.so.1, as
 * the nvml backend reads a real GPU. Where that NVML has no per-process
 * utilization, each process's busy time is read from the state files.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/daemon/gpus.h"
#include "agent/simgpu/state.h"
#include "api/units.h"

struct busy {
    pid_t pid;
    uint64_t start_ticks;
    uint64_t credited_ns; /* busy time already counted in a sample */
};

struct sim {
    struct ts_gpus nvml; /* the NVML backend over simgpu's library */
    struct ts_simgpu_dev dev[TS_GPUS_MAX];
    bool open[TS_GPUS_MAX];
    struct busy prev[TS_GPUS_MAX][TS_SIMGPU_MAX_PROCS];
    uint64_t prev_ns[TS_GPUS_MAX];
};

static enum ts_err sim_sample(struct ts_gpus *g, unsigned i, struct ts_gpu_sample *out,
                              struct ts_error *err)
{
    struct sim *s = g->impl;
    return s->nvml.ops->sample(&s->nvml, i, out, err);
}

/* Busy time of each process from the state file: the time queued since the
 * previous call, at most the time that passed (a long kernel queued at once
 * is spread over the samples it runs in). */
static void add_state_util(struct sim *s, unsigned i, struct ts_gpu_proc *out, int count)
{
    if (!s->open[i])
        return;
    struct busy cur[TS_SIMGPU_MAX_PROCS];
    uint64_t busy[TS_SIMGPU_MAX_PROCS];
    ts_simgpu_lock(&s->dev[i]);
    for (unsigned k = 0; k < TS_SIMGPU_MAX_PROCS; k++) {
        const struct ts_simgpu_proc *p = &s->dev[i].st->procs[k];
        cur[k] = (struct busy){.pid = p->pid, .start_ticks = p->start_ticks};
        busy[k] = p->busy_ns;
    }
    ts_simgpu_unlock(&s->dev[i]);
    uint64_t now = ts_simgpu_now_ns();
    uint64_t window = s->prev_ns[i] != 0 ? now - s->prev_ns[i] : 0;
    for (unsigned k = 0; k < TS_SIMGPU_MAX_PROCS; k++) {
        if (cur[k].pid == 0)
            continue;
        const struct busy *old = NULL;
        for (unsigned j = 0; j < TS_SIMGPU_MAX_PROCS && old == NULL; j++)
            if (s->prev[i][j].pid == cur[k].pid && s->prev[i][j].start_ticks == cur[k].start_ticks)
                old = &s->prev[i][j];
        uint64_t credited = old != NULL ? old->credited_ns : 0;
        uint64_t delta = busy[k] > credited ? busy[k] - credited : 0;
        if (delta > window)
            delta = window;
        cur[k].credited_ns = credited + delta;
        for (int p = 0; p < count; p++) {
            if (out[p].pid != cur[k].pid || out[p].has_util)
                continue;
            out[p].has_util = window > 0;
            out[p].utilization = window > 0 ? (double)delta / (double)window : 0;
        }
    }
    memcpy(s->prev[i], cur, sizeof(cur));
    s->prev_ns[i] = now;
}

static int sim_procs(struct ts_gpus *g, unsigned i, struct ts_gpu_proc *out, size_t max)
{
    struct sim *s = g->impl;
    int n = s->nvml.ops->procs(&s->nvml, i, out, max);
    if (n >= 0)
        add_state_util(s, i, out, n);
    return n;
}

static void sim_close(struct ts_gpus *g)
{
    struct sim *s = g->impl;
    if (s == NULL)
        return;
    s->nvml.ops->close(&s->nvml);
    for (unsigned i = 0; i < TS_GPUS_MAX; i++)
        if (s->open[i])
            ts_simgpu_close(&s->dev[i]);
    free(s);
    g->impl = NULL;
}

static const struct ts_gpu_ops sim_ops = {"sim", sim_sample, sim_procs, sim_close};

/* "2x80GiB" or "2x80GiB@25GB" */
static enum ts_err parse_spec(const char *spec, unsigned *count, int64_t *bytes, int64_t *bw,
                              struct ts_error *err)
{
    char buf[128];
    if (snprintf(buf, sizeof(buf), "%s", spec) >= (int)sizeof(buf))
        goto bad;
    char *x = strchr(buf, 'x');
    if (x == NULL)
        goto bad;
    *x = '\0';
    char *end;
    long n = strtol(buf, &end, 10);
    if (end == buf || *end != '\0' || n < 1 || n > TS_GPUS_MAX)
        goto bad;
    char *at = strchr(x + 1, '@');
    if (at != NULL)
        *at = '\0';
    if (ts_bytesize_parse(x + 1, bytes) != 0 || *bytes < (1 << 20))
        goto bad;
    *bw = 0;
    if (at != NULL && ts_bytesize_parse(at + 1, bw) != 0)
        goto bad;
    *count = (unsigned)n;
    return TS_OK;
bad:
    return ts_error_field(err, TS_ERR_CONFIG, "gpus",
                          "invalid value for --gpus: \"sim:%.64s\": expected sim:COUNTxSIZE"
                          "[@BANDWIDTH] with COUNT 1 to %d and SIZE at least 1MiB (sim:2x80GiB)",
                          spec, TS_GPUS_MAX);
}

enum ts_err ts_gpu_sim_open(struct ts_gpus *g, const char *spec, const char *data_dir,
                            const char *lib_dir, struct ts_error *err)
{
    unsigned count = 0;
    int64_t bytes = 0, bw = 0;
    enum ts_err e = parse_spec(spec, &count, &bytes, &bw, err);
    if (e != TS_OK)
        return e;
    char dir[PATH_MAX], lib[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s/simgpu", data_dir) >= (int)sizeof(dir) ||
        snprintf(lib, sizeof(lib), "%s/libnvidia-ml.so.1", lib_dir) >= (int)sizeof(lib))
        return ts_error_set(err, TS_ERR_CONFIG, "path too long: %s", data_dir);
    int rc = ts_simgpu_create(dir, count, (uint64_t)bytes, (uint64_t)bw);
    if (rc < 0)
        return ts_error_set(err, TS_ERR_IO, "could not create simulated GPUs in %s: %s", dir,
                            strerror(-rc));
    /* simgpu's NVML finds the GPUs through this variable, read at nvmlInit
     * (no threads run yet, so setenv is safe). */
    setenv("TESSERA_SIMGPU_DIR", dir, 1);
    struct sim *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    e = ts_gpu_nvml_open(&s->nvml, lib, err);
    if (e != TS_OK) {
        ts_error_hint(err, "the simulated driver is built to build/lib/simgpu; "
                           "--simgpu-lib-dir names another folder");
        free(s);
        return e;
    }
    for (unsigned i = 0; i < s->nvml.count; i++)
        s->open[i] = ts_simgpu_open(dir, i, &s->dev[i]) == 0;
    g->ops = &sim_ops;
    g->impl = s;
    g->count = s->nvml.count;
    memcpy(g->info, s->nvml.info, sizeof(g->info));
    memcpy(g->driver_version, s->nvml.driver_version, sizeof(g->driver_version));
    snprintf(g->simgpu_dir, sizeof(g->simgpu_dir), "%s", dir);
    snprintf(g->lib_dir, sizeof(g->lib_dir), "%s", lib_dir);
    return TS_OK;
}
