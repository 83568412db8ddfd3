/*
 * records.h - the agent's own files in a job's folder, as typed records:
 * status.json (how the job ended), job.json (the pids the supervisor
 * started), stop.json (a stop in progress) and launch.json's "cgroup" and
 * "sandbox". Each record has one table of
 * its members that drives both its encoder and its decoder, so the writer
 * (the supervisor, or the agent) and the reader (the agent, also after a
 * restart) cannot drift. The events.log lines are the report's events and
 * go through api/wire.h's codec of them (events.c).
 *
 * Only the agent writes and reads these files, so they live here and not
 * in api/. The decoders are strict on types and ranges and name the member
 * ("status.json: exit_code must be an integer"); members they do not know
 * are skipped, so an agent reads the files of the agent it replaced.
 */
#ifndef TS_AGENT_DAEMON_RECORDS_H
#define TS_AGENT_DAEMON_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "agent/daemon/cgroup.h"
#include "agent/daemon/sandbox.h"
#include "api/err.h"

#define TS_REC_MESSAGE_MAX 4608 /* bytes of a message with its NUL: a path and more */

/* status.json: written once, when the job is over. */
struct ts_rec_status {
    char state[32]; /* "exited" or "failed_to_start" */
    bool has_exit_code;
    int64_t exit_code;                /* -255..255 */
    int64_t signal;                   /* 0: none */
    char message[TS_REC_MESSAGE_MAX]; /* "": none */
    int64_t finished_at;              /* Unix seconds */
};

/* job.json: the job's pid and start time, its supervisor's and its
 * sandbox init's (init_pid 0: none). */
struct ts_rec_pids {
    int64_t pid;
    int64_t start_ticks;
    int64_t supervisor_pid;
    int64_t supervisor_start_ticks;
    int64_t started_at; /* Unix seconds */
    int64_t init_pid;
    int64_t init_start_ticks;
};

/* stop.json: SIGTERM was sent; SIGKILL at deadline_ms, or already. */
struct ts_rec_stop {
    int64_t deadline_ms; /* wall clock, ms */
    bool killed;
};

/* Write rec to path atomically (mode 0600). 0, or -errno. */
int ts_rec_status_write(const char *path, const struct ts_rec_status *rec);
int ts_rec_pids_write(const char *path, const struct ts_rec_pids *rec);
int ts_rec_stop_write(const char *path, const struct ts_rec_stop *rec);

/* Read path into *rec (zeroed first). TS_OK; TS_ERR_NOT_FOUND when there is
 * no such file; else err says what is wrong with it, naming the file and
 * the member. */
enum ts_err ts_rec_status_read(const char *path, struct ts_rec_status *rec, struct ts_error *err);
enum ts_err ts_rec_pids_read(const char *path, struct ts_rec_pids *rec, struct ts_error *err);
enum ts_err ts_rec_stop_read(const char *path, struct ts_rec_stop *rec, struct ts_error *err);

/* launch.json: what the supervisor starts. */
struct ts_rec_launch {
    char **argv; /* NULL-terminated (NULL: none); read: new */
    char **env;  /* NAME=VALUE, likewise */
    char working_dir[TS_SANDBOX_PATH_MAX];
    bool has_sandbox; /* sandboxed: its sandbox, and its group when it has one */
    struct ts_sandbox_spec sandbox;
    bool has_cgroup;
    struct ts_cgroup_spec cgroup;
};
int ts_rec_launch_write(const char *path, const struct ts_rec_launch *rec);
/* argv and env required; *rec is large (allocate it). Free with
 * ts_rec_launch_free after TS_OK. */
enum ts_err ts_rec_launch_read(const char *path, struct ts_rec_launch *rec, struct ts_error *err);
void ts_rec_launch_free(struct ts_rec_launch *rec);

#endif /* TS_AGENT_DAEMON_RECORDS_H */
