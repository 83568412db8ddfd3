/*
 * conn.c - the agent's requests to the server over api/client (the one
 * libcurl client, shared with the CLI): JSON bodies, the token read from its
 * file (again after a 401), TLS files, an abort flag.
 */
#include "agent/daemon/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/client/client.h"
#include "api/files.h"
#include "api/log.h"

#define CONNECT_TIMEOUT_S 10

struct ts_conn {
    struct ts_client *client;
    char *token_file;
};

/* (Re)read the token file: its first line, blanks trimmed. */
static void load_token(struct ts_conn *c)
{
    ts_client_set_token(c->client, NULL);
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
    s[strcspn(s, " \t\r\n")] = '\0';
    ts_client_set_token(c->client, s);
    free(t);
}

struct ts_conn *ts_conn_new(const char *base_url, const char *token_file,
                            const struct ts_conn_tls *tls, const atomic_bool *stop)
{
    struct ts_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->client = ts_client_new(base_url, NULL);
    c->token_file = token_file != NULL ? strdup(token_file) : NULL;
    if (c->client == NULL || (token_file != NULL && c->token_file == NULL) ||
        (tls != NULL && ts_client_set_tls(c->client, tls->ca, tls->cert, tls->key) != 0)) {
        ts_conn_free(c);
        return NULL;
    }
    ts_client_set_abort(c->client, stop);
    load_token(c);
    return c;
}

void ts_conn_free(struct ts_conn *c)
{
    if (c == NULL)
        return;
    ts_client_free(c->client);
    free(c->token_file);
    free(c);
}

enum ts_err ts_conn_json(struct ts_conn *c, const char *method, const char *path,
                         const json_t *body, long timeout_s, long *status, json_t **out,
                         struct ts_error *err)
{
    *out = NULL;
    *status = 0;
    ts_client_set_timeouts(c->client, timeout_s, CONNECT_TIMEOUT_S);
    struct ts_response r;
    enum ts_err e = ts_client_json(c->client, method, path, body, NULL, &r, err);
    if (e == TS_OK && r.status == 401 && c->token_file != NULL) {
        ts_response_free(&r);
        load_token(c); /* the token may have been rotated */
        e = ts_client_json(c->client, method, path, body, NULL, &r, err);
    }
    if (e != TS_OK)
        return e;
    *status = r.status;
    *out = r.json;
    r.json = NULL;
    ts_response_free(&r);
    return TS_OK;
}
