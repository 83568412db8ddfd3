/*
 * run.c - tessera-gpuload's loop: set the GPU up, then one step after
 * another until the duration, the step limit or a signal.
 *
 * A step launches the busy kernel on a non-blocking stream, meanwhile
 * checks every buffer against the pattern it was last written with and
 * rewrites one buffer (round robin) with the pattern of this step, waits for
 * the kernel, prints one line, and sleeps until the next step is due. So a
 * buffer holds its data for --buffers steps, long enough for a suspend or a
 * swap to happen in between, and every byte that comes back is checked.
 *
 * Signals only set a flag; sleeps are cut into short naps that look at it,
 * so a SIGTERM ends the current step, writes the checkpoint and returns
 * within one step (plus one kernel) even when a driver thread took it.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/gpuload/gpuload.h"
#include "api/units.h"

#define CHUNK ((size_t)4 << 20) /* bytes per copy when writing or checking */
#define NAP_NS 50000000ull      /* longest sleep between looks at the signal flag */
#define INFERENCE_STEP_NS 1000000000ull
#define LATENCY_SAMPLES 1024 /* per inference step, for the median */

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

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
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* Sleep until t, or less when a signal came. */
static void nap_until(uint64_t t)
{
    for (;;) {
        uint64_t now = now_ns();
        if (stop_signal || now >= t)
            return;
        uint64_t d = t - now < NAP_NS ? t - now : NAP_NS;
        struct timespec ts = {.tv_sec = (time_t)(d / 1000000000ull),
                              .tv_nsec = (long)(d % 1000000000ull)};
        nanosleep(&ts, NULL);
    }
}

static const char *signal_name(int sig)
{
    return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a signal";
}

/* Print why a CUDA call failed; the exit status for it. */
static int cuda_failed(const struct run *r, CUresult rc, const char *what)
{
    char desc[160];
    fprintf(stderr, "tessera-gpuload: could not %s: %s\n", what,
            ts_gpuload_cuda_describe(&r->cu, rc, desc, sizeof desc));
    return TS_GPULOAD_EXIT_FAILED;
}

/* The head and the tail of a buffer that are written and checked. */
static unsigned windows_of(const struct run *r, const struct buffer *b, uint64_t off[2],
                           uint64_t len[2])
{
    uint64_t t = r->plan->touch;
    if (t == 0)
        return 0;
    if (t >= b->size) {
        off[0] = 0;
        len[0] = b->size;
        return 1;
    }
    uint64_t tail = t / 2;
    off[0] = 0;
    len[0] = t - tail;
    if (tail == 0)
        return 1;
    off[1] = b->size - tail;
    len[1] = tail;
    return 2;
}

static int write_buffer(struct run *r, unsigned i, uint64_t step)
{
    struct buffer *b = &r->bufs[i];
    uint64_t key = ts_gpuload_data_key(r->plan->seed, i, step);
    uint64_t off[2], len[2];
    unsigned nw = windows_of(r, b, off, len);
    for (unsigned w = 0; w < nw; w++)
        for (uint64_t pos = 0; pos < len[w]; pos += CHUNK) {
            size_t n = len[w] - pos < CHUNK ? (size_t)(len[w] - pos) : CHUNK;
            ts_gpuload_data_fill(r->want, n, key, off[w] + pos);
            CUresult rc = r->cu.cuMemcpyHtoD_v2(b->ptr + off[w] + pos, r->want, n);
            if (rc != CUDA_SUCCESS)
                return cuda_failed(r, rc, "copy to the device (cuMemcpyHtoD_v2)");
        }
    b->written = step;
    return 0;
}

static int check_buffer(struct run *r, unsigned i)
{
    struct buffer *b = &r->bufs[i];
    uint64_t key = ts_gpuload_data_key(r->plan->seed, i, b->written);
    uint64_t off[2], len[2];
    unsigned nw = windows_of(r, b, off, len);
    for (unsigned w = 0; w < nw; w++)
        for (uint64_t pos = 0; pos < len[w]; pos += CHUNK) {
            size_t n = len[w] - pos < CHUNK ? (size_t)(len[w] - pos) : CHUNK;
            uint64_t at = off[w] + pos;
            CUresult rc = r->cu.cuMemcpyDtoH_v2(r->got, b->ptr + at, n);
            if (rc != CUDA_SUCCESS)
                return cuda_failed(r, rc, "copy from the device (cuMemcpyDtoH_v2)");
            ts_gpuload_data_fill(r->want, n, key, at);
            size_t first, count;
            if (!ts_gpuload_data_same(r->got, r->want, n, &first, &count)) {
                char size[32];
                fprintf(stderr,
                        "tessera-gpuload: data loss detected: buffer %u of %u (%s at device "
                        "address 0x%llx), byte %" PRIu64 ": expected 0x%02x, found 0x%02x; %zu "
                        "of %zu bytes read back differ (written at step %" PRIu64
                        ", checked in step %" PRIu64 ")\n",
                        i, r->nbufs, ts_bytesize_format((int64_t)b->size, size, sizeof size),
                        (unsigned long long)b->ptr, at + first, r->want[first], r->got[first],
                        count, n, b->written, r->step + 1);
                return TS_GPULOAD_EXIT_DATA_LOSS;
            }
            r->checked += n;
        }
    return 0;
}

/* Check every buffer, then rewrite one with the pattern of step s. */
static int data_step(struct run *r, uint64_t s)
{
    r->checked = 0;
    if (r->nbufs == 0 || r->plan->touch == 0)
        return 0;
    for (unsigned i = 0; i < r->nbufs; i++) {
        int st = check_buffer(r, i);
        if (st)
            return st;
    }
    return write_buffer(r, (unsigned)(s % r->nbufs), s);
}

/* Test hook: change one byte of buffer 0 behind the pattern's back, as a
 * faulty swap would; the next step must find it. */
static int corrupt(struct run *r)
{
    uint64_t off[2], len[2];
    if (r->nbufs == 0 || windows_of(r, &r->bufs[0], off, len) == 0) {
        fprintf(stderr, "tessera-gpuload: TESSERA_GPULOAD_CORRUPT_STEP needs memory and --touch\n");
        return 0;
    }
    CUdeviceptr at = r->bufs[0].ptr + len[0] / 2;
    unsigned char byte;
    CUresult rc = r->cu.cuMemcpyDtoH_v2(&byte, at, 1);
    byte ^= 0x5a;
    if (rc == CUDA_SUCCESS)
        rc = r->cu.cuMemcpyHtoD_v2(at, &byte, 1);
    if (rc != CUDA_SUCCESS)
        return cuda_failed(r, rc, "change a byte for TESSERA_GPULOAD_CORRUPT_STEP");
    fprintf(stderr,
            "tessera-gpuload: test hook: changed byte %" PRIu64 " of buffer 0 after step %" PRIu64
            "\n",
            len[0] / 2, r->step);
    return 0;
}

static int launch(struct run *r, uint64_t ns)
{
    if (ns == 0)
        return 0;
    unsigned long long arg = ns;
    void *params[] = {&arg};
    CUresult rc = r->cu.cuLaunchKernel(r->busy, 1, 1, 1, 1, 1, 1, 0, r->stream, params, NULL);
    if (rc != CUDA_SUCCESS)
        return cuda_failed(r, rc, "launch tessera_busy_ns (cuLaunchKernel)");
    r->busy_total_ns += ns;
    return 0;
}

static int wait_kernel(struct run *r)
{
    CUresult rc = r->cu.cuStreamSynchronize(r->stream);
    return rc == CUDA_SUCCESS ? 0 : cuda_failed(r, rc, "wait for the GPU (cuStreamSynchronize)");
}

static const char *fmt_bytes(uint64_t n, char *buf, size_t len)
{
    return ts_bytesize_format((int64_t)n, buf, len);
}

/* ---- patterns: one step each; *next is when the next step is due ---- */

static int train_step(struct run *r, uint64_t *next)
{
    const struct ts_gpuload_plan *p = r->plan;
    uint64_t t0 = now_ns(), busy = (uint64_t)(p->busy * (double)p->step);
    int st = launch(r, busy);
    if (!st)
        st = data_step(r, r->step + 1);
    if (!st)
        st = wait_kernel(r);
    if (st)
        return st;
    r->step++;
    char c[32];
    printf("step=%" PRIu64 " busy_ms=%.0f took_ms=%.0f checked=%s\n", r->step, ms(busy),
           ms(now_ns() - t0), fmt_bytes(r->checked, c, sizeof c));
    *next = t0 + p->step;
    return 0;
}

static int notebook_step(struct run *r, uint64_t *next)
{
    const struct ts_gpuload_plan *p = r->plan;
    uint64_t t0 = now_ns();
    int st = launch(r, p->burst);
    if (!st)
        st = data_step(r, r->step + 1);
    if (!st)
        st = wait_kernel(r);
    if (st)
        return st;
    r->step++;
    uint64_t done = now_ns();
    char c[32];
    printf("step=%" PRIu64 " burst_ms=%.0f took_ms=%.0f idle_ms=%.0f checked=%s\n", r->step,
           ms(p->burst), ms(done - t0), ms(p->idle), fmt_bytes(r->checked, c, sizeof c));
    *next = done + p->idle;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Requests arrive every 1/rate s on a clock of their own; each is served
 * by one burst; a request's latency runs from its arrival to the end of its
 * burst, so a slow or shared GPU shows as queueing. One step per second. */
static int inference_step(struct run *r, uint64_t *next)
{
    const struct ts_gpuload_plan *p = r->plan;
    uint64_t t0 = now_ns(), end = t0 + INFERENCE_STEP_NS;
    uint64_t interval = (uint64_t)(1e9 / p->rate);
    if (interval == 0)
        interval = 1;
    if (r->next_request_ns == 0)
        r->next_request_ns = t0;
    uint64_t lat[LATENCY_SAMPLES], lat_max = 0, served = 0;
    size_t nlat = 0;
    while (r->next_request_ns < end && !stop_signal) {
        nap_until(r->next_request_ns);
        if (stop_signal)
            break;
        int st = launch(r, p->burst);
        if (!st)
            st = wait_kernel(r);
        if (st)
            return st;
        uint64_t l = now_ns() - r->next_request_ns;
        if (nlat < LATENCY_SAMPLES)
            lat[nlat++] = l;
        lat_max = l > lat_max ? l : lat_max;
        served++;
        r->next_request_ns += interval;
    }
    int st = data_step(r, r->step + 1);
    if (st)
        return st;
    r->step++;
    qsort(lat, nlat, sizeof lat[0], cmp_u64);
    char c[32];
    printf("step=%" PRIu64 " requests=%" PRIu64
           " p50_ms=%.1f max_ms=%.1f busy_ms=%.0f checked=%s\n",
           r->step, served, nlat ? ms(lat[nlat / 2]) : 0.0, ms(lat_max), ms(served * p->burst),
           fmt_bytes(r->checked, c, sizeof c));
    *next = end;
    return 0;
}

/* ---- set-up and tear-down ---- */

static int setup(struct run *r)
{
    const struct ts_gpuload_plan *p = r->plan;
    struct ts_error err;
    if (ts_gpuload_cuda_load(&r->cu, &err) != TS_OK) {
        fprintf(stderr, "tessera-gpuload: %s\n", err.message);
        return TS_GPULOAD_EXIT_NO_GPU;
    }
    struct ts_gpuload_cuda *cu = &r->cu;
    CUresult rc = cu->cuInit(0);
    if (rc != CUDA_SUCCESS) {
        cuda_failed(r, rc, "initialize CUDA (cuInit)");
        return TS_GPULOAD_EXIT_NO_GPU;
    }
    int count = 0;
    rc = cu->cuDeviceGetCount(&count);
    if (rc != CUDA_SUCCESS) {
        cuda_failed(r, rc, "count devices (cuDeviceGetCount)");
        return TS_GPULOAD_EXIT_NO_GPU;
    }
    if (p->device >= count) {
        fprintf(stderr, "tessera-gpuload: no device %d: %d visible\n", p->device, count);
        return TS_GPULOAD_EXIT_NO_GPU;
    }
    char name[128] = "";
    size_t total = 0;
    CUcontext ctx;
    if ((rc = cu->cuDeviceGet(&r->dev, p->device)) != CUDA_SUCCESS ||
        (rc = cu->cuDeviceGetName(name, sizeof name, r->dev)) != CUDA_SUCCESS ||
        (rc = cu->cuDeviceTotalMem_v2(&total, r->dev)) != CUDA_SUCCESS)
        return cuda_failed(r, rc, "query the device");
    if ((rc = cu->cuDevicePrimaryCtxRetain(&ctx, r->dev)) != CUDA_SUCCESS)
        return cuda_failed(r, rc, "create a context (cuDevicePrimaryCtxRetain)");
    r->ctx_retained = true;
    if ((rc = cu->cuCtxSetCurrent(ctx)) != CUDA_SUCCESS)
        return cuda_failed(r, rc, "make the context current (cuCtxSetCurrent)");

    char log[4096] = "";
    if (cu->cuModuleLoadDataEx) {
        CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *vals[] = {log, (void *)(uintptr_t)(sizeof log - 1)};
        rc = cu->cuModuleLoadDataEx(&r->mod, ts_gpuload_cuda_ptx, 2, opts, vals);
    } else {
        rc = cu->cuModuleLoadData(&r->mod, ts_gpuload_cuda_ptx);
    }
    if (rc != CUDA_SUCCESS) {
        r->mod = NULL;
        cuda_failed(r, rc, "load the kernel's PTX (cuModuleLoadDataEx)");
        if (log[0])
            fprintf(stderr, "tessera-gpuload: JIT log: %s\n", log);
        return TS_GPULOAD_EXIT_FAILED;
    }
    if ((rc = cu->cuModuleGetFunction(&r->busy, r->mod, "tessera_busy_ns")) != CUDA_SUCCESS)
        return cuda_failed(r, rc, "find tessera_busy_ns (cuModuleGetFunction)");
    if ((rc = cu->cuStreamCreate(&r->stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) {
        r->stream = NULL;
        return cuda_failed(r, rc, "create a stream (cuStreamCreate)");
    }

    char a[32], b[32], c[32], d[32];
    printf("tessera-gpuload pattern=%s device=%d gpu=\"%s\" gpu_memory=%s memory=%s buffers=%u "
           "touch=%s duration=%s steps=%" PRIu64 " pid=%d\n",
           p->pattern == TS_GPULOAD_TRAIN      ? "train"
           : p->pattern == TS_GPULOAD_NOTEBOOK ? "notebook"
                                               : "inference",
           p->device, name, fmt_bytes(total, a, sizeof a), fmt_bytes(p->memory, b, sizeof b),
           p->buffers, fmt_bytes(p->touch, c, sizeof c),
           ts_duration_format((int64_t)(p->duration / 1000000000ull), d, sizeof d), p->steps,
           (int)getpid());

    r->got = malloc(CHUNK);
    r->want = malloc(CHUNK);
    r->bufs = calloc(p->buffers ? p->buffers : 1, sizeof *r->bufs);
    if (!r->got || !r->want || !r->bufs) {
        fprintf(stderr, "tessera-gpuload: out of host memory\n");
        return TS_GPULOAD_EXIT_FAILED;
    }
    for (unsigned i = 0; i < p->buffers; i++) {
        uint64_t size = p->memory / p->buffers + (i < p->memory % p->buffers ? 1 : 0);
        rc = cu->cuMemAlloc_v2(&r->bufs[i].ptr, size);
        if (rc != CUDA_SUCCESS) {
            char desc[160];
            fprintf(stderr,
                    "tessera-gpuload: could not allocate buffer %u of %u (%s) on device %d: %s\n",
                    i, p->buffers, fmt_bytes(size, a, sizeof a), p->device,
                    ts_gpuload_cuda_describe(cu, rc, desc, sizeof desc));
            return rc == CUDA_ERROR_OUT_OF_MEMORY ? TS_GPULOAD_EXIT_OOM : TS_GPULOAD_EXIT_FAILED;
        }
        r->bufs[i].size = size;
        r->nbufs++;
    }
    for (unsigned i = 0; i < r->nbufs; i++) {
        int st = write_buffer(r, i, r->step);
        if (st)
            return st;
    }
    return 0;
}

static void teardown(struct run *r)
{
    struct ts_gpuload_cuda *cu = &r->cu;
    if (r->stream) {
        cu->cuStreamSynchronize(r->stream);
        cu->cuStreamDestroy_v2(r->stream);
    }
    for (unsigned i = 0; i < r->nbufs; i++)
        cu->cuMemFree_v2(r->bufs[i].ptr);
    if (r->mod)
        cu->cuModuleUnload(r->mod);
    if (r->ctx_retained) {
        cu->cuCtxSetCurrent(NULL);
        cu->cuDevicePrimaryCtxRelease_v2(r->dev);
    }
    free(r->bufs);
    free(r->got);
    free(r->want);
}

static int checkpoint(struct run *r)
{
    struct ts_error err;
    if (ts_gpuload_checkpoint_write(r->plan->checkpoint_dir, r->step, r->plan->resume_count,
                                    &err) != TS_OK) {
        fprintf(stderr, "tessera-gpuload: %s\n", err.message);
        return TS_GPULOAD_EXIT_FAILED;
    }
    return 0;
}

/* Read the checkpoint; r->step is where it left off. */
static int resume(struct run *r)
{
    const struct ts_gpuload_plan *p = r->plan;
    if (!p->checkpoint_dir)
        return 0;
    struct ts_error err;
    uint64_t step = 0;
    bool found = false;
    if (ts_gpuload_checkpoint_read(p->checkpoint_dir, &step, &found, &err) != TS_OK) {
        fprintf(stderr, "tessera-gpuload: %s\n", err.message);
        return TS_GPULOAD_EXIT_FAILED;
    }
    r->step = found ? step : 0;
    r->resumed = found;
    return 0;
}

static void say_resume(const struct run *r)
{
    const struct ts_gpuload_plan *p = r->plan;
    if (!p->checkpoint_dir)
        return;
    if (r->resumed)
        printf("resumed from step %" PRIu64 " (resume count %" PRId64 ")\n", r->step,
               p->resume_count);
    else
        printf("no checkpoint in %s: starting from step 0 (resume count %" PRId64 ")\n",
               p->checkpoint_dir, p->resume_count);
}

static int loop(struct run *r)
{
    const struct ts_gpuload_plan *p = r->plan;
    int (*step_fn)(struct run *, uint64_t *) = p->pattern == TS_GPULOAD_TRAIN      ? train_step
                                               : p->pattern == TS_GPULOAD_NOTEBOOK ? notebook_step
                                                                                   : inference_step;
    r->start_ns = now_ns();
    r->end_ns = p->duration ? r->start_ns + p->duration : 0;
    r->next_checkpoint_ns = r->start_ns + p->checkpoint_every;
    for (;;) {
        if (stop_signal || (r->end_ns && now_ns() >= r->end_ns) ||
            (p->steps && r->step >= p->steps))
            return 0;
        uint64_t next = 0;
        int st = step_fn(r, &next);
        if (st)
            return st;
        if (p->corrupt_step >= 0 && r->step == (uint64_t)p->corrupt_step && (st = corrupt(r)))
            return st;
        if (p->checkpoint_dir && now_ns() >= r->next_checkpoint_ns) {
            if ((st = checkpoint(r)))
                return st;
            r->next_checkpoint_ns = now_ns() + p->checkpoint_every;
        }
        if (p->steps && r->step >= p->steps)
            return 0;
        nap_until(r->end_ns && r->end_ns < next ? r->end_ns : next);
    }
}

int ts_gpuload_run(const struct ts_gpuload_plan *p)
{
    struct run r = {.plan = p};
    struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: sleeps end early */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    int st = resume(&r);
    if (!st && p->steps && r.step >= p->steps) {
        say_resume(&r);
        printf("done step=%" PRIu64 ": already at --steps %" PRIu64 "\n", r.step, p->steps);
        return 0;
    }
    if (!st)
        st = setup(&r);
    if (!st) {
        say_resume(&r);
        st = loop(&r);
    }
    if (!st && p->checkpoint_dir)
        st = checkpoint(&r);
    if (!st) {
        char ckpt[4200] = "";
        if (p->checkpoint_dir)
            snprintf(ckpt, sizeof ckpt, " checkpoint=%s/%s", p->checkpoint_dir,
                     TS_GPULOAD_CHECKPOINT_FILE);
        if (stop_signal)
            printf("stopping on %s after step %" PRIu64 "%s\n", signal_name(stop_signal), r.step,
                   ckpt);
        else
            printf("done step=%" PRIu64 " busy_s=%.1f elapsed_s=%.1f%s\n", r.step,
                   (double)r.busy_total_ns / 1e9, (double)(now_ns() - r.start_ns) / 1e9, ckpt);
    }
    teardown(&r);
    fflush(stdout);
    return !st && stop_signal ? -(int)stop_signal : st;
}
