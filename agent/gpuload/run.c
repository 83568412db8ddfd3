/*
 * run.c - tessera-gpuload's loop: set the GPU up, then one step after
 * another until the duration, the step limit or a signal.
 *
 * A step launches the busy kernel on a non-blocking stream, meanwhile
 * checks every buffer against the pattern it was last written with and
 * rewrites one buffer (round robin) with the pattern of this step (buffer.c),
 * waits for the kernel, prints one line, and sleeps until the next step is
 * due. So a buffer holds its data for --buffers steps, long enough for a
 * suspend or a swap to happen in between, and every byte that comes back is
 * checked.
 *
 * Bursts (--burst-memory, burst.c) are taken and freed here only between
 * steps (train), between requests (inference) or just before a step
 * (notebook: its idle time has no GPU call at all, so an idle notebook holds
 * its burst).
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

#include "agent/gpuload/run.h"

#define NAP_NS 50000000ull /* longest sleep between looks at the signal flag */
#define INFERENCE_STEP_NS 1000000000ull
#define LATENCY_SAMPLES 1024 /* per inference step, for the median */

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
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

/* Sleep until t, or less when a signal came, starting and ending bursts
 * that fall due meanwhile; a notebook's sleep is its idle time and has no
 * GPU call at all, so it only sleeps. */
static int wait_until(struct run *r, uint64_t t)
{
    if (r->plan->pattern == TS_GPULOAD_NOTEBOOK) {
        nap_until(t);
        return 0;
    }
    for (;;) {
        uint64_t due = ts_gpuload_burst_due_ns(r);
        nap_until(due < t ? due : t);
        if (stop_signal || now_ns() >= t)
            return 0;
        int st = ts_gpuload_burst_tick(r);
        if (st)
            return st;
    }
}

/* ---- patterns: one step each; *next is when the next step is due ---- */

static int train_step(struct run *r, uint64_t *next)
{
    const struct ts_gpuload_plan *p = r->plan;
    uint64_t t0 = now_ns(), busy = (uint64_t)(p->busy * (double)p->step);
    int st = launch(r, busy);
    if (!st)
        st = ts_gpuload_buffer_step(r, r->step + 1);
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
        st = ts_gpuload_buffer_step(r, r->step + 1);
    if (!st)
        st = wait_kernel(r);
    if (st)
        return st;
    r->step++;
    uint64_t done = now_ns();
    uint64_t idle = ts_gpuload_jitter(p->seed, TS_GPULOAD_JITTER_IDLE, r->step, p->idle, p->jitter);
    char c[32];
    printf("step=%" PRIu64 " burst_ms=%.0f took_ms=%.0f idle_ms=%.0f checked=%s\n", r->step,
           ms(p->burst), ms(done - t0), ms(idle), fmt_bytes(r->checked, c, sizeof c));
    *next = done + idle;
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
        int st = wait_until(r, r->next_request_ns);
        if (st)
            return st;
        if (stop_signal)
            break;
        st = launch(r, p->burst);
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
    int st = ts_gpuload_buffer_step(r, r->step + 1);
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

/* The driver, the device of the plan and a current context on it; its
 * name (len bytes) and memory. 0, or the exit status after saying why. */
static int setup_device(struct run *r, char *name, size_t len, size_t *total)
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
    CUcontext ctx;
    if ((rc = cu->cuDeviceGet(&r->dev, p->device)) != CUDA_SUCCESS ||
        (rc = cu->cuDeviceGetName(name, (int)len, r->dev)) != CUDA_SUCCESS ||
        (rc = cu->cuDeviceTotalMem_v2(total, r->dev)) != CUDA_SUCCESS)
        return cuda_failed(r, rc, "query the device");
    if ((rc = cu->cuDevicePrimaryCtxRetain(&ctx, r->dev)) != CUDA_SUCCESS)
        return cuda_failed(r, rc, "create a context (cuDevicePrimaryCtxRetain)");
    r->ctx_retained = true;
    if ((rc = cu->cuCtxSetCurrent(ctx)) != CUDA_SUCCESS)
        return cuda_failed(r, rc, "make the context current (cuCtxSetCurrent)");
    return 0;
}

/* The busy kernel from the PTX, and the stream it runs on. */
static int setup_kernel(struct run *r)
{
    struct ts_gpuload_cuda *cu = &r->cu;
    CUresult rc;
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
    return 0;
}

/* The line that says what this run does, on stdout. */
static void print_plan(const struct ts_gpuload_plan *p, const char *name, size_t total)
{
    char a[32], b[32], c[32], d[32], bursts[160] = "";
    if (p->burst_memory)
        snprintf(bursts, sizeof bursts,
                 " burst_memory=%s burst_every_ms=%.0f burst_hold_ms=%.0f jitter=%g%s",
                 fmt_bytes(p->burst_memory, a, sizeof a), ms(p->burst_every), ms(p->burst_hold),
                 p->jitter, p->burst_optional ? " burst_optional=yes" : "");
    printf("tessera-gpuload pattern=%s device=%d gpu=\"%s\" gpu_memory=%s memory=%s buffers=%u "
           "touch=%s duration=%s steps=%" PRIu64 "%s pid=%d\n",
           p->pattern == TS_GPULOAD_TRAIN      ? "train"
           : p->pattern == TS_GPULOAD_NOTEBOOK ? "notebook"
                                               : "inference",
           p->device, name, fmt_bytes(total, a, sizeof a), fmt_bytes(p->memory, b, sizeof b),
           p->buffers, fmt_bytes(p->touch, c, sizeof c),
           ts_duration_format((int64_t)(p->duration / 1000000000ull), d, sizeof d), p->steps,
           bursts, (int)getpid());
}

/* The host chunks and the device buffers of the plan, each written once. */
static int setup_buffers(struct run *r)
{
    const struct ts_gpuload_plan *p = r->plan;
    struct ts_gpuload_cuda *cu = &r->cu;
    CUresult rc;
    char a[32];
    r->got = malloc(TS_GPULOAD_CHUNK);
    r->want = malloc(TS_GPULOAD_CHUNK);
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
        int st = ts_gpuload_buffer_write(r, &r->bufs[i], r->step);
        if (st)
            return st;
    }
    return 0;
}

static int setup(struct run *r)
{
    char name[128] = "";
    size_t total = 0;
    int st = setup_device(r, name, sizeof name, &total);
    if (st == 0)
        st = setup_kernel(r);
    if (st != 0)
        return st;
    print_plan(r->plan, name, total);
    return setup_buffers(r);
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
    if (r->burst_held)
        cu->cuMemFree_v2(r->burst.ptr);
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
    ts_gpuload_burst_init(r);
    for (;;) {
        if (stop_signal || (r->end_ns && now_ns() >= r->end_ns) ||
            (p->steps && r->step >= p->steps))
            return 0;
        uint64_t next = 0;
        int st = ts_gpuload_burst_tick(r);
        if (!st)
            st = step_fn(r, &next);
        if (st)
            return st;
        if (p->corrupt_step >= 0 && r->step == (uint64_t)p->corrupt_step &&
            (st = ts_gpuload_buffer_corrupt(r, r->nbufs ? &r->bufs[0] : NULL,
                                            "TESSERA_GPULOAD_CORRUPT_STEP")))
            return st;
        if (p->checkpoint_dir && now_ns() >= r->next_checkpoint_ns) {
            if ((st = checkpoint(r)))
                return st;
            r->next_checkpoint_ns = now_ns() + p->checkpoint_every;
        }
        if (p->steps && r->step >= p->steps)
            return 0;
        if ((st = wait_until(r, r->end_ns && r->end_ns < next ? r->end_ns : next)))
            return st;
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
    if (!st && !stop_signal && r.burst_held)
        st = ts_gpuload_burst_end(
            &r); /* its last check and its line; a signal leaves it to teardown */
    if (!st && p->checkpoint_dir)
        st = checkpoint(&r);
    if (!st) {
        char ckpt[4200] = "";
        if (p->checkpoint_dir)
            snprintf(ckpt, sizeof ckpt, " checkpoint=%s/%s", p->checkpoint_dir,
                     TS_GPULOAD_CHECKPOINT_FILE);
        char bursts[64] = "";
        if (p->burst_memory && p->burst_optional)
            snprintf(bursts, sizeof bursts, " bursts=%" PRIu64 " bursts_skipped=%" PRIu64, r.bursts,
                     r.bursts_skipped);
        else if (p->burst_memory)
            snprintf(bursts, sizeof bursts, " bursts=%" PRIu64, r.bursts);
        if (stop_signal)
            printf("stopping on %s after step %" PRIu64 "%s\n", signal_name(stop_signal), r.step,
                   ckpt);
        else
            printf("done step=%" PRIu64 " busy_s=%.1f elapsed_s=%.1f%s%s\n", r.step,
                   (double)r.busy_total_ns / 1e9, (double)(now_ns() - r.start_ns) / 1e9, bursts,
                   ckpt);
    }
    teardown(&r);
    fflush(stdout);
    return !st && stop_signal ? -(int)stop_signal : st;
}
