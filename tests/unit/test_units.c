/*
 * test_units.c - names, byte sizes and durations (api/units.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/array.h"
#include "api/units.h"

static int64_t size_of(const char *s)
{
    int64_t v = -12345;
    assert_int_equal(ts_bytesize_parse(s, &v), 0);
    return v;
}

static void assert_size_refused(const char *s)
{
    int64_t v = -12345;
    if (ts_bytesize_parse(s, &v) == 0)
        fail_msg("\"%s\" was read as %lld bytes", s, (long long)v);
    assert_int_equal(v, -12345); /* untouched */
}

static int64_t duration_of(const char *s)
{
    int64_t v = -12345;
    assert_int_equal(ts_duration_parse(s, &v), 0);
    return v;
}

static void assert_duration_refused(const char *s)
{
    int64_t v = -12345;
    if (ts_duration_parse(s, &v) == 0)
        fail_msg("\"%s\" was read as %lld seconds", s, (long long)v);
    assert_int_equal(v, -12345);
}

/* ---- names ------------------------------------------------------------------ */

static void names_of_lower_case_letters_digits_and_hyphens_are_valid(void **state)
{
    assert_true(ts_name_valid("vision"));
    assert_true(ts_name_valid("a"));
    assert_true(ts_name_valid("0"));
    assert_true(ts_name_valid("team-7-nlp"));
    assert_true(ts_name_valid("a-"));
}

static void names_of_63_characters_are_valid_and_64_are_not(void **state)
{
    char name[65];
    memset(name, 'a', 64);
    name[63] = '\0';
    assert_true(ts_name_valid(name));
    name[63] = 'a';
    name[64] = '\0';
    assert_false(ts_name_valid(name));
}

static void names_with_capitals_underscores_spaces_or_a_leading_hyphen_are_invalid(void **state)
{
    assert_false(ts_name_valid(""));
    assert_false(ts_name_valid(NULL));
    assert_false(ts_name_valid("Bad_Name"));
    assert_false(ts_name_valid("Vision"));
    assert_false(ts_name_valid("a_b"));
    assert_false(ts_name_valid("a b"));
    assert_false(ts_name_valid("-a"));
    assert_false(ts_name_valid("a.b"));
    assert_false(ts_name_valid("caf\xc3\xa9"));
}

/* ---- byte sizes -------------------------------------------------------------- */

static void binary_units_are_powers_of_1024(void **state)
{
    assert_int_equal(size_of("1KiB"), 1024);
    assert_int_equal(size_of("1MiB"), 1048576);
    assert_int_equal(size_of("20GiB"), 20LL << 30);
    assert_int_equal(size_of("2TiB"), 2LL << 40);
}

static void single_letter_units_are_binary_as_slurm_reads_them(void **state)
{
    assert_int_equal(size_of("32G"), 32LL << 30);
    assert_int_equal(size_of("1K"), 1024);
    assert_int_equal(size_of("512M"), 512LL << 20);
    assert_int_equal(size_of("1T"), 1LL << 40);
}

static void two_letter_units_are_powers_of_1000(void **state)
{
    assert_int_equal(size_of("1KB"), 1000);
    assert_int_equal(size_of("500MB"), 500000000);
    assert_int_equal(size_of("3GB"), 3000000000LL);
    assert_int_equal(size_of("1TB"), 1000000000000LL);
}

static void plain_numbers_and_b_are_bytes(void **state)
{
    assert_int_equal(size_of("123"), 123);
    assert_int_equal(size_of("123B"), 123);
    assert_int_equal(size_of("0"), 0);
    assert_int_equal(size_of("0GiB"), 0);
    assert_int_equal(size_of("007MiB"), 7LL << 20);
}

static void decimal_sizes_are_exact(void **state)
{
    assert_int_equal(size_of("1.5GiB"), 1610612736LL);
    assert_int_equal(size_of("0.5KiB"), 512);
    assert_int_equal(size_of("2.25TB"), 2250000000000LL);
    assert_int_equal(size_of("1.0B"), 1);
}

static void a_fraction_of_a_byte_is_rounded_up_with_a_unit_and_refused_without(void **state)
{
    assert_int_equal(size_of("0.1KiB"), 103); /* 102.4 */
    assert_int_equal(size_of("0.001KB"), 1);
    assert_size_refused("1.5");
    assert_size_refused("1.5B");
}

static void malformed_sizes_are_refused(void **state)
{
    const char *bad[] = {"",      "20XB", "-1GiB", "1e3GiB", "GiB",   " 1GiB", "1GiB ",
                         "1 GiB", "1gib", "1b",    "1kB",    "1.GiB", ".5GiB", "1..5GiB",
                         "+1GiB", "1Gi",  "1GiBB", "0x10",   "1,5GiB"};
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++)
        assert_size_refused(bad[i]);
    int64_t v;
    assert_int_equal(ts_bytesize_parse(NULL, &v), -1);
}

static void sizes_above_2_to_the_62_are_refused_without_overflow(void **state)
{
    assert_int_equal(size_of("4611686018427387904"), TS_BYTESIZE_MAX);
    assert_int_equal(size_of("4194304TiB"), TS_BYTESIZE_MAX);
    assert_size_refused("4611686018427387905");
    assert_size_refused("4194305TiB");
    assert_size_refused("4194304.1TiB");
    assert_size_refused("9223372036854775808");
    assert_size_refused("18446744073709551617B");
    assert_size_refused("99999999999999999999999999999999GiB");
    assert_size_refused("17179869184TiB"); /* 2^34 * 2^40 wraps 64 bits to 0 */
}

static void more_than_18_decimal_places_are_refused(void **state)
{
    assert_int_equal(size_of("1.000000000000000000GiB"), 1LL << 30);
    assert_size_refused("1.0000000000000000000GiB");
}

static void sizes_format_in_the_largest_exact_binary_unit(void **state)
{
    char buf[32];
    assert_string_equal(ts_bytesize_format(20LL << 30, buf, sizeof(buf)), "20GiB");
    assert_string_equal(ts_bytesize_format(1536LL << 20, buf, sizeof(buf)), "1536MiB");
    assert_string_equal(ts_bytesize_format(123, buf, sizeof(buf)), "123B");
    assert_string_equal(ts_bytesize_format(0, buf, sizeof(buf)), "0B");
    assert_string_equal(ts_bytesize_format(1000, buf, sizeof(buf)), "1000B");
    assert_string_equal(ts_bytesize_format(3LL << 40, buf, sizeof(buf)), "3TiB");
    assert_string_equal(ts_bytesize_format(TS_BYTESIZE_MAX, buf, sizeof(buf)), "4194304TiB");
}

static void formatted_sizes_read_back_as_the_same_number(void **state)
{
    const int64_t samples[] = {0,
                               1,
                               1023,
                               1024,
                               1025,
                               1000,
                               1536LL << 20,
                               20LL << 30,
                               (20LL << 30) + 1,
                               3000000000LL,
                               TS_BYTESIZE_MAX,
                               TS_BYTESIZE_MAX - 1};
    char buf[32];
    for (size_t i = 0; i < TS_ARRAY_LEN(samples); i++)
        assert_int_equal(size_of(ts_bytesize_format(samples[i], buf, sizeof(buf))), samples[i]);
}

static void a_short_buffer_truncates_the_size_text_safely(void **state)
{
    char buf[4];
    assert_string_equal(ts_bytesize_format(20LL << 30, buf, sizeof(buf)), "20G");
}

/* ---- durations -------------------------------------------------------------- */

static void durations_add_up_their_groups(void **state)
{
    assert_int_equal(duration_of("90s"), 90);
    assert_int_equal(duration_of("30m"), 1800);
    assert_int_equal(duration_of("8h"), 28800);
    assert_int_equal(duration_of("1h30m"), 5400);
    assert_int_equal(duration_of("2d"), 172800);
    assert_int_equal(duration_of("1d2h3m4s"), 93784);
    assert_int_equal(duration_of("0s"), 0);
    assert_int_equal(duration_of("90m"), 5400);
}

static void a_plain_integer_is_seconds(void **state)
{
    assert_int_equal(duration_of("0"), 0);
    assert_int_equal(duration_of("3600"), 3600);
}

static void malformed_durations_are_refused(void **state)
{
    const char *bad[] = {"",      "h",    "-1s", "1x",  "1.5h", "1h 30m", " 1h", "1h ",
                         "30m1h", "1h1h", "1H",  "1hm", "s1",   "1ms",    "+1s"};
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++)
        assert_duration_refused(bad[i]);
    int64_t v;
    assert_int_equal(ts_duration_parse(NULL, &v), -1);
}

static void durations_over_ten_years_are_refused(void **state)
{
    assert_int_equal(duration_of("315576000"), TS_DURATION_MAX_SECONDS);
    assert_int_equal(duration_of("3652d12h"), TS_DURATION_MAX_SECONDS);
    assert_duration_refused("315576001");
    assert_duration_refused("3652d12h1s");
    assert_duration_refused("3653d");
    assert_duration_refused("99999999999999999999s");
    assert_duration_refused("9223372036854775807d");
}

static void durations_format_in_days_hours_minutes_and_seconds(void **state)
{
    char buf[32];
    assert_string_equal(ts_duration_format(28800, buf, sizeof(buf)), "8h");
    assert_string_equal(ts_duration_format(5400, buf, sizeof(buf)), "1h30m");
    assert_string_equal(ts_duration_format(45, buf, sizeof(buf)), "45s");
    assert_string_equal(ts_duration_format(0, buf, sizeof(buf)), "0s");
    assert_string_equal(ts_duration_format(172800, buf, sizeof(buf)), "2d");
    assert_string_equal(ts_duration_format(93784, buf, sizeof(buf)), "1d2h3m4s");
    assert_string_equal(ts_duration_format(3601, buf, sizeof(buf)), "1h1s");
}

static void formatted_durations_read_back_as_the_same_number(void **state)
{
    const int64_t samples[] = {
        0, 1, 59, 60, 61, 3599, 3600, 86399, 86400, 93784, TS_DURATION_MAX_SECONDS};
    char buf[32];
    for (size_t i = 0; i < TS_ARRAY_LEN(samples); i++)
        assert_int_equal(duration_of(ts_duration_format(samples[i], buf, sizeof(buf))), samples[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_of_lower_case_letters_digits_and_hyphens_are_valid),
        cmocka_unit_test(names_of_63_characters_are_valid_and_64_are_not),
        cmocka_unit_test(names_with_capitals_underscores_spaces_or_a_leading_hyphen_are_invalid),
        cmocka_unit_test(binary_units_are_powers_of_1024),
        cmocka_unit_test(single_letter_units_are_binary_as_slurm_reads_them),
        cmocka_unit_test(two_letter_units_are_powers_of_1000),
        cmocka_unit_test(plain_numbers_and_b_are_bytes),
        cmocka_unit_test(decimal_sizes_are_exact),
        cmocka_unit_test(a_fraction_of_a_byte_is_rounded_up_with_a_unit_and_refused_without),
        cmocka_unit_test(malformed_sizes_are_refused),
        cmocka_unit_test(sizes_above_2_to_the_62_are_refused_without_overflow),
        cmocka_unit_test(more_than_18_decimal_places_are_refused),
        cmocka_unit_test(sizes_format_in_the_largest_exact_binary_unit),
        cmocka_unit_test(formatted_sizes_read_back_as_the_same_number),
        cmocka_unit_test(a_short_buffer_truncates_the_size_text_safely),
        cmocka_unit_test(durations_add_up_their_groups),
        cmocka_unit_test(a_plain_integer_is_seconds),
        cmocka_unit_test(malformed_durations_are_refused),
        cmocka_unit_test(durations_over_ten_years_are_refused),
        cmocka_unit_test(durations_format_in_days_hours_minutes_and_seconds),
        cmocka_unit_test(formatted_durations_read_back_as_the_same_number),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
