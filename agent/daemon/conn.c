/*
 * conn.c - libcurl requests to the server with JSON bodies, a token file,
 * and an abort flag.
 */
#include "agent/daemon/conn.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/files.h"
#include "api/buf.h"
#include "api/log.h"
#include "api/wire.h"

#define MAX_RESPONSE (16u << 20)

struct ts_conn {
    CURL *curl;
    char *base;
    char *token_file;
    char *auth;            /* "Authorization: Bearer ..." or NULL */
    char *ca, *cert, *key; /* TLS files, or NULL */
    const atomic_bool *stop;
    char errbuf[CURL_ERROR_SIZE];
};

/* (Re)read the token file: its first line, blanks trimmed. */
static void load_token(struct ts_conn *c)
{
    free(c->auth);
    c->auth = NULL;
    if (c->token_file == NULL)
        return;
    char *t = ts_files_read(c->token_file, 4096, NULL);
    if (t == NULL) {
        ts_log_error("could not read token file %s", c->token_file);
        return;
    }
    char *s = t;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    size_t n = strcspn(s, " \t\r\n");
    s[n] = '\0';
    size_t len = n + 32;
    c->auth = malloc(len);
    if (c->auth != NULL)
        snprintf(c->auth, len, "Authorization: Bearer %s", s);
    free(t);
}

/* A copy of s, or NULL; *bad set when s was given but could not be copied. */
static char *copy(const char *s, bool *bad)
{
    char *d = s != NULL ? strdup(s) : NULL;
    *bad = *bad || (s != NULL && d == NULL);
    return d;
}

struct ts_conn *ts_conn_new(const char *base_url, const char *token_file,
                            const struct ts_conn_tls *tls, const atomic_bool *stop)
{
    struct ts_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    bool bad = false;
    c->curl = curl_easy_init();
    c->base = strdup(base_url);
    c->token_file = copy(token_file, &bad);
    if (tls != NULL) {
        c->ca = copy(tls->ca, &bad);
        c->cert = copy(tls->cert, &bad);
        c->key = copy(tls->key, &bad);
    }
    c->stop = stop;
    if (c->curl == NULL || c->base == NULL || bad) {
        ts_conn_free(c);
        return NULL;
    }
    size_t n = strlen(c->base);
    while (n > 0 && c->base[n - 1] == '/')
        c->base[--n] = '\0';
    load_token(c);
    return c;
}

void ts_conn_free(struct ts_conn *c)
{
    if (c == NULL)
        return;
    if (c->curl != NULL)
        curl_easy_cleanup(c->curl);
    free(c->base);
    free(c->token_file);
    free(c->auth);
    free(c->ca);
    free(c->cert);
    free(c->key);
    free(c);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    return ts_buf_append(ud, p, size * n) == TS_OK ? size * n : 0;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    const atomic_bool *stop = ud;
    return stop != NULL && atomic_load(stop) ? 1 : 0;
}

static enum ts_err once(struct ts_conn *c, const char *method, const char *url, const char *text,
                        long timeout_s, long *status, struct ts_buf *body, struct ts_error *err)
{
    struct curl_slist *hl = NULL;
    if (c->auth != NULL)
        hl = curl_slist_append(hl, c->auth);
    if (text != NULL)
        hl = curl_slist_append(hl, "Content-Type: application/json");
    hl = curl_slist_append(hl, "Expect:");
    CURL *h = c->curl;
    curl_easy_reset(h);
    c->errbuf[0] = '\0';
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
    if (c->ca != NULL)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
    if (c->cert != NULL)
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert);
    if (c->key != NULL)
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->key);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)c->stop);
    if (text != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
    }
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hl);
    if (rc != CURLE_OK)
        return ts_error_set(err, TS_ERR_IO, "could not reach the server: %s",
                            c->errbuf[0] != '\0' ? c->errbuf : curl_easy_strerror(rc));
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    return TS_OK;
}

enum ts_err ts_conn_json(struct ts_conn *c, const char *method, const char *path,
                         const json_t *body, long timeout_s, long *status, json_t **out,
                         struct ts_error *err)
{
    *out = NULL;
    *status = 0;
    char *text = body != NULL ? ts_wire_dumps(body) : NULL;
    if (body != NULL && text == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    size_t urllen = strlen(c->base) + strlen(path) + 1;
    char *url = malloc(urllen);
    if (url == NULL) {
        free(text);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    snprintf(url, urllen, "%s%s", c->base, path);
    struct ts_buf resp;
    ts_buf_init(&resp, MAX_RESPONSE);
    enum ts_err e = once(c, method, url, text, timeout_s, status, &resp, err);
    if (e == TS_OK && *status == 401 && c->token_file != NULL) {
        load_token(c); /* the token may have been rotated */
        ts_buf_reset(&resp);
        e = once(c, method, url, text, timeout_s, status, &resp, err);
    }
    if (e == TS_OK && resp.len > 0)
        *out = json_loadb(resp.data, resp.len, 0, NULL);
    ts_buf_free(&resp);
    free(url);
    free(text);
    return e;
}

const char *ts_conn_problem(const json_t *body)
{
    const char *d = json_string_value(json_object_get(body, "detail"));
    if (d == NULL)
        d = json_string_value(json_object_get(body, "title"));
    return d != NULL ? d : "";
}
