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

/* A job's GPU memory limit summed over the GPUs it holds (job_gpu), for the
 * job row aliased j: the host swap a suspension of it may need. */
#define TS_SQL_JOB_LIMIT_BYTES                                                                     \
    "(SELECT coalesce(sum(least(g.memory_bytes, CASE j.gpu_kind"                                   \
    "   WHEN 'portion' THEN greatest(jg.memory_bytes,"                                             \
    "     (j.gpu_portion_limit * g.memory_bytes)::bigint)"                                         \
    "   WHEN 'memory' THEN greatest(jg.memory_bytes, j.gpu_memory_limit_bytes)"                    \
    "   ELSE g.memory_bytes END)), 0)::bigint"                                                     \
    " FROM job_gpu jg JOIN gpu g ON g.id = jg.gpu_id WHERE jg.job_id = j.id)"

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

#endif /* TS_SERVER_STORE_ROW_H */
