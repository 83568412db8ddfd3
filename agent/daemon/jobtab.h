/*
 * jobtab.h - the agent's job list, the hub its pieces share (jobtab.c):
 * a job found by id and attempt, the main loop woken. struct ts_agent owns
 * one (agent.h) and hands it to the broker (broker.h); reconcile.c,
 * upstream.c, logship.c and repack.c reach it there. Nothing here calls
 * back into agent.c.
 *
 * The main thread changes the list, under the agent's mu; other threads
 * read it under mu.
 */
#ifndef TS_AGENT_DAEMON_JOBTAB_H
#define TS_AGENT_DAEMON_JOBTAB_H

#include <stdint.h>

#include "agent/daemon/ajob.h"

struct ts_jobtab {
    struct ts_ajob *jobs; /* main thread changes the list, under the agent's mu */
    int wake_fd;          /* eventfd: wakes the main loop */
};

/* Wake the main loop (any thread). */
void ts_jobtab_wake(struct ts_jobtab *t);
/* The job (id, attempt) in the list, or NULL. Caller holds the agent's mu
 * or is the main thread. */
struct ts_ajob *ts_jobtab_find(struct ts_jobtab *t, int64_t id, int attempt);

#endif /* TS_AGENT_DAEMON_JOBTAB_H */
