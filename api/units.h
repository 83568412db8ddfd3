/*
 * units.h - names, byte sizes and durations as people write them.
 *
 * Byte sizes: an integer or decimal number and an optional unit:
 *   B; KiB MiB GiB TiB (powers of 1024); K M G T (also powers of 1024, as
 *   Slurm and Docker read "32G"); KB MB GB TB (powers of 1000).
 *   Units are case-sensitive except that "b" is not accepted. No spaces
 *   inside; surrounding spaces are not accepted either. Results above
 *   2^62 bytes are refused. "20XB", "", "-1GiB", "1e3GiB" are errors.
 *   A decimal number needs digits on both sides of the point, at most 18
 *   after it. A fraction of a byte is refused without a unit ("1.5", "1.5B")
 *   and rounded up to a whole byte with one ("0.1KiB" is 103 bytes).
 * Durations: one or more <number><unit> groups, unit s, m, h or d
 *   ("90s", "1h30m", "8h", "2d"), or a plain integer of seconds. Numbers are
 *   whole; units come largest first, each at most once ("30m1h" and "1h1h"
 *   are errors). Durations over 10 years (TS_DURATION_MAX_SECONDS) are refused.
 *
 * Every string argument is borrowed; parsers write *out only on success;
 * formatters write into the caller's buf (truncated to len, always
 * NUL-terminated when len > 0) and return it.
 */
#ifndef TS_API_UNITS_H
#define TS_API_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TS_BYTESIZE_MAX ((int64_t)1 << 62)
#define TS_DURATION_MAX_SECONDS ((int64_t)315576000) /* 10 years of 365.25 days */

/* [a-z0-9][a-z0-9-]{0,62} */
bool ts_name_valid(const char *s);

/* 0 on success, -1 on a malformed or out-of-range size. */
int ts_bytesize_parse(const char *s, int64_t *out);
/* Shortest exact form: "20GiB", "1536MiB", "123B", "0B"; only binary units,
 * so that ts_bytesize_parse reads back the same number. Returns buf. */
char *ts_bytesize_format(int64_t bytes, char *buf, size_t len);
/* For a sentence, rounded: "20 GiB", "1.5 GiB", "512 MiB", "1000 bytes".
 * Returns buf. */
char *ts_bytesize_human(int64_t bytes, char *buf, size_t len);
/* A GPU count with at most two decimals and no trailing zeros: "2", "0.5",
 * "2.25" ("0", never "-0"). Returns buf. */
char *ts_gpus_format(double gpus, char *buf, size_t len);

/* 0 on success, -1 when malformed or over 10 years. */
int ts_duration_parse(const char *s, int64_t *seconds);
/* "8h", "1h30m", "45s", "2d", "0s": units d, h, m, s, zero groups left out,
 * so that ts_duration_parse reads back the same number. Returns buf. */
char *ts_duration_format(int64_t seconds, char *buf, size_t len);

#endif /* TS_API_UNITS_H */
