/*
 * trace.h - CSV traces for tessera-sim, parsed from memory (no I/O here: the
 * caller reads the file). Input is untrusted: every malformed row is an
 * error naming its line and column.
 *
 * Formats (a header row names the columns; their order is free; columns
 * not listed are ignored; blank lines and lines starting with '#' are
 * skipped; fields are plain, with no quotes):
 *   nodes (the Alibaba "openb" node list):
 *     sn, cpu_milli, memory_mib, gpu, model
 *   pods (the Alibaba "openb" pod list; only the first five are required):
 *     name, cpu_milli, memory_mib, num_gpu, gpu_milli [, gpu_spec, qos,
 *     pod_phase, creation_time, deletion_time, scheduled_time]
 *   projects (time replay):
 *     name, quota_gpus [, department, over_quota_weight, limit_gpus, priority]
 *   jobs (time replay):
 *     name, project, submit_s, duration_s, num_gpu, gpu_milli
 *     [, cpu_milli, memory_mib, priority, preemptible, utilization]
 *   gpu_milli is per GPU: below 1000 only for one-GPU sharing jobs.
 */
#ifndef TS_SERVER_SCHED_TRACE_H
#define TS_SERVER_SCHED_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/arena.h"
#include "api/err.h"

struct ts_sched_trace_node {
    const char *name;
    int64_t cpu_milli;
    int64_t memory_mib;
    int gpus;
    const char *model; /* "" on CPU-only nodes */
};

struct ts_sched_trace_pod {
    const char *name;
    int64_t cpu_milli;
    int64_t memory_mib;
    int num_gpu;           /* 0..64 */
    int gpu_milli;         /* per GPU, 0..1000 */
    const char *gpu_spec;  /* "V100M16|V100M32", "" = any */
    int64_t creation_time; /* -1 when absent */
};

struct ts_sched_trace_project {
    const char *name;
    const char *department; /* "" = none */
    double quota_gpus;
    double over_quota_weight; /* default 1 */
    bool has_limit;
    double limit_gpus;
    int priority;
};

struct ts_sched_trace_job {
    const char *name;
    const char *project;
    int64_t submit_s;
    int64_t duration_s; /* > 0 */
    int num_gpu;
    int gpu_milli;
    int64_t cpu_milli;
    int64_t memory_mib;
    int priority;       /* default 50 */
    bool preemptible;   /* default true */
    double utilization; /* 0..1 of the allocation it uses; default 1 */
};

/* Each parser fills *out (allocated from a, borrowed until it is freed) and *n. */
enum ts_err ts_sched_trace_nodes_parse(const char *buf, size_t len, struct ts_arena *a,
                                       struct ts_sched_trace_node **out, size_t *n,
                                       struct ts_error *err);
enum ts_err ts_sched_trace_pods_parse(const char *buf, size_t len, struct ts_arena *a,
                                      struct ts_sched_trace_pod **out, size_t *n,
                                      struct ts_error *err);
enum ts_err ts_sched_trace_projects_parse(const char *buf, size_t len, struct ts_arena *a,
                                          struct ts_sched_trace_project **out, size_t *n,
                                          struct ts_error *err);
enum ts_err ts_sched_trace_jobs_parse(const char *buf, size_t len, struct ts_arena *a,
                                      struct ts_sched_trace_job **out, size_t *n,
                                      struct ts_error *err);

#endif /* TS_SERVER_SCHED_TRACE_H */
