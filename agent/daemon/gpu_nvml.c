/*
 * gpu_nvml.c - the NVML backend: libnvidia-ml.so.1 loaded with dlopen (no
 * build-time dependency on CUDA), the functions Tessera needs looked up with
 * dlsym. Optional ones (per-process utilization, older names of the process
 * list) are used when the library has them.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/abi/nvml.h"
#include "agent/daemon/gpus.h"

/* nvmlDeviceGetProcessUtilization's sample, as NVIDIA documents it. Declared
 * here under a local name: agent/abi/nvml.h does not have it yet. */
struct proc_util_sample {
    unsigned int pid;
    unsigned long long time_stamp; /* CPU time stamp, microseconds */
    unsigned int sm_util;          /* percent */
    unsigned int mem_util;
    unsigned int enc_util;
    unsigned int dec_util;
};
typedef nvmlReturn_t (*proc_util_fn)(nvmlDevice_t, struct proc_util_sample *, unsigned int *,
                                     unsigned long long);

struct nvml {
    void *lib;
    __typeof__(nvmlInit_v2) *init;
    __typeof__(nvmlShutdown) *shutdown;
    __typeof__(nvmlErrorString) *error_string;
    __typeof__(nvmlDeviceGetCount_v2) *count;
    __typeof__(nvmlDeviceGetHandleByIndex_v2) *handle;
    __typeof__(nvmlDeviceGetUUID) *uuid;
    __typeof__(nvmlDeviceGetName) *name;
    __typeof__(nvmlDeviceGetMemoryInfo) *memory;
    __typeof__(nvmlDeviceGetUtilizationRates) *util;
    __typeof__(nvmlDeviceGetComputeRunningProcesses_v3) *procs; /* v3 or v2 (same layout) */
    __typeof__(nvmlSystemGetDriverVersion) *driver_version;     /* or NULL */
    proc_util_fn proc_util;                                     /* or NULL */
    nvmlDevice_t dev[TS_GPUS_MAX];
    unsigned long long last_seen[TS_GPUS_MAX]; /* proc_util time stamps */
};

static const char *nvml_error(struct nvml *n, nvmlReturn_t rc)
{
    const char *s = n->error_string != NULL ? n->error_string(rc) : NULL;
    return s != NULL ? s : "unknown NVML error";
}

static enum ts_err nvml_sample(struct ts_gpus *g, unsigned i, struct ts_gpu_sample *out,
                               struct ts_error *err)
{
    struct nvml *n = g->impl;
    nvmlUtilization_t u;
    nvmlMemory_t m;
    nvmlReturn_t rc = n->util(n->dev[i], &u);
    if (rc == NVML_SUCCESS)
        rc = n->memory(n->dev[i], &m);
    if (rc != NVML_SUCCESS)
        return ts_error_set(err, TS_ERR_IO, "could not sample GPU %u: %s", i, nvml_error(n, rc));
    out->utilization = u.gpu > 100 ? 1.0 : u.gpu / 100.0;
    out->memory_used_bytes = m.used;
    return TS_OK;
}

/* Average SM utilization per process since the last call, into out. */
static void add_proc_util(struct nvml *n, unsigned i, struct ts_gpu_proc *out, int count)
{
    unsigned int ns = 0;
    nvmlReturn_t rc = n->proc_util(n->dev[i], NULL, &ns, n->last_seen[i]);
    if ((rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE) || ns == 0)
        return;
    struct proc_util_sample *s = calloc(ns, sizeof(*s));
    if (s == NULL)
        return;
    if (n->proc_util(n->dev[i], s, &ns, n->last_seen[i]) == NVML_SUCCESS) {
        for (int p = 0; p < count; p++) {
            unsigned long long sum = 0, k = 0;
            for (unsigned j = 0; j < ns; j++) {
                if (s[j].pid == (unsigned)out[p].pid) {
                    sum += s[j].sm_util;
                    k++;
                }
            }
            out[p].has_util = true;
            out[p].utilization = k == 0 ? 0 : (double)sum / (double)k / 100.0;
            if (out[p].utilization > 1)
                out[p].utilization = 1;
        }
        for (unsigned j = 0; j < ns; j++)
            if (s[j].time_stamp > n->last_seen[i])
                n->last_seen[i] = s[j].time_stamp;
    }
    free(s);
}

static int nvml_procs(struct ts_gpus *g, unsigned i, struct ts_gpu_proc *out, size_t max)
{
    struct nvml *n = g->impl;
    if (n->procs == NULL)
        return -1;
    nvmlProcessInfo_t info[TS_GPU_PROCS_MAX];
    unsigned int count = TS_GPU_PROCS_MAX;
    nvmlReturn_t rc = n->procs(n->dev[i], &count, info);
    if (rc != NVML_SUCCESS)
        return -1;
    int k = 0;
    for (unsigned j = 0; j < count && (size_t)k < max; j++) {
        out[k] =
            (struct ts_gpu_proc){.pid = (pid_t)info[j].pid, .used_bytes = info[j].usedGpuMemory};
        /* NVML_VALUE_NOT_AVAILABLE (all ones) where memory is not known */
        if (info[j].usedGpuMemory == ~0ULL)
            out[k].used_bytes = 0;
        k++;
    }
    if (n->proc_util != NULL)
        add_proc_util(n, i, out, k);
    return k;
}

static void nvml_close(struct ts_gpus *g)
{
    struct nvml *n = g->impl;
    if (n == NULL)
        return;
    if (n->shutdown != NULL)
        n->shutdown();
    /* The library stays loaded: NVML and simgpu keep threads and mappings
     * that unloading would pull out from under them. */
    free(n);
    g->impl = NULL;
}

static const struct ts_gpu_ops nvml_ops = {"nvml", nvml_sample, nvml_procs, nvml_close};

#define LOOK(field, sym, required)                                                                 \
    do {                                                                                           \
        *(void **)&n->field = dlsym(n->lib, sym);                                                  \
        if (n->field == NULL && (required)) {                                                      \
            e = ts_error_set(err, TS_ERR_IO, "could not find %s in %s", sym, lib_path);            \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

enum ts_err ts_gpu_nvml_open(struct ts_gpus *g, const char *lib_path, struct ts_error *err)
{
    enum ts_err e = TS_OK;
    bool inited = false;
    struct nvml *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    n->lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (n->lib == NULL) {
        e = ts_error_set(err, TS_ERR_IO, "could not load %s: %s", lib_path, dlerror());
        goto fail;
    }
    LOOK(init, "nvmlInit_v2", true);
    LOOK(shutdown, "nvmlShutdown", true);
    LOOK(error_string, "nvmlErrorString", false);
    LOOK(count, "nvmlDeviceGetCount_v2", true);
    LOOK(handle, "nvmlDeviceGetHandleByIndex_v2", true);
    LOOK(uuid, "nvmlDeviceGetUUID", true);
    LOOK(name, "nvmlDeviceGetName", true);
    LOOK(memory, "nvmlDeviceGetMemoryInfo", true);
    LOOK(util, "nvmlDeviceGetUtilizationRates", true);
    LOOK(procs, "nvmlDeviceGetComputeRunningProcesses_v3", false);
    if (n->procs == NULL)
        LOOK(procs, "nvmlDeviceGetComputeRunningProcesses_v2", false);
    LOOK(proc_util, "nvmlDeviceGetProcessUtilization", false);
    LOOK(driver_version, "nvmlSystemGetDriverVersion", false);

    nvmlReturn_t rc = n->init();
    if (rc != NVML_SUCCESS) {
        e = ts_error_set(err, TS_ERR_IO, "could not initialize NVML from %s: %s", lib_path,
                         nvml_error(n, rc));
        goto fail;
    }
    inited = true;
    unsigned int count = 0;
    if ((rc = n->count(&count)) != NVML_SUCCESS) {
        e = ts_error_set(err, TS_ERR_IO, "could not count GPUs: %s", nvml_error(n, rc));
        goto fail;
    }
    if (count > TS_GPUS_MAX)
        count = TS_GPUS_MAX;
    for (unsigned i = 0; i < count; i++) {
        struct ts_gpu_info *gi = &g->info[i];
        nvmlMemory_t m;
        gi->index = i;
        if ((rc = n->handle(i, &n->dev[i])) != NVML_SUCCESS ||
            (rc = n->uuid(n->dev[i], gi->uuid, sizeof(gi->uuid))) != NVML_SUCCESS ||
            (rc = n->name(n->dev[i], gi->model, sizeof(gi->model))) != NVML_SUCCESS ||
            (rc = n->memory(n->dev[i], &m)) != NVML_SUCCESS) {
            e = ts_error_set(err, TS_ERR_IO, "could not read GPU %u: %s", i, nvml_error(n, rc));
            goto fail;
        }
        gi->memory_bytes = m.total;
    }
    if (n->driver_version == NULL ||
        n->driver_version(g->driver_version, sizeof(g->driver_version)) != NVML_SUCCESS)
        g->driver_version[0] = '\0';
    g->ops = &nvml_ops;
    g->impl = n;
    g->count = count;
    return TS_OK;
fail:
    if (inited)
        n->shutdown();
    else if (n->lib != NULL)
        dlclose(n->lib);
    free(n);
    return e;
}
