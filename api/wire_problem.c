/*
 * wire_problem.c - RFC 9457 problem details (application/problem+json), the
 * body of every error the server answers: encoded by the server
 * (server/http/problem.c), decoded by the agent (and any client).
 *
 * The RFC lets a problem carry members of its own, so the decoder skips
 * members it does not know; those it knows must have their types.
 */
#include "api/wire.h"

#include <string.h>

#include "api/array.h"
#include "api/wire_dec.h"
#include "api/wire_enc.h"

json_t *ts_wire_problem_encode(const struct ts_problem *p)
{
    json_t *o = json_object();
    bool ok = true;
    ts_wire_enc_set(o, "type", json_string(p->type), &ok);
    ts_wire_enc_set(o, "title", json_string(p->title), &ok);
    ts_wire_enc_set(o, "status", json_integer(p->status), &ok);
    ts_wire_enc_set(o, "code", json_string(p->code), &ok);
    ts_wire_enc_set(o, "detail", json_string(p->detail), &ok);
    if (p->cause != NULL)
        ts_wire_enc_set(o, "cause", json_string(p->cause), &ok);
    if (p->field != NULL)
        ts_wire_enc_set(o, "field", json_string(p->field), &ok);
    if (p->hint != NULL)
        ts_wire_enc_set(o, "hint", json_string(p->hint), &ok);
    if (p->instance != NULL)
        ts_wire_enc_set(o, "instance", json_string(p->instance), &ok);
    if (p->request_id != NULL)
        ts_wire_enc_set(o, "request_id", json_string(p->request_id), &ok);
    return ts_wire_enc_finish(o, ok);
}

enum ts_err ts_wire_problem_decode(const json_t *in, struct ts_problem *out, struct ts_error *err)
{
    static const char *const keys[] = {"type",  "title", "code",     "detail",    "cause",
                                       "field", "hint",  "instance", "request_id"};
    const char **dest[] = {&out->type,  &out->title, &out->code,     &out->detail,    &out->cause,
                           &out->field, &out->hint,  &out->instance, &out->request_id};
    memset(out, 0, sizeof(*out));
    if (!json_is_object(in))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, "", "a problem must be a JSON object");
    int64_t status = 0;
    enum ts_err e = ts_wire_dec_integer(in, "", "status", 100, 599, NULL, &status, err);
    for (size_t i = 0; e == TS_OK && i < TS_ARRAY_LEN(keys); i++)
        e = ts_wire_dec_string(in, "", keys[i], false, dest[i], err);
    out->status = (int)status;
    return e;
}
