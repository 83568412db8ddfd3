/*
 * test_base.c - the base helpers of api/ that the server, the agent and the
 * CLI share: the monotonic clock, a sleep that a signal does not cut short,
 * atomic writes and whole-file reads, folder trees with their modes, and the
 * byte and GPU formatters of the pending reasons.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/array.h"
#include "api/clock.h"
#include "api/files.h"
#include "api/units.h"

static void on_alarm(int sig)
{
    (void)sig;
}

static void a_sleep_lasts_its_whole_time_through_a_signal(void **state)
{
    (void)state;
    struct sigaction sa = {.sa_handler = on_alarm}, old;
    assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
    struct itimerval it = {.it_value = {.tv_usec = 50000}};
    assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
    int64_t t0 = ts_now_ms(), n0 = ts_now_ns();
    ts_sleep_ms(200);
    int64_t t1 = ts_now_ms(), n1 = ts_now_ns();
    sigaction(SIGALRM, &old, NULL);
    assert_true(t1 - t0 >= 199 && t1 - t0 < 2000);
    /* the two clocks are the same clock */
    assert_true((n1 - n0) / 1000000 >= t1 - t0 - 2 && (n1 - n0) / 1000000 <= t1 - t0 + 2);
    t0 = ts_now_ms();
    ts_sleep_ms(0);
    ts_sleep_ms(-5);
    assert_true(ts_now_ms() - t0 < 100);
}

static void files_are_written_whole_read_back_and_removed_as_a_tree(void **state)
{
    (void)state;
    char dir[] = "/tmp/ts_base_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[200], leaf[200], file[256];
    snprintf(path, sizeof path, "%s/a/b/c", dir);
    snprintf(leaf, sizeof leaf, "%s/a/b", dir);
    mode_t um = umask(0);
    assert_int_equal(ts_files_mkdirs_parents(path, 0755, 0700), 0);
    umask(um);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(stat(leaf, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0755);
    /* again: it exists, which is fine */
    assert_int_equal(ts_files_mkdirs(path, 0700), 0);

    snprintf(file, sizeof file, "%s/f.txt", path);
    assert_int_equal(ts_files_write_atomic(file, "one\ntwo", 7, 0600), 0);
    size_t n = 0;
    char *text = ts_files_read(file, 1 << 20, &n);
    assert_non_null(text);
    assert_int_equal(n, 7);
    assert_string_equal(text, "one\ntwo");
    free(text);
    static char big[20000];
    memset(big, 'x', sizeof big);
    assert_int_equal(ts_files_write_quick(file, big, sizeof big, 0600), 0);
    errno = 0;
    assert_null(ts_files_read(file, 10000, NULL)); /* longer than max */
    assert_int_equal(errno, EFBIG);
    /* a file where a folder is asked for */
    assert_int_equal(ts_files_mkdirs(file, 0700), -ENOTDIR);

    snprintf(leaf, sizeof leaf, "%s/a", dir);
    assert_int_equal(ts_files_remove_tree(leaf), 0);
    assert_false(ts_files_exists(leaf));
    assert_int_equal(ts_files_remove_tree(leaf), 0); /* gone already: not an error */
    assert_int_equal(rmdir(dir), 0);
}

/* The agent's data folder must not depend on its unit's UMask= (issue 19):
 * what ts_files makes has the mode asked for, under 0077 as under 0022. */
static void folders_and_files_get_their_modes_whatever_the_umask(void **state)
{
    (void)state;
    char dir[] = "/tmp/ts_base_XXXXXX";
    assert_non_null(mkdtemp(dir));
    static const mode_t umasks[] = {0077, 0022, 0};
    for (size_t i = 0; i < TS_ARRAY_LEN(umasks); i++) {
        char parent[64], path[96], file[128];
        snprintf(parent, sizeof parent, "%s/u%zu", dir, i);
        snprintf(path, sizeof path, "%s/shared", parent);
        snprintf(file, sizeof file, "%s/ledger", path);
        mode_t um = umask(umasks[i]);
        int made = ts_files_mkdirs_parents(path, 0711, 0755);
        int wrote = ts_files_write_atomic(file, "x", 1, 0666);
        int again = ts_files_mkdirs(path, 0700); /* exists: keeps its mode */
        umask(um);
        assert_int_equal(made, 0);
        assert_int_equal(wrote, 0);
        assert_int_equal(again, 0);
        struct stat st;
        assert_int_equal(stat(parent, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0711);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);
        assert_int_equal(stat(file, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0666);
    }
    assert_int_equal(ts_files_remove_tree(dir), 0);
}

static void bytes_and_gpus_are_written_for_a_sentence(void **state)
{
    (void)state;
    char b[32];
    const int64_t gib = INT64_C(1) << 30, mib = INT64_C(1) << 20;
    assert_string_equal(ts_bytesize_human(20 * gib, b, sizeof b), "20 GiB");
    assert_string_equal(ts_bytesize_human(gib + gib / 2, b, sizeof b), "1.5 GiB");
    assert_string_equal(ts_bytesize_human(512 * mib, b, sizeof b), "512 MiB");
    assert_string_equal(ts_bytesize_human(1000, b, sizeof b), "1000 bytes");
    assert_string_equal(ts_bytesize_human(0, b, sizeof b), "0 bytes");
    /* the exact form, which ts_bytesize_parse reads back */
    assert_string_equal(ts_bytesize_format(gib + gib / 2, b, sizeof b), "1536MiB");
    assert_string_equal(ts_gpus_format(2, b, sizeof b), "2");
    assert_string_equal(ts_gpus_format(0.5, b, sizeof b), "0.5");
    assert_string_equal(ts_gpus_format(2.25, b, sizeof b), "2.25");
    assert_string_equal(ts_gpus_format(1.0 / 3, b, sizeof b), "0.33");
    assert_string_equal(ts_gpus_format(-0.0001, b, sizeof b), "0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_sleep_lasts_its_whole_time_through_a_signal),
        cmocka_unit_test(files_are_written_whole_read_back_and_removed_as_a_tree),
        cmocka_unit_test(folders_and_files_get_their_modes_whatever_the_umask),
        cmocka_unit_test(bytes_and_gpus_are_written_for_a_sentence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
