/*
 * swap_env.h - a simulated node for the swap engine's tests and bench:
 * simgpu GPUs in a temporary folder, the real driver table (struct ts_cu)
 * filled with dlsym from simgpu's libcuda.so.1 (found on LD_LIBRARY_PATH),
 * a host swap reserve file, and the GPUs' used figures from their state
 * files.
 */
#ifndef TS_TESTS_SHIM_SWAP_ENV_H
#define TS_TESTS_SHIM_SWAP_ENV_H

#include <stdint.h>

#include "agent/shim/cu.h"
#include "agent/simgpu/state.h"

#define SWAP_ENV_MAX_GPUS 4

struct swap_env {
    char dir[256];
    char reserve[300];
    unsigned ngpus;
    void *lib;
    struct ts_cu cu;
    CUcontext ctx[SWAP_ENV_MAX_GPUS];
    struct ts_simgpu_dev gpu[SWAP_ENV_MAX_GPUS];
    /* beyond struct ts_cu: what a workload calls */
    CUresult (*cuLaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                               void **extra);
    CUresult (*cuModuleLoadData)(CUmodule *m, const void *image);
    CUresult (*cuModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
    CUresult (*cuMemAllocHost_v2)(void **pp, size_t bytes);
    CUresult (*cuMemFreeHost)(void *p);
};

/* Folder under base (NULL: $TMPDIR or /tmp), ngpus GPUs of gpu_bytes with
 * copy bandwidth bw (bytes/s, 0: memcpy speed), a sparse reserve file of
 * reserve_bytes, the driver loaded and each GPU's primary context
 * retained (device 0's current). Returns 0, or -1 with a message. */
int ts_swap_env_setup(struct swap_env *e, const char *base, unsigned ngpus, uint64_t gpu_bytes,
                      uint64_t bw, uint64_t reserve_bytes);
/* The two halves of setup: the files (no driver loaded: a process may
 * fork after it), then the driver and contexts. */
int ts_swap_env_create(struct swap_env *e, const char *base, unsigned ngpus, uint64_t gpu_bytes,
                       uint64_t bw, uint64_t reserve_bytes);
int ts_swap_env_load(struct swap_env *e);
void ts_swap_env_teardown(struct swap_env *e);
uint64_t ts_swap_env_gpu_used(struct swap_env *e, unsigned gpu);
/* A module with the simulated busy kernel, and its function. */
CUfunction ts_swap_env_busy_kernel(struct swap_env *e);
/* Fill buf with a pattern of seed; check it. */
void ts_swap_env_pattern(void *buf, size_t n, uint32_t seed);
int ts_swap_env_check(const void *buf, size_t n, uint32_t seed);

#endif /* TS_TESTS_SHIM_SWAP_ENV_H */
