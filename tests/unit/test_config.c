/*
 * test_config.c - option tables (api/config.h): defaults, config file,
 * environment, flags, their precedence, --help, secrets and the messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/array.h"
#include "api/config.h"

struct cfg {
    char *listen;
    char *data_dir;
    char *password;
    int64_t workers;
    bool verbose;
    int64_t max_body;
    int64_t timeout;
    char *resolver;
    int64_t offset;
};

#define OPT(f) offsetof(struct cfg, f)

static const struct ts_option table[] = {
    {"listen", TS_OPT_HOSTPORT, OPT(listen), "127.0.0.1:8080", "HOST:PORT", "address to serve on",
     0, 0, NULL, 0},
    {"data-dir", TS_OPT_STRING, OPT(data_dir), NULL, "DIR", "state folder", 0, 0, NULL, 0},
    {"password", TS_OPT_STRING, OPT(password), "hunter2", "SECRET", "database password", 0, 0, NULL,
     TS_OPT_SECRET},
    {"workers", TS_OPT_INT, OPT(workers), "4", "N", "worker threads", 1, 64, NULL, 0},
    {"verbose", TS_OPT_BOOL, OPT(verbose), "false", NULL, "say more", 0, 0, NULL, 0},
    {"max-body", TS_OPT_BYTES, OPT(max_body), "1MiB", "SIZE", "largest body", 1024, 1LL << 30, NULL,
     0},
    {"timeout", TS_OPT_DURATION, OPT(timeout), "60s", "DURATION", "idle timeout", 1, 3600, NULL, 0},
    {"resolver", TS_OPT_ENUM, OPT(resolver), "wait", NULL, "collision resolver", 0, 0,
     "wait|priority|swap", 0},
    {"offset", TS_OPT_INT, OPT(offset), NULL, "N", "any integer", 0, 0, NULL, 0},
};
#define N (TS_ARRAY_LEN(table))

static const char *const env_names[] = {
    "TESSERA_LISTEN",  "TESSERA_DATA_DIR", "TESSERA_PASSWORD", "TESSERA_WORKERS",
    "TESSERA_VERBOSE", "TESSERA_MAX_BODY", "TESSERA_TIMEOUT",  "TESSERA_RESOLVER",
    "TESSERA_OFFSET",  "TESSERA_CONFIG",
};

struct fixture {
    struct cfg cfg;
    struct ts_error err;
    char path[64]; /* a config file, "" when none was written */
};

static int setup(void **state)
{
    for (size_t i = 0; i < TS_ARRAY_LEN(env_names); i++)
        unsetenv(env_names[i]);
    struct fixture *f = calloc(1, sizeof(*f));
    *state = f;
    return f != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    ts_config_free(table, N, &f->cfg);
    if (f->path[0] != '\0')
        unlink(f->path);
    free(f);
    for (size_t i = 0; i < TS_ARRAY_LEN(env_names); i++)
        unsetenv(env_names[i]);
    return 0;
}

/* Write text to a new config file; its path is f->path. */
static const char *write_file(struct fixture *f, const char *text)
{
    snprintf(f->path, sizeof(f->path), "/tmp/ts-test-config-XXXXXX");
    int fd = mkstemp(f->path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return f->path;
}

/* Load with argv = {"prog", args..., NULL}. */
static enum ts_config_result load_rest(struct fixture *f, int *rest_argc, char ***rest_argv,
                                       const char *const *args)
{
    static char *argv[32];
    int argc = 0;
    argv[argc++] = "prog";
    for (; args != NULL && *args != NULL; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    ts_config_free(table, N, &f->cfg);
    return ts_config_load(table, N, &f->cfg, "usage: prog [OPTIONS]", argc, argv, rest_argc,
                          rest_argv, &f->err);
}

#define LOAD(f, ...) load_rest((f), NULL, NULL, (const char *const[]){__VA_ARGS__, NULL})
#define LOAD_NONE(f) load_rest((f), NULL, NULL, NULL)

static void assert_config_error(struct fixture *f, enum ts_config_result r, const char *message)
{
    if (r != TS_CONFIG_ERROR)
        fail_msg("expected an error: %s", message);
    assert_int_equal(f->err.code, TS_ERR_CONFIG);
    assert_string_equal(f->err.message, message);
}

/* ---- sources and precedence --------------------------------------------------------- */

static void defaults_apply_when_nothing_is_given(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(LOAD_NONE(f), TS_CONFIG_OK);
    assert_string_equal(f->cfg.listen, "127.0.0.1:8080");
    assert_null(f->cfg.data_dir);
    assert_string_equal(f->cfg.password, "hunter2");
    assert_int_equal(f->cfg.workers, 4);
    assert_false(f->cfg.verbose);
    assert_int_equal(f->cfg.max_body, 1 << 20);
    assert_int_equal(f->cfg.timeout, 60);
    assert_string_equal(f->cfg.resolver, "wait");
    assert_int_equal(f->cfg.offset, 0);
}

static void the_file_beats_defaults_env_beats_the_file_and_flags_beat_env(void **state)
{
    struct fixture *f = *state;
    write_file(f, "workers = 5\ntimeout = 2m\nresolver = swap\nmax-body = 2MiB\n");
    setenv("TESSERA_TIMEOUT", "3m", 1);
    setenv("TESSERA_RESOLVER", "priority", 1);
    assert_int_equal(LOAD(f, "--config", f->path, "--resolver=wait"), TS_CONFIG_OK);
    assert_int_equal(f->cfg.workers, 5);                  /* file */
    assert_int_equal(f->cfg.timeout, 180);                /* env over file */
    assert_string_equal(f->cfg.resolver, "wait");         /* flag over env */
    assert_int_equal(f->cfg.max_body, 2 << 20);           /* file */
    assert_string_equal(f->cfg.listen, "127.0.0.1:8080"); /* default */
}

static void flags_take_their_value_after_an_equals_sign_or_as_the_next_argument(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(LOAD(f, "--workers=8", "--data-dir", "/var/lib/t", "--offset", "-3"),
                     TS_CONFIG_OK);
    assert_int_equal(f->cfg.workers, 8);
    assert_string_equal(f->cfg.data_dir, "/var/lib/t");
    assert_int_equal(f->cfg.offset, -3);
    assert_int_equal(LOAD(f, "--data-dir="), TS_CONFIG_OK);
    assert_string_equal(f->cfg.data_dir, "");
}

static void the_last_of_repeated_flags_wins(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(LOAD(f, "--workers=8", "--workers", "9"), TS_CONFIG_OK);
    assert_int_equal(f->cfg.workers, 9);
}

static void a_bare_bool_flag_is_true_and_bools_read_the_usual_words(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(LOAD(f, "--verbose"), TS_CONFIG_OK);
    assert_true(f->cfg.verbose);
    const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        char arg[32];
        snprintf(arg, sizeof(arg), "--verbose=%s", yes[i]);
        assert_int_equal(LOAD(f, arg), TS_CONFIG_OK);
        assert_true(f->cfg.verbose);
        snprintf(arg, sizeof(arg), "--verbose=%s", no[i]);
        assert_int_equal(LOAD(f, arg), TS_CONFIG_OK);
        assert_false(f->cfg.verbose);
    }
    setenv("TESSERA_VERBOSE", "yes", 1);
    assert_int_equal(LOAD_NONE(f), TS_CONFIG_OK);
    assert_true(f->cfg.verbose);
    assert_config_error(f, LOAD(f, "--verbose=maybe"),
                        "invalid value for --verbose: \"maybe\": expected true or false");
}

static void environment_names_are_upper_case_with_underscores(void **state)
{
    struct fixture *f = *state;
    setenv("TESSERA_DATA_DIR", "/data", 1);
    setenv("TESSERA_MAX_BODY", "64KiB", 1);
    assert_int_equal(LOAD_NONE(f), TS_CONFIG_OK);
    assert_string_equal(f->cfg.data_dir, "/data");
    assert_int_equal(f->cfg.max_body, 64 << 10);
}

static void unknown_tessera_variables_in_the_environment_are_ignored(void **state)
{
    struct fixture *f = *state;
    setenv("TESSERA_NO_SUCH_OPTION", "1", 1);
    assert_int_equal(LOAD_NONE(f), TS_CONFIG_OK);
    unsetenv("TESSERA_NO_SUCH_OPTION");
}

/* ---- the config file ------------------------------------------------------------------- */

static void the_file_reads_comments_quotes_and_either_spelling_of_names(void **state)
{
    struct fixture *f = *state;
    write_file(f, "# Tessera\n"
                  "\n"
                  "   data_dir   =   \"/srv/my \\\"data\\\" \\\\dir\"   # quoted\r\n"
                  "listen=0.0.0.0:9000 # public\n"
                  "\tverbose = on\n"
                  "max_body = 4KiB");
    setenv("TESSERA_CONFIG", f->path, 1);
    assert_int_equal(LOAD_NONE(f), TS_CONFIG_OK);
    assert_string_equal(f->cfg.data_dir, "/srv/my \"data\" \\dir");
    assert_string_equal(f->cfg.listen, "0.0.0.0:9000");
    assert_true(f->cfg.verbose);
    assert_int_equal(f->cfg.max_body, 4096);
}

static void a_hash_inside_a_bare_value_is_kept(void **state)
{
    struct fixture *f = *state;
    write_file(f, "data-dir = /srv/a#b\n");
    assert_int_equal(LOAD(f, "--config", f->path), TS_CONFIG_OK);
    assert_string_equal(f->cfg.data_dir, "/srv/a#b");
}

static void an_unknown_name_in_the_file_names_the_file_and_line(void **state)
{
    struct fixture *f = *state;
    write_file(f, "# c\nworkers = 2\nlisen = :80\n");
    char want[256];
    snprintf(want, sizeof(want), "config file %s line 3: unknown option \"lisen\"", f->path);
    assert_config_error(f, LOAD(f, "--config", f->path), want);
}

static void a_bad_value_in_the_file_names_the_file_line_and_option(void **state)
{
    struct fixture *f = *state;
    write_file(f, "workers = 2\nworkers = many\n");
    char want[256];
    snprintf(want, sizeof(want),
             "config file %s line 2: invalid value for workers: \"many\": expected an integer",
             f->path);
    assert_config_error(f, LOAD(f, "--config", f->path), want);
    assert_string_equal(f->err.field, "workers");
}

static void a_line_without_an_equals_sign_is_a_syntax_error(void **state)
{
    struct fixture *f = *state;
    const char *bad[] = {"workers 2\n", "= 2\n", "data-dir = \"open\n", "data-dir = \"a\" b\n",
                         "data-dir = \"a\\n\"\n"};
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        write_file(f, bad[i]);
        char want[256];
        snprintf(want, sizeof(want), "config file %s line 1: expected name = value", f->path);
        assert_config_error(f, LOAD(f, "--config", f->path), want);
        unlink(f->path);
    }
}

static void a_config_file_cannot_name_another(void **state)
{
    struct fixture *f = *state;
    write_file(f, "config = /etc/other.conf\n");
    assert_int_equal(LOAD(f, "--config", f->path), TS_CONFIG_ERROR);
    assert_non_null(strstr(f->err.message, "unknown option \"config\""));
    assert_string_equal(f->err.hint, "a config file cannot name another one");
}

static void a_missing_config_file_is_an_error_naming_it(void **state)
{
    struct fixture *f = *state;
    assert_config_error(
        f, LOAD(f, "--config=/nonexistent/t.conf"),
        "could not open config file /nonexistent/t.conf: No such file or directory");
}

static void the_config_flag_beats_tessera_config_and_an_empty_one_is_none(void **state)
{
    struct fixture *f = *state;
    write_file(f, "workers = 7\n");
    setenv("TESSERA_CONFIG", "/nonexistent/t.conf", 1);
    assert_int_equal(LOAD(f, "--config", f->path), TS_CONFIG_OK);
    assert_int_equal(f->cfg.workers, 7);
    setenv("TESSERA_CONFIG", "", 1);
    assert_int_equal(LOAD_NONE(f), TS_CONFIG_OK);
    assert_int_equal(f->cfg.workers, 4);
}

/* ---- values and ranges ---------------------------------------------------------------- */

static void integers_outside_their_range_are_refused_with_the_range(void **state)
{
    struct fixture *f = *state;
    assert_config_error(f, LOAD(f, "--workers=0"),
                        "invalid value for --workers: \"0\": must be between 1 and 64");
    assert_config_error(f, LOAD(f, "--workers", "65"),
                        "invalid value for --workers: \"65\": must be between 1 and 64");
    assert_config_error(f, LOAD(f, "--workers= 5"),
                        "invalid value for --workers: \" 5\": expected an integer");
    assert_config_error(f, LOAD(f, "--workers=99999999999999999999"),
                        "invalid value for --workers: \"99999999999999999999\": expected an "
                        "integer");
    assert_int_equal(LOAD(f, "--offset=-9223372036854775808"), TS_CONFIG_OK);
    assert_int_equal(f->cfg.offset, INT64_MIN);
}

static void sizes_and_durations_use_the_units_syntax_and_ranges(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(LOAD(f, "--max-body=1.5MiB", "--timeout=1h"), TS_CONFIG_OK);
    assert_int_equal(f->cfg.max_body, 1572864);
    assert_int_equal(f->cfg.timeout, 3600);
    assert_config_error(f, LOAD(f, "--max-body=20XB"),
                        "invalid value for --max-body: \"20XB\": expected a size such as 512MiB "
                        "or 20GiB");
    assert_config_error(f, LOAD(f, "--max-body=2GiB"),
                        "invalid value for --max-body: \"2GiB\": must be between 1KiB and 1GiB");
    assert_config_error(f, LOAD(f, "--timeout=soon"),
                        "invalid value for --timeout: \"soon\": expected a duration such as 30s, "
                        "1h30m or 2d");
    setenv("TESSERA_TIMEOUT", "2h", 1);
    assert_config_error(f, LOAD_NONE(f),
                        "invalid value for TESSERA_TIMEOUT: \"2h\": must be between 1s and 1h");
}

static void enums_accept_only_their_choices(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(LOAD(f, "--resolver", "priority"), TS_CONFIG_OK);
    assert_string_equal(f->cfg.resolver, "priority");
    assert_config_error(f, LOAD(f, "--resolver=kill"),
                        "invalid value for --resolver: \"kill\": expected wait, priority or swap");
    assert_config_error(f, LOAD(f, "--resolver=wai"),
                        "invalid value for --resolver: \"wai\": expected wait, priority or swap");
}

static void host_and_port_are_checked(void **state)
{
    struct fixture *f = *state;
    const char *good[] = {"127.0.0.1:8080", ":80", "[::1]:0", "example.com:65535", "[fe80::1]:9"};
    for (size_t i = 0; i < TS_ARRAY_LEN(good); i++) {
        char arg[64];
        snprintf(arg, sizeof(arg), "--listen=%s", good[i]);
        if (LOAD(f, arg) != TS_CONFIG_OK)
            fail_msg("%s: %s", good[i], f->err.message);
    }
    const char *bad[] = {"x",     "8080",   "host:",  "host:http", "host:65536",
                         "[::1]", "::1:80", "a b:80", "[]:80",     "host:-1"};
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        char arg[64], want[128];
        snprintf(arg, sizeof(arg), "--listen=%s", bad[i]);
        snprintf(want, sizeof(want), "invalid value for --listen: \"%s\": expected HOST:PORT",
                 bad[i]);
        assert_config_error(f, LOAD(f, arg), want);
    }
}

static void a_bad_default_in_the_table_is_reported_as_such(void **state)
{
    struct fixture *f = *state;
    const struct ts_option broken[] = {
        {"workers", TS_OPT_INT, OPT(workers), "many", "N", "x", 1, 64, NULL, 0},
    };
    char *argv[] = {"prog", NULL};
    assert_int_equal(ts_config_load(broken, 1, &f->cfg, "usage", 1, argv, NULL, NULL, &f->err),
                     TS_CONFIG_ERROR);
    assert_string_equal(f->err.message,
                        "invalid default for --workers: \"many\": expected an integer");
}

static void a_minimum_without_a_maximum_is_no_upper_bound(void **state)
{
    struct fixture *f = *state;
    const struct ts_option t[] = {
        {"workers", TS_OPT_INT, OPT(workers), "1", "N", "x", 1, 0, NULL, 0},
    };
    char *argv[] = {"prog", "--workers=1000000", NULL};
    assert_int_equal(ts_config_load(t, 1, &f->cfg, "usage", 2, argv, NULL, NULL, &f->err),
                     TS_CONFIG_OK);
    assert_int_equal(f->cfg.workers, 1000000);
    char *low[] = {"prog", "--workers=0", NULL};
    assert_int_equal(ts_config_load(t, 1, &f->cfg, "usage", 2, low, NULL, NULL, &f->err),
                     TS_CONFIG_ERROR);
    assert_string_equal(f->err.message, "invalid value for --workers: \"0\": must be at least 1");
}

/* ---- the command line -------------------------------------------------------------- */

static void unknown_flags_and_missing_values_are_errors(void **state)
{
    struct fixture *f = *state;
    assert_config_error(f, LOAD(f, "--lisen=:80"), "unknown option --lisen");
    assert_config_error(f, LOAD(f, "-x"), "unknown option -x");
    assert_config_error(f, LOAD(f, "--workers"), "option --workers needs a value");
    assert_config_error(f, LOAD(f, "--config"), "option --config needs a value");
}

static void positional_arguments_start_at_the_first_non_option_or_after_dashes(void **state)
{
    struct fixture *f = *state;
    int rc = -1;
    char **rv = NULL;
    assert_int_equal(
        load_rest(f, &rc, &rv, (const char *const[]){"--workers=2", "run", "--verbose", NULL}),
        TS_CONFIG_OK);
    assert_int_equal(rc, 2);
    assert_string_equal(rv[0], "run");
    assert_string_equal(rv[1], "--verbose");
    assert_false(f->cfg.verbose);
    assert_int_equal(
        load_rest(f, &rc, &rv, (const char *const[]){"--verbose", "--", "--workers=3", NULL}),
        TS_CONFIG_OK);
    assert_int_equal(rc, 1);
    assert_string_equal(rv[0], "--workers=3");
    assert_int_equal(f->cfg.workers, 4);
    assert_int_equal(load_rest(f, &rc, &rv, (const char *const[]){"--verbose", NULL}),
                     TS_CONFIG_OK);
    assert_int_equal(rc, 0);
    assert_null(rv[0]);
    assert_int_equal(load_rest(f, &rc, &rv, (const char *const[]){"-", NULL}), TS_CONFIG_OK);
    assert_int_equal(rc, 1);
}

static void positional_arguments_are_refused_when_the_caller_takes_none(void **state)
{
    struct fixture *f = *state;
    assert_config_error(f, LOAD(f, "--verbose", "extra"), "unexpected argument \"extra\"");
}

static void secrets_are_refused_on_the_command_line_in_either_form(void **state)
{
    struct fixture *f = *state;
    const char *want = "--password cannot be given on the command line, where other users could "
                       "read it: set TESSERA_PASSWORD or password in the config file";
    assert_config_error(f, LOAD(f, "--password=s3cret"), want);
    assert_config_error(f, LOAD(f, "--password", "s3cret"), want);
    assert_null(strstr(f->err.message, "s3cret"));
    assert_null(f->cfg.password);
}

static void secrets_come_from_the_environment_or_the_file(void **state)
{
    struct fixture *f = *state;
    setenv("TESSERA_PASSWORD", "from-env", 1);
    assert_int_equal(LOAD_NONE(f), TS_CONFIG_OK);
    assert_string_equal(f->cfg.password, "from-env");
    unsetenv("TESSERA_PASSWORD");
    write_file(f, "password = \"from file\"\n");
    assert_int_equal(LOAD(f, "--config", f->path), TS_CONFIG_OK);
    assert_string_equal(f->cfg.password, "from file");
}

static void a_secret_is_refused_from_a_file_every_user_can_read(void **state)
{
    struct fixture *f = *state;
    write_file(f, "workers = 3\npassword = s3cret\n");
    assert_int_equal(chmod(f->path, 0644), 0);
    enum ts_config_result r = LOAD(f, "--config", f->path);
    char want[256];
    snprintf(want, sizeof(want),
             "config file %s line 2: password is a secret, and every user can read the file "
             "(mode 0644)",
             f->path);
    assert_config_error(f, r, want);
    assert_null(strstr(f->err.message, "s3cret"));
    assert_null(f->cfg.password);
    /* readable by its owner and group (root:tessera 0640) is fine, and so is a
     * world-readable file without a secret */
    assert_int_equal(chmod(f->path, 0640), 0);
    assert_int_equal(LOAD(f, "--config", f->path), TS_CONFIG_OK);
    assert_string_equal(f->cfg.password, "s3cret");
    unlink(f->path);
    write_file(f, "workers = 3\n");
    assert_int_equal(chmod(f->path, 0644), 0);
    assert_int_equal(LOAD(f, "--config", f->path), TS_CONFIG_OK);
}

static void a_bad_secret_value_is_not_echoed(void **state)
{
    struct fixture *f = *state;
    const struct ts_option t[] = {
        {"pin", TS_OPT_INT, OPT(workers), NULL, "N", "x", 0, 9999, NULL, TS_OPT_SECRET},
    };
    setenv("TESSERA_PIN", "12345678", 1);
    char *argv[] = {"prog", NULL};
    assert_int_equal(ts_config_load(t, 1, &f->cfg, "usage", 1, argv, NULL, NULL, &f->err),
                     TS_CONFIG_ERROR);
    unsetenv("TESSERA_PIN");
    assert_string_equal(f->err.message,
                        "invalid value for TESSERA_PIN: must be between 0 and 9999");
}

static void strings_are_null_after_an_error_and_free_is_idempotent(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(LOAD(f, "--data-dir=/x", "--workers=0"), TS_CONFIG_ERROR);
    assert_null(f->cfg.data_dir);
    assert_null(f->cfg.listen);
    assert_null(f->cfg.resolver);
    ts_config_free(table, N, &f->cfg);
    ts_config_free(table, N, &f->cfg);
    ts_config_free(table, N, NULL);
}

/* ---- --help ---------------------------------------------------------------------------- */

/* What fn printed to stdout. New string. */
static char *capture_stdout(struct fixture *f, enum ts_config_result *r, const char *arg1,
                            const char *arg2)
{
    char path[] = "/tmp/ts-test-stdout-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    *r = LOAD(f, arg1, arg2);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    off_t len = lseek(fd, 0, SEEK_END);
    char *text = calloc(1, (size_t)len + 1);
    assert_non_null(text);
    assert_int_equal(pread(fd, text, (size_t)len, 0), len);
    close(fd);
    unlink(path);
    return text;
}

static void help_prints_every_option_with_its_default_and_environment_name(void **state)
{
    struct fixture *f = *state;
    enum ts_config_result r;
    char *out = capture_stdout(f, &r, "--help", NULL);
    assert_int_equal(r, TS_CONFIG_HELP);
    assert_memory_equal(out, "usage: prog [OPTIONS]\n", 22);
    for (size_t i = 0; i < N; i++) {
        char flag[64];
        snprintf(flag, sizeof(flag), "--%s", table[i].name);
        if (strstr(out, flag) == NULL)
            fail_msg("--help lacks %s:\n%s", flag, out);
    }
    assert_non_null(strstr(out, "--listen HOST:PORT"));
    assert_non_null(strstr(out, "(default 127.0.0.1:8080; env TESSERA_LISTEN)"));
    assert_non_null(strstr(out, "--resolver wait|priority|swap"));
    assert_non_null(strstr(out, "--config FILE"));
    assert_non_null(strstr(out, "(secret: env TESSERA_PASSWORD or the config file only)"));
    assert_null(strstr(out, "hunter2"));
    assert_null(strstr(out, "--verbose VALUE"));
    free(out);
}

static void help_wins_over_errors_on_the_same_command_line(void **state)
{
    struct fixture *f = *state;
    enum ts_config_result r;
    char *out = capture_stdout(f, &r, "--workers=0", "-h");
    assert_int_equal(r, TS_CONFIG_HELP);
    assert_non_null(strstr(out, "--workers N"));
    free(out);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(defaults_apply_when_nothing_is_given),
        T(the_file_beats_defaults_env_beats_the_file_and_flags_beat_env),
        T(flags_take_their_value_after_an_equals_sign_or_as_the_next_argument),
        T(the_last_of_repeated_flags_wins),
        T(a_bare_bool_flag_is_true_and_bools_read_the_usual_words),
        T(environment_names_are_upper_case_with_underscores),
        T(unknown_tessera_variables_in_the_environment_are_ignored),
        T(the_file_reads_comments_quotes_and_either_spelling_of_names),
        T(a_hash_inside_a_bare_value_is_kept),
        T(an_unknown_name_in_the_file_names_the_file_and_line),
        T(a_bad_value_in_the_file_names_the_file_line_and_option),
        T(a_line_without_an_equals_sign_is_a_syntax_error),
        T(a_config_file_cannot_name_another),
        T(a_missing_config_file_is_an_error_naming_it),
        T(the_config_flag_beats_tessera_config_and_an_empty_one_is_none),
        T(integers_outside_their_range_are_refused_with_the_range),
        T(sizes_and_durations_use_the_units_syntax_and_ranges),
        T(enums_accept_only_their_choices),
        T(host_and_port_are_checked),
        T(a_bad_default_in_the_table_is_reported_as_such),
        T(a_minimum_without_a_maximum_is_no_upper_bound),
        T(unknown_flags_and_missing_values_are_errors),
        T(positional_arguments_start_at_the_first_non_option_or_after_dashes),
        T(positional_arguments_are_refused_when_the_caller_takes_none),
        T(secrets_are_refused_on_the_command_line_in_either_form),
        T(secrets_come_from_the_environment_or_the_file),
        T(a_secret_is_refused_from_a_file_every_user_can_read),
        T(a_bad_secret_value_is_not_echoed),
        T(strings_are_null_after_an_error_and_free_is_idempotent),
        T(help_prints_every_option_with_its_default_and_environment_name),
        T(help_wins_over_errors_on_the_same_command_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
