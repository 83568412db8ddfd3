/*
 * run.h - what run.c (the loop), buffer.c (writing and checking device
 * memory) and burst.c (bursts) share: the state of a run. Internal to
 * tessera-gpuload; gpuload.h is its contract.
 */
#ifndef TS_AGENT_GPULOAD_RUN_H
#define TS_AGENT_GPULOAD_RUN_H

#include <stdio.h>
#include <time.h>

#include "agent/gpuload/gpuload.h"
#include "api/clock.h"
#include "api/units.h"

#define TS_GPULOAD_CHUNK ((size_t)4 << 20) /* bytes per copy when writing or checking */

struct buffer {
    CUdeviceptr ptr;
    uint64_t size;
    uint64_t written; /* the step whose pattern it holds */
};

struct run {
    const struct ts_gpuload_plan *plan;
    struct ts_gpuload_cuda cu;
    CUdevice dev;
    bool ctx_retained;
    CUmodule mod;
    CUfunction busy;
    CUstream stream;
    struct buffer *bufs;
    unsigned nbufs;            /* allocated so far */
    unsigned char *got, *want; /* CHUNK bytes each */
    uint64_t step;             /* steps completed, counted across resumes */
    bool resumed;
    uint64_t start_ns, end_ns; /* end_ns 0: no duration */
    uint64_t next_checkpoint_ns;
    uint64_t next_request_ns; /* inference */
    uint64_t busy_total_ns;
    uint64_t checked; /* bytes checked by the last step */
    /* bursts */
    struct buffer burst; /* valid while burst_held */
    bool burst_held;
    uint64_t burst_no;       /* the last burst taken or skipped, from 1 */
    uint64_t bursts;         /* taken */
    uint64_t bursts_skipped; /* --burst-optional: refused for memory */
    uint64_t burst_next_ns;  /* none held: when the next is due */
    uint64_t burst_taken_ns; /* held: when its allocation returned */
    uint64_t burst_end_ns;   /* held: when it is due to be freed */
    uint64_t burst_checked;  /* held: bytes of it checked so far */
};

/* Helpers of all three files: static, so each has its own copy. */

static inline uint64_t now_ns(void)
{
    return (uint64_t)ts_now_ns();
}

static inline double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* n bytes as "64MiB" into buf; returns buf. */
static inline const char *fmt_bytes(uint64_t n, char *buf, size_t len)
{
    return ts_bytesize_format((int64_t)n, buf, len);
}

/* Print why a CUDA call failed ("could not WHAT: NAME (text)"); the exit
 * status for it. */
static inline int cuda_failed(const struct run *r, CUresult rc, const char *what)
{
    char desc[160];
    fprintf(stderr, "tessera-gpuload: could not %s: %s\n", what,
            ts_gpuload_cuda_describe(&r->cu, rc, desc, sizeof desc));
    return TS_GPULOAD_EXIT_FAILED;
}

/*
 * buffer.c. b is one of r->bufs or &r->burst. Each returns 0 or an exit
 * status, the reason printed.
 */
/* Write b's touched bytes with the pattern of step; b->written = step. */
int ts_gpuload_buffer_write(struct run *r, struct buffer *b, uint64_t step);
/* Check b's touched bytes against the pattern it was last written with;
 * adds the bytes found right to *checked. in_step: checked in step
 * r->step + 1 (false: before the burst is freed, after step r->step). */
int ts_gpuload_buffer_check(struct run *r, struct buffer *b, bool in_step, uint64_t *checked);
/* The data part of step s: check every buffer and the held burst, then
 * rewrite one buffer (round robin) and the burst with the pattern of s;
 * r->checked is the bytes checked. */
int ts_gpuload_buffer_step(struct run *r, uint64_t s);
/* Test hooks: change one byte of b (NULL: none, said so) behind the
 * pattern's back, as a faulty swap would; hook names the variable. */
int ts_gpuload_buffer_corrupt(struct run *r, struct buffer *b, const char *hook);

/*
 * burst.c. Callers call them between steps (or requests) and not once a
 * signal came.
 */
/* r->burst_next_ns for burst 1, from r->start_ns. */
void ts_gpuload_burst_init(struct run *r);
/* When the next burst starts or the held one ends; UINT64_MAX without
 * bursts. */
uint64_t ts_gpuload_burst_due_ns(const struct run *r);
/* Start the burst that is due, then end the held one if it is due (so a
 * hold of 0 is freed at once). 0 or an exit status. */
int ts_gpuload_burst_tick(struct run *r);
/* Check the held burst once more, free it and print its end line. */
int ts_gpuload_burst_end(struct run *r);

#endif /* TS_AGENT_GPULOAD_RUN_H */
