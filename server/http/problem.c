/*
 * problem.c - RFC 9457 problem details built from struct ts_error.
 */
#include "server/http/problem.h"

#include <stdio.h>

#include "api/log.h"

void ts_problem_reply(struct ts_request *r, const struct ts_error *err)
{
    enum ts_err code = err->code;
    int status = ts_err_http_status(code);
    bool internal = status >= 500 && code != TS_ERR_DATABASE && code != TS_ERR_NOT_READY;
    char type[96];
    snprintf(type, sizeof(type), "urn:tessera:error:%s", ts_err_code(code));
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string(type));
    json_object_set_new(o, "title", json_string(ts_err_title(code)));
    json_object_set_new(o, "status", json_integer(status));
    json_object_set_new(o, "code", json_string(ts_err_code(code)));
    if (internal) {
        ts_log_error("request failed: %s detail=\"%s\"", err->message, err->detail);
        json_object_set_new(o, "detail",
                            json_string("internal error; the server log has the details"));
    } else {
        json_object_set_new(o, "detail", json_string(err->message));
        if (err->detail[0])
            json_object_set_new(o, "cause", json_string(err->detail));
    }
    if (err->field[0])
        json_object_set_new(o, "field", json_string(err->field));
    if (err->hint[0])
        json_object_set_new(o, "hint", json_string(err->hint));
    json_object_set_new(o, "instance", json_string(r->path));
    json_object_set_new(o, "request_id", json_string(r->request_id));
    ts_http_reply_json(r, status, o);
    r->content_type = "application/problem+json";
    if (status == 401) /* RFC 6750: how to authenticate, and why this failed */
        ts_http_add_header(r, "WWW-Authenticate",
                           ts_http_header(r, "Authorization") == NULL
                               ? "Bearer realm=\"tessera\""
                               : "Bearer realm=\"tessera\", error=\"invalid_token\"");
}
