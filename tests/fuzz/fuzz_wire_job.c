/*
 * fuzz_wire_job.c - job bodies (POST /jobs): parse, decode, and for what
 * decodes, check the spec's invariants, encode it, and decode the encoded
 * spec again to the same spec.
 */
#include "tests/fuzz/fuzz.h"

#include "api/array.h"
#include "api/units.h"

static void check_spec(const struct ts_job_spec *s)
{
    FUZZ_CHECK(ts_name_valid(s->name) && ts_name_valid(s->project));
    FUZZ_CHECK(s->priority >= 0 && s->priority <= 1000);
    FUZZ_CHECK(s->command != NULL && s->command[0] == '[' && strcmp(s->command, "[]") != 0);
    FUZZ_CHECK(s->env != NULL && s->env[0] == '{');
    FUZZ_CHECK(s->gpu_model != NULL && s->gpu_model[0] == '[');
    FUZZ_CHECK(s->node_selector != NULL && s->node_selector[0] == '{');
    FUZZ_CHECK(s->working_dir == NULL || s->working_dir[0] == '/');
    FUZZ_CHECK(s->cpu >= 0 && s->cpu <= TS_JOB_CPU_MAX);
    FUZZ_CHECK(s->memory_bytes >= 0 && s->memory_bytes <= TS_BYTESIZE_MAX);
    FUZZ_CHECK(s->max_runtime_seconds >= 0 && s->max_runtime_seconds <= TS_DURATION_MAX_SECONDS);
    FUZZ_CHECK(s->idle_swap_after_seconds >= 0 &&
               s->idle_swap_after_seconds <= TS_JOB_IDLE_SWAP_MAX);
    FUZZ_CHECK(s->has_idle_swap_after || s->idle_swap_after_seconds == 0);
    const struct ts_gpu_request *g = &s->gpu;
    switch (g->kind) {
    case TS_GPU_NONE:
        break;
    case TS_GPU_COUNT:
        FUZZ_CHECK(g->count >= 1 && g->count <= TS_GPU_DEVICES_MAX);
        break;
    case TS_GPU_PORTION:
        FUZZ_CHECK(g->portion > 0 && g->portion <= 1);
        FUZZ_CHECK(g->portion_limit >= g->portion && g->portion_limit <= 1);
        FUZZ_CHECK(g->devices >= 1 && g->devices <= TS_GPU_DEVICES_MAX);
        break;
    case TS_GPU_MEMORY:
        FUZZ_CHECK(g->memory_bytes > 0 && g->memory_limit_bytes >= g->memory_bytes);
        FUZZ_CHECK(g->memory_limit_bytes <= TS_BYTESIZE_MAX);
        FUZZ_CHECK(g->devices >= 1 && g->devices <= TS_GPU_DEVICES_MAX);
        break;
    }
}

/* The spec members of an encoded job, decoded again, give the same spec. */
static void check_round_trip(const struct ts_job_spec *s, struct ts_arena *a)
{
    struct ts_job j = {.id = 1, .spec = *s, .state = TS_JOB_PENDING};
    json_t *v = ts_wire_job_encode(&j);
    FUZZ_CHECK(v != NULL);
    static const char *const out_only[] = {"id",          "state",           "node",
                                           "exit_code",   "pending_reason",  "resume_count",
                                           "created_at",  "updated_at",      "started_at",
                                           "finished_at", "memory_bytes",    "max_runtime_seconds",
                                           "attempt",     "grace_seconds",   "checkpoint_dir",
                                           "stop_reason", "allocation",      "usage",
                                           "fair_share",  "suspended_bytes", "suspend_held"};
    for (size_t i = 0; i < TS_ARRAY_LEN(out_only); i++)
        json_object_del(v, out_only[i]);
    json_object_del(v, "swapped_bytes");
    json_object_del(v, "idle_swap_after_seconds");
    json_t *gpu = json_object_get(v, "gpu");
    json_object_del(gpu, "memory_bytes");
    json_object_del(gpu, "memory_limit_bytes");
    /* numbers go through text as a response would */
    char *text = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    FUZZ_CHECK(text != NULL);
    json_t *again = fuzz_parse((const uint8_t *)text, strlen(text));
    free(text);
    FUZZ_CHECK(again != NULL);
    struct ts_job_spec t;
    struct ts_error err;
    enum ts_err e = ts_wire_job_decode(again, a, &t, &err);
    json_decref(again);
    if (e != TS_OK)
        fprintf(stderr, "re-decoding failed: %s\n", err.message);
    FUZZ_CHECK(e == TS_OK);
    FUZZ_CHECK(strcmp(s->name, t.name) == 0 && strcmp(s->project, t.project) == 0);
    FUZZ_CHECK(s->kind == t.kind && s->priority == t.priority && s->preemptible == t.preemptible);
    FUZZ_CHECK(s->swap == t.swap);
    FUZZ_CHECK(strcmp(s->command, t.command) == 0 && strcmp(s->env, t.env) == 0);
    FUZZ_CHECK((s->working_dir == NULL) == (t.working_dir == NULL));
    FUZZ_CHECK(s->working_dir == NULL || strcmp(s->working_dir, t.working_dir) == 0);
    FUZZ_CHECK(s->gpu.kind == t.gpu.kind && s->gpu.count == t.gpu.count);
    FUZZ_CHECK(s->gpu.portion == t.gpu.portion && s->gpu.portion_limit == t.gpu.portion_limit);
    FUZZ_CHECK(s->gpu.memory_bytes == t.gpu.memory_bytes);
    FUZZ_CHECK(s->gpu.memory_limit_bytes == t.gpu.memory_limit_bytes);
    FUZZ_CHECK(s->gpu.devices == t.gpu.devices);
    FUZZ_CHECK(s->cpu == t.cpu && s->memory_bytes == t.memory_bytes);
    FUZZ_CHECK(strcmp(s->gpu_model, t.gpu_model) == 0);
    FUZZ_CHECK(strcmp(s->node_selector, t.node_selector) == 0);
    FUZZ_CHECK(s->max_runtime_seconds == t.max_runtime_seconds);
    FUZZ_CHECK(s->grace_seconds == t.grace_seconds);
    /* the encoder always writes idle_swap_after: given, the same value */
    FUZZ_CHECK(t.has_idle_swap_after && s->idle_swap_after_seconds == t.idle_swap_after_seconds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v = fuzz_parse(data, size);
    if (v == NULL)
        return 0;
    struct ts_arena *a = ts_arena_new();
    FUZZ_CHECK(a != NULL);
    struct ts_job_spec spec;
    struct ts_error err;
    enum ts_err e = ts_wire_job_decode(v, a, &spec, &err);
    if (e == TS_OK) {
        check_spec(&spec);
        check_round_trip(&spec, a);
    } else {
        fuzz_check_error(e, &err);
    }
    ts_arena_free(a);
    json_decref(v);
    return 0;
}
