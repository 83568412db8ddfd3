/*
 * test_query.c - the query-string decoder (api/query.h): each type, the
 * refusals (unknown, repeated, valueless, required, wrong form, out of
 * range), each naming its parameter, and nothing written on an error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/array.h"
#include "api/query.h"

#define NOW 1714564800 /* 2024-05-01T12:00:00Z */

struct route {
    const char *project;
    long long limit;
    int by;
    bool follow;
    int64_t since, wait, cursor;
};

static const char *const scopes[] = {"cluster", "project", "job", NULL};

static const struct ts_query_param params[] = {
    {.name = "project", .type = TS_QUERY_STRING, .offset = offsetof(struct route, project)},
    {.name = "limit",
     .type = TS_QUERY_INT,
     .offset = offsetof(struct route, limit),
     .min = 1,
     .max = 1000},
    {.name = "by", .type = TS_QUERY_ENUM, .offset = offsetof(struct route, by), .names = scopes},
    {.name = "follow", .type = TS_QUERY_BOOL, .offset = offsetof(struct route, follow)},
    {.name = "since", .type = TS_QUERY_TIME, .offset = offsetof(struct route, since), .ago = true},
    {.name = "wait",
     .type = TS_QUERY_DURATION,
     .offset = offsetof(struct route, wait),
     .min = 0,
     .max = 60},
    {.name = "cursor",
     .type = TS_QUERY_CURSOR,
     .offset = offsetof(struct route, cursor),
     .prefix = "j",
     .min = 0,
     .max = INT64_MAX},
};

static const struct route defaults = {.limit = 100, .since = -1, .wait = 30, .cursor = -1};

/* Decode the pairs name0, value0, name1, value1, ..., NULL into *out (from
 * defaults); the result code. */
static enum ts_err decode(struct route *out, uint64_t *given, struct ts_error *err, ...)
{
    struct ts_query_pair pairs[16];
    size_t n = 0;
    va_list ap;
    va_start(ap, err);
    for (const char *name; (name = va_arg(ap, const char *)) != NULL && n < 16; n++)
        pairs[n] = (struct ts_query_pair){name, va_arg(ap, const char *)};
    va_end(ap);
    *out = defaults;
    ts_error_clear(err);
    return ts_query_decode(params, TS_ARRAY_LEN(params), pairs, n, NOW, out, given, err);
}

/* A refusal: bad_parameter naming field, the message holding want, and the
 * route's struct as it was. */
static void assert_refused(enum ts_err e, const struct route *r, const struct ts_error *err,
                           const char *field, const char *want)
{
    assert_int_equal(e, TS_ERR_BAD_PARAMETER);
    assert_string_equal(err->field, field);
    if (strstr(err->message, want) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", err->message, want);
    assert_memory_equal(r, &defaults, sizeof(*r));
}

static void every_type_is_decoded_into_its_field(void **state)
{
    (void)state;
    struct route r;
    struct ts_error err;
    uint64_t given = 0;
    assert_int_equal(decode(&r, &given, &err, "project", "vision", "limit", "7", "by", "job",
                            "follow", "true", "since", "2024-05-01T11:00:00Z", "wait", "1m",
                            "cursor", "j42", NULL),
                     TS_OK);
    assert_string_equal(r.project, "vision");
    assert_int_equal(r.limit, 7);
    assert_int_equal(r.by, 2);
    assert_true(r.follow);
    assert_int_equal(r.since, NOW - 3600);
    assert_int_equal(r.wait, 60);
    assert_int_equal(r.cursor, 42);
    assert_int_equal(given, 0x7f);
}

static void absent_parameters_keep_their_defaults(void **state)
{
    (void)state;
    struct route r;
    struct ts_error err;
    uint64_t given = 99;
    assert_int_equal(decode(&r, &given, &err, "limit", "1000", NULL), TS_OK);
    assert_int_equal(r.limit, 1000);
    assert_null(r.project);
    assert_int_equal(r.since, -1);
    assert_int_equal(r.wait, 30);
    assert_int_equal(given, 1u << 1);
    assert_int_equal(decode(&r, NULL, &err, NULL), TS_OK);
    assert_memory_equal(&r, &defaults, sizeof(r));
}

static void a_time_may_be_a_duration_before_now_where_the_table_says_so(void **state)
{
    (void)state;
    struct route r;
    struct ts_error err;
    assert_int_equal(decode(&r, NULL, &err, "since", "90m", NULL), TS_OK);
    assert_int_equal(r.since, NOW - 5400);
    assert_int_equal(decode(&r, NULL, &err, "since", "2024-05-01T14:00:00+02:00", NULL), TS_OK);
    assert_int_equal(r.since, NOW);
    enum ts_err e = decode(&r, NULL, &err, "since", "yesterday", NULL);
    assert_refused(e, &r, &err, "since", "since must be an RFC 3339 time or a duration");
    e = decode(&r, NULL, &err, "since", "2023-02-29T00:00:00Z", NULL);
    assert_refused(e, &r, &err, "since", "\"2023-02-29T00:00:00Z\"");
}

static void an_unknown_parameter_is_refused_by_name_with_the_known_ones(void **state)
{
    (void)state;
    struct route r;
    struct ts_error err;
    enum ts_err e = decode(&r, NULL, &err, "limit", "5", "projcet", "vision", NULL);
    assert_refused(e, &r, &err, "projcet", "unknown query parameter \"projcet\"");
    assert_non_null(strstr(err.hint, "project, limit, by, follow, since, wait, cursor"));
    struct ts_query_pair p = {"x", "1"};
    ts_error_clear(&err);
    assert_int_equal(ts_query_decode(params, 0, &p, 1, NOW, &r, NULL, &err), TS_ERR_BAD_PARAMETER);
    assert_non_null(strstr(err.hint, "takes no query parameters"));
}

static void a_parameter_given_twice_or_without_a_value_is_refused(void **state)
{
    (void)state;
    struct route r;
    struct ts_error err;
    enum ts_err e = decode(&r, NULL, &err, "limit", "5", "limit", "6", NULL);
    assert_refused(e, &r, &err, "limit", "given more than once");
    e = decode(&r, NULL, &err, "follow", NULL, NULL);
    assert_refused(e, &r, &err, "follow", "has no value");
}

static void integers_out_of_range_or_of_the_wrong_form_are_refused(void **state)
{
    (void)state;
    struct route r;
    struct ts_error err;
    const char *bad[] = {"0", "1001", "ten", "", "5x", " 5", "+5", "1e3", "99999999999999999999"};
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        enum ts_err e = decode(&r, NULL, &err, "limit", bad[i], NULL);
        assert_refused(e, &r, &err, "limit", "limit must be an integer between 1 and 1000");
    }
}

static void enums_bools_durations_and_cursors_refuse_what_they_do_not_name(void **state)
{
    (void)state;
    struct route r;
    struct ts_error err;
    enum ts_err e = decode(&r, NULL, &err, "by", "rack", NULL);
    assert_refused(e, &r, &err, "by", "by must be cluster, project or job: \"rack\"");
    e = decode(&r, NULL, &err, "follow", "1", NULL);
    assert_refused(e, &r, &err, "follow", "follow must be true or false: \"1\"");
    e = decode(&r, NULL, &err, "wait", "61s", NULL);
    assert_refused(e, &r, &err, "wait", "wait must be a duration between 0s and 60s");
    e = decode(&r, NULL, &err, "wait", "soon", NULL);
    assert_refused(e, &r, &err, "wait", "\"soon\"");
    const char *cursors[] = {"a5", "j", "j-1", "5", "jj5", "j5x"};
    for (size_t i = 0; i < TS_ARRAY_LEN(cursors); i++) {
        e = decode(&r, NULL, &err, "cursor", cursors[i], NULL);
        assert_refused(e, &r, &err, "cursor", "invalid cursor");
    }
}

static void a_required_parameter_that_is_absent_is_refused(void **state)
{
    (void)state;
    static const struct ts_query_param need[] = {
        {.name = "metric",
         .type = TS_QUERY_STRING,
         .offset = offsetof(struct route, project),
         .required = true},
    };
    struct route r = defaults;
    struct ts_error err;
    ts_error_clear(&err);
    enum ts_err e = ts_query_decode(need, 1, NULL, 0, NOW, &r, NULL, &err);
    assert_refused(e, &r, &err, "metric", "metric is required");
    struct ts_query_pair p = {"metric", "allocated"};
    assert_int_equal(ts_query_decode(need, 1, &p, 1, NOW, &r, NULL, &err), TS_OK);
    assert_string_equal(r.project, "allocated");
}

/* A required word of a fixed set (metric=): absent, the hint names the words. */
static void an_absent_required_enum_is_refused_with_the_words_it_takes(void **state)
{
    (void)state;
    static const struct ts_query_param need[] = {
        {.name = "by",
         .type = TS_QUERY_ENUM,
         .offset = offsetof(struct route, by),
         .required = true,
         .names = scopes},
    };
    struct route r = defaults;
    struct ts_error err;
    ts_error_clear(&err);
    enum ts_err e = ts_query_decode(need, 1, NULL, 0, NOW, &r, NULL, &err);
    assert_refused(e, &r, &err, "by", "by is required");
    assert_string_equal(err.hint, "one of cluster, project or job");
    struct ts_query_pair p = {"by", "job"};
    assert_int_equal(ts_query_decode(need, 1, &p, 1, NOW, &r, NULL, &err), TS_OK);
    assert_int_equal(r.by, 2);
}

static void an_error_after_good_values_writes_none_of_them(void **state)
{
    (void)state;
    struct route r;
    struct ts_error err;
    enum ts_err e =
        decode(&r, NULL, &err, "project", "vision", "limit", "5", "follow", "maybe", NULL);
    assert_refused(e, &r, &err, "follow", "follow must be true or false");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_type_is_decoded_into_its_field),
        cmocka_unit_test(absent_parameters_keep_their_defaults),
        cmocka_unit_test(a_time_may_be_a_duration_before_now_where_the_table_says_so),
        cmocka_unit_test(an_unknown_parameter_is_refused_by_name_with_the_known_ones),
        cmocka_unit_test(a_parameter_given_twice_or_without_a_value_is_refused),
        cmocka_unit_test(integers_out_of_range_or_of_the_wrong_form_are_refused),
        cmocka_unit_test(enums_bools_durations_and_cursors_refuse_what_they_do_not_name),
        cmocka_unit_test(a_required_parameter_that_is_absent_is_refused),
        cmocka_unit_test(an_absent_required_enum_is_refused_with_the_words_it_takes),
        cmocka_unit_test(an_error_after_good_values_writes_none_of_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
