/*
 * burst.c - tessera-gpuload's memory bursts (--burst-memory): one more
 * allocation taken when the next burst is due and freed when its hold is
 * over, checked by every step while held (buffer.c) and once more before
 * it is freed. Intervals are drawn with --jitter (jitter.c): the wait
 * before burst N and the hold of burst N are draw N of their streams.
 * run.c decides when bursts may be taken: between steps or requests, never
 * in a notebook's idle time.
 */
#include <inttypes.h>
#include <stdio.h>

#include "agent/gpuload/run.h"

static uint64_t draw(const struct run *r, enum ts_gpuload_jitter_stream stream, uint64_t k,
                     uint64_t mean)
{
    return ts_gpuload_jitter(r->plan->seed, stream, k, mean, r->plan->jitter);
}

/* Take burst r->burst_no + 1: allocate, write, print; or skip it when the
 * GPU has no room and --burst-optional allows. */
static int burst_start(struct run *r)
{
    const struct ts_gpuload_plan *p = r->plan;
    uint64_t n = ++r->burst_no, t0 = now_ns();
    CUresult rc = r->cu.cuMemAlloc_v2(&r->burst.ptr, p->burst_memory);
    uint64_t t1 = now_ns();
    char size[32];
    fmt_bytes(p->burst_memory, size, sizeof size);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && p->burst_optional) {
        const char *name = NULL;
        if (r->cu.cuGetErrorName(rc, &name) != CUDA_SUCCESS || !name)
            name = "CUDA_ERROR_OUT_OF_MEMORY";
        uint64_t wait = draw(r, TS_GPULOAD_JITTER_EVERY, n + 1, p->burst_every);
        r->burst_next_ns = t1 + wait;
        r->bursts_skipped++;
        printf("burst skipped=%" PRIu64 " bytes=%s err=%s alloc_ms=%.0f next_ms=%.0f\n", n, size,
               name, ms(t1 - t0), ms(wait));
        return 0;
    }
    if (rc != CUDA_SUCCESS) {
        char desc[160];
        fprintf(stderr,
                "tessera-gpuload: could not allocate the burst buffer of burst %" PRIu64
                " (%s) on device %d: %s\n",
                n, size, p->device, ts_gpuload_cuda_describe(&r->cu, rc, desc, sizeof desc));
        return rc == CUDA_ERROR_OUT_OF_MEMORY ? TS_GPULOAD_EXIT_OOM : TS_GPULOAD_EXIT_FAILED;
    }
    r->burst.size = p->burst_memory;
    r->burst_held = true;
    r->bursts++;
    r->burst_checked = 0;
    r->burst_taken_ns = t1;
    uint64_t hold = draw(r, TS_GPULOAD_JITTER_HOLD, n, p->burst_hold);
    r->burst_end_ns = t1 + hold;
    printf("burst start=%" PRIu64 " bytes=%s alloc_ms=%.0f hold_ms=%.0f\n", n, size, ms(t1 - t0),
           ms(hold));
    int st = ts_gpuload_buffer_write(r, &r->burst, r->step);
    if (!st && p->corrupt_burst == (int64_t)n)
        st = ts_gpuload_buffer_corrupt(r, &r->burst, "TESSERA_GPULOAD_CORRUPT_BURST");
    return st;
}

int ts_gpuload_burst_end(struct run *r)
{
    uint64_t c = 0;
    int st = r->plan->touch ? ts_gpuload_buffer_check(r, &r->burst, false, &c) : 0;
    if (st)
        return st; /* still held: teardown frees it */
    r->burst_checked += c;
    r->burst_held = false;
    CUresult rc = r->cu.cuMemFree_v2(r->burst.ptr);
    if (rc != CUDA_SUCCESS)
        return cuda_failed(r, rc, "free the burst buffer (cuMemFree_v2)");
    uint64_t t = now_ns();
    uint64_t wait = draw(r, TS_GPULOAD_JITTER_EVERY, r->burst_no + 1, r->plan->burst_every);
    r->burst_next_ns = t + wait;
    char checked[32];
    printf("burst end=%" PRIu64 " held_ms=%.0f checked=%s next_ms=%.0f\n", r->burst_no,
           ms(t - r->burst_taken_ns), fmt_bytes(r->burst_checked, checked, sizeof checked),
           ms(wait));
    return 0;
}

uint64_t ts_gpuload_burst_due_ns(const struct run *r)
{
    if (r->plan->burst_memory == 0)
        return UINT64_MAX;
    return r->burst_held ? r->burst_end_ns : r->burst_next_ns;
}

int ts_gpuload_burst_tick(struct run *r)
{
    if (r->plan->burst_memory == 0)
        return 0;
    int st = 0;
    if (!r->burst_held && now_ns() >= r->burst_next_ns)
        st = burst_start(r);
    if (!st && r->burst_held && now_ns() >= r->burst_end_ns)
        st = ts_gpuload_burst_end(r);
    return st;
}

void ts_gpuload_burst_init(struct run *r)
{
    r->burst_next_ns = r->start_ns + draw(r, TS_GPULOAD_JITTER_EVERY, 1, r->plan->burst_every);
}
