/*
 * buf.h - a growable byte buffer with a hard cap.
 *
 * Appending past the cap fails with TS_ERR_BODY_TOO_LARGE and leaves the
 * buffer as it was: a body over its cap is refused, never truncated.
 * The data is always NUL-terminated.
 */
#ifndef TS_API_BUF_H
#define TS_API_BUF_H

#include <stddef.h>

#include "api/err.h"

struct ts_buf {
    char *data; /* owned; NULL until the first append */
    size_t len;
    size_t cap;
    size_t max; /* 0: no cap */
};

void ts_buf_init(struct ts_buf *b, size_t max);
enum ts_err ts_buf_append(struct ts_buf *b, const void *p, size_t n);
enum ts_err ts_buf_printf(struct ts_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ts_buf_reset(struct ts_buf *b); /* len = 0, keeps memory */
void ts_buf_free(struct ts_buf *b);

#endif /* TS_API_BUF_H */
