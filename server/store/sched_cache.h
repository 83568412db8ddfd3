/*
 * sched_cache.h - the scheduler snapshot's job and GPU rows
 * (store_sched_cache.c), kept between cycles by the leader and brought up
 * to date by reading only the rows written since the last snapshot.
 * Internal to server/store/.
 */
#ifndef TS_SERVER_STORE_SCHED_CACHE_H
#define TS_SERVER_STORE_SCHED_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "api/err.h"
#include "server/store/db.h"

/* The columns of a job row, in store_sched_jobs.c's SELECT order. */
enum {
    TS_SJ_ID,
    TS_SJ_NAME,
    TS_SJ_PROJECT,
    TS_SJ_PRIORITY,
    TS_SJ_PREEMPTIBLE,
    TS_SJ_STATE,
    TS_SJ_NODE,
    TS_SJ_STARTED,  /* epoch seconds: attempt_started_at, else updated_at */
    TS_SJ_CREATED,  /* epoch seconds */
    TS_SJ_GPU_KIND, /* the request: 12 columns from here */
    TS_SJ_HOST_MEMORY = TS_SJ_GPU_KIND + 8,
    TS_SJ_SWAP = TS_SJ_GPU_KIND + 11,
    TS_SJ_SUSPEND_HELD,
    TS_SJ_SUSPENDED_GPUS, /* "3,7" */
    TS_SJ_SUSPENDED_BYTES,
    TS_SJ_MEMORY_USED,
    TS_SJ_SWAPPED,
    TS_SJ_REASON_CODE,
    TS_SJ_REASON_MESSAGE,
    TS_SJ_QUEUE_POSITION,
    TS_SJ_COLS
};

/* The columns of a GPU row. */
enum { TS_SG_ID, TS_SG_NODE, TS_SG_INDEX, TS_SG_MODEL, TS_SG_MEMORY, TS_SG_COLS };

/* One row (an unfinished job or a GPU) as text, as libpq gave it; NULL:
 * SQL NULL. */
struct ts_sjrow {
    int64_t id;
    const char *v[];
};

struct ts_sched_jobcache;

/* Bring jc up to date inside the snapshot's transaction on c, whose
 * snapshot has the oldest running transaction xmin (pg_snapshot_xmin, as
 * text): the first time, or 10 minutes after the last full read, every
 * unfinished job and every GPU; then the rows written by transactions the
 * previous snapshot could not see (their xmin at or past its xmin), and
 * every GPU again when GPUs were deleted. On failure the rows kept are
 * still right, and read again next time. *njobs: the job rows the
 * database returned. */
enum ts_err ts_store_sched_cache_refresh(struct ts_dbconn *c, struct ts_sched_jobcache *jc,
                                         const char *xmin, size_t *njobs, struct ts_error *err);

/* The unfinished jobs, by id ascending (borrowed until the next refresh). */
const struct ts_sjrow *const *ts_store_sched_cache_jobs(const struct ts_sched_jobcache *jc,
                                                        size_t *n);
/* Every GPU, by id ascending (borrowed until the next refresh). */
const struct ts_sjrow *const *ts_store_sched_cache_gpus(const struct ts_sched_jobcache *jc,
                                                        size_t *n);

#endif /* TS_SERVER_STORE_SCHED_CACHE_H */
