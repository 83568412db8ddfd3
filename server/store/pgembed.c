/*
 * pgembed.c - the embedded default database: a private PostgreSQL cluster in
 * DIR/pg, reachable only through a unix socket in DIR/pg/run.
 *
 * Layout: DIR/pg/data (the cluster), DIR/pg/run (the socket), DIR/pg/log
 * (postgresql.log, initdb.log, pg_ctl.log), DIR/pg/start.lock (held while a
 * server starts or stops the cluster). DIR/pg and its folders are mode 0700,
 * owned by the user PostgreSQL runs as, so trust authentication on the socket
 * lets in only that user and root.
 *
 * initdb writes into DIR/pg/data.initdb, which is renamed to DIR/pg/data once
 * complete: a crash during initdb never leaves a half-made cluster behind.
 * Settings live in DIR/pg/data/tessera.conf, rewritten at every start and
 * included from postgresql.conf; ALTER SYSTEM still overrides them. Paths are
 * never passed with pg_ctl -o, which pg_ctl hands to a shell.
 *
 * Programs run through fork and execve with an argument vector (no shell of
 * ours), as the unprivileged user when we are root, with the locale forced to
 * C and every inherited descriptor above stderr closed, so the long-lived
 * postmaster holds none of the server's sockets.
 */
#include "server/store/pgembed.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/clock.h"
#include "api/files.h"
#include "api/log.h"

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

extern char **environ;

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

static enum ts_err join(char *out, size_t len, const char *a, const char *b, struct ts_error *err)
{
    int n = snprintf(out, len, "%s%s", a, b);
    if (n < 0 || (size_t)n >= len)
        return ts_error_set(err, TS_ERR_CONFIG, "path too long: %s%s", a, b);
    return TS_OK;
}

static enum ts_err io_error(struct ts_error *err, const char *what, const char *path)
{
    return ts_error_set(err, TS_ERR_IO, "could not %s \"%s\": %s", what, path, strerror(errno));
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool file_exists(const char *dir, const char *name)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return false;
    return access(path, F_OK) == 0;
}

static bool dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return true;
    bool empty = true;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            empty = false;
            break;
        }
    }
    closedir(d);
    return empty;
}

/* mkdir -p: missing parents 0755, the folder itself `mode`. */
static enum ts_err mkdir_p(const char *path, mode_t mode, struct ts_error *err)
{
    int rc = ts_files_mkdirs_parents(path, 0755, mode);
    if (rc == -ENAMETOOLONG)
        return ts_error_set(err, TS_ERR_CONFIG, "path too long: %s", path);
    if (rc == -ENOTDIR)
        return ts_error_set(err, TS_ERR_IO, "could not create folder \"%s\": not a folder", path);
    errno = -rc;
    return rc != 0 ? io_error(err, "create folder", path) : TS_OK;
}

/* A folder of ours under DIR/pg: exists, owned by the PostgreSQL user, 0700. */
static enum ts_err own_dir(const struct ts_pgembed *pg, const char *path, struct ts_error *err)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return io_error(err, "create folder", path);
    struct stat st;
    if (lstat(path, &st) != 0)
        return io_error(err, "stat", path);
    if (!S_ISDIR(st.st_mode))
        return ts_error_set(err, TS_ERR_IO, "\"%s\" is not a folder", path);
    if (pg->ru.drop && (st.st_uid != pg->ru.uid || st.st_gid != pg->ru.gid) &&
        chown(path, pg->ru.uid, pg->ru.gid) != 0)
        return io_error(err, "change the owner of", path);
    if ((st.st_mode & 07777) != 0700 && chmod(path, 0700) != 0)
        return io_error(err, "change the mode of", path);
    return TS_OK;
}

/*
 * Write a whole file atomically (temporary file, fsync, rename), owned by the
 * PostgreSQL user so that the cluster can read it.
 */
static enum ts_err write_file(const struct ts_pgembed *pg, const char *path, const char *text,
                              struct ts_error *err)
{
    char tmp[PATH_MAX];
    enum ts_err e = join(tmp, sizeof(tmp), path, ".tmp", err);
    if (e != TS_OK)
        return e;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return io_error(err, "create", tmp);
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            e = io_error(err, "write", tmp);
            goto out;
        }
        off += (size_t)w;
    }
    if (pg->ru.drop && fchown(fd, pg->ru.uid, pg->ru.gid) != 0) {
        e = io_error(err, "change the owner of", tmp);
        goto out;
    }
    if (fsync(fd) != 0) {
        e = io_error(err, "fsync", tmp);
        goto out;
    }
    if (rename(tmp, path) != 0)
        e = io_error(err, "rename", tmp);
out:
    close(fd);
    if (e != TS_OK)
        unlink(tmp);
    return e;
}

static enum ts_err append_file(const char *path, const char *text, struct ts_error *err)
{
    FILE *f = fopen(path, "ae");
    if (f == NULL)
        return io_error(err, "open", path);
    bool ok = fputs(text, f) >= 0;
    ok = fflush(f) == 0 && ok;
    ok = fsync(fileno(f)) == 0 && ok;
    if (fclose(f) != 0 || !ok)
        return io_error(err, "write", path);
    return TS_OK;
}

static bool file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, needle) == line;
    fclose(f);
    return found;
}

/* The last lines of a log file that fit in out, joined with " | ". */
static void log_tail(const char *path, char *out, size_t len)
{
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[4096];
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    char *lines[128];
    int nl = 0;
    char *save = NULL;
    for (char *l = strtok_r(buf, "\r\n", &save); l != NULL; l = strtok_r(NULL, "\r\n", &save)) {
        if (nl == (int)(sizeof(lines) / sizeof(lines[0]))) {
            memmove(lines, lines + 1, (size_t)(nl - 1) * sizeof(lines[0]));
            nl--;
        }
        lines[nl++] = l;
    }
    if (nl == 0)
        return;
    int first = nl;
    size_t total = 0;
    while (first > 0) {
        size_t add = strlen(lines[first - 1]) + (first < nl ? 3 : 0);
        if (total + add + 1 > len)
            break;
        total += add;
        first--;
    }
    if (first == nl) { /* even the last line is too long: keep its end */
        size_t l = strlen(lines[nl - 1]);
        snprintf(out, len, "%s", lines[nl - 1] + (l - (len - 1)));
        return;
    }
    size_t o = 0;
    for (int i = first; i < nl; i++)
        o += (size_t)snprintf(out + o, len - o, "%s%s", i > first ? " | " : "", lines[i]);
}

/* ---- who runs PostgreSQL ---- */

static enum ts_err runas_from_pw(struct runas *ru, const struct passwd *pw, struct ts_error *err)
{
    ru->uid = pw->pw_uid;
    ru->gid = pw->pw_gid;
    snprintf(ru->name, sizeof(ru->name), "%s", pw->pw_name);
    int n = MAX_GROUPS;
    if (getgrouplist(pw->pw_name, pw->pw_gid, ru->groups, &n) < 0)
        n = MAX_GROUPS; /* more groups than we keep: the first ones will do */
    ru->ngroups = n;
    if (ru->uid == 0)
        return ts_error_set(err, TS_ERR_CONFIG,
                            "user \"%s\" is root: PostgreSQL cannot run as root", pw->pw_name);
    return TS_OK;
}

static enum ts_err choose_runas(struct ts_pgembed *pg, struct ts_error *err)
{
    struct runas *ru = &pg->ru;
    char buf[16384];
    struct passwd pwd, *pw = NULL;
    if (geteuid() != 0) {
        ru->drop = false;
        ru->uid = geteuid();
        ru->gid = getegid();
        if (getpwuid_r(ru->uid, &pwd, buf, sizeof(buf), &pw) == 0 && pw != NULL)
            snprintf(ru->name, sizeof(ru->name), "%s", pw->pw_name);
        else
            snprintf(ru->name, sizeof(ru->name), "%u", (unsigned)ru->uid);
        return TS_OK;
    }
    ru->drop = true;
    struct stat st;
    if (stat(pg->data, &st) == 0 && file_exists(pg->data, "PG_VERSION")) {
        /* an existing cluster keeps running as the user that owns it */
        if (st.st_uid == 0) {
            ts_error_set(err, TS_ERR_CONFIG, "PostgreSQL data folder \"%s\" is owned by root",
                         pg->data);
            ts_error_hint(err, "PostgreSQL refuses to run as root: chown -R postgres: %s",
                          pg->base);
            return TS_ERR_CONFIG;
        }
        if (getpwuid_r(st.st_uid, &pwd, buf, sizeof(buf), &pw) == 0 && pw != NULL)
            return runas_from_pw(ru, pw, err);
        ru->uid = st.st_uid;
        ru->gid = st.st_gid;
        ru->ngroups = 1;
        ru->groups[0] = st.st_gid;
        snprintf(ru->name, sizeof(ru->name), "%u", (unsigned)st.st_uid);
        return TS_OK;
    }
    static const char *const candidates[] = {"postgres", "nobody"};
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        if (getpwnam_r(candidates[i], &pwd, buf, sizeof(buf), &pw) == 0 && pw != NULL)
            return runas_from_pw(ru, pw, err);
    }
    ts_error_set(err, TS_ERR_CONFIG,
                 "cannot run PostgreSQL as root and found no \"postgres\" or \"nobody\" user");
    ts_error_hint(err, "create a system user named postgres, or run tessera-server as a user");
    return TS_ERR_CONFIG;
}

static bool can_traverse(const struct runas *ru, const struct stat *st)
{
    if (st->st_uid == ru->uid)
        return (st->st_mode & S_IXUSR) != 0;
    for (int i = 0; i < ru->ngroups; i++)
        if (st->st_gid == ru->groups[i])
            return (st->st_mode & S_IXGRP) != 0;
    return (st->st_mode & S_IXOTH) != 0;
}

/*
 * The PostgreSQL user must reach DIR/pg: DIR and every folder above it must
 * let it pass. DIR itself is ours to open (0700 -> 0711); those above are not.
 */
static enum ts_err check_reachable(const struct ts_pgembed *pg, const char *dir,
                                   struct ts_error *err)
{
    if (!pg->ru.drop)
        return TS_OK;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s", dir);
    size_t len = strlen(path);
    for (size_t i = 1; i <= len; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        char saved = path[i];
        path[i] = '\0';
        struct stat st;
        if (stat(path, &st) != 0)
            return io_error(err, "stat", path);
        if (!can_traverse(&pg->ru, &st)) {
            if (i < len) {
                ts_error_set(err, TS_ERR_CONFIG,
                             "PostgreSQL user \"%s\" cannot reach \"%s\": \"%s\" is closed to it "
                             "(mode %04o)",
                             pg->ru.name, dir, path, (unsigned)(st.st_mode & 07777));
                ts_error_hint(err, "choose a data folder that user can reach, e.g. under /var/lib");
                return TS_ERR_CONFIG;
            }
            mode_t mode = (st.st_mode & 07777) | S_IXGRP | S_IXOTH;
            if (chmod(path, mode) != 0)
                return io_error(err, "change the mode of", path);
            ts_log_info("made data folder traversable for PostgreSQL path=%s mode=%04o user=%s",
                        path, (unsigned)mode, pg->ru.name);
        }
        path[i] = saved;
    }
    return TS_OK;
}

/* ---- finding the programs ---- */

static bool has_tools(const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s/pg_ctl", dir) >= (int)sizeof(p) || access(p, X_OK) != 0)
        return false;
    if (snprintf(p, sizeof(p), "%s/initdb", dir) >= (int)sizeof(p) || access(p, X_OK) != 0)
        return false;
    return true;
}

static bool try_bindir(char *out, size_t len, const char *dir)
{
    if (!has_tools(dir))
        return false;
    snprintf(out, len, "%s", dir);
    return true;
}

static enum ts_err find_bindir(struct ts_pgembed *pg, const char *pg_bindir, struct ts_error *err)
{
    char dir[PATH_MAX];
    if (pg_bindir != NULL && pg_bindir[0] != '\0') {
        if (try_bindir(pg->bindir, sizeof(pg->bindir), pg_bindir))
            return TS_OK;
        ts_error_set(err, TS_ERR_CONFIG, "PostgreSQL programs not found in \"%s\"", pg_bindir);
        ts_error_hint(err, "the folder must hold initdb, pg_ctl and postgres");
        return TS_ERR_CONFIG;
    }
    /* an existing cluster wants the major version that made it */
    char vpath[PATH_MAX];
    if (snprintf(vpath, sizeof(vpath), "%s/PG_VERSION", pg->data) < (int)sizeof(vpath)) {
        FILE *f = fopen(vpath, "re");
        int major = 0;
        if (f != NULL) {
            if (fscanf(f, "%d", &major) != 1)
                major = 0;
            fclose(f);
        }
        snprintf(dir, sizeof(dir), PG_LIBDIR "/%d/bin", major);
        if (major > 0 && try_bindir(pg->bindir, sizeof(pg->bindir), dir))
            return TS_OK;
    }
    snprintf(dir, sizeof(dir), PG_LIBDIR "/%d/bin", PG_MIN_MAJOR);
    if (try_bindir(pg->bindir, sizeof(pg->bindir), dir))
        return TS_OK;
    DIR *d = opendir(PG_LIBDIR);
    int best = 0;
    if (d != NULL) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            char *end;
            long n = strtol(de->d_name, &end, 10);
            if (*end != '\0' || n < PG_MIN_MAJOR || n > 1000 || n <= best)
                continue;
            snprintf(dir, sizeof(dir), PG_LIBDIR "/%ld/bin", n);
            if (has_tools(dir))
                best = (int)n;
        }
        closedir(d);
    }
    if (best > 0) {
        snprintf(dir, sizeof(dir), PG_LIBDIR "/%d/bin", best);
        return try_bindir(pg->bindir, sizeof(pg->bindir), dir) ? TS_OK : TS_ERR_CONFIG;
    }
    const char *path = getenv("PATH");
    while (path != NULL && *path) {
        size_t n = strcspn(path, ":");
        if (n > 0 && n < sizeof(dir)) {
            memcpy(dir, path, n);
            dir[n] = '\0';
            if (try_bindir(pg->bindir, sizeof(pg->bindir), dir))
                return TS_OK;
        }
        path += n + (path[n] == ':');
    }
    ts_error_set(err, TS_ERR_CONFIG,
                 "could not find PostgreSQL: no initdb and pg_ctl in " PG_LIBDIR
                 "/N/bin (N >= %d) or PATH",
                 PG_MIN_MAJOR);
    ts_error_hint(err,
                  "install PostgreSQL %d or newer (Debian: apt-get install postgresql-%d), "
                  "or name the folder of its programs",
                  PG_MIN_MAJOR, PG_MIN_MAJOR);
    return TS_ERR_CONFIG;
}

/* ---- running programs ---- */

/* The child side of run_prog: only async-signal-safe calls until execve. */
static void child_exec(const struct runas *ru, const char *cwd, const char *outfile,
                       char *const argv[], char *const envp[], long maxfd)
{
    static const char fail_user[] = "tessera: could not switch to the PostgreSQL user\n";
    static const char fail_exec[] = "tessera: could not run the program\n";
    /* a session of its own: a Ctrl-C at the server's terminal must not reach
     * PostgreSQL; the server stops it in order when it stops */
    setsid();
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    static const int sigs[] = {SIGPIPE, SIGCHLD, SIGINT,  SIGTERM,
                               SIGHUP,  SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &dfl, NULL);

    int out = -1;
    if (ru->drop && (setgroups((size_t)ru->ngroups, ru->groups) != 0 || setgid(ru->gid) != 0 ||
                     setuid(ru->uid) != 0)) {
        out = open(outfile, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (out >= 0 && write(out, fail_user, sizeof(fail_user) - 1) < 0)
            _exit(126);
        _exit(126);
    }
    if (chdir(cwd) != 0)
        _exit(126);
    out = open(outfile, O_WRONLY | O_CREAT | O_APPEND, 0600);
    int in = open("/dev/null", O_RDONLY);
    if (out < 0 || in < 0)
        _exit(126);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
        _exit(126);
    if (close_range(3, ~0U, 0) != 0)
        for (long fd = 3; fd < maxfd; fd++)
            close((int)fd);
    execve(argv[0], argv, envp);
    if (write(2, fail_exec, sizeof(fail_exec) - 1) < 0)
        _exit(127);
    _exit(127);
}

/* Our environment without PG*, LC_* and LANG*, plus LC_ALL=C. New array of borrowed strings. */
static char **child_env(void)
{
    size_t n = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    char **env = calloc(n + 2, sizeof(*env));
    if (env == NULL)
        return NULL;
    size_t k = 0;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "PG", 2) == 0 || strncmp(*e, "LC_", 3) == 0 || strncmp(*e, "LANG", 4) == 0)
            continue;
        env[k++] = *e;
    }
    env[k++] = "LC_ALL=C";
    env[k] = NULL;
    return env;
}

static void describe_status(int status, char *out, size_t len)
{
    if (WIFEXITED(status))
        snprintf(out, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, len, "was terminated by signal %d", WTERMSIG(status));
    else
        snprintf(out, len, "ended with wait status %d", status);
}

/*
 * Run argv[0] (an absolute path) as the PostgreSQL user in DIR/pg, output
 * appended to outfile. *status gets the wait status; TS_OK means it ran, not
 * that it succeeded.
 */
static enum ts_err run_prog(const struct ts_pgembed *pg, char *const argv[], const char *outfile,
                            int *status, struct ts_error *err)
{
    char **env = child_env();
    if (env == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    long maxfd = sysconf(_SC_OPEN_MAX);
    if (maxfd < 0 || maxfd > 65536)
        maxfd = 65536;
    ts_log_debug("running program=%s user=%s", argv[0], pg->ru.name);
    pid_t pid = fork();
    if (pid < 0) {
        free(env);
        return ts_error_set(err, TS_ERR_INTERNAL, "could not fork to run %s: %s", argv[0],
                            strerror(errno));
    }
    if (pid == 0)
        child_exec(&pg->ru, pg->base, outfile, argv, env, maxfd);
    free(env);
    while (waitpid(pid, status, 0) < 0) {
        if (errno != EINTR)
            return ts_error_set(err, TS_ERR_INTERNAL, "could not wait for %s: %s", argv[0],
                                strerror(errno));
    }
    return TS_OK;
}

/* ---- the lock files of a cluster ---- */

/* pid in the first line of a lock file; 0 when the file is there but unreadable or empty. */
static enum holder read_lock_pid(const char *path, long *pid)
{
    *pid = 0;
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return errno == ENOENT ? HOLDER_NONE : HOLDER_RUNNING; /* unreadable: never remove it */
    if (fscanf(f, "%ld", pid) != 1)
        *pid = 0;
    fclose(f);
    return HOLDER_RUNNING; /* refined by lock_holder */
}

/* Process state letter from /proc/PID/stat ('R', 'S', 'Z', ...), or 0. */
static char proc_state(long pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return (p != NULL && p[1] == ' ') ? p[2] : 0;
}

/*
 * Who holds the lock file: nobody (no file), a live postmaster of this data
 * folder, a dead one (postgres copes), a killed one not yet reaped (postgres
 * would take it for alive), or an unrelated process that reused the pid.
 */
static enum holder lock_holder(const char *path, const char *data, long *pid)
{
    enum holder h = read_lock_pid(path, pid);
    if (h != HOLDER_RUNNING)
        return h;
    if (*pid <= 0)
        return HOLDER_OTHER; /* empty or torn: postgres refuses those */
    char real[PATH_MAX];
    if (realpath(data, real) == NULL)
        snprintf(real, sizeof(real), "%s", data);
    if (kill((pid_t)*pid, 0) != 0 && errno == ESRCH)
        return HOLDER_DEAD;
    char st = proc_state(*pid);
    if (st == 'Z' || st == 'X')
        return HOLDER_ZOMBIE;
    /* a postmaster works in its data folder */
    char link[64], cwd[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/%ld/cwd", *pid);
    ssize_t n = readlink(link, cwd, sizeof(cwd) - 1);
    if (n > 0) {
        cwd[n] = '\0';
        return strcmp(cwd, real) == 0 ? HOLDER_RUNNING : HOLDER_OTHER;
    }
    char comm[64] = "";
    snprintf(link, sizeof(link), "/proc/%ld/comm", *pid);
    FILE *f = fopen(link, "re");
    if (f == NULL)
        return HOLDER_RUNNING; /* no /proc: believe the lock file */
    if (fgets(comm, sizeof(comm), f) == NULL)
        comm[0] = '\0';
    fclose(f);
    return strncmp(comm, "postgres", 8) == 0 ? HOLDER_RUNNING : HOLDER_OTHER;
}

/* The SysV shared memory id in postmaster.pid (line 7: key and id), or -1. */
static int lock_shmid(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    char line[256];
    int shmid = -1;
    for (int i = 1; fgets(line, sizeof(line), f) != NULL; i++) {
        if (i == 7) {
            unsigned long key;
            if (sscanf(line, "%lu %d", &key, &shmid) != 2)
                shmid = -1;
            break;
        }
    }
    fclose(f);
    return shmid;
}

static bool shm_attached(int shmid)
{
    struct shmid_ds ds;
    if (shmid < 0 || shmctl(shmid, IPC_STAT, &ds) != 0)
        return false;
    return ds.shm_nattch > 0;
}

/*
 * Make a stale lock file harmless before pg_ctl start. A dead pid is left to
 * postgres, which takes the file over itself. A killed postmaster that is not
 * yet reaped (a zombie; some init processes reap late) or a pid that now
 * belongs to another program would make postgres refuse to start: after a
 * grace period we remove those files ourselves.
 */
static void clear_stale_lock(const struct ts_pgembed *pg, const char *path)
{
    long pid;
    enum holder h = lock_holder(path, pg->data, &pid);
    long deadline = ts_now_ms() + ZOMBIE_WAIT_MS;
    while (h == HOLDER_ZOMBIE && ts_now_ms() < deadline) {
        ts_sleep_ms(100);
        h = lock_holder(path, pg->data, &pid);
    }
    if (h == HOLDER_DEAD) {
        ts_log_info("found stale PostgreSQL lock file of a dead process path=%s pid=%ld", path,
                    pid);
    } else if (h == HOLDER_ZOMBIE || h == HOLDER_OTHER) {
        if (unlink(path) == 0)
            ts_log_warn("removed stale PostgreSQL lock file path=%s pid=%ld holder=%s", path, pid,
                        h == HOLDER_ZOMBIE ? "unreaped" : "other-process");
    }
}

/* ---- the cluster ---- */

/* Quote a libpq conninfo value. */
static void conn_quote(char *out, size_t len, const char *v)
{
    size_t o = 0;
    if (len < 3)
        return;
    out[o++] = '\'';
    for (const char *p = v; *p && o + 3 < len; p++) {
        if (*p == '\'' || *p == '\\')
            out[o++] = '\\';
        out[o++] = *p;
    }
    out[o++] = '\'';
    out[o] = '\0';
}

static enum ts_err tool_error(struct ts_error *err, const char *what, const char *prog, int status,
                              const char *logpath)
{
    char how[64];
    describe_status(status, how, sizeof(how));
    ts_error_set(err, TS_ERR_DATABASE, "could not %s: %s %s", what, prog, how);
    if (err != NULL)
        log_tail(logpath, err->detail, sizeof(err->detail));
    ts_error_hint(err, "see %s", logpath);
    ts_log_error("could not %s: %s %s log=%s", what, prog, how, logpath);
    return TS_ERR_DATABASE;
}

static enum ts_err pg_ctl(const struct ts_pgembed *pg, const char *action, int *status,
                          struct ts_error *err)
{
    char prog[PATH_MAX + 16], outlog[PATH_MAX + 16];
    snprintf(prog, sizeof(prog), "%s/pg_ctl", pg->bindir);
    snprintf(outlog, sizeof(outlog), "%s/pg_ctl.log", pg->logdir);
    char *start[] = {
        prog, "start", "-w", "-t", "60", "-D", (char *)pg->data, "-l", (char *)pg->logfile, NULL};
    char *stop[] = {prog, "stop", "-w", "-t", "60", "-D", (char *)pg->data, "-m", "fast", NULL};
    return run_prog(pg, strcmp(action, "start") == 0 ? start : stop, outlog, status, err);
}

static const char TESSERA_CONF_HEAD[] =
    "# Written by tessera-server at every start of its embedded PostgreSQL:\n"
    "# edits here are lost. Use ALTER SYSTEM (postgresql.auto.conf) to override.\n"
    "listen_addresses = ''\n"
    "port = " PG_PORT "\n"
    "unix_socket_permissions = 0700\n"
    "max_connections = 100\n"
    "shared_buffers = 128MB\n"
    "fsync = on\n"
    "synchronous_commit = on\n"
    "full_page_writes = on\n"
    "logging_collector = off\n"
    "log_destination = 'stderr'\n"
    "log_line_prefix = '%m [%p] '\n"
    "log_timezone = 'UTC'\n"
    "timezone = 'UTC'\n"
    "lc_messages = 'C'\n";

static enum ts_err write_settings(const struct ts_pgembed *pg, const char *datadir,
                                  struct ts_error *err)
{
    char text[sizeof(TESSERA_CONF_HEAD) + 2 * PATH_MAX + 64];
    size_t o =
        (size_t)snprintf(text, sizeof(text), "%sunix_socket_directories = '", TESSERA_CONF_HEAD);
    for (const char *p = pg->run; *p && o + 4 < sizeof(text); p++) {
        if (*p == '\'')
            text[o++] = '\'';
        text[o++] = *p;
    }
    snprintf(text + o, sizeof(text) - o, "'\n");
    char path[PATH_MAX];
    enum ts_err e = join(path, sizeof(path), datadir, "/tessera.conf", err);
    if (e != TS_OK)
        return e;
    e = write_file(pg, path, text, err);
    if (e != TS_OK)
        return e;
    /* tessera.conf must exist: "include", not include_if_exists */
    e = join(path, sizeof(path), datadir, "/postgresql.conf", err);
    if (e == TS_OK && !file_contains(path, "include = 'tessera.conf'"))
        e = append_file(path,
                        "\n# tessera-server settings, rewritten at every start\n"
                        "include = 'tessera.conf'\n",
                        err);
    return e;
}

/* initdb into DIR/pg/data.initdb, configure, then rename to DIR/pg/data. */
static enum ts_err init_cluster(const struct ts_pgembed *pg, struct ts_error *err)
{
    char tmp[PATH_MAX], path[PATH_MAX], prog[PATH_MAX], outlog[PATH_MAX];
    enum ts_err e = join(tmp, sizeof(tmp), pg->base, "/data.initdb", err);
    if (e == TS_OK)
        e = join(prog, sizeof(prog), pg->bindir, "/initdb", err);
    if (e == TS_OK)
        e = join(outlog, sizeof(outlog), pg->logdir, "/initdb.log", err);
    if (e != TS_OK)
        return e;
    if (access(tmp, F_OK) == 0) {
        ts_log_warn("removing an unfinished initdb path=%s", tmp);
        if (ts_files_remove_tree(tmp) != 0)
            return io_error(err, "remove", tmp);
    }
    char *argv[] = {prog,           "-D", tmp,    "-U",         PG_USER,
                    "--auth=trust", "-E", "UTF8", "--locale=C", NULL};
    int status = 0;
    ts_log_info("initializing PostgreSQL cluster data=%s user=%s", pg->data, pg->ru.name);
    e = run_prog(pg, argv, outlog, &status, err);
    if (e != TS_OK)
        return e;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ts_files_remove_tree(tmp);
        return tool_error(err, "initialize PostgreSQL", "initdb", status, outlog);
    }
    /* only the socket, which only the PostgreSQL user and root can reach */
    e = join(path, sizeof(path), tmp, "/pg_hba.conf", err);
    if (e == TS_OK)
        e = write_file(pg, path,
                       "# Written by tessera-server: local socket connections only. The socket\n"
                       "# folder is closed to everyone but the PostgreSQL user (and root).\n"
                       "# TYPE  DATABASE  USER  METHOD\n"
                       "local   all       all   trust\n",
                       err);
    if (e == TS_OK)
        e = write_settings(pg, tmp, err);
    if (e != TS_OK)
        return e;
    if (is_dir(pg->data) && rmdir(pg->data) != 0)
        return io_error(err, "replace", pg->data);
    if (rename(tmp, pg->data) != 0)
        return io_error(err, "rename", tmp);
    int dfd = open(pg->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd) != 0)
            ts_log_warn("could not fsync folder path=%s", pg->base);
        close(dfd);
    }
    return TS_OK;
}

/* Wait until a running postmaster answers; false when it went away or stays silent. */
static bool wait_ready(const struct ts_pgembed *pg, long timeout_ms, bool *gone)
{
    char pidfile[PATH_MAX + 32];
    snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid", pg->data);
    long deadline = ts_now_ms() + timeout_ms;
    *gone = false;
    for (;;) {
        if (PQping(pg->admin) == PQPING_OK)
            return true;
        long pid;
        if (lock_holder(pidfile, pg->data, &pid) != HOLDER_RUNNING) {
            *gone = true;
            return false;
        }
        if (ts_now_ms() >= deadline)
            return false;
        ts_sleep_ms(100);
    }
}

static enum ts_err ensure_database(const struct ts_pgembed *pg, struct ts_error *err)
{
    enum ts_err e = TS_OK;
    PGresult *res = NULL;
    PGconn *c = PQconnectdb(pg->admin);
    if (c == NULL || PQstatus(c) != CONNECTION_OK) {
        ts_error_set(err, TS_ERR_DATABASE, "could not connect to the embedded PostgreSQL");
        if (err != NULL && c != NULL)
            snprintf(err->detail, sizeof(err->detail), "%s", PQerrorMessage(c));
        e = TS_ERR_DATABASE;
        goto out;
    }
    res = PQexec(c, "SELECT 1 FROM pg_database WHERE datname = '" PG_DBNAME "'");
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        e = ts_error_set(err, TS_ERR_DATABASE, "could not list databases: %s",
                         PQresultErrorMessage(res));
        goto out;
    }
    if (PQntuples(res) == 1)
        goto out;
    PQclear(res);
    res = PQexec(c, "CREATE DATABASE " PG_DBNAME);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        if (state != NULL && strcmp(state, "42P04") == 0) /* created meanwhile */
            goto out;
        e = ts_error_set(err, TS_ERR_DATABASE, "could not create database \"" PG_DBNAME "\"");
        if (err != NULL)
            snprintf(err->detail, sizeof(err->detail), "%s", PQresultErrorMessage(res));
        goto out;
    }
    ts_log_info("created database name=" PG_DBNAME);
out:
    PQclear(res);
    PQfinish(c);
    return e;
}

/* Characters pg_ctl would hand to its shell inside double quotes. */
static bool path_is_safe(const char *p)
{
    for (; *p; p++)
        if (*p == '"' || *p == '$' || *p == '`' || *p == '\\' || (unsigned char)*p < 0x20 ||
            *p == 0x7f)
            return false;
    return true;
}

static enum ts_err set_paths(struct ts_pgembed *pg, const char *data_dir, struct ts_error *err)
{
    char abs[PATH_MAX];
    enum ts_err e = mkdir_p(data_dir, geteuid() == 0 ? 0711 : 0700, err);
    if (e != TS_OK)
        return e;
    if (realpath(data_dir, abs) == NULL)
        return io_error(err, "resolve", data_dir);
    if (!path_is_safe(abs)) {
        ts_error_set(err, TS_ERR_CONFIG,
                     "data folder path cannot hold \", $, `, \\ or control characters: %s", abs);
        ts_error_hint(err, "pg_ctl passes the path through a shell; choose a plainer path");
        return TS_ERR_CONFIG;
    }
    const size_t sun_max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
    size_t socklen = strlen(abs) + strlen("/pg/run" SOCKET_NAME);
    if (socklen > sun_max) {
        ts_error_set(err, TS_ERR_CONFIG,
                     "data folder path is too long for a unix socket: %zu bytes, limit %zu: %s",
                     strlen(abs), sun_max - strlen("/pg/run" SOCKET_NAME), abs);
        ts_error_hint(err, "the socket lives in DIR/pg/run; choose a shorter data folder");
        return TS_ERR_CONFIG;
    }
    snprintf(pg->dir, sizeof(pg->dir), "%s", abs);
    if ((e = join(pg->base, sizeof(pg->base), abs, "/pg", err)) != TS_OK ||
        (e = join(pg->data, sizeof(pg->data), pg->base, "/data", err)) != TS_OK ||
        (e = join(pg->run, sizeof(pg->run), pg->base, "/run", err)) != TS_OK ||
        (e = join(pg->logdir, sizeof(pg->logdir), pg->base, "/log", err)) != TS_OK ||
        (e = join(pg->logfile, sizeof(pg->logfile), pg->logdir, "/postgresql.log", err)) != TS_OK)
        return e;
    char host[PATH_MAX + 8];
    conn_quote(host, sizeof(host), pg->run);
    snprintf(pg->conninfo, sizeof(pg->conninfo),
             "host=%s port=" PG_PORT " user=" PG_USER " dbname=" PG_DBNAME, host);
    snprintf(pg->admin, sizeof(pg->admin),
             "host=%s port=" PG_PORT " user=" PG_USER " dbname=postgres connect_timeout=5", host);
    return TS_OK;
}

static int lock_start(const struct ts_pgembed *pg, struct ts_error *err)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/start.lock", pg->base);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        io_error(err, "open", path);
        return -1;
    }
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            io_error(err, "lock", path);
            close(fd);
            return -1;
        }
    }
    return fd;
}

static long postmaster_pid(const struct ts_pgembed *pg)
{
    char path[PATH_MAX + 32];
    long pid = 0;
    snprintf(path, sizeof(path), "%s/postmaster.pid", pg->data);
    read_lock_pid(path, &pid);
    return pid;
}

/* Start the cluster (after clearing what a crash left) and wait until it answers. */
static enum ts_err start_cluster(const struct ts_pgembed *pg, struct ts_error *err)
{
    char pidfile[PATH_MAX + 32], socklock[PATH_MAX + 32];
    snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid", pg->data);
    snprintf(socklock, sizeof(socklock), "%s" SOCKET_NAME ".lock", pg->run);

    /* orphaned backends of a killed postmaster keep its shared memory: wait for them */
    int shmid = lock_shmid(pidfile);
    clear_stale_lock(pg, pidfile);
    clear_stale_lock(pg, socklock);
    long deadline = ts_now_ms() + SHM_WAIT_MS;
    bool waited = false;
    while (shm_attached(shmid) && ts_now_ms() < deadline) {
        waited = true;
        ts_sleep_ms(100);
    }
    if (waited)
        ts_log_info("waited for processes of a stopped PostgreSQL to exit shmid=%d", shmid);

    enum ts_err e = write_settings(pg, pg->data, err);
    if (e != TS_OK)
        return e;
    int status = 0;
    e = pg_ctl(pg, "start", &status, err);
    if (e != TS_OK)
        return e;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return tool_error(err, "start PostgreSQL", "pg_ctl", status, pg->logfile);
    bool gone;
    if (!wait_ready(pg, READY_WAIT_MS, &gone)) {
        ts_error_set(err, TS_ERR_DATABASE, "PostgreSQL started but does not answer on %s", pg->run);
        if (err != NULL)
            log_tail(pg->logfile, err->detail, sizeof(err->detail));
        ts_error_hint(err, "see %s", pg->logfile);
        return TS_ERR_DATABASE;
    }
    ts_log_info("started PostgreSQL pid=%ld data=%s socket=%s", postmaster_pid(pg), pg->data,
                pg->run);
    return TS_OK;
}

static void stop_cluster(const struct ts_pgembed *pg)
{
    int status = 0;
    struct ts_error err;
    ts_error_clear(&err);
    long pid = postmaster_pid(pg);
    if (pg_ctl(pg, "stop", &status, &err) != TS_OK) {
        ts_log_error("could not stop PostgreSQL: %s", err.message);
        return;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[64];
        describe_status(status, how, sizeof(how));
        ts_log_error("could not stop PostgreSQL: pg_ctl %s log=%s/pg_ctl.log", how, pg->logdir);
        return;
    }
    ts_log_info("stopped PostgreSQL pid=%ld data=%s", pid, pg->data);
}

enum ts_err ts_pgembed_start(const char *data_dir, const char *pg_bindir, struct ts_pgembed **out,
                             struct ts_error *err)
{
    enum ts_err e = TS_OK;
    int lockfd = -1;
    bool started = false;
    struct ts_pgembed *pg = NULL;
    *out = NULL;
    if (data_dir == NULL || data_dir[0] == '\0')
        return ts_error_set(err, TS_ERR_CONFIG,
                            "data folder must be given for the embedded PostgreSQL");
    pg = calloc(1, sizeof(*pg));
    if (pg == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");

    if ((e = set_paths(pg, data_dir, err)) != TS_OK ||
        (e = find_bindir(pg, pg_bindir, err)) != TS_OK)
        goto out;
    if (mkdir(pg->base, 0700) != 0 && errno != EEXIST) {
        e = io_error(err, "create folder", pg->base);
        goto out;
    }
    if ((lockfd = lock_start(pg, err)) < 0) {
        e = TS_ERR_IO;
        goto out;
    }
    if ((e = choose_runas(pg, err)) != TS_OK || (e = check_reachable(pg, pg->dir, err)) != TS_OK ||
        (e = own_dir(pg, pg->base, err)) != TS_OK || (e = own_dir(pg, pg->run, err)) != TS_OK ||
        (e = own_dir(pg, pg->logdir, err)) != TS_OK)
        goto out;

    if (file_exists(pg->data, "PG_VERSION")) {
        char pidfile[PATH_MAX + 32];
        long pid;
        snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid", pg->data);
        if (lock_holder(pidfile, pg->data, &pid) == HOLDER_RUNNING) {
            bool gone;
            if (wait_ready(pg, READY_WAIT_MS, &gone)) {
                ts_log_info("adopted running PostgreSQL pid=%ld data=%s", pid, pg->data);
                goto ready;
            }
            if (!gone) {
                ts_error_set(err, TS_ERR_DATABASE,
                             "PostgreSQL (pid %ld) is running in %s but does not answer on %s", pid,
                             pg->data, pg->run);
                ts_error_hint(err, "see %s", pg->logfile);
                e = TS_ERR_DATABASE;
                goto out;
            }
            /* it went away while we waited: start it again below */
        }
    } else {
        if (is_dir(pg->data) && !dir_is_empty(pg->data)) {
            ts_error_set(err, TS_ERR_CONFIG, "\"%s\" exists but holds no PostgreSQL cluster",
                         pg->data);
            ts_error_hint(err, "move it away; tessera-server creates the cluster there");
            e = TS_ERR_CONFIG;
            goto out;
        }
        if ((e = init_cluster(pg, err)) != TS_OK)
            goto out;
    }
    if ((e = start_cluster(pg, err)) != TS_OK)
        goto out;
    started = true;
ready:
    if ((e = ensure_database(pg, err)) != TS_OK)
        goto out;
    *out = pg;
out:
    if (lockfd >= 0)
        close(lockfd);
    if (e != TS_OK) {
        if (started)
            stop_cluster(pg);
        free(pg);
    }
    return e;
}

const char *ts_pgembed_conninfo(const struct ts_pgembed *pg)
{
    return pg->conninfo;
}

/* Start the cluster again when its postmaster is gone (killed, crashed, out
 * of memory); nothing when it runs. Under the start lock, like a start. */
static enum ts_err revive(struct ts_pgembed *pg, bool *restarted, struct ts_error *err)
{
    char pidfile[PATH_MAX + 32];
    long pid;
    *restarted = false;
    snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid", pg->data);
    if (lock_holder(pidfile, pg->data, &pid) == HOLDER_RUNNING)
        return TS_OK;
    int lockfd = lock_start(pg, err);
    if (lockfd < 0)
        return TS_ERR_IO;
    enum ts_err e = TS_OK;
    if (lock_holder(pidfile, pg->data, &pid) != HOLDER_RUNNING) {
        e = start_cluster(pg, err);
        *restarted = e == TS_OK;
    }
    close(lockfd);
    return e;
}

static void *keeper_main(void *arg)
{
    struct ts_pgembed *pg = arg;
    long failing_since = 0, warned = 0;
    pthread_mutex_lock(&pg->mu);
    while (!pg->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += KEEP_ALIVE_S;
        pthread_cond_timedwait(&pg->cv, &pg->mu, &ts);
        if (pg->stop)
            break;
        pthread_mutex_unlock(&pg->mu);
        struct ts_error err;
        ts_error_clear(&err);
        bool restarted = false;
        long now = ts_now_ms();
        if (revive(pg, &restarted, &err) != TS_OK) {
            if (failing_since == 0)
                failing_since = now;
            if (now - warned >= 30000) { /* once in 30 s while it keeps failing */
                warned = now;
                ts_log_error("PostgreSQL is not running and could not be started again (for %lld "
                             "s): %s%s%s",
                             (long long)(now - failing_since) / 1000, err.message,
                             err.detail[0] ? ": " : "", err.detail);
            }
        } else if (restarted) {
            ts_log_warn("PostgreSQL had stopped (its postmaster was gone); started it again "
                        "data=%s",
                        pg->data);
            failing_since = warned = 0;
        }
        pthread_mutex_lock(&pg->mu);
    }
    pthread_mutex_unlock(&pg->mu);
    return NULL;
}

enum ts_err ts_pgembed_keep_alive(struct ts_pgembed *pg, struct ts_error *err)
{
    if (pg->keeping)
        return TS_OK;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&pg->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&pg->mu, NULL);
    pg->stop = false;
    if (pthread_create(&pg->keeper, NULL, keeper_main, pg) != 0) {
        pthread_cond_destroy(&pg->cv);
        pthread_mutex_destroy(&pg->mu);
        return ts_error_set(err, TS_ERR_INTERNAL, "cannot start the PostgreSQL keep-alive thread");
    }
    pg->keeping = true;
    return TS_OK;
}

void ts_pgembed_stop(struct ts_pgembed *pg)
{
    if (pg == NULL)
        return;
    if (pg->keeping) { /* first, or it would start the cluster again */
        pthread_mutex_lock(&pg->mu);
        pg->stop = true;
        pthread_cond_signal(&pg->cv);
        pthread_mutex_unlock(&pg->mu);
        pthread_join(pg->keeper, NULL);
        pthread_cond_destroy(&pg->cv);
        pthread_mutex_destroy(&pg->mu);
        pg->keeping = false;
    }
    struct ts_error err;
    int lockfd = lock_start(pg, &err);
    stop_cluster(pg);
    if (lockfd >= 0)
        close(lockfd);
    free(pg);
}
