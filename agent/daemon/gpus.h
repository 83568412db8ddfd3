/*
 * gpus.h - the node's GPUs behind one narrow interface: `nvml` (the real
 * libnvidia-ml.so.1, loaded with dlopen) and `sim` (simulated GPUs the agent
 * creates in DATA/simgpu and reads through simgpu's libnvidia-ml.so.1), or
 * `none` for a node without GPUs.
 *
 * The agent samples every GPU about once a second: utilization (percent of
 * the backend's recent window a kernel ran) and memory used, and the
 * processes on it with their memory and, where the backend knows it, their
 * share of the GPU's time since the previous sample of that GPU.
 */
#ifndef TS_AGENT_DAEMON_GPUS_H
#define TS_AGENT_DAEMON_GPUS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "api/err.h"

#define TS_GPUS_MAX 64
#define TS_GPU_PROCS_MAX 128

struct ts_gpu_info {
    unsigned index;
    char uuid[96];
    char model[96];
    uint64_t memory_bytes;
};

struct ts_gpu_sample {
    double utilization; /* 0..1 */
    uint64_t memory_used_bytes;
};

struct ts_gpu_proc {
    pid_t pid;
    uint64_t used_bytes;
    bool has_util;
    double utilization; /* 0..1 of the GPU, since the previous procs call */
};

struct ts_gpus;

struct ts_gpu_ops {
    const char *name;
    /* One sample of GPU i (0 <= i < count). */
    enum ts_err (*sample)(struct ts_gpus *g, unsigned i, struct ts_gpu_sample *out,
                          struct ts_error *err);
    /* The processes on GPU i, at most max into out; returns how many were
     * written, or -1 when the backend cannot list them. */
    int (*procs)(struct ts_gpus *g, unsigned i, struct ts_gpu_proc *out, size_t max);
    void (*close)(struct ts_gpus *g);
};

struct ts_gpus {
    const struct ts_gpu_ops *ops;
    void *impl;
    unsigned count;
    struct ts_gpu_info info[TS_GPUS_MAX];
    /* sim only ("" otherwise): what a job needs to find the simulated GPUs */
    char simgpu_dir[PATH_MAX]; /* TESSERA_SIMGPU_DIR */
    char lib_dir[PATH_MAX];    /* holds simgpu's libcuda.so.1 and libnvidia-ml.so.1 */
    char driver_version[80];   /* NVML's nvmlSystemGetDriverVersion, or "" */
};

/*
 * Open the backend named by spec: "nvml", "none", or "sim:NxSIZE[@BANDWIDTH]"
 * (e.g. sim:2x80GiB), which creates or reopens N simulated GPUs in
 * data_dir/simgpu and loads lib_dir/libnvidia-ml.so.1. Must be called before
 * the agent starts threads (it sets TESSERA_SIMGPU_DIR for simgpu's NVML).
 * On TS_OK *out is new (ts_gpus_close).
 */
enum ts_err ts_gpus_open(const char *spec, const char *data_dir, const char *lib_dir,
                         struct ts_gpus **out, struct ts_error *err);
void ts_gpus_close(struct ts_gpus *g); /* NULL is a no-op */

/* Backends (gpu_nvml.c, gpu_sim.c): fill g (ops, impl, count, info). */
enum ts_err ts_gpu_nvml_open(struct ts_gpus *g, const char *lib_path, struct ts_error *err);
enum ts_err ts_gpu_sim_open(struct ts_gpus *g, const char *spec, const char *data_dir,
                            const char *lib_dir, struct ts_error *err);

#endif /* TS_AGENT_DAEMON_GPUS_H */
