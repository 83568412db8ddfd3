/*
 * wire_job.c - jobs on the wire: kinds, states, job specs, jobs as the API
 * returns them, and job events. GPU requests are in wire_gpu.c.
 */
#include "api/wire.h"

#include <stdio.h>
#include <string.h>

#include "api/array.h"
#include "api/units.h"
#include "api/wire_dec.h"
#include "api/wire_enc.h"

/* ---- kinds and states: the one table of each ------------------------------ */

/* a kind's name (NULL-terminated, for the query decoder's enums) and,
 * beside it, its defaults */
const char *const ts_job_kind_names[] = {
    [TS_JOB_TRAIN] = "train",
    [TS_JOB_INTERACTIVE] = "interactive",
    [TS_JOB_INFERENCE] = "inference",
    [TS_JOB_INFERENCE + 1] = NULL,
};
static const struct {
    int priority;
    bool preemptible;
} kinds[] = {
    [TS_JOB_TRAIN] = {50, true},
    [TS_JOB_INTERACTIVE] = {100, false},
    [TS_JOB_INFERENCE] = {150, false},
};
#define NKINDS (TS_ARRAY_LEN(kinds))
_Static_assert(TS_ARRAY_LEN(ts_job_kind_names) == NKINDS + 1, "a name for every kind");

static const char *const state_names[] = {
    [TS_JOB_PENDING] = "pending",       [TS_JOB_SCHEDULED] = "scheduled",
    [TS_JOB_RUNNING] = "running",       [TS_JOB_EVICTING] = "evicting",
    [TS_JOB_CANCELLING] = "cancelling", [TS_JOB_SUSPENDING] = "suspending",
    [TS_JOB_SUSPENDED] = "suspended",   [TS_JOB_RESUMING] = "resuming",
    [TS_JOB_SUCCEEDED] = "succeeded",   [TS_JOB_FAILED] = "failed",
    [TS_JOB_CANCELLED] = "cancelled",
};
#define NSTATES (TS_ARRAY_LEN(state_names))

const char *ts_job_kind_name(enum ts_job_kind k)
{
    return (unsigned)k < NKINDS ? ts_job_kind_names[k] : "unknown";
}

int ts_job_kind_parse(const char *s, enum ts_job_kind *out)
{
    for (size_t i = 0; s != NULL && i < NKINDS; i++) {
        if (strcmp(s, ts_job_kind_names[i]) == 0) {
            *out = (enum ts_job_kind)i;
            return 0;
        }
    }
    return -1;
}

int ts_job_kind_default_priority(enum ts_job_kind k)
{
    return (unsigned)k < NKINDS ? kinds[k].priority : kinds[TS_JOB_TRAIN].priority;
}

bool ts_job_kind_default_preemptible(enum ts_job_kind k)
{
    return (unsigned)k < NKINDS ? kinds[k].preemptible : true;
}

const char *ts_job_state_name(enum ts_job_state s)
{
    return (unsigned)s < NSTATES ? state_names[s] : "unknown";
}

int ts_job_state_parse(const char *s, enum ts_job_state *out)
{
    for (size_t i = 0; s != NULL && i < NSTATES; i++) {
        if (strcmp(s, state_names[i]) == 0) {
            *out = (enum ts_job_state)i;
            return 0;
        }
    }
    return -1;
}

bool ts_job_state_finished(enum ts_job_state s)
{
    return s == TS_JOB_SUCCEEDED || s == TS_JOB_FAILED || s == TS_JOB_CANCELLED;
}

/* ---- decoding -------------------------------------------------------------- */

static const char *const job_fields[] = {
    "name",          "project",     "kind",         "priority", "preemptible",     "command",
    "env",           "working_dir", "gpu",          "cpu",      "memory",          "gpu_model",
    "node_selector", "max_runtime", "grace_period", "swap",     "idle_swap_after", NULL};
static const char *const job_readonly[] = {"id",
                                           "state",
                                           "node",
                                           "exit_code",
                                           "pending_reason",
                                           "resume_count",
                                           "created_at",
                                           "updated_at",
                                           "started_at",
                                           "finished_at",
                                           "memory_bytes",
                                           "max_runtime_seconds",
                                           "attempt",
                                           "grace_seconds",
                                           "checkpoint_dir",
                                           "allocation",
                                           "usage",
                                           "fair_share",
                                           "stop_reason",
                                           "suspended_bytes",
                                           "suspend_held",
                                           "swapped_bytes",
                                           "idle_swap_after_seconds",
                                           NULL};

static enum ts_err nomem(struct ts_error *err)
{
    return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
}

/* A required, non-empty array of non-empty strings. */
static enum ts_err decode_command(const json_t *in, struct ts_arena *a, struct ts_job_spec *out,
                                  struct ts_error *err)
{
    json_t *arr = ts_wire_dec_member(in, "command");
    if (arr == NULL)
        return ts_error_field(err, TS_ERR_MISSING_FIELD, "command", "command is required");
    if (!json_is_array(arr))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, "command", "command must be an array");
    size_t n = json_array_size(arr);
    if (n == 0)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "command", "command must not be empty");
    if (n > TS_JOB_COMMAND_MAX)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "command",
                              "command must have at most %d entries: %zu", TS_JOB_COMMAND_MAX, n);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        char field[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(field, sizeof(field), "command", i);
        if (!json_is_string(v))
            return ts_error_field(err, TS_ERR_WRONG_TYPE, field, "%s must be a string", field);
        if (json_string_length(v) == 0)
            return ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s must not be empty", field);
    }
    out->command = ts_wire_dec_dump(arr, a);
    return out->command != NULL ? TS_OK : nomem(err);
}

static bool env_name_valid(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (s++; *s != '\0'; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

enum ts_err ts_wire_dec_string_map(const json_t *in, const char *key, size_t max, bool env_names,
                                   struct ts_arena *a, const char **out, struct ts_error *err)
{
    json_t *obj = ts_wire_dec_member(in, key);
    *out = "{}";
    if (obj == NULL)
        return TS_OK;
    if (!json_is_object(obj))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, key, "%s must be an object", key);
    if (json_object_size(obj) > max)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, key,
                              "%s must have at most %zu entries: %zu", key, max,
                              json_object_size(obj));
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)obj, name, v) {
        char field[TS_WIRE_PATH_MAX], q[80];
        ts_wire_dec_path(field, sizeof(field), key, name);
        if (env_names && !env_name_valid(name))
            return ts_error_field(err, TS_ERR_INVALID_VALUE, field,
                                  "%s name must match [A-Za-z_][A-Za-z0-9_]*: %s", key,
                                  ts_wire_dec_quote(name, q, sizeof(q)));
        if (!env_names && name[0] == '\0')
            return ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s keys must not be empty",
                                  key);
        if (!json_is_string(v))
            return ts_error_field(err, TS_ERR_WRONG_TYPE, field, "%s must be a string", field);
    }
    *out = ts_wire_dec_dump(obj, a);
    return *out != NULL ? TS_OK : nomem(err);
}

/* An array of non-empty strings; absent is "[]". */
static enum ts_err decode_gpu_model(const json_t *in, struct ts_arena *a, const char **out,
                                    struct ts_error *err)
{
    json_t *arr = ts_wire_dec_member(in, "gpu_model");
    *out = "[]";
    if (arr == NULL)
        return TS_OK;
    if (!json_is_array(arr))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, "gpu_model", "gpu_model must be an array");
    size_t n = json_array_size(arr);
    if (n > TS_JOB_GPU_MODELS_MAX)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "gpu_model",
                              "gpu_model must have at most %d entries: %zu", TS_JOB_GPU_MODELS_MAX,
                              n);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        char field[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(field, sizeof(field), "gpu_model", i);
        if (!json_is_string(v))
            return ts_error_field(err, TS_ERR_WRONG_TYPE, field, "%s must be a string", field);
        if (json_string_length(v) == 0)
            return ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s must not be empty", field);
    }
    *out = ts_wire_dec_dump(arr, a);
    return *out != NULL ? TS_OK : nomem(err);
}

static enum ts_err decode_working_dir(const json_t *in, struct ts_arena *a, const char **out,
                                      struct ts_error *err)
{
    const char *s = NULL;
    *out = NULL;
    enum ts_err e = ts_wire_dec_string(in, "", "working_dir", false, &s, err);
    if (e != TS_OK || s == NULL)
        return e;
    char q[80];
    if (s[0] != '/')
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "working_dir",
                              "working_dir must be an absolute path: %s",
                              ts_wire_dec_quote(s, q, sizeof(q)));
    if (strlen(s) > TS_JOB_PATH_MAX)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "working_dir",
                              "working_dir must be at most %d bytes long: %zu", TS_JOB_PATH_MAX,
                              strlen(s));
    *out = ts_arena_strdup(a, s);
    return *out != NULL ? TS_OK : nomem(err);
}

static enum ts_err decode_kind(const json_t *in, struct ts_job_spec *out, struct ts_error *err)
{
    const char *s = NULL;
    out->kind = TS_JOB_TRAIN;
    enum ts_err e = ts_wire_dec_string(in, "", "kind", false, &s, err);
    if (e != TS_OK || s == NULL)
        return e;
    if (ts_job_kind_parse(s, &out->kind) != 0) {
        char q[80];
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "kind",
                              "kind must be one of train, interactive, inference: %s",
                              ts_wire_dec_quote(s, q, sizeof(q)));
    }
    return TS_OK;
}

enum ts_err ts_wire_job_decode(const json_t *in, struct ts_arena *a, struct ts_job_spec *out,
                               struct ts_error *err)
{
    *out = (struct ts_job_spec){.env = "{}",
                                .gpu_model = "[]",
                                .node_selector = "{}",
                                .grace_seconds = TS_JOB_GRACE_DEFAULT,
                                .swap = true};
    enum ts_err e = ts_wire_dec_object(in, "", "job", job_fields, job_readonly, err);
    if (e == TS_OK)
        e = ts_wire_dec_name(in, "", "name", out->name, err);
    if (e == TS_OK)
        e = ts_wire_dec_name(in, "", "project", out->project, err);
    if (e == TS_OK)
        e = decode_kind(in, out, err);
    if (e != TS_OK)
        return e;

    int64_t priority = ts_job_kind_default_priority(out->kind);
    out->preemptible = ts_job_kind_default_preemptible(out->kind);
    e = ts_wire_dec_integer(in, "", "priority", 0, 1000, NULL, &priority, err);
    out->priority = (int)priority;
    if (e == TS_OK)
        e = ts_wire_dec_bool(in, "", "preemptible", NULL, &out->preemptible, err);
    if (e == TS_OK)
        e = decode_command(in, a, out, err);
    if (e == TS_OK)
        e = ts_wire_dec_string_map(in, "env", TS_JOB_ENV_MAX, true, a, &out->env, err);
    if (e == TS_OK)
        e = decode_working_dir(in, a, &out->working_dir, err);
    if (e == TS_OK)
        e = ts_wire_gpu_decode(ts_wire_dec_member(in, "gpu"), &out->gpu, err);
    if (e == TS_OK)
        e = ts_wire_dec_number(in, "", "cpu", 0, TS_JOB_CPU_MAX, NULL, &out->cpu, err);
    if (e == TS_OK)
        e = ts_wire_dec_bytes(in, "", "memory", 0, NULL, &out->memory_bytes, err);
    if (e == TS_OK)
        e = decode_gpu_model(in, a, &out->gpu_model, err);
    if (e == TS_OK)
        e = ts_wire_dec_string_map(in, "node_selector", TS_JOB_NODE_SELECTOR_MAX, false, a,
                                   &out->node_selector, err);
    if (e == TS_OK)
        e = ts_wire_dec_duration(in, "", "max_runtime", NULL, &out->max_runtime_seconds, err);
    int64_t grace = out->grace_seconds;
    if (e == TS_OK)
        e = ts_wire_dec_duration(in, "", "grace_period", NULL, &grace, err);
    if (e == TS_OK && grace > TS_JOB_GRACE_MAX)
        e = ts_error_field(err, TS_ERR_INVALID_VALUE, "grace_period",
                           "grace_period must be at most %d seconds: %lld", TS_JOB_GRACE_MAX,
                           (long long)grace);
    out->grace_seconds = (int)grace;
    if (e == TS_OK)
        e = ts_wire_dec_bool(in, "", "swap", NULL, &out->swap, err);
    if (e == TS_OK)
        e = ts_wire_dec_duration(in, "", "idle_swap_after", &out->has_idle_swap_after,
                                 &out->idle_swap_after_seconds, err);
    if (e == TS_OK && out->idle_swap_after_seconds > TS_JOB_IDLE_SWAP_MAX)
        e = ts_error_field(err, TS_ERR_INVALID_VALUE, "idle_swap_after",
                           "idle_swap_after must be at most 7d (%d seconds): %lld",
                           TS_JOB_IDLE_SWAP_MAX, (long long)out->idle_swap_after_seconds);
    return e;
}

/* ---- encoding -------------------------------------------------------------- */

static json_t *pending_reason_encode(const struct ts_job *j)
{
    if (j->reason_code == NULL)
        return json_null();
    bool ok = true;
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    ts_wire_enc_set(o, "code", json_string(j->reason_code), &ok);
    ts_wire_enc_set(o, "message", ts_wire_enc_string(j->reason_message), &ok);
    ts_wire_enc_set(o, "queue_position", json_integer(j->queue_position), &ok);
    return ts_wire_enc_finish(o, ok);
}

/* {"gpus": 1.5, "devices": [{"index", "memory_bytes", "physical_index"}]}
 * while placed, else null */
static json_t *allocation_encode(const struct ts_job *j)
{
    if (j->nslots == 0 && j->allocated_gpus == 0)
        return json_null();
    bool ok = true;
    json_t *o = json_object();
    json_t *devs = json_array();
    if (o == NULL || devs == NULL) {
        json_decref(o);
        json_decref(devs);
        return NULL;
    }
    for (size_t i = 0; i < j->nslots; i++) {
        json_t *d = json_object();
        ts_wire_enc_set(d, "index", json_integer(j->slots[i].index), &ok);
        ts_wire_enc_set(d, "memory_bytes", json_integer(j->slots[i].memory_bytes), &ok);
        ts_wire_enc_set(d, "physical_index",
                        j->slots[i].physical_index >= 0 ? json_integer(j->slots[i].physical_index)
                                                        : json_null(),
                        &ok);
        ts_wire_enc_append(devs, d, &ok);
    }
    ts_wire_enc_set(o, "gpus", json_real(j->allocated_gpus), &ok);
    ts_wire_enc_set(o, "devices", devs, &ok);
    return ts_wire_enc_finish(o, ok);
}

static json_t *usage_encode(const struct ts_job *j)
{
    bool ok = true;
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    ts_wire_enc_set(o, "gpu_utilization", json_real(j->gpu_utilization), &ok);
    ts_wire_enc_set(o, "gpu_memory_used_bytes", json_integer(j->gpu_memory_used_bytes), &ok);
    ts_wire_enc_set(o, "last_active_at", ts_wire_time(j->last_active_at_us), &ok);
    return ts_wire_enc_finish(o, ok);
}

static json_t *fair_share_encode(const struct ts_job *j)
{
    bool ok = true;
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    ts_wire_enc_set(o, "project_deserved_gpus", json_real(j->project_deserved_gpus), &ok);
    ts_wire_enc_set(o, "project_fair_share_gpus", json_real(j->project_fair_share_gpus), &ok);
    return ts_wire_enc_finish(o, ok);
}

json_t *ts_wire_job_encode(const struct ts_job *j)
{
    const struct ts_job_spec *s = &j->spec;
    bool ok = true;
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    char runtime[32], grace[32], idle[32];
    ts_wire_enc_set(o, "id", json_integer(j->id), &ok);
    ts_wire_enc_set(o, "name", json_string(s->name), &ok);
    ts_wire_enc_set(o, "project", json_string(s->project), &ok);
    ts_wire_enc_set(o, "kind", json_string(ts_job_kind_name(s->kind)), &ok);
    ts_wire_enc_set(o, "priority", json_integer(s->priority), &ok);
    ts_wire_enc_set(o, "preemptible", json_boolean(s->preemptible), &ok);
    ts_wire_enc_set(o, "command", ts_wire_enc_text(s->command, "[]"), &ok);
    ts_wire_enc_set(o, "env", ts_wire_enc_text(s->env, "{}"), &ok);
    ts_wire_enc_set(o, "working_dir", ts_wire_enc_string(s->working_dir), &ok);
    ts_wire_enc_set(o, "gpu", ts_wire_gpu_encode(&s->gpu), &ok);
    ts_wire_enc_set(o, "cpu", json_real(s->cpu), &ok);
    ts_wire_enc_set(o, "memory", ts_wire_enc_bytes(s->memory_bytes), &ok);
    ts_wire_enc_set(o, "memory_bytes", json_integer(s->memory_bytes), &ok);
    ts_wire_enc_set(o, "gpu_model", ts_wire_enc_text(s->gpu_model, "[]"), &ok);
    ts_wire_enc_set(o, "node_selector", ts_wire_enc_text(s->node_selector, "{}"), &ok);
    ts_wire_enc_set(
        o, "max_runtime",
        s->max_runtime_seconds > 0
            ? json_string(ts_duration_format(s->max_runtime_seconds, runtime, sizeof(runtime)))
            : json_null(),
        &ok);
    ts_wire_enc_set(o, "max_runtime_seconds", json_integer(s->max_runtime_seconds), &ok);
    ts_wire_enc_set(o, "state", json_string(ts_job_state_name(j->state)), &ok);
    ts_wire_enc_set(o, "node", ts_wire_enc_string(j->node), &ok);
    ts_wire_enc_set(o, "exit_code", j->has_exit_code ? json_integer(j->exit_code) : json_null(),
                    &ok);
    ts_wire_enc_set(o, "pending_reason", pending_reason_encode(j), &ok);
    ts_wire_enc_set(o, "resume_count", json_integer(j->resume_count), &ok);
    ts_wire_enc_set(o, "created_at", ts_wire_time(j->created_at_us), &ok);
    ts_wire_enc_set(o, "updated_at", ts_wire_time(j->updated_at_us), &ok);
    ts_wire_enc_set(o, "started_at", ts_wire_time(j->started_at_us), &ok);
    ts_wire_enc_set(o, "finished_at", ts_wire_time(j->finished_at_us), &ok);
    ts_wire_enc_set(o, "attempt", json_integer(j->attempt), &ok);
    ts_wire_enc_set(o, "grace_period",
                    json_string(ts_duration_format(s->grace_seconds, grace, sizeof(grace))), &ok);
    ts_wire_enc_set(o, "grace_seconds", json_integer(s->grace_seconds), &ok);
    ts_wire_enc_set(o, "checkpoint_dir", ts_wire_enc_string(j->checkpoint_dir), &ok);
    ts_wire_enc_set(o, "stop_reason", ts_wire_enc_string(j->stop_reason), &ok);
    ts_wire_enc_set(o, "swap", json_boolean(s->swap), &ok);
    ts_wire_enc_set(o, "suspended_bytes", json_integer(j->suspended_bytes), &ok);
    ts_wire_enc_set(o, "suspend_held", json_boolean(j->suspend_held), &ok);
    ts_wire_enc_set(o, "swapped_bytes", json_integer(j->swapped_bytes), &ok);
    ts_wire_enc_set(o, "idle_swap_after",
                    json_string(ts_duration_format(s->idle_swap_after_seconds, idle, sizeof(idle))),
                    &ok);
    ts_wire_enc_set(o, "idle_swap_after_seconds", json_integer(s->idle_swap_after_seconds), &ok);
    ts_wire_enc_set(o, "allocation", allocation_encode(j), &ok);
    ts_wire_enc_set(o, "usage", usage_encode(j), &ok);
    ts_wire_enc_set(o, "fair_share", fair_share_encode(j), &ok);
    return ts_wire_enc_finish(o, ok);
}

json_t *ts_wire_job_event_encode(const struct ts_job_event *e)
{
    bool ok = true;
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    ts_wire_enc_set(o, "id", json_integer(e->id), &ok);
    ts_wire_enc_set(o, "job_id", json_integer(e->job_id), &ok);
    ts_wire_enc_set(o, "at", ts_wire_time(e->at_us), &ok);
    ts_wire_enc_set(o, "type", ts_wire_enc_string(e->type), &ok);
    ts_wire_enc_set(o, "message", ts_wire_enc_string(e->message), &ok);
    if (e->seq > 0) {
        ts_wire_enc_set(o, "attempt", json_integer(e->attempt), &ok);
        ts_wire_enc_set(o, "seq", json_integer(e->seq), &ok);
    }
    return ts_wire_enc_finish(o, ok);
}
