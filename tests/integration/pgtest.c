/*
 * pgtest.c - helpers of the store's integration tests (see pgtest.h).
 */
#include "tests/integration/pgtest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/clock.h"

char *ts_pgtest_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof(tmpl), "%s/tessera-it-XXXXXX", base && base[0] ? base : "/tmp");
    if (mkdtemp(tmpl) == NULL) {
        fprintf(stderr, "mkdtemp %s: %s\n", tmpl, strerror(errno));
        return NULL;
    }
    return realpath(tmpl, NULL);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* pids of live processes whose working folder is data; returns the count. */
static int scan_cluster(const char *data, long *pids, int max)
{
    int n = 0;
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        char link[64], cwd[PATH_MAX];
        snprintf(link, sizeof(link), "/proc/%ld/cwd", pid);
        ssize_t l = readlink(link, cwd, sizeof(cwd) - 1);
        if (l <= 0)
            continue;
        cwd[l] = '\0';
        if (strcmp(cwd, data) != 0 || !ts_pgtest_alive(pid))
            continue;
        if (n < max)
            pids[n] = pid;
        n++;
    }
    closedir(d);
    return n;
}

static void data_path(const char *dir, char *out, size_t len)
{
    snprintf(out, len, "%s/pg/data", dir);
}

int ts_pgtest_cluster_processes(const char *dir)
{
    char data[PATH_MAX];
    long pids[1];
    data_path(dir, data, sizeof(data));
    return scan_cluster(data, pids, 0);
}

int ts_pgtest_leftovers(const char *dir)
{
    for (int i = 0; i < 100; i++) {
        int n = ts_pgtest_cluster_processes(dir);
        if (n == 0)
            return 0;
        ts_sleep_ms(100);
    }
    return ts_pgtest_cluster_processes(dir);
}

void ts_pgtest_rmtree(const char *dir)
{
    if (dir == NULL)
        return;
    char data[PATH_MAX];
    long pids[64];
    data_path(dir, data, sizeof(data));
    int n = scan_cluster(data, pids, 64);
    for (int i = 0; i < n && i < 64; i++) {
        fprintf(stderr, "pgtest: killing leftover process %ld of %s\n", pids[i], data);
        kill((pid_t)pids[i], SIGKILL);
    }
    if (n > 0)
        ts_sleep_ms(500);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int newest_major(void)
{
    int best = 0;
    DIR *d = opendir("/usr/lib/postgresql");
    if (d == NULL)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int n = atoi(de->d_name);
        if (n > best)
            best = n;
    }
    closedir(d);
    return best;
}

const char *ts_pgtest_bindir(void)
{
    static char dir[PATH_MAX];
    const char *env = getenv("TS_PG_BINDIR");
    if (env != NULL && env[0] != '\0')
        return env;
    if (access("/usr/lib/postgresql/15/bin/pg_dump", X_OK) == 0)
        return "/usr/lib/postgresql/15/bin";
    snprintf(dir, sizeof(dir), "/usr/lib/postgresql/%d/bin", newest_major());
    return dir;
}

int ts_pgtest_run(const char *const argv[], const char *out_path, const char *err_path)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int out = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int errfd = err_path ? open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600) : out;
        int in = open("/dev/null", O_RDONLY);
        if (out < 0 || errfd < 0 || in < 0)
            _exit(126);
        dup2(in, 0);
        dup2(out, 1);
        dup2(errfd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

char *ts_pgtest_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
        if (cap - len - 1 == 0) {
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf != NULL)
        buf[len] = '\0';
    return buf;
}

bool ts_pgtest_pidfile_line(const char *dir, int n, char *buf, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/pg/data/postmaster.pid", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool found = false;
    for (int i = 1; fgets(buf, (int)len, f) != NULL; i++) {
        if (i == n) {
            buf[strcspn(buf, "\n")] = '\0';
            found = true;
            break;
        }
    }
    fclose(f);
    return found;
}

long ts_pgtest_postmaster_pid(const char *dir)
{
    char line[64];
    if (!ts_pgtest_pidfile_line(dir, 1, line, sizeof(line)))
        return 0;
    return atol(line);
}

static char state_of(long pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return (p != NULL && p[1] == ' ') ? p[2] : 0;
}

bool ts_pgtest_alive(long pid)
{
    if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH))
        return false;
    char st = state_of(pid);
    return st != 0 && st != 'Z' && st != 'X';
}

bool ts_pgtest_wait_gone(long pid, int timeout_ms, bool reaped)
{
    for (int waited = 0;; waited += 50) {
        bool gone = reaped ? (kill((pid_t)pid, 0) != 0 && errno == ESRCH) : !ts_pgtest_alive(pid);
        if (gone)
            return true;
        if (waited >= timeout_ms)
            return false;
        ts_sleep_ms(50);
    }
}

bool ts_pgtest_value(PGconn *conn, const char *sql, char *buf, size_t len)
{
    PGresult *res = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(res);
    bool ok = st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK;
    if (!ok)
        fprintf(stderr, "pgtest: %s: %s", sql, PQerrorMessage(conn));
    else if (st == PGRES_TUPLES_OK && PQntuples(res) > 0)
        snprintf(buf, len, "%s", PQgetvalue(res, 0, 0));
    else
        snprintf(buf, len, "%s", "");
    PQclear(res);
    return ok;
}

PGconn *ts_pgtest_connect(const char *conninfo)
{
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "pgtest: could not connect (%s): %s", conninfo, PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}
