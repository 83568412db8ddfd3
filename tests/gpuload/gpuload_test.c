/*
 * gpuload_test.c - checks of tessera-gpuload. Unit cases call its modules;
 * e2e cases run the program on fresh simulated GPUs in a temporary folder
 * (harness.c), as the agent would run it, and check its output, exit
 * status, checkpoint file and what the GPU's shared state says about it.
 * Bursts have their own program, gpuload_burst_test.c.
 *
 * Usage: gpuload_test PATH_TO_TESSERA_GPULOAD CASE
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/array.h"
#include "tests/gpuload/harness.h"

/* ---- unit cases ---- */

static void times_rates_and_plans_parse_as_documented(void)
{
    uint64_t ns = 0;
    CHECK(ts_gpuload_options_parse_time("200ms", &ns) == 0 && ns == 200 * MS);
    CHECK(ts_gpuload_options_parse_time("5s", &ns) == 0 && ns == 5000 * MS);
    CHECK(ts_gpuload_options_parse_time("1h30m", &ns) == 0 && ns == 5400000 * MS);
    CHECK(ts_gpuload_options_parse_time("2", &ns) == 0 && ns == 2000 * MS);
    CHECK(ts_gpuload_options_parse_time("0ms", &ns) == 0 && ns == 0);
    const char *bad_times[] = {"", "ms", "-5ms", "1.5s", "5 ms", "5msx", "x", "5us"};
    for (size_t i = 0; i < TS_ARRAY_LEN(bad_times); i++)
        CHECK(ts_gpuload_options_parse_time(bad_times[i], &ns) < 0);
    double rate = 0;
    CHECK(ts_gpuload_options_parse_rate("10/s", &rate) == 0 && rate == 10);
    CHECK(ts_gpuload_options_parse_rate("0.5/s", &rate) == 0 && rate == 0.5);
    CHECK(ts_gpuload_options_parse_rate("250", &rate) == 0 && rate == 250);
    const char *bad_rates[] = {"", "0/s", "0", "-1/s", "x", "10/m", "10/s ", "nan", "inf"};
    for (size_t i = 0; i < TS_ARRAY_LEN(bad_rates); i++)
        CHECK(ts_gpuload_options_parse_rate(bad_rates[i], &rate) < 0);

    /* Defaults, and the default burst of each pattern. */
    struct {
        const char *argv[8];
        int ok;
        const char *field;
    } cases[] = {
        {{"x", "--pattern", "notebook"}, 1, ""},
        {{"x", "--pattern", "inference", "--rate", "4/s"}, 1, ""},
        {{"x", "--busy", "1.5"}, 0, "busy"},
        {{"x", "--busy", "0.5x"}, 0, "busy"},
        {{"x", "--step", "0ms"}, 0, "step"},
        {{"x", "--rate", "fast"}, 0, "rate"},
        {{"x", "--checkpoint-every", "0"}, 0, "checkpoint-every"},
        {{"x", "--memory", "10", "--buffers", "16"}, 1, ""},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        int argc = 0;
        while (cases[i].argv[argc])
            argc++;
        struct ts_gpuload_config cfg = {0};
        struct ts_gpuload_plan plan;
        struct ts_error err = {0};
        enum ts_config_result r =
            ts_config_load(ts_gpuload_options, ts_gpuload_options_count, &cfg, "usage", argc,
                           (char **)cases[i].argv, NULL, NULL, &err);
        CHECK(r == TS_CONFIG_OK);
        if (r != TS_CONFIG_OK)
            continue;
        enum ts_err e = ts_gpuload_options_plan(&cfg, &plan, &err);
        CHECK((e == TS_OK) == cases[i].ok);
        if (!cases[i].ok)
            CHECK(strcmp(err.field, cases[i].field) == 0 &&
                  strstr(err.message, "invalid value for --") != NULL);
        if (cases[i].ok && i == 0)
            CHECK(plan.pattern == TS_GPULOAD_NOTEBOOK && plan.burst == 200 * MS &&
                  plan.idle == 5000 * MS && plan.memory == GiB && plan.buffers == 4 &&
                  plan.touch == 8 * MiB && plan.duration == 0 && plan.busy == 0.9 &&
                  plan.checkpoint_dir == NULL && plan.corrupt_step == -1);
        if (cases[i].ok && i == 1)
            CHECK(plan.pattern == TS_GPULOAD_INFERENCE && plan.burst == 20 * MS && plan.rate == 4);
        if (cases[i].ok && i == 7)
            CHECK(plan.memory == 10 && plan.buffers == 10); /* never an empty buffer */
        ts_config_free(ts_gpuload_options, ts_gpuload_options_count, &cfg);
    }
}

static void any_window_of_a_pattern_can_be_made_again_and_a_changed_byte_is_found(void)
{
    unsigned char whole[1000], part[300], other[1000];
    uint64_t key = ts_gpuload_data_key(1, 2, 3);
    ts_gpuload_data_fill(whole, sizeof whole, key, 0);
    for (uint64_t off = 0; off < 20; off++) { /* every alignment */
        ts_gpuload_data_fill(part, sizeof part, key, 500 + off);
        CHECK(memcmp(part, whole + 500 + off, sizeof part) == 0);
    }
    /* Another buffer, step or seed: another pattern. */
    uint64_t keys[] = {ts_gpuload_data_key(1, 3, 3), ts_gpuload_data_key(1, 2, 4),
                       ts_gpuload_data_key(2, 2, 3)};
    for (size_t i = 0; i < 3; i++) {
        CHECK(keys[i] != key);
        ts_gpuload_data_fill(other, sizeof other, keys[i], 0);
        CHECK(memcmp(other, whole, sizeof whole) != 0);
    }
    size_t first = 0, count = 0;
    memcpy(other, whole, sizeof whole);
    CHECK(ts_gpuload_data_same(other, whole, sizeof whole, &first, &count));
    other[777] ^= 1;
    other[900] ^= 0x80;
    CHECK(!ts_gpuload_data_same(other, whole, sizeof whole, &first, &count));
    CHECK(first == 777 && count == 2);
}

static void checkpoint_round_trips_and_a_damaged_one_is_refused(void)
{
    gl_setup(GiB);
    char dir[400], path[500];
    snprintf(dir, sizeof dir, "%s/ckpt", gl_tmp);
    snprintf(path, sizeof path, "%s/%s", dir, TS_GPULOAD_CHECKPOINT_FILE);
    uint64_t step = 99;
    bool found = true;
    struct ts_error err;
    CHECK(ts_gpuload_checkpoint_read(dir, &step, &found, &err) == TS_OK && !found);
    CHECK(ts_gpuload_checkpoint_write(dir, 1234, 2, &err) == TS_OK); /* creates dir */
    CHECK(ts_gpuload_checkpoint_read(dir, &step, &found, &err) == TS_OK && found && step == 1234);
    CHECK(gl_has(path, "step=1234\n") && gl_has(path, "resume_count=2\n"));
    CHECK(ts_gpuload_checkpoint_write(dir, 1235, 2, &err) == TS_OK); /* replaces */
    CHECK(ts_gpuload_checkpoint_read(dir, &step, &found, &err) == TS_OK && step == 1235);
    const char *damaged[] = {"", "step=\n", "step=12x\n", "step=-1\n", "# no step\nfoo=1\n"};
    for (size_t i = 0; i < TS_ARRAY_LEN(damaged); i++) {
        FILE *f = fopen(path, "w");
        fputs(damaged[i], f);
        fclose(f);
        CHECK(ts_gpuload_checkpoint_read(dir, &step, &found, &err) == TS_ERR_IO);
        CHECK(strstr(err.message, "is damaged") != NULL);
    }
    FILE *f = fopen(path, "w");
    fputs("# written by hand\nnew_key=7\nstep=5\n", f);
    fclose(f);
    CHECK(ts_gpuload_checkpoint_read(dir, &step, &found, &err) == TS_OK && step == 5);
    /* A folder that cannot be made. */
    char bad[500];
    snprintf(bad, sizeof bad, "%s/none/deeper", gl_tmp);
    CHECK(ts_gpuload_checkpoint_write(bad, 1, 0, &err) == TS_ERR_IO);
}

/* The PTX that real GPUs JIT-compile, checked with NVIDIA's assembler
 * where a CUDA toolkit is installed (the build needs none: skipped
 * without one), for the oldest and newest GPUs it knows. */
static void the_embedded_ptx_assembles_for_real_gpus_when_ptxas_is_installed(void)
{
    const char *cands[] = {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"};
    const char *ptxas = NULL;
    for (size_t i = 0; i < TS_ARRAY_LEN(cands) && !ptxas; i++)
        if (access(cands[i], X_OK) == 0)
            ptxas = cands[i];
    if (!ptxas) {
        fprintf(stderr, "no ptxas: skipped\n");
        gl_skipped = true;
        return;
    }
    gl_setup(GiB);
    char path[400], cmd[1600];
    snprintf(path, sizeof path, "%s/busy.ptx", gl_tmp);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(ts_gpuload_cuda_ptx, f) >= 0);
    if (f)
        fclose(f);
    const char *archs[] = {"sm_75", "sm_90"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "'%s' -arch=%s '%s' -o '%s/busy_%s.cubin'", ptxas, archs[i], path,
                 gl_tmp, archs[i]);
        if (system(cmd) != 0) {
            fprintf(stderr, "ptxas failed for %s: %s\n", archs[i], cmd);
            gl_failures++;
        }
    }
}

/* ---- e2e cases ---- */

static void train_holds_its_memory_and_keeps_the_gpu_busy(void)
{
    gl_setup(4 * GiB);
    /* --steps rather than --duration: a loaded machine makes steps late,
     * not fewer. */
    const char *args[] = {"--pattern", "train",   "--memory", "64MiB",  "--buffers",
                          "4",         "--touch", "1MiB",     "--step", "100ms",
                          "--busy",    "0.5",     "--steps",  "20",     NULL};
    struct gl_child c = gl_spawn("train", args, NULL);
    CHECK(gl_wait_for(c.out, "\nstep=3 ", 30));
    struct ts_simgpu_proc p1 = gl_slot_of(c.pid);
    CHECK_EQ(p1.used_bytes, 64 * MiB); /* the allocations, visible in the shared state */
    CHECK(p1.busy_ns >= 3 * 50 * MS);
    CHECK(gl_wait_for(c.out, "\nstep=8 ", 30));
    struct ts_simgpu_proc p2 = gl_slot_of(c.pid);
    CHECK(p2.busy_ns >= p1.busy_ns + 4 * 50 * MS); /* busy time advances */
    unsigned util = gl_gpu_util();
    CHECK(util > 0 && util <= 70); /* busy, at most --busy of the last second */
    CHECK_EQ(gl_finish(&c, 30), 0);
    struct gl_steps s = gl_steps_of(c.out, "busy_ms");
    CHECK(s.lines == 20 && s.last == 20);
    CHECK(s.sum == 50.0 * s.lines);
    CHECK(gl_elapsed_of(c.out) >= 1.9); /* one step every 100 ms, not faster */
    struct ts_simgpu_proc p3 = gl_slot_of(c.pid);
    CHECK_EQ(p3.busy_ns, 20 * 50 * MS); /* every kernel, each of its length */
    CHECK_EQ(p3.used_bytes, 0);         /* freed before it ended */
    CHECK(gl_has(c.out, "tessera-gpuload pattern=train device=0 gpu=\"Tessera SimGPU 4GiB\""));
    CHECK(gl_has(c.out, "checked=4MiB")); /* 1 MiB of each of 4 buffers */
    CHECK(gl_has(c.out, "\ndone step=20 "));
    CHECK_EQ(gl_gpu_used_after_reap(), 0);
    if (gl_failures)
        gl_dump(&c);

    /* --duration: it ends by itself, once the time is up. */
    const char *timed[] = {"--memory", "8MiB",       "--touch", "64KiB", "--step",
                           "100ms",    "--duration", "1",       NULL};
    struct gl_child d = gl_spawn("timed", timed, NULL);
    CHECK_EQ(gl_finish(&d, 30), 0);
    CHECK(gl_elapsed_of(d.out) >= 1.0 && gl_steps_of(d.out, NULL).lines >= 1);
    if (gl_failures)
        gl_dump(&d);
}

static void notebook_runs_short_bursts_between_long_idle_periods(void)
{
    gl_setup(4 * GiB);
    const char *args[] = {"--pattern", "notebook", "--memory", "16MiB", "--burst", "100ms",
                          "--idle",    "400ms",    "--steps",  "4",     NULL};
    struct gl_child c = gl_spawn("notebook", args, NULL);
    CHECK_EQ(gl_finish(&c, 30), 0);
    struct gl_steps s = gl_steps_of(c.out, "burst_ms");
    CHECK(s.lines == 4);
    CHECK(s.sum == 100.0 * s.lines);
    CHECK_EQ(gl_slot_of(c.pid).busy_ns, 4 * 100 * MS); /* 400 ms of kernels ... */
    CHECK(gl_elapsed_of(c.out) >= 1.6);                /* ... and 400 ms idle between them */
    CHECK(gl_has(c.out, "idle_ms=400 "));
    if (gl_failures)
        gl_dump(&c);
}

static void inference_serves_requests_at_its_rate(void)
{
    gl_setup(4 * GiB);
    const char *args[] = {"--pattern", "inference", "--memory", "16MiB", "--rate", "20/s",
                          "--burst",   "5ms",       "--steps",  "2",     NULL};
    struct gl_child c = gl_spawn("inference", args, NULL);
    int st = gl_finish(&c, 30);
    CHECK_EQ(st, 0);
    struct gl_steps s = gl_steps_of(c.out, "requests");
    CHECK(s.lines == 2); /* one step a second */
    CHECK(gl_elapsed_of(c.out) >= 1.9);
    /* Requests arrive on their own clock, 20 a second: all of 2 s at
     * least, and no more than arrived while it ran (over 2 s when a loaded
     * machine made a step late). */
    CHECK(s.sum >= 40 && s.sum <= 20 * gl_elapsed_of(c.out) + 2);
    CHECK_EQ(gl_slot_of(c.pid).busy_ns, (uint64_t)(s.sum * 5 * MS));
    /* Latency: at least the burst; a loaded machine adds to it. */
    CHECK(gl_steps_of(c.out, "p50_ms").sum >= 2 * 5.0);
    if (gl_failures)
        gl_dump(&c);
}

static void a_restart_resumes_from_the_checkpoint(void)
{
    gl_setup(4 * GiB);
    char dir[400], env_dir[500];
    snprintf(dir, sizeof dir, "%s/ckpt", gl_tmp);
    snprintf(env_dir, sizeof env_dir, "TESSERA_CHECKPOINT_DIR=%s", dir);
    const char *env0[] = {env_dir, NULL};
    const char *args3[] = {"--memory", "8MiB", "--step", "50ms", "--steps", "3", NULL};
    struct gl_child c = gl_spawn("first", args3, env0);
    CHECK_EQ(gl_finish(&c, 30), 0);
    CHECK(gl_has(c.out, "no checkpoint in"));
    CHECK(gl_has(c.out, "starting from step 0 (resume count 0)"));
    CHECK_EQ(gl_steps_of(c.out, NULL).last, 3);
    CHECK_EQ(gl_checkpoint_step(dir), 3);
    if (gl_failures)
        gl_dump(&c);

    const char *env1[] = {env_dir, "TESSERA_RESUME_COUNT=1", NULL};
    const char *args5[] = {"--memory", "8MiB", "--step", "50ms", "--steps", "5", NULL};
    struct gl_child d = gl_spawn("second", args5, env1);
    CHECK_EQ(gl_finish(&d, 30), 0);
    CHECK(gl_has(d.out, "resumed from step 3 (resume count 1)\n"));
    struct gl_steps s = gl_steps_of(d.out, NULL);
    CHECK(s.lines == 2 && s.last == 5); /* steps 4 and 5 only */
    CHECK(gl_has(d.out, "\nstep=4 "));
    CHECK_EQ(gl_checkpoint_step(dir), 5);
    if (gl_failures)
        gl_dump(&d);

    /* Already done: says so and ends at once; a damaged file fails. */
    struct gl_child e = gl_spawn("third", args5, env1);
    CHECK_EQ(gl_finish(&e, 30), 0);
    CHECK(gl_has(e.out, "already at --steps 5"));
    char path[500];
    snprintf(path, sizeof path, "%s/%s", dir, TS_GPULOAD_CHECKPOINT_FILE);
    FILE *f = fopen(path, "w");
    fputs("step=banana\n", f);
    fclose(f);
    struct gl_child g = gl_spawn("damaged", args5, env1);
    CHECK_EQ(gl_finish(&g, 30), TS_GPULOAD_EXIT_FAILED);
    CHECK(gl_has(g.err, "is damaged"));
}

static void sigterm_ends_the_step_writes_the_checkpoint_and_ends_the_process_by_sigterm(void)
{
    gl_setup(4 * GiB);
    char dir[400], env_dir[500];
    snprintf(dir, sizeof dir, "%s/ckpt", gl_tmp);
    snprintf(env_dir, sizeof env_dir, "TESSERA_CHECKPOINT_DIR=%s", dir);
    const char *env[] = {env_dir, NULL};
    /* No periodic checkpoint in the test's time: the one found is SIGTERM's. */
    const char *args[] = {"--memory",           "64MiB", "--step", "500ms", "--busy", "0.5",
                          "--checkpoint-every", "1h",    NULL};
    struct gl_child c = gl_spawn("train", args, env);
    CHECK(gl_wait_for(c.out, "\nstep=2 ", 30));
    CHECK_EQ(gl_checkpoint_step(dir), -1);
    long long before = gl_steps_of(c.out, NULL).last;
    kill(c.pid, SIGTERM);
    CHECK_EQ(gl_finish(&c, 30), 1000 + SIGTERM);
    struct gl_steps s = gl_steps_of(c.out, NULL);
    CHECK(s.last >= 2 && s.last <= before + 1); /* the step under way, no more */
    CHECK_EQ(gl_checkpoint_step(dir), s.last);  /* every step it finished, no more */
    char want[128];
    snprintf(want, sizeof want, "stopping on SIGTERM after step %lld checkpoint=", s.last);
    CHECK(gl_has(c.out, want));
    CHECK_EQ(gl_slot_of(c.pid).used_bytes, 0); /* memory given back before it ended */
    if (gl_failures)
        gl_dump(&c);

    /* A notebook sleeping a long idle period stops at once, and resumes. */
    const char *env1[] = {env_dir, "TESSERA_RESUME_COUNT=1", NULL};
    const char *nb[] = {"--pattern", "notebook", "--memory", "16MiB", "--burst",
                        "50ms",      "--idle",   "1h",       NULL};
    struct gl_child d = gl_spawn("notebook", nb, env1);
    char resumed[128];
    snprintf(resumed, sizeof resumed, "resumed from step %lld (resume count 1)\n", s.last);
    CHECK(gl_wait_for(d.out, resumed, 30));
    snprintf(want, sizeof want, "\nstep=%lld ", s.last + 1);
    CHECK(gl_wait_for(d.out, want, 30));
    double t0 = gl_now_s();
    kill(d.pid, SIGTERM);
    CHECK_EQ(gl_finish(&d, 30), 1000 + SIGTERM);
    CHECK(gl_now_s() - t0 < 10); /* not the hour of --idle */
    CHECK_EQ(gl_checkpoint_step(dir), s.last + 1);
    if (gl_failures)
        gl_dump(&d);
}

static void failures_give_the_documented_exit_codes(void)
{
    gl_setup(4 * GiB);
    struct {
        const char *tag;
        const char *fail; /* TESSERA_SIMGPU_FAIL, or NULL */
        const char *args[8];
        int status;
        const char *err; /* in stderr */
    } cases[] = {
        {"alloc",
         "cuMemAlloc_v2:2",
         {"--memory", "64MiB"},
         TS_GPULOAD_EXIT_OOM,
         "could not allocate buffer 1 of 4 (16MiB) on device 0: CUDA_ERROR_OUT_OF_MEMORY"},
        {"toobig", NULL, {"--memory", "5GiB"}, TS_GPULOAD_EXIT_OOM, "CUDA_ERROR_OUT_OF_MEMORY"},
        {"launch",
         "cuLaunchKernel:3",
         {"--step", "50ms"},
         TS_GPULOAD_EXIT_FAILED,
         "could not launch tessera_busy_ns (cuLaunchKernel): CUDA_ERROR_LAUNCH_FAILED"},
        {"copy",
         "cuMemcpyDtoH_v2:2",
         {"--step", "50ms"},
         TS_GPULOAD_EXIT_FAILED,
         "cuMemcpyDtoH_v2): CUDA_ERROR_UNKNOWN"},
        {"module",
         "cuModuleLoadDataEx:1",
         {NULL},
         TS_GPULOAD_EXIT_FAILED,
         "CUDA_ERROR_INVALID_IMAGE"},
        {"init", "cuInit:1", {NULL}, TS_GPULOAD_EXIT_NO_GPU, "could not initialize CUDA"},
        {"device", NULL, {"--device", "1"}, TS_GPULOAD_EXIT_NO_GPU, "no device 1: 1 visible"},
        {"busy", NULL, {"--busy", "2"}, TS_GPULOAD_EXIT_USAGE, "invalid value for --busy"},
        {"pattern", NULL, {"--pattern", "batch"}, TS_GPULOAD_EXIT_USAGE, "--pattern"},
        {"extra", NULL, {"extra"}, TS_GPULOAD_EXIT_USAGE, "extra"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        char fail[128];
        snprintf(fail, sizeof fail, "TESSERA_SIMGPU_FAIL=%s", cases[i].fail ? cases[i].fail : "");
        const char *env[] = {fail, NULL};
        struct gl_child c = gl_spawn(cases[i].tag, cases[i].args, env);
        int st = gl_finish(&c, 30);
        if (st != cases[i].status || !gl_has(c.err, cases[i].err)) {
            fprintf(stderr, "case %s: exit %d, wanted %d with \"%s\"\n", cases[i].tag, st,
                    cases[i].status, cases[i].err);
            gl_dump(&c);
            gl_failures++;
        }
    }
    /* No simulated GPUs at all: cuInit finds no device. */
    const char *env[] = {"TESSERA_SIMGPU_DIR=", NULL};
    struct gl_child c = gl_spawn("nodir", NULL, env);
    CHECK_EQ(gl_finish(&c, 30), TS_GPULOAD_EXIT_NO_GPU);
    CHECK(gl_has(c.err, "CUDA_ERROR_NO_DEVICE"));
    /* --help names every exit status. */
    const char *help[] = {"--help", NULL};
    struct gl_child h = gl_spawn("help", help, NULL);
    CHECK_EQ(gl_finish(&h, 30), 0);
    CHECK(gl_has(h.out, "--pattern NAME") && gl_has(h.out, "TESSERA_CHECKPOINT_DIR"));
    CHECK(gl_has(h.out, "  3    data loss detected"));
}

static void a_corrupted_buffer_is_detected_as_data_loss(void)
{
    gl_setup(4 * GiB);
    /* The hook changes one byte of buffer 0 through cuMemcpyHtoD after
     * step 2, as a faulty swap would; step 3 must find it. */
    const char *args[] = {"--memory", "32MiB",   "--touch", "2MiB", "--step",
                          "20ms",     "--steps", "6",       NULL};
    const char *env[] = {"TESSERA_GPULOAD_CORRUPT_STEP=2", NULL};
    struct gl_child c = gl_spawn("corrupt", args, env);
    CHECK_EQ(gl_finish(&c, 30), TS_GPULOAD_EXIT_DATA_LOSS);
    CHECK(gl_has(c.err, "data loss detected: buffer 0 of 4 (8MiB at device address 0x"));
    CHECK(gl_has(c.err, "byte 524288: expected 0x")); /* the middle of the 1 MiB head */
    CHECK(gl_has(c.err,
                 "1 of 1048576 bytes read back differ (written at step 0, checked in step 3)"));
    CHECK_EQ(gl_steps_of(c.out, NULL).last, 2);
    if (gl_failures)
        gl_dump(&c);
    /* The same run without the hook checks the same bytes and passes. */
    struct gl_child d = gl_spawn("clean", args, NULL);
    CHECK_EQ(gl_finish(&d, 30), 0);
    CHECK_EQ(gl_steps_of(d.out, NULL).last, 6);
    CHECK(gl_has(d.out, "checked=8MiB")); /* 2 MiB of each of 4 buffers */
    if (gl_failures)
        gl_dump(&d);
}

/* clang-format off */
static const struct gl_case cases[] = {
#define CASE(f) {#f, f}
    CASE(times_rates_and_plans_parse_as_documented),
    CASE(any_window_of_a_pattern_can_be_made_again_and_a_changed_byte_is_found),
    CASE(checkpoint_round_trips_and_a_damaged_one_is_refused),
    CASE(the_embedded_ptx_assembles_for_real_gpus_when_ptxas_is_installed),
    CASE(train_holds_its_memory_and_keeps_the_gpu_busy),
    CASE(notebook_runs_short_bursts_between_long_idle_periods),
    CASE(inference_serves_requests_at_its_rate),
    CASE(a_restart_resumes_from_the_checkpoint),
    CASE(sigterm_ends_the_step_writes_the_checkpoint_and_ends_the_process_by_sigterm),
    CASE(failures_give_the_documented_exit_codes),
    CASE(a_corrupted_buffer_is_detected_as_data_loss),
#undef CASE
};
/* clang-format on */

int main(int argc, char **argv)
{
    return gl_main(cases, TS_ARRAY_LEN(cases), argc, argv);
}
