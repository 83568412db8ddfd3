/*
 * state.c - create, map, lock and account the shared state of simulated
 * GPUs (see state.h for the contract, README.md for the layout).
 */
#include "agent/simgpu/state.h"

#include "agent/ledger/hostpid.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t ts_simgpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ts_simgpu_sleep_until(uint64_t t_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(t_ns / 1000000000u),
                          .tv_nsec = (long)(t_ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

void ts_simgpu_uuid_format(const unsigned char u[16], char *buf)
{
    snprintf(buf, 41, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

void ts_simgpu_log(const char *fmt, ...)
{
    if (!getenv("TESSERA_SIMGPU_LOG"))
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "simgpu[%d]: %s\n", (int)getpid(), line);
}

static void state_path(const char *dir, unsigned index, char *buf, size_t len)
{
    snprintf(buf, len, "%s/gpu%u.state", dir, index);
}

/* 0 when fd holds a state of our ABI major and size. */
static int state_check(int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return -errno;
    if ((size_t)sb.st_size != sizeof(struct ts_simgpu_state))
        return -EPROTO;
    struct ts_simgpu_state head;
    if (pread(fd, &head, offsetof(struct ts_simgpu_state, used_bytes), 0) !=
        (ssize_t)offsetof(struct ts_simgpu_state, used_bytes))
        return -EPROTO;
    if (head.magic != TS_SIMGPU_MAGIC || head.abi_major != TS_SIMGPU_ABI_MAJOR ||
        head.size != sizeof(struct ts_simgpu_state))
        return -EPROTO;
    return 0;
}

int ts_simgpu_create(const char *dir, unsigned count, uint64_t bytes, uint64_t copy_bytes_per_s)
{
    if (count == 0 || count > TS_SIMGPU_MAX_GPUS || bytes == 0)
        return -EINVAL;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    for (unsigned i = 0; i < count; i++) {
        char path[4096], tmp[4200];
        state_path(dir, i, path, sizeof path);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            int rc = state_check(fd);
            close(fd);
            if (rc == 0)
                continue;
        }
        struct ts_simgpu_state *st = calloc(1, sizeof *st);
        if (!st)
            return -ENOMEM;
        st->magic = TS_SIMGPU_MAGIC;
        st->abi_major = TS_SIMGPU_ABI_MAJOR;
        st->abi_minor = TS_SIMGPU_ABI_MINOR;
        st->size = sizeof *st;
        st->index = i;
        st->total_bytes = bytes;
        st->copy_bytes_per_s = copy_bytes_per_s;
        if (getrandom(st->uuid, sizeof st->uuid, 0) != (ssize_t)sizeof st->uuid) {
            uint64_t t = ts_simgpu_now_ns() ^ ((uint64_t)getpid() << 32) ^ i;
            memcpy(st->uuid, &t, sizeof t);
            memcpy(st->uuid + 8, &st, sizeof(void *));
        }
        st->uuid[6] = (unsigned char)((st->uuid[6] & 0x0f) | 0x40); /* version 4 */
        st->uuid[8] = (unsigned char)((st->uuid[8] & 0x3f) | 0x80);
        snprintf(st->name, sizeof st->name, "Tessera SimGPU %lluGiB",
                 (unsigned long long)(bytes >> 30));
        snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int rc = 0;
        if (fd < 0)
            rc = -errno;
        else if (write(fd, st, sizeof *st) != (ssize_t)sizeof *st)
            rc = errno ? -errno : -EIO;
        if (fd >= 0 && close(fd) < 0 && rc == 0)
            rc = -errno;
        free(st);
        if (rc == 0 && rename(tmp, path) < 0)
            rc = -errno;
        if (rc != 0) {
            unlink(tmp);
            return rc;
        }
    }
    return 0;
}

unsigned ts_simgpu_count(const char *dir)
{
    unsigned n = 0;
    char path[4096];
    for (; n < TS_SIMGPU_MAX_GPUS; n++) {
        state_path(dir, n, path, sizeof path);
        if (access(path, R_OK | W_OK) != 0)
            break;
    }
    return n;
}

int ts_simgpu_open(const char *dir, unsigned index, struct ts_simgpu_dev *dev)
{
    char path[4096];
    state_path(dir, index, path, sizeof path);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = state_check(fd);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    void *p = mmap(NULL, sizeof(struct ts_simgpu_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        rc = -errno;
        close(fd);
        return rc;
    }
    dev->fd = fd;
    dev->st = p;
    pthread_mutex_init(&dev->mu, NULL);
    return 0;
}

void ts_simgpu_close(struct ts_simgpu_dev *dev)
{
    if (!dev->st)
        return;
    munmap(dev->st, sizeof *dev->st);
    close(dev->fd);
    pthread_mutex_destroy(&dev->mu);
    dev->st = NULL;
    dev->fd = -1;
}

static int ofd_lock(int fd, short type)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    int rc;
    while ((rc = fcntl(fd, F_OFD_SETLKW, &fl)) < 0 && errno == EINTR)
        ;
    return rc;
}

void ts_simgpu_lock(struct ts_simgpu_dev *dev)
{
    pthread_mutex_lock(&dev->mu);
    ofd_lock(dev->fd, F_WRLCK);
}

void ts_simgpu_unlock(struct ts_simgpu_dev *dev)
{
    ofd_lock(dev->fd, F_UNLCK);
    pthread_mutex_unlock(&dev->mu);
}

/* Start time (clock ticks since boot) of pid, 0 if it is gone or a zombie. */
static uint64_t proc_start_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return 0;
    p += 2;
    if (*p == 'Z' || *p == 'X')
        return 0;
    /* p is field 3 (state); starttime is field 22. */
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return 0;
        p++;
    }
    return strtoull(p, NULL, 10);
}

void ts_simgpu_reap(struct ts_simgpu_dev *dev)
{
    struct ts_simgpu_state *st = dev->st;
    uint64_t used = 0;
    pid_t me = ts_hostpid();
    bool foreign = ts_hostpid_foreign();
    for (int i = 0; i < TS_SIMGPU_MAX_PROCS; i++) {
        struct ts_simgpu_proc *p = &st->procs[i];
        if (p->pid == 0)
            continue;
        /* a sandboxed process cannot see other jobs' host pids: the agent,
         * in the host's namespace, reaps them (hostpid.h) */
        if (p->pid != me && !foreign && proc_start_ticks(p->pid) != p->start_ticks) {
            ts_simgpu_log("gpu %u: reaping pid %d, %llu bytes", st->index, (int)p->pid,
                          (unsigned long long)p->used_bytes);
            memset(p, 0, sizeof *p);
            continue;
        }
        used += p->used_bytes;
    }
    atomic_store(&st->used_bytes, used);
}

struct ts_simgpu_proc *ts_simgpu_self(struct ts_simgpu_dev *dev, int create)
{
    struct ts_simgpu_state *st = dev->st;
    pid_t me = ts_hostpid(); /* the host's pid, as NVML reports processes */
    struct ts_simgpu_proc *free_slot = NULL;
    if (me <= 0)
        return NULL;
    for (int i = 0; i < TS_SIMGPU_MAX_PROCS; i++) {
        if (st->procs[i].pid == me)
            return &st->procs[i];
        if (st->procs[i].pid == 0 && !free_slot)
            free_slot = &st->procs[i];
    }
    if (!create)
        return NULL;
    if (!free_slot) {
        ts_simgpu_reap(dev);
        for (int i = 0; i < TS_SIMGPU_MAX_PROCS && !free_slot; i++)
            if (st->procs[i].pid == 0)
                free_slot = &st->procs[i];
        if (!free_slot)
            return NULL;
    }
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->pid = me;
    free_slot->start_ticks = proc_start_ticks(getpid());
    return free_slot;
}

int ts_simgpu_charge(struct ts_simgpu_dev *dev, int64_t delta)
{
    struct ts_simgpu_state *st = dev->st;
    int rc = 0;
    ts_simgpu_lock(dev);
    struct ts_simgpu_proc *me = ts_simgpu_self(dev, 1);
    if (!me) {
        rc = -ENOMEM;
        goto out;
    }
    if (delta > 0) {
        uint64_t used = atomic_load(&st->used_bytes);
        if (used + (uint64_t)delta > st->total_bytes) {
            ts_simgpu_reap(dev); /* a dead process may hold what we need */
            used = atomic_load(&st->used_bytes);
        }
        if (used + (uint64_t)delta > st->total_bytes) {
            rc = -ENOMEM;
            goto out;
        }
        me->used_bytes += (uint64_t)delta;
        atomic_fetch_add(&st->used_bytes, (uint64_t)delta);
    } else {
        uint64_t give = (uint64_t)(-delta);
        if (give > me->used_bytes)
            give = me->used_bytes;
        me->used_bytes -= give;
        atomic_fetch_sub(&st->used_bytes, give);
    }
out:
    ts_simgpu_unlock(dev);
    return rc;
}

uint64_t ts_simgpu_busy_add(struct ts_simgpu_dev *dev, uint64_t not_before_ns, uint64_t dur_ns)
{
    struct ts_simgpu_state *st = dev->st;
    ts_simgpu_lock(dev);
    uint64_t start = not_before_ns > st->busy_until_ns ? not_before_ns : st->busy_until_ns;
    uint64_t end = start + dur_ns;
    if (dur_ns > 0) {
        int32_t pid = (int32_t)ts_hostpid();
        uint32_t last = (st->span_next + TS_SIMGPU_SPANS - 1) % TS_SIMGPU_SPANS;
        /* One span per run of kernels of one process without a gap. */
        if (st->span_count > 0 && st->spans[last].until_ns >= start && st->spans[last].pid == pid) {
            st->spans[last].until_ns = end;
        } else {
            st->spans[st->span_next] = (struct ts_simgpu_span){start, end, pid, 0};
            st->span_next = (st->span_next + 1) % TS_SIMGPU_SPANS;
            if (st->span_count < TS_SIMGPU_SPANS)
                st->span_count++;
        }
        st->busy_until_ns = end;
        struct ts_simgpu_proc *me = ts_simgpu_self(dev, 1);
        if (me)
            me->busy_ns += dur_ns;
    }
    atomic_fetch_add(&st->kernels, 1);
    ts_simgpu_unlock(dev);
    return end;
}

uint64_t ts_simgpu_busy_ns(struct ts_simgpu_dev *dev, pid_t pid, uint64_t from_ns, uint64_t to_ns)
{
    struct ts_simgpu_state *st = dev->st;
    uint64_t busy = 0;
    /* Newest first; spans are in time order, so stop at the first that
     * ended before the window. */
    for (uint32_t k = 0; k < st->span_count; k++) {
        uint32_t i = (st->span_next + 2 * TS_SIMGPU_SPANS - 1 - k) % TS_SIMGPU_SPANS;
        const struct ts_simgpu_span *s = &st->spans[i];
        if (s->until_ns <= from_ns)
            break;
        if (pid != 0 && s->pid != pid)
            continue;
        uint64_t a = s->from_ns > from_ns ? s->from_ns : from_ns;
        uint64_t b = s->until_ns < to_ns ? s->until_ns : to_ns;
        if (b > a)
            busy += b - a;
    }
    return busy;
}

unsigned ts_simgpu_util_percent(struct ts_simgpu_dev *dev, uint64_t window_ns)
{
    uint64_t now = ts_simgpu_now_ns();
    uint64_t from = now > window_ns ? now - window_ns : 0;
    ts_simgpu_lock(dev);
    uint64_t busy = ts_simgpu_busy_ns(dev, 0, from, now);
    ts_simgpu_unlock(dev);
    uint64_t span = now - from;
    return span ? (unsigned)(busy * 100 / span) : 0;
}

/* TESSERA_SIMGPU_FAIL, parsed once per process. */
#define FAIL_MAX 16
static struct fail_rule {
    char name[64];
    long nth;
    int code; /* 0 = the function's default */
    _Atomic long calls;
} fail_rules[FAIL_MAX];
static int fail_count;
static pthread_once_t fail_once = PTHREAD_ONCE_INIT;

static void fail_parse(void)
{
    const char *env = getenv("TESSERA_SIMGPU_FAIL");
    if (!env)
        return;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", env);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && fail_count < FAIL_MAX;
         tok = strtok_r(NULL, ",", &save)) {
        char *c1 = strchr(tok, ':');
        if (!c1)
            continue;
        *c1++ = '\0';
        struct fail_rule *r = &fail_rules[fail_count];
        snprintf(r->name, sizeof r->name, "%s", tok);
        char *end;
        r->nth = strtol(c1, &end, 10);
        r->code = *end == ':' ? (int)strtol(end + 1, NULL, 10) : 0;
        if (r->nth > 0)
            fail_count++;
    }
}

int ts_simgpu_fail(const char *name, int dflt)
{
    pthread_once(&fail_once, fail_parse);
    for (int i = 0; i < fail_count; i++) {
        struct fail_rule *r = &fail_rules[i];
        if (strcmp(r->name, name) != 0)
            continue;
        if (atomic_fetch_add(&r->calls, 1) + 1 == r->nth) {
            ts_simgpu_log("injected failure of %s call %ld", name, r->nth);
            return r->code ? r->code : dflt;
        }
    }
    return 0;
}
