/*
 * options.c - tessera-gpuload's option table (flags, TESSERA_* variables,
 * config file, --help) and the checked plan made from it.
 *
 * Times below a second ("200ms") and fractions ("0.9") are beyond the
 * table's types, so those options are strings checked here, with messages
 * in the table's words.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/gpuload/gpuload.h"
#include "api/array.h"
#include "api/units.h"

#define OPT(field) offsetof(struct ts_gpuload_config, field)

const struct ts_option ts_gpuload_options[] = {
    {"pattern", TS_OPT_ENUM, OPT(pattern), "train", "NAME",
     "train (busy a share of every step), notebook (short bursts, long idle) or inference "
     "(a burst per request)",
     0, 0, "train|notebook|inference", 0},
    {"memory", TS_OPT_BYTES, OPT(memory), "1GiB", "SIZE",
     "device memory to hold, in --buffers allocations; 0: none", 0, -1, NULL, 0},
    {"buffers", TS_OPT_INT, OPT(buffers), "4", "N", "allocations the memory is split into", 1, 4096,
     NULL, 0},
    {"touch", TS_OPT_BYTES, OPT(touch), "8MiB", "SIZE",
     "bytes of each buffer written and checked (its head and tail); 0: no data checks", 0, -1, NULL,
     0},
    {"duration", TS_OPT_DURATION, OPT(duration), "0", "DURATION",
     "run this long; 0: until SIGTERM or --steps", 0, TS_DURATION_MAX_SECONDS, NULL, 0},
    {"steps", TS_OPT_INT, OPT(steps), "0", "N",
     "stop after step N, counted across resumes; 0: no limit", 0, -1, NULL, 0},
    {"step", TS_OPT_STRING, OPT(step), "1s", "TIME", "train: length of a step (200ms, 1s, ...)", 0,
     0, NULL, 0},
    {"busy", TS_OPT_STRING, OPT(busy), "0.9", "SHARE",
     "train: share of each step the GPU is busy, 0 to 1", 0, 0, NULL, 0},
    {"burst", TS_OPT_STRING, OPT(burst), NULL, "TIME",
     "notebook, inference: GPU time of a burst (default 200ms, inference 20ms)", 0, 0, NULL, 0},
    {"idle", TS_OPT_STRING, OPT(idle), "5s", "TIME", "notebook: idle time after each burst", 0, 0,
     NULL, 0},
    {"rate", TS_OPT_STRING, OPT(rate), "10/s", "N/s", "inference: requests per second", 0, 0, NULL,
     0},
    {"device", TS_OPT_INT, OPT(device), "0", "N",
     "CUDA device ordinal (after CUDA_VISIBLE_DEVICES)", 0, 1023, NULL, 0},
    {"checkpoint-dir", TS_OPT_STRING, OPT(checkpoint_dir), NULL, "DIR",
     "write progress to DIR/" TS_GPULOAD_CHECKPOINT_FILE " and resume from it", 0, 0, NULL, 0},
    {"checkpoint-every", TS_OPT_STRING, OPT(checkpoint_every), "10s", "TIME",
     "time between checkpoints (one is also written at the end and on SIGTERM)", 0, 0, NULL, 0},
    {"resume-count", TS_OPT_INT, OPT(resume_count), "0", "N",
     "times the job was resumed (the agent sets TESSERA_RESUME_COUNT)", 0, -1, NULL, 0},
    {"seed", TS_OPT_INT, OPT(seed), "1", "N", "seed of the buffer patterns and of --jitter", 0, -1,
     NULL, 0},
    {"burst-memory", TS_OPT_BYTES, OPT(burst_memory), "0", "SIZE",
     "extra device memory taken for each burst, one allocation; 0: no bursts", 0, -1, NULL, 0},
    {"burst-every", TS_OPT_STRING, OPT(burst_every), "10s", "TIME",
     "mean time from the end of a burst to the start of the next (and to the first)", 0, 0, NULL,
     0},
    {"burst-hold", TS_OPT_STRING, OPT(burst_hold), "5s", "TIME",
     "mean time a burst is held (0: freed once written and checked)", 0, 0, NULL, 0},
    {"burst-optional", TS_OPT_BOOL, OPT(burst_optional), "false", NULL,
     "skip a burst the GPU has no room for instead of exiting with status 2", 0, 0, NULL, 0},
    {"jitter", TS_OPT_STRING, OPT(jitter), "0", "SHARE",
     "draw --idle, --burst-every and --burst-hold uniformly within this share of their mean, "
     "0 to 1",
     0, 0, NULL, 0},
};

const size_t ts_gpuload_options_count = TS_ARRAY_LEN(ts_gpuload_options);

const char ts_gpuload_options_epilog[] =
    "\n"
    "Patterns: train launches a kernel of --busy x --step every --step; notebook a\n"
    "kernel of --burst, then sleeps --idle; inference a kernel of --burst per\n"
    "request, --rate requests a second, one step a second. Every step checks the\n"
    "--touch bytes of each buffer against what was written and rewrites one buffer.\n"
    "With --burst-memory, bursts of that much more memory are taken and freed\n"
    "between steps (inference: between requests; notebook: never in its idle time),\n"
    "checked every step while held. One line per step and per burst start and end\n"
    "goes to stdout; errors go to stderr.\n"
    "\n"
    "Exit status:\n"
    "  0    ran --duration or --steps\n"
    "  1    a CUDA call failed (its error name is printed) or the checkpoint failed\n"
    "  2    out of device memory (cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY), also for a\n"
    "       burst unless --burst-optional\n"
    "  3    data loss detected: device memory did not hold what was written\n"
    "  4    no GPU: libcuda.so.1 not found, cuInit failed or no device --device\n"
    "  64   invalid options\n"
    "  SIGTERM, SIGINT: the current step finishes, the checkpoint is written, then\n"
    "       the process ends by the same signal (a shell shows 143 or 130)\n";

int ts_gpuload_options_parse_time(const char *s, uint64_t *ns)
{
    if (!s || !*s)
        return -1;
    size_t n = strlen(s);
    if (n > 2 && strcmp(s + n - 2, "ms") == 0) {
        char *end;
        errno = 0;
        if (s[0] < '0' || s[0] > '9')
            return -1;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end != s + n - 2 || v > (uint64_t)TS_DURATION_MAX_SECONDS * 1000)
            return -1;
        *ns = v * 1000000ull;
        return 0;
    }
    int64_t seconds;
    if (ts_duration_parse(s, &seconds) < 0)
        return -1;
    *ns = (uint64_t)seconds * 1000000000ull;
    return 0;
}

int ts_gpuload_options_parse_rate(const char *s, double *per_s)
{
    if (!s || !*s || s[0] < '0' || s[0] > '9')
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || !(v > 0) || !isfinite(v) || v > 1e6)
        return -1;
    if (*end != '\0' && strcmp(end, "/s") != 0)
        return -1;
    *per_s = v;
    return 0;
}

/* "0.9" into a number from 0 to 1; -1 when it is anything else. */
static int parse_share(const char *s, double *share)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0 && v <= 1))
        return -1;
    *share = v;
    return 0;
}

/* TESSERA_GPULOAD_<name> (a test hook): *v -1 when unset. */
static enum ts_err parse_hook(const char *name, int64_t *v, struct ts_error *err)
{
    char var[64];
    snprintf(var, sizeof var, "TESSERA_GPULOAD_%s", name);
    *v = -1;
    const char *hook = getenv(var);
    if (!hook || !*hook)
        return TS_OK;
    char *end;
    errno = 0;
    long long n = strtoll(hook, &end, 10);
    if (errno || *end || n < 1)
        return ts_error_set(err, TS_ERR_CONFIG, "invalid %s: \"%s\": expected a number from 1", var,
                            hook);
    *v = n;
    return TS_OK;
}

static enum ts_err bad(struct ts_error *err, const char *name, const char *value,
                       const char *expected)
{
    return ts_error_field(err, TS_ERR_CONFIG, name, "invalid value for --%s: \"%s\": expected %s",
                          name, value, expected);
}

enum ts_err ts_gpuload_options_plan(const struct ts_gpuload_config *cfg,
                                    struct ts_gpuload_plan *plan, struct ts_error *err)
{
    *plan = (struct ts_gpuload_plan){0};
    if (strcmp(cfg->pattern, "notebook") == 0)
        plan->pattern = TS_GPULOAD_NOTEBOOK;
    else if (strcmp(cfg->pattern, "inference") == 0)
        plan->pattern = TS_GPULOAD_INFERENCE;
    else
        plan->pattern = TS_GPULOAD_TRAIN;
    plan->memory = (uint64_t)cfg->memory;
    plan->buffers = plan->memory == 0 ? 0 : (unsigned)cfg->buffers;
    if (plan->buffers > plan->memory)
        plan->buffers = (unsigned)plan->memory;
    plan->touch = (uint64_t)cfg->touch;
    plan->duration = (uint64_t)cfg->duration * 1000000000ull;
    plan->steps = (uint64_t)cfg->steps;
    plan->device = (int)cfg->device;
    plan->resume_count = cfg->resume_count;
    plan->seed = (uint64_t)cfg->seed;
    plan->checkpoint_dir = cfg->checkpoint_dir && *cfg->checkpoint_dir ? cfg->checkpoint_dir : NULL;

    if (ts_gpuload_options_parse_time(cfg->step, &plan->step) < 0 || plan->step == 0)
        return bad(err, "step", cfg->step, "a time above 0 such as 500ms or 1s");
    if (parse_share(cfg->busy, &plan->busy) < 0)
        return bad(err, "busy", cfg->busy, "a number from 0 to 1");
    const char *burst =
        cfg->burst ? cfg->burst : (plan->pattern == TS_GPULOAD_INFERENCE ? "20ms" : "200ms");
    if (ts_gpuload_options_parse_time(burst, &plan->burst) < 0)
        return bad(err, "burst", burst, "a time such as 200ms or 1s");
    if (ts_gpuload_options_parse_time(cfg->idle, &plan->idle) < 0)
        return bad(err, "idle", cfg->idle, "a time such as 500ms or 5s");
    if (plan->pattern == TS_GPULOAD_NOTEBOOK && plan->burst + plan->idle == 0)
        return bad(err, "idle", cfg->idle, "a time above 0 when --burst is 0");
    if (ts_gpuload_options_parse_rate(cfg->rate, &plan->rate) < 0)
        return bad(err, "rate", cfg->rate, "requests per second above 0 such as 10/s or 0.5/s");
    if (ts_gpuload_options_parse_time(cfg->checkpoint_every, &plan->checkpoint_every) < 0 ||
        plan->checkpoint_every == 0)
        return bad(err, "checkpoint-every", cfg->checkpoint_every,
                   "a time above 0 such as 500ms or 10s");

    plan->burst_memory = (uint64_t)cfg->burst_memory;
    plan->burst_optional = cfg->burst_optional;
    if (ts_gpuload_options_parse_time(cfg->burst_every, &plan->burst_every) < 0 ||
        plan->burst_every == 0)
        return bad(err, "burst-every", cfg->burst_every, "a time above 0 such as 500ms or 10s");
    if (ts_gpuload_options_parse_time(cfg->burst_hold, &plan->burst_hold) < 0)
        return bad(err, "burst-hold", cfg->burst_hold, "a time such as 500ms or 5s");
    if (parse_share(cfg->jitter, &plan->jitter) < 0)
        return bad(err, "jitter", cfg->jitter, "a number from 0 to 1");

    enum ts_err e = parse_hook("CORRUPT_STEP", &plan->corrupt_step, err);
    return e == TS_OK ? parse_hook("CORRUPT_BURST", &plan->corrupt_burst, err) : e;
}
