/*
 * nvml.c - simgpu's libnvidia-ml.so.1: NVML over the shared state files of
 * state.h. Like the real NVML it sees every GPU of the node, whatever
 * CUDA_VISIBLE_DEVICES says. Utilization is the share of the last second
 * during which the GPU ran kernels, per process the share of a window during
 * which it ran that process's kernels; memory utilization is not simulated
 * (0).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#pragma GCC visibility push(default)
#include "agent/abi/nvml.h"
#pragma GCC visibility pop
#include "agent/simgpu/state.h"

#define UTIL_WINDOW_NS 1000000000ull    /* device utilization: the last second */
#define PROC_UTIL_MAX_NS 10000000000ull /* per-process utilization: at most 10 s back */

struct nvmlDevice_st {
    struct ts_simgpu_dev dev;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int init_refs; /* mu */
static unsigned ndev; /* mu */
static struct nvmlDevice_st devs[TS_SIMGPU_MAX_GPUS];

#define FAIL(name, dflt)                                                                           \
    do {                                                                                           \
        int fail_code_ = ts_simgpu_fail(#name, (dflt));                                            \
        if (fail_code_)                                                                            \
            return (nvmlReturn_t)fail_code_;                                                       \
    } while (0)

static nvmlReturn_t need_init(void)
{
    pthread_mutex_lock(&mu);
    int refs = init_refs;
    pthread_mutex_unlock(&mu);
    return refs > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static nvmlReturn_t need_dev(nvmlDevice_t d)
{
    nvmlReturn_t rc = need_init();
    if (rc != NVML_SUCCESS)
        return rc;
    if (!d || d < devs || d >= devs + ndev)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void)
{
    FAIL(nvmlInit_v2, NVML_ERROR_DRIVER_NOT_LOADED);
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&mu);
    if (init_refs == 0) {
        const char *dir = getenv("TESSERA_SIMGPU_DIR");
        if (!dir || !*dir) {
            rc = NVML_ERROR_DRIVER_NOT_LOADED;
            goto out;
        }
        unsigned n = ts_simgpu_count(dir);
        ndev = 0;
        for (unsigned i = 0; i < n; i++) {
            if (ts_simgpu_open(dir, i, &devs[ndev].dev) != 0)
                break;
            ndev++;
        }
    }
    init_refs++;
out:
    pthread_mutex_unlock(&mu);
    return rc;
}

nvmlReturn_t nvmlShutdown(void)
{
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&mu);
    if (init_refs == 0)
        rc = NVML_ERROR_UNINITIALIZED;
    else if (--init_refs == 0) {
        for (unsigned i = 0; i < ndev; i++)
            ts_simgpu_close(&devs[i].dev);
        ndev = 0;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
    /* One code a line: a table. */
    /* clang-format off */
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_NOT_READY: return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    default: return "Unknown Error";
    }
    /* clang-format on */
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!version)
        return NVML_ERROR_INVALID_ARGUMENT;
    const char *v = "550.54.15-simgpu";
    if (length < strlen(v) + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(version, v, strlen(v) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    FAIL(nvmlDeviceGetCount_v2, NVML_ERROR_UNKNOWN);
    nvmlReturn_t rc = need_init();
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = ndev;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    FAIL(nvmlDeviceGetHandleByIndex_v2, NVML_ERROR_UNKNOWN);
    nvmlReturn_t rc = need_init();
    if (rc != NVML_SUCCESS)
        return rc;
    if (!device || index >= ndev)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devs[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    nvmlReturn_t rc = need_init();
    if (rc != NVML_SUCCESS)
        return rc;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < ndev; i++) {
        char u[48];
        ts_simgpu_uuid_format(devs[i].dev.st->uuid, u);
        if (strcmp(u, uuid) == 0) {
            *device = &devs[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index)
{
    nvmlReturn_t rc = need_dev(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)(d - devs);
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_str(const char *s, char *out, unsigned int length)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    size_t n = strlen(s);
    if (length < n + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, n + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length)
{
    FAIL(nvmlDeviceGetUUID, NVML_ERROR_UNKNOWN);
    nvmlReturn_t rc = need_dev(d);
    if (rc != NVML_SUCCESS)
        return rc;
    char u[48];
    ts_simgpu_uuid_format(d->dev.st->uuid, u);
    return copy_str(u, uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length)
{
    FAIL(nvmlDeviceGetName, NVML_ERROR_UNKNOWN);
    nvmlReturn_t rc = need_dev(d);
    if (rc != NVML_SUCCESS)
        return rc;
    return copy_str(d->dev.st->name, name, length);
}

/* Used bytes after forgetting processes that have exited. */
static unsigned long long used_now(nvmlDevice_t d)
{
    ts_simgpu_lock(&d->dev);
    ts_simgpu_reap(&d->dev);
    unsigned long long used = atomic_load(&d->dev.st->used_bytes);
    ts_simgpu_unlock(&d->dev);
    return used;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    FAIL(nvmlDeviceGetMemoryInfo, NVML_ERROR_UNKNOWN);
    nvmlReturn_t rc = need_dev(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long total = d->dev.st->total_bytes, used = used_now(d);
    m->total = total;
    m->used = used;
    m->free = used < total ? total - used : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
    FAIL(nvmlDeviceGetMemoryInfo_v2, NVML_ERROR_UNKNOWN);
    nvmlReturn_t rc = need_dev(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    unsigned long long total = d->dev.st->total_bytes, used = used_now(d);
    m->total = total;
    m->reserved = 0;
    m->used = used;
    m->free = used < total ? total - used : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    FAIL(nvmlDeviceGetUtilizationRates, NVML_ERROR_UNKNOWN);
    nvmlReturn_t rc = need_dev(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!u)
        return NVML_ERROR_INVALID_ARGUMENT;
    u->gpu = ts_simgpu_util_percent(&d->dev, UTIL_WINDOW_NS);
    u->memory = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                     nvmlProcessInfo_t *infos)
{
    FAIL(nvmlDeviceGetComputeRunningProcesses_v3, NVML_ERROR_UNKNOWN);
    nvmlReturn_t rc = need_dev(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count || (*count > 0 && !infos))
        return NVML_ERROR_INVALID_ARGUMENT;
    struct ts_simgpu_state *st = d->dev.st;
    unsigned n = 0;
    ts_simgpu_lock(&d->dev);
    ts_simgpu_reap(&d->dev);
    for (int i = 0; i < TS_SIMGPU_MAX_PROCS; i++) {
        if (st->procs[i].pid == 0)
            continue;
        if (n < *count)
            infos[n] = (nvmlProcessInfo_t){(unsigned)st->procs[i].pid, st->procs[i].used_bytes,
                                           0xFFFFFFFFu, 0xFFFFFFFFu};
        n++;
    }
    ts_simgpu_unlock(&d->dev);
    rc = n > *count ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    *count = n;
    return rc;
}

/*
 * One sample per process that ran kernels since lastSeen: its busy share of
 * the time from lastSeen to now (the last second when lastSeen is 0, at most
 * PROC_UTIL_MAX_NS back), stamped now. The agent passes the previous
 * sample's timeStamp to get the share since its last look. Memory,
 * encoder and decoder utilization are 0.
 */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *count, unsigned long long lastSeen)
{
    FAIL(nvmlDeviceGetProcessUtilization, NVML_ERROR_UNKNOWN);
    nvmlReturn_t rc = need_dev(d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    unsigned long long now_us =
        (unsigned long long)rt.tv_sec * 1000000ull + (unsigned long long)rt.tv_nsec / 1000ull;
    uint64_t now = ts_simgpu_now_ns();
    if (lastSeen >= now_us) {
        *count = 0;
        return NVML_ERROR_NOT_FOUND;
    }
    uint64_t window = lastSeen ? (now_us - lastSeen) * 1000ull : UTIL_WINDOW_NS;
    if (window > PROC_UTIL_MAX_NS)
        window = PROC_UTIL_MAX_NS;
    if (window > now)
        window = now;
    uint64_t from = now - window;
    struct ts_simgpu_state *st = d->dev.st;
    unsigned n = 0;
    ts_simgpu_lock(&d->dev);
    ts_simgpu_reap(&d->dev);
    for (int i = 0; i < TS_SIMGPU_MAX_PROCS; i++) {
        pid_t pid = st->procs[i].pid;
        if (pid == 0)
            continue;
        uint64_t busy = ts_simgpu_busy_ns(&d->dev, pid, from, now);
        if (busy == 0)
            continue;
        if (utilization && n < *count)
            utilization[n] = (nvmlProcessUtilizationSample_t){
                .pid = (unsigned)pid,
                .timeStamp = now_us,
                .smUtil = (unsigned)((busy * 100 + window / 2) / window),
            };
        n++;
    }
    ts_simgpu_unlock(&d->dev);
    if (n == 0)
        rc = NVML_ERROR_NOT_FOUND;
    else if (!utilization || n > *count)
        rc = NVML_ERROR_INSUFFICIENT_SIZE;
    *count = n;
    return rc;
}

nvmlReturn_t nvmlInit(void)
{
    return nvmlInit_v2();
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
    return nvmlDeviceGetCount_v2(count);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
                                                     nvmlProcessInfo_t *infos)
{
    return nvmlDeviceGetComputeRunningProcesses_v3(d, count, infos);
}
