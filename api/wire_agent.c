/*
 * wire_agent.c - the agent protocol on the wire: registration and reports.
 * The desired state is encoded by the server from its rows (handlers/agent.c).
 */
#include "api/wire.h"

#include <stdio.h>
#include <string.h>

#include "api/wire_dec.h"

static const char *const reg_fields[] = {
    "labels",           "cpu",  "memory_bytes", "swap_bytes", "gpu_reserve_bytes", "agent_version",
    "protocol_version", "gpus", "collision",    NULL};
static const char *const reg_readonly[] = {"id",
                                           "name",
                                           "state",
                                           "generation",
                                           "allocated_gpus",
                                           "utilized_gpus",
                                           "running_jobs",
                                           "swap_used_bytes",
                                           "registered_at",
                                           "last_seen_at",
                                           "created_at",
                                           NULL};
static const char *const gpu_fields[] = {"index", "uuid", "model", "memory_bytes", NULL};
static const char *const report_fields[] = {"jobs", "gpus", "events", NULL};
static const char *const report_job_fields[] = {"id",
                                                "attempt",
                                                "state",
                                                "pid",
                                                "exit_code",
                                                "signal",
                                                "message",
                                                "gpu_utilization",
                                                "gpu_memory_used_bytes",
                                                "swapped_bytes",
                                                "evicted",
                                                "gpus",
                                                NULL};
static const char *const report_place_fields[] = {"index", "physical_index", NULL};
static const char *const report_event_fields[] = {"id", "attempt", "seq", "type", "message", NULL};
static const char *const collisions[] = {"wait", "priority", "swap", NULL};
static const char *const report_gpu_fields[] = {"index", "utilization", "memory_used_bytes", NULL};

#define BYTES_MAX (1LL << 50) /* 1 PiB: beyond any device or host */

static enum ts_err gpu_decode(const json_t *v, const char *path, struct ts_arena *a,
                              struct ts_gpu *g, struct ts_error *err)
{
    int64_t index = 0;
    const char *uuid = NULL, *model = NULL;
    enum ts_err e = ts_wire_dec_object(v, path, "gpu", gpu_fields, NULL, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "index", 0, TS_NODE_GPUS_MAX - 1, NULL, &index, err);
    if (e == TS_OK && ts_wire_dec_member(v, "index") == NULL)
        e = ts_error_field(err, TS_ERR_MISSING_FIELD, path, "%s.index is required", path);
    if (e == TS_OK)
        e = ts_wire_dec_string(v, path, "uuid", true, &uuid, err);
    if (e == TS_OK)
        e = ts_wire_dec_string(v, path, "model", true, &model, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "memory_bytes", 1, BYTES_MAX, NULL, &g->memory_bytes, err);
    if (e == TS_OK && ts_wire_dec_member(v, "memory_bytes") == NULL)
        e = ts_error_field(err, TS_ERR_MISSING_FIELD, path, "%s.memory_bytes is required", path);
    if (e != TS_OK)
        return e;
    if (uuid[0] == '\0' || strlen(uuid) > 128) {
        char f[TS_WIRE_PATH_MAX];
        ts_wire_dec_path(f, sizeof(f), path, "uuid");
        return ts_error_field(err, TS_ERR_INVALID_VALUE, f, "%s must be 1 to 128 characters", f);
    }
    g->index = (int)index;
    g->uuid = ts_arena_strdup(a, uuid);
    g->model = ts_arena_strdup(a, strlen(model) > 128 ? "" : model);
    if (g->uuid == NULL || g->model == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    return TS_OK;
}

/* "collision": one of collisions[]; absent is "wait". *out is static. */
static enum ts_err decode_collision(const json_t *in, const char **out, struct ts_error *err)
{
    const char *s = NULL;
    *out = collisions[0];
    enum ts_err e = ts_wire_dec_string(in, "", "collision", false, &s, err);
    if (e != TS_OK || s == NULL)
        return e;
    for (size_t i = 0; collisions[i] != NULL; i++)
        if (strcmp(s, collisions[i]) == 0) {
            *out = collisions[i];
            return TS_OK;
        }
    char q[80];
    return ts_error_field(err, TS_ERR_INVALID_VALUE, "collision",
                          "collision must be wait, priority or swap: %s",
                          ts_wire_dec_quote(s, q, sizeof(q)));
}

enum ts_err ts_wire_node_reg_decode(const json_t *in, struct ts_arena *a, struct ts_node_reg *out,
                                    struct ts_error *err)
{
    memset(out, 0, sizeof(*out));
    out->labels = "{}";
    const json_t *gpus = NULL;
    const char *version = NULL, *protocol = NULL;
    enum ts_err e = ts_wire_dec_object(in, "", "node", reg_fields, reg_readonly, err);
    if (e == TS_OK)
        e = ts_wire_dec_string_map(in, "labels", TS_NODE_LABELS_MAX, false, a, &out->labels, err);
    if (e == TS_OK)
        e = ts_wire_dec_number(in, "", "cpu", 0, 1e6, NULL, &out->cpu, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(in, "", "memory_bytes", 0, BYTES_MAX, NULL, &out->memory_bytes,
                                err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(in, "", "swap_bytes", 0, BYTES_MAX, NULL, &out->swap_bytes, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(in, "", "gpu_reserve_bytes", 0, BYTES_MAX, NULL,
                                &out->gpu_reserve_bytes, err);
    if (e == TS_OK)
        e = ts_wire_dec_string(in, "", "agent_version", false, &version, err);
    if (e == TS_OK)
        e = ts_wire_dec_string(in, "", "protocol_version", false, &protocol, err);
    if (e == TS_OK)
        e = ts_wire_dec_array(in, "", "gpus", true, TS_NODE_GPUS_MAX, &gpus, err);
    if (e == TS_OK)
        e = decode_collision(in, &out->collision, err);
    if (e != TS_OK)
        return e;
    if (!ts_protocol_parse(protocol != NULL ? protocol : TS_PROTOCOL_NONE_STR, &out->protocol)) {
        char q[64];
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "protocol_version",
                              "protocol_version must be MAJOR.MINOR: %s",
                              ts_wire_dec_quote(protocol, q, sizeof(q)));
    }
    if (version != NULL && (out->agent_version = ts_arena_strdup(a, version)) == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    out->ngpus = json_array_size(gpus);
    for (size_t i = 0; i < out->ngpus; i++) {
        char path[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(path, sizeof(path), "gpus", i);
        struct ts_gpu *g = &out->gpus[i];
        e = gpu_decode(json_array_get(gpus, i), path, a, g, err);
        if (e != TS_OK)
            return e;
        for (size_t j = 0; j < i; j++) {
            if (out->gpus[j].index == g->index)
                return ts_error_field(err, TS_ERR_INVALID_VALUE, path, "%s.index repeats GPU %d",
                                      path, g->index);
            if (strcmp(out->gpus[j].uuid, g->uuid) == 0)
                return ts_error_field(err, TS_ERR_INVALID_VALUE, path,
                                      "%s.uuid repeats that of gpus[%zu]", path, j);
        }
        if (out->gpu_reserve_bytes >= g->memory_bytes)
            return ts_error_field(err, TS_ERR_INVALID_VALUE, "gpu_reserve_bytes",
                                  "gpu_reserve_bytes must be below the memory of every GPU: "
                                  "%lld >= %lld (GPU %d)",
                                  (long long)out->gpu_reserve_bytes, (long long)g->memory_bytes,
                                  g->index);
    }
    return TS_OK;
}

static enum ts_err report_state(const json_t *v, const char *path, enum ts_report_state *out,
                                struct ts_error *err)
{
    const char *s = NULL;
    enum ts_err e = ts_wire_dec_string(v, path, "state", true, &s, err);
    if (e != TS_OK)
        return e;
    if (strcmp(s, "running") == 0)
        *out = TS_REPORT_RUNNING;
    else if (strcmp(s, "exited") == 0)
        *out = TS_REPORT_EXITED;
    else if (strcmp(s, "failed_to_start") == 0)
        *out = TS_REPORT_FAILED_TO_START;
    else if (strcmp(s, "suspended") == 0)
        *out = TS_REPORT_SUSPENDED;
    else {
        char f[TS_WIRE_PATH_MAX], q[80];
        ts_wire_dec_path(f, sizeof(f), path, "state");
        return ts_error_field(err, TS_ERR_INVALID_VALUE, f,
                              "%s must be running, exited, failed_to_start or suspended: %s", f,
                              ts_wire_dec_quote(s, q, sizeof(q)));
    }
    return TS_OK;
}

/* A job's "gpus": [{"index": L, "physical_index": P}], L distinct. */
static enum ts_err report_places_decode(const json_t *v, const char *path, struct ts_arena *a,
                                        struct ts_report_job *j, struct ts_error *err)
{
    char f[TS_WIRE_PATH_MAX];
    ts_wire_dec_path(f, sizeof(f), path, "gpus");
    const json_t *gpus = ts_wire_dec_member(v, "gpus");
    if (gpus == NULL)
        return TS_OK; /* an agent before issue 17 */
    if (!json_is_array(gpus))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, f, "%s must be an array", f);
    size_t n = json_array_size(gpus);
    if (n > TS_NODE_GPUS_MAX)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, f, "%s must have at most %d entries: %zu",
                              f, TS_NODE_GPUS_MAX, n);
    enum ts_err e = TS_OK;
    struct ts_report_gpu_place *pl = ts_arena_alloc(a, sizeof(*pl) * (n + 1));
    if (pl == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char p[TS_WIRE_PATH_MAX];
        int64_t index = 0, phys = 0;
        const json_t *g = json_array_get(gpus, i);
        ts_wire_dec_index(p, sizeof(p), f, i);
        e = ts_wire_dec_object(g, p, "job GPU", report_place_fields, NULL, err);
        if (e == TS_OK)
            e = ts_wire_dec_integer(g, p, "index", 0, TS_NODE_GPUS_MAX - 1, NULL, &index, err);
        if (e == TS_OK)
            e = ts_wire_dec_integer(g, p, "physical_index", 0, TS_NODE_GPUS_MAX - 1, NULL, &phys,
                                    err);
        if (e == TS_OK && (ts_wire_dec_member(g, "index") == NULL ||
                           ts_wire_dec_member(g, "physical_index") == NULL))
            e = ts_error_field(err, TS_ERR_MISSING_FIELD, p, "%s needs index and physical_index",
                               p);
        if (e != TS_OK)
            return e;
        for (size_t k = 0; k < i; k++)
            if (pl[k].index == (int)index)
                return ts_error_field(err, TS_ERR_INVALID_VALUE, p, "%s.index repeats GPU %d", p,
                                      (int)index);
        pl[i].index = (int)index;
        pl[i].physical_index = (int)phys;
    }
    j->places = pl;
    j->nplaces = n;
    return TS_OK;
}

static enum ts_err report_job_decode(const json_t *v, const char *path, struct ts_arena *a,
                                     struct ts_report_job *j, struct ts_error *err)
{
    int64_t attempt = 0, pid = 0, code = 0, sig = 0;
    bool has_util = false, has_mem = false;
    const char *msg = NULL;
    enum ts_err e = ts_wire_dec_object(v, path, "job report", report_job_fields, NULL, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "id", 1, INT64_MAX, NULL, &j->id, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "attempt", 0, INT32_MAX, NULL, &attempt, err);
    if (e == TS_OK && (ts_wire_dec_member(v, "id") == NULL || !ts_wire_dec_member(v, "attempt")))
        e = ts_error_field(err, TS_ERR_MISSING_FIELD, path, "%s needs id and attempt", path);
    if (e == TS_OK)
        e = report_state(v, path, &j->state, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "pid", 0, INT32_MAX, NULL, &pid, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "exit_code", -255, 255, &j->has_exit_code, &code, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "signal", 0, 128, NULL, &sig, err);
    if (e == TS_OK)
        e = ts_wire_dec_string(v, path, "message", false, &msg, err);
    if (e == TS_OK)
        e = ts_wire_dec_number(v, path, "gpu_utilization", 0, 1, &has_util, &j->gpu_utilization,
                               err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "gpu_memory_used_bytes", 0, BYTES_MAX, &has_mem,
                                &j->gpu_memory_used_bytes, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "swapped_bytes", 0, BYTES_MAX, &j->has_swapped_bytes,
                                &j->swapped_bytes, err);
    if (e == TS_OK)
        e = ts_wire_dec_bool(v, path, "evicted", NULL, &j->evicted, err);
    if (e == TS_OK)
        e = report_places_decode(v, path, a, j, err);
    if (e != TS_OK)
        return e;
    if (j->evicted && (j->state == TS_REPORT_RUNNING || j->state == TS_REPORT_SUSPENDED)) {
        /* only a job that has ended can have been ended to make room */
        char f[TS_WIRE_PATH_MAX];
        ts_wire_dec_path(f, sizeof(f), path, "evicted");
        return ts_error_field(err, TS_ERR_INVALID_VALUE, f,
                              "%s is only for a job reported exited or failed_to_start: %s", f,
                              j->state == TS_REPORT_RUNNING ? "running" : "suspended");
    }
    j->attempt = (int)attempt;
    j->pid = (int)pid;
    j->exit_code = (int)code;
    j->signal = (int)sig;
    j->has_gpu_utilization = has_util;
    j->has_gpu_memory_used = has_mem;
    j->has_usage = has_util || has_mem;
    if (msg != NULL && (j->message = ts_arena_strndup(a, msg, strnlen(msg, 1024))) == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    return TS_OK;
}

/* Characters (UTF-8 code points) in s; jansson has checked the encoding. */
static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static bool event_type_ok(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > TS_EVENT_TYPE_MAX)
        return false;
    for (; *t; t++)
        if (!((*t >= 'a' && *t <= 'z') || *t == '_'))
            return false;
    return true;
}

enum ts_err ts_wire_report_event_decode(const json_t *v, const char *path, struct ts_arena *a,
                                        struct ts_report_event *ev, struct ts_error *err)
{
    int64_t attempt = 0;
    const char *type = NULL, *msg = NULL;
    char f[TS_WIRE_PATH_MAX];
    enum ts_err e = ts_wire_dec_object(v, path, "event", report_event_fields, NULL, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "id", 1, INT64_MAX, NULL, &ev->id, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "attempt", 0, INT32_MAX, NULL, &attempt, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "seq", 1, INT32_MAX, NULL, &ev->seq, err);
    if (e == TS_OK &&
        (ts_wire_dec_member(v, "id") == NULL || ts_wire_dec_member(v, "attempt") == NULL ||
         ts_wire_dec_member(v, "seq") == NULL))
        e = ts_error_field(err, TS_ERR_MISSING_FIELD, path, "%s needs id, attempt and seq", path);
    if (e == TS_OK)
        e = ts_wire_dec_string(v, path, "type", true, &type, err);
    if (e == TS_OK)
        e = ts_wire_dec_string(v, path, "message", true, &msg, err);
    if (e != TS_OK)
        return e;
    if (!event_type_ok(type)) {
        char q[80];
        ts_wire_dec_path(f, sizeof(f), path, "type");
        return ts_error_field(err, TS_ERR_INVALID_VALUE, f, "%s must match [a-z_]{1,%d}: %s", f,
                              TS_EVENT_TYPE_MAX, ts_wire_dec_quote(type, q, sizeof(q)));
    }
    size_t chars = utf8_chars(msg);
    if (chars > TS_EVENT_MESSAGE_MAX) {
        ts_wire_dec_path(f, sizeof(f), path, "message");
        return ts_error_field(err, TS_ERR_INVALID_VALUE, f, "%s must be at most %d characters: %zu",
                              f, TS_EVENT_MESSAGE_MAX, chars);
    }
    ev->attempt = (int)attempt;
    ev->type = ts_arena_strdup(a, type);
    ev->message = ts_arena_strdup(a, msg);
    if (ev->type == NULL || ev->message == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    return TS_OK;
}

enum ts_err ts_wire_node_report_decode(const json_t *in, struct ts_arena *a,
                                       struct ts_node_report *out, struct ts_error *err)
{
    memset(out, 0, sizeof(*out));
    const json_t *jobs = NULL, *gpus = NULL, *events = NULL;
    enum ts_err e = ts_wire_dec_object(in, "", "report", report_fields, NULL, err);
    if (e == TS_OK)
        e = ts_wire_dec_array(in, "", "jobs", false, TS_REPORT_JOBS_MAX, &jobs, err);
    if (e == TS_OK)
        e = ts_wire_dec_array(in, "", "gpus", false, TS_NODE_GPUS_MAX, &gpus, err);
    if (e == TS_OK)
        e = ts_wire_dec_array(in, "", "events", false, TS_REPORT_EVENTS_MAX, &events, err);
    if (e != TS_OK)
        return e;
    out->nevents = json_array_size(events);
    out->events = ts_arena_alloc(a, sizeof(*out->events) * (out->nevents + 1));
    if (out->events == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < out->nevents; i++) {
        char path[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(path, sizeof(path), "events", i);
        memset(&out->events[i], 0, sizeof(out->events[i]));
        e = ts_wire_report_event_decode(json_array_get(events, i), path, a, &out->events[i], err);
        if (e != TS_OK)
            return e;
    }
    out->njobs = json_array_size(jobs);
    out->ngpus = json_array_size(gpus);
    out->jobs = ts_arena_alloc(a, sizeof(*out->jobs) * (out->njobs + 1));
    out->gpus = ts_arena_alloc(a, sizeof(*out->gpus) * (out->ngpus + 1));
    if (out->jobs == NULL || out->gpus == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < out->njobs; i++) {
        char path[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(path, sizeof(path), "jobs", i);
        memset(&out->jobs[i], 0, sizeof(out->jobs[i]));
        e = report_job_decode(json_array_get(jobs, i), path, a, &out->jobs[i], err);
        if (e != TS_OK)
            return e;
    }
    for (size_t i = 0; i < out->ngpus; i++) {
        char path[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(path, sizeof(path), "gpus", i);
        const json_t *v = json_array_get(gpus, i);
        struct ts_report_gpu *g = &out->gpus[i];
        int64_t index = 0;
        memset(g, 0, sizeof(*g));
        e = ts_wire_dec_object(v, path, "gpu sample", report_gpu_fields, NULL, err);
        if (e == TS_OK)
            e = ts_wire_dec_integer(v, path, "index", 0, TS_NODE_GPUS_MAX - 1, NULL, &index, err);
        if (e == TS_OK && ts_wire_dec_member(v, "index") == NULL)
            e = ts_error_field(err, TS_ERR_MISSING_FIELD, path, "%s.index is required", path);
        if (e == TS_OK)
            e = ts_wire_dec_number(v, path, "utilization", 0, 1, NULL, &g->utilization, err);
        if (e == TS_OK)
            e = ts_wire_dec_integer(v, path, "memory_used_bytes", 0, BYTES_MAX, NULL,
                                    &g->memory_used_bytes, err);
        if (e != TS_OK)
            return e;
        g->index = (int)index;
    }
    return TS_OK;
}
