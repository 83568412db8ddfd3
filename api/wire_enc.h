/*
 * wire_enc.h - the pieces the encoders in api/wire_*.c are made of.
 *
 * Internal to api/. An encoder builds its object with ts_wire_enc_set, which
 * steals each value and remembers any failure (a NULL value: out of memory or
 * a string that is not UTF-8), and returns ts_wire_enc_finish(o, ok): the
 * object, or NULL with nothing leaked.
 */
#ifndef TS_API_WIRE_ENC_H
#define TS_API_WIRE_ENC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* o[key] = v; steals v (NULL is a failure). Sets *ok to false on failure. */
void ts_wire_enc_set(json_t *o, const char *key, json_t *v, bool *ok);
/* Append v to array arr; steals v. Sets *ok to false on failure. */
void ts_wire_enc_append(json_t *arr, json_t *v, bool *ok);
/* Steals o: returns it when ok and o is not NULL, else decrefs it and
 * returns NULL. */
json_t *ts_wire_enc_finish(json_t *o, bool ok);

/* New: a JSON string of s (borrowed), or JSON null when s is NULL. */
json_t *ts_wire_enc_string(const char *s);
/* New: the JSON stored as text (command, env, labels...); fallback
 * ("[]", "{}") when text is NULL or does not parse. Both borrowed. */
json_t *ts_wire_enc_text(const char *text, const char *fallback);
/* New: "20GiB", or JSON null for 0. */
json_t *ts_wire_enc_bytes(int64_t bytes);

#endif /* TS_API_WIRE_ENC_H */
