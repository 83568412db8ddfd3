/*
 * e2e.h - end-to-end clusters for tests and benchmarks: a real
 * tessera-server (tests/integration/harness.h: its own folder and embedded
 * PostgreSQL) and real tessera-agent processes on simulated GPUs, each agent
 * a child process with a data folder under the server's folder, running
 * real job processes.
 *
 * Helpers return errors (-1, NULL, false) and say why on stderr, so that
 * cmocka tests assert on them and benchmarks, which are no cmocka tests,
 * can use them too. Times are seconds (double).
 */
#ifndef TS_TESTS_E2E_E2E_H
#define TS_TESTS_E2E_E2E_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "tests/integration/harness.h"

#define TS_E2E_AGENTS_MAX 32

/*
 * Shell text that job scripts start with: appends one line to
 * $TESSERA_CHECKPOINT_DIR/starts saying how this start saw the world, as
 * key=value words ("resume=1 node=n2 gpus=0 attempt=2 pid=4242
 * t=1700000000.123"); ts_e2e_starts() reads them back. The pid is the one
 * the job sees, inside its sandbox's PID namespace: its host pid is in
 * job.json (ts_e2e_job_proc).
 */
#define TS_E2E_RECORD_START                                                                        \
    "echo \"resume=$TESSERA_RESUME_COUNT node=$TESSERA_NODE gpus=$CUDA_VISIBLE_DEVICES"            \
    " attempt=$TESSERA_ATTEMPT pid=$$ t=$(date +%s.%N)\" >> \"$TESSERA_CHECKPOINT_DIR/starts\"; "

/*
 * A job that records its start, then ignores SIGTERM: it writes
 * "TERM t=..." to $TESSERA_CHECKPOINT_DIR/signals when the signal comes and
 * "alive t=..." every 0.2 s after it, until SIGKILL ends it.
 */
#define TS_E2E_STUBBORN_JOB                                                                        \
    TS_E2E_RECORD_START                                                                            \
    "term=0; trap 'echo \"TERM t=$(date +%s.%N)\" >> \"$TESSERA_CHECKPOINT_DIR/signals\";"         \
    " term=1' TERM; while :; do if [ $term = 1 ]; then echo \"alive t=$(date +%s.%N)\""            \
    " >> \"$TESSERA_CHECKPOINT_DIR/signals\"; fi; sleep 0.2; done"

/* A job that records its start and sleeps until it is stopped. */
#define TS_E2E_SLEEPING_JOB TS_E2E_RECORD_START "exec sleep 1000"

struct ts_e2e_agent {
    char node[64];
    char gpus[64];   /* --gpus */
    char labels[64]; /* --labels, or "" */
    char args[320];  /* more options, separated by spaces, or "" */
    char server[128];
    char data[400]; /* --data-dir */
    char log[420];
    char token_file[420]; /* --token-file: a token bound to this node */
    pid_t pid;            /* 0 when not running */
};

struct ts_e2e {
    struct ts_it_server srv;
    struct ts_it_server replica; /* a second server on the same database, when started */
    char token_file[400];
    char report_interval[16]; /* agents' --report-interval (default "1s") */
    struct ts_e2e_agent agents[TS_E2E_AGENTS_MAX];
    int nagents;
    bool passed; /* set by a test at its end: teardown shows logs when false */
};

/* The folder of Tessera's programs ($TS_BIN_DIR, else build/bin); borrowed. */
const char *ts_e2e_bin_dir(void);
/* Monotonic and wall-clock seconds. */
double ts_e2e_now(void);
double ts_e2e_wall(void);
void ts_e2e_sleep(double secs);
/* A TCP port on 127.0.0.1 that was free a moment ago, or -1. */
int ts_e2e_free_port(void);

/*
 * Start the server (extra_args as for ts_it_start), write an agent token for
 * any node to c->token_file and create the department "research". 0 or -1.
 * Each agent added gets a token of its own, bound to its node.
 */
int ts_e2e_start(struct ts_e2e *c, const char *const *server_args);
/*
 * Stop everything: agents (SIGTERM; they must exit 0), every job process
 * group and supervisor they started (SIGKILL), the replica and the server,
 * and remove the folders. Returns -1 when an agent did not exit cleanly or a
 * sanitizer report is in a server, agent or supervisor log, else 0. Shows
 * the end of every log when c->passed is false.
 */
int ts_e2e_stop(struct ts_e2e *c);

/* What ts_e2e_setup creates: a project (in department "research") and an
 * agent on c->srv. Lists of them end with an entry whose name or node is
 * NULL. */
struct ts_e2e_project_spec {
    const char *name;
    double quota; /* GPUs */
};
struct ts_e2e_agent_spec {
    const char *node;
    const char *gpus;   /* --gpus */
    const char *labels; /* --labels, or NULL */
    const char *args;   /* more options, separated by spaces, or NULL */
};

/*
 * A cmocka setup (and teardown) for a test's own cluster: a new struct
 * ts_e2e in *state, its server started with server_args, the projects
 * created, the agents started and each agent's node ready within 30 s
 * (projects, agents: lists or NULL). 0, or -1 with everything stopped and
 * *state NULL. ts_e2e_teardown stops the cluster (ts_e2e_stop) and frees
 * it; ts_e2e_stop's result.
 */
int ts_e2e_setup(void **state, const char *const *server_args,
                 const struct ts_e2e_project_spec *projects,
                 const struct ts_e2e_agent_spec *agents);
int ts_e2e_teardown(void **state);

/* Add and start an agent talking to c->srv; its index, or -1. */
int ts_e2e_agent_add(struct ts_e2e *c, const char *node, const char *gpus, const char *labels);
/* The same, talking to server (a URL). */
int ts_e2e_agent_add_at(struct ts_e2e *c, const char *server, const char *node, const char *gpus,
                        const char *labels);
/* The same, with more agent options (separated by spaces; NULL: none). */
int ts_e2e_agent_add_args(struct ts_e2e *c, const char *server, const char *node, const char *gpus,
                          const char *labels, const char *args);
/* (Re)start agent a (with a->server); 0 or -1. */
int ts_e2e_agent_start(struct ts_e2e *c, struct ts_e2e_agent *a);
/* Signal agent a and wait up to 20 s for it; its wait status, or -1. */
int ts_e2e_agent_signal(struct ts_e2e_agent *a, int sig);
/* SIGKILL every job process group and supervisor agent a started, if alive. */
void ts_e2e_agent_kill_jobs(const struct ts_e2e_agent *a);

/* Create a project in department "research" with a GPU quota; 0 or -1. */
int ts_e2e_project(struct ts_it_server *s, const char *name, double quota);

/* GET path (printf format) as admin; new JSON, or NULL when not 200. */
json_t *ts_e2e_get(struct ts_it_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/*
 * Cancel a job as admin; the status of DELETE /jobs/{id}. A 409 "deadlock
 * detected" is tried again (up to 5 times): the server's cancel and an
 * agent's report of the same node lock the job and node rows in opposite
 * orders (a known server bug, see README.md); other answers are returned.
 */
long ts_e2e_cancel(struct ts_it_server *s, long long id);
/* A request as admin; its status (-1: no answer). */
long ts_e2e_req(struct ts_it_server *s, const char *method, const char *path, const char *body);

/*
 * Submit ["sh", "-c", script] to project as admin. gpu is the "gpu" object
 * as JSON text; grace the grace period ("3s") or NULL; extra NULL or JSON
 * text of an object whose members are added to the request. The job's id,
 * or -1.
 */
long long ts_e2e_submit(struct ts_it_server *s, const char *project, const char *name,
                        const char *gpu, const char *grace, const char *extra, const char *script);
/* The job (new), or NULL. */
json_t *ts_e2e_job(struct ts_it_server *s, long long id);
/* Wait up to secs for the job's state; the job (new), or NULL (with what it was). */
json_t *ts_e2e_wait_state(struct ts_it_server *s, long long id, const char *state, double secs);
/* Wait up to secs for the node's state; 0 or -1. */
int ts_e2e_wait_node(struct ts_it_server *s, const char *node, const char *state, double secs);
/* How many events of type the job has (-1 on error). */
int ts_e2e_event_count(struct ts_it_server *s, long long id, const char *type);
/* Whether the job has an event of type whose message contains text (NULL:
 * any); and the same, waiting up to secs (saying so on stderr when not). */
bool ts_e2e_event_has(struct ts_it_server *s, long long id, const char *type, const char *text);
bool ts_e2e_wait_event(struct ts_it_server *s, long long id, const char *type, const char *text,
                       double secs);
/* Time (Unix seconds) of the n-th (from 1; -1: last) event of type, or -1. */
double ts_e2e_event_time(struct ts_it_server *s, long long id, const char *type, int n);
/* RFC 3339 "2024-05-01T10:00:00.123456Z" as Unix seconds, or -1. */
double ts_e2e_parse_time(const char *text);

/* A job process as its supervisor recorded it in DATA/jobs/ID-ATTEMPT/job.json. */
struct ts_e2e_proc {
    pid_t pid; /* leader of the job's session and process group */
    uint64_t ticks;
    pid_t sup_pid;
    uint64_t sup_ticks;
};
/* Read job.json of the job's attempt on agent a; 0 or -1. */
int ts_e2e_job_proc(const struct ts_e2e_agent *a, long long id, int attempt,
                    struct ts_e2e_proc *out);
/* The process runs (not a zombie) and started at ticks (0: any). */
bool ts_e2e_alive(pid_t pid, uint64_t ticks);
/* Live (non-zombie) processes in process group pgid. */
int ts_e2e_group_size(pid_t pgid);
/* Wait up to secs for the group to be empty; true when it is. */
bool ts_e2e_wait_group_gone(pid_t pgid, double secs);

/* The job's checkpoint file `name` (new text, "" when absent), by the
 * checkpoint_dir the server gives for it. */
char *ts_e2e_checkpoint_file(struct ts_it_server *s, long long id, const char *name);
/* Lines of `starts` (see TS_E2E_RECORD_START); line n (from 0) key's value
 * into buf. Returns the number of lines. */
int ts_e2e_starts(const char *text, int n, const char *key, char *buf, size_t len);
/* The value of key= on line n of text (any key=value text), as a double; -1 when absent. */
double ts_e2e_line_value(const char *text, int n, const char *key);
/* Lines of text starting with prefix. */
int ts_e2e_count_lines(const char *text, const char *prefix);

/* The agent's output.log of the job's attempt (new text, "" when absent). */
char *ts_e2e_output(const struct ts_e2e_agent *a, long long id, int attempt);
/* Wait up to secs for the agent's output.log of the attempt to contain text. */
bool ts_e2e_wait_output(const struct ts_e2e_agent *a, long long id, int attempt, const char *text,
                        double secs);
/* The file at path contains text. */
bool ts_e2e_log_has(const char *path, const char *text);
/* The agent called node, or NULL. */
struct ts_e2e_agent *ts_e2e_agent_named(struct ts_e2e *c, const char *node);

/* tests/agent/cuda_job, the job that writes every byte of its device
 * memory and checks it ($TS_CUDA_JOB, else next to TS_BIN_DIR); borrowed. */
const char *ts_e2e_cuda_job(void);
/* Flag files jobs and tests hand each other (cuda_job's mark and await):
 * the path of flag `name` in the cluster's folder into buf; create it;
 * wait up to secs for it (false, said on stderr, when it did not come). */
const char *ts_e2e_flag(const struct ts_e2e *c, const char *name, char *buf, size_t len);
void ts_e2e_flag_set(const struct ts_e2e *c, const char *name);
bool ts_e2e_flag_wait(const struct ts_e2e *c, const char *name, double secs);

/* "exec CUDA_JOB STEPS" into buf, each @NAME in steps replaced by the path
 * of flag NAME (cuda_job's steps: alloc DEV MiB, check, free, drop, idle
 * S, mark FILE, await FILE). */
const char *ts_e2e_cuda_script(const struct ts_e2e *c, char *buf, size_t len, const char *steps);
/* Bytes of simulated GPU `index` of agent a that processes hold now (dead
 * ones reaped first), or -1. */
long long ts_e2e_gpu_used(const struct ts_e2e_agent *a, unsigned index);

#endif /* TS_TESTS_E2E_E2E_H */
