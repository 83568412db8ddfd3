/*
 * web.c - the dashboard: GET / answers web/index.html, GET /ui/{file} and
 * /ui/vendor/{file} the other files of web/ and web/vendor/.
 *
 * The files are compiled in (server/CMakeLists.txt, cmake/embed.cmake), so
 * only names known at build time exist and nothing from a request reaches
 * the file system: a path parameter is one segment, looked up by name.
 * These routes are public: the page itself asks for a token and sends it
 * with every API call.
 *
 * Caching: every answer carries a strong ETag (a hash of the file's bytes)
 * and "Cache-Control: no-cache", so a browser keeps its copy but asks each
 * time (If-None-Match -> 304, no body) and never runs a stale dashboard
 * after the server is upgraded.
 */
#include "server/handlers/web.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/array.h"

extern const struct ts_embedded_file ts_web_files[];
extern const size_t ts_web_count;
extern const struct ts_embedded_file ts_web_vendor_files[];
extern const size_t ts_web_vendor_count;

/* The page may load only what this server serves; uPlot sets inline
 * styles, hence 'unsafe-inline' for styles (never for scripts). */
#define WEB_CSP                                                                                    \
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "                    \
    "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; "         \
    "form-action 'self'; frame-ancestors 'none'"

const struct ts_embedded_file *ts_web_find(const char *name, bool vendor)
{
    const struct ts_embedded_file *files = vendor ? ts_web_vendor_files : ts_web_files;
    size_t n = vendor ? ts_web_vendor_count : ts_web_count;
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(files[i].name, name) == 0)
            return &files[i];
    return NULL;
}

static const struct {
    const char *ext;
    const char *type;
} content_types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".json", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".txt", "text/plain; charset=utf-8"},
    {".md", "text/plain; charset=utf-8"},
    {"LICENSE", "text/plain; charset=utf-8"},
};

const char *ts_web_content_type(const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < TS_ARRAY_LEN(content_types); i++) {
        size_t el = strlen(content_types[i].ext);
        if (len >= el && strcasecmp(name + len - el, content_types[i].ext) == 0)
            return content_types[i].type;
    }
    return "application/octet-stream";
}

void ts_web_etag(const struct ts_embedded_file *f, char out[19])
{
    uint64_t h = 14695981039346656037ULL; /* FNV-1a, 64 bits */
    for (size_t i = 0; i < f->len; i++) {
        h ^= (unsigned char)f->data[i];
        h *= 1099511628211ULL;
    }
    snprintf(out, 19, "\"%016llx\"", (unsigned long long)h);
}

bool ts_web_etag_matches(const char *if_none_match, const char *etag)
{
    /* a list of entity tags, each maybe weak (W/"..."): weak comparison */
    const char *p = if_none_match;
    size_t el = strlen(etag);
    while (p != NULL && *p != '\0') {
        p += strspn(p, " \t,");
        if (*p == '*')
            return true;
        if (strncmp(p, "W/", 2) == 0)
            p += 2;
        size_t tl = strcspn(p, ",");
        while (tl > 0 && (p[tl - 1] == ' ' || p[tl - 1] == '\t'))
            tl--;
        if (tl == el && strncmp(p, etag, el) == 0)
            return true;
        p = strchr(p, ',');
    }
    return false;
}

static enum ts_err serve(struct ts_request *r, const struct ts_embedded_file *f, const char *name,
                         struct ts_error *err)
{
    if (f == NULL)
        return ts_error_set(err, TS_ERR_NOT_FOUND, "the dashboard has no file \"%s\"", name);
    char etag[19];
    ts_web_etag(f, etag);
    const char *type = ts_web_content_type(f->name);
    ts_http_add_header(r, "ETag", etag);
    ts_http_add_header(r, "Cache-Control", "no-cache");
    ts_http_add_header(r, "X-Content-Type-Options", "nosniff");
    if (strncmp(type, "text/html", 9) == 0) {
        ts_http_add_header(r, "Content-Security-Policy", WEB_CSP);
        ts_http_add_header(r, "Referrer-Policy", "no-referrer");
    }
    const char *inm = ts_http_header(r, "If-None-Match");
    if (inm != NULL && ts_web_etag_matches(inm, etag)) {
        r->status = 304;
        r->raw = "";
        r->raw_len = 0;
        return TS_OK;
    }
    r->status = 200;
    r->raw = f->data;
    r->raw_len = f->len;
    r->content_type = type;
    return TS_OK;
}

enum ts_err ts_h_web_index(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return serve(r, ts_web_find("index.html", false), "index.html", err);
}

enum ts_err ts_h_web_file(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return serve(r, ts_web_find(r->params[0], false), r->params[0], err);
}

enum ts_err ts_h_web_vendor_file(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return serve(r, ts_web_find(r->params[0], true), r->params[0], err);
}
