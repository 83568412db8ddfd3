/*
 * wire_project.c - quotas, departments and projects on the wire.
 */
#include "api/wire.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "api/wire_dec.h"
#include "api/wire_enc.h"

static const char *const quota_fields[] = {"gpus", "over_quota_weight", "limit", "priority", NULL};
static const char *const project_quota_fields[] = {
    "gpus",        "over_quota_weight", "limit",      "priority",
    "max_pending", "job_user",          "allow_root", NULL};
static const char *const department_fields[] = {"name", "quota", NULL};
static const char *const project_fields[] = {"name", "department", "quota", NULL};
/* Members the encoders write that a client may send back by mistake. */
static const char *const readonly_fields[] = {"id", "status", "created_at", "project_count", NULL};

/* A Unix user name as useradd takes it: [a-z_][a-z0-9_-]{0,31}. */
static bool job_user_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > TS_JOB_USER_MAX || !(islower((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '_' ||
              s[i] == '-'))
            return false;
    return true;
}

/* "job_user" (null or absent: the agent's --job-user) and "allow_root". The
 * server only checks the name's form and that root is allowed explicitly;
 * the node checks the user exists there and is not uid 0 unless allowed. */
static enum ts_err job_user_decode(const json_t *in, const char *field, struct ts_quota *out,
                                   struct ts_error *err)
{
    const char *user = NULL;
    enum ts_err e = ts_wire_dec_bool(in, field, "allow_root", NULL, &out->allow_root, err);
    if (e == TS_OK)
        e = ts_wire_dec_string(in, field, "job_user", false, &user, err);
    if (e != TS_OK || user == NULL)
        return e;
    char path[TS_WIRE_PATH_MAX];
    ts_wire_dec_path(path, sizeof(path), field, "job_user");
    if (!job_user_valid(user))
        return ts_error_field(err, TS_ERR_INVALID_VALUE, path,
                              "%s must be a Unix user name ([a-z_][a-z0-9_-]{0,31}): \"%.40s\"",
                              path, user);
    if (strcmp(user, "root") == 0 && !out->allow_root) {
        ts_error_field(err, TS_ERR_INVALID_VALUE, path,
                       "%s \"root\" needs allow_root: true for this project", path);
        ts_error_hint(err, "jobs as root can read every file of the node: set allow_root only "
                           "for a project you trust with the node");
        return TS_ERR_INVALID_VALUE;
    }
    snprintf(out->job_user, sizeof(out->job_user), "%s", user);
    return TS_OK;
}

static enum ts_err quota_decode(const json_t *in, const char *field, bool project,
                                struct ts_quota *out, struct ts_error *err)
{
    *out = (struct ts_quota){.gpus = 0,
                             .over_quota_weight = 1,
                             .has_limit = false,
                             .priority = 0,
                             .has_max_pending = project,
                             .max_pending = project ? TS_MAX_PENDING_DEFAULT : 0};
    if (in == NULL || json_is_null(in))
        return TS_OK;
    enum ts_err e = ts_wire_dec_object(in, field, "quota",
                                       project ? project_quota_fields : quota_fields, NULL, err);
    if (e == TS_OK)
        e = ts_wire_dec_number(in, field, "gpus", 0, TS_QUOTA_GPUS_MAX, NULL, &out->gpus, err);
    if (e == TS_OK)
        e = ts_wire_dec_number(in, field, "over_quota_weight", 0, TS_QUOTA_WEIGHT_MAX, NULL,
                               &out->over_quota_weight, err);
    if (e == TS_OK)
        e = ts_wire_dec_number(in, field, "limit", 0, TS_QUOTA_GPUS_MAX, &out->has_limit,
                               &out->limit, err);
    int64_t priority = 0;
    if (e == TS_OK)
        e = ts_wire_dec_integer(in, field, "priority", -1000, 1000, NULL, &priority, err);
    if (e == TS_OK && project)
        e = ts_wire_dec_integer(in, field, "max_pending", 0, TS_MAX_PENDING_MAX, NULL,
                                &out->max_pending, err);
    if (e == TS_OK && project)
        e = job_user_decode(in, field, out, err);
    if (e != TS_OK)
        return e;
    out->priority = (int)priority;
    if (out->has_limit && out->limit < out->gpus) {
        char lim[TS_WIRE_PATH_MAX], gpus[TS_WIRE_PATH_MAX], a[32], b[32];
        ts_wire_dec_path(lim, sizeof(lim), field, "limit");
        ts_wire_dec_path(gpus, sizeof(gpus), field, "gpus");
        return ts_error_field(err, TS_ERR_INVALID_VALUE, lim, "%s must not be below %s: %s < %s",
                              lim, gpus, ts_wire_dec_number_text(out->limit, a, sizeof(a)),
                              ts_wire_dec_number_text(out->gpus, b, sizeof(b)));
    }
    return TS_OK;
}

enum ts_err ts_wire_quota_decode(const json_t *in, const char *field, struct ts_quota *out,
                                 struct ts_error *err)
{
    return quota_decode(in, field, false, out, err);
}

enum ts_err ts_wire_project_quota_decode(const json_t *in, const char *field, struct ts_quota *out,
                                         struct ts_error *err)
{
    return quota_decode(in, field, true, out, err);
}

json_t *ts_wire_quota_encode(const struct ts_quota *q)
{
    bool ok = true;
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    ts_wire_enc_set(o, "gpus", json_real(q->gpus), &ok);
    ts_wire_enc_set(o, "over_quota_weight", json_real(q->over_quota_weight), &ok);
    ts_wire_enc_set(o, "limit", q->has_limit ? json_real(q->limit) : json_null(), &ok);
    ts_wire_enc_set(o, "priority", json_integer(q->priority), &ok);
    if (q->has_max_pending) {
        ts_wire_enc_set(o, "max_pending", json_integer(q->max_pending), &ok);
        ts_wire_enc_set(o, "job_user", q->job_user[0] ? json_string(q->job_user) : json_null(),
                        &ok);
        ts_wire_enc_set(o, "allow_root", json_boolean(q->allow_root), &ok);
    }
    return ts_wire_enc_finish(o, ok);
}

enum ts_err ts_wire_department_decode(const json_t *in, struct ts_department_spec *out,
                                      struct ts_error *err)
{
    *out = (struct ts_department_spec){0};
    enum ts_err e =
        ts_wire_dec_object(in, "", "department", department_fields, readonly_fields, err);
    if (e == TS_OK)
        e = ts_wire_dec_name(in, "", "name", out->name, err);
    if (e == TS_OK)
        e = ts_wire_quota_decode(ts_wire_dec_member(in, "quota"), "quota", &out->quota, err);
    return e;
}

enum ts_err ts_wire_project_decode(const json_t *in, struct ts_project_spec *out,
                                   struct ts_error *err)
{
    *out = (struct ts_project_spec){0};
    enum ts_err e = ts_wire_dec_object(in, "", "project", project_fields, readonly_fields, err);
    if (e == TS_OK)
        e = ts_wire_dec_name(in, "", "name", out->name, err);
    if (e == TS_OK)
        e = ts_wire_dec_name(in, "", "department", out->department, err);
    if (e == TS_OK)
        e = ts_wire_project_quota_decode(ts_wire_dec_member(in, "quota"), "quota", &out->quota,
                                         err);
    return e;
}

static json_t *usage_encode(const struct ts_usage *u)
{
    bool ok = true;
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    ts_wire_enc_set(o, "allocated_gpus", json_real(u->allocated_gpus), &ok);
    ts_wire_enc_set(o, "deserved_gpus", json_real(u->deserved_gpus), &ok);
    ts_wire_enc_set(o, "fair_share_gpus", json_real(u->fair_share_gpus), &ok);
    ts_wire_enc_set(o, "allocated_nonpreemptible_gpus", json_real(u->allocated_nonpreemptible_gpus),
                    &ok);
    ts_wire_enc_set(o, "requested_gpus", json_real(u->requested_gpus), &ok);
    ts_wire_enc_set(o, "pending_jobs", json_integer(u->pending_jobs), &ok);
    ts_wire_enc_set(o, "running_jobs", json_integer(u->running_jobs), &ok);
    return ts_wire_enc_finish(o, ok);
}

json_t *ts_wire_department_encode(const struct ts_department *d)
{
    bool ok = true;
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    ts_wire_enc_set(o, "id", json_integer(d->id), &ok);
    ts_wire_enc_set(o, "name", json_string(d->spec.name), &ok);
    ts_wire_enc_set(o, "quota", ts_wire_quota_encode(&d->spec.quota), &ok);
    ts_wire_enc_set(o, "status", usage_encode(&d->usage), &ok);
    ts_wire_enc_set(o, "project_count", json_integer(d->project_count), &ok);
    ts_wire_enc_set(o, "created_at", ts_wire_time(d->created_at_us), &ok);
    return ts_wire_enc_finish(o, ok);
}

json_t *ts_wire_project_encode(const struct ts_project *p)
{
    bool ok = true;
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    ts_wire_enc_set(o, "id", json_integer(p->id), &ok);
    ts_wire_enc_set(o, "name", json_string(p->spec.name), &ok);
    ts_wire_enc_set(o, "department", json_string(p->spec.department), &ok);
    ts_wire_enc_set(o, "quota", ts_wire_quota_encode(&p->spec.quota), &ok);
    ts_wire_enc_set(o, "status", usage_encode(&p->usage), &ok);
    ts_wire_enc_set(o, "created_at", ts_wire_time(p->created_at_us), &ok);
    return ts_wire_enc_finish(o, ok);
}
