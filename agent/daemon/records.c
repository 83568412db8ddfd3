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
    INT,     /* int64_t, between min and max */
    BOOL,    /* bool */
    TEXT,    /* char[len] */
    NUMBER,  /* double, between min and max */
    TEXTS,   /* char[max][len], their count a size_t at count */
    INTS,    /* int64_t[len], each between min and max, their count at count */
    OBJECT,  /* a record of members sub, at has (given) */
    OBJECTS, /* records of members sub, len bytes apart, at most max, count at count */
    STRV,    /* char **, NULL-terminated (NULL: none); decoded: new, ts_rec_launch_free */
};

/* A member of a record: its key, where its value is in the struct. */
struct member {
    const char *key;
    enum kind kind;
    size_t at;        /* offsetof the value */
    size_t len;       /* TEXT, TEXTS: a text's array size; INTS: the most; OBJECTS: the stride */
    int64_t min, max; /* INT, NUMBER, INTS; TEXTS, OBJECTS: max is the most entries */
    size_t has;       /* offsetof a bool saying it is given, plus 1; 0: none */
    bool required;
    bool omit_zero; /* INT: not written when 0; TEXT: when ""; arrays: when empty */
    size_t count;   /* arrays: offsetof their count (a size_t) */
    const struct member *sub;
};

#define AT(type, field) offsetof(type, field)
#define SIZE(type, field) sizeof(((type *)0)->field)
#define HAS(type, field) (offsetof(type, field) + 1)

static const struct member status_members[] = {
    {.key = "state",
     .kind = TEXT,
     .at = AT(struct ts_rec_status, state),
     .len = SIZE(struct ts_rec_status, state),
     .required = true},
    {.key = "exit_code",
     .kind = INT,
     .at = AT(struct ts_rec_status, exit_code),
     .min = -255,
     .max = 255,
     .has = HAS(struct ts_rec_status, has_exit_code)},
    {.key = "signal",
     .kind = INT,
     .at = AT(struct ts_rec_status, signal),
     .max = 128,
     .omit_zero = true},
    {.key = "message",
     .kind = TEXT,
     .at = AT(struct ts_rec_status, message),
     .len = TS_REC_MESSAGE_MAX,
     .omit_zero = true},
    {.key = "finished_at",
     .kind = INT,
     .at = AT(struct ts_rec_status, finished_at),
     .max = INT64_MAX},
    {.key = NULL},
};

#define PID_MAX_ (1 << 22) /* the kernel's largest pid_max */
static const struct member pids_members[] = {
    {.key = "pid",
     .kind = INT,
     .at = AT(struct ts_rec_pids, pid),
     .min = 1,
     .max = PID_MAX_,
     .required = true},
    {.key = "start_ticks",
     .kind = INT,
     .at = AT(struct ts_rec_pids, start_ticks),
     .max = INT64_MAX},
    {.key = "supervisor_pid",
     .kind = INT,
     .at = AT(struct ts_rec_pids, supervisor_pid),
     .max = PID_MAX_},
    {.key = "supervisor_start_ticks",
     .kind = INT,
     .at = AT(struct ts_rec_pids, supervisor_start_ticks),
     .max = INT64_MAX},
    {.key = "started_at", .kind = INT, .at = AT(struct ts_rec_pids, started_at), .max = INT64_MAX},
    {.key = "init_pid",
     .kind = INT,
     .at = AT(struct ts_rec_pids, init_pid),
     .max = PID_MAX_,
     .omit_zero = true},
    {.key = "init_start_ticks",
     .kind = INT,
     .at = AT(struct ts_rec_pids, init_start_ticks),
     .max = INT64_MAX,
     .omit_zero = true},
    {.key = NULL},
};

static const struct member stop_members[] = {
    {.key = "deadline_ms",
     .kind = INT,
     .at = AT(struct ts_rec_stop, deadline_ms),
     .max = INT64_MAX,
     .required = true},
    {.key = "killed", .kind = BOOL, .at = AT(struct ts_rec_stop, killed)},
    {.key = NULL},
};

static const struct member cgroup_members[] = {
    {.key = "version",
     .kind = INT,
     .at = AT(struct ts_cgroup_spec, version),
     .max = 2,
     .required = true},
    {.key = "path",
     .kind = TEXT,
     .at = AT(struct ts_cgroup_spec, path),
     .len = SIZE(struct ts_cgroup_spec, path),
     .required = true},
    {.key = "cpu", .kind = NUMBER, .at = AT(struct ts_cgroup_spec, cpu), .max = 1000000},
    {.key = "memory_bytes",
     .kind = INT,
     .at = AT(struct ts_cgroup_spec, memory_bytes),
     .max = INT64_MAX},
    {.key = "pids_max", .kind = INT, .at = AT(struct ts_cgroup_spec, pids_max), .max = INT64_MAX},
    {.key = "devices",
     .kind = TEXTS,
     .at = AT(struct ts_cgroup_spec, devices),
     .len = TS_CGROUP_RULE_MAX,
     .max = TS_CGROUP_DEVICES_MAX,
     .omit_zero = true,
     .count = AT(struct ts_cgroup_spec, ndevices)},
    {.key = NULL},
};

#define SB struct ts_sandbox_spec
#define DRV struct ts_sandbox_driver
#define MNT struct ts_sandbox_mount
#define PATH_MEMBER(type, name)                                                                    \
    {                                                                                              \
        .key = #name, .kind = TEXT, .at = AT(type, name), .len = SIZE(type, name),                 \
        .omit_zero = true                                                                          \
    }

static const struct member driver_members[] = {
    {.key = "real", .kind = TEXT, .at = AT(DRV, real), .len = SIZE(DRV, real), .required = true},
    {.key = "shim", .kind = TEXT, .at = AT(DRV, shim), .len = SIZE(DRV, shim), .required = true},
    {.key = "overlay_lib",
     .kind = TEXT,
     .at = AT(DRV, overlay_lib),
     .len = SIZE(DRV, overlay_lib),
     .required = true},
    {.key = "overlay",
     .kind = TEXTS,
     .at = AT(DRV, overlay),
     .len = TS_SANDBOX_PATH_MAX,
     .max = TS_SANDBOX_OVERLAY_MAX,
     .count = AT(DRV, noverlay)},
    {.key = NULL},
};

static const struct member mount_members[] = {
    {.key = "path", .kind = TEXT, .at = AT(MNT, path), .len = SIZE(MNT, path), .required = true},
    {.key = "rw", .kind = BOOL, .at = AT(MNT, rw)},
    {.key = NULL},
};

static const struct member sandbox_members[] = {
    {.key = "uid", .kind = INT, .at = AT(SB, uid), .max = UINT32_MAX - 1, .required = true},
    {.key = "gid", .kind = INT, .at = AT(SB, gid), .max = UINT32_MAX - 1, .required = true},
    {.key = "user", .kind = TEXT, .at = AT(SB, user), .len = SIZE(SB, user)},
    PATH_MEMBER(SB, data_dir),
    PATH_MEMBER(SB, job_dir),
    PATH_MEMBER(SB, checkpoint_dir),
    PATH_MEMBER(SB, simgpu_dir),
    PATH_MEMBER(SB, swap_path),
    PATH_MEMBER(SB, token_file),
    {.key = "driver",
     .kind = OBJECT,
     .at = AT(SB, driver),
     .len = SIZE(SB, driver),
     .has = HAS(SB, has_driver),
     .sub = driver_members},
    {.key = "gpus", .kind = INTS, .at = AT(SB, gpus), .len = 64, .max = 63, .count = AT(SB, ngpus)},
    {.key = "mounts",
     .kind = OBJECTS,
     .at = AT(SB, mounts),
     .len = sizeof(MNT),
     .max = TS_SANDBOX_MOUNTS_MAX,
     .count = AT(SB, nmounts),
     .sub = mount_members},
    {.key = "network", .kind = TEXT, .at = AT(SB, network), .len = SIZE(SB, network)},
    {.key = NULL},
};

#define LAUNCH struct ts_rec_launch
static const struct member launch_members[] = {
    {.key = "argv", .kind = STRV, .at = AT(LAUNCH, argv), .max = 1 << 20, .required = true},
    {.key = "env", .kind = STRV, .at = AT(LAUNCH, env), .max = 1 << 20, .required = true},
    {.key = "working_dir",
     .kind = TEXT,
     .at = AT(LAUNCH, working_dir),
     .len = SIZE(LAUNCH, working_dir),
     .omit_zero = true},
    {.key = "sandbox",
     .kind = OBJECT,
     .at = AT(LAUNCH, sandbox),
     .len = SIZE(LAUNCH, sandbox),
     .has = HAS(LAUNCH, has_sandbox),
     .sub = sandbox_members},
    {.key = "cgroup",
     .kind = OBJECT,
     .at = AT(LAUNCH, cgroup),
     .len = SIZE(LAUNCH, cgroup),
     .has = HAS(LAUNCH, has_cgroup),
     .sub = cgroup_members},
    {.key = NULL},
};

static json_t *encode_members(const struct member *members, const void *record);
static enum ts_err decode_members(const json_t *o, const char *what, const struct member *members,
                                  void *record, size_t size, struct ts_error *err);

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
    case INTS: {
        size_t n;
        memcpy(&n, rec + m->count, sizeof(n));
        json_t *arr = json_array();
        for (size_t i = 0; arr != NULL && i < n; i++) {
            int64_t v;
            memcpy(&v, rec + m->at + i * sizeof(v), sizeof(v));
            if (json_array_append_new(arr, json_integer((json_int_t)v)) != 0) {
                json_decref(arr);
                return NULL;
            }
        }
        return arr;
    }
    case OBJECT:
        return encode_members(m->sub, rec + m->at);
    case STRV: {
        char **v;
        memcpy(&v, rec + m->at, sizeof(v));
        json_t *arr = json_array();
        for (size_t i = 0; arr != NULL && v != NULL && v[i] != NULL; i++)
            if (json_array_append_new(arr, json_string(v[i])) != 0) {
                json_decref(arr);
                return NULL;
            }
        return arr;
    }
    case OBJECTS: {
        size_t n;
        memcpy(&n, rec + m->count, sizeof(n));
        json_t *arr = json_array();
        for (size_t i = 0; arr != NULL && i < n; i++)
            if (json_array_append_new(arr, encode_members(m->sub, rec + m->at + i * m->len)) != 0) {
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
    if (m->has != 0 && !*(const bool *)(rec + m->has - 1))
        return true;
    if (!m->omit_zero)
        return false;
    if (m->kind == TEXT)
        return rec[m->at] == '\0';
    if (m->kind == TEXTS || m->kind == INTS || m->kind == OBJECTS) {
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

/* An array (at most m->max entries) of v into *n, or an error. */
static enum ts_err array_of(const struct member *m, const json_t *v, const char *file, size_t most,
                            size_t *n, struct ts_error *err)
{
    if (!json_is_array(v))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, m->key, "%s: %s must be an array", file,
                              m->key);
    *n = json_array_size(v);
    if (*n > most)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, m->key,
                              "%s: %s must have at most %zu entries: %zu", file, m->key, most, *n);
    return TS_OK;
}

/* An array of integers between min and max into int64_t[len]. */
static enum ts_err ints_read(const struct member *m, const json_t *v, const char *file, char *rec,
                             struct ts_error *err)
{
    size_t n;
    enum ts_err e = array_of(m, v, file, m->len, &n, err);
    for (size_t i = 0; e == TS_OK && i < n; i++) {
        const json_t *x = json_array_get(v, i);
        int64_t val = json_is_integer(x) ? (int64_t)json_integer_value(x) : 0;
        if (!json_is_integer(x) || val < m->min || val > m->max)
            return ts_error_field(err, TS_ERR_INVALID_VALUE, m->key,
                                  "%s: %s[%zu] must be an integer between %lld and %lld", file,
                                  m->key, i, (long long)m->min, (long long)m->max);
        memcpy(rec + m->at + i * sizeof(val), &val, sizeof(val));
    }
    if (e == TS_OK)
        memcpy(rec + m->count, &n, sizeof(n));
    return e;
}

/* An array of objects, each a record of m->sub, m->len bytes apart. */
static enum ts_err objects_read(const struct member *m, const json_t *v, const char *file,
                                char *rec, struct ts_error *err)
{
    size_t n;
    enum ts_err e = array_of(m, v, file, (size_t)m->max, &n, err);
    for (size_t i = 0; e == TS_OK && i < n; i++) {
        char sub[512];
        snprintf(sub, sizeof(sub), "%s.%s[%zu]", file, m->key, i);
        e = decode_members(json_array_get(v, i), sub, m->sub, rec + m->at + i * m->len, m->len,
                           err);
    }
    if (e == TS_OK)
        memcpy(rec + m->count, &n, sizeof(n));
    return e;
}

static void strv_free(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++)
        free(v[i]);
    free(v);
}

/* An array of strings (no NUL in them) into a new char **. */
static enum ts_err strv_read(const struct member *m, const json_t *v, const char *file, char *rec,
                             struct ts_error *err)
{
    size_t n;
    enum ts_err e = array_of(m, v, file, (size_t)m->max, &n, err);
    char **out = e == TS_OK ? calloc(n + 1, sizeof(*out)) : NULL;
    if (e == TS_OK && out == NULL)
        e = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; e == TS_OK && i < n; i++) {
        const json_t *t = json_array_get(v, i);
        if (!json_is_string(t) || memchr(json_string_value(t), '\0', json_string_length(t)) != NULL)
            e = ts_error_field(err, TS_ERR_INVALID_VALUE, m->key, "%s: %s[%zu] must be a string",
                               file, m->key, i);
        else if ((out[i] = strdup(json_string_value(t))) == NULL)
            e = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    if (e != TS_OK) {
        strv_free(out);
        return e;
    }
    memcpy(rec + m->at, &out, sizeof(out));
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
    case INTS:
        return ints_read(m, v, file, rec, err);
    case OBJECT: {
        char sub[512];
        snprintf(sub, sizeof(sub), "%s.%s", file, m->key);
        enum ts_err e = decode_members(v, sub, m->sub, rec + m->at, m->len, err);
        if (e != TS_OK)
            return e;
        break;
    }
    case OBJECTS:
        return objects_read(m, v, file, rec, err);
    case STRV:
        return strv_read(m, v, file, rec, err);
    }
    if (m->has != 0)
        *(bool *)(rec + m->has - 1) = true;
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
    if (e != TS_OK) {
        for (size_t i = 0; members[i].key != NULL; i++)
            if (members[i].kind == STRV) {
                char **strv;
                memcpy(&strv, rec + members[i].at, sizeof(strv));
                strv_free(strv);
            }
        memset(rec, 0, size);
    }
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

int ts_rec_launch_write(const char *path, const struct ts_rec_launch *rec)
{
    return write_record(path, launch_members, rec);
}

enum ts_err ts_rec_launch_read(const char *path, struct ts_rec_launch *rec, struct ts_error *err)
{
    enum ts_err e = read_record(path, launch_members, rec, sizeof(*rec), err);
    if (e == TS_OK && rec->has_sandbox && strcmp(rec->sandbox.network, "host") != 0 &&
        strcmp(rec->sandbox.network, "none") != 0 && rec->sandbox.network[0] != '\0') {
        e = ts_error_field(err, TS_ERR_INVALID_VALUE, "sandbox.network",
                           "%s.sandbox: network must be host or none: \"%s\"", path,
                           rec->sandbox.network);
        ts_rec_launch_free(rec);
    }
    return e;
}

void ts_rec_launch_free(struct ts_rec_launch *rec)
{
    strv_free(rec->argv);
    strv_free(rec->env);
    rec->argv = rec->env = NULL;
}
