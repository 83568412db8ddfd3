/*
 * logship.h - sending job output to the server (logship.c).
 */
#ifndef TS_AGENT_DAEMON_LOGSHIP_H
#define TS_AGENT_DAEMON_LOGSHIP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "agent/daemon/conn.h"
#include "agent/daemon/jobtab.h"

/* Send what output there is of the jobs of jobtab (borrowed; its shared
 * fields under mu) over c to base + "/logs", until done or *stop; false
 * when the server could not be reached (try again after a backoff). */
bool ts_logship_send(pthread_mutex_t *mu, struct ts_jobtab *jobtab, const atomic_bool *stop,
                     struct ts_conn *c, const char *base);

#endif /* TS_AGENT_DAEMON_LOGSHIP_H */
