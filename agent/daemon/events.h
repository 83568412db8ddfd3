/*
 * events.h - what the agent did to a job's memory (memory_wait,
 * memory_ended, swapped_out, swapped_in, swap_failed, suspended, resumed),
 * numbered per job attempt and sent in reports until one carrying them is
 * accepted (NodeReport.events; the server keeps each (job, attempt, seq)
 * once).
 *
 * Each event is appended to JOBDIR/events.log (one JSON object a line) when
 * it happens, and JOBDIR/events.acked holds the highest seq the server has:
 * a restarted agent numbers on from the log and sends what was not
 * accepted. Thread-safe (its own mutex); the broker adds, the ship thread
 * takes and acknowledges.
 */
#ifndef TS_AGENT_DAEMON_EVENTS_H
#define TS_AGENT_DAEMON_EVENTS_H

#include <jansson.h>
#include <stdint.h>

#include "api/arena.h"
#include "api/wire.h"

struct ts_events;

/* New; data_dir borrowed for the lifetime of the result. */
struct ts_events *ts_events_new(const char *data_dir);
void ts_events_free(struct ts_events *ev); /* NULL is a no-op */

/* Record an event on job (id, attempt); type is [a-z_]{1,32}, the message
 * is cut at TS_EVENT_MESSAGE_MAX characters. Also logged. */
void ts_events_add(struct ts_events *ev, int64_t id, int attempt, const char *type, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));
/* After a restart: queue again what a job's log holds beyond its acked seq. */
void ts_events_load(struct ts_events *ev, int64_t id, int attempt);
/* The events not yet accepted, oldest first, at most max, into *out (an
 * array in arena a, strings there too). The count; 0 when out of memory. */
size_t ts_events_pending(struct ts_events *ev, struct ts_arena *a, size_t max,
                         struct ts_report_event **out);
/* A report carrying these events (as ts_events_pending gave them,
 * borrowed) was accepted: drop them and record the acked seqs. */
void ts_events_acked(struct ts_events *ev, const struct ts_report_event *events, size_t n);

#endif /* TS_AGENT_DAEMON_EVENTS_H */
