/*
 * db.c - the PostgreSQL connection pool, transactions, and the one place
 * where SQLSTATEs become Tessera error codes.
 *
 * The pool opens all its connections up front. A mutex guards a stack of free
 * connections; ts_db_acquire waits on a condition variable (CLOCK_MONOTONIC,
 * bounded by the caller's timeout). A connection that libpq reports broken is
 * reset outside the mutex before it is handed out, so one dead server does not
 * stall every thread. A connection released inside a transaction is rolled back
 * so the next borrower starts clean. ts_db_exec prepares each distinct
 * SELECT/INSERT/UPDATE/DELETE/WITH text once per connection (forgotten on
 * reset).
 */
#include "server/store/db.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/array.h"
#include "api/log.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"

/* Statements prepared on a connection, found by their text. */
#define MAX_PREPARED 64
struct prepared {
    uint64_t hash;
    char *sql; /* owned copy */
};

struct ts_dbconn {
    PGconn *pg; /* owned */
    struct prepared stmts[MAX_PREPARED];
    int nstmts;
};

struct ts_db {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled when a connection is released */
    int size;
    int nfree;
    struct ts_dbconn *conns;     /* owned array of size */
    struct ts_dbconn **freelist; /* owned stack of nfree borrowed pointers */
    struct ts_db_pool_stats st;  /* under mu */
};

/* Route server notices and warnings to our log instead of libpq's stderr. */
static void notice_receiver(void *arg, const PGresult *res)
{
    (void)arg;
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    if (msg == NULL)
        return;
    if (sev != NULL && strcmp(sev, "WARNING") == 0)
        ts_log_warn("database warning: %s", msg);
    else
        ts_log_debug("database notice: %s", msg);
}

/*
 * The reason in a libpq connection error, for a message in our style:
 * 'connection to server on socket "/x/.s.PGSQL.5432" failed: No such file or
 * directory' gives "no such file or directory"; "FATAL:  database "x" does not
 * exist" gives 'database "x" does not exist'.
 */
static void short_reason(const char *pgmsg, char *out, size_t len)
{
    char line[512];
    const char *s = pgmsg ? pgmsg : "";
    size_t n = strcspn(s, "\n");
    if (n >= sizeof(line))
        n = sizeof(line) - 1;
    memcpy(line, s, n);
    line[n] = '\0';
    const char *r = line;
    const char *failed = strstr(line, " failed: ");
    if (failed != NULL)
        r = failed + strlen(" failed: ");
    static const char *const prefixes[] = {"FATAL:  ", "ERROR:  ", "FATAL: ", "ERROR: "};
    for (size_t i = 0; i < TS_ARRAY_LEN(prefixes); i++) {
        if (strncmp(r, prefixes[i], strlen(prefixes[i])) == 0) {
            r += strlen(prefixes[i]);
            break;
        }
    }
    if (*r == '\0')
        r = "unknown error";
    size_t rl = strlen(r);
    if (rl >= len)
        rl = len - 1; /* truncation is fine: the whole text is in err->detail */
    memcpy(out, r, rl);
    out[rl] = '\0';
    /* libpq capitalizes strerror texts ("Connection refused"); we do not */
    if (out[0] >= 'A' && out[0] <= 'Z' && (out[1] < 'A' || out[1] > 'Z'))
        out[0] = (char)(out[0] - 'A' + 'a');
}

/* The whole libpq message on one line, for err->detail. */
static void one_line(const char *pgmsg, char *out, size_t len)
{
    snprintf(out, len, "%s", pgmsg ? pgmsg : "");
    size_t n = strlen(out);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
}

static enum ts_err connect_error(PGconn *pg, struct ts_error *err)
{
    char reason[256];
    const char *msg = pg ? PQerrorMessage(pg) : "out of memory";
    short_reason(msg, reason, sizeof(reason));
    ts_error_set(err, TS_ERR_DATABASE, "could not connect to database: %s", reason);
    if (err != NULL)
        one_line(msg, err->detail, sizeof(err->detail));
    ts_error_hint(err,
                  "check that PostgreSQL is running and that the connection settings are right");
    return TS_ERR_DATABASE;
}

static void pool_free(struct ts_db *db);
static void forget_prepared(struct ts_dbconn *c);

static PGconn *connect_one(const char *conninfo)
{
    /*
     * Entries before the expanded "dbname" are defaults that the caller's
     * conninfo may override: application_name=tessera shows in
     * pg_stat_activity unless the operator names the connection otherwise.
     */
    const char *const keys[] = {"application_name", "connect_timeout", "dbname", NULL};
    const char *const vals[] = {"tessera", "10", conninfo, NULL};
    PGconn *pg = PQconnectdbParams(keys, vals, 1);
    if (pg != NULL && PQstatus(pg) == CONNECTION_OK)
        PQsetNoticeReceiver(pg, notice_receiver, NULL);
    return pg;
}

enum ts_err ts_db_open(const char *conninfo, int size, struct ts_db **out, struct ts_error *err)
{
    enum ts_err e = TS_OK;
    struct ts_db *db = NULL;
    *out = NULL;
    if (size < 1)
        return ts_error_set(err, TS_ERR_CONFIG, "database pool size must be at least 1: %d", size);
    db = calloc(1, sizeof(*db));
    if (db == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    db->conns = calloc((size_t)size, sizeof(*db->conns));
    db->freelist = calloc((size_t)size, sizeof(*db->freelist));
    if (db->conns == NULL || db->freelist == NULL) {
        free(db->conns);
        free(db->freelist);
        free(db);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&db->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&db->cv, &ca);
    pthread_condattr_destroy(&ca);
    db->size = size;

    for (int i = 0; i < size; i++) {
        PGconn *pg = connect_one(conninfo ? conninfo : "");
        db->conns[i].pg = pg;
        if (pg == NULL || PQstatus(pg) != CONNECTION_OK) {
            e = connect_error(pg, err);
            goto out;
        }
        db->freelist[db->nfree++] = &db->conns[i];
    }
    ts_log_info("database pool opened size=%d db=%s", size, PQdb(db->conns[0].pg));
    *out = db;
out:
    if (e != TS_OK)
        pool_free(db);
    return e;
}

void ts_db_close(struct ts_db *db)
{
    if (db == NULL)
        return;
    if (db->nfree != db->size)
        ts_log_warn("database pool closed with %d of %d connections still borrowed",
                    db->size - db->nfree, db->size);
    pool_free(db);
}

static void pool_free(struct ts_db *db)
{
    for (int i = 0; i < db->size; i++)
        if (db->conns[i].pg != NULL) {
            forget_prepared(&db->conns[i]);
            PQfinish(db->conns[i].pg);
        }
    pthread_cond_destroy(&db->cv);
    pthread_mutex_destroy(&db->mu);
    free(db->conns);
    free(db->freelist);
    free(db);
}

/* A reset connection has lost its prepared statements. */
static void forget_prepared(struct ts_dbconn *c)
{
    for (int i = 0; i < c->nstmts; i++)
        free(c->stmts[i].sql);
    c->nstmts = 0;
}

struct ts_dbconn *ts_db_acquire(struct ts_db *db, int timeout_ms, struct ts_error *err)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (timeout_ms > 0) {
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }

    struct ts_dbconn *c = NULL;
    struct timespec w0, w1;
    pthread_mutex_lock(&db->mu);
    bool waited = db->nfree == 0;
    if (waited)
        clock_gettime(CLOCK_MONOTONIC, &w0);
    while (db->nfree == 0) {
        int rc = timeout_ms > 0 ? pthread_cond_timedwait(&db->cv, &db->mu, &deadline) : ETIMEDOUT;
        if (rc == ETIMEDOUT && db->nfree == 0)
            break;
    }
    if (db->nfree > 0)
        c = db->freelist[--db->nfree];
    if (waited) {
        clock_gettime(CLOCK_MONOTONIC, &w1);
        db->st.waits++;
        db->st.wait_seconds +=
            (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) / 1e9;
    }
    if (c != NULL)
        db->st.acquires++;
    else
        db->st.timeouts++;
    pthread_mutex_unlock(&db->mu);

    if (c == NULL) {
        ts_error_set(err, TS_ERR_DATABASE,
                     "could not get a database connection: all %d in use after %d ms", db->size,
                     timeout_ms > 0 ? timeout_ms : 0);
        ts_error_hint(err, "raise the database pool size or look for slow queries");
        return NULL;
    }
    if (PQstatus(c->pg) != CONNECTION_OK) {
        ts_log_warn("database connection broken, reconnecting");
        forget_prepared(c);
        PQreset(c->pg);
        if (PQstatus(c->pg) != CONNECTION_OK) {
            connect_error(c->pg, err);
            ts_db_release(db, c);
            return NULL;
        }
        ts_log_info("database connection reset");
    }
    return c;
}

void ts_db_release(struct ts_db *db, struct ts_dbconn *c)
{
    if (c == NULL)
        return;
    PGTransactionStatusType ts = PQtransactionStatus(c->pg);
    if (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR) {
        ts_log_warn("database connection released inside a transaction, rolling back");
        ts_db_rollback(c);
    }
    pthread_mutex_lock(&db->mu);
    db->freelist[db->nfree++] = c;
    pthread_cond_signal(&db->cv);
    pthread_mutex_unlock(&db->mu);
}

void ts_db_pool_stats(struct ts_db *db, struct ts_db_pool_stats *out)
{
    pthread_mutex_lock(&db->mu);
    *out = db->st;
    out->size = db->size;
    out->in_use = db->size - db->nfree;
    pthread_mutex_unlock(&db->mu);
}

PGconn *ts_dbconn_pg(struct ts_dbconn *c)
{
    return c->pg;
}

int ts_dbconn_backend_pid(struct ts_dbconn *c)
{
    return PQbackendPID(c->pg);
}

enum ts_err ts_db_lock_try(struct ts_dbconn *c, const char *key, bool *got, struct ts_error *err)
{
    PGresult *res = NULL;
    const char *p[] = {key};
    enum ts_err e =
        ts_db_exec(c, "SELECT pg_try_advisory_lock($1::bigint)", TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    *got = ts_row_bool(res, 0, 0);
    PQclear(res);
    return TS_OK;
}

/* Run a statement without parameters that returns no rows. */
static enum ts_err exec_command(struct ts_dbconn *c, const char *sql, PGresult **res,
                                struct ts_error *err)
{
    *res = PQexec(c->pg, sql);
    if (*res != NULL && PQresultStatus(*res) == PGRES_COMMAND_OK)
        return TS_OK;
    enum ts_err e = ts_db_map_error(*res, c->pg, err);
    PQclear(*res);
    *res = NULL;
    return e;
}

enum ts_err ts_db_begin(struct ts_dbconn *c, struct ts_error *err)
{
    if (PQtransactionStatus(c->pg) != PQTRANS_IDLE && PQstatus(c->pg) == CONNECTION_OK)
        return ts_error_set(err, TS_ERR_INTERNAL,
                            "cannot begin a transaction: one is already open");
    PGresult *res;
    enum ts_err e = exec_command(c, "BEGIN", &res, err);
    PQclear(res);
    return e;
}

enum ts_err ts_db_commit(struct ts_dbconn *c, struct ts_error *err)
{
    PGTransactionStatusType ts = PQtransactionStatus(c->pg);
    if (ts == PQTRANS_INERROR) {
        ts_db_rollback(c);
        return ts_error_set(err, TS_ERR_INTERNAL,
                            "cannot commit: the transaction was aborted by an earlier error");
    }
    if (ts == PQTRANS_IDLE)
        return ts_error_set(err, TS_ERR_INTERNAL, "cannot commit: no transaction is open");
    PGresult *res;
    enum ts_err e = exec_command(c, "COMMIT", &res, err);
    if (e == TS_OK && strcmp(PQcmdStatus(res), "COMMIT") != 0)
        e = ts_error_set(err, TS_ERR_INTERNAL, "could not commit: the server answered %s",
                         PQcmdStatus(res));
    PQclear(res);
    if (e != TS_OK)
        ts_db_rollback(c);
    return e;
}

void ts_db_rollback(struct ts_dbconn *c)
{
    PGTransactionStatusType ts = PQtransactionStatus(c->pg);
    if (ts != PQTRANS_INTRANS && ts != PQTRANS_INERROR)
        return;
    PGresult *res = PQexec(c->pg, "ROLLBACK");
    if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK) {
        char msg[256];
        one_line(PQerrorMessage(c->pg), msg, sizeof(msg));
        ts_log_warn("could not roll back transaction: %s", msg);
    }
    PQclear(res);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Only plannable statements are prepared; utility statements run as they are. */
static bool preparable(const char *sql)
{
    static const char *const kw[] = {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH"};
    for (size_t i = 0; i < TS_ARRAY_LEN(kw); i++)
        if (strncmp(sql, kw[i], strlen(kw[i])) == 0)
            return true;
    return false;
}

/*
 * The name of sql's prepared statement on c ("" for the unnamed one when it
 * cannot be kept). Preparing once per connection saves parsing and planning
 * on every later call: the submission path is three times cheaper this way.
 */
static const char *prepare(struct ts_dbconn *c, const char *sql, int nparams, char name[16],
                           PGresult **failed)
{
    *failed = NULL;
    if (!preparable(sql))
        return NULL;
    uint64_t h = fnv1a(sql);
    for (int i = 0; i < c->nstmts; i++) {
        if (c->stmts[i].hash == h && strcmp(c->stmts[i].sql, sql) == 0) {
            snprintf(name, 16, "ts_%d", i);
            return name;
        }
    }
    if (c->nstmts == MAX_PREPARED)
        return NULL;
    char *copy = strdup(sql);
    if (copy == NULL)
        return NULL;
    snprintf(name, 16, "ts_%d", c->nstmts);
    PGresult *r = PQprepare(c->pg, name, sql, nparams, NULL);
    if (r == NULL || PQresultStatus(r) != PGRES_COMMAND_OK) {
        free(copy);
        *failed = r;
        return NULL;
    }
    PQclear(r);
    c->stmts[c->nstmts].hash = h;
    c->stmts[c->nstmts].sql = copy;
    c->nstmts++;
    return name;
}

enum ts_err ts_db_exec(struct ts_dbconn *c, const char *sql, int nparams, const char *const *params,
                       PGresult **res, struct ts_error *err)
{
    char name[16];
    PGresult *r = NULL;
    const char *stmt = prepare(c, sql, nparams, name, &r);
    if (r == NULL)
        r = stmt ? PQexecPrepared(c->pg, stmt, nparams, params, NULL, NULL, 0)
                 : PQexecParams(c->pg, sql, nparams, NULL, params, NULL, NULL, 0);
    ExecStatusType st = r != NULL ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        *res = r;
        return TS_OK;
    }
    *res = NULL;
    enum ts_err e = ts_db_map_error(r, c->pg, err);
    PQclear(r);
    return e;
}

static bool state_is(const char *state, const char *want)
{
    return state != NULL && strcmp(state, want) == 0;
}

/* The connection itself failed or the server went away. */
static bool connection_lost(const char *state, PGconn *pg)
{
    if (pg != NULL && PQstatus(pg) == CONNECTION_BAD)
        return true;
    if (state == NULL)
        return false;
    if (strncmp(state, "08", 2) == 0)
        return !state_is(state, "08P01"); /* protocol violation: our bug, not the network */
    return state_is(state, "57P01") || state_is(state, "57P02") || state_is(state, "57P03") ||
           state_is(state, "53300");
}

enum ts_err ts_db_map_error(const PGresult *res, PGconn *pg, struct ts_error *err)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    const char *pgdetail = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
    const char *constraint = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;
    const char *table = res ? PQresultErrorField(res, PG_DIAG_TABLE_NAME) : NULL;
    enum ts_err code = TS_ERR_INTERNAL;

    if (connection_lost(state, pg)) {
        char reason[256];
        const char *msg = primary ? primary : (pg ? PQerrorMessage(pg) : "no connection");
        short_reason(msg, reason, sizeof(reason));
        ts_error_set(err, TS_ERR_DATABASE, "lost connection to database: %s", reason);
        if (err != NULL)
            one_line(pg ? PQerrorMessage(pg) : msg, err->detail, sizeof(err->detail));
        return TS_ERR_DATABASE;
    }
    if (state_is(state, "23505")) {
        code = TS_ERR_ALREADY_EXISTS;
    } else if (state_is(state, "23503")) {
        /*
         * Deleting a row that others still reference, or pointing at a row
         * that does not exist. Both come from ri_ReportViolation with the same
         * fields; only the message tells them apart. Our clusters run with
         * lc_messages C; a translated server falls back to UNKNOWN_REFERENCE.
         */
        code = (primary != NULL && strncmp(primary, "update or delete on table", 25) == 0)
                   ? TS_ERR_IN_USE
                   : TS_ERR_UNKNOWN_REFERENCE;
    } else if (state_is(state, "23514")) {
        code = TS_ERR_INVALID_VALUE;
    } else if (state_is(state, "40001") || state_is(state, "40P01")) {
        code = TS_ERR_CONFLICT;
    }

    char first[256];
    if (primary == NULL)
        short_reason(res ? PQresultErrorMessage(res) : (pg ? PQerrorMessage(pg) : ""), first,
                     sizeof(first));
    ts_error_set(err, code, "%s", primary ? primary : first);
    if (err != NULL) {
        snprintf(err->detail, sizeof(err->detail), "%s%s%s (sqlstate=%s%s%s%s%s)",
                 primary ? primary : first, pgdetail ? ": " : "", pgdetail ? pgdetail : "",
                 state ? state : "none", table ? " table=" : "", table ? table : "",
                 constraint ? " constraint=" : "", constraint ? constraint : "");
    }
    return code;
}

enum ts_err ts_db_ping(struct ts_db *db, struct ts_error *err)
{
    struct ts_dbconn *c = ts_db_acquire(db, 5000, err);
    if (c == NULL)
        return TS_ERR_DATABASE;
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c, "SELECT 1", 0, NULL, &res, err);
    PQclear(res);
    ts_db_release(db, c);
    return e;
}

enum ts_err ts_db_exec_in_tx(struct ts_dbconn *c, const char *sql, int n, const char *const *params,
                             PGresult **res, struct ts_error *err)
{
    enum ts_err e = ts_db_exec(c, sql, n, params, res, err);
    if (e != TS_OK)
        ts_db_rollback(c);
    return e;
}
