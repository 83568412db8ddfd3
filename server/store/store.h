/*
 * store.h - every query the API makes, one function each. Callers pass the
 * request's connection and arena; results live in the arena. Functions that
 * write either do all of it in one transaction or one statement, or nothing.
 * Errors are mapped from SQLSTATEs in one place (ts_db_map_error) and then
 * given a message that names the thing concerned.
 */
#ifndef TS_SERVER_STORE_STORE_H
#define TS_SERVER_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/arena.h"
#include "api/err.h"
#include "api/wire.h"
#include "server/sched/sched.h"
#include "server/store/db.h"

/* ---- tokens (store_tokens.c) ---------------------------------------------- */

/* A token with the hash of its secret; unknown project names ->
 * TS_ERR_UNKNOWN_REFERENCE, a taken name -> TS_ERR_ALREADY_EXISTS.
 * out->spec.projects points into spec (borrowed). */
enum ts_err ts_store_token_create(struct ts_dbconn *c, const struct ts_token_spec *spec,
                                  const char *sha256_hex, struct ts_arena *a, struct ts_token *out,
                                  struct ts_error *err);
enum ts_err ts_store_token_list(struct ts_dbconn *c, struct ts_arena *a, struct ts_token **out,
                                size_t *n, struct ts_error *err);
enum ts_err ts_store_token_delete(struct ts_dbconn *c, int64_t id, struct ts_error *err);

struct ts_token_auth {
    int64_t id;
    char name[TS_NAME_MAX + 1];
    enum ts_role role;
    int64_t *project_ids; /* arena */
    size_t nprojects;
    const char *nodes; /* arena; an agent's node patterns, comma-separated; NULL: any node */
};
/* TS_ERR_NOT_FOUND when no token has this hash. Updates last_used_at at
 * most once a minute. */
enum ts_err ts_store_token_authenticate(struct ts_dbconn *c, const char *sha256_hex,
                                        struct ts_arena *a, struct ts_token_auth *out,
                                        struct ts_error *err);
/* The names of every project but the n given (arena): what a project-limited
 * token may not see named. */
enum ts_err ts_store_token_hidden_projects(struct ts_dbconn *c, const int64_t *ids, size_t n,
                                           struct ts_arena *a, const char ***out, size_t *count,
                                           struct ts_error *err);
/* The bootstrap admin token "admin". With replace, set its hash (create it if
 * missing). Without, create it only if no bootstrap token exists:
 * *created tells whether this call made it. */
enum ts_err ts_store_token_bootstrap(struct ts_dbconn *c, const char *sha256_hex, bool replace,
                                     bool *created, struct ts_error *err);

/* ---- departments and projects (store_quota.c) ------------------------------ */

enum ts_err ts_store_department_create(struct ts_dbconn *c, const struct ts_department_spec *s,
                                       struct ts_department *out, struct ts_error *err);
enum ts_err ts_store_department_get(struct ts_dbconn *c, const char *name, struct ts_arena *a,
                                    struct ts_department *out, struct ts_error *err);
enum ts_err ts_store_department_list(struct ts_dbconn *c, struct ts_arena *a,
                                     struct ts_department **out, size_t *n, struct ts_error *err);
/* TS_ERR_IN_USE while it has projects. */
enum ts_err ts_store_department_delete(struct ts_dbconn *c, const char *name, struct ts_error *err);
/* The revisions an If-Match names (RFC 9110 §13.1.1: any one passes). */
#define TS_REVISIONS_MAX 64
struct ts_revisions {
    size_t n;
    int64_t v[TS_REVISIONS_MAX];
};
/* Replace the quota if the revision still is one of revs (NULL: any); the
 * revision moves only when a value changes. TS_ERR_PRECONDITION_FAILED when
 * it moved on, TS_ERR_NOT_FOUND. */
enum ts_err ts_store_department_set_quota(struct ts_dbconn *c, const char *name,
                                          const struct ts_quota *q, const struct ts_revisions *revs,
                                          struct ts_error *err);

/* A department that does not exist -> TS_ERR_UNKNOWN_REFERENCE. */
enum ts_err ts_store_project_create(struct ts_dbconn *c, const struct ts_project_spec *s,
                                    struct ts_project *out, struct ts_error *err);
enum ts_err ts_store_project_get(struct ts_dbconn *c, const char *name, struct ts_arena *a,
                                 struct ts_project *out, struct ts_error *err);
/* All projects, or only those in ids[0..nids) when ids != NULL. */
enum ts_err ts_store_project_list(struct ts_dbconn *c, const int64_t *ids, size_t nids,
                                  struct ts_arena *a, struct ts_project **out, size_t *n,
                                  struct ts_error *err);
/* TS_ERR_IN_USE while it has jobs that have not finished. */
enum ts_err ts_store_project_delete(struct ts_dbconn *c, const char *name, struct ts_error *err);
/* As ts_store_department_set_quota. */
enum ts_err ts_store_project_set_quota(struct ts_dbconn *c, const char *name,
                                       const struct ts_quota *q, const struct ts_revisions *revs,
                                       struct ts_error *err);
/* The id of a project by name; TS_ERR_NOT_FOUND. */
enum ts_err ts_store_project_id(struct ts_dbconn *c, const char *name, int64_t *id,
                                struct ts_error *err);

/* ---- jobs (store_jobs.c) ----------------------------------------------------- */

struct ts_job_submit {
    const struct ts_job_spec *spec;
    const int64_t *allowed_projects; /* NULL: any project; else the caller's */
    size_t nallowed;
    int64_t token_id;
    const char *idempotency_key; /* NULL: none */
    const char *request_sha256;  /* with a key: hash of the body */
    int64_t idempotency_ttl;     /* seconds */
};
/* Insert the job and its "submitted" event in one statement, if its
 * project's pending jobs stay within its max_pending (else
 * TS_ERR_TOO_MANY_PENDING and nothing written); the spec's
 * idle_swap_after_seconds is stored as it is (the caller resolves the kind's
 * default). With a key that was seen before: *replayed = true and out is
 * that job, or TS_ERR_IDEMPOTENCY_MISMATCH when the body differs. A taken name ->
 * TS_ERR_ALREADY_EXISTS; an unknown project -> TS_ERR_UNKNOWN_REFERENCE; a
 * project outside allowed_projects -> TS_ERR_FORBIDDEN. */
enum ts_err ts_store_job_submit(struct ts_dbconn *c, const struct ts_job_submit *s,
                                struct ts_arena *a, struct ts_job *out, bool *replayed,
                                struct ts_error *err);
/* *project_id gets the job's project (for access checks). */
enum ts_err ts_store_job_get(struct ts_dbconn *c, int64_t id, struct ts_arena *a,
                             struct ts_job *out, int64_t *project_id, struct ts_error *err);

struct ts_job_filter {
    const int64_t *project_ids; /* NULL: any project */
    size_t nproject_ids;
    const char *project; /* name, NULL: any */
    int nstates;         /* 0: any state */
    enum ts_job_state states[8];
    bool has_kind;
    enum ts_job_kind kind;
    const char *node; /* NULL: any */
    int64_t after_id; /* cursor: ids greater than this */
    int limit;        /* 1..1000 */
};
/* Jobs by ascending id; *more tells whether another page follows. */
enum ts_err ts_store_job_list(struct ts_dbconn *c, const struct ts_job_filter *f,
                              struct ts_arena *a, struct ts_job **out, size_t *n, bool *more,
                              struct ts_error *err);
/* The names of the projects with these ids, sorted (arena). */
enum ts_err ts_store_project_names(struct ts_dbconn *c, const int64_t *ids, size_t n,
                                   struct ts_arena *a, const char ***out, size_t *count,
                                   struct ts_error *err);
/* Pending jobs in scheduling order (queue position; not yet ordered ones
 * last, oldest first), at most 10000; project and project_ids filter. */
enum ts_err ts_store_queue(struct ts_dbconn *c, const char *project, const int64_t *project_ids,
                           size_t nproject_ids, struct ts_arena *a, struct ts_job **out, size_t *n,
                           struct ts_error *err);
/* Pending -> cancelled; scheduled/running/evicting -> cancelling (its agent
 * stops it, or it never started there); already
 * cancelled or cancelling: unchanged (idempotent). Finished otherwise ->
 * TS_ERR_CONFLICT. out is the job afterwards. */
enum ts_err ts_store_job_cancel(struct ts_dbconn *c, int64_t id, const char *by, struct ts_arena *a,
                                struct ts_job *out, struct ts_error *err);
/* Suspend a running job on request (store_suspend.c): -> suspending, held
 * until a resume. TS_ERR_CONFLICT when it is not running, refuses swap, or
 * its node has no host swap or too little free for its GPU memory limit;
 * TS_ERR_NOT_FOUND for an unknown id. out is the job afterwards. */
enum ts_err ts_store_job_suspend(struct ts_dbconn *c, int64_t id, const char *by,
                                 struct ts_arena *a, struct ts_job *out, struct ts_error *err);
/* Clear the hold of a job suspended on request; the scheduler resumes it on
 * its node and GPUs when they have room. TS_ERR_CONFLICT for any other job. */
enum ts_err ts_store_job_resume(struct ts_dbconn *c, int64_t id, const char *by, struct ts_arena *a,
                                struct ts_job *out, struct ts_error *err);
enum ts_err ts_store_job_events(struct ts_dbconn *c, int64_t id, struct ts_arena *a,
                                struct ts_job_event **out, size_t *n, struct ts_error *err);
/* Delete idempotency keys older than ttl seconds; *deleted may be NULL. */
enum ts_err ts_store_idempotency_expire(struct ts_dbconn *c, int64_t ttl, int64_t *deleted,
                                        struct ts_error *err);

/* ---- nodes (store_nodes.c) ----------------------------------------------------- */

enum ts_err ts_store_node_list(struct ts_dbconn *c, struct ts_arena *a, struct ts_node **out,
                               size_t *n, struct ts_error *err);
enum ts_err ts_store_node_get(struct ts_dbconn *c, const char *name, struct ts_arena *a,
                              struct ts_node *out, struct ts_error *err);
/* Of the n job ids, those of jobs in one of the np projects (arena, *out;
 * *nout of them): what a project-limited caller may see of a node's jobs. */
enum ts_err ts_store_node_jobs_visible(struct ts_dbconn *c, const int64_t *ids, size_t n,
                                       const int64_t *project_ids, size_t np, struct ts_arena *a,
                                       int64_t **out, size_t *nout, struct ts_error *err);

/* ---- the agent protocol (store_agent.c) ---------------------------------------- */

/* Insert or update the node and its GPUs (GPUs it no longer lists are
 * removed); it becomes ready unless drained. A GPU UUID registered on
 * another node -> TS_ERR_CONFLICT. */
enum ts_err ts_store_node_register(struct ts_dbconn *c, const char *name,
                                   const struct ts_node_reg *r, struct ts_arena *a,
                                   struct ts_node *out, struct ts_error *err);
/* drain: state drained; undrain: ready. Unknown -> TS_ERR_NOT_FOUND. */
enum ts_err ts_store_node_drain(struct ts_dbconn *c, const char *name, bool drain,
                                struct ts_arena *a, struct ts_node *out, struct ts_error *err);
enum ts_err ts_store_node_generation(struct ts_dbconn *c, const char *name, int64_t *id,
                                     int64_t *generation, struct ts_error *err);

/* The jobs the node should run or stop now. */
enum ts_err ts_store_node_desired(struct ts_dbconn *c, const char *name, struct ts_arena *a,
                                  struct ts_desired *out, struct ts_error *err);

/* Heartbeat, job states and samples, in one transaction. */
enum ts_err ts_store_node_report(struct ts_dbconn *c, const char *name,
                                 const struct ts_node_report *rep, struct ts_arena *a,
                                 struct ts_report_result *out, struct ts_error *err);
/* Part of the report's transaction (store_place.c): each reported job's
 * physical GPUs into job_gpu.physical_idx, for this node's jobs in the
 * reported attempt onto GPUs of this node; rolls back on failure. */
enum ts_err ts_store_report_places(struct ts_dbconn *c, const char *node_id,
                                   const struct ts_node_report *rep, struct ts_arena *a,
                                   struct ts_error *err);

/* ---- the scheduler loop (store_sched.c) ----------------------------------------- */

struct ts_sweep_result {
    int nodes_not_ready; /* ready nodes that stopped reporting */
    int jobs_requeued;   /* jobs of lost nodes: pending again (or cancelled) */
    int jobs_timed_out;  /* running jobs past their maximum runtime: stopping */
};
/* Mark nodes silent for not_ready_s not ready; requeue the jobs of nodes not
 * ready and silent for lost_s; stop jobs past their maximum runtime. */
enum ts_err ts_store_sched_sweep(struct ts_dbconn *c, int64_t not_ready_s, int64_t lost_s,
                                 struct ts_sweep_result *out, struct ts_error *err);
/* The database was unreachable for secs: nobody could record a report
 * then, so every node's silence is shortened by that much (never past
 * now); *n: the nodes moved. */
enum ts_err ts_store_sched_forgive(struct ts_dbconn *c, double secs, int *n, struct ts_error *err);

/* What the snapshot's indexes stand for in the database. */
struct ts_sched_rows {
    int64_t *department_ids, *project_ids, *node_ids, *gpu_ids; /* by snapshot index */
    size_t ngpu_ids;
    double *project_shares; /* deserved, fair share as stored: 2 per project */
    bool *running_stopping; /* running[i] is evicting or cancelling */
    /* pending[i]'s reason as stored (code NULL: none), so that a cycle
     * writes only the reasons that changed: rewriting every waiting job's
     * took a cycle longer than deciding it with 20,000 jobs queued */
    const char **pending_code, **pending_message;
    int64_t *pending_position;
};
/* The unfinished jobs' rows the leader keeps between cycles, so that a
 * snapshot reads only the rows written since the last one
 * (store_sched_jobs.c). new: NULL when out of memory; free(NULL) no-op. */
struct ts_sched_jobcache;
struct ts_sched_jobcache *ts_store_sched_jobcache_new(void);
void ts_store_sched_jobcache_free(struct ts_sched_jobcache *jc);
/* Read everything the scheduler core needs, in one REPEATABLE READ
 * transaction; snap->config is kept, the rest filled (arena). jc: the
 * jobs kept since the last snapshot, brought up to date (borrowed; NULL:
 * every unfinished job is read). *job_rows: the job rows the database
 * returned (may be NULL). */
enum ts_err ts_store_sched_snapshot(struct ts_dbconn *c, struct ts_arena *a,
                                    struct ts_sched_jobcache *jc, struct ts_sched_snapshot *snap,
                                    struct ts_sched_rows *rows, size_t *job_rows,
                                    struct ts_error *err);

struct ts_sched_apply {
    const struct ts_sched_decision **decisions; /* to write, in order */
    size_t ndecisions;
    const struct ts_sched_pending_reason *reasons; /* for jobs still pending */
    size_t nreasons;
    const struct ts_sched_result *result; /* fair shares; may be NULL */
    const char *checkpoint_root;          /* a job's folder: ROOT/project/id */
};
/* ---- the audit log (store_audit.c) ---- */

struct ts_audit_event {
    int64_t id;    /* read only */
    int64_t at_us; /* read only */
    int64_t token_id;
    const char *token_name;
    const char *token_role;
    const char *method;
    const char *path;
    const char *target;  /* may be NULL */
    const char *changes; /* JSON text, may be NULL */
    int status;
    const char *request_id;
};
struct ts_audit_filter {
    bool has_since;
    int64_t since_s;   /* unix seconds: at or after */
    int64_t before_id; /* cursor: ids below this; 0: from the newest */
    const char *actor; /* a token's name or id; NULL: any */
    int limit;         /* 1..1000 */
};
/* One row, on the connection of the write it records (inside its
 * transaction). */
enum ts_err ts_store_audit_insert(struct ts_dbconn *c, const struct ts_audit_event *ev,
                                  struct ts_error *err);
/* Newest first; *more tells whether another page follows (arena). */
enum ts_err ts_store_audit_list(struct ts_dbconn *c, const struct ts_audit_filter *f,
                                struct ts_arena *a, struct ts_audit_event **out, size_t *n,
                                bool *more, struct ts_error *err);

/* Fold project_pending_delta into project.pending_jobs (store_pending.c;
 * the scheduler's write runs it last, in its transaction). */
enum ts_err ts_store_pending_fold(struct ts_dbconn *c, struct ts_error *err);
/* The same for one project's rows (a submission that counted many). */
enum ts_err ts_store_pending_fold_project(struct ts_dbconn *c, int64_t project_id,
                                          struct ts_error *err);
/* Decisions not written because their job moved since the snapshot. */
struct ts_sched_refused {
    size_t binds; /* cancelled, held */
    size_t stops; /* ended, cancelled, no longer fitting the node's swap */
};
/* Write decisions, reasons and shares in one transaction; the stops in one
 * statement, the binds in another. A job stopped or bound that moved since
 * the snapshot is left out and the rest written: *refused (may be NULL)
 * counts those. */
enum ts_err ts_store_sched_apply(struct ts_dbconn *c, const struct ts_sched_snapshot *snap,
                                 const struct ts_sched_rows *rows, const struct ts_sched_apply *ap,
                                 struct ts_arena *a, struct ts_sched_refused *refused,
                                 struct ts_error *err);

/* ---- figures for /metrics (store_stats.c) ---------------------------------------- */

struct ts_job_count {
    const char *project;
    const char *state;
    int64_t count;
};
/* The age of the stalest report among the nodes that are not lost (ready
 * or drained), in seconds (0 when there is none), and how many nodes. */
enum ts_err ts_store_report_age(struct ts_dbconn *c, double *max_age_s, int64_t *nodes,
                                struct ts_error *err);
enum ts_err ts_store_job_counts(struct ts_dbconn *c, struct ts_arena *a, struct ts_job_count **out,
                                size_t *n, struct ts_error *err);

/* ---- job output (store_logs.c) --------------------------------------------------- */

/* struct ts_log_chunk and struct ts_log_mark: api/wire.h (the wire's). */
/*
 * Store the chunks of jobs placed on `node`, in one transaction, and wake
 * followers (NOTIFY tessera_log, payload the job id). Per (job, attempt) the
 * stored output is one contiguous range: bytes already stored are skipped (a
 * resent chunk stores nothing), a chunk past the end is not stored (the
 * answer says where to resume), the first chunk of an attempt may start
 * anywhere. Beyond max_bytes per job the oldest chunks are deleted;
 * job.log_bytes is kept. chunks are sorted in place.
 * *marks: one per (job, attempt) stored for, in (job, attempt) order;
 * *ignored: jobs not placed on the node, unknown, or named with an attempt
 * they have not reached (nothing of theirs is stored). Both in the arena.
 * An unknown node -> TS_ERR_NOT_FOUND.
 */
enum ts_err ts_store_log_append(struct ts_dbconn *c, const char *node, struct ts_log_chunk *chunks,
                                size_t n, int64_t max_bytes, struct ts_arena *a,
                                struct ts_log_mark **marks, size_t *nmarks, int64_t **ignored,
                                size_t *nignored, struct ts_error *err);

/* A stored piece of output. */
struct ts_log_piece {
    int attempt;
    int64_t offset;
    const unsigned char *data; /* arena */
    size_t len;
};
/* The job's output after position (attempt, offset), in order, at most
 * limit pieces (0: all). Pass attempt -1 for everything. A piece that
 * straddles the position comes back cut at it. */
enum ts_err ts_store_log_read(struct ts_dbconn *c, int64_t job_id, int attempt, int64_t offset,
                              int limit, struct ts_arena *a, struct ts_log_piece **out, size_t *n,
                              struct ts_error *err);
/* A job's state; TS_ERR_NOT_FOUND. */
enum ts_err ts_store_log_job_state(struct ts_dbconn *c, int64_t job_id, enum ts_job_state *state,
                                   struct ts_error *err);

/* ---- metric series (store_series.c) ----------------------------------------------- */

enum ts_series_metric {
    TS_SERIES_CAPACITY,
    TS_SERIES_ALLOCATED,
    TS_SERIES_UTILIZED,
    TS_SERIES_MEMORY_USED_BYTES,
    TS_SERIES_RUNNING_JOBS,
    TS_SERIES_PENDING_JOBS,
    TS_SERIES_PENDING_GPUS, /* GPUs requested by pending jobs */
    TS_SERIES_IDLE_GPUS,    /* GPUs allocated to jobs under 1 % utilization of them */
    TS_SERIES_NMETRICS
};
/* "capacity", "allocated", ... (the metric_point columns) by metric, then
 * NULL (the query parameter's enum, api/query.h) */
extern const char *const ts_series_metric_names[TS_SERIES_NMETRICS + 1];
const char *ts_series_metric_name(enum ts_series_metric m); /* static */

/* The resolutions kept, finest first, and how long each is kept (seconds).
 * resolution[0] divides 60; each coarser one is a multiple of the one before. */
struct ts_series_levels {
    int n;
    int64_t resolution[3];
    int64_t retention[3];
};

/* One scope and key's figures now: scope "cluster" (key ""), "department"
 * (name), "project" (name), "node" (name), "gpu" ("node/index"), "job" (a
 * running job's id). */
struct ts_series_figure {
    const char *scope; /* static */
    const char *key;   /* arena */
    double v[TS_SERIES_NMETRICS];
    /* for /metrics only, not kept as points: the GPU memory in bytes
     * (cluster, node, GPU; 0 for a project), and a GPU's UUID and model
     * (arena; NULL outside the gpu scope) */
    double memory_total_bytes;
    const char *uuid, *model;
};
/*
 * One tick of the sampler, in one transaction: try the advisory lock of the
 * series (pg_try_advisory_xact_lock); read the current figures of every
 * scope into *figs (in the arena, ordered by scope and key); and, holding the
 * lock, write them as points at resolution[0] in the bucket now falls in
 * (*at, unix seconds; a point already there is kept), roll them up into the
 * coarser resolutions (averages of the finer points, samples = their count)
 * and delete points past retention. *leader tells whether this call wrote.
 */
enum ts_err ts_store_series_tick(struct ts_dbconn *c, const struct ts_series_levels *lv,
                                 struct ts_arena *a, struct ts_series_figure **figs, size_t *n,
                                 int64_t *at, bool *leader, struct ts_error *err);

struct ts_series_query {
    enum ts_series_metric metric;
    const char *scope;
    const char *key;         /* NULL: every key */
    const char *const *keys; /* NULL: any key; else only these */
    size_t nkeys;
    int64_t resolution; /* the points read */
    int64_t finer;      /* >0: the resolution whose points stand for the
                           buckets of `resolution` not rolled up yet */
    int64_t start, end; /* unix seconds: [start, end) */
    int64_t step;       /* bucket width; start is a multiple of it */
    size_t max_rows;    /* more rows than this -> TS_ERR_BAD_PARAMETER */
};
/* The average of the points in one step bucket of one key. */
struct ts_series_row {
    const char *key; /* arena */
    int64_t bucket;  /* unix seconds */
    double value;
};
/* Buckets that hold points, by key then bucket. */
enum ts_err ts_store_series_query(struct ts_dbconn *c, const struct ts_series_query *q,
                                  struct ts_arena *a, struct ts_series_row **out, size_t *n,
                                  struct ts_error *err);

/* A project's GPU-hours in a range: allocated, and idle (allocated to
 * running jobs under 1 % utilization of it, sample by sample). */
struct ts_series_idle {
    const char *project; /* arena */
    double idle_gpu_hours;
    double allocated_gpu_hours;
    double utilized_gpu_hours;
    double unused_gpu_hours; /* allocated less utilized, integrated */
};
/* Every project (or only keys, when not NULL), most idle first: the project
 * points of `resolution` in [start, end), each standing for its bucket;
 * finer as in struct ts_series_query. */
enum ts_err ts_store_series_idle(struct ts_dbconn *c, int64_t resolution, int64_t finer,
                                 int64_t start, int64_t end, const char *const *keys, size_t nkeys,
                                 struct ts_arena *a, struct ts_series_idle **out, size_t *n,
                                 struct ts_error *err);

#endif /* TS_SERVER_STORE_STORE_H */
