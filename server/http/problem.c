/*
 * problem.c - RFC 9457 problem details built from struct ts_error.
 */
#include "server/http/problem.h"

#include <stdio.h>

#include "api/log.h"
#include "api/wire.h"

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
    json_t *o = ts_wire_problem_encode(&p);
    ts_http_reply_json(r, status, o);
    r->content_type = "application/problem+json";
    if (status == 401) /* RFC 6750: how to authenticate, and why this failed */
        ts_http_add_header(r, "WWW-Authenticate",
                           ts_http_header(r, "Authorization") == NULL
                               ? "Bearer realm=\"tessera\""
                               : "Bearer realm=\"tessera\", error=\"invalid_token\"");
}
