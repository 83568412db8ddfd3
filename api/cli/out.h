/*
 * out.h - how the CLI writes values: GPU requests, ages, times, numbers,
 * the API's JSON unchanged, and the "key: value" lines of describe.
 *
 * Every function writing into buf truncates to len (NUL-terminated) and
 * returns buf; JSON arguments are borrowed.
 */
#ifndef TS_API_CLI_OUT_H
#define TS_API_CLI_OUT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "api/client/client.h"

enum ts_out_format { TS_OUT_TABLE, TS_OUT_WIDE, TS_OUT_JSON };

/* -o FORMAT: "table", "wide" or "json"; "columns=A,B" is TS_OUT_WIDE (its
 * table, of which only the columns named print: ts_table_select); -1 when
 * it is none of them. */
int ts_out_format_parse(const char *s);

/* A job's "gpu" member: "2" (whole GPUs), "0.5" or "0.5-0.8" (portion and
 * limit), "20GiB" or "20GiB-60GiB" (memory), prefixed "2x" for a fraction of
 * each of 2 GPUs; "-" for none. */
char *ts_out_gpu(const json_t *gpu, char *buf, size_t len);
/* Seconds since an RFC 3339 time as "45s", "12m", "3h", "5d"; "-" for null. */
char *ts_out_age(const json_t *at, char *buf, size_t len);
/* An RFC 3339 time in local time, "2024-05-01 12:03:04"; "-" for null. */
char *ts_out_time(const json_t *at, char *buf, size_t len);
/* Seconds since the epoch of an RFC 3339 UTC time; -1 when malformed. */
int64_t ts_out_time_parse(const char *s);
/* A number as people write it, at most 2 decimals: "2", "2.5", "1.96"
 * (1.95513), "0.001" (a value that would round to 0 keeps one significant
 * digit); "-" when not a number. */
char *ts_out_num(const json_t *v, char *buf, size_t len);
/* Bytes in the largest binary unit that leaves at least 1, at most 2
 * decimals: "80GiB", "23.54GiB" (24684084KiB), "512B"; "-" when not a
 * number. */
char *ts_out_bytes(const json_t *v, char *buf, size_t len);
/* A member of o as text: strings as they are, numbers as ts_out_num, true
 * and false, "-" for null or absent; other JSON compact. */
char *ts_out_member(const json_t *o, const char *key, char *buf, size_t len);

/* The response body exactly as the server sent it, and a newline. */
void ts_out_raw(const struct ts_response *r);
/* v (borrowed) as the server writes JSON (compact, 15 digits), and a newline. */
void ts_out_json(const json_t *v);
/* "Key:           value" lines of describe, the value in a column. */
void ts_out_kv(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* TS_API_CLI_OUT_H */
