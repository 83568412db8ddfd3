/*
 * logship.h - sending job output to the server (logship.c).
 */
#ifndef TS_AGENT_DAEMON_LOGSHIP_H
#define TS_AGENT_DAEMON_LOGSHIP_H

#include <stdbool.h>

#include "agent/daemon/conn.h"

struct ts_agent;

/* Send what output there is over c to base + "/logs"; false when the
 * server could not be reached (try again after a backoff). */
bool ts_logship_send(struct ts_agent *a, struct ts_conn *c, const char *base);

#endif /* TS_AGENT_DAEMON_LOGSHIP_H */
