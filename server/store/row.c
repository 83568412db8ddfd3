/*
 * row.c - typed accessors over PGresult text values.
 */
#include "server/store/row.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t ts_row_i64(const PGresult *res, int row, int col)
{
    if (PQgetisnull(res, row, col))
        return 0;
    return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

double ts_row_double(const PGresult *res, int row, int col)
{
    if (PQgetisnull(res, row, col))
        return 0;
    return strtod(PQgetvalue(res, row, col), NULL);
}

bool ts_row_bool(const PGresult *res, int row, int col)
{
    return !PQgetisnull(res, row, col) && PQgetvalue(res, row, col)[0] == 't';
}

bool ts_row_null(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) != 0;
}

const char *ts_row_text(const PGresult *res, int row, int col, struct ts_arena *a)
{
    if (PQgetisnull(res, row, col))
        return NULL;
    return ts_arena_strndup(a, PQgetvalue(res, row, col), (size_t)PQgetlength(res, row, col));
}

void ts_row_copy(const PGresult *res, int row, int col, char *buf, size_t len)
{
    if (len == 0)
        return;
    buf[0] = '\0';
    if (PQgetisnull(res, row, col))
        return;
    size_t n = (size_t)PQgetlength(res, row, col);
    if (n >= len)
        n = len - 1;
    memcpy(buf, PQgetvalue(res, row, col), n);
    buf[n] = '\0';
}

char *ts_row_id_array(struct ts_arena *a, const int64_t *ids, size_t n)
{
    size_t cap = 3 + n * 21;
    char *s = ts_arena_alloc(a, cap); /* zeroed: stays NUL-terminated */
    if (s == NULL)
        return NULL;
    size_t len = 0;
    s[len++] = '{';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s%lld", i ? "," : "", (long long)ids[i]);
    s[len] = '}';
    return s;
}

char *ts_row_text_array(struct ts_arena *a, const char *const *v, size_t n)
{
    size_t cap = 3;
    for (size_t i = 0; i < n; i++)
        cap += 3 + 2 * strlen(v[i]);
    char *s = ts_arena_alloc(a, cap);
    if (s == NULL)
        return NULL;
    size_t len = 0;
    s[len++] = '{';
    for (size_t i = 0; i < n; i++) {
        if (i)
            s[len++] = ',';
        s[len++] = '"';
        for (const char *q = v[i]; *q; q++) {
            if (*q == '"' || *q == '\\')
                s[len++] = '\\';
            s[len++] = *q;
        }
        s[len++] = '"';
    }
    s[len++] = '}';
    s[len] = '\0';
    return s;
}
