/*
 * err.c - the tables derived from errcodes.def and struct ts_error helpers.
 */
#include "api/err.h"

#include <stdio.h>
#include <string.h>

static const struct {
    int status;
    const char *code;
    const char *title;
} table[] = {
#define TS_ERRCODE(name, status, code, title) {status, code, title},
#include "api/errcodes.def"
#undef TS_ERRCODE
};

int ts_err_http_status(enum ts_err e)
{
    if ((unsigned)e >= TS_ERR__COUNT)
        return 500;
    return table[e].status;
}

const char *ts_err_code(enum ts_err e)
{
    if ((unsigned)e >= TS_ERR__COUNT)
        return "internal";
    return table[e].code;
}

const char *ts_err_title(enum ts_err e)
{
    if ((unsigned)e >= TS_ERR__COUNT)
        return "Internal error";
    return table[e].title;
}

enum ts_err ts_err_from_code(const char *code)
{
    for (int i = 0; i < TS_ERR__COUNT; i++)
        if (strcmp(table[i].code, code) == 0)
            return (enum ts_err)i;
    return TS_ERR__COUNT;
}

void ts_error_clear(struct ts_error *err)
{
    if (err == NULL)
        return;
    err->code = TS_OK;
    err->message[0] = err->detail[0] = err->hint[0] = err->field[0] = '\0';
}

enum ts_err ts_error_set(struct ts_error *err, enum ts_err code, const char *fmt, ...)
{
    if (err == NULL)
        return code;
    ts_error_clear(err);
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return code;
}

enum ts_err ts_error_field(struct ts_error *err, enum ts_err code, const char *field,
                           const char *fmt, ...)
{
    if (err == NULL)
        return code;
    ts_error_clear(err);
    err->code = code;
    snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return code;
}

void ts_error_detail(struct ts_error *err, const char *fmt, ...)
{
    if (err == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof(err->detail), fmt, ap);
    va_end(ap);
}

void ts_error_hint(struct ts_error *err, const char *fmt, ...)
{
    if (err == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->hint, sizeof(err->hint), fmt, ap);
    va_end(ap);
}

enum ts_err ts_error_nomem(struct ts_error *err)
{
    return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
}
