/*
 * ledger.c - create, map, lock and reap the per-GPU ledger (ledger.h).
 * Linked into the agent and into libtessera-cuda.so, so it allocates
 * nothing, prints nothing and never blocks without a bound.
 */
#include "agent/ledger/ledger.h"

#include "agent/ledger/hostpid.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(struct ts_ledger_job) % 64 == 0, "job slots are cache lines");
_Static_assert(sizeof(struct ts_ledger_proc) % 64 == 0, "process slots are cache lines");

uint64_t ts_ledger_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool header_ok(const struct ts_ledger *l)
{
    return l->h.magic == TS_LEDGER_MAGIC && l->h.abi_major == TS_LEDGER_ABI_MAJOR &&
           l->h.size == sizeof(struct ts_ledger);
}

/* Map the ledger file open on fd and close fd; NULL with errno. */
static struct ts_ledger *map_close(int fd)
{
    void *p = mmap(NULL, sizeof(struct ts_ledger), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    errno = e;
    return p == MAP_FAILED ? NULL : p;
}

static int init_lock(struct ts_ledger *l)
{
    pthread_mutexattr_t a;
    int e = pthread_mutexattr_init(&a);
    if (e == 0)
        e = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (e == 0)
        e = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (e == 0)
        e = pthread_mutex_init(&l->lock, &a);
    pthread_mutexattr_destroy(&a);
    return e;
}

struct ts_ledger *ts_ledger_create(const char *path, uint32_t gpu_index, const char *uuid,
                                   uint64_t total_bytes, uint64_t reserve_bytes,
                                   enum ts_ledger_collision collision, uint32_t wait_ms,
                                   const char *swap_path, uint64_t swap_bytes)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return NULL;
    struct stat st;
    bool keep = fstat(fd, &st) == 0 && st.st_size == (off_t)sizeof(struct ts_ledger);
    /* a new ledger is 0644 whatever the umask (the agent opens it wider to
     * sandboxed jobs); one kept keeps its mode, which jobs may be using */
    if (!keep && (fchmod(fd, 0644) != 0 || ftruncate(fd, 0) != 0 ||
                  ftruncate(fd, sizeof(struct ts_ledger)) != 0)) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    struct ts_ledger *l = map_close(fd);
    if (l == NULL)
        return NULL;
    if (keep && header_ok(l) && l->h.gpu_index == gpu_index &&
        strncmp(l->h.uuid, uuid, sizeof(l->h.uuid)) == 0 && l->h.total_bytes == total_bytes) {
        /* a restarted agent: keep the slots, take the new settings */
        if (ts_ledger_lock(l) != 0) {
            ts_ledger_close(l);
            errno = ENOTRECOVERABLE;
            return NULL;
        }
        l->h.reserve_bytes = reserve_bytes;
        l->h.collision = collision;
        l->h.wait_ms = wait_ms;
        snprintf(l->h.swap_path, sizeof(l->h.swap_path), "%s", swap_path ? swap_path : "");
        l->h.swap_bytes = swap_bytes;
        ts_ledger_reap_locked(l);
        ts_ledger_unlock(l);
        return l;
    }
    memset(l, 0, sizeof(*l));
    int e = init_lock(l);
    if (e != 0) {
        ts_ledger_close(l);
        errno = e;
        return NULL;
    }
    l->h.abi_major = TS_LEDGER_ABI_MAJOR;
    l->h.abi_minor = TS_LEDGER_ABI_MINOR;
    l->h.size = sizeof(struct ts_ledger);
    l->h.gpu_index = gpu_index;
    l->h.collision = collision;
    l->h.wait_ms = wait_ms;
    l->h.total_bytes = total_bytes;
    l->h.reserve_bytes = reserve_bytes;
    snprintf(l->h.uuid, sizeof(l->h.uuid), "%s", uuid);
    snprintf(l->h.swap_path, sizeof(l->h.swap_path), "%s", swap_path ? swap_path : "");
    l->h.swap_bytes = swap_bytes;
    atomic_thread_fence(memory_order_release);
    l->h.magic = TS_LEDGER_MAGIC; /* last: a reader never sees a half-made file */
    msync(l, sizeof(*l), MS_ASYNC);
    return l;
}

struct ts_ledger *ts_ledger_open(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size != (off_t)sizeof(struct ts_ledger)) {
        close(fd);
        errno = EPROTO;
        return NULL;
    }
    struct ts_ledger *l = map_close(fd);
    if (l == NULL)
        return NULL;
    if (!header_ok(l)) {
        ts_ledger_close(l);
        errno = EPROTO;
        return NULL;
    }
    return l;
}

void ts_ledger_close(struct ts_ledger *l)
{
    if (l != NULL)
        munmap(l, sizeof(*l));
}

int ts_ledger_lock(struct ts_ledger *l)
{
    int e = pthread_mutex_lock(&l->lock);
    if (e == EOWNERDEAD) {
        /* the holder died mid-update: the slots are repaired from what
         * the live processes say, then the lock is usable again */
        ts_ledger_reap_locked(l);
        e = pthread_mutex_consistent(&l->lock);
    }
    return e;
}

void ts_ledger_unlock(struct ts_ledger *l)
{
    pthread_mutex_unlock(&l->lock);
}

/* Field 22 of /proc/PID/stat in *ticks; returns 1 running, 0 gone or a
 * zombie (which holds no GPU memory), -1 unreadable. */
static int read_stat(pid_t pid, uint64_t *ticks)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* the command may hold spaces and parentheses: fields count from the last ')' */
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    int field = 2;
    char state = 0;
    for (p++; *p && field < 22; p++) {
        if (*p == ' ') {
            field++;
            if (field == 3)
                state = p[1];
        }
    }
    if (field != 22)
        return -1;
    if (state == 'Z' || state == 'X')
        return 0;
    *ticks = strtoull(p, NULL, 10);
    return 1;
}

uint64_t ts_ledger_start_ticks(pid_t pid)
{
    uint64_t t = 0;
    return read_stat(pid, &t) == 1 ? t : 0;
}

/* Whether slot p's process still runs (same pid, same start). A pid this
 * process cannot see in /proc (another pid namespace) counts as alive
 * unless kill says it is gone; the agent, in the host's, decides those. */
static bool proc_alive(const struct ts_ledger_proc *p)
{
    pid_t pid = atomic_load(&p->pid);
    if (pid <= 0)
        return false;
    if (ts_hostpid_foreign()) /* a sandboxed job: host pids are not ours to judge */
        return true;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return false;
    uint64_t t = 0;
    int r = read_stat(pid, &t);
    return r < 0 || (r == 1 && t == p->start_ticks);
}

uint64_t ts_ledger_burst_locked(const struct ts_ledger *l)
{
    uint64_t b = 0;
    for (int j = 0; j < TS_LEDGER_JOBS; j++) {
        const struct ts_ledger_job *job = &l->jobs[j];
        if (atomic_load_explicit(&job->key, memory_order_relaxed) == 0)
            continue;
        uint64_t u = atomic_load_explicit(&job->used_bytes, memory_order_relaxed);
        if (u > job->request_bytes)
            b += u - job->request_bytes;
    }
    return b;
}

bool ts_ledger_ahead_locked(const struct ts_ledger *l, int self, uint32_t kind, uint64_t since)
{
    int rank = ts_ledger_need_rank(kind);
    for (int i = 0; i < TS_LEDGER_PROCS; i++) {
        const struct ts_ledger_proc *p = &l->procs[i];
        if (i == self || atomic_load_explicit(&p->pid, memory_order_relaxed) == 0 ||
            atomic_load_explicit(&p->need_bytes, memory_order_relaxed) == 0)
            continue;
        int r = ts_ledger_need_rank(atomic_load_explicit(&p->need_kind, memory_order_relaxed));
        uint64_t t = atomic_load_explicit(&p->need_since_ns, memory_order_relaxed);
        if (r < rank || (r == rank && t < since))
            return true;
    }
    return false;
}

uint64_t ts_ledger_used(const struct ts_ledger *l)
{
    uint64_t u = 0;
    for (int j = 0; j < TS_LEDGER_JOBS; j++)
        if (atomic_load_explicit(&l->jobs[j].key, memory_order_relaxed) != 0)
            u += atomic_load_explicit(&l->jobs[j].used_bytes, memory_order_relaxed);
    return u;
}

int ts_ledger_reap_locked(struct ts_ledger *l)
{
    int n = 0;
    for (int i = 0; i < TS_LEDGER_PROCS; i++) {
        struct ts_ledger_proc *p = &l->procs[i];
        if (atomic_load(&p->pid) == 0 || proc_alive(p))
            continue;
        uint64_t used = atomic_load(&p->used_bytes);
        uint64_t swapped = atomic_load(&p->swapped_bytes);
        if (p->job >= 0 && p->job < TS_LEDGER_JOBS) {
            struct ts_ledger_job *job = &l->jobs[p->job];
            /* saturating: never wrap a job's figure below zero */
            uint64_t cur = atomic_load(&job->used_bytes);
            while (
                !atomic_compare_exchange_weak(&job->used_bytes, &cur, cur > used ? cur - used : 0))
                ;
            cur = atomic_load(&job->swapped_bytes);
            while (!atomic_compare_exchange_weak(&job->swapped_bytes, &cur,
                                                 cur > swapped ? cur - swapped : 0))
                ;
        }
        memset((char *)p + sizeof(p->pid), 0, sizeof(*p) - sizeof(p->pid));
        atomic_store(&p->pid, 0);
        n++;
    }
    atomic_store(&l->burst_bytes, ts_ledger_burst_locked(l));
    return n;
}

int ts_ledger_find_job(const struct ts_ledger *l, uint64_t key)
{
    for (int j = 0; j < TS_LEDGER_JOBS; j++)
        if (atomic_load_explicit(&l->jobs[j].key, memory_order_acquire) == key)
            return j;
    return -1;
}

int ts_ledger_find_proc(const struct ts_ledger *l, pid_t pid)
{
    for (int i = 0; i < TS_LEDGER_PROCS; i++)
        if (atomic_load_explicit(&l->procs[i].pid, memory_order_acquire) == pid)
            return i;
    return -1;
}

void ts_futex_wait(_Atomic uint32_t *w, uint32_t expect, int timeout_ms)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ms >= 0) {
        ts.tv_sec = timeout_ms / 1000;
        ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
        tp = &ts;
    }
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, expect, tp, NULL, 0);
}

void ts_futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

pid_t ts_ledger_host_pid(void)
{
    return ts_hostpid();
}
