/*
 * migrate.h - forward-only schema migrations compiled into the binary.
 *
 * migrations/NNNN_name.sql are embedded at build time and applied in order,
 * each once, each in its own transaction, under a PostgreSQL advisory lock so
 * that servers starting together do not race. Applied versions are recorded in
 * schema_migration (version, name, applied_at). A database carrying a version
 * this binary does not know is refused: it was migrated by a newer server.
 */
#ifndef TS_SERVER_STORE_MIGRATE_H
#define TS_SERVER_STORE_MIGRATE_H

#include "api/err.h"
#include "server/store/db.h"

/* Highest version compiled in. */
int ts_migrate_latest(void);

/* Bring the database up to ts_migrate_latest(). *applied (may be NULL) gets
 * how many migrations ran. TS_ERR_CONFIG when the database is newer. */
enum ts_err ts_migrate_run(struct ts_dbconn *c, int *applied, struct ts_error *err);

/* The database's current version (0 when none); TS_OK only if it equals
 * ts_migrate_latest(), TS_ERR_NOT_READY otherwise (used by /readyz). */
enum ts_err ts_migrate_check(struct ts_dbconn *c, int *current, struct ts_error *err);

#endif /* TS_SERVER_STORE_MIGRATE_H */
