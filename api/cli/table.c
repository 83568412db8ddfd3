/*
 * table.c - tables sized to the terminal (see table.h).
 */
#include "api/cli/table.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define GAP 2
#define ELLIPSIS "\xe2\x80\xa6" /* U+2026, one character wide */

struct ts_table {
    const struct ts_col *cols;
    size_t ncols;
    char **cells; /* row-major, owned */
    size_t ncells, cap;
    size_t *sel; /* the columns to print, in order (owned); NULL: all */
    size_t nsel;
};

struct ts_table *ts_table_new(const struct ts_col *cols, size_t ncols)
{
    struct ts_table *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->cols = cols;
    t->ncols = ncols;
    return t;
}

/* A copy of s with control characters as spaces. */
static char *clean_copy(const char *s)
{
    char *c = strdup(s ? s : "-");
    for (char *p = c; p && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    return c;
}

void ts_table_add(struct ts_table *t, const char *text)
{
    if (t == NULL)
        return;
    if (t->ncells == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        char **v = realloc(t->cells, cap * sizeof(*v));
        if (v == NULL)
            return;
        t->cells = v;
        t->cap = cap;
    }
    char *c = clean_copy(text);
    if (c != NULL)
        t->cells[t->ncells++] = c;
}

void ts_table_addf(struct ts_table *t, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    ts_table_add(t, buf);
}

/* The headers of t, comma-separated, into buf. */
static void headers_of(const struct ts_table *t, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t c = 0; c < t->ncols && n < len; c++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", c ? "," : "", t->cols[c].header);
}

int ts_table_select(struct ts_table *t, const char *names, char *why, size_t len)
{
    if (t == NULL)
        return 0;
    size_t *sel = calloc(t->ncols + 1, sizeof(*sel)), nsel = 0;
    if (sel == NULL)
        return snprintf(why, len, "out of memory"), -1;
    const char *p = names;
    for (;;) {
        size_t n = strcspn(p, ",");
        size_t c = 0;
        while (c < t->ncols &&
               (strlen(t->cols[c].header) != n || strncasecmp(t->cols[c].header, p, n) != 0))
            c++;
        if (c == t->ncols || nsel == t->ncols) {
            char all[512];
            headers_of(t, all, sizeof(all));
            if (c == t->ncols)
                snprintf(why, len, "no column \"%.*s\" here: the columns are %s", (int)n, p, all);
            else
                snprintf(why, len, "more columns than the %zu there are: %s", t->ncols, all);
            free(sel);
            return -1;
        }
        sel[nsel++] = c;
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    free(t->sel);
    t->sel = sel;
    t->nsel = nsel;
    return 0;
}

/* Characters in s: bytes that do not continue a UTF-8 sequence. */
static int width_of(const char *s)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += (*p & 0xc0) != 0x80;
    return n;
}

/* Bytes of the first n characters of s. */
static size_t bytes_of(const char *s, int n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (; *p; p++)
        if ((*p & 0xc0) != 0x80 && n-- == 0)
            break;
    return (size_t)(p - (const unsigned char *)s);
}

/* Append s to line in exactly w characters (or as is when !pad), cut with an
 * ellipsis when longer. */
static void put_cell(FILE *f, const char *s, int w, bool right, bool pad)
{
    int sw = width_of(s);
    if (sw > w) {
        if (w > 0)
            fprintf(f, "%.*s%s", (int)bytes_of(s, w - 1), s, ELLIPSIS);
        return;
    }
    if (right)
        fprintf(f, "%*s%s", w - sw, "", s);
    else if (pad)
        fprintf(f, "%s%*s", s, w - sw, "");
    else
        fputs(s, f);
}

/* Shrink the widest column of those allowed (flex only, or all) by one,
 * keeping each at least its floor; false when none can shrink. */
static bool shrink_one(const struct ts_table *t, int *w, const int *floor, bool flex_only)
{
    size_t best = t->ncols;
    for (size_t c = 0; c < t->ncols; c++) {
        if (flex_only && t->cols[c].min == 0)
            continue;
        if (w[c] > floor[c] && (best == t->ncols || w[c] > w[best]))
            best = c;
    }
    if (best == t->ncols)
        return false;
    w[best]--;
    return true;
}

void ts_table_print(const struct ts_table *t, FILE *f, int width, bool headers)
{
    if (t == NULL || t->ncols == 0)
        return;
    size_t nrows = t->ncells / t->ncols;
    int *w = calloc(t->ncols, sizeof(int));
    int *flex_floor = calloc(t->ncols, sizeof(int));
    int *hard_floor = calloc(t->ncols, sizeof(int));
    if (w == NULL || flex_floor == NULL || hard_floor == NULL)
        goto out;
    size_t nshow = t->sel ? t->nsel : t->ncols;
    int total = 0;
    for (size_t k = 0; k < nshow; k++) {
        size_t c = t->sel ? t->sel[k] : k;
        w[c] = width_of(t->cols[c].header);
        for (size_t r = 0; r < nrows; r++) {
            int cw = width_of(t->cells[r * t->ncols + c]);
            if (cw > w[c])
                w[c] = cw;
        }
        int hw = width_of(t->cols[c].header);
        flex_floor[c] = t->cols[c].min > hw ? t->cols[c].min : hw;
        hard_floor[c] = hw;
        total += w[c] + (k > 0 ? GAP : 0);
    }
    /* flexible columns to their minimum, then to their header, then all */
    while (width > 0 && total > width && shrink_one(t, w, flex_floor, true))
        total--;
    while (width > 0 && total > width && shrink_one(t, w, hard_floor, true))
        total--;
    while (width > 0 && total > width && shrink_one(t, w, hard_floor, false))
        total--;
    /* one line at a time into memory, so that a line still too wide is cut */
    char *line = NULL;
    size_t linelen = 0;
    for (size_t r = headers ? 0 : 1; r <= nrows; r++) {
        FILE *m = open_memstream(&line, &linelen);
        if (m == NULL)
            break;
        for (size_t k = 0; k < nshow; k++) {
            size_t c = t->sel ? t->sel[k] : k;
            const char *s = r == 0 ? t->cols[c].header : t->cells[(r - 1) * t->ncols + c];
            if (k > 0)
                fprintf(m, "%*s", GAP, "");
            put_cell(m, s, w[c], t->cols[c].right, k + 1 < nshow);
        }
        fclose(m);
        if (width > 0 && width_of(line) > width)
            fprintf(f, "%.*s%s\n", (int)bytes_of(line, width - 1), line, ELLIPSIS);
        else
            fprintf(f, "%s\n", line);
        free(line);
        line = NULL;
    }
out:
    free(w);
    free(flex_floor);
    free(hard_floor);
}

void ts_table_free(struct ts_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->ncells; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t->sel);
    free(t);
}

int ts_table_width(void)
{
    if (!isatty(STDOUT_FILENO))
        return 0; /* a pipe or a file: a script reads every character */
    const char *s = getenv("COLUMNS");
    if (s != NULL) {
        char *end;
        long v = strtol(s, &end, 10);
        if (s[0] && *end == '\0' && v > 0 && v < 100000)
            return (int)v;
    }
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 80;
}
