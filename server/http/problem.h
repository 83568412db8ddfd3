/*
 * problem.h - the one place an error becomes an HTTP response: RFC 9457
 * application/problem+json with Tessera's stable "code".
 *
 *   {"type": "urn:tessera:error:invalid_value", "title": "Invalid value",
 *    "status": 422, "code": "invalid_value",
 *    "detail": "portion must be between 0 and 1: 1.5",
 *    "field": "gpu.portion", "hint": "...", "instance": "/api/v1/jobs",
 *    "request_id": "..."}
 *
 * Internal errors (5xx other than database_unavailable/not_ready) keep their
 * detail in the log, not in the body.
 */
#ifndef TS_SERVER_HTTP_PROBLEM_H
#define TS_SERVER_HTTP_PROBLEM_H

#include "api/err.h"
#include "server/http/http.h"

void ts_problem_reply(struct ts_request *r, const struct ts_error *err);

#endif /* TS_SERVER_HTTP_PROBLEM_H */
