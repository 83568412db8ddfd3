/*
 * req.c - requests with retries; HTTP statuses to exit statuses; problems
 * to stderr (see req.h).
 */
#include "api/cli/req.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/clock.h"

#define ATTEMPTS 4
#define FIRST_DELAY_MS 200

int ts_req_exit(long status)
{
    if (status >= 200 && status < 300)
        return TS_EXIT_OK;
    if (status == 401 || status == 403)
        return TS_EXIT_AUTH;
    if (status == 404)
        return TS_EXIT_NOT_FOUND;
    if (status == 409 || status == 412 || status == 428)
        return TS_EXIT_CONFLICT;
    if (status >= 400 && status < 500)
        return TS_EXIT_USAGE;
    return TS_EXIT_SERVER;
}

/* The exit status for response r: its HTTP status's, except that a request
 * naming something that does not exist (422 unknown_reference: submit -p
 * nosuch, project create -d nosuch) is "not found". */
static int exit_of(const struct ts_response *r)
{
    const char *code = json_string_value(json_object_get(r->json, "code"));
    if (r->status == 422 && code && strcmp(code, "unknown_reference") == 0)
        return TS_EXIT_NOT_FOUND;
    return ts_req_exit(r->status);
}

void ts_req_print_problem(const struct ts_response *r)
{
    const json_t *p = r->json;
    const char *detail = json_string_value(json_object_get(p, "detail"));
    if (detail == NULL) {
        /* not a problem document: the status and the start of the body */
        const char *body = r->body.data ? r->body.data : "";
        int n = (int)strcspn(body, "\r\n");
        if (n > 200)
            n = 200;
        fprintf(stderr, "error: the server answered HTTP %ld%s%.*s\n", r->status, n ? ": " : "", n,
                body);
        return;
    }
    fprintf(stderr, "error: %s\n", detail);
    const char *cause = json_string_value(json_object_get(p, "cause"));
    const char *hint = json_string_value(json_object_get(p, "hint"));
    if (cause && cause[0])
        fprintf(stderr, "detail: %s\n", cause);
    /* the server's hint on a 401 speaks HTTP; the CLI's says where a token goes */
    if (r->status == 401)
        fprintf(stderr, "hint: give a token with --token TOKEN, TESSERA_TOKEN or 'tessera "
                        "login' (which stores it in the config file)\n");
    else if (hint && hint[0])
        fprintf(stderr, "hint: %s\n", hint);
}

static void print_unreachable(const struct ts_cli *cli, const struct ts_error *err)
{
    fprintf(stderr, "error: %s (server %s, from %s)\n", err->message, cli->conf.server,
            cli->conf.server_from ? cli->conf.server_from : "default");
    if (err->hint[0])
        fprintf(stderr, "hint: %s\n", err->hint);
    else
        fprintf(stderr, "hint: is tessera-server running there? set it with --server, "
                        "TESSERA_SERVER or tessera login\n");
}

/* A TLS failure (api/client/client.h) is not tried again: the files or the
 * server's certificate are wrong, which a second later does not change. */
static bool tls_failed(const struct ts_error *err)
{
    static const char tls[] = "could not make a TLS connection";
    return strncmp(err->message, tls, sizeof(tls) - 1) == 0;
}

int ts_req(struct ts_cli *cli, const char *method, const char *path, const json_t *body,
           const char *const *headers, unsigned flags, struct ts_response *out)
{
    memset(out, 0, sizeof(*out));
    struct ts_client *c = ts_cli_client(cli);
    if (c == NULL)
        return TS_EXIT_SERVER;
    bool retry = (flags & TS_REQ_RETRY) || strcmp(method, "GET") == 0;
    struct ts_error err;
    long delay = FIRST_DELAY_MS;
    for (int attempt = 1;; attempt++) {
        ts_error_clear(&err);
        enum ts_err e = ts_client_json(c, method, path, body, headers, out, &err);
        bool last = !retry || attempt == ATTEMPTS || tls_failed(&err);
        if (e != TS_OK) {
            if (last) {
                print_unreachable(cli, &err);
                return TS_EXIT_SERVER;
            }
        } else if (out->status < 500 || last) {
            break;
        }
        ts_response_free(out);
        ts_sleep_ms(delay);
        delay *= 2;
    }
    int rc = exit_of(out);
    if (rc != TS_EXIT_OK && !(flags & TS_REQ_KEEP)) {
        ts_req_print_problem(out);
        ts_response_free(out);
    }
    return rc;
}

struct stream_state {
    ts_client_data_fn on_data;
    void *ud;
    bool got;
};

static int on_stream(const char *data, size_t len, void *ud)
{
    struct stream_state *s = ud;
    s->got = true;
    return s->on_data(data, len, s->ud);
}

int ts_req_stream(struct ts_cli *cli, const char *path, ts_client_data_fn on_data, void *ud)
{
    struct ts_client *c = ts_cli_client(cli);
    if (c == NULL)
        return TS_EXIT_SERVER;
    struct stream_state s = {on_data, ud, false};
    struct ts_response r;
    struct ts_error err;
    long delay = FIRST_DELAY_MS;
    for (int attempt = 1;; attempt++) {
        ts_error_clear(&err);
        enum ts_err e = ts_client_stream(c, path, NULL, on_stream, &s, &r, &err);
        bool last = s.got || attempt == ATTEMPTS || tls_failed(&err);
        if (e != TS_OK) {
            if (last) {
                print_unreachable(cli, &err);
                return TS_EXIT_SERVER;
            }
        } else if (r.status < 500 || last) {
            break;
        }
        ts_response_free(&r);
        ts_sleep_ms(delay);
        delay *= 2;
    }
    int rc = exit_of(&r);
    if (rc != TS_EXIT_OK)
        ts_req_print_problem(&r);
    ts_response_free(&r);
    return rc;
}

char *ts_req_escape(const char *s, char *buf, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 4 <= len; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            buf[o++] = (char)*p;
        } else {
            buf[o++] = '%';
            buf[o++] = hex[*p >> 4];
            buf[o++] = hex[*p & 15];
        }
    }
    if (len > 0)
        buf[o < len ? o : len - 1] = '\0';
    return buf;
}
