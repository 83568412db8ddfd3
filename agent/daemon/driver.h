/*
 * driver.h - the CUDA driver check at start: the agent refuses to run jobs
 * on a node whose libcuda it cannot load, or that is too old for the shim.
 */
#ifndef TS_AGENT_DAEMON_DRIVER_H
#define TS_AGENT_DAEMON_DRIVER_H

#include <limits.h>

#include "agent/daemon/gpus.h"
#include "api/err.h"

/* The oldest CUDA driver API the shim works with: its swap engine needs the
 * virtual memory management calls (cuMemCreate, cuMemMap, ...) of 11.0. */
#define TS_DRIVER_CUDA_MIN 11000

struct ts_driver {
    char path[PATH_MAX]; /* the library loaded, as the loader resolved it */
    int cuda_version;    /* cuDriverGetVersion: 12040 is 12.4 */
};

/*
 * Load the CUDA driver the jobs will use (g's simgpu libcuda.so.1 on
 * simulated GPUs, else libcuda.so.1 as the loader finds it), read its
 * version and check the symbols the shim needs. On failure err names what
 * was looked for, where, and the versions found (NVML's driver version, the
 * libcuda.so.* files in the driver folders). The library stays loaded.
 */
enum ts_err ts_driver_check(const struct ts_gpus *g, struct ts_driver *out, struct ts_error *err);

#endif
