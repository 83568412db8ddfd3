/*
 * args.h - a command line read against option tables.
 *
 * Options: `--name VALUE`, `--name=VALUE`, `-p VALUE`, `-pVALUE`, and short
 * flags together (`-Af`). A value may begin with "-" (`--priority -5`).
 * Everything that is not an option is positional; after "--" everything is
 * the job's command and is not read as options. An option given twice keeps
 * its last value unless it repeats (--env K=V...), when all are kept in
 * order. `-h` and `--help` are always known. An unknown long option's
 * message suggests the closest known one ("did you mean --gpus?").
 */
#ifndef TS_API_CLI_ARGS_H
#define TS_API_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/err.h"

struct ts_opt {
    const char *name;    /* long name without dashes: "gpu-portion-request" */
    char short_name;     /* 'p', or 0 */
    const char *metavar; /* "PROJECT"; NULL: a flag that takes no value */
    const char *help;    /* one line, lower case */
    bool repeat;         /* may be given more than once, every value kept */
};

struct ts_args_item {
    const struct ts_opt *opt; /* borrowed from the table */
    const char *value;        /* borrowed from argv; "" for a flag */
};

struct ts_args {
    struct ts_args_item *items; /* new; in command-line order */
    size_t nitems;
    char **pos; /* new array of strings borrowed from argv */
    int npos;
    char **rest; /* borrowed from argv: what follows "--"; NULL without "--" */
    int nrest;
    bool help; /* -h or --help was given */
};

/*
 * Read argv (borrowed, argc entries, none of them the program or command
 * name) against the options of up to two tables (each ends with a NULL name;
 * either may be NULL). On an unknown option or a missing value returns
 * TS_ERR_BAD_PARAMETER with a message; *a then holds what was read (free it
 * either way with ts_args_free).
 */
enum ts_err ts_args_parse(struct ts_args *a, const struct ts_opt *t1, const struct ts_opt *t2,
                          int argc, char **argv, struct ts_error *err);
void ts_args_free(struct ts_args *a);

/* The edit distance (insertions, deletions, substitutions, swaps of two
 * neighbours) between a and b;
 * SIZE_MAX when either is over 64 bytes. */
size_t ts_args_distance(const char *a, const char *b);
/* Of the n candidates (borrowed; NULL entries skipped), the first closest to
 * word, when it is close enough to be a typo of it (1 edit for words under
 * 5 characters, 2 under 9, else 3); NULL otherwise. For "did you mean"
 * after an unknown option or command. */
const char *ts_args_closest(const char *word, const char *const *cands, size_t n);

/* The last value of option name (borrowed), "" for a flag, NULL when not
 * given. */
const char *ts_args_get(const struct ts_args *a, const char *name);
bool ts_args_has(const struct ts_args *a, const char *name);
/* Every value of a repeating option, in order, into out (at most max);
 * returns how many were given. */
size_t ts_args_all(const struct ts_args *a, const char *name, const char **out, size_t max);

/*
 * Typed values. Each returns 0 when the option is absent (out untouched) or
 * valid (out set), and -1 with a message in err when its value does not
 * parse or is out of range: `--priority must be an integer from 0 to 1000:
 * "x"`.
 */
int ts_args_int(const struct ts_args *a, const char *name, long long min, long long max,
                long long *out, struct ts_error *err);
int ts_args_double(const struct ts_args *a, const char *name, double min, double max, double *out,
                   struct ts_error *err);
/* A byte size as api/units.h reads it ("32G", "20GiB"), its unit required:
 * a bare number ("20") is refused, as no one means 20 bytes. */
int ts_args_bytes(const struct ts_args *a, const char *name, int64_t *out, struct ts_error *err);

#endif /* TS_API_CLI_ARGS_H */
