/*
 * proc.h - what the agent reads about processes from /proc: start time (to
 * tell a reused pid from the process that had it), session and group, and
 * the members of a session.
 */
#ifndef TS_AGENT_DAEMON_PROC_H
#define TS_AGENT_DAEMON_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ts_proc_stat {
    char state; /* 'R', 'S', 'Z', ... */
    pid_t ppid;
    pid_t pgrp;
    pid_t session;
    uint64_t start_ticks; /* field 22: clock ticks after boot */
};

/* Read /proc/PID/stat. Returns 0, or -errno (-ENOENT when pid is gone). */
int ts_proc_stat(pid_t pid, struct ts_proc_stat *out);
/* The process pid exists (a zombie counts) and started at start_ticks:
 * it is the process that was recorded, not another that reused its pid. */
bool ts_proc_same(pid_t pid, uint64_t start_ticks);
/* Up to max pids of the processes whose session is sid, into out; returns
 * how many there are (may exceed max). */
size_t ts_proc_session(pid_t sid, pid_t *out, size_t max);

#endif /* TS_AGENT_DAEMON_PROC_H */
