/*
 * table.h - tables sized to the terminal.
 *
 * Columns are as wide as their widest cell, two spaces apart. When the
 * table is wider than the terminal (only when stdout is one: a pipe or a
 * file gets every character, as scripts need), the flexible columns (names, messages)
 * give up width first, widest first, down to their minimum, then down to
 * their header's width; then the others, down to their header's width; a
 * line still too wide is cut. A cut cell ends with an ellipsis. Widths count
 * characters (UTF-8 code points); control characters show as spaces.
 */
#ifndef TS_API_CLI_TABLE_H
#define TS_API_CLI_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct ts_col {
    const char *header; /* upper case: "NAME" */
    int min;            /* flexible columns: narrowest width; 0: not flexible */
    bool right;         /* align to the right (numbers) */
};

struct ts_table;

/* New table over cols (borrowed; must outlive it); NULL when out of memory. */
struct ts_table *ts_table_new(const struct ts_col *cols, size_t ncols);
/* Append the next cell, row by row (copied; NULL shows as "-"). */
void ts_table_add(struct ts_table *t, const char *text);
void ts_table_addf(struct ts_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print only the columns named in names ("ID,NAME,STATE": headers, any
 * case), in that order; 0, or -1 with why (naming every column) when a
 * name is none of them, empty or repeated past the column count. */
int ts_table_select(struct ts_table *t, const char *names, char *why, size_t len);
/* Print to f within width characters (width < 1: no limit), with the
 * header line unless !headers. */
void ts_table_print(const struct ts_table *t, FILE *f, int width, bool headers);
void ts_table_free(struct ts_table *t); /* NULL is a no-op */

/* The width to print in: 0 (no limit) when stdout is not a terminal; on a
 * terminal $COLUMNS when set, else the terminal's (TIOCGWINSZ), else 80. */
int ts_table_width(void);

#endif /* TS_API_CLI_TABLE_H */
