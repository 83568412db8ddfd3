/*
 * pgembed_int.h - what the files of the embedded PostgreSQL share (not for
 * use outside server/store/pgembed*.c): the cluster's paths and settings,
 * who runs it, and the helpers of pgembed_files.c, pgembed_run.c and
 * pgembed_lock.c. The public interface is pgembed.h.
 */
#ifndef TS_SERVER_STORE_PGEMBED_INT_H
#define TS_SERVER_STORE_PGEMBED_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "api/err.h"

#define PG_PORT "5432"
#define PG_USER "tessera"
#define PG_DBNAME "tessera"
#define PG_MIN_MAJOR 15
#define PG_LIBDIR "/usr/lib/postgresql"
#define SOCKET_NAME "/.s.PGSQL." PG_PORT
#define MAX_GROUPS 64
#define READY_WAIT_MS 60000 /* an adopted postmaster still starting up */
#define ZOMBIE_WAIT_MS 5000 /* a killed postmaster not yet reaped */
#define SHM_WAIT_MS 10000   /* orphaned backends of a killed postmaster */
#define KEEP_ALIVE_S 1      /* how often the keep-alive thread looks */

/* Who runs initdb, pg_ctl and so the cluster. */
struct runas {
    bool drop; /* we are root: switch to uid/gid before exec */
    uid_t uid;
    gid_t gid;
    gid_t groups[MAX_GROUPS];
    int ngroups;
    char name[64];
};

struct ts_pgembed {
    char dir[PATH_MAX];     /* DIR, absolute */
    char base[PATH_MAX];    /* DIR/pg */
    char data[PATH_MAX];    /* DIR/pg/data */
    char run[PATH_MAX];     /* DIR/pg/run: the socket folder */
    char logdir[PATH_MAX];  /* DIR/pg/log */
    char logfile[PATH_MAX]; /* DIR/pg/log/postgresql.log */
    char bindir[PATH_MAX];
    char conninfo[PATH_MAX + 128];
    char admin[PATH_MAX + 128]; /* conninfo of database "postgres" */
    struct runas ru;
    /* the keep-alive thread (ts_pgembed_keep_alive) */
    pthread_t keeper;
    bool keeping;
    bool stop; /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; signalled to stop */
};

/* What holds a PostgreSQL lock file (postmaster.pid, .s.PGSQL.5432.lock). */
enum holder { HOLDER_NONE, HOLDER_RUNNING, HOLDER_DEAD, HOLDER_ZOMBIE, HOLDER_OTHER };

/* ---- files (pgembed_files.c) ---- */

enum ts_err ts_pgembed_join(char *out, size_t len, const char *a, const char *b,
                            struct ts_error *err);
enum ts_err ts_pgembed_io_error(struct ts_error *err, const char *what, const char *path);
bool ts_pgembed_is_dir(const char *path);
bool ts_pgembed_file_exists(const char *dir, const char *name);
bool ts_pgembed_dir_is_empty(const char *path);
enum ts_err ts_pgembed_mkdir_p(const char *path, mode_t mode, struct ts_error *err);
enum ts_err ts_pgembed_own_dir(const struct ts_pgembed *pg, const char *path, struct ts_error *err);
enum ts_err ts_pgembed_write_file(const struct ts_pgembed *pg, const char *path, const char *text,
                                  struct ts_error *err);
enum ts_err ts_pgembed_append_file(const char *path, const char *text, struct ts_error *err);
bool ts_pgembed_file_contains(const char *path, const char *needle);
void ts_pgembed_log_tail(const char *path, char *out, size_t len);

/* ---- who runs PostgreSQL, its programs (pgembed_run.c) ---- */

enum ts_err ts_pgembed_choose_runas(struct ts_pgembed *pg, struct ts_error *err);
enum ts_err ts_pgembed_check_reachable(const struct ts_pgembed *pg, const char *dir,
                                       struct ts_error *err);
enum ts_err ts_pgembed_find_bindir(struct ts_pgembed *pg, const char *pg_bindir,
                                   struct ts_error *err);
void ts_pgembed_describe_status(int status, char *out, size_t len);
enum ts_err ts_pgembed_run_prog(const struct ts_pgembed *pg, char *const argv[],
                                const char *outfile, int *status, struct ts_error *err);

/* ---- the lock files of a cluster (pgembed_lock.c) ---- */

enum holder ts_pgembed_read_lock_pid(const char *path, long *pid);
enum holder ts_pgembed_lock_holder(const char *path, const char *data, long *pid);
int ts_pgembed_lock_shmid(const char *path);
bool ts_pgembed_shm_attached(int shmid);
void ts_pgembed_clear_stale_lock(const struct ts_pgembed *pg, const char *path);

#endif /* TS_SERVER_STORE_PGEMBED_INT_H */
