/*
 * test_cli_text.c - what the `tessera` CLI writes and reads as text, without
 * a server: numbers and sizes (api/cli/out.h), size flags and typo guesses
 * (api/cli/args.h), tables (api/cli/table.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/array.h"
#include "api/cli/args.h"
#include "api/cli/out.h"
#include "api/cli/table.h"

static void gpus_print_with_at_most_two_decimals(void **state)
{
    const struct {
        double v;
        const char *want;
    } cases[] = {{1.95513, "1.96"}, {0.205128, "0.21"},   {2, "2"},    {2.5, "2.5"},
                 {0.25, "0.25"},    {0.001, "0.001"},     {0, "0"},    {1000, "1000"},
                 {0.1, "0.1"},      {-0.0001, "-0.0001"}, {0.999, "1"}};
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        char buf[32];
        json_t *v = json_real(cases[i].v);
        assert_string_equal(ts_out_num(v, buf, sizeof(buf)), cases[i].want);
        json_decref(v);
    }
}

static void bytes_print_in_the_largest_binary_unit(void **state)
{
    const struct {
        long long v;
        const char *want;
    } cases[] = {{24684084LL * 1024, "23.54GiB"},
                 {20LL << 30, "20GiB"},
                 {1536LL << 20, "1.5GiB"},
                 {4294967296LL, "4GiB"},
                 {512, "512B"},
                 {0, "0B"},
                 {1023, "1023B"},
                 {80LL << 30, "80GiB"}};
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        char buf[32];
        json_t *v = json_integer(cases[i].v);
        assert_string_equal(ts_out_bytes(v, buf, sizeof(buf)), cases[i].want);
        json_decref(v);
    }
}

static const struct ts_opt opts[] = {
    {"gpus", 'g', "N", "whole GPUs", false},
    {"gpu-memory-request", 0, "SIZE", "GPU memory", false},
    {"state", 0, "STATE", "states", false},
    {NULL, 0, NULL, NULL, false},
};

static void a_size_without_a_unit_is_refused_naming_the_units(void **state)
{
    const char *bare[] = {"20", "0", "1.5"};
    for (size_t i = 0; i < TS_ARRAY_LEN(bare); i++) {
        char *argv[] = {"--gpu-memory-request", (char *)bare[i]};
        struct ts_args a;
        struct ts_error err;
        ts_error_clear(&err);
        assert_int_equal(ts_args_parse(&a, opts, NULL, 2, argv, &err), TS_OK);
        int64_t v = -1;
        assert_int_equal(ts_args_bytes(&a, "gpu-memory-request", &v, &err), -1);
        assert_int_equal(v, -1);
        char want[64];
        snprintf(want, sizeof(want), "--gpu-memory-request %s: give a unit, e.g. %sGiB", bare[i],
                 bare[i]);
        assert_non_null(strstr(err.message, want));
        assert_non_null(strstr(err.message, "MiB"));
        ts_args_free(&a);
    }
    char *argv[] = {"--gpu-memory-request", "20G"};
    struct ts_args a;
    struct ts_error err;
    ts_error_clear(&err);
    assert_int_equal(ts_args_parse(&a, opts, NULL, 2, argv, &err), TS_OK);
    int64_t v = -1;
    assert_int_equal(ts_args_bytes(&a, "gpu-memory-request", &v, &err), 0);
    assert_int_equal(v, 20LL << 30);
    ts_args_free(&a);
}

static void a_typo_is_matched_to_the_closest_word(void **state)
{
    assert_int_equal(ts_args_distance("gpu", "gpus"), 1);
    assert_int_equal(ts_args_distance("lsit", "list"), 1); /* a swap */
    assert_int_equal(ts_args_distance("", "abc"), 3);
    assert_int_equal(ts_args_distance("kitten", "sitting"), 3);
    const char *cmds[] = {"login", "list", "logs", "queue", "submit"};
    assert_string_equal(ts_args_closest("lsit", cmds, 5), "list");
    assert_string_equal(ts_args_closest("sumbit", cmds, 5), "submit");
    assert_null(ts_args_closest("frobnicate", cmds, 5));
    assert_null(ts_args_closest("xy", cmds, 5));
    char *argv[] = {"--gpu", "1"};
    struct ts_args a;
    struct ts_error err;
    ts_error_clear(&err);
    assert_int_equal(ts_args_parse(&a, opts, NULL, 2, argv, &err), TS_ERR_BAD_PARAMETER);
    assert_string_equal(err.message, "unknown option --gpu; did you mean --gpus?");
    ts_args_free(&a);
    char *argv2[] = {"--colour"};
    ts_error_clear(&err);
    assert_int_equal(ts_args_parse(&a, opts, NULL, 1, argv2, &err), TS_ERR_BAD_PARAMETER);
    assert_string_equal(err.message, "unknown option --colour");
    ts_args_free(&a);
}

/* t printed with width and headers, as a new string. */
static char *printed(const struct ts_table *t, int width, bool headers)
{
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    assert_non_null(f);
    ts_table_print(t, f, width, headers);
    fclose(f);
    return s;
}

static void a_table_is_cut_only_within_a_width_and_may_drop_its_header(void **state)
{
    static const struct ts_col cols[] = {{"ID", 0, true}, {"NAME", 4, false}};
    struct ts_table *t = ts_table_new(cols, 2);
    ts_table_add(t, "1");
    ts_table_add(t, "a-name-longer-than-twenty-characters");
    char *s = printed(t, 0, true); /* no limit: what a pipe gets */
    assert_string_equal(s, "ID  NAME\n 1  a-name-longer-than-twenty-characters\n");
    free(s);
    s = printed(t, 0, false);
    assert_string_equal(s, " 1  a-name-longer-than-twenty-characters\n");
    free(s);
    s = printed(t, 12, true);
    assert_string_equal(s, "ID  NAME\n 1  a-name-\xe2\x80\xa6\n");
    free(s);
    ts_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpus_print_with_at_most_two_decimals),
        cmocka_unit_test(bytes_print_in_the_largest_binary_unit),
        cmocka_unit_test(a_size_without_a_unit_is_refused_naming_the_units),
        cmocka_unit_test(a_typo_is_matched_to_the_closest_word),
        cmocka_unit_test(a_table_is_cut_only_within_a_width_and_may_drop_its_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
