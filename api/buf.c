/*
 * buf.c - capped growable buffers.
 */
#include "api/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ts_buf_init(struct ts_buf *b, size_t max)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->max = max;
}

static enum ts_err reserve(struct ts_buf *b, size_t extra)
{
    if (b->max != 0 && (extra > b->max || b->len > b->max - extra))
        return TS_ERR_BODY_TOO_LARGE;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return TS_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (p == NULL)
        return TS_ERR_NOMEM;
    b->data = p;
    b->cap = cap;
    return TS_OK;
}

enum ts_err ts_buf_append(struct ts_buf *b, const void *p, size_t n)
{
    enum ts_err e = reserve(b, n);
    if (e != TS_OK)
        return e;
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return TS_OK;
}

enum ts_err ts_buf_printf(struct ts_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return TS_ERR_INTERNAL;
    enum ts_err e = reserve(b, (size_t)n);
    if (e != TS_OK)
        return e;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return TS_OK;
}

void ts_buf_reset(struct ts_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void ts_buf_free(struct ts_buf *b)
{
    if (b == NULL)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
