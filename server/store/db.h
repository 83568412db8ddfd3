/*
 * db.h - the PostgreSQL connection pool and transactions (libpq).
 *
 * All SQL lives under server/store/; other code holds a struct ts_dbconn only
 * to pass it to store functions. Every statement uses $n parameters.
 * A connection found broken when acquired is reset before it is handed out.
 * No libpq type appears here: the server includes this header without
 * libpq's include folder; the store's statements are in db_pg.h.
 */
#ifndef TS_SERVER_STORE_DB_H
#define TS_SERVER_STORE_DB_H

#include <stdbool.h>
#include <stdint.h>

#include "api/err.h"

struct ts_db;     /* a pool; thread-safe */
struct ts_dbconn; /* one pooled connection, used by one thread at a time */

/* Open `size` connections to conninfo (a libpq URL or key=value string).
 * *out is new; free with ts_db_close. Fails with TS_ERR_DATABASE. */
enum ts_err ts_db_open(const char *conninfo, int size, struct ts_db **out, struct ts_error *err);
void ts_db_close(struct ts_db *db); /* NULL is a no-op; all connections must be released */

/* Borrow a connection, waiting up to timeout_ms for one to be free.
 * Returns NULL and fills err (TS_ERR_DATABASE) on timeout or when the
 * database cannot be reached. Give it back with ts_db_release. */
struct ts_dbconn *ts_db_acquire(struct ts_db *db, int timeout_ms, struct ts_error *err);
void ts_db_release(struct ts_db *db, struct ts_dbconn *c);

/* The pool's figures since it opened, for /metrics. */
struct ts_db_pool_stats {
    int size, in_use;
    uint64_t acquires; /* connections handed out */
    uint64_t waits;    /* acquires that found none free and waited */
    uint64_t timeouts; /* waits that ran out */
    double wait_seconds;
};
void ts_db_pool_stats(struct ts_db *db, struct ts_db_pool_stats *out);

/* The server process of c's session: it changes when the session does. */
int ts_dbconn_backend_pid(struct ts_dbconn *c);
/* pg_try_advisory_lock(key) for c's session: *got whether it holds it. */
enum ts_err ts_db_lock_try(struct ts_dbconn *c, const char *key, bool *got, struct ts_error *err);

enum ts_err ts_db_begin(struct ts_dbconn *c, struct ts_error *err);
enum ts_err ts_db_commit(struct ts_dbconn *c, struct ts_error *err);
void ts_db_rollback(struct ts_dbconn *c); /* no-op outside a transaction */

/* SELECT 1 on a pooled connection; TS_OK when the database answers. */
enum ts_err ts_db_ping(struct ts_db *db, struct ts_error *err);

#endif /* TS_SERVER_STORE_DB_H */
