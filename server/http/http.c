/*
 * http.c - libmicrohttpd glue: daemon lifecycle, the multi-call access
 * handler, capped bodies, responses, and per-request cleanup.
 *
 * Threads: one per connection (libmicrohttpd's MHD_USE_THREAD_PER_CONNECTION),
 * so a handler may block: long-polls and followed logs wait on their own
 * thread without holding up other connections. --max-connections bounds them.
 */
#include "server/http/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "api/clock.h"
#include "api/log.h"
#include "api/query.h"
#include "api/wire.h"
#include "server/http/problem.h"
#include "server/http/tls.h"

/* bodies up to this many times the limit are drained before a 413 */
#define DRAIN_FACTOR 8
/* A request line and header fields beyond these get 414 and 431 as
 * problem+json. libmicrohttpd answers with its own HTML page only what does
 * not fit a connection's memory (MEMORY_LIMIT), far beyond them. */
#define MAX_URI 8192
#define MAX_HEADERS (32 * 1024)
#define MEMORY_LIMIT (256 * 1024)

struct ts_http {
    struct MHD_Daemon *daemon;
    struct ts_http_config cfg;
    unsigned port;
};

static atomic_uint_fast64_t request_seq;
static uint32_t request_salt;

const char *ts_http_header(const struct ts_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

struct pairs {
    struct ts_query_pair *v;
    size_t n, cap;
};

static enum MHD_Result add_pair(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
    (void)kind;
    struct pairs *p = cls;
    if (p->v != NULL && p->n < p->cap)
        p->v[p->n] = (struct ts_query_pair){key, value};
    p->n++;
    return MHD_YES;
}

ssize_t ts_http_query_pairs(const struct ts_request *r, struct ts_query_pair **out)
{
    struct pairs p = {0};
    *out = NULL;
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_pair, &p); /* count */
    if (p.n == 0)
        return 0;
    p.cap = p.n;
    p.n = 0;
    p.v = ts_arena_alloc(r->arena, p.cap * sizeof(*p.v));
    if (p.v == NULL)
        return -1;
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_pair, &p);
    *out = p.v;
    return (ssize_t)(p.n < p.cap ? p.n : p.cap);
}

void ts_http_add_header(struct ts_request *r, const char *name, const char *value)
{
    if (r->nheaders >= TS_HTTP_MAX_HEADERS)
        return;
    r->header_names[r->nheaders] = ts_arena_strdup(r->arena, name);
    r->header_values[r->nheaders] = ts_arena_strdup(r->arena, value);
    if (r->header_names[r->nheaders] && r->header_values[r->nheaders])
        r->nheaders++;
}

/* ---- streamed responses (ts_http_reply_stream) ---------------------------- */

struct ts_http_stream {
    ts_http_stream_fn fn;
    void *cls; /* owned: free_cb(cls) */
    ts_http_stream_free_fn free_cb;
    int fd; /* the client's socket, to notice a hang-up; -1: unknown */
};

static void stream_free(struct ts_http_stream *s)
{
    if (s == NULL)
        return;
    if (s->free_cb)
        s->free_cb(s->cls);
    free(s);
}

void ts_http_reply_json(struct ts_request *r, int status, json_t *json)
{
    if (r->json)
        json_decref(r->json);
    stream_free(r->stream);
    r->stream = NULL;
    r->status = status;
    r->json = json;
    r->raw = NULL;
}

void ts_http_reply_stream(struct ts_request *r, int status, const char *content_type,
                          ts_http_stream_fn fn, void *cls, ts_http_stream_free_fn free_cb)
{
    stream_free(r->stream);
    r->stream = NULL;
    if (r->json)
        json_decref(r->json);
    r->json = NULL;
    struct ts_http_stream *s = calloc(1, sizeof(*s));
    const char *type = content_type ? ts_arena_strdup(r->arena, content_type) : NULL;
    if (s == NULL || (content_type != NULL && type == NULL)) {
        free(s);
        if (free_cb)
            free_cb(cls);
        r->status = 500;
        r->raw = "{\"status\":500,\"code\":\"out_of_memory\"}";
        r->raw_len = strlen(r->raw);
        r->content_type = "application/problem+json";
        return;
    }
    s->fn = fn;
    s->cls = cls;
    s->free_cb = free_cb;
    s->fd = -1;
    r->stream = s;
    r->status = status;
    r->raw = NULL;
    r->raw_len = 0;
    r->content_type = type;
}

/* Whether the client closed its end: POLLRDHUP without reading anything, so
 * a pipelined next request is not taken for a hang-up. */
static bool peer_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct ts_http_stream *s = cls;
    if (peer_gone(s->fd))
        return MHD_CONTENT_READER_END_WITH_ERROR;
    ssize_t n = s->fn(s->cls, buf, max);
    if (n == TS_HTTP_STREAM_END)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (n < 0 || (size_t)n > max)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    return n;
}

static void stream_done(void *cls)
{
    stream_free(cls);
}

static void stream_headers(struct MHD_Response *resp, const struct ts_request *r, const char *type)
{
    if (type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    for (int i = 0; i < r->nheaders; i++)
        MHD_add_response_header(resp, r->header_names[i], r->header_values[i]);
}

/* The response takes the stream: libmicrohttpd frees it (stream_done) when
 * it is done with the response, which can be after the request completed. */
static enum MHD_Result send_stream(struct MHD_Connection *c, struct ts_request *r)
{
    struct ts_http_stream *s = r->stream;
    r->stream = NULL;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    s->fd = ci ? ci->connect_fd : -1;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, s, stream_done);
    if (resp == NULL) {
        stream_free(s);
        return MHD_NO;
    }
    stream_headers(resp, r, r->content_type);
    /* a followed log can be quiet for long: no idle timeout while it streams */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_reply(struct MHD_Connection *c, struct ts_request *r)
{
    if (r->stream)
        return send_stream(c, r);
    char *text = NULL;
    const char *body = r->raw;
    size_t len = r->raw_len;
    const char *type = r->content_type;
    if (r->json) {
        text = ts_wire_dumps(r->json);
        if (text == NULL) {
            r->status = 500;
            body = "{\"status\":500,\"code\":\"out_of_memory\"}";
            len = strlen(body);
            type = "application/problem+json";
        } else {
            body = text;
            len = strlen(text);
            if (type == NULL)
                type = "application/json";
        }
    }
    if (body == NULL) {
        body = "";
        len = 0;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    free(text);
    if (resp == NULL)
        return MHD_NO;
    /* an empty body keeps its type (a job with no output yet is text/plain);
     * 204 and 304 carry no content */
    if (type && (len > 0 || (r->status != 204 && r->status != 304)))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    for (int i = 0; i < r->nheaders; i++)
        MHD_add_response_header(resp, r->header_names[i], r->header_values[i]);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static struct ts_request *request_new(struct ts_http *h, struct MHD_Connection *c)
{
    struct ts_request *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->arena = ts_arena_new();
    if (r->arena == NULL) {
        free(r);
        return NULL;
    }
    r->conn = c;
    r->route_index = -1;
    r->started_ns = ts_now_ns();
    uint64_t seq = atomic_fetch_add(&request_seq, 1) + 1;
    snprintf(r->request_id, sizeof(r->request_id), "%08x%08llx", request_salt,
             (unsigned long long)(seq & 0xffffffffULL));
    ts_buf_init(&r->body, h->cfg.max_body);
    return r;
}

/*
 * Called with the request line's target as the client sent it, before
 * libmicrohttpd unescapes it: the request starts here (its return value is
 * the access handler's *con_cls). "%00" would be unescaped to a NUL that
 * silently ends the path ("/jobs/1%00" read as "/jobs/1"), so it is noted
 * here and refused there.
 */
static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *c)
{
    struct ts_request *r = request_new(cls, c);
    if (r != NULL) {
        r->uri_len = strlen(uri);
        for (const char *p = strchr(uri, '%'); p != NULL && !r->uri_nul; p = strchr(p + 1, '%'))
            r->uri_nul = p[1] == '0' && p[2] == '0';
    }
    return r;
}

struct header_sums {
    size_t bytes;
    int content_lengths;
    bool transfer_encoding;
};

static enum MHD_Result sum_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    (void)kind;
    struct header_sums *h = cls;
    h->bytes += strlen(key) + (value ? strlen(value) : 0) + 4;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        h->content_lengths++;
    if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0)
        h->transfer_encoding = true;
    return MHD_YES;
}

/* What the request line and header fields alone make wrong: a code, or TS_OK. */
static enum ts_err framing(const struct ts_request *r, struct ts_error *err)
{
    if (r->uri_len > MAX_URI)
        return ts_error_set(err, TS_ERR_URI_TOO_LONG,
                            "the request target is %zu bytes; at most %d are read", r->uri_len,
                            MAX_URI);
    if (r->uri_nul)
        return ts_error_set(err, TS_ERR_BAD_REQUEST,
                            "the request target contains %%00 (a NUL byte), which no path or "
                            "query value may hold");
    struct header_sums h = {0};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, sum_header, &h);
    if (h.bytes > MAX_HEADERS)
        return ts_error_set(err, TS_ERR_HEADERS_TOO_LARGE,
                            "the header fields are %zu bytes; at most %d are read", h.bytes,
                            MAX_HEADERS);
    if (h.content_lengths > 1)
        return ts_error_set(err, TS_ERR_BAD_REQUEST,
                            "%d Content-Length header fields; a request has at most one",
                            h.content_lengths);
    if (h.content_lengths > 0 && h.transfer_encoding)
        return ts_error_set(err, TS_ERR_BAD_REQUEST,
                            "both Content-Length and Transfer-Encoding; a request has one or the "
                            "other");
    return TS_OK;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *c, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_size, void **con_cls)
{
    struct ts_http *h = cls;
    struct ts_request *r = *con_cls;
    if (r == NULL)
        return MHD_NO;       /* uri_seen ran out of memory */
    if (r->method == NULL) { /* the first call: the request line and headers are in */
        r->method = method;
        r->path = url;
        struct ts_error err;
        ts_error_clear(&err);
        if (framing(r, &err) != TS_OK) {
            /* answered before any body is read: the connection closes */
            ts_problem_reply(r, &err);
            return send_reply(c, r);
        }
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        bool drain = true;
        if (cl != NULL) {
            char *end;
            unsigned long long n = strtoull(cl, &end, 10);
            if (*end != '\0' || n > h->cfg.max_body)
                r->body_too_large = true;
            /* A body a few times over the limit is read and dropped before
             * the 413: a client still sending when the server closed would
             * see a broken connection ("failed sending data") instead. */
            drain = *end == '\0' && n <= (unsigned long long)h->cfg.max_body * DRAIN_FACTOR;
        }
        if (!r->body_too_large || drain)
            return MHD_YES; /* wait for the body, if any */
        /* far too large: refuse before reading it (the connection closes) */
        ts_log_set_request(r->request_id);
        h->cfg.dispatch(h->cfg.cls, r);
        ts_log_set_request(NULL);
        return send_reply(c, r);
    }
    if (*upload_size > 0) {
        if (!r->body_too_large && ts_buf_append(&r->body, upload_data, *upload_size) != TS_OK)
            r->body_too_large = true;
        *upload_size = 0; /* consumed, or discarded once over the cap */
        return MHD_YES;
    }
    if (r->status != 0)
        return MHD_YES; /* already answered */
    ts_log_set_request(r->request_id);
    h->cfg.dispatch(h->cfg.cls, r);
    ts_log_set_request(NULL);
    return send_reply(c, r);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct ts_http *h = cls;
    struct ts_request *r = *con_cls;
    if (r == NULL)
        return;
    if (h->cfg.complete)
        h->cfg.complete(h->cfg.cls, r);
    if (r->json)
        json_decref(r->json);
    stream_free(r->stream); /* a stream never handed to a response */
    ts_buf_free(&r->body);
    ts_arena_free(r->arena);
    free(r);
    *con_cls = NULL;
}

int ts_http_parse_listen(const char *s, char *host, size_t hostlen, unsigned *port)
{
    const char *colon;
    const char *h = s;
    size_t hl;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL || close[1] != ':')
            return -1;
        h = s + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return -1;
        hl = (size_t)(colon - s);
    }
    if (hl == 0 || hl >= hostlen)
        return -1;
    char *end;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || p > 65535)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (unsigned)p;
    return 0;
}

/* With a client CA, each connection carries what its client certificate was
 * found to be (tls.c), checked at most once per connection. */
static void connection_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe)
{
    (void)cls;
    (void)c;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = calloc(1, sizeof(struct ts_http_peer_cache));
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        free(*socket_context);
        *socket_context = NULL;
    }
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    ts_log_warn("http: %s", line);
}

enum ts_err ts_http_start(const struct ts_http_config *cfg, struct ts_http **out,
                          struct ts_error *err)
{
    char host[256];
    unsigned port;
    if (ts_http_parse_listen(cfg->listen, host, sizeof(host), &port) != 0)
        return ts_error_set(err, TS_ERR_CONFIG,
                            "invalid listen address: \"%s\": expected HOST:PORT", cfg->listen);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%u", port);
    int rc = getaddrinfo(host, portstr, &hints, &ai);
    if (rc != 0)
        return ts_error_set(err, TS_ERR_CONFIG, "could not resolve listen host \"%s\": %s", host,
                            gai_strerror(rc));
    struct ts_http *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        freeaddrinfo(ai);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    h->cfg = *cfg;
    if (request_salt == 0)
        request_salt = (uint32_t)ts_now_ns() ^ (uint32_t)getpid();
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* HTTPS: TLS 1.2 and 1.3 only; with a client CA every client is asked
     * for a certificate (not required: tls.c checks it where it must be) */
    struct MHD_OptionItem tls[6] = {{MHD_OPTION_END, 0, NULL}};
    if (cfg->tls != NULL) {
        flags |= MHD_USE_TLS;
        int n = 0;
        tls[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, cfg->tls->cert};
        tls[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, cfg->tls->key};
        tls[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                           (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"};
        if (cfg->tls->client_ca != NULL) {
            tls[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, cfg->tls->client_ca};
            tls[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION,
                                               (intptr_t)connection_notify, NULL};
        }
        tls[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    }
    h->daemon = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, access_handler, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
        NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_URI_LOG_CALLBACK, uri_seen, h,
        MHD_OPTION_NOTIFY_COMPLETED, completed, h, MHD_OPTION_CONNECTION_LIMIT,
        cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT, cfg->connection_timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MEMORY_LIMIT, MHD_OPTION_ARRAY, tls,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (h->daemon == NULL) {
        free(h);
        return ts_error_set(err, TS_ERR_CONFIG, "could not listen on %s", cfg->listen);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : port;
    *out = h;
    return TS_OK;
}

unsigned ts_http_port(const struct ts_http *h)
{
    return h->port;
}

void ts_http_stop(struct ts_http *h)
{
    if (h == NULL)
        return;
    MHD_stop_daemon(h->daemon);
    free(h);
}
