/*
 * commands.c - the command table and the dispatcher: find the command from
 * its words, read its options, answer --help, load the configuration, run.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "api/cli/cli.h"
#include "api/cli/out.h"
#include "api/cli/table.h"
#include "api/client/client.h"
#include "api/tlsfiles.h"
#include "api/version.h"

/* Options every command knows (besides -h, --help). */
static const struct ts_opt global_opts[] = {
    {"server", 0, "URL", "the API server (else TESSERA_SERVER, the config file)", false},
    {"token", 0, "TOKEN", "the API token (else TESSERA_TOKEN, the config file)", false},
    {"ca", 0, "FILE",
     "PEM CAs an https:// server's certificate must chain to (else TESSERA_CA, "
     "the config file, the system's)",
     false},
    {"cert", 0, "FILE", "PEM client certificate for a server that asks (else TESSERA_CERT)", false},
    {"key", 0, "FILE", "the PEM private key of --cert (else TESSERA_KEY)", false},
    TS_OPT_END,
};

struct group {
    const struct ts_cmd *cmds;
    const size_t *count;
};

/* Every command, in the order the top-level --help lists them. */
static const struct group groups[] = {
    {ts_cmds_session, &ts_cmds_session_count}, {ts_cmds_submit, &ts_cmds_submit_count},
    {ts_cmds_jobs, &ts_cmds_jobs_count},       {ts_cmds_cluster, &ts_cmds_cluster_count},
    {ts_cmds_admin, &ts_cmds_admin_count},
};
#define NGROUPS (TS_ARRAY_LEN(groups))

/* The command named exactly name ("project create"), or NULL. */
static const struct ts_cmd *find(const char *name)
{
    for (size_t g = 0; g < NGROUPS; g++)
        for (size_t i = 0; i < *groups[g].count; i++)
            if (strcmp(groups[g].cmds[i].name, name) == 0)
                return &groups[g].cmds[i];
    return NULL;
}

/* Whether some command's first word is word and it has a second. */
static bool is_group(const char *word)
{
    size_t n = strlen(word);
    for (size_t g = 0; g < NGROUPS; g++)
        for (size_t i = 0; i < *groups[g].count; i++)
            if (strncmp(groups[g].cmds[i].name, word, n) == 0 && groups[g].cmds[i].name[n] == ' ')
                return true;
    return false;
}

/* The word of the commands closest to word: their first word (group NULL),
 * or the second of those whose first is group; NULL when none is close. */
static const char *closest_word(const char *group, const char *word)
{
    static char words[128][32];
    const char *cands[128];
    size_t n = 0, glen = group ? strlen(group) : 0;
    for (size_t g = 0; g < NGROUPS; g++)
        for (size_t i = 0; i < *groups[g].count && n < 128; i++) {
            const char *name = groups[g].cmds[i].name;
            if (group) {
                if (strncmp(name, group, glen) != 0 || name[glen] != ' ')
                    continue;
                name += glen + 1;
            }
            snprintf(words[n], sizeof(words[n]), "%.*s", (int)strcspn(name, " "), name);
            cands[n] = words[n];
            n++;
        }
    return ts_args_closest(word, cands, n);
}

static void print_commands(FILE *f, const char *prefix)
{
    size_t n = prefix ? strlen(prefix) : 0;
    for (size_t g = 0; g < NGROUPS; g++)
        for (size_t i = 0; i < *groups[g].count; i++) {
            const struct ts_cmd *c = &groups[g].cmds[i];
            if (prefix && (strncmp(c->name, prefix, n) != 0 || c->name[n] != ' '))
                continue;
            fprintf(f, "  %-20s %s\n", c->name, c->summary);
        }
}

static void print_top_help(FILE *f)
{
    fprintf(f, "usage: tessera [--server URL] [--token TOKEN] [--ca FILE] COMMAND [ARGS...]\n\n"
               "Tessera shares GPUs between projects: submit jobs, see the queue and why a\n"
               "job waits, and (admins) manage quotas, nodes and tokens.\n\ncommands:\n");
    print_commands(f, NULL);
    fprintf(f, "\n'tessera COMMAND --help' describes a command. Server and token come from\n"
               "--server/--token, TESSERA_SERVER/TESSERA_TOKEN, or the config file written by\n"
               "'tessera login'. An https:// server's certificate is checked against --ca\n"
               "(TESSERA_CA) or the system's CAs; --cert/--key (TESSERA_CERT, TESSERA_KEY)\n"
               "give a client certificate. Exit status: 0 ok, 1 usage, 2 server or network,\n"
               "3 not found, 4 conflict or precondition, 5 authentication or permission,\n"
               "6 a job that submit --wait followed did not succeed.\n");
}

static void print_group_help(FILE *f, const char *word)
{
    fprintf(f, "usage: tessera %s SUBCOMMAND [ARGS...]\n\nsubcommands:\n", word);
    print_commands(f, word);
    fprintf(f, "\n'tessera %s SUBCOMMAND --help' describes one.\n", word);
}

static void print_opts(FILE *f, const struct ts_opt *opts)
{
    for (const struct ts_opt *o = opts; o && o->name; o++) {
        char left[64], sh[8] = "    ";
        if (o->short_name)
            snprintf(sh, sizeof(sh), "-%c, ", o->short_name);
        snprintf(left, sizeof(left), "%s--%s%s%s", sh, o->name, o->metavar ? " " : "",
                 o->metavar ? o->metavar : "");
        fprintf(f, "  %-30s %s%s\n", left, o->help, o->repeat ? " (repeat for more)" : "");
    }
}

static void print_cmd_help(FILE *f, const struct ts_cmd *c)
{
    fprintf(f, "usage: tessera %s%s%s\n\n%s\n", c->name, c->synopsis[0] ? " " : "", c->synopsis,
            c->summary);
    if (c->help)
        fprintf(f, "\n%s\n", c->help);
    if (c->opts && c->opts->name) {
        fprintf(f, "\noptions:\n");
        print_opts(f, c->opts);
    }
    fprintf(f, "\nglobal options:\n");
    print_opts(f, global_opts);
    fprintf(f, "  -h, --help                     show this help\n");
}

int ts_cli_usage_error(const struct ts_cli *cli, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (cli && cli->cmd)
        fprintf(stderr, "usage: tessera %s %s\ntry 'tessera %s --help'\n", cli->cmd->name,
                cli->cmd->synopsis, cli->cmd->name);
    else
        fprintf(stderr, "try 'tessera --help'\n");
    return TS_EXIT_USAGE;
}

struct ts_client *ts_cli_client(struct ts_cli *cli)
{
    if (cli->client == NULL) {
        cli->client = ts_client_new(cli->conf.server, cli->conf.token);
        if (cli->client != NULL &&
            ts_client_set_tls(cli->client, cli->conf.ca, cli->conf.cert, cli->conf.key) != 0) {
            ts_client_free(cli->client);
            cli->client = NULL;
        }
        if (cli->client == NULL)
            fprintf(stderr, "error: out of memory\n");
    }
    return cli->client;
}

void ts_cli_table_print(const struct ts_cli *cli, struct ts_table *t)
{
    char why[700];
    if (cli->only != NULL && ts_table_select(t, cli->only, why, sizeof(why)) != 0) {
        if (!*cli->bad_columns) /* said once, whatever the number of tables */
            ts_cli_usage_error(cli, "-o columns=%s: %s", cli->only, why);
        *cli->bad_columns = true;
        return;
    }
    ts_table_print(t, stdout, cli->columns, cli->headers);
}

const char *ts_cli_project(const struct ts_cli *cli, const struct ts_args *a)
{
    const char *p = ts_args_get(a, "project");
    return p && p[0] ? p : cli->conf.project;
}

int ts_cli_format(const struct ts_cli *cli, const struct ts_args *a)
{
    int f = ts_out_format_parse(ts_args_get(a, "output"));
    if (f < 0)
        ts_cli_usage_error(cli, "-o must be table, wide, json or columns=A,B: \"%s\"",
                           ts_args_get(a, "output"));
    return f;
}

/* The number of leading arguments that are global options with values. */
static int leading_globals(int argc, char **argv)
{
    int i = 0;
    while (i < argc) {
        const char *s = argv[i];
        static const char *const globals[] = {"--server", "--token", "--ca", "--cert", "--key"};
        bool valued = false, joined = false;
        for (size_t g = 0; g < TS_ARRAY_LEN(globals); g++) {
            size_t n = strlen(globals[g]);
            valued = valued || strcmp(s, globals[g]) == 0;
            joined = joined || (strncmp(s, globals[g], n) == 0 && s[n] == '=');
        }
        if (valued)
            i += 2;
        else if (joined)
            i += 1;
        else
            break;
    }
    return i < argc ? i : argc;
}

static int run(const struct ts_cmd *c, int argc, char **argv)
{
    struct ts_cli cli = {.cmd = c};
    struct ts_args a;
    struct ts_error err;
    ts_error_clear(&err);
    int rc = TS_EXIT_USAGE;
    enum ts_err e = ts_args_parse(&a, c->opts, global_opts, argc, argv, &err);
    if (a.help) {
        print_cmd_help(stdout, c);
        rc = TS_EXIT_OK;
        goto out;
    }
    if (e != TS_OK) {
        rc = ts_cli_usage_error(&cli, "%s", err.message);
        goto out;
    }
    if (a.npos < c->min_pos) {
        rc = ts_cli_usage_error(&cli, "too few arguments");
        goto out;
    }
    if (c->max_pos >= 0 && a.npos > c->max_pos) {
        rc = ts_cli_usage_error(&cli, "unexpected argument \"%s\"", a.pos[c->max_pos]);
        goto out;
    }
    if (c->command && a.nrest == 0) {
        rc = ts_cli_usage_error(&cli, "no command to run: give it after --");
        goto out;
    }
    if (!c->command && a.rest != NULL) {
        rc = ts_cli_usage_error(&cli, "unexpected arguments after --");
        goto out;
    }
    const struct ts_conf_flags flags = {ts_args_get(&a, "server"), ts_args_get(&a, "token"),
                                        ts_args_get(&a, "ca"), ts_args_get(&a, "cert"),
                                        ts_args_get(&a, "key")};
    if (ts_conf_load(&cli.conf, &flags, &err) != TS_OK) {
        fprintf(stderr, "error: %s\n", err.message);
        goto out;
    }
    /* the TLS files are checked before any request: a missing file or a key
     * open to others is said as such, not as a failed connection */
    if (!c->offline &&
        ts_tlsfiles_check_client(cli.conf.ca, cli.conf.cert, cli.conf.key, &err) != TS_OK) {
        fprintf(stderr, "error: %s\n", err.message);
        if (err.hint[0])
            fprintf(stderr, "hint: %s\n", err.hint);
        goto out;
    }
    /* -o wide and columns= ask for everything: no cell is cut, on a
     * terminal either */
    const char *output = ts_args_get(&a, "output");
    bool bad_columns = false;
    cli.columns = ts_out_format_parse(output) == TS_OUT_WIDE ? 0 : ts_table_width();
    cli.headers = !ts_args_has(&a, "no-headers");
    cli.only = output && strncmp(output, "columns=", 8) == 0 ? output + 8 : NULL;
    cli.bad_columns = &bad_columns;
    rc = c->run(&cli, &a);
    if (bad_columns && rc == TS_EXIT_OK)
        rc = TS_EXIT_USAGE;
out:
    fflush(stdout);
    ts_client_free(cli.client);
    ts_conf_free(&cli.conf);
    ts_args_free(&a);
    return rc;
}

int ts_cli_main(int argc, char **argv)
{
    ts_client_global_init();
    int first = 1 + leading_globals(argc - 1, argv + 1);
    if (first >= argc) {
        print_top_help(stderr);
        return TS_EXIT_USAGE;
    }
    const char *w1 = argv[first];
    if (strcmp(w1, "-h") == 0 || strcmp(w1, "--help") == 0 || strcmp(w1, "help") == 0) {
        print_top_help(stdout);
        return TS_EXIT_OK;
    }
    if (strcmp(w1, "--version") == 0) { /* the client only; `tessera version` asks the server */
        printf("tessera %s (agent protocol %s)\n", TS_VERSION, TS_PROTOCOL_STR);
        return TS_EXIT_OK;
    }
    const struct ts_cmd *c = NULL;
    int words = 1;
    if (is_group(w1)) {
        const char *w2 = first + 1 < argc ? argv[first + 1] : NULL;
        if (w2 == NULL || strcmp(w2, "-h") == 0 || strcmp(w2, "--help") == 0) {
            print_group_help(w2 ? stdout : stderr, w1);
            return w2 ? TS_EXIT_OK : TS_EXIT_USAGE;
        }
        char name[128];
        snprintf(name, sizeof(name), "%s %s", w1, w2);
        c = find(name);
        if (c == NULL) {
            const char *near = closest_word(w1, w2);
            fprintf(stderr, "error: unknown command \"tessera %s %s\"", w1, w2);
            if (near)
                fprintf(stderr, "; did you mean \"tessera %s %s\"?", w1, near);
            fputc('\n', stderr);
            print_group_help(stderr, w1);
            return TS_EXIT_USAGE;
        }
        words = 2;
    } else if ((c = find(w1)) == NULL) {
        const char *near = closest_word(NULL, w1);
        fprintf(stderr, "error: unknown command \"%s\"", w1);
        if (near)
            fprintf(stderr, "; did you mean \"tessera %s\"?", near);
        fprintf(stderr, "\ntry 'tessera --help'\n");
        return TS_EXIT_USAGE;
    }
    /* the global options before the command, then what follows its words */
    int nargs = (first - 1) + (argc - first - words);
    char **args = calloc((size_t)nargs + 1, sizeof(char *));
    if (args == NULL) {
        fprintf(stderr, "error: out of memory\n");
        return TS_EXIT_SERVER;
    }
    memcpy(args, argv + 1, (size_t)(first - 1) * sizeof(char *));
    memcpy(args + first - 1, argv + first + words, (size_t)(argc - first - words) * sizeof(char *));
    int rc = run(c, nargs, args);
    free(args);
    return rc;
}
