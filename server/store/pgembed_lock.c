/*
 * pgembed_lock.c - the lock files of a cluster (postmaster.pid and the
 * socket's lock): who holds them, and clearing what a killed postmaster left
 * so that the next start is not refused.
 */
#include "server/store/pgembed_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/shm.h>
#include <unistd.h>

#include "api/clock.h"
#include "api/log.h"

/* ---- the lock files of a cluster ---- */

/* pid in the first line of a lock file; 0 when the file is there but unreadable or empty. */
enum holder ts_pgembed_read_lock_pid(const char *path, long *pid)
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
enum holder ts_pgembed_lock_holder(const char *path, const char *data, long *pid)
{
    enum holder h = ts_pgembed_read_lock_pid(path, pid);
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
int ts_pgembed_lock_shmid(const char *path)
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

bool ts_pgembed_shm_attached(int shmid)
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
void ts_pgembed_clear_stale_lock(const struct ts_pgembed *pg, const char *path)
{
    long pid;
    enum holder h = ts_pgembed_lock_holder(path, pg->data, &pid);
    long deadline = ts_now_ms() + ZOMBIE_WAIT_MS;
    while (h == HOLDER_ZOMBIE && ts_now_ms() < deadline) {
        ts_sleep_ms(100);
        h = ts_pgembed_lock_holder(path, pg->data, &pid);
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
