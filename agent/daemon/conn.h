/*
 * conn.h - the agent's connection to the server: one libcurl handle per
 * thread, the bearer token read from --token-file (again after a 401, so a
 * rotated token is picked up), TLS files for an https:// server (read by
 * libcurl at each new connection), and an abort flag that ends a transfer in
 * progress within a second when the agent stops.
 */
#ifndef TS_AGENT_DAEMON_CONN_H
#define TS_AGENT_DAEMON_CONN_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "api/client/client.h" /* ts_problem_text for the answers */
#include "api/err.h"

struct ts_conn;

/* For an https:// server (--ca, --cert, --key), each NULL when not given:
 * the CAs the server's certificate must chain to (else the system's), and
 * a client certificate with its key, which a server with --tls-client-ca
 * requires of agent tokens. */
struct ts_conn_tls {
    const char *ca, *cert, *key;
};

/* base_url, token_file and the files of tls (NULL: none) are copied; stop
 * (borrowed) aborts transfers when it becomes true. New; NULL when out of
 * memory. */
struct ts_conn *ts_conn_new(const char *base_url, const char *token_file,
                            const struct ts_conn_tls *tls, const atomic_bool *stop);
void ts_conn_free(struct ts_conn *c); /* NULL is a no-op */

/*
 * method path (from "/") with body (borrowed JSON or NULL), waiting at most
 * timeout_s. On TS_OK *status is the HTTP status and *out the parsed JSON
 * body (new; NULL when the body is not JSON). A transport failure or an
 * abort is TS_ERR_IO.
 */
enum ts_err ts_conn_json(struct ts_conn *c, const char *method, const char *path,
                         const json_t *body, long timeout_s, long *status, json_t **out,
                         struct ts_error *err);

#endif /* TS_AGENT_DAEMON_CONN_H */
