/*
 * pgembed_run.c - who runs PostgreSQL (as root: the owner of an existing
 * cluster, else "postgres", else "nobody"; never root), whether that user can
 * reach the data folder, where initdb and pg_ctl are, and running them
 * through fork and execve as that user.
 */
#include "server/store/pgembed_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/array.h"
#include "api/log.h"

extern char **environ;

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

enum ts_err ts_pgembed_choose_runas(struct ts_pgembed *pg, struct ts_error *err)
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
    if (stat(pg->data, &st) == 0 && ts_pgembed_file_exists(pg->data, "PG_VERSION")) {
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
    for (size_t i = 0; i < TS_ARRAY_LEN(candidates); i++) {
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
enum ts_err ts_pgembed_check_reachable(const struct ts_pgembed *pg, const char *dir,
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
            return ts_pgembed_io_error(err, "stat", path);
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
                return ts_pgembed_io_error(err, "change the mode of", path);
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

enum ts_err ts_pgembed_find_bindir(struct ts_pgembed *pg, const char *pg_bindir,
                                   struct ts_error *err)
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
    for (size_t i = 0; i < TS_ARRAY_LEN(sigs); i++)
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

void ts_pgembed_describe_status(int status, char *out, size_t len)
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
enum ts_err ts_pgembed_run_prog(const struct ts_pgembed *pg, char *const argv[],
                                const char *outfile, int *status, struct ts_error *err)
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
