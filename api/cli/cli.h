/*
 * cli.h - what every part of the `tessera` CLI shares: exit codes, the
 * command table's entry, and the context a command runs in.
 *
 * A command is a row of a table (commands.c and the ts_cmds_* arrays of the
 * cmd_*.c files): its words ("project create"), synopsis, one-line summary,
 * option table, number of positional arguments and run function. The
 * dispatcher parses the options, answers --help, loads the configuration and
 * calls run, whose return value is the process's exit status.
 */
#ifndef TS_API_CLI_CLI_H
#define TS_API_CLI_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api/cli/args.h"
#include "api/cli/conf.h"

struct ts_table;

/* Exit statuses: the same for every command (api/README.md lists them). */
enum ts_exit {
    TS_EXIT_OK = 0,
    TS_EXIT_USAGE = 1,      /* bad command line, or a request the server found invalid */
    TS_EXIT_SERVER = 2,     /* the server failed or could not be reached */
    TS_EXIT_NOT_FOUND = 3,  /* 404 */
    TS_EXIT_CONFLICT = 4,   /* 409, 412, 428 */
    TS_EXIT_AUTH = 5,       /* 401, 403 */
    TS_EXIT_JOB_FAILED = 6, /* submit --wait: the job ended other than succeeded */
};

struct ts_cli;

struct ts_cmd {
    const char *name;          /* one or two words: "list", "project create" */
    const char *synopsis;      /* what follows the name in the usage line */
    const char *summary;       /* one line, lower case */
    const char *help;          /* more lines for --help, or NULL */
    const struct ts_opt *opts; /* ends with an entry whose name is NULL; may be NULL */
    int min_pos, max_pos;      /* positional arguments before "--"; max -1: no limit */
    bool command;              /* takes "-- CMD ARGS..." */
    bool offline;              /* needs no server (config view|set) */
    int (*run)(struct ts_cli *cli, const struct ts_args *a);
};

/* The commands of each cmd_*.c file, in the order --help lists them. */
extern const struct ts_cmd ts_cmds_session[];
extern const size_t ts_cmds_session_count;
extern const struct ts_cmd ts_cmds_submit[];
extern const size_t ts_cmds_submit_count;
extern const struct ts_cmd ts_cmds_jobs[];
extern const size_t ts_cmds_jobs_count;
extern const struct ts_cmd ts_cmds_cluster[];
extern const size_t ts_cmds_cluster_count;
extern const struct ts_cmd ts_cmds_admin[];
extern const size_t ts_cmds_admin_count;

/* Options many commands share. */
#define TS_OPT_PROJECT                                                                             \
    {                                                                                              \
        "project", 'p', "PROJECT", "the project (default: the configured one)", false              \
    }
#define TS_OPT_OUTPUT                                                                              \
    {                                                                                              \
        "output", 'o', "FORMAT",                                                                   \
            "table, wide, json (the API's JSON unchanged) or columns=A,B (wide's columns named)",  \
            false                                                                                  \
    }
#define TS_OPT_NO_HEADERS                                                                          \
    {                                                                                              \
        "no-headers", 0, NULL, "print the table without its header line", false                    \
    }
#define TS_OPT_END                                                                                 \
    {                                                                                              \
        NULL, 0, NULL, NULL, false                                                                 \
    }

struct ts_client;

struct ts_cli {
    const struct ts_cmd *cmd;
    struct ts_conf conf;      /* server, token, project and where each came from */
    struct ts_client *client; /* made by ts_cli_client on first use */
    int columns;              /* width for tables; 0: no limit (not a terminal, -o wide) */
    bool headers;             /* tables print their header line (no --no-headers) */
    const char *only;         /* -o columns=A,B: the columns tables print; NULL: all */
    bool *bad_columns;        /* set when a table has no column of only's: exit 1 */
};

/* Print t to stdout as cli says: its width, header line and -o columns=;
 * a column -o columns= names that t lacks is an error naming them all. */
void ts_cli_table_print(const struct ts_cli *cli, struct ts_table *t);

/*
 * Run the `tessera` command line; returns the exit status. Only main()
 * exits.
 */
int ts_cli_main(int argc, char **argv);

/* The API client of cli (borrowed, valid until the command returns), or
 * NULL after printing why (out of memory). */
struct ts_client *ts_cli_client(struct ts_cli *cli);

/* Print "error: MESSAGE" (printf-style) to stderr and, when the cmd is
 * known, "try 'tessera CMD --help'"; returns TS_EXIT_USAGE. */
int ts_cli_usage_error(const struct ts_cli *cli, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The project a command acts on: -p, TESSERA_PROJECT or the config file's
 * default (borrowed), or NULL when none is set. */
const char *ts_cli_project(const struct ts_cli *cli, const struct ts_args *a);

/* -o of a command as enum ts_out_format, or -1 after a usage error. */
int ts_cli_format(const struct ts_cli *cli, const struct ts_args *a);

/*
 * Jobs by id or name (cmd_jobs.c). An argument of digits only is an id;
 * another is the name of a job in the project of -p or the configured one,
 * or, with neither, the one job of that name in any project the token sees
 * (more than one is a usage error naming their projects). Returns an exit
 * status after printing why it failed; *id on TS_EXIT_OK.
 */
int ts_cmd_jobs_resolve(struct ts_cli *cli, const struct ts_args *a, const char *job,
                        long long *id);
/*
 * GET /api/v1/jobs?QUERY (query without "?" and without limit or cursor;
 * may be "") page after page. *jobs gets a new array of every job; *raw
 * gets the first page's response body when there was only one page (new;
 * free), else NULL. Returns an exit status.
 */
int ts_cmd_jobs_fetch(struct ts_cli *cli, const char *query, long long page_size, json_t **jobs,
                      char **raw);

#endif /* TS_API_CLI_CLI_H */
