/*
 * out.c - formatting values for people (see out.h).
 */
#include "api/cli/out.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/array.h"
#include "api/units.h"
#include "api/wire.h"

int ts_out_format_parse(const char *s)
{
    if (s == NULL || strcmp(s, "table") == 0)
        return TS_OUT_TABLE;
    if (strcmp(s, "wide") == 0 || (strncmp(s, "columns=", 8) == 0 && s[8] != '\0'))
        return TS_OUT_WIDE;
    if (strcmp(s, "json") == 0)
        return TS_OUT_JSON;
    return -1;
}

/* At most 2 decimals without trailing zeros ("2", "2.5", "1.96"); a value
 * that would read 0 keeps 1 significant digit ("0.001"). */
static char *num(double v, char *buf, size_t len)
{
    if (v != 0 && fabs(v) < 0.005) {
        snprintf(buf, len, "%.1g", v);
        return buf;
    }
    snprintf(buf, len, "%.2f", v);
    char *dot = strchr(buf, '.');
    if (dot) {
        char *end = buf + strlen(buf);
        while (end > dot + 1 && end[-1] == '0')
            *--end = '\0';
        if (end == dot + 1)
            *dot = '\0';
    }
    if (strcmp(buf, "-0") == 0)
        snprintf(buf, len, "0");
    return buf;
}

char *ts_out_num(const json_t *v, char *buf, size_t len)
{
    if (!json_is_number(v)) {
        snprintf(buf, len, "-");
        return buf;
    }
    return num(json_number_value(v), buf, len);
}

char *ts_out_bytes(const json_t *v, char *buf, size_t len)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    int64_t b = json_integer_value(v);
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    size_t u = 0;
    double x = (double)b;
    while (x >= 1024 && u + 1 < TS_ARRAY_LEN(units)) {
        x /= 1024;
        u++;
    }
    char n[32];
    snprintf(buf, len, "%s%s", num(x, n, sizeof(n)), units[u]);
    return buf;
}

char *ts_out_gpu(const json_t *gpu, char *buf, size_t len)
{
    char a[32], b[32], dev[24] = "";
    json_int_t devices = json_integer_value(json_object_get(gpu, "devices"));
    if (devices > 1)
        snprintf(dev, sizeof(dev), "%" JSON_INTEGER_FORMAT "x", devices);
    const json_t *count = json_object_get(gpu, "count");
    const json_t *portion = json_object_get(gpu, "portion");
    const json_t *memory = json_object_get(gpu, "memory_bytes");
    if (json_is_integer(count)) {
        snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(count));
    } else if (json_is_number(portion)) {
        const json_t *lim = json_object_get(gpu, "portion_limit");
        bool burst = json_is_number(lim) && json_number_value(lim) > json_number_value(portion);
        snprintf(buf, len, "%s%s%s%s", dev, ts_out_num(portion, a, sizeof(a)), burst ? "-" : "",
                 burst ? ts_out_num(lim, b, sizeof(b)) : "");
    } else if (json_is_integer(memory)) {
        const json_t *lim = json_object_get(gpu, "memory_limit_bytes");
        bool burst = json_is_integer(lim) && json_integer_value(lim) > json_integer_value(memory);
        snprintf(buf, len, "%s%s%s%s", dev, ts_out_bytes(memory, a, sizeof(a)), burst ? "-" : "",
                 burst ? ts_out_bytes(lim, b, sizeof(b)) : "");
    } else {
        snprintf(buf, len, "-");
    }
    return buf;
}

int64_t ts_out_time_parse(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    int used = 0;
    if (s == NULL || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                            &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm);
}

char *ts_out_age(const json_t *at, char *buf, size_t len)
{
    int64_t t = ts_out_time_parse(json_string_value(at));
    if (t < 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    int64_t d = (int64_t)time(NULL) - t;
    if (d < 0)
        d = 0;
    if (d < 120)
        snprintf(buf, len, "%" PRId64 "s", d);
    else if (d < 2 * 3600)
        snprintf(buf, len, "%" PRId64 "m", d / 60);
    else if (d < 2 * 86400)
        snprintf(buf, len, "%" PRId64 "h", d / 3600);
    else
        snprintf(buf, len, "%" PRId64 "d", d / 86400);
    return buf;
}

char *ts_out_time(const json_t *at, char *buf, size_t len)
{
    int64_t t = ts_out_time_parse(json_string_value(at));
    struct tm tm;
    time_t tt = (time_t)t;
    if (t < 0 || localtime_r(&tt, &tm) == NULL || strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(buf, len, "-");
    return buf;
}

char *ts_out_member(const json_t *o, const char *key, char *buf, size_t len)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_string(v)) {
        snprintf(buf, len, "%s", json_string_value(v));
    } else if (json_is_number(v)) {
        ts_out_num(v, buf, len);
    } else if (json_is_true(v) || json_is_false(v)) {
        snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
    } else if (v == NULL || json_is_null(v)) {
        snprintf(buf, len, "-");
    } else {
        char *s = ts_wire_dumps(v);
        snprintf(buf, len, "%s", s ? s : "-");
        free(s);
    }
    return buf;
}

void ts_out_raw(const struct ts_response *r)
{
    if (r->body.len > 0)
        fwrite(r->body.data, 1, r->body.len, stdout);
    if (r->body.len == 0 || r->body.data[r->body.len - 1] != '\n')
        fputc('\n', stdout);
}

void ts_out_json(const json_t *v)
{
    char *s = ts_wire_dumps(v);
    if (s != NULL)
        printf("%s\n", s);
    free(s);
}

void ts_out_kv(const char *key, const char *fmt, ...)
{
    char k[64];
    snprintf(k, sizeof(k), "%s:", key);
    printf("%-18s", k);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}
