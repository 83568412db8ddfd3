/*
 * gpuload_burst_test.c - checks of tessera-gpuload's memory bursts
 * (--burst-memory, --burst-every, --burst-hold, --burst-optional, --jitter):
 * the options and the drawn intervals as units, then the program on fresh
 * simulated GPUs (harness.c): bursts come on schedule with every pattern,
 * the GPU's shared state shows the memory taken and given back, their bytes
 * are checked, a burst that does not fit ends the job or is skipped, and a
 * SIGTERM frees a held burst.
 *
 * Usage: gpuload_burst_test PATH_TO_TESSERA_GPULOAD CASE
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "tests/gpuload/harness.h"

#define MAX_VALUES 256

/* The number after " key=" on every line of path that starts with prefix,
 * in order; how many. */
static int values_of(const char *path, const char *prefix, const char *key, double *out, int max)
{
    char *text = gl_slurp(path), want[64];
    snprintf(want, sizeof want, " %s=", key);
    int n = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, prefix, strlen(prefix)) == 0 && n < max) {
            char *k = strstr(line, want);
            if (k)
                out[n++] = atof(k + strlen(want));
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return n;
}

/* How many lines of path start with prefix. */
static int lines_of(const char *path, const char *prefix)
{
    char *text = gl_slurp(path);
    int n = 0;
    size_t len = strlen(prefix);
    for (char *line = text; line && *line;) {
        n += strncmp(line, prefix, len) == 0;
        char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return n;
}

/* path holds a, then b after it. */
static bool in_order(const char *path, const char *a, const char *b)
{
    char *text = gl_slurp(path), *at = text ? strstr(text, a) : NULL;
    bool ok = at && strstr(at + strlen(a), b) != NULL;
    free(text);
    return ok;
}

/* The device memory the GPU's shared state showed for c while it ran, until
 * its output held `until`: how often each of the amounts in want[] was
 * seen, the number of samples of any other amount, and when (gl_now_s) the
 * amount want[1] was first seen (0: never). */
struct samples {
    int seen[2];
    int other;
    double first_seen[2];
};

static struct samples sample_memory(const struct gl_child *c, const char *until,
                                    const uint64_t want[2], uint64_t below, double timeout_s)
{
    struct samples s = {{0, 0}, 0, {0, 0}};
    double end = gl_now_s() + timeout_s;
    while (gl_now_s() < end && !gl_has(c->out, until)) {
        uint64_t used = gl_slot_of(c->pid).used_bytes;
        if (used < below) { /* still allocating its buffers, or gone */
        } else if (used == want[0] || used == want[1]) {
            int i = used == want[0] ? 0 : 1;
            s.seen[i]++;
            if (s.first_seen[i] == 0)
                s.first_seen[i] = gl_now_s();
        } else {
            fprintf(stderr, "pid %d held %llu bytes\n", (int)c->pid, (unsigned long long)used);
            s.other++;
        }
        gl_sleep_ms(3);
    }
    return s;
}

/* ---- unit cases ---- */

static void burst_options_are_checked_and_invalid_ones_exit_64(void)
{
    struct {
        const char *argv[12];
        int ok;
        const char *field; /* of the plan's error; NULL: the option table refuses it */
    } cases[] = {
        {{"x"}, 1, ""},
        {{"x", "--burst-memory", "1GiB", "--burst-every", "200ms", "--burst-hold", "0", "--jitter",
          "0.25", "--burst-optional"},
         1,
         ""},
        {{"x", "--jitter", "1.5"}, 0, "jitter"},
        {{"x", "--jitter", "-0.1"}, 0, "jitter"},
        {{"x", "--jitter", "nan"}, 0, "jitter"},
        {{"x", "--jitter", "half"}, 0, "jitter"},
        {{"x", "--burst-every", "0"}, 0, "burst-every"},
        {{"x", "--burst-every", "-1s"}, 0, "burst-every"},
        {{"x", "--burst-hold", "-5ms"}, 0, "burst-hold"},
        {{"x", "--burst-hold", "5us"}, 0, "burst-hold"},
        {{"x", "--burst-memory", "-1"}, 0, NULL},
        {{"x", "--burst-memory", "lots"}, 0, NULL},
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
        if (!cases[i].field) {
            CHECK(r == TS_CONFIG_ERROR && strstr(err.message, "--burst-memory") != NULL);
            continue;
        }
        CHECK(r == TS_CONFIG_OK);
        if (r != TS_CONFIG_OK)
            continue;
        enum ts_err e = ts_gpuload_options_plan(&cfg, &plan, &err);
        CHECK((e == TS_OK) == cases[i].ok);
        if (!cases[i].ok)
            CHECK(strcmp(err.field, cases[i].field) == 0 &&
                  strstr(err.message, "invalid value for --") != NULL);
        if (cases[i].ok && i == 0) /* the defaults: no bursts */
            CHECK(plan.burst_memory == 0 && plan.burst_every == 10000 * MS &&
                  plan.burst_hold == 5000 * MS && plan.jitter == 0 && !plan.burst_optional &&
                  plan.corrupt_burst == -1);
        if (cases[i].ok && i == 1)
            CHECK(plan.burst_memory == GiB && plan.burst_every == 200 * MS &&
                  plan.burst_hold == 0 && plan.jitter == 0.25 && plan.burst_optional);
        ts_config_free(ts_gpuload_options, ts_gpuload_options_count, &cfg);
    }

    /* The program: exit 64 with the option named, from flags and from the
     * environment alike, before it looks for a GPU. */
    gl_setup(GiB);
    struct {
        const char *args[4];
        const char *env;
        const char *err;
    } runs[] = {
        {{"--jitter", "2"},
         NULL,
         "invalid value for --jitter: \"2\": expected a number from 0 to 1"},
        {{"--burst-every", "0ms"}, NULL, "invalid value for --burst-every: \"0ms\""},
        {{"--burst-hold", "-1s"}, NULL, "invalid value for --burst-hold: \"-1s\""},
        {{NULL}, "TESSERA_JITTER=-1", "invalid value for --jitter"},
        {{NULL}, "TESSERA_BURST_MEMORY=12parsecs", "invalid value for TESSERA_BURST_MEMORY"},
        {{NULL}, "TESSERA_GPULOAD_CORRUPT_BURST=0", "TESSERA_GPULOAD_CORRUPT_BURST"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(runs); i++) {
        const char *env[] = {runs[i].env, NULL};
        struct gl_child c = gl_spawn("usage", runs[i].args, env);
        int st = gl_finish(&c, 30);
        if (st != TS_GPULOAD_EXIT_USAGE || !gl_has(c.err, runs[i].err)) {
            fprintf(stderr, "run %zu: exit %d, wanted 64 with \"%s\"\n", i, st, runs[i].err);
            gl_dump(&c);
            gl_failures++;
        }
    }
    /* --help lists them. */
    const char *help[] = {"--help", NULL};
    struct gl_child h = gl_spawn("help", help, NULL);
    CHECK_EQ(gl_finish(&h, 30), 0);
    CHECK(gl_has(h.out, "--burst-memory SIZE") && gl_has(h.out, "--burst-every TIME") &&
          gl_has(h.out, "--burst-hold TIME") && gl_has(h.out, "--burst-optional") &&
          gl_has(h.out, "--jitter SHARE") && gl_has(h.out, "TESSERA_BURST_MEMORY"));
}

static void jitter_is_drawn_from_the_seed_alone_within_its_bounds(void)
{
    const uint64_t mean = 100 * MS;
    /* No jitter: the mean itself, for any seed and draw. */
    for (uint64_t k = 0; k < 10; k++)
        CHECK_EQ(ts_gpuload_jitter(k * 31, TS_GPULOAD_JITTER_HOLD, k, mean, 0), mean);
    /* Within [mean/2, 3 mean/2] for 0.5, over all of it, centred. */
    uint64_t lo = ~0ull, hi = 0;
    double sum = 0;
    const int n = 10000;
    for (int k = 1; k <= n; k++) {
        uint64_t v = ts_gpuload_jitter(7, TS_GPULOAD_JITTER_EVERY, (uint64_t)k, mean, 0.5);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += (double)v;
        /* draw k depends on (seed, stream, k) only */
        CHECK_EQ(ts_gpuload_jitter(7, TS_GPULOAD_JITTER_EVERY, (uint64_t)k, mean, 0.5), v);
    }
    CHECK(lo >= 50 * MS && hi <= 150 * MS);
    CHECK(lo < 51 * MS && hi > 149 * MS);
    CHECK(sum / n > 98 * MS && sum / n < 102 * MS);
    /* Share 1: from 0 to twice the mean. */
    for (uint64_t k = 1; k <= 1000; k++)
        CHECK(ts_gpuload_jitter(1, TS_GPULOAD_JITTER_IDLE, k, mean, 1) <= 200 * MS);
    /* Another seed or another stream: other draws. */
    int same_seed = 0, same_stream = 0;
    for (uint64_t k = 1; k <= 100; k++) {
        uint64_t v = ts_gpuload_jitter(7, TS_GPULOAD_JITTER_EVERY, k, mean, 0.5);
        same_seed += v == ts_gpuload_jitter(8, TS_GPULOAD_JITTER_EVERY, k, mean, 0.5);
        same_stream += v == ts_gpuload_jitter(7, TS_GPULOAD_JITTER_HOLD, k, mean, 0.5);
    }
    CHECK(same_seed < 5 && same_stream < 5);
}

/* ---- e2e cases ---- */

static void bursts_take_memory_on_schedule_check_it_and_give_it_back(void)
{
    gl_setup(4 * GiB);
    const char *args[] = {"--memory",
                          "64MiB",
                          "--touch",
                          "1MiB",
                          "--step",
                          "50ms",
                          "--busy",
                          "0.2",
                          "--burst-memory",
                          "256MiB",
                          "--burst-every",
                          "200ms",
                          "--burst-hold",
                          "200ms",
                          "--duration",
                          "3",
                          NULL};
    double t0 = gl_now_s();
    struct gl_child c = gl_spawn("train", args, NULL);
    const uint64_t want[2] = {64 * MiB, 320 * MiB};
    struct samples s = sample_memory(&c, "\ndone ", want, 64 * MiB, 30);
    CHECK_EQ(gl_finish(&c, 30), 0);
    /* The GPU saw the base memory and the burst on top of it, nothing else,
     * and the first burst no sooner than one --burst-every after the start. */
    CHECK(s.seen[0] > 0 && s.seen[1] > 0);
    CHECK_EQ(s.other, 0);
    CHECK(s.first_seen[1] >= t0 + 0.2);
    CHECK_EQ(gl_slot_of(c.pid).used_bytes, 0);
    CHECK_EQ(gl_gpu_used_after_reap(), 0);

    /* Lines: start 1, end 1, start 2, ...: each burst ended (the last at
     * the end of the run), 200 ms + 200 ms a cycle: at most 7 in 3 s. */
    double start[MAX_VALUES], end[MAX_VALUES], held[MAX_VALUES], checked[MAX_VALUES];
    int ns = values_of(c.out, "burst start=", "start", start, MAX_VALUES);
    int ne = values_of(c.out, "burst end=", "end", end, MAX_VALUES);
    values_of(c.out, "burst end=", "held_ms", held, MAX_VALUES);
    CHECK(ns >= 2 && ns <= 7);
    CHECK_EQ(ne, ns);
    for (int i = 0; i < ns && i < ne; i++) {
        CHECK_EQ(start[i], i + 1);
        CHECK_EQ(end[i], i + 1);
        if (i < ne - 1) /* the last one may end with the run */
            CHECK(held[i] >= 200);
    }
    char done[64];
    snprintf(done, sizeof done, " bursts=%d\n", ns);
    CHECK(gl_has(c.out, done));
    CHECK(gl_has(c.out, "burst start=1 bytes=256MiB alloc_ms="));
    CHECK(gl_has(c.out, " burst_memory=256MiB burst_every_ms=200 burst_hold_ms=200 jitter=0 pid="));
    /* Checked while held: 1 MiB of it each step and once more before it was
     * freed; the steps it was held in show 4 + 1 MiB. */
    int nc = values_of(c.out, "burst end=", "checked", checked, MAX_VALUES);
    CHECK_EQ(nc, ne);
    for (int i = 0; i < nc; i++)
        CHECK(checked[i] >= 1); /* "1MiB", "3MiB": atof reads the number */
    CHECK(gl_has(c.out, "checked=5MiB\n") && gl_has(c.out, "checked=4MiB\n"));
    if (gl_failures)
        gl_dump(&c);

    /* A hold of 0: taken, written, checked once and freed at once. */
    const char *zero[] = {"--memory",
                          "16MiB",
                          "--touch",
                          "1MiB",
                          "--step",
                          "50ms",
                          "--steps",
                          "10",
                          "--burst-memory",
                          "32MiB",
                          "--burst-every",
                          "100ms",
                          "--burst-hold",
                          "0",
                          NULL};
    struct gl_child z = gl_spawn("zero", zero, NULL);
    CHECK_EQ(gl_finish(&z, 30), 0);
    int zs = lines_of(z.out, "burst start=");
    CHECK(zs >= 1 && zs == lines_of(z.out, "burst end="));
    CHECK(gl_has(z.out, "burst end=1 held_ms=") && gl_has(z.out, " checked=1MiB next_ms=100\n"));
    CHECK(!gl_has(z.out, "checked=5MiB")); /* no step saw it */
    if (gl_failures)
        gl_dump(&z);
}

static void bursts_come_with_every_pattern_and_a_notebook_holds_its_burst_while_idle(void)
{
    gl_setup(4 * GiB);
    /* A notebook takes and frees bursts only just before a step, never in
     * its idle time: a burst of 100 ms is held through a whole 500 ms idle. */
    const char *nb[] = {"--pattern",
                        "notebook",
                        "--memory",
                        "16MiB",
                        "--touch",
                        "1MiB",
                        "--burst",
                        "20ms",
                        "--idle",
                        "500ms",
                        "--steps",
                        "4",
                        "--burst-memory",
                        "128MiB",
                        "--burst-every",
                        "100ms",
                        "--burst-hold",
                        "100ms",
                        NULL};
    struct gl_child c = gl_spawn("notebook", nb, NULL);
    const uint64_t want[2] = {16 * MiB, 144 * MiB};
    struct samples s = sample_memory(&c, "\ndone ", want, 16 * MiB, 30);
    CHECK_EQ(gl_finish(&c, 30), 0);
    CHECK(s.seen[0] > 0 && s.seen[1] > 0 && s.other == 0);
    double held[MAX_VALUES];
    int ne = values_of(c.out, "burst end=", "held_ms", held, MAX_VALUES);
    CHECK(ne >= 2 && ne == lines_of(c.out, "burst start="));
    CHECK(ne >= 1 && held[0] >= 500);
    /* Taken just before step 2 (step 2 checked it), freed just before
     * step 3, so held through step 2's idle time. */
    CHECK(in_order(c.out, "\nstep=1 ", "\nburst start=1 bytes=128MiB alloc_ms="));
    CHECK(in_order(c.out, "\nburst start=1 ", "\nstep=2 "));
    CHECK(in_order(c.out, "\nstep=2 ", "\nburst end=1 "));
    CHECK(in_order(c.out, "\nburst end=1 ", "\nstep=3 "));
    CHECK(gl_has(c.out, "checked=5MiB\n"));
    CHECK(gl_has(c.out, " bursts=2\n"));
    if (gl_failures)
        gl_dump(&c);

    /* Inference takes them between requests, inside a step. */
    const char *inf[] = {"--pattern",
                         "inference",
                         "--memory",
                         "16MiB",
                         "--touch",
                         "1MiB",
                         "--rate",
                         "20/s",
                         "--burst",
                         "5ms",
                         "--steps",
                         "2",
                         "--burst-memory",
                         "64MiB",
                         "--burst-every",
                         "300ms",
                         "--burst-hold",
                         "100ms",
                         NULL};
    struct gl_child d = gl_spawn("inference", inf, NULL);
    CHECK_EQ(gl_finish(&d, 30), 0);
    CHECK(in_order(d.out, "\nburst end=1 ", "\nstep=1 "));
    CHECK(lines_of(d.out, "burst start=") >= 2);
    CHECK(gl_steps_of(d.out, "requests").sum >= 40); /* requests go on meanwhile */
    if (gl_failures)
        gl_dump(&d);
}

static void a_run_with_jitter_repeats_its_intervals_for_the_same_seed(void)
{
    gl_setup(4 * GiB);
    struct {
        const char *seed;
        double idle[MAX_VALUES], hold[MAX_VALUES], next[MAX_VALUES];
        int nidle, nhold, nnext;
    } runs[3] = {{.seed = "7"}, {.seed = "7"}, {.seed = "8"}};
    for (int r = 0; r < 3; r++) {
        const char *args[] = {"--pattern",
                              "notebook",
                              "--memory",
                              "16MiB",
                              "--touch",
                              "64KiB",
                              "--burst",
                              "10ms",
                              "--idle",
                              "100ms",
                              "--steps",
                              "12",
                              "--burst-memory",
                              "32MiB",
                              "--burst-every",
                              "100ms",
                              "--burst-hold",
                              "100ms",
                              "--jitter",
                              "0.5",
                              "--seed",
                              runs[r].seed,
                              NULL};
        char tag[16];
        snprintf(tag, sizeof tag, "run%d", r);
        struct gl_child c = gl_spawn(tag, args, NULL);
        CHECK_EQ(gl_finish(&c, 30), 0);
        runs[r].nidle = values_of(c.out, "step=", "idle_ms", runs[r].idle, MAX_VALUES);
        runs[r].nhold = values_of(c.out, "burst start=", "hold_ms", runs[r].hold, MAX_VALUES);
        runs[r].nnext = values_of(c.out, "burst end=", "next_ms", runs[r].next, MAX_VALUES);
        CHECK_EQ(runs[r].nidle, 12);
        CHECK(runs[r].nhold >= 2 && runs[r].nnext >= 2);
        CHECK(gl_has(c.out, " jitter=0.5 pid="));
        /* Every interval within half of its mean either side. */
        for (int i = 0; i < runs[r].nidle; i++)
            CHECK(runs[r].idle[i] >= 50 && runs[r].idle[i] <= 150);
        for (int i = 0; i < runs[r].nhold; i++)
            CHECK(runs[r].hold[i] >= 50 && runs[r].hold[i] <= 150);
        for (int i = 0; i < runs[r].nnext; i++)
            CHECK(runs[r].next[i] >= 50 && runs[r].next[i] <= 150);
        if (gl_failures)
            gl_dump(&c);
    }
    /* Seed 7 twice: the same idle times step by step, the same holds and
     * waits burst by burst (as far as both runs got, however they were
     * timed); they vary; seed 8 draws others. */
    int differ = 0, vary = 0;
    for (int i = 0; i < 12; i++) {
        CHECK_EQ(runs[0].idle[i], runs[1].idle[i]);
        differ += runs[0].idle[i] != runs[2].idle[i];
        vary += runs[0].idle[i] != runs[0].idle[0];
    }
    for (int i = 0; i < runs[0].nhold && i < runs[1].nhold; i++)
        CHECK_EQ(runs[0].hold[i], runs[1].hold[i]);
    for (int i = 0; i < runs[0].nnext && i < runs[1].nnext; i++)
        CHECK_EQ(runs[0].next[i], runs[1].next[i]);
    CHECK(differ >= 6 && vary >= 6);
    CHECK(runs[0].hold[0] != runs[2].hold[0] || runs[0].hold[1] != runs[2].hold[1]);
}

static void a_burst_that_does_not_fit_ends_the_job_unless_optional(void)
{
    gl_setup(256 * MiB);
    /* 64 MiB + 512 MiB on a 256 MiB GPU: required, the job ends with 2. */
    const char *args[] = {"--memory", "64MiB", "--touch",        "1MiB",   "--step",        "50ms",
                          "--steps",  "8",     "--burst-memory", "512MiB", "--burst-every", "100ms",
                          NULL,       NULL};
    struct gl_child c = gl_spawn("required", args, NULL);
    CHECK_EQ(gl_finish(&c, 30), TS_GPULOAD_EXIT_OOM);
    CHECK(gl_has(c.err, "could not allocate the burst buffer of burst 1 (512MiB) on device 0: "
                        "CUDA_ERROR_OUT_OF_MEMORY"));
    CHECK(!gl_has(c.out, "\ndone "));
    CHECK_EQ(gl_slot_of(c.pid).used_bytes, 0); /* its buffers freed before it ended */
    if (gl_failures)
        gl_dump(&c);

    /* Optional: skipped, one line each, and the job runs to its end. */
    args[12] = "--burst-optional";
    struct gl_child d = gl_spawn("optional", args, NULL);
    CHECK_EQ(gl_finish(&d, 30), 0);
    int skipped = lines_of(d.out, "burst skipped=");
    CHECK(skipped >= 1);
    CHECK(gl_has(d.out, "burst skipped=1 bytes=512MiB err=CUDA_ERROR_OUT_OF_MEMORY alloc_ms="));
    CHECK_EQ(lines_of(d.out, "burst start="), 0);
    char done[64];
    snprintf(done, sizeof done, " bursts=0 bursts_skipped=%d\n", skipped);
    CHECK(gl_has(d.out, done));
    CHECK_EQ(gl_steps_of(d.out, NULL).last, 8);
    if (gl_failures)
        gl_dump(&d);

    /* Room comes and goes: skipped while another job holds 160 MiB, taken
     * once it has ended. */
    const char *big[] = {"--memory", "160MiB", "--touch", "64KiB", "--step", "100ms", NULL};
    struct gl_child other = gl_spawn("other", big, NULL);
    CHECK(gl_wait_for(other.out, "\nstep=1 ", 30));
    const char *opt[] = {"--memory",         "16MiB", "--touch",        "64KiB",
                         "--step",           "50ms",  "--burst-memory", "128MiB",
                         "--burst-every",    "100ms", "--burst-hold",   "100ms",
                         "--burst-optional", NULL};
    struct gl_child e = gl_spawn("comes-and-goes", opt, NULL);
    CHECK(gl_wait_for(e.out, "\nburst skipped=2 ", 30));
    CHECK(!gl_has(e.out, "burst start="));
    kill(other.pid, SIGTERM);
    CHECK_EQ(gl_finish(&other, 30), 1000 + SIGTERM);
    CHECK(gl_wait_for(e.out, "\nburst end=", 30));
    kill(e.pid, SIGTERM);
    CHECK_EQ(gl_finish(&e, 30), 1000 + SIGTERM);
    if (gl_failures)
        gl_dump(&e);
}

static void a_corrupted_burst_buffer_is_detected_as_data_loss(void)
{
    gl_setup(4 * GiB);
    /* The hook changes one byte of burst 2's buffer right after it is
     * written, as a faulty swap would; the next step must find it. */
    const char *args[] = {"--memory",
                          "32MiB",
                          "--touch",
                          "2MiB",
                          "--step",
                          "20ms",
                          "--steps",
                          "60",
                          "--burst-memory",
                          "64MiB",
                          "--burst-every",
                          "50ms",
                          "--burst-hold",
                          "100ms",
                          NULL,
                          NULL,
                          NULL};
    const char *env[] = {"TESSERA_GPULOAD_CORRUPT_BURST=2", NULL};
    struct gl_child c = gl_spawn("corrupt", args, env);
    CHECK_EQ(gl_finish(&c, 30), TS_GPULOAD_EXIT_DATA_LOSS);
    CHECK(gl_has(c.err, "data loss detected: the burst buffer of burst 2 (64MiB at device address "
                        "0x"));
    CHECK(gl_has(c.err, "byte 524288: expected 0x")); /* the middle of its 1 MiB head */
    CHECK(gl_has(c.err, "1 of 1048576 bytes read back differ (written at step "));
    CHECK(gl_has(c.err, ", checked in step "));
    CHECK(gl_has(c.out, "\nburst end=1 ") && gl_has(c.out, "\nburst start=2 "));
    CHECK(!gl_has(c.out, "\nburst end=2 "));
    CHECK_EQ(gl_slot_of(c.pid).used_bytes, 0);
    if (gl_failures)
        gl_dump(&c);

    /* With a hold of 0, the check before it is freed finds it. */
    args[13] = "0";
    struct gl_child z = gl_spawn("corrupt-zero", args, env);
    CHECK_EQ(gl_finish(&z, 30), TS_GPULOAD_EXIT_DATA_LOSS);
    CHECK(gl_has(z.err, "data loss detected: the burst buffer of burst 2 "));
    CHECK(gl_has(z.err, "checked before the burst was freed, after step "));
    if (gl_failures)
        gl_dump(&z);

    /* The same run without the hook checks the same bytes and passes. */
    args[13] = "100ms";
    struct gl_child d = gl_spawn("clean", args, NULL);
    CHECK_EQ(gl_finish(&d, 30), 0);
    CHECK(lines_of(d.out, "burst end=") >= 2);
    CHECK(gl_has(d.out, "checked=10MiB\n")); /* 2 MiB of 4 buffers and of the burst */
    if (gl_failures)
        gl_dump(&d);
}

static void sigterm_frees_a_held_burst_and_checkpoints(void)
{
    gl_setup(4 * GiB);
    char dir[400], env_dir[500];
    snprintf(dir, sizeof dir, "%s/ckpt", gl_tmp);
    snprintf(env_dir, sizeof env_dir, "TESSERA_CHECKPOINT_DIR=%s", dir);
    const char *env[] = {env_dir, NULL};
    const char *args[] = {"--memory",
                          "64MiB",
                          "--touch",
                          "1MiB",
                          "--step",
                          "100ms",
                          "--burst-memory",
                          "256MiB",
                          "--burst-every",
                          "100ms",
                          "--burst-hold",
                          "1h",
                          "--checkpoint-every",
                          "1h",
                          NULL};
    struct gl_child c = gl_spawn("held", args, env);
    CHECK(gl_wait_for(c.out, "\nburst start=1 ", 30));
    CHECK(gl_wait_for(c.out, "checked=5MiB\n", 30)); /* a step checked it */
    CHECK_EQ(gl_slot_of(c.pid).used_bytes, 320 * MiB);
    kill(c.pid, SIGTERM);
    CHECK_EQ(gl_finish(&c, 30), 1000 + SIGTERM);
    CHECK_EQ(gl_slot_of(c.pid).used_bytes, 0); /* the burst too, before it ended */
    CHECK_EQ(gl_gpu_used_after_reap(), 0);
    long long last = gl_steps_of(c.out, NULL).last;
    CHECK_EQ(gl_checkpoint_step(dir), last);
    char want[128];
    snprintf(want, sizeof want, "stopping on SIGTERM after step %lld checkpoint=", last);
    CHECK(gl_has(c.out, want));
    CHECK(!gl_has(c.out, "burst end="));
    if (gl_failures)
        gl_dump(&c);
}

/* clang-format off */
static const struct gl_case cases[] = {
#define CASE(f) {#f, f}
    CASE(burst_options_are_checked_and_invalid_ones_exit_64),
    CASE(jitter_is_drawn_from_the_seed_alone_within_its_bounds),
    CASE(bursts_take_memory_on_schedule_check_it_and_give_it_back),
    CASE(bursts_come_with_every_pattern_and_a_notebook_holds_its_burst_while_idle),
    CASE(a_run_with_jitter_repeats_its_intervals_for_the_same_seed),
    CASE(a_burst_that_does_not_fit_ends_the_job_unless_optional),
    CASE(a_corrupted_burst_buffer_is_detected_as_data_loss),
    CASE(sigterm_frees_a_held_burst_and_checkpoints),
#undef CASE
};
/* clang-format on */

int main(int argc, char **argv)
{
    return gl_main(cases, TS_ARRAY_LEN(cases), argc, argv);
}
