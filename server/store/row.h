/*
 * row.h - reading typed values out of PGresult rows (text format), shared by
 * the store_*.c files. Timestamps are selected as microseconds since the epoch
 * with TS_SQL_US(column) so that no timestamp text is ever parsed in C.
 */
#ifndef TS_SERVER_STORE_ROW_H
#define TS_SERVER_STORE_ROW_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/arena.h"

#define TS_SQL_US(col) "coalesce((extract(epoch from " col ") * 1000000)::bigint, 0)"

/* The GPU memory a job (the row aliased j) holds: the greater of the bytes
 * packed for it on its GPUs (job_gpu), its last reported use, and what its
 * node keeps of it in host swap while it runs. A suspension of it takes
 * that much of its node's host swap. */
#define TS_SQL_JOB_HELD_BYTES                                                                      \
    "greatest((SELECT coalesce(sum(jg.memory_bytes), 0) FROM job_gpu jg WHERE jg.job_id = j.id),"  \
    " j.gpu_memory_used_bytes, j.swapped_bytes)::bigint"

/* The host swap of job j's node that its other jobs hold: suspensions
 * (suspending, suspended, resuming) and the memory running jobs have
 * swapped out (swapped_bytes). j's own swapped memory is part of what it
 * holds (TS_SQL_JOB_HELD_BYTES), so it is not counted here. */
#define TS_SQL_NODE_SWAP_USED_BY_OTHERS                                                            \
    "(SELECT coalesce(sum(CASE WHEN o.state = 'running' THEN o.swapped_bytes"                      \
    "   ELSE o.suspended_bytes END), 0)::bigint FROM job o WHERE o.node_id = j.node_id"            \
    "   AND o.id <> j.id AND o.state IN ('running', 'suspending', 'suspended', 'resuming'))"

int64_t ts_row_i64(const PGresult *res, int row, int col);   /* NULL -> 0 */
double ts_row_double(const PGresult *res, int row, int col); /* NULL -> 0 */
bool ts_row_bool(const PGresult *res, int row, int col);     /* 't' */
bool ts_row_null(const PGresult *res, int row, int col);
/* Copy into the arena; NULL stays NULL. */
const char *ts_row_text(const PGresult *res, int row, int col, struct ts_arena *a);
/* Copy into buf (truncating to len-1); NULL -> "". */
void ts_row_copy(const PGresult *res, int row, int col, char *buf, size_t len);

/* ids as a bigint[] parameter literal, "{1,2,3}", in the arena; NULL when
 * out of memory. */
char *ts_row_id_array(struct ts_arena *a, const int64_t *ids, size_t n);
/* strings as a text[] parameter literal, {"a","b \"c\""}, in the arena;
 * NULL when out of memory. */
char *ts_row_text_array(struct ts_arena *a, const char *const *v, size_t n);

#endif /* TS_SERVER_STORE_ROW_H */
