/*
 * gpus.c - choosing the GPU backend from --gpus; the `none` backend.
 */
#include "agent/daemon/gpus.h"

#include <stdlib.h>
#include <string.h>

static enum ts_err none_sample(struct ts_gpus *g, unsigned i, struct ts_gpu_sample *out,
                               struct ts_error *err)
{
    (void)g;
    (void)i;
    (void)out;
    return ts_error_set(err, TS_ERR_NOT_FOUND, "no GPUs");
}

static int none_procs(struct ts_gpus *g, unsigned i, struct ts_gpu_proc *out, size_t max)
{
    (void)g;
    (void)i;
    (void)out;
    (void)max;
    return 0;
}

static void none_close(struct ts_gpus *g)
{
    (void)g;
}

static const struct ts_gpu_ops none_ops = {"none", none_sample, none_procs, none_close};

enum ts_err ts_gpus_open(const char *spec, const char *data_dir, const char *lib_dir,
                         struct ts_gpus **out, struct ts_error *err)
{
    *out = NULL;
    struct ts_gpus *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    enum ts_err e;
    if (strcmp(spec, "none") == 0) {
        g->ops = &none_ops;
        e = TS_OK;
    } else if (strcmp(spec, "nvml") == 0) {
        e = ts_gpu_nvml_open(g, "libnvidia-ml.so.1", err);
    } else if (strncmp(spec, "sim:", 4) == 0) {
        e = ts_gpu_sim_open(g, spec + 4, data_dir, lib_dir, err);
    } else {
        e = ts_error_field(err, TS_ERR_CONFIG, "gpus",
                           "invalid value for --gpus: \"%.64s\": expected nvml, none or "
                           "sim:COUNTxSIZE (sim:2x80GiB)",
                           spec);
    }
    if (e != TS_OK) {
        free(g);
        return e;
    }
    *out = g;
    return TS_OK;
}

void ts_gpus_close(struct ts_gpus *g)
{
    if (g == NULL)
        return;
    if (g->ops != NULL)
        g->ops->close(g);
    free(g);
}
