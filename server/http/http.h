/*
 * http.h - the HTTP front end: the only code that includes <microhttpd.h>.
 *
 * libmicrohttpd's multi-call access handler is owned by http.c: the first
 * call allocates a struct ts_request and its arena, body chunks are appended
 * to a capped buffer (over the cap: 413, never truncated), the last call hands
 * the request to the dispatcher, and the completion callback frees it all.
 * Handlers see only struct ts_request and the accessors below.
 */
#ifndef TS_SERVER_HTTP_HTTP_H
#define TS_SERVER_HTTP_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "api/arena.h"
#include "api/buf.h"
#include "api/err.h"

#define TS_HTTP_MAX_PARAMS 4
#define TS_HTTP_MAX_HEADERS 8

struct ts_request {
    struct ts_arena *arena; /* freed when the request completes */
    const char *method;     /* borrowed from libmicrohttpd */
    const char *path;       /* borrowed; no query string */
    char request_id[20];
    struct ts_buf body; /* capped at the configured max body */
    bool body_too_large;
    int64_t started_ns; /* CLOCK_MONOTONIC */
    size_t uri_len;     /* of the request target as sent */
    bool uri_nul;       /* it holds %00 */

    /* filled by route matching */
    int route_index;                        /* -1: none */
    const char *params[TS_HTTP_MAX_PARAMS]; /* path parameters, in the arena */
    int nparams;

    /* response, filled by the handler or the dispatcher */
    int status;
    json_t *json;    /* steals: decref'd at completion */
    const char *raw; /* or a raw body (borrowed, must outlive the request) */
    size_t raw_len;
    const char *content_type;
    const char *header_names[TS_HTTP_MAX_HEADERS];
    const char *header_values[TS_HTTP_MAX_HEADERS];
    int nheaders;
    struct ts_http_stream *stream; /* a streamed body (ts_http_reply_stream), or NULL */
    bool held;                     /* the handler waited on purpose (a long-poll): timed apart from
                                      other requests, like a streamed body */

    void *conn; /* struct MHD_Connection *, opaque here */
    void *user; /* the dispatcher's per-request state */
};

/* Request header, borrowed from libmicrohttpd for the lifetime of the
 * request; NULL when absent. */
const char *ts_http_header(const struct ts_request *r, const char *name);
/* The query string has no lookup by name: handlers decode it whole by
 * their route's table (ts_h_query, api/query.h), which refuses what the
 * table does not name. Every name=value of it in the order sent (value
 * NULL for a name without '='), in the request's arena: *out new in the
 * arena (NULL when there are none), their number returned; -1 when out of
 * memory. */
struct ts_query_pair;
ssize_t ts_http_query_pairs(const struct ts_request *r, struct ts_query_pair **out);

/* Add a response header; both strings are copied into the arena. */
void ts_http_add_header(struct ts_request *r, const char *name, const char *value);
/* Set a JSON response (steals json). Drops a stream set before. */
void ts_http_reply_json(struct ts_request *r, int status, json_t *json);

/*
 * Streamed responses (chunked transfer encoding), for bodies that are made
 * while they are sent (followed job output).
 *
 * fn is called on the connection's thread whenever more can be sent. It
 * writes at most max bytes into buf and returns how many; 0 when nothing is
 * ready yet (it is called again at once, so it must first block for a
 * bounded time, about a second, e.g. waiting for a notification);
 * TS_HTTP_STREAM_END when the body is complete; TS_HTTP_STREAM_ERROR to
 * abort the connection. The connection's idle timeout is off while a stream
 * is sent; a client that hangs up ends the stream before fn is called again.
 * While fn blocks it holds its connection's thread (one per connection), so
 * it must not wait long: the server's stop waits for it.
 *
 * fn runs after the handler returned and after the request's database
 * connection went back to the pool, and may outlive the request: cls must
 * not point into the request's arena. ts_http_reply_stream takes cls:
 * free_cb(cls) runs exactly once, when the response is done with it (also
 * when the stream is never sent: an error reply replaced it, the connection
 * closed first). free_cb may be NULL.
 */
#define TS_HTTP_STREAM_END ((ssize_t)-1)
#define TS_HTTP_STREAM_ERROR ((ssize_t)-2)
typedef ssize_t (*ts_http_stream_fn)(void *cls, char *buf, size_t max);
typedef void (*ts_http_stream_free_fn)(void *cls);
/* content_type is copied. On out of memory cls is freed and the reply is a
 * 500. */
void ts_http_reply_stream(struct ts_request *r, int status, const char *content_type,
                          ts_http_stream_fn fn, void *cls, ts_http_stream_free_fn free_cb);

/*
 * The dispatcher: called once per complete request on a libmicrohttpd
 * thread. It must set r->status and a body (json or raw). A request whose body
 * was over the cap reaches it with body_too_large set.
 */
typedef void (*ts_http_dispatch_fn)(void *cls, struct ts_request *r);
/* Called when the request completes (response sent or connection closed),
 * before the request is freed: metrics, releasing per-request resources. */
typedef void (*ts_http_complete_fn)(void *cls, struct ts_request *r);

struct ts_http_tls;

struct ts_http_config {
    const char *listen;            /* "HOST:PORT"; PORT 0 picks a free port */
    const struct ts_http_tls *tls; /* HTTPS (borrowed, outlives the daemon); NULL: plain HTTP */
    size_t max_body;               /* bytes */
    unsigned max_connections;
    unsigned connection_timeout; /* seconds of inactivity */
    ts_http_dispatch_fn dispatch;
    ts_http_complete_fn complete;
    void *cls;
};

struct ts_http;

/* Start listening. *out is new; free with ts_http_stop. */
enum ts_err ts_http_start(const struct ts_http_config *cfg, struct ts_http **out,
                          struct ts_error *err);
/* The port actually bound (useful with port 0). */
unsigned ts_http_port(const struct ts_http *h);
void ts_http_stop(struct ts_http *h); /* NULL is a no-op */

/* Split "HOST:PORT" / "[V6]:PORT"; 0 or -1. host gets at most hostlen-1 bytes. */
int ts_http_parse_listen(const char *s, char *host, size_t hostlen, unsigned *port);

#endif /* TS_SERVER_HTTP_HTTP_H */
