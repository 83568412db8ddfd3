/*
 * test_wire.c - parsing request bodies, quotas, departments, projects,
 * tokens, nodes, times and the name tables of api/wire.h. Jobs are in
 * test_wire_job.c.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/array.h"
#include "api/wire.h"

/* The body as a parsed object; fails the test when it does not parse. */
static json_t *body(const char *text)
{
    json_t *v = NULL;
    struct ts_error err;
    enum ts_err e = ts_wire_parse(text, strlen(text), &v, &err);
    if (e != TS_OK)
        fail_msg("%s: %s", text, err.message);
    return v;
}

static void assert_error(const struct ts_error *err, enum ts_err got, enum ts_err code,
                         const char *field, const char *message)
{
    if (got != code || err->code != code)
        fail_msg("expected %s, got %s (%s)", ts_err_code(code), ts_err_code(got), err->message);
    assert_string_equal(err->field, field);
    if (message != NULL)
        assert_string_equal(err->message, message);
}

static enum ts_err project_from(const char *text, struct ts_project_spec *spec,
                                struct ts_error *err)
{
    json_t *v = body(text);
    enum ts_err e = ts_wire_project_decode(v, spec, err);
    json_decref(v);
    return e;
}

/* The JSON text of an encoded value, compact with sorted keys; freed by the
 * caller. Steals v. */
static char *dump(json_t *v)
{
    assert_non_null(v);
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    json_decref(v);
    assert_non_null(s);
    return s;
}

static void assert_encoded(json_t *v, const char *expected)
{
    char *s = dump(v);
    json_t *want = json_loads(expected, JSON_DECODE_ANY, NULL);
    assert_non_null(want);
    char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    json_decref(want);
    if (strcmp(s, w) != 0)
        fail_msg("encoded\n  %s\nexpected\n  %s", s, w);
    free(s);
    free(w);
}

/* ---- ts_wire_parse ------------------------------------------------------------ */

static void a_json_object_body_parses(void **state)
{
    json_t *v = NULL;
    struct ts_error err;
    const char text[] = "{\"name\": \"vision\"}";
    assert_int_equal(ts_wire_parse(text, strlen(text), &v, &err), TS_OK);
    assert_true(json_is_object(v));
    assert_string_equal(json_string_value(json_object_get(v, "name")), "vision");
    json_decref(v);
}

static void a_body_need_not_be_nul_terminated(void **state)
{
    json_t *v = NULL;
    struct ts_error err;
    const char text[] = "{\"a\": 1}GARBAGE";
    assert_int_equal(ts_wire_parse(text, 8, &v, &err), TS_OK);
    json_decref(v);
}

static void duplicate_keys_are_malformed_json_naming_the_key(void **state)
{
    json_t *v = (json_t *)1;
    struct ts_error err;
    const char text[] = "{\"name\": \"a\", \"name\": \"b\"}";
    enum ts_err e = ts_wire_parse(text, strlen(text), &v, &err);
    assert_error(&err, e, TS_ERR_MALFORMED_JSON, "", NULL);
    assert_null(v);
    assert_non_null(strstr(err.message, "duplicate key \"name\""));
    assert_non_null(strstr(err.message, "line 1"));
}

static void nested_duplicate_keys_are_refused_too(void **state)
{
    json_t *v = NULL;
    struct ts_error err;
    const char text[] = "{\"quota\": {\"gpus\": 1,\n \"gpus\": 2}}";
    enum ts_err e = ts_wire_parse(text, strlen(text), &v, &err);
    assert_error(&err, e, TS_ERR_MALFORMED_JSON, "", NULL);
    assert_non_null(strstr(err.message, "duplicate key \"gpus\""));
    assert_non_null(strstr(err.message, "line 2"));
}

static void syntax_errors_give_line_and_column(void **state)
{
    json_t *v = NULL;
    struct ts_error err;
    const char text[] = "{\"a\": 1,\n  \"b\": }";
    enum ts_err e = ts_wire_parse(text, strlen(text), &v, &err);
    assert_error(&err, e, TS_ERR_MALFORMED_JSON, "", NULL);
    assert_null(v);
    assert_memory_equal(err.message, "could not parse JSON at line 2, column ", 39);
}

static void trailing_garbage_and_empty_bodies_are_malformed(void **state)
{
    const char *bad[] = {"{} x",
                         "{}{}",
                         "",
                         "   ",
                         "{\"a\":1",
                         "{'a': 1}",
                         "{\"a\": NaN}",
                         "{\"a\": Infinity}",
                         "{\"a\": 1e999}",
                         "{\"a\": 99999999999999999999}",
                         "{\"a\": \"\\u0000\"}"};
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        json_t *v = NULL;
        struct ts_error err;
        enum ts_err e = ts_wire_parse(bad[i], strlen(bad[i]), &v, &err);
        if (e != TS_ERR_MALFORMED_JSON)
            fail_msg("%s: %s", bad[i], ts_err_code(e));
        assert_memory_equal(err.message, "could not parse JSON at line ", 29);
        assert_null(v);
    }
}

static void a_nul_byte_inside_the_body_is_malformed(void **state)
{
    json_t *v = NULL;
    struct ts_error err;
    const char text[] = "{\"a\": \"x\0y\"}";
    assert_int_equal(ts_wire_parse(text, sizeof(text) - 1, &v, &err), TS_ERR_MALFORMED_JSON);
    assert_null(v);
}

static void bodies_that_are_not_objects_are_the_wrong_type(void **state)
{
    const char *bad[] = {"[]", "[{\"name\": \"a\"}]", "\"text\"", "42", "null", "true"};
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        json_t *v = NULL;
        struct ts_error err;
        enum ts_err e = ts_wire_parse(bad[i], strlen(bad[i]), &v, &err);
        assert_error(&err, e, TS_ERR_WRONG_TYPE, "", "request body must be a JSON object");
        assert_null(v);
    }
}

static void very_deep_nesting_is_refused_without_crashing(void **state)
{
    size_t depth = 100000;
    char *text = malloc(2 * depth + 16);
    assert_non_null(text);
    size_t n = 0;
    text[n++] = '{';
    memcpy(text + n, "\"a\":", 4);
    n += 4;
    for (size_t i = 0; i < depth; i++)
        text[n++] = '[';
    for (size_t i = 0; i < depth; i++)
        text[n++] = ']';
    text[n++] = '}';
    json_t *v = NULL;
    struct ts_error err;
    assert_int_equal(ts_wire_parse(text, n, &v, &err), TS_ERR_MALFORMED_JSON);
    assert_null(v);
    free(text);
}

static void a_null_error_pointer_is_allowed(void **state)
{
    json_t *v = NULL;
    assert_int_equal(ts_wire_parse("[", 1, &v, NULL), TS_ERR_MALFORMED_JSON);
    assert_int_equal(ts_wire_parse("[]", 2, &v, NULL), TS_ERR_WRONG_TYPE);
    json_t *in = json_pack("{s:s}", "name", "BAD");
    struct ts_project_spec spec;
    assert_int_equal(ts_wire_project_decode(in, &spec, NULL), TS_ERR_INVALID_VALUE);
    json_decref(in);
}

/* ---- quotas and projects ------------------------------------------------------ */

static void a_project_with_a_full_quota_decodes(void **state)
{
    struct ts_project_spec p;
    struct ts_error err;
    assert_int_equal(project_from("{\"name\": \"vision\", \"department\": \"research\", \"quota\": "
                                  "{\"gpus\": 2.5, \"over_quota_weight\": 3, \"limit\": 8, "
                                  "\"priority\": -5}}",
                                  &p, &err),
                     TS_OK);
    assert_string_equal(p.name, "vision");
    assert_string_equal(p.department, "research");
    assert_true(p.quota.gpus == 2.5);
    assert_true(p.quota.over_quota_weight == 3);
    assert_true(p.quota.has_limit);
    assert_true(p.quota.limit == 8);
    assert_int_equal(p.quota.priority, -5);
}

static void an_absent_quota_takes_the_defaults(void **state)
{
    struct ts_project_spec p;
    struct ts_error err;
    assert_int_equal(project_from("{\"name\": \"a\", \"department\": \"d\"}", &p, &err), TS_OK);
    assert_true(p.quota.gpus == 0);
    assert_true(p.quota.over_quota_weight == 1);
    assert_false(p.quota.has_limit);
    assert_int_equal(p.quota.priority, 0);
    assert_int_equal(project_from("{\"name\": \"a\", \"department\": \"d\", \"quota\": "
                                  "{\"gpus\": 1, \"limit\": null}}",
                                  &p, &err),
                     TS_OK);
    assert_false(p.quota.has_limit);
    assert_true(p.quota.gpus == 1);
    assert_int_equal(
        project_from("{\"name\": \"a\", \"department\": \"d\", \"quota\": null}", &p, &err), TS_OK);
    assert_true(p.quota.over_quota_weight == 1);
}

static void an_unknown_quota_member_is_refused_naming_its_path(void **state)
{
    struct ts_project_spec p;
    struct ts_error err;
    enum ts_err e = project_from(
        "{\"name\": \"a\", \"department\": \"d\", \"quota\": {\"gpuz\": 2}}", &p, &err);
    assert_error(&err, e, TS_ERR_UNKNOWN_FIELD, "quota.gpuz", "unknown field \"gpuz\" in quota");
}

static void an_unknown_top_level_member_is_refused_naming_the_type(void **state)
{
    struct ts_project_spec p;
    struct ts_error err;
    enum ts_err e =
        project_from("{\"name\": \"a\", \"department\": \"d\", \"colour\": 1}", &p, &err);
    assert_error(&err, e, TS_ERR_UNKNOWN_FIELD, "colour", "unknown field \"colour\" in project");
}

static void sending_back_a_read_only_member_is_unknown_with_a_hint(void **state)
{
    struct ts_project_spec p;
    struct ts_error err;
    enum ts_err e = project_from("{\"name\": \"a\", \"department\": \"d\", \"id\": 4}", &p, &err);
    assert_error(&err, e, TS_ERR_UNKNOWN_FIELD, "id", "unknown field \"id\" in project");
    assert_string_equal(err.hint, "id is set by the server and cannot be written");
}

static void a_quota_of_the_wrong_type_is_refused(void **state)
{
    struct ts_project_spec p;
    struct ts_error err;
    enum ts_err e = project_from(
        "{\"name\": \"a\", \"department\": \"d\", \"quota\": {\"gpus\": \"2\"}}", &p, &err);
    assert_error(&err, e, TS_ERR_WRONG_TYPE, "quota.gpus", "quota.gpus must be a number");
    e = project_from("{\"name\": \"a\", \"department\": \"d\", \"quota\": [1]}", &p, &err);
    assert_error(&err, e, TS_ERR_WRONG_TYPE, "quota", "quota must be an object");
    e = project_from("{\"name\": \"a\", \"department\": \"d\", \"quota\": {\"priority\": true}}",
                     &p, &err);
    assert_error(&err, e, TS_ERR_WRONG_TYPE, "quota.priority", "quota.priority must be an integer");
}

static void a_limit_below_the_quota_is_refused_with_both_numbers(void **state)
{
    struct ts_project_spec p;
    struct ts_error err;
    enum ts_err e = project_from("{\"name\": \"a\", \"department\": \"d\", \"quota\": "
                                 "{\"gpus\": 2.5, \"limit\": 1}}",
                                 &p, &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "quota.limit",
                 "quota.limit must not be below quota.gpus: 1 < 2.5");
}

static void negative_and_huge_quota_numbers_are_refused(void **state)
{
    struct ts_project_spec p;
    struct ts_error err;
    enum ts_err e = project_from(
        "{\"name\": \"a\", \"department\": \"d\", \"quota\": {\"gpus\": -1}}", &p, &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "quota.gpus",
                 "quota.gpus must be between 0 and 1000000: -1");
    e = project_from("{\"name\": \"a\", \"department\": \"d\", \"quota\": {\"gpus\": 1e300}}", &p,
                     &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "quota.gpus",
                 "quota.gpus must be between 0 and 1000000: 1e+300");
    e = project_from(
        "{\"name\": \"a\", \"department\": \"d\", \"quota\": {\"over_quota_weight\": -0.5}}", &p,
        &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "quota.over_quota_weight", NULL);
    e = project_from("{\"name\": \"a\", \"department\": \"d\", \"quota\": {\"priority\": 1001}}",
                     &p, &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "quota.priority",
                 "quota.priority must be between -1000 and 1000: 1001");
    e = project_from("{\"name\": \"a\", \"department\": \"d\", \"quota\": {\"priority\": 1.5}}", &p,
                     &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "quota.priority",
                 "quota.priority must be an integer: 1.5");
    e = project_from("{\"name\": \"a\", \"department\": \"d\", \"quota\": {\"priority\": -9.2e18}}",
                     &p, &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "quota.priority", NULL);
    e = project_from("{\"name\": \"a\", \"department\": \"d\", \"quota\": {\"limit\": -1}}", &p,
                     &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "quota.limit", NULL);
}

static void an_integral_real_is_an_integer_and_negative_zero_is_zero(void **state)
{
    struct ts_project_spec p;
    struct ts_error err;
    assert_int_equal(project_from("{\"name\": \"a\", \"department\": \"d\", \"quota\": "
                                  "{\"priority\": 7.0, \"gpus\": -0.0}}",
                                  &p, &err),
                     TS_OK);
    assert_int_equal(p.quota.priority, 7);
    assert_false(signbit(p.quota.gpus));
}

static void project_names_are_required_and_validated(void **state)
{
    struct ts_project_spec p;
    struct ts_error err;
    enum ts_err e = project_from("{\"department\": \"d\"}", &p, &err);
    assert_error(&err, e, TS_ERR_MISSING_FIELD, "name", "name is required");
    e = project_from("{\"name\": null, \"department\": \"d\"}", &p, &err);
    assert_error(&err, e, TS_ERR_MISSING_FIELD, "name", "name is required");
    e = project_from("{\"name\": \"a\"}", &p, &err);
    assert_error(&err, e, TS_ERR_MISSING_FIELD, "department", "department is required");
    e = project_from("{\"name\": \"Bad_Name\", \"department\": \"d\"}", &p, &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "name",
                 "name must match [a-z0-9][a-z0-9-]{0,62}: \"Bad_Name\"");
    e = project_from("{\"name\": \"\", \"department\": \"d\"}", &p, &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "name",
                 "name must match [a-z0-9][a-z0-9-]{0,62}: \"\"");
    e = project_from("{\"name\": 7, \"department\": \"d\"}", &p, &err);
    assert_error(&err, e, TS_ERR_WRONG_TYPE, "name", "name must be a string");
    e = project_from("{\"name\": \"a\", \"department\": \"D\"}", &p, &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "department", NULL);
}

static void values_in_messages_are_escaped_and_cut(void **state)
{
    struct ts_project_spec p;
    struct ts_error err;
    enum ts_err e = project_from("{\"name\": \"a\\\"b\\nc\", \"department\": \"d\"}", &p, &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "name",
                 "name must match [a-z0-9][a-z0-9-]{0,62}: \"a\\\"b\\x0ac\"");
    char text[600];
    snprintf(text, sizeof(text), "{\"name\": \"%0300d\", \"department\": \"d\"}", 0);
    e = project_from(text, &p, &err);
    assert_int_equal(e, TS_ERR_INVALID_VALUE);
    assert_true(strlen(err.message) < 150);
    assert_non_null(strstr(err.message, "...\""));
}

static void a_cut_value_in_a_message_stays_valid_utf8(void **state)
{
    char text[1024] = "{\"department\": \"d\", \"name\": \"";
    for (int i = 0; i < 100; i++)
        strcat(text, "\xc3\xa9"); /* e acute, two bytes */
    strcat(text, "\"}");
    struct ts_project_spec p;
    struct ts_error err;
    assert_int_equal(project_from(text, &p, &err), TS_ERR_INVALID_VALUE);
    assert_non_null(strstr(err.message, "...\""));
    json_t *s = json_string(err.message); /* NULL unless valid UTF-8 */
    assert_non_null(s);
    json_decref(s);
}

static void a_quota_decodes_as_a_request_body_of_its_own(void **state)
{
    json_t *v = body("{\"gpus\": 4, \"gpuz\": 1}");
    struct ts_quota q;
    struct ts_error err;
    enum ts_err e = ts_wire_quota_decode(v, "", &q, &err);
    assert_error(&err, e, TS_ERR_UNKNOWN_FIELD, "gpuz", "unknown field \"gpuz\" in quota");
    json_decref(v);
    e = ts_wire_quota_decode(NULL, "quota", &q, &err);
    assert_int_equal(e, TS_OK);
    assert_true(q.over_quota_weight == 1);
}

static void a_project_quota_has_max_pending_and_a_department_quota_has_not(void **state)
{
    struct ts_quota q;
    struct ts_error err;
    assert_int_equal(ts_wire_project_quota_decode(NULL, "quota", &q, &err), TS_OK);
    assert_true(q.has_max_pending);
    assert_int_equal(q.max_pending, TS_MAX_PENDING_DEFAULT);
    json_t *v = body("{\"max_pending\": 3}");
    assert_int_equal(ts_wire_project_quota_decode(v, "quota", &q, &err), TS_OK);
    assert_int_equal(q.max_pending, 3);
    enum ts_err e = ts_wire_quota_decode(v, "", &q, &err);
    assert_error(&err, e, TS_ERR_UNKNOWN_FIELD, "max_pending",
                 "unknown field \"max_pending\" in quota");
    json_decref(v);
    v = body("{\"max_pending\": -1}");
    e = ts_wire_project_quota_decode(v, "quota", &q, &err);
    assert_int_equal(e, TS_ERR_INVALID_VALUE);
    assert_string_equal(err.field, "quota.max_pending");
    json_decref(v);
}

static void a_project_quota_has_a_job_user_root_only_when_allowed(void **state)
{
    struct ts_quota q;
    struct ts_error err;
    assert_int_equal(ts_wire_project_quota_decode(NULL, "quota", &q, &err), TS_OK);
    assert_string_equal(q.job_user, ""); /* the agent's --job-user */
    assert_false(q.allow_root);
    static const char *const good[][2] = {
        {"{\"job_user\": \"alice\"}", "alice"},
        {"{\"job_user\": \"_svc-1\"}", "_svc-1"},
        {"{\"job_user\": null}", ""},
        {"{\"job_user\": \"root\", \"allow_root\": true}", "root"},
        {"{\"job_user\": \"abcdefghijklmnopqrstuvwxyz012345\"}",
         "abcdefghijklmnopqrstuvwxyz012345"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(good); i++) {
        json_t *v = body(good[i][0]);
        if (ts_wire_project_quota_decode(v, "quota", &q, &err) != TS_OK)
            fail_msg("%s: %s", good[i][0], err.message);
        assert_string_equal(q.job_user, good[i][1]);
        json_decref(v);
    }
    static const char *const bad[][2] = {
        {"{\"job_user\": \"root\"}",
         "quota.job_user \"root\" needs allow_root: true for this project"},
        {"{\"job_user\": \"root\", \"allow_root\": false}",
         "quota.job_user \"root\" needs allow_root: true for this project"},
        {"{\"job_user\": \"Alice\"}",
         "quota.job_user must be a Unix user name ([a-z_][a-z0-9_-]{0,31}): \"Alice\""},
        {"{\"job_user\": \"1st\"}",
         "quota.job_user must be a Unix user name ([a-z_][a-z0-9_-]{0,31}): \"1st\""},
        {"{\"job_user\": \"a/b\"}",
         "quota.job_user must be a Unix user name ([a-z_][a-z0-9_-]{0,31}): \"a/b\""},
        {"{\"job_user\": \"\"}",
         "quota.job_user must be a Unix user name ([a-z_][a-z0-9_-]{0,31}): \"\""},
        {"{\"job_user\": \"abcdefghijklmnopqrstuvwxyz0123456\"}", NULL},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        json_t *v = body(bad[i][0]);
        enum ts_err e = ts_wire_project_quota_decode(v, "quota", &q, &err);
        if (e != TS_ERR_INVALID_VALUE)
            fail_msg("%s: %d", bad[i][0], (int)e);
        assert_string_equal(err.field, "quota.job_user");
        if (bad[i][1] != NULL)
            assert_string_equal(err.message, bad[i][1]);
        json_decref(v);
    }
    /* a department has no job user */
    json_t *v = body("{\"job_user\": \"alice\"}");
    assert_int_equal(ts_wire_quota_decode(v, "quota", &q, &err), TS_ERR_UNKNOWN_FIELD);
    json_decref(v);
}

static void departments_decode_name_and_quota(void **state)
{
    json_t *v = body("{\"name\": \"research\", \"quota\": {\"gpus\": 16}}");
    struct ts_department_spec d;
    struct ts_error err;
    assert_int_equal(ts_wire_department_decode(v, &d, &err), TS_OK);
    assert_string_equal(d.name, "research");
    assert_true(d.quota.gpus == 16);
    json_decref(v);
    v = body("{\"name\": \"research\", \"department\": \"x\"}");
    enum ts_err e = ts_wire_department_decode(v, &d, &err);
    assert_error(&err, e, TS_ERR_UNKNOWN_FIELD, "department",
                 "unknown field \"department\" in department");
    json_decref(v);
}

static void a_decoder_given_an_array_says_the_body_must_be_an_object(void **state)
{
    json_t *v = json_array();
    struct ts_department_spec d;
    struct ts_error err;
    enum ts_err e = ts_wire_department_decode(v, &d, &err);
    assert_error(&err, e, TS_ERR_WRONG_TYPE, "", "request body must be a JSON object");
    json_decref(v);
}

static void projects_encode_with_quota_status_and_time(void **state)
{
    struct ts_project p = {
        .id = 7,
        .spec = {.name = "vision",
                 .department = "research",
                 .quota = {.gpus = 2.5, .over_quota_weight = 1, .has_limit = true, .limit = 8}},
        .usage = {.allocated_gpus = 1.5,
                  .allocated_nonpreemptible_gpus = 0.5,
                  .requested_gpus = 3,
                  .pending_jobs = 2,
                  .running_jobs = 1,
                  .deserved_gpus = 2.5,
                  .fair_share_gpus = 3.25},
        .created_at_us = 1795255200123456LL,
    };
    assert_encoded(
        ts_wire_project_encode(&p),
        "{\"id\":7,\"name\":\"vision\",\"department\":\"research\","
        "\"quota\":{\"gpus\":2.5,\"over_quota_weight\":1.0,\"limit\":8.0,\"priority\":0},"
        "\"status\":{\"allocated_gpus\":1.5,\"allocated_nonpreemptible_gpus\":0.5,"
        "\"requested_gpus\":3.0,\"pending_jobs\":2,\"running_jobs\":1,"
        "\"deserved_gpus\":2.5,\"fair_share_gpus\":3.25},"
        "\"created_at\":\"2026-11-21T10:00:00.123456Z\"}");
    p.spec.quota.has_limit = false;
    json_t *v = ts_wire_project_encode(&p);
    assert_true(json_is_null(json_object_get(json_object_get(v, "quota"), "limit")));
    json_decref(v);
}

static void departments_encode_with_a_project_count(void **state)
{
    struct ts_department d = {
        .id = 3,
        .spec = {.name = "research", .quota = {.gpus = 16, .over_quota_weight = 2}},
        .project_count = 4,
        .created_at_us = 0,
    };
    assert_encoded(
        ts_wire_department_encode(&d),
        "{\"id\":3,\"name\":\"research\","
        "\"quota\":{\"gpus\":16.0,\"over_quota_weight\":2.0,\"limit\":null,\"priority\":0},"
        "\"status\":{\"allocated_gpus\":0.0,\"allocated_nonpreemptible_gpus\":0.0,"
        "\"requested_gpus\":0.0,\"pending_jobs\":0,\"running_jobs\":0,"
        "\"deserved_gpus\":0.0,\"fair_share_gpus\":0.0},"
        "\"project_count\":4,\"created_at\":null}");
}

static void a_decoded_project_encodes_back_to_what_was_sent(void **state)
{
    const char *sent = "{\"name\":\"vision\",\"department\":\"research\",\"quota\":"
                       "{\"gpus\":2.5,\"over_quota_weight\":3.0,\"limit\":8.0,\"priority\":10,"
                       "\"max_pending\":250,\"job_user\":\"alice\",\"allow_root\":false}}";
    struct ts_project p = {0};
    struct ts_error err;
    assert_int_equal(project_from(sent, &p.spec, &err), TS_OK);
    json_t *v = ts_wire_project_encode(&p);
    assert_non_null(v);
    json_object_del(v, "id");
    json_object_del(v, "status");
    json_object_del(v, "created_at");
    assert_encoded(v, sent);
}

/* ---- tokens ------------------------------------------------------------------ */

static enum ts_err token_from(const char *text, struct ts_arena *a, struct ts_token_spec *spec,
                              struct ts_error *err)
{
    json_t *v = body(text);
    enum ts_err e = ts_wire_token_decode(v, a, spec, err);
    json_decref(v);
    return e;
}

static void a_token_decodes_its_role_and_projects_into_the_arena(void **state)
{
    struct ts_arena *a = ts_arena_new();
    struct ts_token_spec t;
    struct ts_error err;
    assert_int_equal(
        token_from("{\"name\": \"ci\", \"role\": \"member\", \"projects\": [\"vision\", \"nlp\"]}",
                   a, &t, &err),
        TS_OK);
    assert_string_equal(t.name, "ci");
    assert_int_equal(t.role, TS_ROLE_MEMBER);
    assert_int_equal(t.nprojects, 2);
    assert_string_equal(t.projects[0], "vision");
    assert_string_equal(t.projects[1], "nlp");
    assert_int_equal(token_from("{\"name\": \"root\", \"role\": \"admin\"}", a, &t, &err), TS_OK);
    assert_int_equal(t.role, TS_ROLE_ADMIN);
    assert_int_equal(t.nprojects, 0);
    ts_arena_free(a);
}

static void token_roles_and_project_lists_are_checked(void **state)
{
    struct ts_arena *a = ts_arena_new();
    struct ts_token_spec t;
    struct ts_error err;
    enum ts_err e = token_from("{\"name\": \"ci\", \"role\": \"root\"}", a, &t, &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "role",
                 "role must be one of viewer, member, agent, admin: \"root\"");
    e = token_from("{\"name\": \"ci\"}", a, &t, &err);
    assert_error(&err, e, TS_ERR_MISSING_FIELD, "role", "role is required");
    e = token_from("{\"name\": \"ci\", \"role\": \"member\", \"projects\": \"vision\"}", a, &t,
                   &err);
    assert_error(&err, e, TS_ERR_WRONG_TYPE, "projects", "projects must be an array");
    e = token_from("{\"name\": \"ci\", \"role\": \"member\", \"projects\": [\"a\", 1]}", a, &t,
                   &err);
    assert_error(&err, e, TS_ERR_WRONG_TYPE, "projects[1]", "projects[1] must be a string");
    e = token_from("{\"name\": \"ci\", \"role\": \"member\", \"projects\": [\"a\", \"B\"]}", a, &t,
                   &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "projects[1]",
                 "projects[1] must match [a-z0-9][a-z0-9-]{0,62}: \"B\"");
    e = token_from("{\"name\": \"ci\", \"role\": \"member\", \"projects\": [\"a\", \"a\"]}", a, &t,
                   &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "projects[1]", "projects lists \"a\" twice");
    e = token_from("{\"name\": \"ci\", \"role\": \"member\", \"token\": \"s3cret\"}", a, &t, &err);
    assert_error(&err, e, TS_ERR_UNKNOWN_FIELD, "token", "unknown field \"token\" in token");
    ts_arena_free(a);
}

static void tokens_encode_their_secret_only_when_it_is_there(void **state)
{
    const char *projects[] = {"vision", "nlp"};
    struct ts_token t = {
        .id = 9,
        .spec = {.name = "ci", .role = TS_ROLE_MEMBER, .projects = projects, .nprojects = 2},
        .secret = NULL,
        .created_at_us = 1000000,
        .last_used_at_us = 0,
    };
    assert_encoded(
        ts_wire_token_encode(&t),
        "{\"id\":9,\"name\":\"ci\",\"role\":\"member\",\"projects\":[\"vision\",\"nlp\"],"
        "\"created_at\":\"1970-01-01T00:00:01.000000Z\",\"last_used_at\":null}");
    t.secret = "ts_abc";
    json_t *v = ts_wire_token_encode(&t);
    assert_string_equal(json_string_value(json_object_get(v, "token")), "ts_abc");
    json_decref(v);
}

static void an_agent_token_names_its_nodes_by_name_or_prefix(void **state)
{
    struct ts_arena *a = ts_arena_new();
    struct ts_token_spec t;
    struct ts_error err;
    assert_int_equal(token_from("{\"name\": \"a1\", \"role\": \"agent\","
                                " \"nodes\": [\"n1\", \"gpu-*\", \"*\"]}",
                                a, &t, &err),
                     TS_OK);
    assert_int_equal(t.nnodes, 3);
    assert_string_equal(t.nodes[1], "gpu-*");
    enum ts_err e =
        token_from("{\"name\": \"m\", \"role\": \"member\", \"nodes\": [\"n1\"]}", a, &t, &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "nodes",
                 "nodes is only for agent tokens: the role is member");
    e = token_from("{\"name\": \"a\", \"role\": \"agent\", \"nodes\": [\"n1\", \"g*u\"]}", a, &t,
                   &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "nodes[1]",
                 "nodes[1] must be a node name, a name prefix followed by *, or *: \"g*u\"");
    e = token_from("{\"name\": \"a\", \"role\": \"agent\", \"nodes\": [\"n1\", \"n1\"]}", a, &t,
                   &err);
    assert_error(&err, e, TS_ERR_INVALID_VALUE, "nodes[1]", "nodes lists \"n1\" twice");
    const char *nodes[] = {"n1", "gpu-*"};
    struct ts_token tok = {
        .id = 3,
        .spec = {.name = "a1", .role = TS_ROLE_AGENT, .nodes = nodes, .nnodes = 2},
    };
    json_t *v = ts_wire_token_encode(&tok);
    assert_int_equal(json_array_size(json_object_get(v, "nodes")), 2);
    json_decref(v);
    tok.spec.nnodes = 0; /* any node: [] */
    v = ts_wire_token_encode(&tok);
    assert_true(json_is_array(json_object_get(v, "nodes")));
    assert_int_equal(json_array_size(json_object_get(v, "nodes")), 0);
    json_decref(v);
    ts_arena_free(a);
}

static void node_patterns_match_a_name_or_a_prefix(void **state)
{
    assert_true(ts_token_node_pattern_valid("n1"));
    assert_true(ts_token_node_pattern_valid("gpu-*"));
    assert_true(ts_token_node_pattern_valid("*"));
    assert_false(ts_token_node_pattern_valid(""));
    assert_false(ts_token_node_pattern_valid("**"));
    assert_false(ts_token_node_pattern_valid("-*"));
    assert_false(ts_token_node_pattern_valid("g*u"));
    assert_false(ts_token_node_pattern_valid("GPU-*"));
    assert_true(ts_token_node_matches("n1", 2, "n1"));
    assert_false(ts_token_node_matches("n1", 2, "n10"));
    assert_false(ts_token_node_matches("n10", 3, "n1"));
    assert_true(ts_token_node_matches("n1,n2", 2, "n1")); /* the first len characters only */
    assert_true(ts_token_node_matches("gpu-*", 5, "gpu-07"));
    assert_false(ts_token_node_matches("gpu-*", 5, "gpu"));
    assert_true(ts_token_node_matches("*", 1, "anything"));
}

static void roles_have_one_name_each_and_parse_back(void **state)
{
    const enum ts_role roles[] = {TS_ROLE_VIEWER, TS_ROLE_MEMBER, TS_ROLE_AGENT, TS_ROLE_ADMIN};
    const char *names[] = {"viewer", "member", "agent", "admin"};
    for (size_t i = 0; i < 4; i++) {
        enum ts_role r;
        assert_string_equal(ts_role_name(roles[i]), names[i]);
        assert_int_equal(ts_role_parse(names[i], &r), 0);
        assert_int_equal(r, roles[i]);
    }
    enum ts_role r;
    assert_int_equal(ts_role_parse("Admin", &r), -1);
    assert_int_equal(ts_role_parse("", &r), -1);
    assert_string_equal(ts_role_name((enum ts_role)99), "unknown");
}

/* ---- nodes, events, times ---------------------------------------------------- */

static void nodes_encode_with_their_gpus_and_labels(void **state)
{
    (void)state;
    static const int64_t jobs[] = {7, 9};
    static const int physical[] = {0, 1}; /* job 9 runs on GPU 1 (issue 17) */
    struct ts_gpu gpus[] = {
        {.index = 0,
         .uuid = "GPU-1",
         .model = "H100",
         .memory_bytes = 80LL << 30,
         .allocated_bytes = 39LL << 30, /* half of 80 GiB less the 2 GiB reserve */
         .utilization = 0.25,
         .memory_used_bytes = 1LL << 30,
         .jobs = jobs,
         .job_physical = physical,
         .njobs = 2},
        {.index = 1,
         .uuid = "GPU-2",
         .model = "H100",
         .memory_bytes = 80LL << 30,
         .utilization = 0.5},
    };
    struct ts_node n = {
        .id = 1,
        .name = "node-a",
        .state = "ready",
        .labels = "{\"zone\":\"a\"}",
        .cpu = 64,
        .memory_bytes = 512LL << 30,
        .gpus = gpus,
        .ngpus = 2,
        .last_seen_at_us = 0,
        .created_at_us = 1500000,
        .swap_bytes = 1LL << 30,
        .gpu_reserve_bytes = 2LL << 30,
        .agent_version = "0.1.0",
        .generation = 4,
        .running_jobs = 2,
    };
    assert_encoded(
        ts_wire_node_encode(&n),
        "{\"id\":1,\"name\":\"node-a\",\"state\":\"ready\",\"labels\":{\"zone\":\"a\"},"
        "\"cpu\":64.0,\"memory_bytes\":549755813888,\"gpus\":["
        "{\"index\":0,\"uuid\":\"GPU-1\",\"model\":\"H100\",\"memory_bytes\":85899345920,"
        "\"allocated\":0.5,\"allocated_bytes\":41875931136,\"utilization\":0.25,"
        "\"memory_used_bytes\":1073741824,\"sampled_at\":null,\"jobs\":[7,9],"
        "\"moved_jobs\":[{\"id\":9,\"physical_index\":1}],\"hidden_jobs\":0},"
        "{\"index\":1,\"uuid\":\"GPU-2\",\"model\":\"H100\",\"memory_bytes\":85899345920,"
        "\"allocated\":0.0,\"allocated_bytes\":0,\"utilization\":0.5,"
        "\"memory_used_bytes\":0,\"sampled_at\":null,\"jobs\":[],\"moved_jobs\":[],\"hidden_jobs\":"
        "0}],"
        "\"allocated_gpus\":0.5,\"utilized_gpus\":0.75,\"running_jobs\":2,"
        "\"swap_bytes\":1073741824,\"swap_used_bytes\":0,\"collision\":\"wait\","
        "\"gpu_reserve_bytes\":2147483648,\"agent_version\":\"0.1.0\","
        "\"generation\":4,\"registered_at\":null,"
        "\"last_seen_at\":null,\"created_at\":\"1970-01-01T00:00:01.500000Z\"}");
    n.labels = NULL;
    n.ngpus = 0;
    json_t *v = ts_wire_node_encode(&n);
    assert_int_equal(json_object_size(json_object_get(v, "labels")), 0);
    assert_int_equal(json_array_size(json_object_get(v, "gpus")), 0);
    json_decref(v);
}

static void job_events_encode(void **state)
{
    struct ts_job_event e = {.id = 5,
                             .job_id = 4,
                             .at_us = 1795255200000001LL,
                             .type = "submitted",
                             .message = "submitted by ci"};
    assert_encoded(ts_wire_job_event_encode(&e),
                   "{\"id\":5,\"job_id\":4,\"at\":\"2026-11-21T10:00:00.000001Z\","
                   "\"type\":\"submitted\",\"message\":\"submitted by ci\"}");
    e.type = "swapped_out";
    e.message = "moved 1 GiB";
    e.attempt = 2;
    e.seq = 7;
    assert_encoded(ts_wire_job_event_encode(&e),
                   "{\"id\":5,\"job_id\":4,\"at\":\"2026-11-21T10:00:00.000001Z\","
                   "\"type\":\"swapped_out\",\"message\":\"moved 1 GiB\",\"attempt\":2,"
                   "\"seq\":7}");
}

static void times_are_rfc3339_utc_with_microseconds_and_zero_is_null(void **state)
{
    json_t *t = ts_wire_time(1795255200123456LL);
    assert_string_equal(json_string_value(t), "2026-11-21T10:00:00.123456Z");
    json_decref(t);
    t = ts_wire_time(0);
    assert_true(json_is_null(t));
    json_decref(t);
    t = ts_wire_time(-1);
    assert_string_equal(json_string_value(t), "1969-12-31T23:59:59.999999Z");
    json_decref(t);
}

static void encoders_refuse_strings_that_are_not_utf8(void **state)
{
    struct ts_job_event e = {.id = 1, .job_id = 1, .at_us = 1, .type = "x", .message = "\xff\xfe"};
    assert_null(ts_wire_job_event_encode(&e));
}

/* ---- the agent protocol ---------------------------------------------------- */

static enum ts_err reg_from(const char *text, struct ts_arena *a, struct ts_node_reg *out,
                            struct ts_error *err)
{
    json_t *v = body(text);
    enum ts_err e = ts_wire_node_reg_decode(v, a, out, err);
    json_decref(v);
    return e;
}

static void registrations_decode_and_refuse_what_cannot_be(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_node_reg *r = ts_arena_alloc(a, sizeof(*r));
    struct ts_error err;
    assert_int_equal(
        reg_from("{\"cpu\": 8, \"labels\": {\"zone\": \"a\"}, \"gpu_reserve_bytes\": 1024,"
                 " \"gpus\": [{\"index\": 1, \"uuid\": \"GPU-x\", \"model\": \"M\","
                 " \"memory_bytes\": 4096}]}",
                 a, r, &err),
        TS_OK);
    assert_int_equal(r->ngpus, 1);
    assert_int_equal(r->gpus[0].index, 1);
    assert_string_equal(r->gpus[0].uuid, "GPU-x");
    assert_string_equal(r->labels, "{\"zone\":\"a\"}");
    assert_string_equal(r->collision, "wait"); /* the default */
    assert_int_equal(
        reg_from("{\"collision\": \"swap\", \"swap_bytes\": 1048576, \"gpus\": []}", a, r, &err),
        TS_OK);
    assert_string_equal(r->collision, "swap");
    assert_int_equal(r->swap_bytes, 1048576);
    assert_int_equal(reg_from("{\"collision\": \"priority\", \"gpus\": []}", a, r, &err), TS_OK);
    assert_string_equal(r->collision, "priority");
    struct {
        const char *text, *field;
        enum ts_err code;
    } bad[] = {
        {"{}", "gpus", TS_ERR_MISSING_FIELD},
        {"{\"gpus\": [], \"id\": 3}", "id", TS_ERR_UNKNOWN_FIELD},
        {"{\"gpus\": [{\"index\": 0, \"uuid\": \"a\", \"model\": \"m\", \"memory_bytes\": 9},"
         " {\"index\": 0, \"uuid\": \"b\", \"model\": \"m\", \"memory_bytes\": 9}]}",
         "gpus[1]", TS_ERR_INVALID_VALUE},
        {"{\"gpus\": [{\"index\": 0, \"uuid\": \"a\", \"model\": \"m\", \"memory_bytes\": 9},"
         " {\"index\": 1, \"uuid\": \"a\", \"model\": \"m\", \"memory_bytes\": 9}]}",
         "gpus[1]", TS_ERR_INVALID_VALUE},
        {"{\"gpu_reserve_bytes\": 9, \"gpus\": [{\"index\": 0, \"uuid\": \"a\", \"model\": \"m\","
         " \"memory_bytes\": 9}]}",
         "gpu_reserve_bytes", TS_ERR_INVALID_VALUE},
        {"{\"gpus\": [{\"index\": 64, \"uuid\": \"a\", \"model\": \"m\", \"memory_bytes\": 9}]}",
         "gpus[0].index", TS_ERR_INVALID_VALUE},
        {"{\"gpus\": [{\"uuid\": \"a\", \"model\": \"m\", \"memory_bytes\": 9}]}", "gpus[0]",
         TS_ERR_MISSING_FIELD},
        {"{\"gpus\": [{\"index\": 0, \"uuid\": \"\", \"model\": \"m\", \"memory_bytes\": 9}]}",
         "gpus[0].uuid", TS_ERR_INVALID_VALUE},
        {"{\"cpu\": \"8\", \"gpus\": []}", "cpu", TS_ERR_WRONG_TYPE},
        {"{\"collision\": \"kill\", \"gpus\": []}", "collision", TS_ERR_INVALID_VALUE},
        {"{\"collision\": \"Swap\", \"gpus\": []}", "collision", TS_ERR_INVALID_VALUE},
        {"{\"collision\": true, \"gpus\": []}", "collision", TS_ERR_WRONG_TYPE},
        {"{\"swap_used_bytes\": 0, \"gpus\": []}", "swap_used_bytes", TS_ERR_UNKNOWN_FIELD},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        enum ts_err e = reg_from(bad[i].text, a, r, &err);
        if (e != bad[i].code || strcmp(err.field, bad[i].field) != 0)
            fail_msg("%s: got %d at \"%s\" (%s), want %d at \"%s\"", bad[i].text, e, err.field,
                     err.message, bad[i].code, bad[i].field);
    }
    ts_arena_free(a);
}

static void reports_decode_jobs_and_samples(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_node_report rep;
    struct ts_error err;
    json_t *v =
        body("{\"jobs\": [{\"id\": 5, \"attempt\": 2, \"state\": \"exited\", \"signal\": 9,"
             " \"message\": \"short\"}, {\"id\": 6, \"attempt\": 1, \"state\": \"running\","
             " \"pid\": 77, \"gpu_utilization\": 0.5}],"
             " \"gpus\": [{\"index\": 1, \"utilization\": 0.25, \"memory_used_bytes\": 10}]}");
    assert_int_equal(ts_wire_node_report_decode(v, a, &rep, &err), TS_OK);
    json_decref(v);
    assert_int_equal(rep.njobs, 2);
    assert_int_equal(rep.jobs[0].state, TS_REPORT_EXITED);
    assert_int_equal(rep.jobs[0].signal, 9);
    assert_false(rep.jobs[0].has_exit_code);
    assert_string_equal(rep.jobs[0].message, "short");
    assert_true(rep.jobs[1].has_usage);
    assert_int_equal(rep.jobs[1].pid, 77);
    assert_int_equal(rep.ngpus, 1);
    assert_true(rep.gpus[0].utilization == 0.25);
    const char *bad[] = {
        "{\"jobs\": [{\"id\": 5, \"attempt\": 1, \"state\": \"done\"}]}",
        "{\"jobs\": [{\"id\": 5, \"state\": \"running\"}]}",
        "{\"jobs\": [{\"id\": 5, \"attempt\": 1, \"state\": \"running\", \"gpu_utilization\": 2}]}",
        "{\"gpus\": [{\"index\": 0, \"utilization\": -1}]}",
        "{\"nodes\": []}",
        "{\"jobs\": {}}",
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        v = body(bad[i]);
        if (ts_wire_node_report_decode(v, a, &rep, &err) == TS_OK)
            fail_msg("accepted: %s", bad[i]);
        json_decref(v);
    }
    ts_arena_free(a);
}

static void reports_name_a_jobs_physical_gpus_beside_its_logical_ones(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_node_report rep;
    struct ts_error err;
    json_t *v = body("{\"jobs\": [{\"id\": 6, \"attempt\": 1, \"state\": \"running\","
                     " \"gpus\": [{\"index\": 0, \"physical_index\": 1}]},"
                     " {\"id\": 7, \"attempt\": 0, \"state\": \"running\"}]}");
    assert_int_equal(ts_wire_node_report_decode(v, a, &rep, &err), TS_OK);
    json_decref(v);
    assert_int_equal(rep.jobs[0].nplaces, 1);
    assert_int_equal(rep.jobs[0].places[0].index, 0);
    assert_int_equal(rep.jobs[0].places[0].physical_index, 1);
    /* an agent before issue 17 sends no gpus: accepted, nothing placed */
    assert_int_equal(rep.jobs[1].nplaces, 0);
    static const struct {
        const char *body, *field, *message;
    } bad[] = {
        {"[{\"index\": 0}]", "jobs[0].gpus[0]", "jobs[0].gpus[0] needs index and physical_index"},
        {"[{\"index\": 0, \"physical_index\": 64}]", "jobs[0].gpus[0].physical_index", NULL},
        {"[{\"index\": -1, \"physical_index\": 0}]", "jobs[0].gpus[0].index", NULL},
        {"[{\"index\": 0, \"physical_index\": 1, \"uuid\": \"x\"}]", NULL, NULL},
        {"[{\"index\": 0, \"physical_index\": 1}, {\"index\": 0, \"physical_index\": 0}]",
         "jobs[0].gpus[1]", "jobs[0].gpus[1].index repeats GPU 0"},
        {"{\"index\": 0}", "jobs[0].gpus", "jobs[0].gpus must be an array"},
        {"[1]", NULL, NULL},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        char text[512];
        snprintf(text, sizeof(text),
                 "{\"jobs\": [{\"id\": 6, \"attempt\": 1, \"state\": \"running\", \"gpus\": %s}]}",
                 bad[i].body);
        v = body(text);
        memset(&err, 0, sizeof(err));
        if (ts_wire_node_report_decode(v, a, &rep, &err) == TS_OK)
            fail_msg("accepted: %s", bad[i].body);
        json_decref(v);
        if (bad[i].field != NULL && strcmp(err.field, bad[i].field) != 0)
            fail_msg("%s: field %s, not %s", bad[i].body, err.field, bad[i].field);
        if (bad[i].message != NULL && strcmp(err.message, bad[i].message) != 0)
            fail_msg("%s: %s", bad[i].body, err.message);
    }
    ts_arena_free(a);
}

static void reports_decode_evicted_exits_and_swap_held_while_running(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_node_report rep;
    struct ts_error err;
    json_t *v =
        body("{\"jobs\": [{\"id\": 5, \"attempt\": 2, \"state\": \"exited\", \"signal\": 9,"
             " \"evicted\": true, \"message\": \"ended on node n1 by the priority resolver to make"
             " room for job 12\"},"
             " {\"id\": 6, \"attempt\": 1, \"state\": \"exited\", \"exit_code\": 1},"
             " {\"id\": 7, \"attempt\": 1, \"state\": \"exited\", \"exit_code\": 0,"
             " \"evicted\": false},"
             " {\"id\": 8, \"attempt\": 3, \"state\": \"running\", \"swapped_bytes\": 2147483648,"
             " \"gpu_memory_used_bytes\": 4294967296},"
             " {\"id\": 9, \"attempt\": 1, \"state\": \"running\", \"evicted\": false},"
             " {\"id\": 10, \"attempt\": 1, \"state\": \"failed_to_start\", \"evicted\": true}]}");
    assert_int_equal(ts_wire_node_report_decode(v, a, &rep, &err), TS_OK);
    json_decref(v);
    assert_int_equal(rep.njobs, 6);
    assert_true(rep.jobs[0].evicted);
    assert_int_equal(rep.jobs[0].signal, 9);
    assert_string_equal(rep.jobs[0].message,
                        "ended on node n1 by the priority resolver to make room for job 12");
    assert_false(rep.jobs[1].evicted); /* absent: false */
    assert_false(rep.jobs[2].evicted);
    assert_int_equal(rep.jobs[3].state, TS_REPORT_RUNNING);
    assert_true(rep.jobs[3].has_swapped_bytes);
    assert_int_equal(rep.jobs[3].swapped_bytes, 2147483648LL);
    assert_int_equal(rep.jobs[3].gpu_memory_used_bytes, 4294967296LL);
    assert_false(rep.jobs[4].has_swapped_bytes);
    assert_false(rep.jobs[4].evicted);
    /* ended before it had started: ended all the same */
    assert_int_equal(rep.jobs[5].state, TS_REPORT_FAILED_TO_START);
    assert_true(rep.jobs[5].evicted);

    struct {
        const char *text, *field;
        enum ts_err code;
    } bad[] = {
        /* only an ended job was ended to make room */
        {"{\"jobs\": [{\"id\": 5, \"attempt\": 1, \"state\": \"running\", \"evicted\": true}]}",
         "jobs[0].evicted", TS_ERR_INVALID_VALUE},
        {"{\"jobs\": [{\"id\": 5, \"attempt\": 1, \"state\": \"suspended\", \"evicted\": "
         "true}]}",
         "jobs[0].evicted", TS_ERR_INVALID_VALUE},
        {"{\"jobs\": [{\"id\": 5, \"attempt\": 1, \"state\": \"exited\", \"evicted\": 1}]}",
         "jobs[0].evicted", TS_ERR_WRONG_TYPE},
        {"{\"jobs\": [{\"id\": 5, \"attempt\": 1, \"state\": \"exited\", \"evicted\": "
         "\"yes\"}]}",
         "jobs[0].evicted", TS_ERR_WRONG_TYPE},
        {"{\"jobs\": [{\"id\": 5, \"attempt\": 1, \"state\": \"running\", \"swapped_bytes\": "
         "-1}]}",
         "jobs[0].swapped_bytes", TS_ERR_INVALID_VALUE},
        {"{\"jobs\": [{\"id\": 5, \"attempt\": 1, \"state\": \"running\", \"swapped_bytes\": "
         "\"1GiB\"}]}",
         "jobs[0].swapped_bytes", TS_ERR_WRONG_TYPE},
        {"{\"jobs\": [{\"id\": 5, \"attempt\": 1, \"state\": \"exited\", \"evict\": true}]}",
         "jobs[0].evict", TS_ERR_UNKNOWN_FIELD},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        v = body(bad[i].text);
        enum ts_err e = ts_wire_node_report_decode(v, a, &rep, &err);
        json_decref(v);
        if (e != bad[i].code || strcmp(err.field, bad[i].field) != 0)
            fail_msg("%s: got %d at \"%s\" (%s), want %d at \"%s\"", bad[i].text, e, err.field,
                     err.message, bad[i].code, bad[i].field);
    }
    v = body("{\"jobs\": [{\"id\": 5, \"attempt\": 1, \"state\": \"running\", \"evicted\": "
             "true}]}");
    assert_int_equal(ts_wire_node_report_decode(v, a, &rep, &err), TS_ERR_INVALID_VALUE);
    assert_string_equal(err.message,
                        "jobs[0].evicted is only for a job reported exited or failed_to_start: "
                        "running");
    json_decref(v);
    ts_arena_free(a);
}

static void reports_decode_suspended_jobs_and_resolver_events(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_node_report rep;
    struct ts_error err;
    json_t *v =
        body("{\"jobs\": [{\"id\": 5, \"attempt\": 2, \"state\": \"suspended\","
             " \"swapped_bytes\": 4096}, {\"id\": 6, \"attempt\": 1, \"state\": \"suspended\"}],"
             " \"events\": [{\"id\": 5, \"attempt\": 2, \"seq\": 1, \"type\": \"swapped_out\","
             " \"message\": \"4 KiB to host RAM: \\u00e9t\\u00e9\"}]}");
    assert_int_equal(ts_wire_node_report_decode(v, a, &rep, &err), TS_OK);
    json_decref(v);
    assert_int_equal(rep.njobs, 2);
    assert_int_equal(rep.jobs[0].state, TS_REPORT_SUSPENDED);
    assert_true(rep.jobs[0].has_swapped_bytes);
    assert_int_equal(rep.jobs[0].swapped_bytes, 4096);
    assert_false(rep.jobs[1].has_swapped_bytes);
    assert_int_equal(rep.nevents, 1);
    assert_int_equal(rep.events[0].id, 5);
    assert_int_equal(rep.events[0].attempt, 2);
    assert_int_equal(rep.events[0].seq, 1);
    assert_string_equal(rep.events[0].type, "swapped_out");
    assert_string_equal(rep.events[0].message, "4 KiB to host RAM: \xc3\xa9t\xc3\xa9");

    /* a message of 1000 characters (2000 bytes) is allowed, 1001 are not */
    char *msg = malloc(4100), *text = malloc(4300);
    assert_non_null(msg);
    assert_non_null(text);
    for (int n = 1000; n <= 1001; n++) {
        msg[0] = '\0';
        for (int i = 0; i < n; i++)
            strcat(msg + (i ? 2 * (i - 1) : 0), "\xc3\xa9");
        snprintf(text, 4300,
                 "{\"events\": [{\"id\": 1, \"attempt\": 1, \"seq\": 1, \"type\": \"t\","
                 " \"message\": \"%s\"}]}",
                 msg);
        v = body(text);
        enum ts_err e = ts_wire_node_report_decode(v, a, &rep, &err);
        json_decref(v);
        if (n == 1000)
            assert_int_equal(e, TS_OK);
        else {
            assert_int_equal(e, TS_ERR_INVALID_VALUE);
            assert_string_equal(err.field, "events[0].message");
        }
    }
    free(msg);
    free(text);

    struct {
        const char *text, *field;
        enum ts_err code;
    } bad[] = {
        {"{\"events\": [{\"id\": 1, \"attempt\": 1, \"seq\": 0, \"type\": \"t\", \"message\": "
         "\"\"}]}",
         "events[0].seq", TS_ERR_INVALID_VALUE},
        {"{\"events\": [{\"id\": 1, \"attempt\": 1, \"type\": \"t\", \"message\": \"\"}]}",
         "events[0]", TS_ERR_MISSING_FIELD},
        {"{\"events\": [{\"id\": 1, \"attempt\": 1, \"seq\": 1, \"message\": \"\"}]}",
         "events[0].type", TS_ERR_MISSING_FIELD},
        {"{\"events\": [{\"id\": 1, \"attempt\": 1, \"seq\": 1, \"type\": \"t\"}]}",
         "events[0].message", TS_ERR_MISSING_FIELD},
        {"{\"events\": [{\"id\": 1, \"attempt\": 1, \"seq\": 1, \"type\": \"Swapped\","
         " \"message\": \"\"}]}",
         "events[0].type", TS_ERR_INVALID_VALUE},
        {"{\"events\": [{\"id\": 1, \"attempt\": 1, \"seq\": 1,"
         " \"type\": \"abcdefghijklmnopqrstuvwxyz_abcdefg\", \"message\": \"\"}]}",
         "events[0].type", TS_ERR_INVALID_VALUE},
        {"{\"events\": [{\"id\": 1, \"attempt\": 1, \"seq\": 1, \"type\": \"\", \"message\": "
         "\"\"}]}",
         "events[0].type", TS_ERR_INVALID_VALUE},
        {"{\"events\": [{\"id\": 1, \"attempt\": 1, \"seq\": 1, \"type\": \"t\", \"message\": \"\","
         " \"at\": 1}]}",
         "events[0].at", TS_ERR_UNKNOWN_FIELD},
        {"{\"events\": {}}", "events", TS_ERR_WRONG_TYPE},
        {"{\"jobs\": [{\"id\": 5, \"attempt\": 1, \"state\": \"suspended\", \"swapped_bytes\": "
         "-1}]}",
         "jobs[0].swapped_bytes", TS_ERR_INVALID_VALUE},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        v = body(bad[i].text);
        enum ts_err e = ts_wire_node_report_decode(v, a, &rep, &err);
        json_decref(v);
        if (e != bad[i].code || strcmp(err.field, bad[i].field) != 0)
            fail_msg("%s: got %d at \"%s\" (%s), want %d at \"%s\"", bad[i].text, e, err.field,
                     err.message, bad[i].code, bad[i].field);
    }
    /* at most 1000 events in one report */
    json_t *many = json_object();
    json_t *evs = json_array();
    for (int i = 0; i < 1001; i++)
        json_array_append_new(evs, json_pack("{s:i, s:i, s:i, s:s, s:s}", "id", 1, "attempt", 1,
                                             "seq", i + 1, "type", "memory_wait", "message", "m"));
    json_object_set_new(many, "events", evs);
    assert_int_equal(ts_wire_node_report_decode(many, a, &rep, &err), TS_ERR_INVALID_VALUE);
    assert_string_equal(err.field, "events");
    json_array_remove(evs, 0);
    assert_int_equal(ts_wire_node_report_decode(many, a, &rep, &err), TS_OK);
    assert_int_equal(rep.nevents, 1000);
    json_decref(many);
    ts_arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_json_object_body_parses),
        cmocka_unit_test(a_body_need_not_be_nul_terminated),
        cmocka_unit_test(duplicate_keys_are_malformed_json_naming_the_key),
        cmocka_unit_test(nested_duplicate_keys_are_refused_too),
        cmocka_unit_test(syntax_errors_give_line_and_column),
        cmocka_unit_test(trailing_garbage_and_empty_bodies_are_malformed),
        cmocka_unit_test(a_nul_byte_inside_the_body_is_malformed),
        cmocka_unit_test(bodies_that_are_not_objects_are_the_wrong_type),
        cmocka_unit_test(very_deep_nesting_is_refused_without_crashing),
        cmocka_unit_test(a_null_error_pointer_is_allowed),
        cmocka_unit_test(a_project_with_a_full_quota_decodes),
        cmocka_unit_test(an_absent_quota_takes_the_defaults),
        cmocka_unit_test(an_unknown_quota_member_is_refused_naming_its_path),
        cmocka_unit_test(an_unknown_top_level_member_is_refused_naming_the_type),
        cmocka_unit_test(sending_back_a_read_only_member_is_unknown_with_a_hint),
        cmocka_unit_test(a_quota_of_the_wrong_type_is_refused),
        cmocka_unit_test(a_limit_below_the_quota_is_refused_with_both_numbers),
        cmocka_unit_test(negative_and_huge_quota_numbers_are_refused),
        cmocka_unit_test(an_integral_real_is_an_integer_and_negative_zero_is_zero),
        cmocka_unit_test(project_names_are_required_and_validated),
        cmocka_unit_test(values_in_messages_are_escaped_and_cut),
        cmocka_unit_test(a_cut_value_in_a_message_stays_valid_utf8),
        cmocka_unit_test(a_quota_decodes_as_a_request_body_of_its_own),
        cmocka_unit_test(departments_decode_name_and_quota),
        cmocka_unit_test(a_decoder_given_an_array_says_the_body_must_be_an_object),
        cmocka_unit_test(projects_encode_with_quota_status_and_time),
        cmocka_unit_test(departments_encode_with_a_project_count),
        cmocka_unit_test(a_decoded_project_encodes_back_to_what_was_sent),
        cmocka_unit_test(a_project_quota_has_max_pending_and_a_department_quota_has_not),
        cmocka_unit_test(a_project_quota_has_a_job_user_root_only_when_allowed),
        cmocka_unit_test(a_token_decodes_its_role_and_projects_into_the_arena),
        cmocka_unit_test(token_roles_and_project_lists_are_checked),
        cmocka_unit_test(tokens_encode_their_secret_only_when_it_is_there),
        cmocka_unit_test(an_agent_token_names_its_nodes_by_name_or_prefix),
        cmocka_unit_test(node_patterns_match_a_name_or_a_prefix),
        cmocka_unit_test(roles_have_one_name_each_and_parse_back),
        cmocka_unit_test(nodes_encode_with_their_gpus_and_labels),
        cmocka_unit_test(registrations_decode_and_refuse_what_cannot_be),
        cmocka_unit_test(reports_decode_jobs_and_samples),
        cmocka_unit_test(reports_name_a_jobs_physical_gpus_beside_its_logical_ones),
        cmocka_unit_test(reports_decode_suspended_jobs_and_resolver_events),
        cmocka_unit_test(reports_decode_evicted_exits_and_swap_held_while_running),
        cmocka_unit_test(job_events_encode),
        cmocka_unit_test(times_are_rfc3339_utc_with_microseconds_and_zero_is_null),
        cmocka_unit_test(encoders_refuse_strings_that_are_not_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
