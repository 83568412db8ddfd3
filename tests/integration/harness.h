/*
 * harness.h - integration tests' real server: tessera-server started as a
 * child process on a free loopback port with its own data folder (and so its
 * own embedded PostgreSQL), driven over HTTP with libcurl, and inspected
 * directly over libpq to prove that failed requests write nothing.
 */
#ifndef TS_TESTS_INTEGRATION_HARNESS_H
#define TS_TESTS_INTEGRATION_HARNESS_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "api/client/client.h"
#include "tests/integration/specproxy.h"

#define TS_IT_ADMIN_TOKEN "it-admin-token-0123456789abcdef"

struct ts_it_server {
    char dir[256];        /* data folder (removed by stop unless keep) */
    char url[128];        /* "http://127.0.0.1:PORT" */
    char direct_url[128]; /* the server's own address: url unless proxied */
    char conninfo[512];   /* libpq conninfo of its database */
    pid_t pid;
    struct ts_client *admin;      /* a client with TS_IT_ADMIN_TOKEN */
    struct ts_it_specproxy proxy; /* with TS_IT_PRISM: url is the proxy's */
};

/* When false, servers start without TESSERA_ADMIN_TOKEN (default true). */
extern bool ts_it_admin_from_env;

/* The TLS files of the harness's clients (ts_it_start's admin client and
 * ts_it_client), for a server started with --tls-cert: ca, the CA of its
 * certificate; cert and key, a client certificate. All NULL (the default):
 * plain HTTP. Paths are borrowed. */
struct ts_it_tls {
    const char *ca, *cert, *key;
};
extern struct ts_it_tls ts_it_tls;

/* Start a server: extra_args is NULL or a NULL-terminated list of extra
 * arguments; dir NULL makes a new temporary folder (else reuse dir). Waits
 * until /readyz answers 200. Returns 0, or -1 with a message on stderr. */
int ts_it_start(struct ts_it_server *s, const char *dir, const char *const *extra_args);
/* SIGTERM and wait (SIGKILL after 30 s). Returns -1 when the server log
 * holds a sanitizer report (printed to stderr), or when the Prism proxy
 * (TS_IT_PRISM, specproxy.h) saw a response api/openapi.yaml does not allow;
 * else 0. */
int ts_it_stop(struct ts_it_server *s);
/* SIGKILL the server only (its PostgreSQL keeps running, as after a crash). */
void ts_it_crash(struct ts_it_server *s);
/* Remove the data folder (after stop). */
void ts_it_cleanup(struct ts_it_server *s);

/* Request helpers over a client; body is JSON text or NULL. The response's
 * status is returned; *out (may be NULL) keeps the response to inspect. */
long ts_it_req(struct ts_client *c, const char *method, const char *path, const char *body,
               const char *const *headers, struct ts_response *out);
/* A new client of s with token (NULL: none). */
struct ts_client *ts_it_client(const struct ts_it_server *s, const char *token);
/* The same, of the server itself even when a Prism proxy is in front. */
struct ts_client *ts_it_client_direct(const struct ts_it_server *s, const char *token);
/* Create a token with role and projects (JSON array text or NULL) and
 * return its secret (static storage per call: copy it). */
const char *ts_it_token(struct ts_it_server *s, const char *name, const char *role,
                        const char *projects_json);

/* A digest of every row of every table: equal before and after a request
 * means it wrote nothing. Taken once the scheduler loop's own writes have
 * settled (two digests 50 ms apart agree). out gets 33 bytes. */
int ts_it_db_digest(const struct ts_it_server *s, char out[33]);
/* Run SQL on the server's database; returns the first value of the first row
 * into buf (or "" when none). 0, or -1 on error. */
int ts_it_sql(const struct ts_it_server *s, const char *sql, char *buf, size_t len);

/* JSON helpers for assertions. */
const char *ts_it_str(const json_t *o, const char *key); /* "" when absent */
long long ts_it_int(const json_t *o, const char *key);   /* -1 when absent */

#endif /* TS_TESTS_INTEGRATION_HARNESS_H */
