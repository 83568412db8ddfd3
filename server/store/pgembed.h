/*
 * pgembed.h - the embedded default: a private PostgreSQL 15 in DIR/pg.
 *
 * Created with initdb on first start, listening only on a unix socket inside
 * DIR (no TCP), stopped when the server stops, and adopted (still running) or
 * restarted (stale postmaster.pid) cleanly after a crash. PostgreSQL refuses
 * to run as root: when the server runs as root, the cluster is owned by and
 * run as an unprivileged user (the "postgres" system user, else "nobody"),
 * and DIR/pg stays closed to everyone else.
 */
#ifndef TS_SERVER_STORE_PGEMBED_H
#define TS_SERVER_STORE_PGEMBED_H

#include "api/err.h"

struct ts_pgembed;

/*
 * Start (or adopt) the cluster in data_dir/pg. pg_bindir: folder with initdb,
 * pg_ctl and postgres; NULL or "" finds PostgreSQL 15 (then any newer) under
 * /usr/lib/postgresql/N/bin, then PATH. *out is new.
 */
enum ts_err ts_pgembed_start(const char *data_dir, const char *pg_bindir, struct ts_pgembed **out,
                             struct ts_error *err);
/* libpq conninfo for the cluster's database "tessera" (borrowed). */
const char *ts_pgembed_conninfo(const struct ts_pgembed *pg);
/*
 * Watch the cluster from a thread of its own: every second, when its
 * postmaster is gone (killed, crashed, ended by the kernel's out-of-memory
 * killer), start it again; the pool's connections reconnect on their next
 * use, and requests meanwhile get 503. Stopped by ts_pgembed_stop.
 */
enum ts_err ts_pgembed_keep_alive(struct ts_pgembed *pg, struct ts_error *err);
/* Stop watching, fast shutdown, then free; NULL is a no-op. */
void ts_pgembed_stop(struct ts_pgembed *pg);

#endif /* TS_SERVER_STORE_PGEMBED_H */
