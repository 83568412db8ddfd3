/*
 * audit.h - the audit log of admin writes: every request to a route only
 * admins may use that writes (method other than GET) runs in one
 * transaction with the row that records it (audit_event, migration 0007).
 * The dispatcher opens the transaction before the handler and, when the
 * handler succeeded, inserts the row and commits; a failed request rolls
 * back and leaves no row, and a write whose record cannot be written is
 * not kept either.
 */
#ifndef TS_SERVER_AUDIT_H
#define TS_SERVER_AUDIT_H

#include <stdbool.h>
#include <stddef.h>

#include "server/http/route.h"
#include "server/server.h"

/* Whether requests to route are recorded: admin-only writes. */
bool ts_audit_recorded(const struct ts_route *route);

/* Before the handler: the request's connection, in a transaction. */
enum ts_err ts_audit_begin(struct ts_ctx *ctx, struct ts_error *err);

/* After a handler that succeeded: record the request (who, what, the
 * status it answers) and commit. On an error nothing is kept (rolled
 * back) and the caller must answer the error instead. */
enum ts_err ts_audit_commit(struct ts_ctx *ctx, struct ts_error *err);

/*
 * The members of a request body as recorded (new JSON text; free()), or
 * NULL for a body that is empty or not JSON. Secrets never: the value of
 * a member named token, secret or password becomes "(redacted)", and an
 * env object keeps its names with null values, at any depth.
 */
char *ts_audit_changes(const char *body, size_t len);

#endif /* TS_SERVER_AUDIT_H */
