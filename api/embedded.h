/*
 * embedded.h - files compiled into a binary by cmake/embed.cmake.
 *
 * Migrations, the OpenAPI document and the web assets travel inside the
 * binaries, so a built tessera-server needs nothing installed beside it.
 */
#ifndef TS_API_EMBEDDED_H
#define TS_API_EMBEDDED_H

#include <stddef.h>

struct ts_embedded_file {
    const char *name; /* base name, e.g. "0001_init.sql" */
    const char *data; /* NUL-terminated bytes, static */
    size_t len;       /* bytes, not counting the NUL */
};

#endif /* TS_API_EMBEDDED_H */
