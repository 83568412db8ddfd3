/*
 * ajob.h - one job on this node ("agent job"): its folder DATA/jobs/ID-ATTEMPT,
 * its supervisor, its state as the agent sees it.
 *
 * The folder holds everything a restarted agent needs (README.md "Files"):
 * spec.json (the desired job as received), launch.json (argv, environment,
 * working folder: what the supervisor runs), job.json (pid and start time of
 * the job and of its supervisor, written by the supervisor), status.json
 * (how it ended, written atomically by the supervisor), stop.json (a stop in
 * progress), output.log, log.offset (output the server has acknowledged) and
 * `reported` (the server has the final state and the whole output).
 *
 * Records are made and changed by the agent's main thread; the fields under
 * "upstream" are shared with the thread that talks to the server, under the
 * agent's lock.
 */
#ifndef TS_AGENT_DAEMON_AJOB_H
#define TS_AGENT_DAEMON_AJOB_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/daemon/gpus.h"
#include "agent/daemon/ledgers.h"
#include "agent/daemon/sandbox.h"
#include "api/err.h"
#include "api/wire.h"

#define TS_AJOB_GRACE_DEFAULT 30
#define TS_AJOB_DIR_MAX (PATH_MAX - 64) /* room for the file names inside */
#define TS_AJOB_START_TIMEOUT_MS 30000  /* supervisor to job.json */

/* Re-pack on demand (repack.h): a spread job asked to move back to its
 * logical GPU for a job that needs the room. */
enum ts_ajob_move {
    TS_AJOB_MOVE_NONE,
    TS_AJOB_MOVE_ASKED,   /* by the main thread; the broker starts it */
    TS_AJOB_MOVE_MOVING,  /* TS_CMD_MOVE sent, not all acknowledged */
    TS_AJOB_MOVE_DONE,    /* on its logical GPU now */
    TS_AJOB_MOVE_REFUSED, /* stays where it runs: move_msg says why */
};

enum ts_ajob_phase {
    TS_AJOB_STARTING, /* the supervisor runs; the job's pid is not known yet */
    TS_AJOB_RUNNING,
    TS_AJOB_EXITED, /* final: exit code, signal, or status lost (message) */
    TS_AJOB_FAILED, /* final: failed_to_start (message) */
};

struct ts_ajob {
    int64_t id;
    int attempt;
    char dir[TS_AJOB_DIR_MAX];
    int grace_seconds; /* for stops the desired state does not time */
    int priority;
    int idle_swap_after; /* seconds without a GPU call before its memory is detached; 0: never */
    unsigned gpus[TS_GPUS_MAX];    /* physical: where it runs */
    unsigned logical[TS_GPUS_MAX]; /* the server's, beside gpus (nodesched.h) */
    unsigned ngpus;

    enum ts_ajob_phase phase;
    pid_t pid; /* the job: leader of its session and process group */
    uint64_t start_ticks;
    pid_t sup_pid; /* its supervisor */
    uint64_t sup_ticks;
    struct ts_cgroup_spec *cgroup; /* sandboxed: its control group (cgroup.h; new), or NULL */
    struct ts_job_user user;       /* sandboxed: who it runs as (its project's job_user) */
    pid_t init_pid; /* sandboxed: pid 1 of its PID namespace; killing it ends them all */
    uint64_t init_ticks;
    int64_t starting_deadline_ms;
    bool has_exit_code;
    int exit_code;
    int signal;
    char message[512];
    unsigned damage_said; /* the records (records.h) found damaged and
                             logged, a bit each: said once a job */

    bool stopping;            /* SIGTERM sent (or due once the pid is known) */
    bool killed;              /* SIGKILL sent */
    int64_t stop_deadline_ms; /* realtime: SIGKILL when still running */

    /* fraction enforcement (ledgers.h, broker.c) */
    bool shim;        /* has job slots in the ledgers: runs under the shim */
    bool slots_freed; /* over, and its slots are free again */
    /* suspend in place, under the agent's lock (main: want; broker: the rest) */
    bool want_suspend;      /* the desired state says suspend */
    bool suspending;        /* the broker's swap-outs are under way */
    bool suspended;         /* swapped out and SIGSTOPped (also while resuming) */
    bool resuming;          /* continued, its memory coming back: still reported suspended */
    bool suspend_failed;    /* could not swap out: to be stopped */
    uint64_t swapped_bytes; /* while suspended */
    int64_t resume_started_ms;
    char wait_msg[256]; /* resuming: what its memory waits for */
    int64_t retry_ms;   /* broker: no idle detach (after a failed one), no new ask for a
                           resume's failed swap-in, before this */
    /* ended by the node to make room (the priority resolver): broker asks
     * (evict_req, under the lock), the main thread stops it; reported evicted */
    bool evict_req;
    int evict_grace;
    bool evicted;
    char evict_msg[384];

    /* re-pack on demand (repack.c), under the agent's lock: the main thread
     * asks, the broker moves it back and says how it went */
    enum ts_ajob_move move;
    int64_t move_for; /* the job that needs the room */
    int move_for_attempt;
    int64_t move_asked_ms;
    char move_msg[256]; /* refused: why */

    /* upstream, under the agent's lock */
    bool final_reported; /* a report with the final state was accepted */
    int64_t log_acked;   /* the server has the output up to here */
    bool log_done;       /* final and all output acknowledged (or refused) */

    /* samples since the last report (main thread writes, under the lock) */
    double util_sum;
    unsigned util_n;
    uint64_t mem_used;
    bool has_usage;

    struct ts_ajob *next;
};

/* What the agent adds to every job it starts. Borrowed. */
struct ts_ajob_ctx {
    const char *data_dir;
    const char *node;
    const struct ts_gpus *gpus;       /* sim: simgpu_dir and lib_dir; NULL: none */
    const char *supervisor_exe;       /* the agent binary: "/proc/self/exe" */
    struct ts_ledgers *ledgers;       /* NULL: no fraction enforcement */
    const char *shim_lib;             /* libtessera-cuda.so, preloaded into fractional jobs */
    const struct ts_sandbox *sandbox; /* NULL or off: jobs run unsandboxed */
    const char *token_file;           /* hidden from sandboxed jobs */
};

/* Realtime clock in milliseconds. */
int64_t ts_ajob_now_ms(void);

/*
 * Start the desired job (borrowed, as api/wire.h decodes it): make its
 * folder, write spec.json (its encoding) and launch.json, fork the
 * supervisor and wait (up to 10 s) for it to start the job. New record,
 * whatever happened: a job that could not start is TS_AJOB_FAILED with the
 * reason in message. NULL (err set) only when out of memory.
 */
struct ts_ajob *ts_ajob_start(const struct ts_ajob_ctx *ctx, const struct ts_desired_job *desired,
                              struct ts_error *err);
/* Read the record of an existing folder (adoption after a restart). New;
 * NULL when the folder is not a job's (no readable spec.json). */
struct ts_ajob *ts_ajob_load(const char *dir);
/* Look at the job again: status file, liveness, a stop's deadline (SIGKILL
 * of the group when passed). Returns true when the phase changed. */
bool ts_ajob_poll(struct ts_ajob *j, int64_t now_ms);
/* Stop: SIGTERM to the job's process group now, SIGKILL to the group and
 * session once grace_seconds pass (by ts_ajob_poll). A second call is a
 * no-op; a final job is left alone. reason is for the log. */
void ts_ajob_stop(struct ts_ajob *j, int grace_seconds, const char *reason);
bool ts_ajob_final(const struct ts_ajob *j);
/* "running", "exited" or "failed_to_start"; NULL while starting. */
const char *ts_ajob_state_name(const struct ts_ajob *j);
/* Persist log_acked (best effort). */
void ts_ajob_save_log_offset(const struct ts_ajob *j);
/* Mark the job ended by the node to make room (evicted, evict_msg; the
 * file `evicted` keeps it across a restart) and stop it with that grace. */
void ts_ajob_evict(struct ts_ajob *j, int grace_seconds, const char *msg);
/* Write the `reported` marker: a restarted agent does not load it again. */
void ts_ajob_mark_reported(const struct ts_ajob *j);
void ts_ajob_free(struct ts_ajob *j); /* NULL is a no-op */

/*
 * The environment of a job: NULL-terminated "K=V" strings (new; free with
 * ts_ajob_env_free). Built from PATH, HOME, USER, LOGNAME, SHELL, LANG,
 * LC_ALL, TZ and TMPDIR of the agent, then the desired env, then Tessera's
 * own variables (README.md "What a job sees"). NULL with msg filled when out
 * of memory.
 */
char **ts_ajob_env_build(const struct ts_ajob_ctx *ctx, const struct ts_desired_job *desired,
                         const char *checkpoint_dir, char *msg, size_t msglen);
void ts_ajob_env_free(char **env);

/* The supervisor (supervisor.c): `tessera-agent --supervise JOBDIR`, with
 * the agent's notify pipe on fd 3. Returns the process's exit status. */
int ts_supervisor_main(const char *jobdir);

#endif /* TS_AGENT_DAEMON_AJOB_H */
