/*
 * notify.h - PostgreSQL LISTEN/NOTIFY for threads that wait on a change.
 *
 * One thread per server holds its own connection, LISTENs on the channels it
 * was given and counts notifications per (channel, key), where key is the
 * payload read as an integer (0 for an empty or non-numeric payload). A
 * waiter reads the count, does its work, and waits until the count moves or
 * a timeout passes, so no notification between the read and the wait is
 * lost. Channels the migrations notify on:
 *   tessera_node   payload: node id    (the node's desired state changed)
 *   tessera_sched  payload: ''         (anything the scheduler looks at)
 *   tessera_log    payload: job id     (new output stored for the job)
 * On a lost connection the thread reconnects and bumps every count, so
 * waiters re-read rather than miss what happened while it was away.
 */
#ifndef TS_SERVER_NOTIFY_H
#define TS_SERVER_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "api/err.h"

struct ts_notify;

/* Connect, LISTEN on channels[0..n), start the thread. */
enum ts_err ts_notify_start(const char *conninfo, const char *const *channels, int n,
                            struct ts_notify **out, struct ts_error *err);
void ts_notify_stop(struct ts_notify *nt); /* NULL is a no-op */

/* The count of notifications seen on (channel, key) so far. */
uint64_t ts_notify_seq(struct ts_notify *nt, const char *channel, int64_t key);

/* Wait until the count of (channel, key) differs from `seen` or timeout_ms
 * passes. True when it moved. */
bool ts_notify_wait(struct ts_notify *nt, const char *channel, int64_t key, uint64_t seen,
                    int timeout_ms);

/* How many times a waiter woke before its deadline to find its count
 * unmoved (another key's notification, or a slot two keys share). */
uint64_t ts_notify_spurious(struct ts_notify *nt);

#endif /* TS_SERVER_NOTIFY_H */
