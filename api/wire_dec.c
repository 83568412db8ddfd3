/*
 * wire_dec.c - member readers shared by the strict decoders of api/wire_*.c.
 *
 * Messages follow STYLE.md: lower case, no final period, the value given.
 */
#include "api/wire_dec.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/units.h"
#include "api/wire.h"

#define QUOTE_MAX 64 /* bytes of a quoted value shown in a message */

char *ts_wire_dec_path(char *buf, size_t len, const char *path, const char *key)
{
    if (path == NULL || path[0] == '\0')
        snprintf(buf, len, "%s", key);
    else
        snprintf(buf, len, "%s.%s", path, key);
    return buf;
}

char *ts_wire_dec_index(char *buf, size_t len, const char *path, size_t i)
{
    snprintf(buf, len, "%s[%zu]", path, i);
    return buf;
}

char *ts_wire_dec_quote(const char *s, char *buf, size_t len)
{
    if (len < 8) {
        if (len > 0)
            buf[0] = '\0';
        return buf;
    }
    size_t o = 0;
    buf[o++] = '"';
    size_t room = len - 6; /* the closing quote, "..." and the NUL */
    const unsigned char *p = (const unsigned char *)s;
    for (size_t shown = 0; *p != '\0'; p++, shown++) {
        char esc[8];
        int n;
        if (*p == '"' || *p == '\\')
            n = snprintf(esc, sizeof(esc), "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            n = snprintf(esc, sizeof(esc), "\\x%02x", *p);
        else
            n = snprintf(esc, sizeof(esc), "%c", *p);
        bool continuation = (*p & 0xc0) == 0x80;
        if ((!continuation && shown >= QUOTE_MAX) || o + (size_t)n > room)
            break;
        memcpy(buf + o, esc, (size_t)n);
        o += (size_t)n;
    }
    if (*p != '\0') {
        /* cut: drop a UTF-8 sequence the cut may have split, then "..." */
        while (o > 1 && ((unsigned char)buf[o - 1] & 0xc0) == 0x80)
            o--;
        if (o > 1 && ((unsigned char)buf[o - 1] & 0xc0) == 0xc0)
            o--;
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

char *ts_wire_dec_number_text(double v, char *buf, size_t len)
{
    snprintf(buf, len, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, len, "%.17g", v);
    return buf;
}

json_t *ts_wire_dec_member(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

enum ts_err ts_wire_dec_array(const json_t *obj, const char *path, const char *key, bool required,
                              size_t max, const json_t **out, struct ts_error *err)
{
    char f[TS_WIRE_PATH_MAX];
    ts_wire_dec_path(f, sizeof(f), path, key);
    *out = ts_wire_dec_member(obj, key);
    if (*out == NULL)
        return required ? ts_error_field(err, TS_ERR_MISSING_FIELD, f, "%s is required", f) : TS_OK;
    if (!json_is_array(*out))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, f, "%s must be an array", f);
    if (json_array_size(*out) > max)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, f, "%s must have at most %zu entries: %zu",
                              f, max, json_array_size(*out));
    return TS_OK;
}

/* The number v as given: integers exactly, reals as people read them. */
static char *given_number(const json_t *v, char *buf, size_t len)
{
    if (json_is_integer(v))
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else
        ts_wire_dec_number_text(json_number_value(v), buf, len);
    return buf;
}

static enum ts_err wrong_type(struct ts_error *err, const char *field, const char *expected)
{
    return ts_error_field(err, TS_ERR_WRONG_TYPE, field, "%s must be %s", field, expected);
}

static enum ts_err missing(struct ts_error *err, const char *field)
{
    return ts_error_field(err, TS_ERR_MISSING_FIELD, field, "%s is required", field);
}

static bool listed(const char *const *list, const char *key)
{
    for (; list != NULL && *list != NULL; list++)
        if (strcmp(*list, key) == 0)
            return true;
    return false;
}

enum ts_err ts_wire_dec_object(const json_t *v, const char *path, const char *what,
                               const char *const *known, const char *const *readonly,
                               struct ts_error *err)
{
    bool top = path == NULL || path[0] == '\0';
    if (!json_is_object(v)) {
        if (top)
            return ts_error_field(err, TS_ERR_WRONG_TYPE, "", "request body must be a JSON object");
        return wrong_type(err, path, "an object");
    }
    const char *key;
    json_t *member;
    json_object_foreach((json_t *)v, key, member) {
        if (listed(known, key))
            continue;
        char field[TS_WIRE_PATH_MAX], q[QUOTE_MAX + 16];
        ts_wire_dec_path(field, sizeof(field), path, key);
        ts_error_field(err, TS_ERR_UNKNOWN_FIELD, field, "unknown field %s in %s",
                       ts_wire_dec_quote(key, q, sizeof(q)), what);
        if (listed(readonly, key))
            ts_error_hint(err, "%s is set by the server and cannot be written", key);
        return TS_ERR_UNKNOWN_FIELD;
    }
    return TS_OK;
}

enum ts_err ts_wire_dec_string(const json_t *obj, const char *path, const char *key, bool required,
                               const char **out, struct ts_error *err)
{
    char field[TS_WIRE_PATH_MAX];
    ts_wire_dec_path(field, sizeof(field), path, key);
    json_t *v = ts_wire_dec_member(obj, key);
    if (v == NULL)
        return required ? missing(err, field) : TS_OK;
    if (!json_is_string(v))
        return wrong_type(err, field, "a string");
    *out = json_string_value(v);
    return TS_OK;
}

enum ts_err ts_wire_dec_name(const json_t *obj, const char *path, const char *key, char *out,
                             struct ts_error *err)
{
    const char *s = NULL;
    enum ts_err e = ts_wire_dec_string(obj, path, key, true, &s, err);
    if (e != TS_OK)
        return e;
    if (!ts_name_valid(s)) {
        char field[TS_WIRE_PATH_MAX], q[QUOTE_MAX + 16];
        ts_wire_dec_path(field, sizeof(field), path, key);
        return ts_error_field(err, TS_ERR_INVALID_VALUE, field,
                              "%s must match [a-z0-9][a-z0-9-]{0,62}: %s", field,
                              ts_wire_dec_quote(s, q, sizeof(q)));
    }
    snprintf(out, TS_NAME_MAX + 1, "%s", s);
    return TS_OK;
}

enum ts_err ts_wire_dec_number(const json_t *obj, const char *path, const char *key, double min,
                               double max, bool *present, double *out, struct ts_error *err)
{
    char field[TS_WIRE_PATH_MAX];
    ts_wire_dec_path(field, sizeof(field), path, key);
    json_t *v = ts_wire_dec_member(obj, key);
    if (present != NULL)
        *present = v != NULL;
    if (v == NULL)
        return TS_OK;
    if (!json_is_number(v))
        return wrong_type(err, field, "a number");
    double d = json_number_value(v) + 0.0;
    if (!isfinite(d) || d < min || d > max) {
        char a[32], b[32], c[32];
        return ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s must be between %s and %s: %s",
                              field, ts_wire_dec_number_text(min, a, sizeof(a)),
                              ts_wire_dec_number_text(max, b, sizeof(b)),
                              given_number(v, c, sizeof(c)));
    }
    *out = d;
    return TS_OK;
}

/* v as an integer: 0, or -1 when it has a fraction or is out of int64. */
static int integer_value(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 0;
    }
    double d = json_real_value(v);
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != floor(d))
        return -1;
    *out = (int64_t)d;
    return 0;
}

static enum ts_err out_of_range(struct ts_error *err, const char *field, int64_t min, int64_t max,
                                const char *given)
{
    return ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s must be between %lld and %lld: %s",
                          field, (long long)min, (long long)max, given);
}

enum ts_err ts_wire_dec_integer(const json_t *obj, const char *path, const char *key, int64_t min,
                                int64_t max, bool *present, int64_t *out, struct ts_error *err)
{
    char field[TS_WIRE_PATH_MAX];
    ts_wire_dec_path(field, sizeof(field), path, key);
    json_t *v = ts_wire_dec_member(obj, key);
    if (present != NULL)
        *present = v != NULL;
    if (v == NULL)
        return TS_OK;
    if (!json_is_number(v))
        return wrong_type(err, field, "an integer");
    int64_t n;
    char given[32];
    if (integer_value(v, &n) != 0) {
        given_number(v, given, sizeof(given));
        if (json_number_value(v) == floor(json_number_value(v)))
            return out_of_range(err, field, min, max, given);
        return ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s must be an integer: %s", field,
                              given);
    }
    if (n < min || n > max) {
        snprintf(given, sizeof(given), "%lld", (long long)n);
        return out_of_range(err, field, min, max, given);
    }
    *out = n;
    return TS_OK;
}

enum ts_err ts_wire_dec_bool(const json_t *obj, const char *path, const char *key, bool *present,
                             bool *out, struct ts_error *err)
{
    char field[TS_WIRE_PATH_MAX];
    ts_wire_dec_path(field, sizeof(field), path, key);
    json_t *v = ts_wire_dec_member(obj, key);
    if (present != NULL)
        *present = v != NULL;
    if (v == NULL)
        return TS_OK;
    if (!json_is_boolean(v))
        return wrong_type(err, field, "a boolean");
    *out = json_is_true(v);
    return TS_OK;
}

enum ts_err ts_wire_dec_bytes(const json_t *obj, const char *path, const char *key, int64_t min,
                              bool *present, int64_t *out, struct ts_error *err)
{
    char field[TS_WIRE_PATH_MAX];
    ts_wire_dec_path(field, sizeof(field), path, key);
    json_t *v = ts_wire_dec_member(obj, key);
    if (present != NULL)
        *present = v != NULL;
    if (v == NULL)
        return TS_OK;
    int64_t n;
    char given[QUOTE_MAX + 16];
    if (json_is_string(v)) {
        ts_wire_dec_quote(json_string_value(v), given, sizeof(given));
        if (ts_bytesize_parse(json_string_value(v), &n) != 0) {
            ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s is not a size: %s", field, given);
            ts_error_hint(err, "sizes are written like 20GiB, 512MiB, 32G or 1.5TB, "
                               "at most 4194304TiB");
            return TS_ERR_INVALID_VALUE;
        }
    } else if (json_is_number(v)) {
        double d = json_number_value(v);
        given_number(v, given, sizeof(given));
        if (d != floor(d))
            return ts_error_field(err, TS_ERR_INVALID_VALUE, field,
                                  "%s must be a whole number of bytes: %s", field, given);
        if (integer_value(v, &n) != 0)
            n = d < 0 ? INT64_MIN : INT64_MAX;
        if (n > TS_BYTESIZE_MAX)
            return ts_error_field(err, TS_ERR_INVALID_VALUE, field,
                                  "%s must be at most %lld bytes: %s", field,
                                  (long long)TS_BYTESIZE_MAX, given);
    } else {
        return wrong_type(err, field, "a size string or an integer of bytes");
    }
    if (n < min) {
        if (min == 1)
            return ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s must be greater than 0: %s",
                                  field, given);
        return ts_error_field(err, TS_ERR_INVALID_VALUE, field,
                              "%s must be at least %lld bytes: %s", field, (long long)min, given);
    }
    *out = n;
    return TS_OK;
}

enum ts_err ts_wire_dec_duration(const json_t *obj, const char *path, const char *key,
                                 bool *present, int64_t *out, struct ts_error *err)
{
    char field[TS_WIRE_PATH_MAX];
    ts_wire_dec_path(field, sizeof(field), path, key);
    json_t *v = ts_wire_dec_member(obj, key);
    if (present != NULL)
        *present = v != NULL;
    if (v == NULL)
        return TS_OK;
    if (json_is_string(v)) {
        if (ts_duration_parse(json_string_value(v), out) == 0)
            return TS_OK;
        char given[QUOTE_MAX + 16];
        ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s is not a duration: %s", field,
                       ts_wire_dec_quote(json_string_value(v), given, sizeof(given)));
        ts_error_hint(err, "durations are written like 90s, 1h30m, 8h or 2d, at most 10 years");
        return TS_ERR_INVALID_VALUE;
    }
    if (!json_is_number(v))
        return wrong_type(err, field, "a duration string or an integer of seconds");
    return ts_wire_dec_integer(obj, path, key, 0, TS_DURATION_MAX_SECONDS, present, out, err);
}

const char *ts_wire_dec_dump(const json_t *v, struct ts_arena *a)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    if (text == NULL)
        return NULL;
    const char *copy = ts_arena_strdup(a, text);
    free(text);
    return copy;
}
