/*
 * wire.h - the REST API's wire types and their JSON codecs.
 *
 * Each wire type has exactly one decoder and one encoder, here. Decoders are
 * strict: unknown fields, wrong types, out-of-range numbers and malformed
 * names are errors naming the field (err->field, a dotted path such as
 * "quota.gpus" or "gpu.portion"); duplicate keys are refused when the body is
 * parsed (ts_wire_parse). Decoded strings live in the arena passed in.
 * Free-form JSON members (command, env, gpu_model, node_selector, labels) are
 * kept as compact JSON text, validated, ready for a jsonb column.
 *
 * Encoders return a new json_t reference (caller decrefs), or NULL when out
 * of memory.
 *
 * Ownership: every `in` and every struct passed to an encoder is borrowed.
 * Strings a decoder stores in *out live in the arena `a` (until
 * ts_arena_free(a)) or are static defaults ("{}", "[]"); names are copied
 * into the struct. On an error *out holds nothing the caller should use.
 *
 * Errors: TS_ERR_WRONG_TYPE (`quota.gpus must be a number`),
 * TS_ERR_UNKNOWN_FIELD (`unknown field "gpuz" in quota`, field "quota.gpuz"),
 * TS_ERR_MISSING_FIELD (`name is required`), TS_ERR_INVALID_VALUE for values
 * out of range or of the wrong form (`gpu.portion must be between 0 and 1:
 * 1.5`). Array elements are named "command[2]", object members "env.PATH".
 * JSON null counts as absent for every optional member.
 */
#ifndef TS_API_WIRE_H
#define TS_API_WIRE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/arena.h"
#include "api/err.h"
#include "api/version.h"

#define TS_NAME_MAX 63 /* names match [a-z0-9][a-z0-9-]{0,62} */

/* Limits the decoders enforce. */
#define TS_QUOTA_GPUS_MAX 1000000.0   /* quota.gpus, quota.limit */
#define TS_QUOTA_WEIGHT_MAX 1000000.0 /* quota.over_quota_weight */
#define TS_TOKEN_PROJECTS_MAX 1024    /* entries of a token's "projects" */
#define TS_TOKEN_NODES_MAX 1024       /* entries of an agent token's "nodes" */
#define TS_GPU_DEVICES_MAX 64         /* gpu.count, gpu.devices */
#define TS_MAX_PENDING_DEFAULT 10000  /* a project's quota.max_pending */
#define TS_JOB_USER_MAX 32            /* a project's quota.job_user, a Unix user name */
#define TS_MAX_PENDING_MAX 100000000  /* its largest value */
/* The smallest share of a GPU a job may ask for: below them the interposer
 * would charge next to nothing (a portion of 1e-300 was accepted and charged
 * 1 byte) and a job would be a GPU's guest for free. */
#define TS_GPU_PORTION_MIN 0.001             /* gpu.portion, gpu.portion_limit */
#define TS_GPU_MEMORY_MIN (INT64_C(1) << 20) /* gpu.memory, gpu.memory_limit: 1 MiB */
#define TS_JOB_COMMAND_MAX 1024              /* entries of "command" */
#define TS_JOB_ENV_MAX 1024                  /* entries of "env" */
#define TS_JOB_GPU_MODELS_MAX 64             /* entries of "gpu_model" */
#define TS_JOB_NODE_SELECTOR_MAX 64          /* entries of "node_selector" */
#define TS_JOB_CPU_MAX 4096                  /* "cpu", cores */
#define TS_JOB_PATH_MAX 4095                 /* bytes of "working_dir" */
#define TS_JOB_GRACE_DEFAULT 30              /* seconds from SIGTERM to SIGKILL */
#define TS_JOB_GRACE_MAX 86400
#define TS_JOB_IDLE_SWAP_MAX 604800 /* idle_swap_after: at most 7 days */

/* ---- parsing --------------------------------------------------------- */

/* Parse a request body that must be one JSON object; rejects duplicate keys,
 * trailing garbage and non-objects. body is borrowed (len bytes, need not be
 * NUL-terminated); *out is a new reference, NULL on error.
 * TS_ERR_MALFORMED_JSON: `could not parse JSON at line 1, column 5: ...`;
 * TS_ERR_WRONG_TYPE: `request body must be a JSON object`. */
enum ts_err ts_wire_parse(const char *body, size_t len, json_t **out, struct ts_error *err);

/* ---- roles ----------------------------------------------------------- */

enum ts_role { TS_ROLE_VIEWER, TS_ROLE_MEMBER, TS_ROLE_AGENT, TS_ROLE_ADMIN };
const char *ts_role_name(enum ts_role r);            /* static */
int ts_role_parse(const char *s, enum ts_role *out); /* 0, or -1 */

/* ---- quotas, departments, projects ------------------------------------ */

struct ts_quota {
    double gpus;              /* guaranteed GPUs, >= 0, fractional; default 0 */
    double over_quota_weight; /* >= 0; default 1 */
    bool has_limit;           /* JSON "limit": null or absent -> false */
    double limit;             /* >= gpus when has_limit */
    int priority;             /* -1000..1000; default 0 */
    /* projects only: at most this many pending jobs (a submission past it
     * is refused with 429); has_max_pending false for a department */
    bool has_max_pending;
    int64_t max_pending; /* 0..TS_MAX_PENDING_MAX; default TS_MAX_PENDING_DEFAULT */
    /* projects only (with has_max_pending): the Unix user its jobs run as
     * on the nodes, "" for the agent's --job-user (default nobody); "root"
     * only with allow_root, which an admin sets for that project. */
    char job_user[TS_JOB_USER_MAX + 1];
    bool allow_root;
};

struct ts_department_spec {
    char name[TS_NAME_MAX + 1];
    struct ts_quota quota;
};

struct ts_project_spec {
    char name[TS_NAME_MAX + 1];
    char department[TS_NAME_MAX + 1];
    struct ts_quota quota;
};

/* What the scheduler and the jobs say about a project (or a department, as
 * the sum over its projects). GPU figures are in GPUs, fractional. */
struct ts_usage {
    double allocated_gpus;
    double allocated_nonpreemptible_gpus;
    double requested_gpus; /* GPUs asked for by jobs not finished (store_quota.c) */
    int64_t pending_jobs;
    int64_t running_jobs;   /* placed: scheduled, running or stopping */
    double deserved_gpus;   /* min(quota, demand), at the last scheduler cycle */
    double fair_share_gpus; /* deserved plus its part of the surplus, likewise */
};

struct ts_department {
    int64_t id;
    struct ts_department_spec spec;
    struct ts_usage usage;
    int64_t project_count;
    int64_t revision; /* the ETag */
    int64_t created_at_us;
};

struct ts_project {
    int64_t id;
    struct ts_project_spec spec;
    struct ts_usage usage;
    int64_t revision; /* the ETag */
    int64_t created_at_us;
};

/* "quota": {...}; every member optional, defaults as above; NULL or JSON
 * null gives the defaults. `field` names the member in messages ("quota"). */
enum ts_err ts_wire_quota_decode(const json_t *in, const char *field, struct ts_quota *out,
                                 struct ts_error *err);
/* A project's quota: the same, and "max_pending" (default
 * TS_MAX_PENDING_DEFAULT). */
enum ts_err ts_wire_project_quota_decode(const json_t *in, const char *field, struct ts_quota *out,
                                         struct ts_error *err);
json_t *ts_wire_quota_encode(const struct ts_quota *q);
/* Departments: {"name", "quota"}; projects: {"name", "department",
 * "quota"}, name and department required. */
enum ts_err ts_wire_department_decode(const json_t *in, struct ts_department_spec *out,
                                      struct ts_error *err);
json_t *ts_wire_department_encode(const struct ts_department *d);
enum ts_err ts_wire_project_decode(const json_t *in, struct ts_project_spec *out,
                                   struct ts_error *err);
json_t *ts_wire_project_encode(const struct ts_project *p);

/* ---- tokens ------------------------------------------------------------ */

struct ts_token_spec {
    char name[TS_NAME_MAX + 1];
    enum ts_role role;
    const char **projects; /* arena; project names */
    size_t nprojects;
    const char **nodes; /* arena; an agent's node names or "prefix*" patterns */
    size_t nnodes;      /* 0: an agent token acts for any node */
};

struct ts_token {
    int64_t id;
    struct ts_token_spec spec;
    const char *secret; /* only right after creation, else NULL */
    int64_t created_at_us;
    int64_t last_used_at_us; /* 0: never */
};

/* {"name" (required), "role" (required), "projects": [names], "nodes":
 * [node names or patterns]}; projects or nodes absent: NULL and 0. A name
 * listed twice is an error; "nodes" is only for agent tokens. A pattern is a
 * node name, a name prefix followed by "*" ("gpu-*"), or "*". */
enum ts_err ts_wire_token_decode(const json_t *in, struct ts_arena *a, struct ts_token_spec *out,
                                 struct ts_error *err);
json_t *ts_wire_token_encode(const struct ts_token *t);
/* GET /whoami: the calling token, as the server says it. */
struct ts_whoami {
    int64_t id;
    const char *name;
    const char *role;      /* "agent", ...: kept as named, so that a role a newer
                              server adds is read (and said) as itself */
    const char **projects; /* the projects a restricted token may act on */
    size_t nprojects;
    bool restricted;
    bool has_nodes;     /* agent tokens only: "nodes" is written */
    const char **nodes; /* node names or "prefix*" patterns; none: any node */
    size_t nnodes;
};
/* Encoded by the server; decoded by the agent (--join), which may be older, so
 * members it does not know are skipped, as for the desired state; known
 * ones are strict (a node pattern must be one, a name listed once). Strings
 * and arrays in arena a. */
json_t *ts_wire_whoami_encode(const struct ts_whoami *w);
enum ts_err ts_wire_whoami_decode(const json_t *in, struct ts_arena *a, struct ts_whoami *out,
                                  struct ts_error *err);
/* A node name, "prefix*" (the prefix starting a valid name) or "*". */
bool ts_token_node_pattern_valid(const char *s);
/* Whether node matches the pattern's first len characters (a valid pattern,
 * not necessarily NUL-terminated there). */
bool ts_token_node_matches(const char *pattern, size_t len, const char *node);

/* ---- jobs ---------------------------------------------------------------- */

enum ts_job_kind { TS_JOB_TRAIN, TS_JOB_INTERACTIVE, TS_JOB_INFERENCE };
/* "train", "interactive", "inference" by kind, then NULL (a query
 * parameter's enum, api/query.h) */
extern const char *const ts_job_kind_names[];
const char *ts_job_kind_name(enum ts_job_kind k);
int ts_job_kind_parse(const char *s, enum ts_job_kind *out);
/* Defaults a kind gives: train 50 preemptible, interactive 100 and
 * inference 150 not preemptible. */
int ts_job_kind_default_priority(enum ts_job_kind k);
bool ts_job_kind_default_preemptible(enum ts_job_kind k);

enum ts_job_state {
    TS_JOB_PENDING,
    TS_JOB_SCHEDULED,
    TS_JOB_RUNNING,
    TS_JOB_EVICTING,
    TS_JOB_CANCELLING,
    TS_JOB_SUSPENDING, /* asked to suspend: its processes stop, its GPU memory goes to swap */
    TS_JOB_SUSPENDED,  /* stopped in place on its node; its GPUs are free for others */
    TS_JOB_RESUMING,   /* bound again on the GPUs it held: its processes continue */
    TS_JOB_SUCCEEDED,
    TS_JOB_FAILED,
    TS_JOB_CANCELLED,
};
const char *ts_job_state_name(enum ts_job_state s);
int ts_job_state_parse(const char *s, enum ts_job_state *out);
bool ts_job_state_finished(enum ts_job_state s);

enum ts_gpu_kind { TS_GPU_NONE, TS_GPU_COUNT, TS_GPU_PORTION, TS_GPU_MEMORY };

/* Exactly one of count, portion, memory. */
struct ts_gpu_request {
    enum ts_gpu_kind kind;
    int count;                  /* whole GPUs, 1..64 */
    double portion;             /* (0, 1] of each device */
    double portion_limit;       /* portion..1; equals portion when not given */
    int64_t memory_bytes;       /* > 0, per device */
    int64_t memory_limit_bytes; /* >= memory_bytes; equals it when not given */
    int devices;                /* fractional requests: GPUs of one node, 1..64 */
};
/* GPUs a count or portion request asks for: count, or portion * devices
 * (job.requested_gpus). A memory request gives 0 here: what it asks for
 * depends on the GPUs (store_quota.c counts it when usage is read). */
double ts_gpu_request_gpus(const struct ts_gpu_request *g);
/* A job's "gpu": {...}; NULL or JSON null is TS_GPU_NONE. Messages name
 * "gpu.<member>". */
enum ts_err ts_wire_gpu_decode(const json_t *in, struct ts_gpu_request *out, struct ts_error *err);
/* {"count"} | {"portion", "portion_limit", "devices"} | {"memory",
 * "memory_bytes", "memory_limit", "memory_limit_bytes", "devices"}, or JSON
 * null for TS_GPU_NONE. New reference, NULL when out of memory. */
json_t *ts_wire_gpu_encode(const struct ts_gpu_request *g);

struct ts_job_spec {
    char name[TS_NAME_MAX + 1];
    char project[TS_NAME_MAX + 1];
    enum ts_job_kind kind;
    int priority;            /* 0..1000; kind's default when absent */
    bool preemptible;        /* kind's default when absent */
    const char *command;     /* JSON text: non-empty array of strings */
    const char *env;         /* JSON text: object of strings; "{}" */
    const char *working_dir; /* absolute path, or NULL */
    struct ts_gpu_request gpu;
    double cpu;                  /* cores; 0 = not requested */
    int64_t memory_bytes;        /* host memory; 0 = not requested */
    const char *gpu_model;       /* JSON text: array of strings; "[]" = any */
    const char *node_selector;   /* JSON text: object of strings; "{}" */
    int64_t max_runtime_seconds; /* 0 = no limit */
    int grace_seconds;           /* SIGTERM to SIGKILL when stopped; default 30 */
    bool swap;                   /* accepts being swapped; default true */
    /* idle detach: after this long idle on its GPUs its GPU memory goes to
     * its node's host swap while its processes run; 0 = never. Absent
     * (has_idle_swap_after false): the caller resolves the kind's default */
    bool has_idle_swap_after;
    int64_t idle_swap_after_seconds; /* 0..TS_JOB_IDLE_SWAP_MAX */
};

/* A GPU a placed job holds: its index on the job's node, the bytes packed. */
struct ts_job_slot {
    int index; /* logical: the scheduler's */
    int64_t memory_bytes;
    int physical_index; /* where its node runs it (issue 17); -1: not reported */
};

struct ts_job {
    int64_t id;
    struct ts_job_spec spec;
    enum ts_job_state state;
    const char *node; /* NULL when not placed */
    bool has_exit_code;
    int exit_code;
    const char *reason_code; /* pending reason, or NULL */
    const char *reason_message;
    int64_t queue_position; /* 0 = not queued / unknown */
    int resume_count;
    int64_t created_at_us;
    int64_t updated_at_us;
    int64_t started_at_us;           /* 0 = never */
    int64_t finished_at_us;          /* 0 = not finished */
    int attempt;                     /* placements so far */
    const char *checkpoint_dir;      /* or NULL before the first placement */
    const char *stop_reason;         /* evicted, cancelled, ... while stopping, or NULL */
    double allocated_gpus;           /* while placed */
    const struct ts_job_slot *slots; /* while placed */
    size_t nslots;
    double gpu_utilization; /* last sample, 0..1 */
    int64_t gpu_memory_used_bytes;
    int64_t last_active_at_us;    /* last sample with utilization > 0; 0 = never */
    double project_deserved_gpus; /* the project's, at the last scheduler cycle */
    double project_fair_share_gpus;
    int64_t suspended_bytes; /* host swap held while suspending or suspended */
    bool suspend_held;       /* suspended on request: waits for POST /resume */
    int64_t swapped_bytes;   /* running: its GPU memory its node keeps in host swap */
};

struct ts_job_event {
    int64_t id;
    int64_t job_id;
    int64_t at_us;
    const char *type; /* "submitted", "cancelled", ... */
    const char *message;
    /* the attempt and its sequence number, for an event its agent reported
     * (stored once however often resent); 0 for the server's own */
    int64_t attempt;
    int64_t seq;
};

enum ts_err ts_wire_job_decode(const json_t *in, struct ts_arena *a, struct ts_job_spec *out,
                               struct ts_error *err);
json_t *ts_wire_job_encode(const struct ts_job *j);
json_t *ts_wire_job_event_encode(const struct ts_job_event *e);

/* ---- nodes ----------------------------------------------------------------- */

struct ts_gpu {
    int index;
    const char *uuid;
    const char *model;
    int64_t memory_bytes;
    /* read side only (the store fills them; registration ignores them) */
    int64_t allocated_bytes;   /* packed by jobs placed here */
    double utilization;        /* last sample, 0..1 */
    int64_t memory_used_bytes; /* last sample */
    int64_t sampled_at_us;     /* 0 = never */
    const int64_t *jobs;       /* ids of the jobs placed here (that the reader may see) */
    const int *job_physical;   /* beside jobs: the physical GPU its node runs it on
                                  (issue 17), -1 when not reported; or NULL */
    size_t njobs;
    size_t hidden_jobs; /* placed here, of projects the reader may not see */
};

struct ts_node {
    int64_t id;
    const char *name;
    const char *state;  /* "ready", "not_ready", "drained" */
    const char *labels; /* JSON text: object of strings */
    double cpu;
    int64_t memory_bytes;
    struct ts_gpu *gpus;
    size_t ngpus;
    int64_t last_seen_at_us; /* 0 = never */
    int64_t created_at_us;
    int64_t swap_bytes;
    int64_t gpu_reserve_bytes;
    const char *agent_version; /* or NULL */
    int64_t generation;
    int64_t registered_at_us; /* 0 = never */
    int running_jobs;         /* scheduled, running or stopping here */
    const char *collision;    /* "wait", "priority" or "swap" */
    int64_t swap_used_bytes;  /* held by jobs suspending, suspended or resuming
                                 here, and swapped out of running ones */
};

json_t *ts_wire_node_encode(const struct ts_node *n);

/* ---- the agent protocol (wire_agent.c) ------------------------------------- */

#define TS_NODE_GPUS_MAX 64
#define TS_NODE_LABELS_MAX 64
#define TS_REPORT_JOBS_MAX 4096
#define TS_REPORT_EVENTS_MAX 1000
#define TS_EVENT_TYPE_MAX 32      /* [a-z_]{1,32} */
#define TS_EVENT_MESSAGE_MAX 1000 /* characters */

/* PUT /nodes/{name}: what an agent registers. */
struct ts_node_reg {
    const char *labels; /* JSON text: object of strings; "{}" */
    double cpu;
    int64_t memory_bytes;
    int64_t swap_bytes;
    int64_t gpu_reserve_bytes;
    const char *agent_version; /* or NULL */
    /* protocol_version "MAJOR.MINOR" (api/version.h); 1.0 when not sent */
    struct ts_protocol protocol;
    const char *collision; /* "wait" (default), "priority" or "swap"; static */
    struct ts_gpu gpus[TS_NODE_GPUS_MAX];
    size_t ngpus;
};

enum ts_report_state {
    TS_REPORT_RUNNING,
    TS_REPORT_EXITED,
    TS_REPORT_FAILED_TO_START,
    TS_REPORT_SUSPENDED, /* processes stopped, GPU memory in host swap */
};

/* Where a job's GPU runs on its node (the node-level scheduler, issue 17):
 * the server's logical index and the physical one the agent chose. */
struct ts_report_gpu_place {
    int index;          /* logical: the server's */
    int physical_index; /* where it runs */
};

struct ts_report_job {
    int64_t id;
    int attempt;
    enum ts_report_state state;
    int pid; /* 0 = not given */
    bool has_exit_code;
    int exit_code;
    int signal;          /* 0 = none */
    const char *message; /* or NULL */
    bool has_usage;      /* either of the two below */
    bool has_gpu_utilization;
    double gpu_utilization; /* 0..1 */
    bool has_gpu_memory_used;
    int64_t gpu_memory_used_bytes;
    bool has_swapped_bytes;
    int64_t swapped_bytes; /* SUSPENDED: host swap it holds; RUNNING: what
                              of its GPU memory its node keeps in host
                              swap while it runs (idle detach) */
    bool evicted;          /* EXITED or FAILED_TO_START only: its node ended
                              it to make room (collision resolver):
                              requeued, not failed */
    /* "gpus": its GPUs, logical and physical (absent from agents before
     * issue 17: places NULL, nplaces 0); logical indexes distinct */
    const struct ts_report_gpu_place *places;
    size_t nplaces;
};

/* An action of the node's collision resolver on a job attempt; seq >= 1
 * grows per (id, attempt), so a resent event is stored once. */
struct ts_report_event {
    int64_t id;
    int attempt;
    int64_t seq;
    const char *type;    /* [a-z_]{1,32} */
    const char *message; /* at most 1000 characters */
};

struct ts_report_gpu {
    int index;
    double utilization;
    int64_t memory_used_bytes;
};

/* POST /nodes/{name}/report. Arrays live in the caller's arena. */
struct ts_node_report {
    struct ts_report_job *jobs;
    size_t njobs;
    struct ts_report_gpu *gpus;
    size_t ngpus;
    struct ts_report_event *events;
    size_t nevents;
};

/* GET /nodes/{name}/desired: what the node should run (wire_desired.c). */
enum ts_desired_action { TS_DESIRED_RUN, TS_DESIRED_STOP, TS_DESIRED_SUSPEND };

/* A GPU of a desired job. The server names its logical GPU in index; in the
 * job's spec.json on its node, where the node-level scheduler moved it
 * (agent/daemon/nodesched.h), index is the physical GPU and logical_index
 * the server's. */
struct ts_desired_gpu {
    int index;
    int logical_index;          /* -1: not moved (never sent by the server) */
    const char *uuid;           /* or NULL */
    int64_t memory_bytes;       /* the guaranteed request packed there; -1: not given */
    int64_t memory_limit_bytes; /* the burst limit; -1: not given */
};

struct ts_desired_env {
    const char *name; /* not empty, no '=' */
    const char *value;
};

struct ts_desired_job {
    int64_t id;
    int attempt;
    enum ts_desired_action action;     /* run; stop: evicting or cancelling; suspend:
                                          suspending or suspended */
    const char *name, *project, *kind; /* or NULL */
    int priority;
    bool swap;               /* the job accepts being swapped; default true */
    const char *stop_reason; /* evicted, cancelled, max_runtime, ... or NULL */
    const char **command;    /* argv; ncommand 0: none given */
    size_t ncommand;
    struct ts_desired_env *env; /* in the order sent */
    size_t nenv;
    const char *working_dir; /* or NULL */
    struct ts_desired_gpu *gpus;
    size_t ngpus;
    double cpu;
    int64_t memory_bytes;
    int grace_seconds; /* -1: not given */
    int64_t max_runtime_seconds;
    const char *checkpoint_dir; /* or NULL */
    int resume_count;
    int64_t idle_swap_after_seconds; /* idle detach after this long idle; 0: never */
    const char *job_user;            /* its project's, or NULL: the agent's --job-user */
    bool allow_root;                 /* its project may run jobs as root */
};

struct ts_desired {
    int64_t node_id;          /* the server's own; not on the wire */
    const char *node, *state; /* or NULL */
    int64_t generation;
    struct ts_desired_job *jobs; /* by id */
    size_t njobs;
};

/*
 * The desired state's codec, used by the server (encode) and the agent
 * (decode; also for the job's spec.json). The decoder reads a server one
 * minor version newer than the agent, so unknown members are skipped (the
 * one rule that differs from the other decoders); everything else is
 * strict: wrong types, values out of range, id, attempt or action missing,
 * a GPU index repeated, named by their path ("jobs[2].gpus[0].index").
 * Absent members take the defaults above.
 */
enum ts_err ts_wire_desired_decode(const json_t *in, struct ts_arena *a, struct ts_desired *out,
                                   struct ts_error *err);
/* One job; `path` names it in messages ("jobs[2]", "" for spec.json). */
enum ts_err ts_wire_desired_job_decode(const json_t *in, const char *path, struct ts_arena *a,
                                       struct ts_desired_job *out, struct ts_error *err);
/* New references, NULL when out of memory. */
json_t *ts_wire_desired_encode(const struct ts_desired *d);
json_t *ts_wire_desired_job_encode(const struct ts_desired_job *j);
/* The store's command and env (JSON text of a jsonb column: an array of
 * strings, an object of strings) into j's command and env, in arena a. */
enum ts_err ts_wire_desired_job_set_text(struct ts_desired_job *j, const char *command,
                                         const char *env, struct ts_arena *a, struct ts_error *err);

/* The server's answer to a report. */
struct ts_report_result {
    int64_t generation;
    int64_t *ignored; /* jobs named in the report that are not this node's attempt */
    size_t nignored;
};
json_t *ts_wire_report_result_encode(const struct ts_report_result *r);
/* Unknown members skipped, as for the desired state; ignored in arena a. */
enum ts_err ts_wire_report_result_decode(const json_t *in, struct ts_arena *a,
                                         struct ts_report_result *out, struct ts_error *err);

/* POST /nodes/{name}/logs (wire_logs.c): job output in base64 chunks. */
#define TS_LOG_CHUNKS_MAX 4096 /* chunks in one request */

/* One chunk of a job's output as an agent ships it. */
struct ts_log_chunk {
    int64_t job_id;
    int attempt;
    int64_t offset;            /* bytes into the attempt's output, < 2^62 */
    const unsigned char *data; /* borrowed (decoded: in the caller's arena) */
    size_t len;
};
/* The end of what is stored contiguously for one attempt of a job. */
struct ts_log_mark {
    int64_t job_id;
    int attempt;
    int64_t next_offset; /* where the agent resumes */
};
/* The server's answer: a mark per attempt it stored output of, and the
 * jobs it ignored (not this node's, or not at that attempt). */
struct ts_log_ack {
    struct ts_log_mark *marks;
    size_t nmarks;
    int64_t *ignored;
    size_t nignored;
};
/* {"chunks": [{"id", "attempt", "offset", "data"}]}, data in padded base64.
 * New reference, NULL when out of memory. */
json_t *ts_wire_log_chunks_encode(const struct ts_log_chunk *v, size_t n);
/* Strict (the server reads an agent's body): every member required, data
 * canonical RFC 4648 base64, offset plus length below 2^62, at most
 * TS_LOG_CHUNKS_MAX chunks. *out (n entries) and the bytes in arena a. */
enum ts_err ts_wire_log_chunks_decode(const json_t *in, struct ts_arena *a,
                                      struct ts_log_chunk **out, size_t *n, struct ts_error *err);
/* {"chunks": [{"id", "attempt", "next_offset"}], "ignored": [ids]}. */
json_t *ts_wire_log_ack_encode(const struct ts_log_ack *r);
/* Unknown members skipped, as for the desired state; arrays in arena a. */
enum ts_err ts_wire_log_ack_decode(const json_t *in, struct ts_arena *a, struct ts_log_ack *out,
                                   struct ts_error *err);

/* Encoders of what an agent sends (the inverse of the decoders below). */
json_t *ts_wire_node_reg_encode(const struct ts_node_reg *r);
json_t *ts_wire_node_report_encode(const struct ts_node_report *r);

/* Strict decoders: GPU indexes distinct and in 0..63, UUIDs distinct. */
enum ts_err ts_wire_node_reg_decode(const json_t *in, struct ts_arena *a, struct ts_node_reg *out,
                                    struct ts_error *err);
enum ts_err ts_wire_node_report_decode(const json_t *in, struct ts_arena *a,
                                       struct ts_node_report *out, struct ts_error *err);
/* One event of a report, also a line of the agent's JOBDIR/events.log
 * (agent/daemon/events.h); `path` names it in messages ("events[3]").
 * Strings of the decoded one in arena a. */
json_t *ts_wire_report_event_encode(const struct ts_report_event *e);
enum ts_err ts_wire_report_event_decode(const json_t *in, const char *path, struct ts_arena *a,
                                        struct ts_report_event *out, struct ts_error *err);

/* ---- problems (wire_problem.c) ---------------------------------------------- */

/* An error answer (RFC 9457). Every string borrowed: from the encoder's
 * caller, or from the decoded JSON (valid while it lives); NULL: absent. */
struct ts_problem {
    const char *type; /* urn:tessera:error:CODE */
    const char *title;
    int status;       /* 0: absent */
    const char *code; /* the stable code of api/errcodes.def */
    const char *detail, *cause, *field, *hint, *instance, *request_id;
};
/* type, title, status, code and detail always; the rest when not NULL. New
 * reference, NULL when out of memory. */
json_t *ts_wire_problem_encode(const struct ts_problem *p);
/* Members of its own a problem may carry are skipped; the known ones must
 * have their types. */
enum ts_err ts_wire_problem_decode(const json_t *in, struct ts_problem *out, struct ts_error *err);

/* ---- shared pieces --------------------------------------------------------- */

/* RFC 3339 UTC with microseconds, or JSON null for 0. New reference. */
json_t *ts_wire_time(int64_t us);
/* v (borrowed) as compact JSON text for a response, numbers with 15
 * significant digits so that 0.7 reads "0.7" (jansson's default, 17, writes
 * 0.69999999999999996). New string (free()), NULL when out of memory. */
char *ts_wire_dumps(const json_t *v);

#endif /* TS_API_WIRE_H */
