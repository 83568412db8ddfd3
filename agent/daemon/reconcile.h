/*
 * reconcile.h - the desired state applied to the job list: starts, stops,
 * suspends (reconcile.c). Called by the main loop (agent.c).
 */
#ifndef TS_AGENT_DAEMON_RECONCILE_H
#define TS_AGENT_DAEMON_RECONCILE_H

#include "agent/daemon/agent.h"

/* Apply a->desired to the job list: start what should run and does not,
 * stop what should not run. Main thread; idempotent. */
void ts_reconcile(struct ts_agent *a);

/* Stop a job (reconcile.c): a suspended one is continued first. Main
 * thread. */
void ts_reconcile_stop(struct ts_agent *a, struct ts_ajob *j, int grace_seconds,
                       const char *reason);

#endif /* TS_AGENT_DAEMON_RECONCILE_H */
