/*
 * req.h - the CLI's requests to the API: retries, and the one place where an
 * HTTP status becomes an exit status and a problem+json body becomes the
 * message on stderr.
 *
 * Retries: a GET, or a request flagged TS_REQ_RETRY (a submit with its
 * Idempotency-Key, a cancel), is sent up to 4 times when the server cannot be
 * reached or answers 5xx, waiting 0.2, 0.4 and 0.8 s in between. The same
 * headers go with every attempt, so a submit keeps its key.
 *
 * Exit statuses: 2xx 0; 401 and 403 5; 404 3; 409, 412 and 428 4; other 4xx
 * (the request was invalid) 1, except 422 unknown_reference (it names a
 * project or department that does not exist) 3; 5xx and no answer 2.
 */
#ifndef TS_API_CLI_REQ_H
#define TS_API_CLI_REQ_H

#include <jansson.h>
#include <stddef.h>

#include "api/cli/cli.h"
#include "api/client/client.h"

#define TS_REQ_RETRY 0x1 /* retry on no answer and on 5xx (GET always does) */
#define TS_REQ_KEEP 0x2  /* on an HTTP error print nothing and keep *out for the caller */

/*
 * Send method path with body (borrowed JSON, or NULL) and headers (NULL or a
 * NULL-terminated list). Returns TS_EXIT_OK with the response in *out, or
 * the exit status for the failure: the problem is printed to stderr and *out
 * holds nothing, except that with TS_REQ_KEEP an HTTP error is not printed
 * and *out holds the response. Free *out with ts_response_free either way.
 */
int ts_req(struct ts_cli *cli, const char *method, const char *path, const json_t *body,
           const char *const *headers, unsigned flags, struct ts_response *out);

/* GET path whose 2xx body goes to on_data as it arrives (ts_client_stream);
 * failures as ts_req, without retries once data has arrived. */
int ts_req_stream(struct ts_cli *cli, const char *path, ts_client_data_fn on_data, void *ud);

/* The exit status for an HTTP status. */
int ts_req_exit(long status);
/* Print the error of response r to stderr: the problem's detail, cause and
 * hint, or the status and the body's first line when it is not a problem.
 * On a 401 the hint is the CLI's: where to give a token. */
void ts_req_print_problem(const struct ts_response *r);
/* Percent-encode s for a path segment or a query value into buf; returns
 * buf (truncated to len, always NUL-terminated). */
char *ts_req_escape(const char *s, char *buf, size_t len);

#endif /* TS_API_CLI_REQ_H */
