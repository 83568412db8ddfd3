/*
 * records.c - the agent's own files (records.h): one table of members per
 * record drives its encoder and its decoder.
 */
#include "agent/daemon/records.h"

#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/files.h"

#define RECORD_FILE_MAX (64 * 1024)

enum kind {
    INT,    /* int64_t */
    BOOL,   /* bool */
    TEXT,   /* char[len] */
    NUMBER, /* double, between min and max */
    TEXTS,  /* char[max][len], their count a size_t at count */
};

/* A member of a record: its key, where its value is in the struct. */
struct member {
    const char *key;
    enum kind kind;
    size_t at;        /* offsetof the value */
    size_t len;       /* TEXT, TEXTS: the size of a text's array */
    int64_t min, max; /* INT, NUMBER; TEXTS: max is the most texts */
    long has;         /* offsetof a bool saying it is given, or -1 */
    bool required;
    bool omit_zero; /* INT: not written when 0; TEXT: when "" */
    size_t count;   /* TEXTS: offsetof their count */
};

#define NO_HAS (-1L)

static const struct member status_members[] = {
    {"state", TEXT, offsetof(struct ts_rec_status, state),
     sizeof(((struct ts_rec_status *)0)->state), 0, 0, NO_HAS, true, false, 0},
    {"exit_code", INT, offsetof(struct ts_rec_status, exit_code), 0, -255, 255,
     (long)offsetof(struct ts_rec_status, has_exit_code), false, false, 0},
    {"signal", INT, offsetof(struct ts_rec_status, signal), 0, 0, 128, NO_HAS, false, true, 0},
    {"message", TEXT, offsetof(struct ts_rec_status, message), TS_REC_MESSAGE_MAX, 0, 0, NO_HAS,
     false, true, 0},
    {"finished_at", INT, offsetof(struct ts_rec_status, finished_at), 0, 0, INT64_MAX, NO_HAS,
     false, false, 0},
    {NULL, INT, 0, 0, 0, 0, NO_HAS, false, false, 0},
};

#define PID_MAX_ (1 << 22) /* the kernel's largest pid_max */
static const struct member pids_members[] = {
    {"pid", INT, offsetof(struct ts_rec_pids, pid), 0, 1, PID_MAX_, NO_HAS, true, false, 0},
    {"start_ticks", INT, offsetof(struct ts_rec_pids, start_ticks), 0, 0, INT64_MAX, NO_HAS, false,
     false, 0},
    {"supervisor_pid", INT, offsetof(struct ts_rec_pids, supervisor_pid), 0, 0, PID_MAX_, NO_HAS,
     false, false, 0},
    {"supervisor_start_ticks", INT, offsetof(struct ts_rec_pids, supervisor_start_ticks), 0, 0,
     INT64_MAX, NO_HAS, false, false, 0},
    {"started_at", INT, offsetof(struct ts_rec_pids, started_at), 0, 0, INT64_MAX, NO_HAS, false,
     false, 0},
    {"init_pid", INT, offsetof(struct ts_rec_pids, init_pid), 0, 0, PID_MAX_, NO_HAS, false, true,
     0},
    {"init_start_ticks", INT, offsetof(struct ts_rec_pids, init_start_ticks), 0, 0, INT64_MAX,
     NO_HAS, false, true, 0},
    {NULL, INT, 0, 0, 0, 0, NO_HAS, false, false, 0},
};

static const struct member stop_members[] = {
    {"deadline_ms", INT, offsetof(struct ts_rec_stop, deadline_ms), 0, 0, INT64_MAX, NO_HAS, true,
     false, 0},
    {"killed", BOOL, offsetof(struct ts_rec_stop, killed), 0, 0, 0, NO_HAS, false, false, 0},
    {NULL, INT, 0, 0, 0, 0, NO_HAS, false, false, 0},
};

static const struct member cgroup_members[] = {
    {"version", INT, offsetof(struct ts_cgroup_spec, version), 0, 0, 2, NO_HAS, true, false, 0},
    {"path", TEXT, offsetof(struct ts_cgroup_spec, path),
     sizeof(((struct ts_cgroup_spec *)0)->path), 0, 0, NO_HAS, true, false, 0},
    {"cpu", NUMBER, offsetof(struct ts_cgroup_spec, cpu), 0, 0, 1000000, NO_HAS, false, false, 0},
    {"memory_bytes", INT, offsetof(struct ts_cgroup_spec, memory_bytes), 0, 0, INT64_MAX, NO_HAS,
     false, false, 0},
    {"pids_max", INT, offsetof(struct ts_cgroup_spec, pids_max), 0, 0, INT64_MAX, NO_HAS, false,
     false, 0},
    {"devices", TEXTS, offsetof(struct ts_cgroup_spec, devices), TS_CGROUP_RULE_MAX, 0,
     TS_CGROUP_DEVICES_MAX, NO_HAS, false, true, offsetof(struct ts_cgroup_spec, ndevices)},
    {NULL, INT, 0, 0, 0, 0, NO_HAS, false, false, 0},
};

/* ---- encoding ------------------------------------------------------------- */

static json_t *member_value(const struct member *m, const char *rec)
{
    switch (m->kind) {
    case INT: {
        int64_t v;
        memcpy(&v, rec + m->at, sizeof(v));
        return json_integer((json_int_t)v);
    }
    case BOOL:
        return json_boolean(*(const bool *)(rec + m->at));
    case TEXT:
        return json_string(rec + m->at);
    case NUMBER: {
        double v;
        memcpy(&v, rec + m->at, sizeof(v));
        return json_real(v);
    }
    case TEXTS: {
        size_t n;
        memcpy(&n, rec + m->count, sizeof(n));
        json_t *arr = json_array();
        for (size_t i = 0; arr != NULL && i < n; i++)
            if (json_array_append_new(arr, json_string(rec + m->at + i * m->len)) != 0) {
                json_decref(arr);
                return NULL;
            }
        return arr;
    }
    }
    return NULL;
}

static bool omitted(const struct member *m, const char *rec)
{
    if (m->has != NO_HAS && !*(const bool *)(rec + m->has))
        return true;
    if (!m->omit_zero)
        return false;
    if (m->kind == TEXT)
        return rec[m->at] == '\0';
    if (m->kind == TEXTS) {
        size_t n;
        memcpy(&n, rec + m->count, sizeof(n));
        return n == 0;
    }
    int64_t v;
    memcpy(&v, rec + m->at, sizeof(v));
    return v == 0;
}

/* The record as a JSON object (new), NULL when out of memory. */
static json_t *encode_members(const struct member *members, const void *record)
{
    const char *rec = record;
    json_t *o = json_object();
    bool ok = o != NULL;
    for (const struct member *m = members; ok && m->key != NULL; m++) {
        if (omitted(m, rec))
            continue;
        json_t *v = member_value(m, rec);
        ok = v != NULL && json_object_set_new(o, m->key, v) == 0;
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int write_record(const char *path, const struct member *members, const void *record)
{
    json_t *o = encode_members(members, record);
    int rc = o != NULL ? ts_files_write_json(path, o, 0600) : -ENOMEM;
    json_decref(o);
    return rc;
}

/* ---- decoding ------------------------------------------------------------- */

/* An array of texts into char[max][len] and its count. */
static enum ts_err texts_read(const struct member *m, const json_t *v, const char *file, char *rec,
                              struct ts_error *err)
{
    if (!json_is_array(v))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, m->key, "%s: %s must be an array", file,
                              m->key);
    size_t n = json_array_size(v);
    if (n > (size_t)m->max)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, m->key,
                              "%s: %s must have at most %lld entries: %zu", file, m->key,
                              (long long)m->max, n);
    for (size_t i = 0; i < n; i++) {
        const json_t *t = json_array_get(v, i);
        size_t len = json_string_length(t);
        if (!json_is_string(t) || len >= m->len || memchr(json_string_value(t), '\0', len) != NULL)
            return ts_error_field(err, TS_ERR_INVALID_VALUE, m->key,
                                  "%s: %s[%zu] must be a text of at most %zu bytes", file, m->key,
                                  i, m->len - 1);
        memcpy(rec + m->at + i * m->len, json_string_value(t), len + 1);
    }
    memcpy(rec + m->count, &n, sizeof(n));
    return TS_OK;
}

static enum ts_err member_read(const struct member *m, const json_t *v, const char *path, char *rec,
                               struct ts_error *err)
{
    const char *file = path; /* or what names the object */
    switch (m->kind) {
    case INT: {
        if (!json_is_integer(v))
            return ts_error_field(err, TS_ERR_WRONG_TYPE, m->key, "%s: %s must be an integer", file,
                                  m->key);
        int64_t x = (int64_t)json_integer_value(v);
        if (x < m->min || x > m->max)
            return ts_error_field(err, TS_ERR_INVALID_VALUE, m->key,
                                  "%s: %s must be between %lld and %lld: %lld", file, m->key,
                                  (long long)m->min, (long long)m->max, (long long)x);
        memcpy(rec + m->at, &x, sizeof(x));
        break;
    }
    case BOOL:
        if (!json_is_boolean(v))
            return ts_error_field(err, TS_ERR_WRONG_TYPE, m->key, "%s: %s must be true or false",
                                  file, m->key);
        *(bool *)(rec + m->at) = json_is_true(v);
        break;
    case TEXT: {
        if (!json_is_string(v))
            return ts_error_field(err, TS_ERR_WRONG_TYPE, m->key, "%s: %s must be a string", file,
                                  m->key);
        size_t n = json_string_length(v);
        if (n >= m->len || memchr(json_string_value(v), '\0', n) != NULL)
            return ts_error_field(err, TS_ERR_INVALID_VALUE, m->key,
                                  "%s: %s must be a text of at most %zu bytes", file, m->key,
                                  m->len - 1);
        memcpy(rec + m->at, json_string_value(v), n + 1);
        break;
    }
    case NUMBER: {
        if (!json_is_number(v))
            return ts_error_field(err, TS_ERR_WRONG_TYPE, m->key, "%s: %s must be a number", file,
                                  m->key);
        double x = json_number_value(v);
        if (!(x >= (double)m->min && x <= (double)m->max))
            return ts_error_field(err, TS_ERR_INVALID_VALUE, m->key,
                                  "%s: %s must be between %lld and %lld: %g", file, m->key,
                                  (long long)m->min, (long long)m->max, x);
        memcpy(rec + m->at, &x, sizeof(x));
        break;
    }
    case TEXTS:
        return texts_read(m, v, file, rec, err);
    }
    if (m->has != NO_HAS)
        *(bool *)(rec + m->has) = true;
    return TS_OK;
}

/* o's members into record (zeroed first, and again on failure); what
 * names o in messages (a file, "launch.json's cgroup"). */
static enum ts_err decode_members(const json_t *o, const char *what, const struct member *members,
                                  void *record, size_t size, struct ts_error *err)
{
    char *rec = record;
    memset(rec, 0, size);
    if (!json_is_object(o))
        return ts_error_set(err, TS_ERR_WRONG_TYPE, "%s is damaged: not a JSON object", what);
    /* every member once, by its key; members of a newer agent skipped */
    enum ts_err e = TS_OK;
    bool seen[16] = {false};
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        for (size_t i = 0; e == TS_OK && members[i].key != NULL; i++) {
            if (strcmp(key, members[i].key) != 0 || json_is_null(v))
                continue;
            e = member_read(&members[i], v, what, rec, err);
            seen[i] = true;
        }
    }
    for (size_t i = 0; e == TS_OK && members[i].key != NULL; i++)
        if (members[i].required && !seen[i])
            e = ts_error_field(err, TS_ERR_MISSING_FIELD, members[i].key, "%s: %s is required",
                               what, members[i].key);
    if (e != TS_OK)
        memset(rec, 0, size);
    return e;
}

static enum ts_err read_record(const char *path, const struct member *members, void *record,
                               size_t size, struct ts_error *err)
{
    memset(record, 0, size);
    char *text = ts_files_read(path, RECORD_FILE_MAX, NULL);
    if (text == NULL && errno == ENOENT)
        return ts_error_set(err, TS_ERR_NOT_FOUND, "%s: no such file", path);
    if (text == NULL)
        return ts_error_set(err, TS_ERR_IO, "could not read %s: %s", path, strerror(errno));
    json_error_t je;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (o == NULL)
        return ts_error_set(err, TS_ERR_MALFORMED_JSON, "%s is damaged: %s at line %d", path,
                            je.text, je.line);
    enum ts_err e = decode_members(o, path, members, record, size, err);
    json_decref(o);
    return e;
}

/* ---- the records -------------------------------------------------------- */

int ts_rec_status_write(const char *path, const struct ts_rec_status *rec)
{
    return write_record(path, status_members, rec);
}

int ts_rec_pids_write(const char *path, const struct ts_rec_pids *rec)
{
    return write_record(path, pids_members, rec);
}

int ts_rec_stop_write(const char *path, const struct ts_rec_stop *rec)
{
    return write_record(path, stop_members, rec);
}

enum ts_err ts_rec_status_read(const char *path, struct ts_rec_status *rec, struct ts_error *err)
{
    enum ts_err e = read_record(path, status_members, rec, sizeof(*rec), err);
    if (e == TS_OK && strcmp(rec->state, "exited") != 0 &&
        strcmp(rec->state, "failed_to_start") != 0) {
        e = ts_error_field(err, TS_ERR_INVALID_VALUE, "state",
                           "%s: state must be exited or failed_to_start: \"%.32s\"", path,
                           rec->state);
        memset(rec, 0, sizeof(*rec));
    }
    return e;
}

enum ts_err ts_rec_pids_read(const char *path, struct ts_rec_pids *rec, struct ts_error *err)
{
    return read_record(path, pids_members, rec, sizeof(*rec), err);
}

enum ts_err ts_rec_stop_read(const char *path, struct ts_rec_stop *rec, struct ts_error *err)
{
    return read_record(path, stop_members, rec, sizeof(*rec), err);
}

json_t *ts_rec_cgroup_encode(const struct ts_cgroup_spec *spec)
{
    return encode_members(cgroup_members, spec);
}

enum ts_err ts_rec_cgroup_decode(const json_t *in, const char *what, struct ts_cgroup_spec *out,
                                 struct ts_error *err)
{
    return decode_members(in, what, cgroup_members, out, sizeof(*out), err);
}
