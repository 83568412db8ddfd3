/*
 * wire.c - parsing request bodies and the pieces every wire type shares.
 *
 * The codecs of each type live beside it: wire_project.c (quotas,
 * departments, projects), wire_token.c (roles, tokens), wire_job.c (kinds,
 * states, GPU requests, jobs, events), wire_node.c (nodes).
 */
#include "api/wire.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/wire_dec.h"

/* jansson's duplicate-key text is `duplicate object key near '"name"'`:
 * say which key in our words. */
static void duplicate_key_message(const json_error_t *je, struct ts_error *err)
{
    const char *near = strstr(je->text, "near '");
    char key[64] = "";
    if (near != NULL) {
        near += strlen("near '");
        const char *end = strrchr(near, '\'');
        size_t n = end != NULL ? (size_t)(end - near) : strlen(near);
        snprintf(key, sizeof(key), "%.*s", (int)n, near);
    }
    if (key[0] == '"')
        ts_error_set(err, TS_ERR_MALFORMED_JSON,
                     "could not parse JSON at line %d, column %d: duplicate key %s", je->line,
                     je->column, key);
    else
        ts_error_set(err, TS_ERR_MALFORMED_JSON,
                     "could not parse JSON at line %d, column %d: duplicate key", je->line,
                     je->column);
}

enum ts_err ts_wire_parse(const char *body, size_t len, json_t **out, struct ts_error *err)
{
    *out = NULL;
    json_error_t je;
    json_t *v = json_loadb(body != NULL ? body : "", body != NULL ? len : 0,
                           JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (v == NULL) {
        if (json_error_code(&je) == json_error_duplicate_key)
            duplicate_key_message(&je, err);
        else
            ts_error_set(err, TS_ERR_MALFORMED_JSON,
                         "could not parse JSON at line %d, column %d: %s", je.line, je.column,
                         je.text);
        return TS_ERR_MALFORMED_JSON;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        return ts_error_field(err, TS_ERR_WRONG_TYPE, "", "request body must be a JSON object");
    }
    *out = v;
    return TS_OK;
}

json_t *ts_wire_time(int64_t us)
{
    if (us == 0)
        return json_null();
    int64_t sec = us / 1000000, frac = us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        sec -= 1;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL)
        return json_null();
    char buf[64];
    snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac);
    return json_string(buf);
}

char *ts_wire_dumps(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
}
