/*
 * config.h - one option table per binary drives its --flags, TESSERA_*
 * environment variables, config file, --help and validation.
 *
 * Precedence, lowest first: the table's default, the config file, the
 * environment, the command line. The config file is named by --config FILE
 * or TESSERA_CONFIG and holds `name = value` lines (`#` comments, blank
 * lines; names as the long flag without dashes, "-" or "_" alike; values may
 * be double-quoted). An unknown name anywhere is an error, as is a value
 * that does not parse or is out of range; the message names the source:
 *   `invalid value for --listen: "x": expected HOST:PORT`
 *   `config file /etc/t.conf line 3: unknown option "lisen"`
 *
 * An option named "data-dir" is --data-dir, TESSERA_DATA_DIR, and data-dir or
 * data_dir in the file. Options flagged TS_OPT_SECRET are not accepted on
 * the command line (they would show in ps) nor from a config file every
 * user can read (mode o+r), and are never printed.
 *
 * Environment variables are read only for the options in the table: an
 * unknown TESSERA_* variable is not an error, since the binaries share the
 * prefix (TESSERA_TOKEN for the CLI, TESSERA_RESUME_COUNT in jobs...). The
 * file may hold comments after a value as ` # ...`; `--help` (or `-h`)
 * wins over any error on the same command line. Every error is
 * TS_ERR_CONFIG (TS_ERR_NOMEM when out of memory) with err->field set to the
 * option's name where one is concerned.
 */
#ifndef TS_API_CONFIG_H
#define TS_API_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/err.h"

enum ts_opt_type {
    TS_OPT_STRING,   /* char * (strdup'ed; freed by ts_config_free) */
    TS_OPT_INT,      /* int64_t, within [min, max] */
    TS_OPT_BOOL,     /* bool: true/false/yes/no/on/off/1/0; a bare --flag is true */
    TS_OPT_BYTES,    /* int64_t bytes, api/units.h syntax, within [min, max] */
    TS_OPT_DURATION, /* int64_t seconds, api/units.h syntax, within [min, max] */
    TS_OPT_ENUM,     /* char *, one of `choices` ("wait|priority|swap") */
    TS_OPT_HOSTPORT, /* char *, HOST:PORT, [IPV6]:PORT or :PORT; port 0..65535 */
};

#define TS_OPT_SECRET 0x1 /* environment and config file only */

struct ts_option {
    const char *name; /* long flag without dashes: "data-dir" */
    enum ts_opt_type type;
    size_t offset;       /* offsetof(struct your_config, field) */
    const char *def;     /* default as text; NULL = unset (string NULL, number 0) */
    const char *metavar; /* shown in --help: "DIR", "HOST:PORT" */
    const char *help;    /* one line, lower case */
    int64_t min, max;    /* numeric ranges (both 0 = unbounded; max < min:
                            no upper bound) */
    const char *choices; /* TS_OPT_ENUM: "a|b|c" */
    int flags;
};

enum ts_config_result {
    TS_CONFIG_OK,    /* cfg filled; positional args in *rest */
    TS_CONFIG_HELP,  /* --help or --version was given: printed to stdout */
    TS_CONFIG_ERROR, /* err filled; nothing to run */
};

/*
 * Fill cfg from the table. `usage` is the first help line
 * ("usage: tessera-server [OPTIONS]"). --help and --config are always known.
 * Arguments after "--" or the first non-option are positional: *rest_argc and
 * *rest_argv (borrowed from argv) receive them; pass NULL to refuse any.
 * The string fields of cfg are overwritten, not freed; they are new (free
 * with ts_config_free) on TS_CONFIG_OK, and NULL on TS_CONFIG_HELP and
 * TS_CONFIG_ERROR. table, usage and argv are borrowed.
 */
enum ts_config_result ts_config_load(const struct ts_option *table, size_t n, void *cfg,
                                     const char *usage, int argc, char **argv, int *rest_argc,
                                     char ***rest_argv, struct ts_error *err);
/* Print the usage and every option (default, environment name) to file, a
 * FILE * (borrowed). Secrets show no default. */
void ts_config_usage(const struct ts_option *table, size_t n, const char *usage, void *file);
/* Free the strings ts_config_load allocated in cfg and set them to NULL;
 * safe to call twice. cfg NULL is a no-op. */
void ts_config_free(const struct ts_option *table, size_t n, void *cfg);

#endif /* TS_API_CONFIG_H */
