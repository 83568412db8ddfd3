/*
 * wire_enc.c - value builders shared by the encoders of api/wire_*.c.
 */
#include "api/wire_enc.h"

#include "api/units.h"

void ts_wire_enc_set(json_t *o, const char *key, json_t *v, bool *ok)
{
    if (v == NULL || json_object_set_new(o, key, v) != 0)
        *ok = false;
}

void ts_wire_enc_append(json_t *arr, json_t *v, bool *ok)
{
    if (v == NULL || json_array_append_new(arr, v) != 0)
        *ok = false;
}

json_t *ts_wire_enc_finish(json_t *o, bool ok)
{
    if (o != NULL && ok)
        return o;
    json_decref(o);
    return NULL;
}

json_t *ts_wire_enc_string(const char *s)
{
    return s == NULL ? json_null() : json_string(s);
}

json_t *ts_wire_enc_text(const char *text, const char *fallback)
{
    json_t *v = NULL;
    if (text != NULL)
        v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (v == NULL)
        v = json_loads(fallback, JSON_DECODE_ANY, NULL);
    return v;
}

json_t *ts_wire_enc_bytes(int64_t bytes)
{
    if (bytes == 0)
        return json_null();
    char buf[32];
    return json_string(ts_bytesize_format(bytes, buf, sizeof(buf)));
}
