/*
 * err.h - Tessera's one error vocabulary.
 *
 * Functions return enum ts_err and fill an optional struct ts_error with a
 * message in PostgreSQL's style (lower case, no final period, facts with
 * numbers), an optional detail and hint, and the JSON field it concerns.
 * The table behind the enum is api/errcodes.def; the HTTP body built from it
 * is made in one place (server/http/problem.c).
 */
#ifndef TS_API_ERR_H
#define TS_API_ERR_H

#include <stdarg.h>

enum ts_err {
#define TS_ERRCODE(name, status, code, title) TS_ERR_##name,
#include "api/errcodes.def"
#undef TS_ERRCODE
    TS_ERR__COUNT
};
#define TS_OK TS_ERR_OK

struct ts_error {
    enum ts_err code;
    char message[512];
    char detail[512];
    char hint[256];
    char field[128]; /* JSON path of the offending field, "" if none */
};

/* Static strings from errcodes.def; unknown values map to "internal". */
int ts_err_http_status(enum ts_err e);
const char *ts_err_code(enum ts_err e);
const char *ts_err_title(enum ts_err e);
/* The enum for a string code, or TS_ERR__COUNT when unknown. */
enum ts_err ts_err_from_code(const char *code);

/*
 * Fill err (may be NULL) with code and a printf-style message; returns code so
 * callers can write `return ts_error_set(err, TS_ERR_NOT_FOUND, "...")`.
 * Clears detail, hint and field.
 */
enum ts_err ts_error_set(struct ts_error *err, enum ts_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same, naming the JSON field the error is about. */
enum ts_err ts_error_field(struct ts_error *err, enum ts_err code, const char *field,
                           const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void ts_error_detail(struct ts_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ts_error_hint(struct ts_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ts_error_clear(struct ts_error *err);
/* ts_error_set(err, TS_ERR_NOMEM, "out of memory"). */
enum ts_err ts_error_nomem(struct ts_error *err);

#endif /* TS_API_ERR_H */
