/*
 * units.c - names, byte sizes and durations as people write them.
 *
 * Byte sizes are computed in 128-bit integers, so "1.5GiB" is exact and a
 * huge number cannot wrap around before the 2^62 cap is checked.
 */
#include "api/units.h"

#include <stdio.h>
#include <string.h>

#include "api/array.h"

#ifndef __SIZEOF_INT128__
#error "api/units.c needs a compiler with unsigned __int128 (gcc or clang, 64-bit)"
#endif

typedef unsigned __int128 u128;

#define NAME_LEN_MAX 63 /* TS_NAME_MAX in api/wire.h */

bool ts_name_valid(const char *s)
{
    if (s == NULL)
        return false;
    size_t i = 0;
    for (; s[i] != '\0'; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (i > 0 && c == '-');
        if (!ok || i >= NAME_LEN_MAX)
            return false;
    }
    return i > 0;
}

/* ---- byte sizes ---------------------------------------------------------- */

static const struct {
    const char *name;
    uint64_t mult;
} size_units[] = {
    {"", 1},
    {"B", 1},
    {"KiB", 1ULL << 10},
    {"MiB", 1ULL << 20},
    {"GiB", 1ULL << 30},
    {"TiB", 1ULL << 40},
    {"K", 1ULL << 10},
    {"M", 1ULL << 20},
    {"G", 1ULL << 30},
    {"T", 1ULL << 40},
    {"KB", 1000ULL},
    {"MB", 1000000ULL},
    {"GB", 1000000000ULL},
    {"TB", 1000000000000ULL},
};

#define FRACTION_DIGITS_MAX 18

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int ts_bytesize_parse(const char *s, int64_t *out)
{
    if (s == NULL || !is_digit(*s))
        return -1;
    const char *p = s;
    uint64_t whole = 0;
    for (; is_digit(*p); p++) {
        if (whole > (uint64_t)TS_BYTESIZE_MAX / 10)
            return -1;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    uint64_t frac = 0, scale = 1;
    if (*p == '.') {
        p++;
        if (!is_digit(*p))
            return -1;
        for (int n = 0; is_digit(*p); p++, n++) {
            if (n == FRACTION_DIGITS_MAX)
                return -1;
            frac = frac * 10 + (uint64_t)(*p - '0');
            scale *= 10;
        }
    }
    uint64_t mult = 0;
    for (size_t i = 0; i < TS_ARRAY_LEN(size_units); i++) {
        if (strcmp(p, size_units[i].name) == 0) {
            mult = size_units[i].mult;
            break;
        }
    }
    if (mult == 0)
        return -1;
    u128 part = (u128)frac * mult;
    u128 total = (u128)whole * mult + part / scale;
    if (part % scale != 0) {
        if (mult == 1)
            return -1; /* a fraction of a byte */
        total += 1;    /* round up to a whole byte, as Kubernetes does */
    }
    if (total > (u128)TS_BYTESIZE_MAX)
        return -1;
    *out = (int64_t)total;
    return 0;
}

char *ts_bytesize_format(int64_t bytes, char *buf, size_t len)
{
    static const struct {
        const char *name;
        int shift;
    } units[] = {{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}};
    if (bytes > 0) {
        for (size_t i = 0; i < TS_ARRAY_LEN(units); i++) {
            int64_t u = (int64_t)1 << units[i].shift;
            if (bytes % u == 0) {
                snprintf(buf, len, "%lld%s", (long long)(bytes / u), units[i].name);
                return buf;
            }
        }
    }
    snprintf(buf, len, "%lldB", (long long)bytes);
    return buf;
}

char *ts_gpus_format(double g, char *buf, size_t len)
{
    snprintf(buf, len, "%.2f", g + 0.0);
    char *dot = strchr(buf, '.');
    if (dot != NULL) {
        char *e = buf + strlen(buf) - 1;
        while (e > dot && *e == '0')
            *e-- = '\0';
        if (e == dot)
            *e = '\0';
    }
    if (strcmp(buf, "-0") == 0)
        snprintf(buf, len, "0");
    return buf;
}

char *ts_bytesize_human(int64_t b, char *buf, size_t len)
{
    const int64_t gib = INT64_C(1) << 30, mib = INT64_C(1) << 20;
    if (b >= gib && b % gib == 0)
        snprintf(buf, len, "%lld GiB", (long long)(b / gib));
    else if (b >= gib)
        snprintf(buf, len, "%.1f GiB", (double)b / (double)gib);
    else if (b >= mib && b % mib == 0)
        snprintf(buf, len, "%lld MiB", (long long)(b / mib));
    else
        snprintf(buf, len, "%lld bytes", (long long)b);
    return buf;
}

/* ---- durations ------------------------------------------------------------- */

static const struct {
    char unit;
    int64_t seconds;
} duration_units[] = {{'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}};

#define NDURATION_UNITS (TS_ARRAY_LEN(duration_units))

/* Digits at *p as a number no larger than TS_DURATION_MAX_SECONDS; advances
 * *p. -1 when there are none or the number is larger. */
static int64_t duration_number(const char **p)
{
    const char *q = *p;
    if (!is_digit(*q))
        return -1;
    int64_t n = 0;
    for (; is_digit(*q); q++) {
        n = n * 10 + (*q - '0');
        if (n > TS_DURATION_MAX_SECONDS)
            return -1;
    }
    *p = q;
    return n;
}

int ts_duration_parse(const char *s, int64_t *seconds)
{
    if (s == NULL)
        return -1;
    const char *p = s;
    int64_t n = duration_number(&p);
    if (n < 0)
        return -1;
    if (*p == '\0') {
        *seconds = n;
        return 0;
    }
    int64_t total = 0;
    size_t next = 0; /* units must come largest first, each at most once */
    for (;;) {
        size_t u = next;
        while (u < NDURATION_UNITS && duration_units[u].unit != *p)
            u++;
        if (u == NDURATION_UNITS)
            return -1;
        if (n > (TS_DURATION_MAX_SECONDS - total) / duration_units[u].seconds)
            return -1;
        total += n * duration_units[u].seconds;
        next = u + 1;
        p++;
        if (*p == '\0')
            break;
        n = duration_number(&p);
        if (n < 0)
            return -1;
    }
    *seconds = total;
    return 0;
}

char *ts_duration_format(int64_t seconds, char *buf, size_t len)
{
    if (seconds <= 0) {
        snprintf(buf, len, "%llds", (long long)seconds);
        return buf;
    }
    size_t used = 0;
    if (len > 0)
        buf[0] = '\0';
    for (size_t i = 0; i < NDURATION_UNITS; i++) {
        int64_t n = seconds / duration_units[i].seconds;
        seconds %= duration_units[i].seconds;
        if (n == 0 || used >= len)
            continue;
        int w = snprintf(buf + used, len - used, "%lld%c", (long long)n, duration_units[i].unit);
        if (w > 0)
            used += (size_t)w;
    }
    return buf;
}
