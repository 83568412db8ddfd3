/*
 * listen.h - a PostgreSQL session that LISTENs to channels: the libpq side
 * of server/notify.c, which counts what arrives and wakes the waiters.
 */
#ifndef TS_SERVER_STORE_LISTEN_H
#define TS_SERVER_STORE_LISTEN_H

struct ts_store_listen;

/* Connect with conninfo and LISTEN to each of the n channels (names of
 * identifiers, not quoted); NULL after logging why. */
struct ts_store_listen *ts_store_listen_open(const char *conninfo, const char *const *channels,
                                             int n);
/* The socket to poll for input. */
int ts_store_listen_fd(const struct ts_store_listen *l);
/* Read what the socket holds; -1 when the connection is lost (logged:
 * close it and open another). */
int ts_store_listen_read(struct ts_store_listen *l);
/* Call on(channel, payload, ud) for every notification read so far. */
void ts_store_listen_drain(struct ts_store_listen *l,
                           void (*on)(const char *channel, const char *payload, void *ud),
                           void *ud);
void ts_store_listen_close(struct ts_store_listen *l); /* NULL is a no-op */

#endif /* TS_SERVER_STORE_LISTEN_H */
