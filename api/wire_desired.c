/*
 * wire_desired.c - the desired state on the wire (GET /nodes/{name}/desired):
 * the server encodes it from its rows, the agent decodes it (and its jobs'
 * spec.json, which is a desired job and, where the node moved it, the
 * logical index of its GPU).
 *
 * Unknown members are skipped, not refused: a server is upgraded before its
 * agents (api/version.h), so an agent reads the desired state of a server
 * one minor version newer, which may say more than it knows. Every member
 * it knows is strict.
 */
#include "api/wire.h"

#include <stdio.h>
#include <string.h>

#include "api/wire_dec.h"
#include "api/wire_enc.h"

#define BYTES_MAX (1LL << 50) /* 1 PiB: beyond any device or host */
#define COMMAND_MAX 4096      /* strings in a command */
#define ENV_MAX 4096          /* variables in an env */

static const char *const actions[] = {"run", "stop", "suspend", NULL};

static enum ts_err nomem(struct ts_error *err)
{
    return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
}

static enum ts_err need_object(const json_t *v, const char *path, struct ts_error *err)
{
    if (json_is_object(v))
        return TS_OK;
    if (path[0] == '\0')
        return ts_error_field(err, TS_ERR_WRONG_TYPE, "", "the desired job must be a JSON object");
    return ts_error_field(err, TS_ERR_WRONG_TYPE, path, "%s must be an object", path);
}

/* A required member: present and not null. */
static enum ts_err need(const json_t *v, const char *path, const char *key, struct ts_error *err)
{
    if (ts_wire_dec_member(v, key) != NULL)
        return TS_OK;
    char f[TS_WIRE_PATH_MAX];
    ts_wire_dec_path(f, sizeof(f), path, key);
    return ts_error_field(err, TS_ERR_MISSING_FIELD, f, "%s is required", f);
}

/* An optional string member copied into the arena (NULL when absent). */
static enum ts_err text(const json_t *v, const char *path, const char *key, struct ts_arena *a,
                        const char **out, struct ts_error *err)
{
    const char *s = NULL;
    *out = NULL;
    enum ts_err e = ts_wire_dec_string(v, path, key, false, &s, err);
    if (e != TS_OK || s == NULL)
        return e;
    if ((*out = ts_arena_strdup(a, s)) == NULL)
        return nomem(err);
    return TS_OK;
}

static enum ts_err decode_action(const json_t *v, const char *path, enum ts_desired_action *out,
                                 struct ts_error *err)
{
    const char *s = NULL;
    enum ts_err e = ts_wire_dec_string(v, path, "action", true, &s, err);
    if (e != TS_OK)
        return e;
    for (int i = 0; actions[i] != NULL; i++)
        if (strcmp(s, actions[i]) == 0) {
            *out = (enum ts_desired_action)i;
            return TS_OK;
        }
    char f[TS_WIRE_PATH_MAX], q[80];
    ts_wire_dec_path(f, sizeof(f), path, "action");
    return ts_error_field(err, TS_ERR_INVALID_VALUE, f, "%s must be run, stop or suspend: %s", f,
                          ts_wire_dec_quote(s, q, sizeof(q)));
}

/* "command": an array of strings (the agent says why an empty one or an
 * empty string cannot run). */
static enum ts_err decode_command(const json_t *v, const char *path, struct ts_arena *a,
                                  struct ts_desired_job *j, struct ts_error *err)
{
    const json_t *arr;
    char f[TS_WIRE_PATH_MAX];
    enum ts_err e = ts_wire_dec_array(v, path, "command", false, COMMAND_MAX, &arr, err);
    size_t n = json_array_size(arr);
    if (e != TS_OK || n == 0)
        return e;
    ts_wire_dec_path(f, sizeof(f), path, "command");
    if ((j->command = ts_arena_alloc(a, sizeof(*j->command) * (n + 1))) == NULL)
        return nomem(err);
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(arr, i);
        char p[TS_WIRE_PATH_MAX];
        if (!json_is_string(s)) {
            ts_wire_dec_index(p, sizeof(p), f, i);
            return ts_error_field(err, TS_ERR_WRONG_TYPE, p, "%s must be a string", p);
        }
        if ((j->command[i] = ts_arena_strdup(a, json_string_value(s))) == NULL)
            return nomem(err);
    }
    j->ncommand = n;
    return TS_OK;
}

/* "env": an object of strings whose names are not empty and hold no '='. */
static enum ts_err decode_env(const json_t *v, const char *path, struct ts_arena *a,
                              struct ts_desired_job *j, struct ts_error *err)
{
    char f[TS_WIRE_PATH_MAX];
    ts_wire_dec_path(f, sizeof(f), path, "env");
    const json_t *o = ts_wire_dec_member(v, "env");
    if (o == NULL)
        return TS_OK;
    if (!json_is_object(o))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, f, "%s must be an object of strings", f);
    size_t n = json_object_size(o);
    if (n > ENV_MAX)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, f, "%s must have at most %d entries: %zu",
                              f, ENV_MAX, n);
    if ((j->env = ts_arena_alloc(a, sizeof(*j->env) * (n + 1))) == NULL)
        return nomem(err);
    const char *k;
    const json_t *s;
    json_object_foreach((json_t *)o, k, s) {
        char p[TS_WIRE_PATH_MAX], q[80];
        ts_wire_dec_path(p, sizeof(p), f, k);
        if (!json_is_string(s))
            return ts_error_field(err, TS_ERR_WRONG_TYPE, p, "%s must be a string", p);
        if (k[0] == '\0' || strchr(k, '=') != NULL)
            return ts_error_field(err, TS_ERR_INVALID_VALUE, p,
                                  "%s: a variable's name must not be empty nor hold '=': %s", p,
                                  ts_wire_dec_quote(k, q, sizeof(q)));
        struct ts_desired_env *ev = &j->env[j->nenv];
        ev->name = ts_arena_strdup(a, k);
        ev->value = ts_arena_strdup(a, json_string_value(s));
        if (ev->name == NULL || ev->value == NULL)
            return nomem(err);
        j->nenv++;
    }
    return TS_OK;
}

static enum ts_err decode_gpu(const json_t *v, const char *path, struct ts_arena *a,
                              struct ts_desired_gpu *g, struct ts_error *err)
{
    int64_t index = 0, logical = -1;
    g->memory_bytes = -1;
    g->memory_limit_bytes = -1;
    enum ts_err e = need_object(v, path, err);
    if (e == TS_OK)
        e = need(v, path, "index", err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "index", 0, TS_NODE_GPUS_MAX - 1, NULL, &index, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "logical_index", 0, TS_NODE_GPUS_MAX - 1, NULL, &logical,
                                err);
    if (e == TS_OK)
        e = text(v, path, "uuid", a, &g->uuid, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "memory_bytes", 0, BYTES_MAX, NULL, &g->memory_bytes, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "memory_limit_bytes", 0, BYTES_MAX, NULL,
                                &g->memory_limit_bytes, err);
    g->index = (int)index;
    g->logical_index = (int)logical;
    return e;
}

static enum ts_err decode_gpus(const json_t *v, const char *path, struct ts_arena *a,
                               struct ts_desired_job *j, struct ts_error *err)
{
    const json_t *arr;
    char f[TS_WIRE_PATH_MAX];
    enum ts_err e = ts_wire_dec_array(v, path, "gpus", false, TS_NODE_GPUS_MAX, &arr, err);
    size_t n = json_array_size(arr);
    if (e != TS_OK || n == 0)
        return e;
    ts_wire_dec_path(f, sizeof(f), path, "gpus");
    if ((j->gpus = ts_arena_alloc(a, sizeof(*j->gpus) * n)) == NULL)
        return nomem(err);
    for (size_t i = 0; i < n; i++) {
        char p[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(p, sizeof(p), f, i);
        if ((e = decode_gpu(json_array_get(arr, i), p, a, &j->gpus[i], err)) != TS_OK)
            return e;
        for (size_t k = 0; k < i; k++)
            if (j->gpus[k].index == j->gpus[i].index)
                return ts_error_field(err, TS_ERR_INVALID_VALUE, p, "%s.index repeats GPU %d", p,
                                      j->gpus[i].index);
    }
    j->ngpus = n;
    return TS_OK;
}

/* The numbers and flags of a job, defaults where absent. */
static enum ts_err decode_amounts(const json_t *v, const char *path, struct ts_desired_job *j,
                                  struct ts_error *err)
{
    int64_t prio = 0, grace = -1, resume = 0;
    bool has_grace = false;
    enum ts_err e =
        ts_wire_dec_integer(v, path, "priority", INT32_MIN, INT32_MAX, NULL, &prio, err);
    if (e == TS_OK)
        e = ts_wire_dec_bool(v, path, "swap", NULL, &j->swap, err);
    if (e == TS_OK)
        e = ts_wire_dec_number(v, path, "cpu", 0, 1e6, NULL, &j->cpu, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "memory_bytes", 0, BYTES_MAX, NULL, &j->memory_bytes, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "grace_seconds", 0, INT32_MAX, &has_grace, &grace, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "max_runtime_seconds", 0, INT64_MAX, NULL,
                                &j->max_runtime_seconds, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "resume_count", 0, INT32_MAX, NULL, &resume, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "idle_swap_after_seconds", 0, INT64_MAX, NULL,
                                &j->idle_swap_after_seconds, err);
    if (e == TS_OK)
        e = ts_wire_dec_bool(v, path, "allow_root", NULL, &j->allow_root, err);
    j->priority = (int)prio;
    j->grace_seconds = has_grace ? (int)grace : -1;
    j->resume_count = (int)resume;
    return e;
}

enum ts_err ts_wire_desired_job_decode(const json_t *in, const char *path, struct ts_arena *a,
                                       struct ts_desired_job *out, struct ts_error *err)
{
    memset(out, 0, sizeof(*out));
    out->swap = true;
    out->grace_seconds = -1;
    int64_t attempt = 0;
    enum ts_err e = need_object(in, path, err);
    if (e == TS_OK)
        e = need(in, path, "id", err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(in, path, "id", 1, INT64_MAX, NULL, &out->id, err);
    if (e == TS_OK)
        e = need(in, path, "attempt", err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(in, path, "attempt", 0, INT32_MAX, NULL, &attempt, err);
    out->attempt = (int)attempt;
    if (e == TS_OK)
        e = decode_action(in, path, &out->action, err);
    if (e == TS_OK)
        e = text(in, path, "name", a, &out->name, err);
    if (e == TS_OK)
        e = text(in, path, "project", a, &out->project, err);
    if (e == TS_OK)
        e = text(in, path, "kind", a, &out->kind, err);
    if (e == TS_OK)
        e = text(in, path, "stop_reason", a, &out->stop_reason, err);
    if (e == TS_OK)
        e = decode_command(in, path, a, out, err);
    if (e == TS_OK)
        e = decode_env(in, path, a, out, err);
    if (e == TS_OK)
        e = text(in, path, "working_dir", a, &out->working_dir, err);
    if (e == TS_OK)
        e = decode_gpus(in, path, a, out, err);
    if (e == TS_OK)
        e = decode_amounts(in, path, out, err);
    if (e == TS_OK)
        e = text(in, path, "checkpoint_dir", a, &out->checkpoint_dir, err);
    if (e == TS_OK)
        e = text(in, path, "job_user", a, &out->job_user, err);
    return e;
}

enum ts_err ts_wire_desired_decode(const json_t *in, struct ts_arena *a, struct ts_desired *out,
                                   struct ts_error *err)
{
    memset(out, 0, sizeof(*out));
    const json_t *jobs = NULL;
    if (!json_is_object(in))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, "",
                              "the desired state must be a JSON object");
    enum ts_err e = text(in, "", "node", a, &out->node, err);
    if (e == TS_OK)
        e = text(in, "", "state", a, &out->state, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(in, "", "generation", 0, INT64_MAX, NULL, &out->generation, err);
    if (e == TS_OK)
        e = ts_wire_dec_array(in, "", "jobs", false, TS_REPORT_JOBS_MAX, &jobs, err);
    if (e != TS_OK)
        return e;
    size_t n = json_array_size(jobs);
    if ((out->jobs = ts_arena_alloc(a, sizeof(*out->jobs) * (n + 1))) == NULL)
        return nomem(err);
    for (size_t i = 0; i < n; i++) {
        char p[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(p, sizeof(p), "jobs", i);
        if ((e = ts_wire_desired_job_decode(json_array_get(jobs, i), p, a, &out->jobs[i], err)) !=
            TS_OK)
            return e;
        for (size_t k = 0; k < i; k++)
            if (out->jobs[k].id == out->jobs[i].id && out->jobs[k].attempt == out->jobs[i].attempt)
                return ts_error_field(err, TS_ERR_INVALID_VALUE, p,
                                      "%s repeats job %lld attempt %d", p,
                                      (long long)out->jobs[i].id, out->jobs[i].attempt);
        out->njobs = i + 1;
    }
    return TS_OK;
}

enum ts_err ts_wire_desired_job_set_text(struct ts_desired_job *j, const char *command,
                                         const char *env, struct ts_arena *a, struct ts_error *err)
{
    json_t *o = json_object();
    if (o == NULL)
        return nomem(err);
    json_t *c = command != NULL ? json_loads(command, 0, NULL) : NULL;
    json_t *v = env != NULL ? json_loads(env, 0, NULL) : NULL;
    bool ok = true;
    if (c != NULL)
        ts_wire_enc_set(o, "command", c, &ok);
    if (v != NULL)
        ts_wire_enc_set(o, "env", v, &ok);
    j->command = NULL;
    j->ncommand = 0;
    j->env = NULL;
    j->nenv = 0;
    enum ts_err e = !ok ? nomem(err) : decode_command(o, "", a, j, err);
    if (e == TS_OK)
        e = decode_env(o, "", a, j, err);
    json_decref(o);
    return e;
}

/* ---- encoders ------------------------------------------------------------- */

static json_t *gpu_encode(const struct ts_desired_gpu *g)
{
    json_t *o = json_object();
    bool ok = true;
    ts_wire_enc_set(o, "index", json_integer(g->index), &ok);
    if (g->logical_index >= 0)
        ts_wire_enc_set(o, "logical_index", json_integer(g->logical_index), &ok);
    ts_wire_enc_set(o, "uuid", ts_wire_enc_string(g->uuid), &ok);
    if (g->memory_bytes >= 0)
        ts_wire_enc_set(o, "memory_bytes", json_integer(g->memory_bytes), &ok);
    if (g->memory_limit_bytes >= 0)
        ts_wire_enc_set(o, "memory_limit_bytes", json_integer(g->memory_limit_bytes), &ok);
    return ts_wire_enc_finish(o, ok);
}

static json_t *command_encode(const struct ts_desired_job *j)
{
    json_t *arr = json_array();
    bool ok = true;
    for (size_t i = 0; i < j->ncommand; i++)
        ts_wire_enc_append(arr, json_string(j->command[i]), &ok);
    return ts_wire_enc_finish(arr, ok);
}

static json_t *env_encode(const struct ts_desired_job *j)
{
    json_t *o = json_object();
    bool ok = true;
    for (size_t i = 0; i < j->nenv; i++)
        ts_wire_enc_set(o, j->env[i].name, json_string(j->env[i].value), &ok);
    return ts_wire_enc_finish(o, ok);
}

json_t *ts_wire_desired_job_encode(const struct ts_desired_job *j)
{
    json_t *o = json_object(), *gpus = json_array();
    bool ok = gpus != NULL;
    for (size_t i = 0; i < j->ngpus; i++)
        ts_wire_enc_append(gpus, gpu_encode(&j->gpus[i]), &ok);
    ts_wire_enc_set(o, "id", json_integer(j->id), &ok);
    ts_wire_enc_set(o, "attempt", json_integer(j->attempt), &ok);
    ts_wire_enc_set(o, "name", ts_wire_enc_string(j->name), &ok);
    ts_wire_enc_set(o, "project", ts_wire_enc_string(j->project), &ok);
    ts_wire_enc_set(o, "kind", ts_wire_enc_string(j->kind), &ok);
    ts_wire_enc_set(o, "priority", json_integer(j->priority), &ok);
    ts_wire_enc_set(o, "action", json_string(actions[j->action]), &ok);
    ts_wire_enc_set(o, "swap", json_boolean(j->swap), &ok);
    ts_wire_enc_set(o, "stop_reason", ts_wire_enc_string(j->stop_reason), &ok);
    ts_wire_enc_set(o, "command", command_encode(j), &ok);
    ts_wire_enc_set(o, "env", env_encode(j), &ok);
    ts_wire_enc_set(o, "working_dir", ts_wire_enc_string(j->working_dir), &ok);
    ts_wire_enc_set(o, "gpus", gpus, &ok);
    ts_wire_enc_set(o, "cpu", json_real(j->cpu), &ok);
    ts_wire_enc_set(o, "memory_bytes", json_integer(j->memory_bytes), &ok);
    if (j->grace_seconds >= 0)
        ts_wire_enc_set(o, "grace_seconds", json_integer(j->grace_seconds), &ok);
    ts_wire_enc_set(o, "max_runtime_seconds", json_integer(j->max_runtime_seconds), &ok);
    ts_wire_enc_set(o, "checkpoint_dir", ts_wire_enc_string(j->checkpoint_dir), &ok);
    ts_wire_enc_set(o, "resume_count", json_integer(j->resume_count), &ok);
    ts_wire_enc_set(o, "idle_swap_after_seconds", json_integer(j->idle_swap_after_seconds), &ok);
    ts_wire_enc_set(o, "job_user", ts_wire_enc_string(j->job_user), &ok);
    ts_wire_enc_set(o, "allow_root", json_boolean(j->allow_root), &ok);
    return ts_wire_enc_finish(o, ok);
}

json_t *ts_wire_desired_encode(const struct ts_desired *d)
{
    json_t *o = json_object(), *jobs = json_array();
    bool ok = jobs != NULL;
    for (size_t i = 0; i < d->njobs; i++)
        ts_wire_enc_append(jobs, ts_wire_desired_job_encode(&d->jobs[i]), &ok);
    ts_wire_enc_set(o, "node", ts_wire_enc_string(d->node), &ok);
    ts_wire_enc_set(o, "state", ts_wire_enc_string(d->state), &ok);
    ts_wire_enc_set(o, "generation", json_integer(d->generation), &ok);
    ts_wire_enc_set(o, "jobs", jobs, &ok);
    return ts_wire_enc_finish(o, ok);
}

/* ---- the answer to a report ------------------------------------------------ */

json_t *ts_wire_report_result_encode(const struct ts_report_result *r)
{
    json_t *o = json_object(), *ignored = json_array();
    bool ok = ignored != NULL;
    for (size_t i = 0; i < r->nignored; i++)
        ts_wire_enc_append(ignored, json_integer(r->ignored[i]), &ok);
    ts_wire_enc_set(o, "generation", json_integer(r->generation), &ok);
    ts_wire_enc_set(o, "ignored", ignored, &ok);
    return ts_wire_enc_finish(o, ok);
}

enum ts_err ts_wire_report_result_decode(const json_t *in, struct ts_arena *a,
                                         struct ts_report_result *out, struct ts_error *err)
{
    memset(out, 0, sizeof(*out));
    const json_t *ignored = NULL;
    if (!json_is_object(in))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, "", "the report's answer must be an object");
    enum ts_err e =
        ts_wire_dec_integer(in, "", "generation", 0, INT64_MAX, NULL, &out->generation, err);
    if (e == TS_OK)
        e = ts_wire_dec_array(in, "", "ignored", false, TS_REPORT_JOBS_MAX, &ignored, err);
    if (e != TS_OK)
        return e;
    size_t n = json_array_size(ignored);
    if ((out->ignored = ts_arena_alloc(a, sizeof(*out->ignored) * (n + 1))) == NULL)
        return nomem(err);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(ignored, i);
        char p[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(p, sizeof(p), "ignored", i);
        if (!json_is_integer(v) || json_integer_value(v) < 1)
            return ts_error_field(err, TS_ERR_INVALID_VALUE, p, "%s must be a job id", p);
        out->ignored[i] = json_integer_value(v);
    }
    out->nignored = n;
    return TS_OK;
}
