/*
 * problem.c - RFC 9457 problem details built from struct ts_error.
 */
#include "server/http/problem.h"

#include <stdio.h>
#include <string.h>

#include "api/log.h"
#include "api/wire.h"

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    unsigned char lo = 0x80, hi = 0xBF;
    size_t n;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

/* s as JSON may carry it: itself when it is UTF-8, else a copy in the
 * request's arena with each byte that is not replaced by '?' (a message
 * quotes what a client sent, such as a query parameter's name, and a cut
 * at the message's cap can split a character); NULL stays NULL. */
static const char *utf8_safe(struct ts_request *r, const char *s)
{
    if (s == NULL)
        return NULL;
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, k;
    while (u[i] != '\0' && (k = utf8_len(u + i)) > 0)
        i += k;
    if (u[i] == '\0')
        return s;
    size_t len = strlen(s);
    char *out = ts_arena_alloc(r->arena, len + 1);
    if (out == NULL)
        return "?";
    memcpy(out, s, i);
    while (u[i] != '\0') {
        k = utf8_len(u + i);
        if (k == 0) {
            out[i++] = '?';
        } else {
            memcpy(out + i, s + i, k);
            i += k;
        }
    }
    out[i] = '\0';
    return out;
}

void ts_problem_reply(struct ts_request *r, const struct ts_error *err)
{
    enum ts_err code = err->code;
    int status = ts_err_http_status(code);
    bool internal = status >= 500 && code != TS_ERR_DATABASE && code != TS_ERR_NOT_READY;
    char type[96];
    snprintf(type, sizeof(type), "urn:tessera:error:%s", ts_err_code(code));
    struct ts_problem p = {.type = type,
                           .title = ts_err_title(code),
                           .status = status,
                           .code = ts_err_code(code),
                           .detail = err->message,
                           .cause = err->detail[0] ? err->detail : NULL,
                           .field = err->field[0] ? err->field : NULL,
                           .hint = err->hint[0] ? err->hint : NULL,
                           .instance = r->path,
                           .request_id = r->request_id};
    if (internal) {
        ts_log_error("request failed: %s detail=\"%s\"", err->message, err->detail);
        p.detail = "internal error; the server log has the details";
        p.cause = NULL;
    }
    p.detail = utf8_safe(r, p.detail);
    p.cause = utf8_safe(r, p.cause);
    p.field = utf8_safe(r, p.field);
    p.hint = utf8_safe(r, p.hint);
    p.instance = utf8_safe(r, p.instance);
    json_t *o = ts_wire_problem_encode(&p);
    ts_http_reply_json(r, status, o);
    r->content_type = "application/problem+json";
    if (status == 401) /* RFC 6750: how to authenticate, and why this failed */
        ts_http_add_header(r, "WWW-Authenticate",
                           ts_http_header(r, "Authorization") == NULL
                               ? "Bearer realm=\"tessera\""
                               : "Bearer realm=\"tessera\", error=\"invalid_token\"");
}
