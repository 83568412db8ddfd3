/*
 * sdnotify.h - tell the service manager how a daemon is doing (READY=1,
 * STOPPING=1, STATUS=...), the protocol of sd_notify(3), without linking
 * libsystemd: one datagram to the unix socket $NOTIFY_SOCKET names.
 */
#ifndef TS_API_SDNOTIFY_H
#define TS_API_SDNOTIFY_H

/* Reads $NOTIFY_SOCKET once and removes it from the environment, so that
 * children (the embedded PostgreSQL, job processes) do not report as the
 * service. Call it first in main(), before any thread starts. */
void ts_sdnotify_init(void);

/* Sends STATE ("READY=1", "STATUS=waiting for the database", several
 * assignments separated by newlines). Returns 1 when sent, 0 when no
 * service manager listens (no $NOTIFY_SOCKET at init), -errno on failure.
 * Thread-safe; never blocks. */
int ts_sdnotify(const char *state);

#endif /* TS_API_SDNOTIFY_H */
