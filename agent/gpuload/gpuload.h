/*
 * gpuload.h - tessera-gpuload: a workload that drives one GPU through the
 * CUDA driver API (libcuda.so.1 loaded with dlopen at run time), the same
 * way on simgpu and on a real NVIDIA GPU. It holds device memory, keeps the
 * GPU busy in the shape of a training job, a notebook or an inference
 * server, checks its memory byte for byte, and checkpoints its progress.
 * README.md says what it does and how the tests use it.
 *
 * Modules: options.c (the option table and the plan made from it), driver_calls.c
 * (the driver's entry points), data.c (buffer patterns), jitter.c (the
 * intervals drawn from --seed), checkpoint.c (progress file), run.c (the
 * loop), buffer.c (writing and checking device memory) and burst.c (memory
 * bursts), the last three sharing run.h. Only main.c exits.
 */
#ifndef TS_AGENT_GPULOAD_GPULOAD_H
#define TS_AGENT_GPULOAD_GPULOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/abi/cuda.h"
#include "api/config.h"
#include "api/err.h"

/* Exit statuses, documented in --help and README.md. A SIGTERM or SIGINT
 * ends the process by that same signal once the checkpoint is written. */
enum ts_gpuload_exit {
    TS_GPULOAD_EXIT_OK = 0,        /* ran its duration or its steps */
    TS_GPULOAD_EXIT_FAILED = 1,    /* a CUDA call or the checkpoint failed */
    TS_GPULOAD_EXIT_OOM = 2,       /* cuMemAlloc: out of device memory */
    TS_GPULOAD_EXIT_DATA_LOSS = 3, /* device memory did not hold what was written */
    TS_GPULOAD_EXIT_NO_GPU = 4,    /* no libcuda.so.1, cuInit failed, or no device N */
    TS_GPULOAD_EXIT_USAGE = 64,    /* invalid options */
};

enum ts_gpuload_pattern {
    TS_GPULOAD_TRAIN,     /* busy a fraction of every step */
    TS_GPULOAD_NOTEBOOK,  /* a short burst, then a long idle */
    TS_GPULOAD_INFERENCE, /* a burst per request, requests at a rate */
};

/* What ts_config_load fills (options.c has the table). */
struct ts_gpuload_config {
    char *pattern;
    int64_t memory;
    int64_t buffers;
    int64_t touch;
    int64_t duration; /* seconds, 0 = until SIGTERM */
    int64_t steps;    /* 0 = no limit */
    char *step;
    char *busy;
    char *burst;
    char *idle;
    char *rate;
    int64_t device;
    char *checkpoint_dir;
    char *checkpoint_every;
    int64_t resume_count;
    int64_t seed;
    int64_t burst_memory; /* 0 = no bursts */
    char *burst_every;
    char *burst_hold;
    char *jitter;
    bool burst_optional;
};

extern const struct ts_option ts_gpuload_options[];
extern const size_t ts_gpuload_options_count;

/* The validated settings the loop runs with. Times in nanoseconds. */
struct ts_gpuload_plan {
    enum ts_gpuload_pattern pattern;
    uint64_t memory;   /* bytes of device memory, in `buffers` allocations */
    unsigned buffers;  /* 0 when memory is 0 */
    uint64_t touch;    /* bytes of each buffer written and checked; 0 = no checks */
    uint64_t duration; /* 0 = until a signal */
    uint64_t steps;    /* 0 = no limit; counted across resumes */
    uint64_t step;     /* train: length of a step */
    double busy;       /* train: busy share of a step, 0..1 */
    uint64_t burst;    /* notebook, inference: kernel time of a burst */
    uint64_t idle;     /* notebook: idle time after a burst */
    double rate;       /* inference: requests per second */
    int device;
    const char *checkpoint_dir; /* borrowed from the config; NULL = none */
    uint64_t checkpoint_every;
    int64_t resume_count;
    uint64_t seed;
    uint64_t burst_memory; /* bytes of each burst, one allocation; 0 = no bursts */
    uint64_t burst_every;  /* mean time from the end of a burst to the next (> 0) */
    uint64_t burst_hold;   /* mean time a burst is held (0: freed at once) */
    double jitter;         /* 0..1: intervals drawn in mean * [1 - jitter, 1 + jitter] */
    bool burst_optional;   /* a burst refused for memory is skipped, not exit 2 */
    int64_t corrupt_step;  /* test hook TESSERA_GPULOAD_CORRUPT_STEP; -1 = off */
    int64_t corrupt_burst; /* test hook TESSERA_GPULOAD_CORRUPT_BURST; -1 = off */
};

/* Check cfg and fill plan (which borrows cfg's strings). TS_ERR_CONFIG with
 * err->field naming the option when a value is out of range. */
enum ts_err ts_gpuload_options_plan(const struct ts_gpuload_config *cfg,
                                    struct ts_gpuload_plan *plan, struct ts_error *err);
/* "200ms", "5s", "1h30m", "2" (seconds) into nanoseconds; -1 when malformed. */
int ts_gpuload_options_parse_time(const char *s, uint64_t *ns);
/* "10/s" or "10" or "0.5/s" requests per second (> 0); -1 when malformed. */
int ts_gpuload_options_parse_rate(const char *s, double *per_s);
/* Text printed after the options by --help: patterns and exit statuses. */
extern const char ts_gpuload_options_epilog[];

/* The driver entry points tessera-gpuload calls, looked up with dlsym. */
#define TS_GPULOAD_CUDA_FNS(X)                                                                     \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)                                                                            \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGetName)                                                                             \
    X(cuDeviceTotalMem_v2)                                                                         \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease_v2)                                                                \
    X(cuCtxSetCurrent)                                                                             \
    X(cuMemAlloc_v2)                                                                               \
    X(cuMemFree_v2)                                                                                \
    X(cuMemcpyHtoD_v2)                                                                             \
    X(cuMemcpyDtoH_v2)                                                                             \
    X(cuStreamCreate)                                                                              \
    X(cuStreamDestroy_v2)                                                                          \
    X(cuStreamSynchronize)                                                                         \
    X(cuModuleLoadData)                                                                            \
    X(cuModuleUnload)                                                                              \
    X(cuModuleGetFunction)                                                                         \
    X(cuLaunchKernel)

struct ts_gpuload_cuda {
    void *lib;
#define TS_GPULOAD_CUDA_MEMBER(name) __typeof__(name) *name;
    TS_GPULOAD_CUDA_FNS(TS_GPULOAD_CUDA_MEMBER)
#undef TS_GPULOAD_CUDA_MEMBER
    __typeof__(cuModuleLoadDataEx) *cuModuleLoadDataEx; /* NULL when missing */
};

/* dlopen libcuda.so.1 and look up every entry point. TS_ERR_NOT_FOUND with
 * the loader's message when the library or a symbol is missing. The driver
 * stays loaded until the process exits: drivers are not made to be
 * unloaded (and their process-wide tables stay reachable). */
enum ts_err ts_gpuload_cuda_load(struct ts_gpuload_cuda *cu, struct ts_error *err);
/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" into buf; returns buf. */
const char *ts_gpuload_cuda_describe(const struct ts_gpuload_cuda *cu, CUresult rc, char *buf,
                                     size_t len);
/* PTX of tessera_busy_ns(u64 ns), which spins on %globaltimer for ns; the
 * driver JIT-compiles it for the GPU at hand. */
extern const char ts_gpuload_cuda_ptx[];

/*
 * Buffer patterns: the bytes a buffer holds after a step are a function of
 * (seed, buffer, step) and the byte offset, so any window of it can be made
 * again to check what the device returns.
 */
uint64_t ts_gpuload_data_key(uint64_t seed, unsigned buffer, uint64_t step);
/* Bytes [offset, offset + n) of the pattern of key into out. */
void ts_gpuload_data_fill(void *out, size_t n, uint64_t key, uint64_t offset);
/* false when got and want differ; then *first is the first differing offset
 * and *count how many bytes differ. */
bool ts_gpuload_data_same(const void *got, const void *want, size_t n, size_t *first,
                          size_t *count);

/*
 * Jitter: the intervals a run draws (notebook idle, time between bursts,
 * hold of a burst) are uniform in [mean * (1 - share), mean * (1 + share)].
 * Draw k of a stream is a function of (seed, stream, k) only, so two runs
 * with one --seed draw the same intervals however their steps are timed.
 */
enum ts_gpuload_jitter_stream {
    TS_GPULOAD_JITTER_IDLE,  /* k: the step the idle time follows */
    TS_GPULOAD_JITTER_EVERY, /* k: the burst the interval leads to */
    TS_GPULOAD_JITTER_HOLD,  /* k: the burst held */
};
/* mean itself when share is 0; share in 0..1. */
uint64_t ts_gpuload_jitter(uint64_t seed, enum ts_gpuload_jitter_stream stream, uint64_t k,
                           uint64_t mean, double share);

/*
 * Checkpoint: DIR/gpuload.ckpt, a few `key=value` lines, replaced
 * atomically (write a temporary file, fsync, rename). DIR is created when
 * missing.
 */
#define TS_GPULOAD_CHECKPOINT_FILE "gpuload.ckpt"
/* *found false and TS_OK when there is no file; TS_ERR_IO when it cannot be
 * read or is damaged. */
enum ts_err ts_gpuload_checkpoint_read(const char *dir, uint64_t *step, bool *found,
                                       struct ts_error *err);
enum ts_err ts_gpuload_checkpoint_write(const char *dir, uint64_t step, int64_t resume_count,
                                        struct ts_error *err);

/* Run the plan. Returns an exit status, or -SIGNAL when a signal asked the
 * process to stop (checkpoint written, memory freed): main re-raises it. */
int ts_gpuload_run(const struct ts_gpuload_plan *plan);

#endif /* TS_AGENT_GPULOAD_GPULOAD_H */
