/*
 * tool.c - tessera-simgpu: create and show simulated GPUs.
 *
 *   tessera-simgpu create DIR COUNT SIZE [BANDWIDTH]   SIZE like 80GiB, BANDWIDTH bytes/s
 *   tessera-simgpu show DIR
 *   tessera-simgpu procs DIR    one line per process holding a GPU
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/simgpu/state.h"
#include "api/units.h"

static int usage(void)
{
    fprintf(stderr, "usage: tessera-simgpu create DIR COUNT SIZE [BANDWIDTH_BYTES_PER_S]\n"
                    "       tessera-simgpu show DIR\n"
                    "       tessera-simgpu procs DIR\n");
    return 2;
}

static int show(const char *dir)
{
    unsigned n = ts_simgpu_count(dir);
    for (unsigned i = 0; i < n; i++) {
        struct ts_simgpu_dev d;
        int rc = ts_simgpu_open(dir, i, &d);
        if (rc < 0) {
            fprintf(stderr, "could not open gpu %u in %s: %s\n", i, dir, strerror(-rc));
            return 1;
        }
        ts_simgpu_lock(&d);
        ts_simgpu_reap(&d);
        ts_simgpu_unlock(&d);
        char u[48], total[32], used[32];
        ts_simgpu_uuid_format(d.st->uuid, u);
        printf("gpu=%u uuid=%s name=\"%s\" total=%s used=%s util=%u%% kernels=%llu\n", i, u,
               d.st->name, ts_bytesize_format((int64_t)d.st->total_bytes, total, sizeof total),
               ts_bytesize_format((int64_t)atomic_load(&d.st->used_bytes), used, sizeof used),
               ts_simgpu_util_percent(&d, 1000000000ull),
               (unsigned long long)atomic_load(&d.st->kernels));
        ts_simgpu_close(&d);
    }
    return 0;
}

/* gpu=N pid=P used=SIZE busy_ms=T util=U%: the memory a process holds, the
 * kernel time it ever queued, and its busy share of the last second. */
static int procs(const char *dir)
{
    unsigned n = ts_simgpu_count(dir);
    for (unsigned i = 0; i < n; i++) {
        struct ts_simgpu_dev d;
        int rc = ts_simgpu_open(dir, i, &d);
        if (rc < 0) {
            fprintf(stderr, "could not open gpu %u in %s: %s\n", i, dir, strerror(-rc));
            return 1;
        }
        /* Copied under the lock, printed after: a slow reader of stdout
         * must not hold up the GPU's users. */
        struct ts_simgpu_proc slots[TS_SIMGPU_MAX_PROCS];
        uint64_t recent[TS_SIMGPU_MAX_PROCS];
        uint64_t now = ts_simgpu_now_ns(), from = now > 1000000000ull ? now - 1000000000ull : 0;
        ts_simgpu_lock(&d);
        ts_simgpu_reap(&d);
        memcpy(slots, d.st->procs, sizeof slots);
        for (int k = 0; k < TS_SIMGPU_MAX_PROCS; k++)
            recent[k] = slots[k].pid ? ts_simgpu_busy_ns(&d, slots[k].pid, from, now) : 0;
        ts_simgpu_unlock(&d);
        for (int k = 0; k < TS_SIMGPU_MAX_PROCS; k++) {
            if (slots[k].pid == 0)
                continue;
            char used[32];
            printf("gpu=%u pid=%d used=%s busy_ms=%llu util=%u%%\n", i, (int)slots[k].pid,
                   ts_bytesize_format((int64_t)slots[k].used_bytes, used, sizeof used),
                   (unsigned long long)(slots[k].busy_ns / 1000000u),
                   (unsigned)(recent[k] * 100 / (now - from)));
        }
        ts_simgpu_close(&d);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "show") == 0)
        return show(argv[2]);
    if (argc == 3 && strcmp(argv[1], "procs") == 0)
        return procs(argv[2]);
    if ((argc != 5 && argc != 6) || strcmp(argv[1], "create") != 0)
        return usage();
    char *end;
    unsigned long count = strtoul(argv[3], &end, 10);
    int64_t bytes, bw = 0;
    if (*end || count == 0 || count > TS_SIMGPU_MAX_GPUS) {
        fprintf(stderr, "count must be between 1 and %d: %s\n", TS_SIMGPU_MAX_GPUS, argv[3]);
        return 2;
    }
    if (ts_bytesize_parse(argv[4], &bytes) < 0 || bytes <= 0) {
        fprintf(stderr, "invalid size: %s\n", argv[4]);
        return 2;
    }
    if (argc == 6 && ts_bytesize_parse(argv[5], &bw) < 0) {
        fprintf(stderr, "invalid bandwidth: %s\n", argv[5]);
        return 2;
    }
    int rc = ts_simgpu_create(argv[2], (unsigned)count, (uint64_t)bytes, (uint64_t)bw);
    if (rc < 0) {
        fprintf(stderr, "could not create simulated GPUs in %s: %s\n", argv[2], strerror(-rc));
        return 1;
    }
    return 0;
}
