/*
 * args.c - reading a command line against option tables (see args.h).
 */
#include "api/cli/args.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/units.h"

static const struct ts_opt help_opt = {"help", 'h', NULL, "show this help", false};

static const struct ts_opt *find_long(const struct ts_opt *t1, const struct ts_opt *t2,
                                      const char *name, size_t len)
{
    const struct ts_opt *tables[] = {t1, t2};
    for (size_t k = 0; k < 2; k++)
        for (const struct ts_opt *o = tables[k]; o && o->name; o++)
            if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
                return o;
    if (len == 4 && strncmp(name, "help", 4) == 0)
        return &help_opt;
    return NULL;
}

size_t ts_args_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return SIZE_MAX;
    unsigned char d[65][65]; /* optimal string alignment: a swap is one edit */
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (unsigned char)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (unsigned char)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            unsigned v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1u < v)
                v = d[i - 1][j] + 1u;
            if (d[i][j - 1] + 1u < v)
                v = d[i][j - 1] + 1u;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1u < v)
                v = d[i - 2][j - 2] + 1u;
            d[i][j] = (unsigned char)v;
        }
    return d[la][lb];
}

const char *ts_args_closest(const char *word, const char *const *cands, size_t n)
{
    size_t len = strlen(word), limit = len < 5 ? 1 : len < 9 ? 2 : 3;
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        size_t d = cands[i] ? ts_args_distance(word, cands[i]) : SIZE_MAX;
        if (d < best_d) {
            best = cands[i];
            best_d = d;
        }
    }
    return best_d <= limit ? best : NULL;
}

/* The long option closest to name (len bytes), or NULL. */
static const char *closest_long(const struct ts_opt *t1, const struct ts_opt *t2, const char *name,
                                size_t len)
{
    const char *cands[128];
    size_t n = 0;
    const struct ts_opt *tables[] = {t1, t2};
    for (size_t k = 0; k < 2; k++)
        for (const struct ts_opt *o = tables[k]; o && o->name && n < 127; o++)
            cands[n++] = o->name;
    cands[n++] = "help";
    char word[65];
    if (len >= sizeof(word))
        return NULL;
    memcpy(word, name, len);
    word[len] = '\0';
    return ts_args_closest(word, cands, n);
}

static const struct ts_opt *find_short(const struct ts_opt *t1, const struct ts_opt *t2, char c)
{
    const struct ts_opt *tables[] = {t1, t2};
    for (size_t k = 0; k < 2; k++)
        for (const struct ts_opt *o = tables[k]; o && o->name; o++)
            if (o->short_name == c)
                return o;
    return c == 'h' ? &help_opt : NULL;
}

static void add(struct ts_args *a, const struct ts_opt *o, const char *value)
{
    if (o == &help_opt) {
        a->help = true;
        return;
    }
    if (!o->repeat) /* the last value wins: drop an earlier one */
        for (size_t i = 0; i < a->nitems; i++)
            if (a->items[i].opt == o)
                a->items[i].opt = NULL;
    a->items[a->nitems].opt = o;
    a->items[a->nitems].value = value;
    a->nitems++;
}

enum ts_err ts_args_parse(struct ts_args *a, const struct ts_opt *t1, const struct ts_opt *t2,
                          int argc, char **argv, struct ts_error *err)
{
    memset(a, 0, sizeof(*a));
    size_t cap = argc > 0 ? (size_t)argc : 1;
    a->items = calloc(cap, sizeof(*a->items));
    a->pos = calloc(cap, sizeof(*a->pos));
    if (a->items == NULL || a->pos == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    enum ts_err e = TS_OK;
    for (int i = 0; i < argc; i++) {
        char *s = argv[i];
        if (strcmp(s, "--") == 0) {
            a->rest = argv + i + 1;
            a->nrest = argc - i - 1;
            break;
        }
        if (s[0] != '-' || s[1] == '\0') {
            a->pos[a->npos++] = s;
            continue;
        }
        if (s[1] == '-') {
            const char *name = s + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            const struct ts_opt *o = find_long(t1, t2, name, len);
            if (o == NULL) {
                const char *near = closest_long(t1, t2, name, len);
                if (e == TS_OK && near)
                    e = ts_error_set(err, TS_ERR_BAD_PARAMETER,
                                     "unknown option --%.*s; did you mean --%s?", (int)len, name,
                                     near);
                else if (e == TS_OK)
                    e = ts_error_set(err, TS_ERR_BAD_PARAMETER, "unknown option --%.*s", (int)len,
                                     name);
                continue;
            }
            if (o->metavar == NULL) {
                if (eq && e == TS_OK)
                    e = ts_error_set(err, TS_ERR_BAD_PARAMETER, "option --%s takes no value",
                                     o->name);
                add(a, o, "");
            } else if (eq) {
                add(a, o, eq + 1);
            } else if (i + 1 < argc) {
                add(a, o, argv[++i]);
            } else if (e == TS_OK) {
                e = ts_error_set(err, TS_ERR_BAD_PARAMETER, "option --%s needs a value (%s)",
                                 o->name, o->metavar);
            }
            continue;
        }
        /* short options: -Af, -pNAME, -p NAME */
        for (const char *p = s + 1; *p; p++) {
            const struct ts_opt *o = find_short(t1, t2, *p);
            if (o == NULL) {
                if (e == TS_OK)
                    e = ts_error_set(err, TS_ERR_BAD_PARAMETER, "unknown option -%c", *p);
                break;
            }
            if (o->metavar == NULL) {
                add(a, o, "");
                continue;
            }
            if (p[1] != '\0')
                add(a, o, p + 1);
            else if (i + 1 < argc)
                add(a, o, argv[++i]);
            else if (e == TS_OK)
                e = ts_error_set(err, TS_ERR_BAD_PARAMETER, "option -%c needs a value (%s)", *p,
                                 o->metavar);
            break;
        }
    }
    return e;
}

void ts_args_free(struct ts_args *a)
{
    if (a == NULL)
        return;
    free(a->items);
    free(a->pos);
    a->items = NULL;
    a->pos = NULL;
}

const char *ts_args_get(const struct ts_args *a, const char *name)
{
    for (size_t i = a->nitems; i-- > 0;)
        if (a->items[i].opt && strcmp(a->items[i].opt->name, name) == 0)
            return a->items[i].value;
    return NULL;
}

bool ts_args_has(const struct ts_args *a, const char *name)
{
    return ts_args_get(a, name) != NULL;
}

size_t ts_args_all(const struct ts_args *a, const char *name, const char **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < a->nitems; i++)
        if (a->items[i].opt && strcmp(a->items[i].opt->name, name) == 0) {
            if (n < max)
                out[n] = a->items[i].value;
            n++;
        }
    return n;
}

int ts_args_int(const struct ts_args *a, const char *name, long long min, long long max,
                long long *out, struct ts_error *err)
{
    const char *s = ts_args_get(a, name);
    if (s == NULL)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || errno != 0 || v < min || v > max) {
        ts_error_set(err, TS_ERR_BAD_PARAMETER, "--%s must be an integer from %lld to %lld: \"%s\"",
                     name, min, max, s);
        return -1;
    }
    *out = v;
    return 0;
}

int ts_args_double(const struct ts_args *a, const char *name, double min, double max, double *out,
                   struct ts_error *err)
{
    const char *s = ts_args_get(a, name);
    if (s == NULL)
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (s[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v < min || v > max) {
        ts_error_set(err, TS_ERR_BAD_PARAMETER, "--%s must be a number from %g to %g: \"%s\"", name,
                     min, max, s);
        return -1;
    }
    *out = v;
    return 0;
}

int ts_args_bytes(const struct ts_args *a, const char *name, int64_t *out, struct ts_error *err)
{
    const char *s = ts_args_get(a, name);
    if (s == NULL)
        return 0;
    size_t n = strlen(s);
    if (n > 0 && s[n - 1] >= '0' && s[n - 1] <= '9') {
        /* "20" is 20 bytes to the API, which is never what was meant */
        ts_error_set(err, TS_ERR_BAD_PARAMETER,
                     "--%s %s: give a unit, e.g. %sGiB (units: B, KiB, MiB, GiB, TiB, K, M, G, "
                     "T; KB, MB, GB, TB are powers of 1000)",
                     name, s, s);
        return -1;
    }
    if (ts_bytesize_parse(s, out) != 0) {
        ts_error_set(err, TS_ERR_BAD_PARAMETER, "--%s must be a size such as 20G or 512MiB: \"%s\"",
                     name, s);
        return -1;
    }
    return 0;
}
