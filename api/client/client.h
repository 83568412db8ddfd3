/*
 * client.h - a small libcurl client for the Tessera REST API, used by the
 * agent, the CLI, the tests and the benchmarks.
 *
 * One struct ts_client per thread: it keeps its connection alive between
 * requests. Call ts_client_global_init once before starting threads.
 */
#ifndef TS_API_CLIENT_CLIENT_H
#define TS_API_CLIENT_CLIENT_H

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>

#include "api/buf.h"
#include "api/err.h"

struct ts_client;

struct ts_response {
    long status;
    struct ts_buf body;    /* raw body, NUL-terminated */
    struct ts_buf headers; /* raw header lines of the final response */
    json_t *json;          /* the body parsed when it is JSON, else NULL (owned) */
};

void ts_client_global_init(void);
/* base_url like "http://127.0.0.1:8080"; token may be NULL. Strings are
 * copied. New; NULL when out of memory. */
struct ts_client *ts_client_new(const char *base_url, const char *token);
void ts_client_free(struct ts_client *c); /* NULL is a no-op */
/* Change the token (copied; NULL: send none). */
void ts_client_set_token(struct ts_client *c, const char *token);
/*
 * For an https:// server (strings copied; each NULL: not given): ca, the
 * PEM file of the CAs the server's certificate must chain to (else the
 * system's); cert and key, a client certificate (mTLS) and its key. 0, or
 * -1 when out of memory. A TLS failure of a request is TS_ERR_IO whose
 * message starts "could not make a TLS connection" and whose hint says
 * what to check.
 */
int ts_client_set_tls(struct ts_client *c, const char *ca, const char *cert, const char *key);
/* Limits of ts_client_do: the whole request (default 120 s; 0: none) and
 * connecting (default 0: libcurl's). */
void ts_client_set_timeouts(struct ts_client *c, long total_s, long connect_s);
/* stop (borrowed; NULL: none): a transfer in progress ends within about a
 * second of it becoming true, failing with TS_ERR_IO. */
void ts_client_set_abort(struct ts_client *c, const atomic_bool *stop);

/*
 * Send method path (path begins with "/"); body may be NULL. headers: NULL or
 * a NULL-terminated list of "Name: value". On TS_OK *out holds the response
 * (whatever its status; free with ts_response_free). A transport failure is
 * TS_ERR_IO with curl's message.
 */
enum ts_err ts_client_do(struct ts_client *c, const char *method, const char *path,
                         const char *body, size_t len, const char *const *headers,
                         struct ts_response *out, struct ts_error *err);
/* Same with a JSON body (borrowed; serialized compactly). */
enum ts_err ts_client_json(struct ts_client *c, const char *method, const char *path,
                           const json_t *body, const char *const *headers, struct ts_response *out,
                           struct ts_error *err);

/*
 * A GET whose successful (2xx) body is handed to on_data as it arrives
 * instead of being kept: for streams such as a followed job log. There is no
 * overall timeout. A response of any other status is kept in out->body (and
 * out->json) as ts_client_do keeps it. on_data gets borrowed bytes and
 * returns 0 to go on or -1 to stop reading; stopping is not an error.
 * On TS_OK *out holds the status and headers (free with ts_response_free).
 */
typedef int (*ts_client_data_fn)(const char *data, size_t len, void *ud);
enum ts_err ts_client_stream(struct ts_client *c, const char *path, const char *const *headers,
                             ts_client_data_fn on_data, void *ud, struct ts_response *out,
                             struct ts_error *err);

/* The value of a response header (case-insensitive), copied into buf;
 * NULL when absent. */
/* The "detail" (else "title") of a problem+json body, or "" (NULL too). */
const char *ts_problem_text(const json_t *body);
const char *ts_response_header(const struct ts_response *r, const char *name, char *buf,
                               size_t len);
void ts_response_free(struct ts_response *r);

#endif /* TS_API_CLIENT_CLIENT_H */
