/*
 * test_errcodes.c - api/errcodes.def against itself and against the
 * ErrorCode enum of api/openapi.yaml, so that neither drifts.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/err.h"

static const struct {
    enum ts_err e;
    const char *name;
    int status;
    const char *code;
    const char *title;
} defs[] = {
#define TS_ERRCODE(name, status, code, title) {TS_ERR_##name, #name, status, code, title},
#include "api/array.h"
#include "api/errcodes.def"
#undef TS_ERRCODE
};
#define NDEFS (TS_ARRAY_LEN(defs))

static void every_code_string_and_enum_name_is_unique(void **state)
{
    assert_int_equal(NDEFS, TS_ERR__COUNT);
    for (size_t i = 0; i < NDEFS; i++) {
        assert_int_equal(defs[i].e, (enum ts_err)i);
        for (size_t j = i + 1; j < NDEFS; j++) {
            if (strcmp(defs[i].code, defs[j].code) == 0)
                fail_msg("code \"%s\" appears twice", defs[i].code);
            if (strcmp(defs[i].name, defs[j].name) == 0)
                fail_msg("TS_ERR_%s appears twice", defs[i].name);
        }
    }
}

static void every_error_has_a_4xx_or_5xx_status_and_ok_is_200(void **state)
{
    for (size_t i = 0; i < NDEFS; i++) {
        if (defs[i].e == TS_OK) {
            assert_int_equal(defs[i].status, 200);
            continue;
        }
        if (defs[i].status < 400 || defs[i].status > 599)
            fail_msg("%s has status %d", defs[i].code, defs[i].status);
    }
}

static void codes_are_snake_case_and_titles_are_set(void **state)
{
    for (size_t i = 0; i < NDEFS; i++) {
        const char *c = defs[i].code;
        assert_true(c[0] >= 'a' && c[0] <= 'z');
        for (; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || *c == '_' || (*c >= '0' && *c <= '9')))
                fail_msg("code \"%s\" is not snake_case", defs[i].code);
        assert_true(defs[i].title[0] != '\0');
    }
}

static void the_derived_tables_agree_with_the_list(void **state)
{
    for (size_t i = 0; i < NDEFS; i++) {
        assert_int_equal(ts_err_http_status(defs[i].e), defs[i].status);
        assert_string_equal(ts_err_code(defs[i].e), defs[i].code);
        assert_string_equal(ts_err_title(defs[i].e), defs[i].title);
        assert_int_equal(ts_err_from_code(defs[i].code), defs[i].e);
    }
    assert_int_equal(ts_err_from_code("no_such_code"), TS_ERR__COUNT);
    assert_int_equal(ts_err_http_status(TS_ERR__COUNT), 500);
    assert_string_equal(ts_err_code((enum ts_err) - 1), "internal");
}

/* ---- api/openapi.yaml ------------------------------------------------------------ */

static size_t indent_of(const char *line)
{
    size_t n = 0;
    while (line[n] == ' ')
        n++;
    return n;
}

/* A YAML scalar as written in a list: bare, 'single' or "double" quoted;
 * trailing comment and spaces removed. In place. */
static char *scalar(char *s)
{
    while (*s == ' ')
        s++;
    char *end;
    if (*s == '"' || *s == '\'') {
        end = strchr(s + 1, *s);
        if (end == NULL)
            return NULL;
        *end = '\0';
        return s + 1;
    }
    end = strstr(s, " #");
    if (end == NULL)
        end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        end--;
    *end = '\0';
    return s;
}

struct names {
    char **v;
    size_t n;
};

static void add_name(struct names *l, const char *s)
{
    char **v = realloc(l->v, (l->n + 1) * sizeof(*v));
    assert_non_null(v);
    l->v = v;
    l->v[l->n] = strdup(s);
    assert_non_null(l->v[l->n]);
    l->n++;
}

static void free_names(struct names *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

/* Split a flow sequence "[a, b, 'c']" into names. In place. */
static void add_flow(struct names *l, char *s)
{
    char *open = strchr(s, '['), *close = strrchr(s, ']');
    assert_non_null(open);
    assert_non_null(close);
    *close = '\0';
    for (char *save = NULL, *tok = strtok_r(open + 1, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        char *v = scalar(tok);
        if (v != NULL && *v != '\0')
            add_name(l, v);
    }
}

/*
 * The values of the `enum:` of the `ErrorCode:` schema: the lines under
 * "ErrorCode:" (indented deeper) up to the next key at its indentation;
 * within them `enum:` followed by "- value" lines, or `enum: [a, b]`.
 */
static int read_error_code_enum(FILE *f, struct names *out)
{
    char line[1024];
    long schema_indent = -1, enum_indent = -1;
    bool found_enum = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        size_t ind = indent_of(line);
        const char *text = line + ind;
        if (text[0] == '\0' || text[0] == '#')
            continue;
        if (schema_indent < 0) {
            if (strncmp(text, "ErrorCode:", 10) == 0) {
                schema_indent = (long)ind;
                char *inline_enum = strstr(line, "enum:");
                if (inline_enum != NULL && strchr(inline_enum, '[') != NULL) {
                    add_flow(out, inline_enum); /* ErrorCode: {type: string, enum: [...]} */
                    return 0;
                }
            }
            continue;
        }
        if ((long)ind <= schema_indent)
            break; /* the schema ended */
        if (enum_indent >= 0) {
            if (text[0] == '-' && (long)ind >= enum_indent) {
                char *v = scalar(line + ind + 1);
                if (v != NULL && *v != '\0')
                    add_name(out, v);
                continue;
            }
            if ((long)ind <= enum_indent)
                enum_indent = -1; /* the list ended */
            else
                continue;
        }
        if (strncmp(text, "enum:", 5) == 0) {
            found_enum = true;
            if (strchr(text, '[') != NULL)
                add_flow(out, line + ind);
            else
                enum_indent = (long)ind;
        }
    }
    return schema_indent >= 0 && found_enum ? 0 : -1;
}

static bool listed(const struct names *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0)
            return true;
    return false;
}

static void openapi_error_code_enum_matches_errcodes_def(void **state)
{
    const char *root = getenv("TS_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/api/openapi.yaml", root != NULL ? root : ".");
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        print_message("api/openapi.yaml not found at %s: enum check skipped\n", path);
        skip();
        return;
    }
    struct names codes = {0};
    int r = read_error_code_enum(f, &codes);
    fclose(f);
    if (r != 0) {
        free_names(&codes);
        fail_msg("%s has no ErrorCode schema with an enum", path);
    }
    for (size_t i = 0; i < NDEFS; i++) {
        if (defs[i].e != TS_OK && !listed(&codes, defs[i].code)) {
            free_names(&codes);
            fail_msg("%s: ErrorCode enum lacks \"%s\" (api/errcodes.def)", path, defs[i].code);
        }
    }
    for (size_t i = 0; i < codes.n; i++) {
        if (ts_err_from_code(codes.v[i]) == TS_ERR__COUNT) {
            char bad[128];
            snprintf(bad, sizeof(bad), "%s", codes.v[i]);
            free_names(&codes);
            fail_msg("%s: ErrorCode enum has \"%s\", which api/errcodes.def does not", path, bad);
        }
    }
    free_names(&codes);
}

static void the_enum_reader_finds_block_and_flow_lists_and_stops_at_the_next_schema(void **state)
{
    const char *yaml = "components:\n"
                       "  schemas:\n"
                       "    Other:\n"
                       "      enum: [x]\n"
                       "    ErrorCode:\n"
                       "      type: string\n"
                       "      enum:\n"
                       "        - ok\n"
                       "        - \"malformed_json\"  # quoted\n"
                       "        # a comment\n"
                       "        - 'wrong_type'\n"
                       "      description: codes\n"
                       "    Role: {type: string, enum: [admin]}\n"
                       "    More:\n"
                       "      enum:\n"
                       "        - not_an_error_code\n";
    FILE *f = fmemopen((void *)yaml, strlen(yaml), "r");
    assert_non_null(f);
    struct names l = {0};
    assert_int_equal(read_error_code_enum(f, &l), 0);
    fclose(f);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.v[0], "ok");
    assert_string_equal(l.v[1], "malformed_json");
    assert_string_equal(l.v[2], "wrong_type");
    free_names(&l);
    l = (struct names){0};

    const char *flow = "    ErrorCode:\n      type: string\n      enum: [ok, \"in_use\"]\n";
    f = fmemopen((void *)flow, strlen(flow), "r");
    assert_non_null(f);
    assert_int_equal(read_error_code_enum(f, &l), 0);
    fclose(f);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.v[1], "in_use");
    free_names(&l);
    l = (struct names){0};

    const char *inline_map = "    ErrorCode: {type: string, enum: [ok, conflict]}\n";
    f = fmemopen((void *)inline_map, strlen(inline_map), "r");
    assert_non_null(f);
    assert_int_equal(read_error_code_enum(f, &l), 0);
    fclose(f);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.v[1], "conflict");
    free_names(&l);
    l = (struct names){0};

    const char *none = "    ErrorCodes:\n      enum: [ok]\n";
    f = fmemopen((void *)none, strlen(none), "r");
    struct names empty = {0};
    assert_int_equal(read_error_code_enum(f, &empty), -1);
    fclose(f);
    free_names(&empty);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_code_string_and_enum_name_is_unique),
        cmocka_unit_test(every_error_has_a_4xx_or_5xx_status_and_ok_is_200),
        cmocka_unit_test(codes_are_snake_case_and_titles_are_set),
        cmocka_unit_test(the_derived_tables_agree_with_the_list),
        cmocka_unit_test(the_enum_reader_finds_block_and_flow_lists_and_stops_at_the_next_schema),
        cmocka_unit_test(openapi_error_code_enum_matches_errcodes_def),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
