/*
 * client.c - libcurl easy handles, one per client, reused for keep-alive.
 */
#include "api/client/client.h"
#include "api/wire.h"

#include <curl/curl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_RESPONSE (64u << 20)

struct ts_client {
    CURL *curl;
    char *base;
    char *auth;            /* "Authorization: Bearer ..." or NULL */
    char *ca, *cert, *key; /* TLS files, or NULL */
    long timeout_s;        /* a whole request (ts_client_do) */
    long connect_s;        /* connecting; 0: libcurl's */
    const atomic_bool *stop;
    char errbuf[CURL_ERROR_SIZE];
};

void ts_client_global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct ts_client *ts_client_new(const char *base_url, const char *token)
{
    struct ts_client *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->curl = curl_easy_init();
    c->base = strdup(base_url);
    if (c->curl == NULL || c->base == NULL) {
        ts_client_free(c);
        return NULL;
    }
    size_t n = strlen(c->base);
    while (n > 0 && c->base[n - 1] == '/')
        c->base[--n] = '\0';
    c->timeout_s = 120;
    ts_client_set_token(c, token);
    return c;
}

void ts_client_set_timeouts(struct ts_client *c, long total_s, long connect_s)
{
    c->timeout_s = total_s;
    c->connect_s = connect_s;
}

void ts_client_set_abort(struct ts_client *c, const atomic_bool *stop)
{
    c->stop = stop;
}

void ts_client_set_token(struct ts_client *c, const char *token)
{
    free(c->auth);
    c->auth = NULL;
    if (token == NULL)
        return;
    size_t n = strlen(token) + 32;
    c->auth = malloc(n);
    if (c->auth)
        snprintf(c->auth, n, "Authorization: Bearer %s", token);
}

static int set_file(char **field, const char *path)
{
    free(*field);
    *field = NULL;
    if (path == NULL)
        return 0;
    *field = strdup(path);
    return *field ? 0 : -1;
}

int ts_client_set_tls(struct ts_client *c, const char *ca, const char *cert, const char *key)
{
    return set_file(&c->ca, ca) | set_file(&c->cert, cert) | set_file(&c->key, key);
}

void ts_client_free(struct ts_client *c)
{
    if (c == NULL)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->base);
    free(c->auth);
    free(c->ca);
    free(c->cert);
    free(c->key);
    free(c);
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    const atomic_bool *stop = ud;
    return atomic_load(stop) ? 1 : 0; /* ends the transfer: CURLE_ABORTED_BY_CALLBACK */
}

/* The options every request shares: TLS files, the abort flag, the error text. */
static void common_options(struct ts_client *c, CURL *h)
{
    c->errbuf[0] = '\0';
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
    if (c->stop) {
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)c->stop);
    }
    if (c->ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
    if (c->cert)
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert);
    if (c->key)
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->key);
}

/* A failed transfer as an error: TLS failures say so and what to check. */
static enum ts_err transfer_error(const struct ts_client *c, CURLcode rc, struct ts_error *err)
{
    const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc);
    switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
        ts_error_set(err, TS_ERR_IO, "could not make a TLS connection to the server: %s", why);
        ts_error_hint(err,
                      "the server's certificate must be issued by the CA in the --ca file "
                      "(TESSERA_CA)%s, for the name or address in the server URL",
                      c->ca ? "" : " or the system's CAs");
        return TS_ERR_IO;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CLIENTCERT:
        ts_error_set(err, TS_ERR_IO, "could not make a TLS connection to the server: %s", why);
        ts_error_hint(err, "check the --ca, --cert and --key files (TESSERA_CA, TESSERA_CERT, "
                           "TESSERA_KEY) and that the server serves HTTPS");
        return TS_ERR_IO;
    case CURLE_GOT_NOTHING:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_RECV_ERROR:
        ts_error_set(err, TS_ERR_IO, "could not reach the server: %s", why);
        if (strncmp(c->base, "http://", 7) == 0)
            ts_error_hint(err, "a server that serves HTTPS (--tls-cert) needs an https:// URL");
        return TS_ERR_IO;
    default:
        return ts_error_set(err, TS_ERR_IO, "could not reach the server: %s", why);
    }
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct ts_buf *b = ud;
    return ts_buf_append(b, p, size * n) == TS_OK ? size * n : 0;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    struct ts_buf *b = ud;
    /* a new status line starts a new response (after 100 Continue) */
    if (size * n >= 5 && strncmp(p, "HTTP/", 5) == 0)
        ts_buf_reset(b);
    return ts_buf_append(b, p, size * n) == TS_OK ? size * n : 0;
}

enum ts_err ts_client_do(struct ts_client *c, const char *method, const char *path,
                         const char *body, size_t len, const char *const *headers,
                         struct ts_response *out, struct ts_error *err)
{
    memset(out, 0, sizeof(*out));
    ts_buf_init(&out->body, MAX_RESPONSE);
    ts_buf_init(&out->headers, 1u << 20);
    size_t urllen = strlen(c->base) + strlen(path) + 1;
    char *url = malloc(urllen);
    if (url == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    snprintf(url, urllen, "%s%s", c->base, path);
    struct curl_slist *hl = NULL;
    if (c->auth)
        hl = curl_slist_append(hl, c->auth);
    bool typed = false;
    for (size_t i = 0; headers && headers[i]; i++)
        typed = typed || strncasecmp(headers[i], "Content-Type:", 13) == 0;
    if (body != NULL && !typed)
        hl = curl_slist_append(hl, "Content-Type: application/json");
    hl = curl_slist_append(hl, "Expect:");
    for (size_t i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    CURL *h = c->curl;
    curl_easy_reset(h);
    common_options(c, h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out->body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &out->headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, c->timeout_s);
    if (c->connect_s > 0)
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, c->connect_s);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hl);
    free(url);
    if (rc != CURLE_OK) {
        ts_response_free(out);
        return transfer_error(c, rc, err);
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    char ct[128];
    if (out->body.len > 0 && ts_response_header(out, "Content-Type", ct, sizeof(ct)) &&
        strstr(ct, "json") != NULL)
        out->json = json_loadb(out->body.data, out->body.len, 0, NULL);
    return TS_OK;
}

enum ts_err ts_client_json(struct ts_client *c, const char *method, const char *path,
                           const json_t *body, const char *const *headers, struct ts_response *out,
                           struct ts_error *err)
{
    char *text = body ? ts_wire_dumps(body) : NULL;
    if (body && text == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    enum ts_err e = ts_client_do(c, method, path, text, text ? strlen(text) : 0, headers, out, err);
    free(text);
    return e;
}

struct stream {
    CURL *h;
    ts_client_data_fn on_data;
    void *ud;
    struct ts_buf *body; /* a non-2xx body is kept here */
    bool stopped;
};

static size_t on_stream(char *p, size_t size, size_t n, void *ud)
{
    struct stream *s = ud;
    long status = 0;
    curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status >= 300)
        return ts_buf_append(s->body, p, size * n) == TS_OK ? size * n : 0;
    if (s->on_data(p, size * n, s->ud) != 0) {
        s->stopped = true;
        return 0; /* ends the transfer with CURLE_WRITE_ERROR */
    }
    return size * n;
}

enum ts_err ts_client_stream(struct ts_client *c, const char *path, const char *const *headers,
                             ts_client_data_fn on_data, void *ud, struct ts_response *out,
                             struct ts_error *err)
{
    memset(out, 0, sizeof(*out));
    ts_buf_init(&out->body, MAX_RESPONSE);
    ts_buf_init(&out->headers, 1u << 20);
    size_t urllen = strlen(c->base) + strlen(path) + 1;
    char *url = malloc(urllen);
    if (url == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    snprintf(url, urllen, "%s%s", c->base, path);
    struct curl_slist *hl = NULL;
    if (c->auth)
        hl = curl_slist_append(hl, c->auth);
    for (size_t i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    CURL *h = c->curl;
    struct stream s = {.h = h, .on_data = on_data, .ud = ud, .body = &out->body};
    curl_easy_reset(h);
    common_options(c, h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &out->headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hl);
    free(url);
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && s.stopped)) {
        ts_response_free(out);
        return transfer_error(c, rc, err);
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    char ct[128];
    if (out->body.len > 0 && ts_response_header(out, "Content-Type", ct, sizeof(ct)) &&
        strstr(ct, "json") != NULL)
        out->json = json_loadb(out->body.data, out->body.len, 0, NULL);
    return TS_OK;
}

const char *ts_problem_text(const json_t *body)
{
    struct ts_problem p;
    struct ts_error err;
    if (ts_wire_problem_decode(body, &p, &err) != TS_OK)
        return "";
    const char *d = p.detail != NULL ? p.detail : p.title;
    return d != NULL ? d : "";
}

const char *ts_response_header(const struct ts_response *r, const char *name, char *buf, size_t len)
{
    size_t nl = strlen(name);
    const char *p = r->headers.data;
    while (p && *p) {
        const char *eol = strstr(p, "\r\n");
        size_t linelen = eol ? (size_t)(eol - p) : strlen(p);
        if (linelen > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            size_t vl = (size_t)(p + linelen - v);
            if (vl >= len)
                vl = len - 1;
            memcpy(buf, v, vl);
            buf[vl] = '\0';
            return buf;
        }
        p = eol ? eol + 2 : NULL;
    }
    return NULL;
}

void ts_response_free(struct ts_response *r)
{
    if (r == NULL)
        return;
    ts_buf_free(&r->body);
    ts_buf_free(&r->headers);
    if (r->json)
        json_decref(r->json);
    r->json = NULL;
}
