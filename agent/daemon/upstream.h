/*
 * upstream.h - the threads that talk to the server: the poll thread and
 * the ship thread (upstream.c). Started and joined by agent.c.
 */
#ifndef TS_AGENT_DAEMON_UPSTREAM_H
#define TS_AGENT_DAEMON_UPSTREAM_H

#include <jansson.h>

#include "agent/daemon/agent.h"
#include "api/arena.h"
#include "api/wire.h"

/* Start the poll and ship threads. Returns 0 or -1. */
int ts_upstream_start(struct ts_agent *a);
/* Stop and join them (a->stop is set). */
void ts_upstream_join(struct ts_agent *a);
/* The NodeRegistration body (new). */
json_t *ts_upstream_registration(struct ts_agent *a);
/* A NodeReport, taking the samples since the last one: its arrays and
 * strings in arena ar. Caller holds mu. */
enum ts_err ts_upstream_report(struct ts_agent *a, struct ts_arena *ar, struct ts_node_report *out);

#endif /* TS_AGENT_DAEMON_UPSTREAM_H */
