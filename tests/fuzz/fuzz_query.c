/*
 * fuzz_query.c - the query-string decoder (api/query.h) over a table with
 * every type: the input is split as a query string (pairs on '&', a name
 * and its value on the first '='; a name without '=' has no value). What
 * decodes is within the table's ranges and every present field was given;
 * a refusal is bad_parameter naming a parameter that was given (or the
 * required one) and writes nothing.
 */
#include "tests/fuzz/fuzz.h"

#include <stdbool.h>
#include <stddef.h>

#include "api/array.h"
#include "api/query.h"

struct fq {
    const char *s;
    long long i;
    int e;
    bool b;
    int64_t t, ago, d, c;
};

static const char *const names[] = {"cluster", "project", "job", NULL};

static const struct ts_query_param params[] = {
    {.name = "s", .type = TS_QUERY_STRING, .offset = offsetof(struct fq, s), .required = true},
    {.name = "i", .type = TS_QUERY_INT, .offset = offsetof(struct fq, i), .min = -5, .max = 1000},
    {.name = "e", .type = TS_QUERY_ENUM, .offset = offsetof(struct fq, e), .names = names},
    {.name = "b", .type = TS_QUERY_BOOL, .offset = offsetof(struct fq, b)},
    {.name = "t", .type = TS_QUERY_TIME, .offset = offsetof(struct fq, t)},
    {.name = "ago", .type = TS_QUERY_TIME, .offset = offsetof(struct fq, ago), .ago = true},
    {.name = "d", .type = TS_QUERY_DURATION, .offset = offsetof(struct fq, d), .min = 1, .max = 60},
    {.name = "c",
     .type = TS_QUERY_CURSOR,
     .offset = offsetof(struct fq, c),
     .prefix = "j",
     .min = 1,
     .max = INT64_MAX},
};

#define MAXPAIRS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1024)
        return 0;
    char text[1025];
    memcpy(text, data, size);
    text[size] = '\0';
    struct ts_query_pair pairs[MAXPAIRS];
    size_t n = 0;
    for (char *p = text, *next; p != NULL && n < MAXPAIRS; p = next) {
        next = strchr(p, '&');
        if (next != NULL)
            *next++ = '\0';
        char *eq = strchr(p, '=');
        if (eq != NULL)
            *eq++ = '\0';
        pairs[n++] = (struct ts_query_pair){p, eq};
    }
    const struct fq before = {.i = -99, .e = -1, .t = -1, .ago = -1, .d = -1, .c = -1};
    struct fq out = before;
    uint64_t given = 0;
    struct ts_error err;
    ts_error_clear(&err);
    enum ts_err e =
        ts_query_decode(params, TS_ARRAY_LEN(params), pairs, n, 1714564800, &out, &given, &err);
    if (e != TS_OK) {
        fuzz_check_error(e, &err);
        FUZZ_CHECK(e == TS_ERR_BAD_PARAMETER);
        FUZZ_CHECK(memcmp(&out, &before, sizeof(out)) == 0);
        bool named = strcmp(err.field, "s") == 0;
        for (size_t k = 0; k < n && !named; k++)
            named = strncmp(err.field, pairs[k].name, sizeof(err.field) - 1) == 0;
        FUZZ_CHECK(named);
        return 0;
    }
    FUZZ_CHECK(given & 1); /* s is required */
    FUZZ_CHECK(out.s != NULL);
    FUZZ_CHECK(!(given & 2) ? out.i == -99 : out.i >= -5 && out.i <= 1000);
    FUZZ_CHECK(!(given & 4) ? out.e == -1 : out.e >= 0 && out.e < 3);
    FUZZ_CHECK(!(given & 64) ? out.d == -1 : out.d >= 1 && out.d <= 60);
    FUZZ_CHECK(!(given & 128) ? out.c == -1 : out.c >= 1);
    for (size_t k = 0; k < n; k++) { /* each name given once, each known */
        size_t hits = 0;
        for (size_t j = 0; j < n; j++)
            hits += strcmp(pairs[k].name, pairs[j].name) == 0;
        FUZZ_CHECK(hits == 1 && pairs[k].value != NULL);
    }
    return 0;
}
