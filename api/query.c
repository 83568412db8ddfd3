/*
 * query.c - the one decoder of URL query strings (see query.h): a table per
 * route, unknown names, repeats and bad values refused with the name.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/query.h"
#include "api/units.h"

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

int ts_query_time_parse(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, sec;
    if (strlen(s) < 20 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) || s[7] != '-' ||
        digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || digits(s + 11, 2, &h) ||
        s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' || digits(s + 17, 2, &sec))
        return -1;
    const char *p = s + 19;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) || oh > 23 || om > 59)
            return -1;
        off = (int64_t)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -1;
    }
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 ||
        sec > 60)
        return -1;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (mo == 2 && d == 29 && !leap)
        return -1;
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec > 59 ? 59 : sec};
    *out = (int64_t)timegm(&tm) - off;
    return 0;
}

/* A decoded value, before it is written to the caller's struct. */
union value {
    const char *s;
    long long i;
    int e;
    bool b;
    int64_t t;
};

static enum ts_err bad_value(struct ts_error *err, const char *name, const char *value,
                             const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* "<name> must ...: "<value>"" */
static enum ts_err bad_value(struct ts_error *err, const char *name, const char *value,
                             const char *fmt, ...)
{
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return ts_error_field(err, TS_ERR_BAD_PARAMETER, name, "%s %s: \"%s\"", name, what, value);
}

/* s as a whole decimal integer in [min, max]: 0, or -1. */
static int int_in(const char *s, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if ((s[0] != '-' && !isdigit((unsigned char)s[0])) || *end != '\0' || errno != 0 || v < min ||
        v > max)
        return -1;
    *out = v;
    return 0;
}

/* "a, b or c" of a NULL-terminated list, into buf. */
static const char *names_list(const char *const *names, char *buf, size_t len)
{
    size_t n = 0, o = 0;
    while (names[n] != NULL)
        n++;
    buf[0] = '\0';
    for (size_t i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s",
                              i == 0       ? ""
                              : i + 1 == n ? " or "
                                           : ", ",
                              names[i]);
    return buf;
}

static enum ts_err decode_enum(const struct ts_query_param *p, const char *s, union value *v,
                               struct ts_error *err)
{
    for (int i = 0; p->names[i] != NULL; i++)
        if (strcmp(s, p->names[i]) == 0) {
            v->e = i;
            return TS_OK;
        }
    char list[256];
    return bad_value(err, p->name, s, "must be %s", names_list(p->names, list, sizeof(list)));
}

static enum ts_err decode_time(const struct ts_query_param *p, const char *s, int64_t now,
                               union value *v, struct ts_error *err)
{
    int64_t secs;
    if (ts_query_time_parse(s, &v->t) == 0)
        return TS_OK;
    if (p->ago && ts_duration_parse(s, &secs) == 0) {
        v->t = now - secs;
        return TS_OK;
    }
    enum ts_err e = bad_value(err, p->name, s, "must be an RFC 3339 time%s",
                              p->ago ? " or a duration before now" : "");
    ts_error_hint(err, "e.g. 2024-05-01T12:00:00Z%s", p->ago ? ", or 1h" : "");
    return e;
}

static enum ts_err decode_duration(const struct ts_query_param *p, const char *s, union value *v,
                                   struct ts_error *err)
{
    int64_t secs;
    if (ts_duration_parse(s, &secs) == 0 && secs >= p->min && secs <= p->max) {
        v->t = secs;
        return TS_OK;
    }
    enum ts_err e =
        bad_value(err, p->name, s, "must be a duration between %llds and %llds", p->min, p->max);
    ts_error_hint(err, "e.g. 10s, 5m, 1h");
    return e;
}

/* One value of parameter p into *v. */
static enum ts_err decode_one(const struct ts_query_param *p, const char *s, int64_t now,
                              union value *v, struct ts_error *err)
{
    long long i;
    size_t plen;
    switch (p->type) {
    case TS_QUERY_STRING:
        v->s = s;
        return TS_OK;
    case TS_QUERY_INT:
        if (int_in(s, p->min, p->max, &v->i) == 0)
            return TS_OK;
        return bad_value(err, p->name, s, "must be an integer between %lld and %lld", p->min,
                         p->max);
    case TS_QUERY_ENUM:
        return decode_enum(p, s, v, err);
    case TS_QUERY_BOOL:
        if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
            v->b = s[0] == 't';
            return TS_OK;
        }
        return bad_value(err, p->name, s, "must be true or false");
    case TS_QUERY_TIME:
        return decode_time(p, s, now, v, err);
    case TS_QUERY_DURATION:
        return decode_duration(p, s, v, err);
    case TS_QUERY_CURSOR:
        plen = strlen(p->prefix);
        if (strncmp(s, p->prefix, plen) == 0 && int_in(s + plen, p->min, p->max, &i) == 0) {
            v->t = i;
            return TS_OK;
        }
        return ts_error_field(err, TS_ERR_BAD_PARAMETER, p->name,
                              "invalid %s: \"%s\"; pass on the next_cursor of an answer", p->name,
                              s);
    }
    return ts_error_set(err, TS_ERR_INTERNAL, "query parameter %s has no type", p->name);
}

static void store(const struct ts_query_param *p, const union value *v, void *out)
{
    char *at = (char *)out + p->offset;
    switch (p->type) {
    case TS_QUERY_STRING:
        memcpy(at, &v->s, sizeof(v->s));
        break;
    case TS_QUERY_INT:
        memcpy(at, &v->i, sizeof(v->i));
        break;
    case TS_QUERY_ENUM:
        memcpy(at, &v->e, sizeof(v->e));
        break;
    case TS_QUERY_BOOL:
        memcpy(at, &v->b, sizeof(v->b));
        break;
    case TS_QUERY_TIME:
    case TS_QUERY_DURATION:
    case TS_QUERY_CURSOR:
        memcpy(at, &v->t, sizeof(v->t));
        break;
    }
}

static enum ts_err unknown(const struct ts_query_param *params, size_t nparams, const char *name,
                           struct ts_error *err)
{
    enum ts_err e =
        ts_error_field(err, TS_ERR_BAD_PARAMETER, name, "unknown query parameter \"%s\"", name);
    char list[256];
    size_t o = 0;
    list[0] = '\0';
    for (size_t i = 0; i < nparams && o < sizeof(list); i++)
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "", params[i].name);
    if (nparams == 0)
        ts_error_hint(err, "this request takes no query parameters");
    else
        ts_error_hint(err, "this request takes %s", list);
    return e;
}

enum ts_err ts_query_decode(const struct ts_query_param *params, size_t nparams,
                            const struct ts_query_pair *pairs, size_t npairs, int64_t now,
                            void *out, uint64_t *given, struct ts_error *err)
{
    union value vals[TS_QUERY_MAX_PARAMS];
    uint64_t seen = 0;
    if (nparams > TS_QUERY_MAX_PARAMS)
        return ts_error_set(err, TS_ERR_INTERNAL, "a query table of %zu parameters; at most %d",
                            nparams, TS_QUERY_MAX_PARAMS);
    for (size_t k = 0; k < npairs; k++) {
        const struct ts_query_pair *q = &pairs[k];
        size_t i = 0;
        while (i < nparams && strcmp(params[i].name, q->name) != 0)
            i++;
        if (i == nparams)
            return unknown(params, nparams, q->name, err);
        if (seen & (UINT64_C(1) << i))
            return ts_error_field(err, TS_ERR_BAD_PARAMETER, q->name,
                                  "query parameter \"%s\" is given more than once", q->name);
        if (q->value == NULL)
            return ts_error_field(err, TS_ERR_BAD_PARAMETER, q->name,
                                  "query parameter \"%s\" has no value: write %s=VALUE", q->name,
                                  q->name);
        enum ts_err e = decode_one(&params[i], q->value, now, &vals[i], err);
        if (e != TS_OK)
            return e;
        seen |= UINT64_C(1) << i;
    }
    for (size_t i = 0; i < nparams; i++) {
        if (!params[i].required || (seen & (UINT64_C(1) << i)))
            continue;
        enum ts_err e = ts_error_field(err, TS_ERR_BAD_PARAMETER, params[i].name, "%s is required",
                                       params[i].name);
        if (params[i].type == TS_QUERY_ENUM) { /* the words it takes */
            char list[256];
            ts_error_hint(err, "one of %s", names_list(params[i].names, list, sizeof(list)));
        }
        return e;
    }
    for (size_t i = 0; i < nparams; i++)
        if (seen & (UINT64_C(1) << i))
            store(&params[i], &vals[i], out);
    if (given != NULL)
        *given = seen;
    return TS_OK;
}
