/*
 * pgtest.h - helpers of the store's integration tests: temporary folders,
 * running programs without a shell, looking at the processes of a private
 * PostgreSQL cluster, and one-value SQL queries.
 *
 * Every test that starts a cluster in DIR calls ts_pgtest_leftovers(DIR) at the
 * end: the processes working in DIR/pg/data must all be gone.
 */
#ifndef TS_TESTS_INTEGRATION_PGTEST_H
#define TS_TESTS_INTEGRATION_PGTEST_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

/* A new empty folder under $TMPDIR or /tmp, absolute; new string (free). */
char *ts_pgtest_tmpdir(void);
/* rm -rf DIR; kills (SIGKILL) any process still working in DIR/pg/data. */
void ts_pgtest_rmtree(const char *dir);

/* The folder of PostgreSQL's programs: $TS_PG_BINDIR, else the newest
 * /usr/lib/postgresql/N/bin; borrowed static string. */
const char *ts_pgtest_bindir(void);

/*
 * Run argv (argv[0] an absolute path) with stdout to out_path (or /dev/null
 * when NULL) and stderr to err_path (or stdout when NULL). Returns the exit
 * status, or -1 when it could not run or was killed by a signal.
 */
int ts_pgtest_run(const char *const argv[], const char *out_path, const char *err_path);

/* Whole file as a new NUL-terminated string (free), or NULL. */
char *ts_pgtest_read_file(const char *path);

/* Line `n` (1-based) of DIR/pg/data/postmaster.pid into buf; false if none. */
bool ts_pgtest_pidfile_line(const char *dir, int n, char *buf, size_t len);
/* The postmaster's pid from DIR/pg/data/postmaster.pid, or 0. */
long ts_pgtest_postmaster_pid(const char *dir);
/* The process exists and is not a zombie. */
bool ts_pgtest_alive(long pid);
/* Wait up to timeout_ms for pid to end (zombie counts as ended, or, when
 * reaped is true, only a reaped process does). */
bool ts_pgtest_wait_gone(long pid, int timeout_ms, bool reaped);
/* How many live processes work in DIR/pg/data (the cluster's processes). */
int ts_pgtest_cluster_processes(const char *dir);
/* ts_pgtest_cluster_processes(dir) after waiting up to 10 s for them to end. */
int ts_pgtest_leftovers(const char *dir);

/* The first value of the first row of sql on conn, into buf ("" when no
 * rows); false (message on stderr) on error. */
bool ts_pgtest_value(PGconn *conn, const char *sql, char *buf, size_t len);
/* Connect or fail the test's assertion with the libpq message on stderr. */
PGconn *ts_pgtest_connect(const char *conninfo);

#endif /* TS_TESTS_INTEGRATION_PGTEST_H */
