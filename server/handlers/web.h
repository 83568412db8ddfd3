/*
 * web.h - the dashboard's files (web/ and web/vendor/, compiled in by
 * cmake/embed.cmake) and the handlers that serve them.
 */
#ifndef TS_SERVER_HANDLERS_WEB_H
#define TS_SERVER_HANDLERS_WEB_H

#include <stdbool.h>
#include <stddef.h>

#include "api/embedded.h"
#include "server/handlers/handlers.h"

/* GET /: web/index.html. */
enum ts_err ts_h_web_index(void *ctx, struct ts_request *r, struct ts_error *err);
/* GET /ui/{file}: a file of web/. */
enum ts_err ts_h_web_file(void *ctx, struct ts_request *r, struct ts_error *err);
/* GET /ui/vendor/{file}: a file of web/vendor/. */
enum ts_err ts_h_web_vendor_file(void *ctx, struct ts_request *r, struct ts_error *err);

/* The embedded file called name in web/ (vendor false) or web/vendor/
 * (vendor true); borrowed, static. NULL when there is none: only names
 * known at build time exist, so no request reaches the file system. */
const struct ts_embedded_file *ts_web_find(const char *name, bool vendor);

/* The Content-Type for a file name, by its extension (static);
 * application/octet-stream for an unknown one. */
const char *ts_web_content_type(const char *name);

/* A strong ETag of a file's bytes: a quoted 16-digit hex FNV-1a hash
 * ("\"0123456789abcdef\""); out gets 19 bytes. */
void ts_web_etag(const struct ts_embedded_file *f, char out[19]);

/* Whether an If-None-Match header value names etag (or is "*"). */
bool ts_web_etag_matches(const char *if_none_match, const char *etag);

#endif /* TS_SERVER_HANDLERS_WEB_H */
