/*
 * show.h - what most commands do: GET a resource, print its JSON as the
 * server sent it with -o json, or else a table or "key: value" lines made
 * from it.
 *
 * A command names the path and how to show the answer; the request, the
 * raw JSON, the table's making and printing and the cleanup are here, once.
 */
#ifndef TS_API_CLI_SHOW_H
#define TS_API_CLI_SHOW_H

#include <jansson.h>
#include <stddef.h>

#include "api/cli/cli.h"
#include "api/cli/table.h"
#include "api/client/client.h"

/* Show response r (borrowed: valid during the call) as text; returns an
 * exit status. */
typedef int (*ts_show_fn)(struct ts_cli *cli, const struct ts_response *r, void *ud);

/* Add the row, or rows, of one item (borrowed) to t, cell by cell. */
typedef void (*ts_show_row_fn)(struct ts_table *t, const json_t *item, void *ud);

/* A table of the items of an array. */
struct ts_show_table {
    const struct ts_col *cols; /* borrowed */
    size_t ncols;
    ts_show_row_fn row;
};

/*
 * GET path. With fmt TS_OUT_JSON print the body as the server sent it;
 * otherwise call show. Returns the request's exit status when it failed
 * (the problem already printed), else TS_OUT_JSON's TS_EXIT_OK or show's.
 */
int ts_show_get(struct ts_cli *cli, int fmt, const char *path, ts_show_fn show, void *ud);

/* ts_show_get of GET /api/v1/COLLECTION/NAME, NAME the first positional
 * argument, in the format of -o. */
int ts_show_named(struct ts_cli *cli, const struct ts_args *a, const char *collection,
                  ts_show_fn show, void *ud);

/* Print the table of items (an array, borrowed; anything else: no rows)
 * within cli's width, with its header line unless --no-headers. */
void ts_show_rows(const struct ts_cli *cli, const json_t *items, const struct ts_show_table *tab,
                  void *ud);

/* GET path; with TS_OUT_JSON the body as sent, else the table of the
 * array member of the body's object. Returns an exit status. */
int ts_show_list(struct ts_cli *cli, int fmt, const char *path, const char *member,
                 const struct ts_show_table *tab, void *ud);

#endif /* TS_API_CLI_SHOW_H */
