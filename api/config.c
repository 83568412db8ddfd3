/*
 * config.c - options from a table: defaults, config file, TESSERA_*
 * environment variables and --flags, in that order of precedence.
 *
 * The command line is read first (it may name the config file, and --help
 * wins over any error in it), then the values are applied lowest precedence
 * first, so a later source overwrites an earlier one.
 */
#include "api/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/units.h"
#include "api/version.h"

#define FILE_MAX (1 << 20) /* bytes of a config file */
#define NAME_MAX_LEN 64    /* bytes of an option name */

enum source_kind { SRC_DEFAULT, SRC_FILE, SRC_ENV, SRC_FLAG };

/* Where a value came from, for messages. */
struct source {
    enum source_kind kind;
    const char *path; /* SRC_FILE */
    int line;         /* SRC_FILE */
};

/* A value given on the command line, applied after the file and env. */
struct flag_value {
    size_t opt;
    const char *value; /* borrowed from argv, or "true" */
};

static void *field_of(void *cfg, const struct ts_option *o)
{
    return (char *)cfg + o->offset;
}

/* "data-dir" and "data_dir" name the same option. */
static bool name_equal(const char *a, const char *b, size_t blen)
{
    size_t i = 0;
    for (; i < blen && a[i] != '\0'; i++) {
        char x = a[i] == '_' ? '-' : a[i];
        char y = b[i] == '_' ? '-' : b[i];
        if (x != y)
            return false;
    }
    return i == blen && a[i] == '\0';
}

static const struct ts_option *find_option(const struct ts_option *table, size_t n,
                                           const char *name, size_t len, size_t *index)
{
    for (size_t i = 0; i < n; i++) {
        if (name_equal(table[i].name, name, len)) {
            *index = i;
            return &table[i];
        }
    }
    return NULL;
}

/* TESSERA_DATA_DIR for "data-dir". */
static void env_name(const char *name, char *buf, size_t len)
{
    int n = snprintf(buf, len, "TESSERA_%s", name);
    for (size_t i = 0; n > 0 && i < (size_t)n && i < len && buf[i] != '\0'; i++)
        buf[i] = buf[i] == '-' ? '_' : (char)toupper((unsigned char)buf[i]);
}

/* How the option is named in the source a value came from. */
static void source_name(const struct ts_option *o, const struct source *src, char *buf, size_t len)
{
    switch (src->kind) {
    case SRC_ENV:
        env_name(o->name, buf, len);
        break;
    case SRC_FILE:
        snprintf(buf, len, "%s", o->name);
        break;
    case SRC_DEFAULT:
    case SRC_FLAG:
        snprintf(buf, len, "--%s", o->name);
        break;
    }
}

static enum ts_err invalid(const struct ts_option *o, const struct source *src, const char *text,
                           struct ts_error *err, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* `invalid value for --listen: "x": expected HOST:PORT`, prefixed with the
 * file and line for a file; the value is left out for secrets. */
static enum ts_err invalid(const struct ts_option *o, const struct source *src, const char *text,
                           struct ts_error *err, const char *fmt, ...)
{
    char name[NAME_MAX_LEN + 16], where[512] = "", why[256], value[160] = "";
    source_name(o, src, name, sizeof(name));
    if (src->kind == SRC_FILE)
        snprintf(where, sizeof(where), "config file %s line %d: ", src->path, src->line);
    if (!(o->flags & TS_OPT_SECRET))
        snprintf(value, sizeof(value), " \"%.128s\"", text);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    const char *what = src->kind == SRC_DEFAULT ? "default" : "value";
    return ts_error_field(err, TS_ERR_CONFIG, o->name, "%sinvalid %s for %s:%s%s %s", where, what,
                          name, value, value[0] != '\0' ? ":" : "", why);
}

static int parse_int64(const char *s, int64_t *out)
{
    if (s[0] == '\0' || isspace((unsigned char)s[0]))
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

/* HOST:PORT, [IPV6]:PORT or :PORT; PORT 0..65535. */
static int check_hostport(const char *s)
{
    const char *colon;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL || close == s + 1 || close[1] != ':')
            return -1;
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL || memchr(s, ':', (size_t)(colon - s)) != NULL)
            return -1;
        for (const char *p = s; p < colon; p++)
            if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
                return -1;
    }
    int64_t port;
    if (!isdigit((unsigned char)colon[1]) || parse_int64(colon + 1, &port) != 0 || port > 65535)
        return -1;
    return 0;
}

static bool in_range(const struct ts_option *o, int64_t v)
{
    if (o->min == 0 && o->max == 0)
        return true;
    if (v < o->min)
        return false;
    return o->max < o->min || v <= o->max; /* max below min: no upper bound */
}

static void range_text(const struct ts_option *o, char *buf, size_t len)
{
    char a[32], b[32];
    bool upper = o->max >= o->min;
    switch (o->type) {
    case TS_OPT_BYTES:
        ts_bytesize_format(o->min, a, sizeof(a));
        ts_bytesize_format(o->max, b, sizeof(b));
        break;
    case TS_OPT_DURATION:
        ts_duration_format(o->min, a, sizeof(a));
        ts_duration_format(o->max, b, sizeof(b));
        break;
    default:
        snprintf(a, sizeof(a), "%" PRId64, o->min);
        snprintf(b, sizeof(b), "%" PRId64, o->max);
        break;
    }
    if (upper)
        snprintf(buf, len, "must be between %s and %s", a, b);
    else
        snprintf(buf, len, "must be at least %s", a);
}

static bool choice_valid(const char *choices, const char *s)
{
    size_t len = strlen(s);
    for (const char *p = choices; p != NULL && *p != '\0';) {
        const char *bar = strchr(p, '|');
        size_t n = bar != NULL ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncmp(p, s, n) == 0)
            return true;
        p = bar != NULL ? bar + 1 : NULL;
    }
    return false;
}

/* "wait, priority or swap" from "wait|priority|swap". */
static void choices_text(const char *choices, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (const char *p = choices; p != NULL && *p != '\0' && o < len;) {
        const char *bar = strchr(p, '|');
        size_t n = bar != NULL ? (size_t)(bar - p) : strlen(p);
        const char *sep = o == 0 ? "" : bar == NULL ? " or " : ", ";
        int w = snprintf(buf + o, len - o, "%s%.*s", sep, (int)n, p);
        o += w > 0 ? (size_t)w : 0;
        p = bar != NULL ? bar + 1 : NULL;
    }
}

/* Replace a string field, freeing what it held. */
static enum ts_err set_string(char **field, const char *text, struct ts_error *err)
{
    char *copy = NULL;
    if (text != NULL) {
        copy = strdup(text);
        if (copy == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    free(*field);
    *field = copy;
    return TS_OK;
}

/* Parse text for option o and store it in cfg; text NULL (an unset default)
 * stores NULL or 0. */
static enum ts_err set_value(const struct ts_option *o, void *cfg, const char *text,
                             const struct source *src, struct ts_error *err)
{
    void *field = field_of(cfg, o);
    int64_t v = 0;
    char range[128];
    switch (o->type) {
    case TS_OPT_STRING:
        return set_string(field, text, err);
    case TS_OPT_HOSTPORT:
        if (text != NULL && check_hostport(text) != 0)
            return invalid(o, src, text, err, "expected HOST:PORT");
        return set_string(field, text, err);
    case TS_OPT_ENUM:
        if (text != NULL && !choice_valid(o->choices, text)) {
            char list[256];
            choices_text(o->choices, list, sizeof(list));
            return invalid(o, src, text, err, "expected %s", list);
        }
        return set_string(field, text, err);
    case TS_OPT_BOOL:
        if (text == NULL) {
            *(bool *)field = false;
            return TS_OK;
        }
        if (parse_bool(text, field) != 0)
            return invalid(o, src, text, err, "expected true or false");
        return TS_OK;
    case TS_OPT_INT:
        if (text != NULL && parse_int64(text, &v) != 0)
            return invalid(o, src, text, err, "expected an integer");
        break;
    case TS_OPT_BYTES:
        if (text != NULL && ts_bytesize_parse(text, &v) != 0)
            return invalid(o, src, text, err, "expected a size such as 512MiB or 20GiB");
        break;
    case TS_OPT_DURATION:
        if (text != NULL && ts_duration_parse(text, &v) != 0)
            return invalid(o, src, text, err, "expected a duration such as 30s, 1h30m or 2d");
        break;
    }
    if (text != NULL && !in_range(o, v)) {
        range_text(o, range, sizeof(range));
        return invalid(o, src, text, err, "%s", range);
    }
    *(int64_t *)field = v;
    return TS_OK;
}

static bool is_string_type(enum ts_opt_type t)
{
    return t == TS_OPT_STRING || t == TS_OPT_ENUM || t == TS_OPT_HOSTPORT;
}

void ts_config_free(const struct ts_option *table, size_t n, void *cfg)
{
    if (cfg == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        if (is_string_type(table[i].type)) {
            char **field = field_of(cfg, &table[i]);
            free(*field);
            *field = NULL;
        }
    }
}

/* ---- the config file ------------------------------------------------------ */

static char *read_file(const char *path, struct ts_error *err)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        ts_error_set(err, TS_ERR_CONFIG, "could not open config file %s: %s", path,
                     strerror(errno));
        return NULL;
    }
    char *data = malloc(FILE_MAX + 1);
    size_t len = data != NULL ? fread(data, 1, FILE_MAX + 1, f) : 0;
    bool failed = data != NULL && ferror(f);
    fclose(f);
    if (data == NULL) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (failed || len > FILE_MAX) {
        if (failed)
            ts_error_set(err, TS_ERR_CONFIG, "could not read config file %s", path);
        else
            ts_error_set(err, TS_ERR_CONFIG, "config file %s is larger than %d bytes", path,
                         FILE_MAX);
        free(data);
        return NULL;
    }
    data[len] = '\0';
    if (memchr(data, '\0', len) != NULL) {
        ts_error_set(err, TS_ERR_CONFIG, "config file %s holds a NUL byte", path);
        free(data);
        return NULL;
    }
    return data;
}

static char *skip_space(char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static enum ts_err file_error(const struct source *src, struct ts_error *err, const char *what)
{
    return ts_error_set(err, TS_ERR_CONFIG, "config file %s line %d: %s", src->path, src->line,
                        what);
}

/* The value after "=": quoted ("a \"b\"", backslash escapes \" and \\ only)
 * or bare, up to a " #" comment, trailing spaces removed. In place. */
static int line_value(char *p, char **out)
{
    p = skip_space(p);
    if (*p == '"') {
        char *w = p, *r = p + 1;
        for (; *r != '"'; r++) {
            if (*r == '\0')
                return -1;
            if (*r == '\\') {
                r++;
                if (*r != '"' && *r != '\\')
                    return -1;
            }
            *w++ = *r;
        }
        *w = '\0';
        r = skip_space(r + 1);
        if (*r != '\0' && *r != '#')
            return -1;
        *out = p;
        return 0;
    }
    char *end = p;
    for (; *end != '\0'; end++)
        if (*end == '#' && end > p && (end[-1] == ' ' || end[-1] == '\t'))
            break;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *end = '\0';
    *out = p;
    return 0;
}

static enum ts_err apply_file(const struct ts_option *table, size_t n, void *cfg, const char *path,
                              struct ts_error *err)
{
    char *data = read_file(path, err);
    if (data == NULL)
        return err != NULL ? err->code : TS_ERR_CONFIG;
    struct source src = {.kind = SRC_FILE, .path = path, .line = 0};
    /* a secret is refused from a file every user can read */
    struct stat st;
    mode_t file_mode = stat(path, &st) == 0 ? st.st_mode : 0;
    enum ts_err e = TS_OK;
    char *next = data;
    while (e == TS_OK && next != NULL) {
        char *line = next;
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        src.line++;
        size_t len = strlen(line);
        if (len > 0 && line[len - 1] == '\r')
            line[len - 1] = '\0';
        char *p = skip_space(line);
        if (*p == '\0' || *p == '#')
            continue;
        char *name = p;
        while (*p != '\0' && *p != '=' && *p != ' ' && *p != '\t')
            p++;
        size_t name_len = (size_t)(p - name);
        p = skip_space(p);
        char *value = NULL;
        if (*p != '=' || name_len == 0 || line_value(p + 1, &value) != 0) {
            e = file_error(&src, err, "expected name = value");
            break;
        }
        char shown[NAME_MAX_LEN + 4];
        snprintf(shown, sizeof(shown), "%.*s",
                 (int)(name_len < NAME_MAX_LEN ? name_len : NAME_MAX_LEN), name);
        size_t index;
        const struct ts_option *o = find_option(table, n, name, name_len, &index);
        if (o == NULL) {
            e = ts_error_set(err, TS_ERR_CONFIG, "config file %s line %d: unknown option \"%s\"",
                             path, src.line, shown);
            if (name_equal("config", name, name_len))
                ts_error_hint(err, "a config file cannot name another one");
            break;
        }
        if ((o->flags & TS_OPT_SECRET) && (file_mode & S_IROTH)) {
            e = ts_error_set(err, TS_ERR_CONFIG,
                             "config file %s line %d: %s is a secret, and every user can read "
                             "the file (mode %04o)",
                             path, src.line, o->name, file_mode & 07777);
            ts_error_hint(err, "chmod o-r %s: mode 0600, or 0640 for the service's group", path);
            break;
        }
        e = set_value(o, cfg, value, &src, err);
    }
    free(data);
    return e;
}

/* ---- the command line ---------------------------------------------------- */

struct cmdline {
    struct flag_value *flags;
    size_t nflags;
    const char *config; /* --config FILE, borrowed */
    bool help;
    bool version;
    int rest; /* index of the first positional argument */
    bool failed;
    struct ts_error error;
};

static void cmd_fail(struct cmdline *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void cmd_fail(struct cmdline *c, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = true;
    ts_error_clear(&c->error);
    c->error.code = TS_ERR_CONFIG;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error.message, sizeof(c->error.message), fmt, ap);
    va_end(ap);
}

static void scan_args(const struct ts_option *table, size_t n, int argc, char **argv,
                      struct cmdline *c)
{
    c->rest = argc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            c->rest = i + 1;
            return;
        }
        if (a[0] != '-' || a[1] == '\0') {
            c->rest = i;
            return;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            c->help = true;
            continue;
        }
        if (strcmp(a, "--version") == 0) {
            c->version = true;
            continue;
        }
        if (a[1] != '-') {
            cmd_fail(c, "unknown option %.64s", a);
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t name_len = eq != NULL ? (size_t)(eq - name) : strlen(name);
        const char *value = eq != NULL ? eq + 1 : NULL;
        size_t index = 0;
        const struct ts_option *o = find_option(table, n, name, name_len, &index);
        bool is_config = name_equal("config", name, name_len);
        if (o == NULL && !is_config) {
            cmd_fail(c, "unknown option --%.*s", (int)(name_len < 64 ? name_len : 64), name);
            continue;
        }
        if (o != NULL && (o->flags & TS_OPT_SECRET)) {
            char env[NAME_MAX_LEN + 16];
            env_name(o->name, env, sizeof(env));
            cmd_fail(c,
                     "--%s cannot be given on the command line, where other users could read it: "
                     "set %s or %s in the config file",
                     o->name, env, o->name);
            if (value == NULL && i + 1 < argc)
                i++; /* do not read the secret as a positional argument */
            continue;
        }
        if (value == NULL && o != NULL && o->type == TS_OPT_BOOL) {
            value = "true";
        } else if (value == NULL) {
            if (i + 1 >= argc) {
                cmd_fail(c, "option --%.*s needs a value", (int)name_len, name);
                continue;
            }
            value = argv[++i];
        }
        if (is_config) {
            c->config = value;
            continue;
        }
        c->flags[c->nflags++] = (struct flag_value){.opt = index, .value = value};
    }
}

enum ts_config_result ts_config_load(const struct ts_option *table, size_t n, void *cfg,
                                     const char *usage, int argc, char **argv, int *rest_argc,
                                     char ***rest_argv, struct ts_error *err)
{
    ts_error_clear(err);
    for (size_t i = 0; i < n; i++)
        if (is_string_type(table[i].type))
            *(char **)field_of(cfg, &table[i]) = NULL;
    struct cmdline c = {.flags = calloc((size_t)(argc > 0 ? argc : 1), sizeof(*c.flags))};
    if (c.flags == NULL) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return TS_CONFIG_ERROR;
    }
    scan_args(table, n, argc, argv, &c);
    if (c.help) {
        free(c.flags);
        ts_config_usage(table, n, usage, stdout);
        return TS_CONFIG_HELP;
    }
    if (c.version) {
        free(c.flags);
        const char *prog = argc > 0 && argv[0] != NULL ? strrchr(argv[0], '/') : NULL;
        prog = prog != NULL ? prog + 1 : argc > 0 && argv[0] != NULL ? argv[0] : "tessera";
        printf("%s %s (agent protocol %s)\n", prog, TS_VERSION, TS_PROTOCOL_STR);
        return TS_CONFIG_HELP;
    }
    if (!c.failed && c.rest < argc && rest_argc == NULL)
        cmd_fail(&c, "unexpected argument \"%.64s\"", argv[c.rest]);
    if (c.failed) {
        free(c.flags);
        if (err != NULL)
            *err = c.error;
        return TS_CONFIG_ERROR;
    }

    enum ts_err e = TS_OK;
    struct source src = {.kind = SRC_DEFAULT};
    for (size_t i = 0; e == TS_OK && i < n; i++)
        e = set_value(&table[i], cfg, table[i].def, &src, err);

    const char *file = c.config;
    if (file == NULL) {
        file = getenv("TESSERA_CONFIG");
        if (file != NULL && file[0] == '\0')
            file = NULL;
    }
    if (e == TS_OK && file != NULL)
        e = apply_file(table, n, cfg, file, err);

    src.kind = SRC_ENV;
    for (size_t i = 0; e == TS_OK && i < n; i++) {
        char name[NAME_MAX_LEN + 16];
        env_name(table[i].name, name, sizeof(name));
        const char *v = getenv(name);
        if (v != NULL)
            e = set_value(&table[i], cfg, v, &src, err);
    }

    src.kind = SRC_FLAG;
    for (size_t i = 0; e == TS_OK && i < c.nflags; i++)
        e = set_value(&table[c.flags[i].opt], cfg, c.flags[i].value, &src, err);
    free(c.flags);

    if (e != TS_OK) {
        ts_config_free(table, n, cfg);
        return TS_CONFIG_ERROR;
    }
    if (rest_argc != NULL) {
        *rest_argc = argc - c.rest;
        *rest_argv = argv + c.rest;
    }
    return TS_CONFIG_OK;
}

/* ---- --help ---------------------------------------------------------------- */

static const char *metavar(const struct ts_option *o)
{
    if (o->metavar != NULL)
        return o->metavar;
    switch (o->type) {
    case TS_OPT_INT:
        return "N";
    case TS_OPT_BYTES:
        return "SIZE";
    case TS_OPT_DURATION:
        return "DURATION";
    case TS_OPT_HOSTPORT:
        return "HOST:PORT";
    case TS_OPT_ENUM:
        return o->choices;
    case TS_OPT_BOOL:
    case TS_OPT_STRING:
        break;
    }
    return "VALUE";
}

#define HELP_COLUMN 30

/* "  --flag META    help" with the help at HELP_COLUMN (on the next line when
 * the flag is too long), then `extra` on a line of its own. */
static void usage_line(FILE *f, const char *flag, const char *meta, const char *help,
                       const char *extra)
{
    char left[128];
    int w = snprintf(left, sizeof(left), "  --%s%s%s", flag, meta != NULL ? " " : "",
                     meta != NULL ? meta : "");
    if (w >= HELP_COLUMN - 1)
        fprintf(f, "%s\n%*s%s\n", left, HELP_COLUMN, "", help);
    else
        fprintf(f, "%-*s%s\n", HELP_COLUMN, left, help);
    if (extra[0] != '\0')
        fprintf(f, "%*s%s\n", HELP_COLUMN, "", extra);
}

void ts_config_usage(const struct ts_option *table, size_t n, const char *usage, void *file)
{
    FILE *f = file;
    fprintf(f, "%s\n\noptions:\n", usage != NULL ? usage : "usage:");
    for (size_t i = 0; i < n; i++) {
        const struct ts_option *o = &table[i];
        char env[NAME_MAX_LEN + 16], extra[512];
        env_name(o->name, env, sizeof(env));
        if (o->flags & TS_OPT_SECRET)
            snprintf(extra, sizeof(extra), "(secret: env %s or the config file only)", env);
        else if (o->def != NULL)
            snprintf(extra, sizeof(extra), "(default %s; env %s)", o->def, env);
        else
            snprintf(extra, sizeof(extra), "(env %s)", env);
        usage_line(f, o->name, o->type == TS_OPT_BOOL ? NULL : metavar(o),
                   o->help != NULL ? o->help : "", extra);
    }
    usage_line(f, "config", "FILE", "read `name = value` lines from FILE", "(env TESSERA_CONFIG)");
    usage_line(f, "help", NULL, "print this help and exit", "");
    usage_line(f, "version", NULL, "print the release and the agent protocol and exit", "");
}
