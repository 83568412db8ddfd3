/*
 * wire_dec.h - the pieces every strict decoder in api/wire_*.c is made of.
 *
 * Internal to api/: handlers use the decoders in api/wire.h, never these.
 * Each helper reads one member of a JSON object and, when it is wrong, fills
 * err with the code and a message naming the member by its dotted path
 * ("quota.gpus", "command[2]", "env.PATH"), which also goes to err->field.
 *
 * A member that is absent or JSON null counts as absent: the helper leaves
 * *out alone and sets *present (when given) to false; a required member is
 * TS_ERR_MISSING_FIELD. Every json_t * argument is borrowed.
 */
#ifndef TS_API_WIRE_DEC_H
#define TS_API_WIRE_DEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/arena.h"
#include "api/err.h"

#define TS_WIRE_PATH_MAX 128 /* sizeof(struct ts_error.field) */

/* The path of member `key` of the object at `path` ("" at the top) into buf,
 * truncated to fit. Returns buf. */
char *ts_wire_dec_path(char *buf, size_t len, const char *path, const char *key);
/* The path of element i of the array at `path` ("command[2]"). Returns buf. */
char *ts_wire_dec_index(char *buf, size_t len, const char *path, size_t i);

/* s (borrowed) as a double-quoted string fit for a message: control
 * characters and quotes escaped, cut to about 64 bytes with "...".
 * Returns buf. */
char *ts_wire_dec_quote(const char *s, char *buf, size_t len);
/* A number as people read it: "2.5", "1", "1e+30". Returns buf. */
char *ts_wire_dec_number_text(double v, char *buf, size_t len);

/*
 * Check that v is an object whose members all appear in `known` (a list
 * ending with NULL). `path` names the object ("" for a request body, else
 * "quota", "gpu"), `what` names its type in messages ("job", "quota").
 * `readonly` (NULL-terminated, or NULL) lists members the server sets: naming
 * one is still an unknown field, with a hint saying why.
 */
enum ts_err ts_wire_dec_object(const json_t *v, const char *path, const char *what,
                               const char *const *known, const char *const *readonly,
                               struct ts_error *err);

/* The member, or NULL when absent or JSON null. Borrowed from obj. */
json_t *ts_wire_dec_member(const json_t *obj, const char *key);

/* An array member of at most max entries; *out borrowed from obj, NULL
 * when absent (TS_ERR_MISSING_FIELD when required). */
enum ts_err ts_wire_dec_array(const json_t *obj, const char *path, const char *key, bool required,
                              size_t max, const json_t **out, struct ts_error *err);
/* A string member; *out is borrowed from obj. */
enum ts_err ts_wire_dec_string(const json_t *obj, const char *path, const char *key, bool required,
                               const char **out, struct ts_error *err);
/* A required name ([a-z0-9][a-z0-9-]{0,62}) copied into out[TS_NAME_MAX + 1]. */
enum ts_err ts_wire_dec_name(const json_t *obj, const char *path, const char *key, char *out,
                             struct ts_error *err);
/* A number in [min, max] (negative zero becomes zero). */
enum ts_err ts_wire_dec_number(const json_t *obj, const char *path, const char *key, double min,
                               double max, bool *present, double *out, struct ts_error *err);
/* An integer in [min, max]; a number with a fraction is not one, 50.0 is. */
enum ts_err ts_wire_dec_integer(const json_t *obj, const char *path, const char *key, int64_t min,
                                int64_t max, bool *present, int64_t *out, struct ts_error *err);
enum ts_err ts_wire_dec_bool(const json_t *obj, const char *path, const char *key, bool *present,
                             bool *out, struct ts_error *err);
/* A byte size: a string in api/units.h syntax or an integer of bytes, in
 * [min, TS_BYTESIZE_MAX]. */
enum ts_err ts_wire_dec_bytes(const json_t *obj, const char *path, const char *key, int64_t min,
                              bool *present, int64_t *out, struct ts_error *err);
/* A duration: a string in api/units.h syntax or an integer of seconds. */
enum ts_err ts_wire_dec_duration(const json_t *obj, const char *path, const char *key,
                                 bool *present, int64_t *out, struct ts_error *err);

/* An object of strings (env, node_selector, labels) as compact JSON text in
 * *out; absent is "{}". env_names: keys must match [A-Za-z_][A-Za-z0-9_]*;
 * else keys must not be empty. At most max entries. */
enum ts_err ts_wire_dec_string_map(const json_t *in, const char *key, size_t max, bool env_names,
                                   struct ts_arena *a, const char **out, struct ts_error *err);
/* v (borrowed) as compact JSON text, keys sorted, copied into arena a.
 * NULL when out of memory. */
const char *ts_wire_dec_dump(const json_t *v, struct ts_arena *a);

#endif /* TS_API_WIRE_DEC_H */
