/*
 * query.h - the one decoder of URL query strings.
 *
 * Each route that takes query parameters describes them in a table: name,
 * type (a string, an integer in a range, one of a list of names, true or
 * false, a time, a duration in a range, a cursor), whether it is required,
 * and where in the route's own struct the value goes (offsetof). The
 * decoder takes the request's name=value pairs as the HTTP layer hands
 * them over and, strict like the JSON decoders, refuses with
 * TS_ERR_BAD_PARAMETER (400), err->field the parameter's name:
 *   - a name the table does not hold ("unknown query parameter "x"", the
 *     hint listing the ones the route takes);
 *   - a name given twice, or without '=' (no value);
 *   - a required parameter that is absent (an enum's hint: the words it
 *     takes);
 *   - a value of the wrong form or out of range ("limit must be an integer
 *     between 1 and 1000: "0"", "kind must be train, interactive or
 *     inference: "batch"": an enum names the words it takes).
 * On an error nothing has been written to out. A parameter that is absent
 * leaves its field as the caller set it (its default).
 *
 * Every string is borrowed: values stored as strings point into the pairs.
 */
#ifndef TS_API_QUERY_H
#define TS_API_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/err.h"

enum ts_query_type {
    TS_QUERY_STRING,   /* const char * (borrowed; may be "") */
    TS_QUERY_INT,      /* long long, in [min, max] */
    TS_QUERY_ENUM,     /* int: the index of the value in names */
    TS_QUERY_BOOL,     /* bool: "true" or "false" */
    TS_QUERY_TIME,     /* int64_t unix seconds: RFC 3339 (a fraction is dropped);
                          with ago also a duration before now ("1h") */
    TS_QUERY_DURATION, /* int64_t seconds ("90s", "1h30m", "30"), in [min, max] */
    TS_QUERY_CURSOR,   /* int64_t: prefix, then an integer in [min, max] ("j42") */
};

struct ts_query_param {
    const char *name;
    enum ts_query_type type;
    size_t offset; /* of the value in the route's struct */
    bool required;
    long long min, max;       /* INT, DURATION, CURSOR */
    const char *const *names; /* ENUM: the accepted values, NULL-terminated */
    const char *prefix;       /* CURSOR */
    bool ago;                 /* TIME: a duration before now is accepted too */
};

/* One name=value of a query string; value NULL when the name came without
 * '='. */
struct ts_query_pair {
    const char *name;
    const char *value;
};

#define TS_QUERY_MAX_PARAMS 32

/* Decode pairs[0..npairs) by params[0..nparams) (at most
 * TS_QUERY_MAX_PARAMS) into out; now is the clock for times given as a
 * duration before now. *given (may be NULL) gets bit i set for each
 * params[i] present. */
enum ts_err ts_query_decode(const struct ts_query_param *params, size_t nparams,
                            const struct ts_query_pair *pairs, size_t npairs, int64_t now,
                            void *out, uint64_t *given, struct ts_error *err);

/* RFC 3339 (2024-05-01T12:00:00Z, an optional fraction, a numeric offset)
 * into unix seconds, the fraction dropped: 0, or -1. */
int ts_query_time_parse(const char *s, int64_t *out);

#endif /* TS_API_QUERY_H */
