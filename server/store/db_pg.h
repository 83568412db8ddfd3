/*
 * db_pg.h - the libpq side of the connection pool (db.h), for server/store/
 * alone: running a statement, the session's PGconn, SQLSTATEs mapped to
 * error codes. Only the store's target sees libpq's include folder, so a
 * file elsewhere that includes this header does not build.
 */
#ifndef TS_SERVER_STORE_DB_PG_H
#define TS_SERVER_STORE_DB_PG_H

#include <libpq-fe.h>

#include "api/err.h"
#include "server/store/db.h"

PGconn *ts_dbconn_pg(struct ts_dbconn *c); /* borrowed */

/*
 * Run one statement with text parameters (NULL = SQL NULL). On success *res
 * is a new PGresult (PQclear it) of status COMMAND_OK or TUPLES_OK. On failure
 * res is NULL and err is filled through ts_db_map_error.
 */
enum ts_err ts_db_exec(struct ts_dbconn *c, const char *sql, int nparams, const char *const *params,
                       PGresult **res, struct ts_error *err);
/* ts_db_exec inside a transaction: on failure the transaction is rolled
 * back before the error is returned. */
enum ts_err ts_db_exec_in_tx(struct ts_dbconn *c, const char *sql, int n, const char *const *params,
                             PGresult **res, struct ts_error *err);

/* The one place SQLSTATEs become error codes: 23505 (unique) -> ALREADY_EXISTS,
 * 23503 (foreign key) -> IN_USE or UNKNOWN_REFERENCE, 23514 (check) ->
 * INVALID_VALUE, 40001/40P01 -> CONFLICT, connection classes (08xxx) ->
 * DATABASE, anything else -> INTERNAL. The message is kept in err->detail. */
enum ts_err ts_db_map_error(const PGresult *res, PGconn *pg, struct ts_error *err);

#endif /* TS_SERVER_STORE_DB_PG_H */
