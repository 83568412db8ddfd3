/*
 * ledgers.c - the per-GPU ledgers, the host swap reserve and its ranges,
 * and the job slots of fractional jobs (ledgers.h).
 */
#include "agent/daemon/ledgers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "api/array.h"
#include "api/files.h"
#include "api/log.h"

enum ts_ledger_collision ts_ledgers_collision_parse(const char *s)
{
    if (s != NULL && strcmp(s, "priority") == 0)
        return TS_COLLISION_PRIORITY;
    if (s != NULL && strcmp(s, "swap") == 0)
        return TS_COLLISION_SWAP;
    return TS_COLLISION_WAIT;
}

const char *ts_ledgers_collision_name(enum ts_ledger_collision c)
{
    return c == TS_COLLISION_PRIORITY ? "priority" : c == TS_COLLISION_SWAP ? "swap" : "wait";
}

/* ---- the host swap reserve ------------------------------------------------ */

/* A name of the data folder's own: two agents on one host never share a
 * reserve, and a restarted agent finds its own again. */
static void reserve_path(const char *data_dir, char *out, size_t len)
{
    char real[PATH_MAX];
    const char *p = realpath(data_dir, real) != NULL ? real : data_dir;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    struct stat st;
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
        snprintf(out, len, "/dev/shm/tessera-%016llx.swap", (unsigned long long)h);
    else
        snprintf(out, len, "%s/swap.reserve", data_dir);
}

/* Bytes of the reserve file already in memory (a restarted agent's). */
static uint64_t reserve_pages(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_blocks * 512u : 0;
}

static enum ts_err reserve_open(struct ts_ledgers *s, const char *data_dir, uint64_t bytes,
                                bool pin, struct ts_error *err)
{
    reserve_path(data_dir, s->swap_path, sizeof(s->swap_path));
    /* kept across restarts: swapped-out jobs have their memory in it. Once
     * given to the sandbox's job user (agent.c) it is not the agent's: an
     * O_CREAT open of it in the sticky /dev/shm fails with EACCES where
     * fs.protected_regular is set, even as root, so an existing one is
     * opened without O_CREAT */
    int fd = open(s->swap_path, O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        fd = open(s->swap_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return ts_error_set(err, TS_ERR_INTERNAL, "could not open the swap reserve %s: %s",
                            s->swap_path, strerror(errno));
    int rc = ftruncate(fd, (off_t)bytes) == 0 ? 0 : errno;
    /* pinned: its pages are taken now, so a folder too small says so here
     * rather than with SIGBUS in a job's swap-out */
    if (rc == 0 && pin)
        rc = posix_fallocate(fd, 0, (off_t)bytes);
    if (rc != 0) {
        close(fd);
        return ts_error_set(err, TS_ERR_INTERNAL,
                            "could not size the swap reserve %s to %llu bytes: %s", s->swap_path,
                            (unsigned long long)bytes, strerror(rc));
    }
    struct statvfs vs;
    if (!pin && fstatvfs(fd, &vs) == 0 &&
        (uint64_t)vs.f_bavail * vs.f_frsize + reserve_pages(fd) < bytes)
        ts_log_warn("the swap reserve is larger than the room left where it lives: a swap-out "
                    "may find no room path=%s bytes=%llu free=%llu",
                    s->swap_path, (unsigned long long)bytes,
                    (unsigned long long)vs.f_bavail * vs.f_frsize);
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED)
        return ts_error_set(err, TS_ERR_INTERNAL, "could not map the swap reserve %s: %s",
                            s->swap_path, strerror(e));
    s->swap_map = m;
    s->swap_bytes = bytes;
    s->swap_pinned = pin;
    s->swap_locked = pin && mlock(m, bytes) == 0;
    if (pin && !s->swap_locked)
        ts_log_warn("could not lock the swap reserve in memory (it may be paged out): %s "
                    "path=%s bytes=%llu",
                    strerror(errno), s->swap_path, (unsigned long long)bytes);
    return TS_OK;
}

/* ---- open and close -------------------------------------------------------- */

enum ts_err ts_ledgers_open(struct ts_ledgers *s, const struct ts_gpus *gpus, const char *data_dir,
                            uint64_t gpu_reserve, enum ts_ledger_collision collision,
                            uint32_t wait_ms, uint64_t swap_bytes, bool swap_pin,
                            struct ts_error *err)
{
    memset(s, 0, sizeof(*s));
    s->collision = collision;
    snprintf(s->dir, sizeof(s->dir), "%s/ledger", data_dir);
    int rc = ts_files_mkdirs(s->dir, 0755);
    if (rc != 0)
        return ts_error_set(err, TS_ERR_INTERNAL, "could not create %s: %s", s->dir, strerror(-rc));
    if (swap_bytes > 0) {
        enum ts_err e = reserve_open(s, data_dir, swap_bytes, swap_pin, err);
        if (e != TS_OK)
            return e;
    }
    for (unsigned i = 0; i < gpus->count; i++) {
        const struct ts_gpu_info *g = &gpus->info[i];
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/gpu%u.ledger", s->dir, g->index);
        s->l[i] = ts_ledger_create(path, g->index, g->uuid, g->memory_bytes, gpu_reserve, collision,
                                   wait_ms, s->swap_path, s->swap_bytes);
        if (s->l[i] == NULL) {
            enum ts_err e = ts_error_set(err, TS_ERR_INTERNAL, "could not create the ledger %s: %s",
                                         path, strerror(errno));
            ts_ledgers_close(s);
            return e;
        }
        s->l[i]->h.flags = s->swap_pinned ? TS_LH_SWAP_PINNED : 0u;
        s->index[i] = g->index;
        s->usable[i] = g->memory_bytes > gpu_reserve ? g->memory_bytes - gpu_reserve : 0;
        s->count = i + 1;
    }
    return TS_OK;
}

void ts_ledgers_close(struct ts_ledgers *s)
{
    /* the reserve is RAM (tmpfs): kept across a restart only while some
     * live process has memory in it, which a restarted agent must find
     * again (the slots of processes that ended are reaped first) */
    for (unsigned i = 0; i < s->count; i++)
        if (ts_ledger_lock(s->l[i]) == 0) {
            ts_ledger_reap_locked(s->l[i]);
            ts_ledger_unlock(s->l[i]);
        }
    if (s->swap_map != NULL && s->swap_path[0] != '\0') {
        uint64_t used = ts_ledgers_swap_used(s);
        if (used == 0 && unlink(s->swap_path) == 0)
            ts_log_info("swap reserve removed path=%s", s->swap_path);
        else
            ts_log_info("swap reserve kept path=%s swapped_out_bytes=%llu%s%s", s->swap_path,
                        (unsigned long long)used, used == 0 ? " error=" : "",
                        used == 0 ? strerror(errno) : "");
    }
    for (unsigned i = 0; i < s->count; i++)
        ts_ledger_close(s->l[i]);
    s->count = 0;
    if (s->swap_map != NULL)
        munmap(s->swap_map, s->swap_bytes);
    s->swap_map = NULL;
}

int ts_ledgers_pos(const struct ts_ledgers *s, unsigned gpu)
{
    for (unsigned i = 0; i < s->count; i++)
        if (s->index[i] == gpu)
            return (int)i;
    return -1;
}

struct ts_ledger *ts_ledgers_get(const struct ts_ledgers *s, unsigned gpu)
{
    int p = ts_ledgers_pos(s, gpu);
    return p < 0 ? NULL : s->l[p];
}

/* ---- job slots --------------------------------------------------------------- */

bool ts_ledgers_fractional(const struct ts_ledgers *s, const struct ts_desired_job *desired)
{
    for (size_t i = 0; i < desired->ngpus; i++) {
        const struct ts_desired_gpu *g = &desired->gpus[i];
        int p = ts_ledgers_pos(s, (unsigned)g->index);
        int64_t req = g->memory_bytes, lim = g->memory_limit_bytes;
        if (p < 0 || req < 0)
            continue;
        /* on a node that swaps every GPU job can be swapped out (suspend) */
        if ((uint64_t)req < s->usable[p] || lim > req || s->swap_bytes > 0)
            return true;
    }
    return false;
}

bool ts_ledgers_job_has(const struct ts_ledgers *s, int64_t id, int attempt, unsigned gpu)
{
    struct ts_ledger *l = ts_ledgers_get(s, gpu);
    return l != NULL && ts_ledger_find_job(l, ts_ledger_key(id, attempt)) >= 0;
}

int ts_ledgers_slot_take_locked(struct ts_ledger *l, uint64_t key, const struct ts_ledger_job *fig)
{
    int j = ts_ledger_find_job(l, key);
    if (j >= 0)
        return j;
    for (j = 0; j < TS_LEDGER_JOBS; j++)
        if (atomic_load(&l->jobs[j].key) == 0)
            break;
    if (j == TS_LEDGER_JOBS)
        return -1;
    struct ts_ledger_job *s = &l->jobs[j];
    s->job_id = fig->job_id;
    s->attempt = fig->attempt;
    s->priority = fig->priority;
    s->request_bytes = fig->request_bytes;
    s->limit_bytes = fig->limit_bytes;
    s->flags = fig->flags;
    atomic_store(&s->used_bytes, 0);
    atomic_store(&s->swapped_bytes, 0);
    atomic_store_explicit(&s->key, key, memory_order_release); /* last: the slot is whole */
    return j;
}

/* Under l's lock: the job's slot on GPU gpu, made when it has none. -1
 * when full. */
static int slot_take_locked(struct ts_ledger *l, uint64_t key, const struct ts_desired_job *desired,
                            const struct ts_desired_gpu *gpu)
{
    int64_t req = gpu->memory_bytes > 0 ? gpu->memory_bytes : 0;
    int64_t lim = gpu->memory_limit_bytes > 0 ? gpu->memory_limit_bytes : 0;
    struct ts_ledger_job fig = {.job_id = desired->id,
                                .attempt = (int32_t)desired->attempt,
                                .priority = (int32_t)desired->priority,
                                .request_bytes = (uint64_t)req,
                                .limit_bytes = lim > req ? (uint64_t)lim : (uint64_t)req,
                                .flags = desired->swap ? TS_LJ_SWAP_OK : 0};
    return ts_ledgers_slot_take_locked(l, key, &fig);
}

static void slot_free(struct ts_ledger *l, uint64_t key)
{
    if (ts_ledger_lock(l) != 0)
        return;
    int j = ts_ledger_find_job(l, key);
    if (j >= 0)
        atomic_store(&l->jobs[j].key, 0);
    ts_ledger_unlock(l);
}

enum ts_err ts_ledgers_job_add(struct ts_ledgers *s, const struct ts_desired_job *desired,
                               const char *jobdir, struct ts_error *err)
{
    uint64_t key = ts_ledger_key(desired->id, (int32_t)desired->attempt);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/shim", jobdir);
    int rc = ts_files_mkdirs(dir, 0755);
    if (rc != 0)
        return ts_error_set(err, TS_ERR_INTERNAL, "could not create %s: %s", dir, strerror(-rc));
    enum ts_err e = TS_OK;
    for (size_t k = 0; k < desired->ngpus; k++) {
        const struct ts_desired_gpu *g = &desired->gpus[k];
        unsigned index = (unsigned)g->index;
        int p = ts_ledgers_pos(s, index);
        if (p < 0) {
            e = ts_error_set(err, TS_ERR_INVALID_VALUE, "GPU %u is not on this node", index);
            break;
        }
        struct ts_ledger *l = s->l[p];
        if (ts_ledger_lock(l) != 0) {
            e = ts_error_set(err, TS_ERR_INTERNAL, "the ledger of GPU %u is unusable", index);
            break;
        }
        int j = slot_take_locked(l, key, desired, g);
        ts_ledger_unlock(l);
        if (j < 0) {
            e = ts_error_set(err, TS_ERR_INTERNAL,
                             "the ledger of GPU %u is full: %d fractional jobs", index,
                             TS_LEDGER_JOBS);
            break;
        }
        char from[PATH_MAX + 32], to[PATH_MAX + 32];
        snprintf(from, sizeof(from), "%s/gpu%u.ledger", s->dir, index);
        snprintf(to, sizeof(to), "%s/dev%zu.ledger", dir, k);
        if (link(from, to) != 0 && errno != EEXIST) {
            e = ts_error_set(err, TS_ERR_INTERNAL, "could not link %s to %s: %s", to, from,
                             strerror(errno));
            break;
        }
    }
    if (e != TS_OK) {
        for (size_t k = 0; k < desired->ngpus; k++) {
            struct ts_ledger *l = ts_ledgers_get(s, (unsigned)desired->gpus[k].index);
            if (l != NULL)
                slot_free(l, key);
        }
    }
    return e;
}

bool ts_ledgers_job_remove(struct ts_ledgers *s, int64_t id, int attempt, const unsigned *gpus,
                           unsigned ngpus)
{
    uint64_t key = ts_ledger_key(id, attempt);
    bool all = true;
    for (unsigned g = 0; g < ngpus; g++) {
        struct ts_ledger *l = ts_ledgers_get(s, gpus[g]);
        if (l == NULL || ts_ledger_lock(l) != 0)
            continue;
        ts_ledger_reap_locked(l);
        int j = ts_ledger_find_job(l, key);
        bool held = false;
        for (int i = 0; j >= 0 && i < TS_LEDGER_PROCS; i++)
            held = held || (atomic_load(&l->procs[i].pid) != 0 && l->procs[i].job == j);
        if (j >= 0 && !held) {
            atomic_store(&l->jobs[j].key, 0);
            atomic_store(&l->jobs[j].used_bytes, 0);
            atomic_store(&l->jobs[j].swapped_bytes, 0);
            atomic_store(&l->burst_bytes, ts_ledger_burst_locked(l));
        }
        all = all && !held;
        ts_ledger_unlock(l);
    }
    return all;
}

/* ---- reserve ranges ------------------------------------------------------------ */

struct range {
    uint64_t off, len;
};

static int range_cmp(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The ranges held by live slots, sorted; returns how many (at most max). */
static size_t held_ranges(const struct ts_ledgers *s, struct range *out, size_t max)
{
    size_t n = 0;
    for (unsigned g = 0; g < s->count; g++) {
        for (int i = 0; i < TS_LEDGER_PROCS && n < max; i++) {
            const struct ts_ledger_proc *p = &s->l[g]->procs[i];
            if (atomic_load(&p->pid) != 0 && p->swap_len > 0)
                out[n++] = (struct range){p->swap_offset, p->swap_len};
        }
    }
    qsort(out, n, sizeof(*out), range_cmp);
    return n;
}

bool ts_ledgers_swap_alloc(const struct ts_ledgers *s, uint64_t len, uint64_t *off)
{
    if (s->swap_bytes == 0 || len == 0 || len > s->swap_bytes)
        return false;
    static struct range r[TS_GPUS_MAX * TS_LEDGER_PROCS]; /* broker thread only */
    size_t n = held_ranges(s, r, TS_ARRAY_LEN(r));
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].off >= at && r[i].off - at >= len)
            break;
        if (r[i].off + r[i].len > at)
            at = r[i].off + r[i].len;
    }
    if (at > s->swap_bytes || s->swap_bytes - at < len)
        return false;
    *off = at;
    return true;
}

uint64_t ts_ledgers_job_swapped(const struct ts_ledgers *s, int64_t id, int attempt)
{
    uint64_t sum = 0;
    for (unsigned g = 0; g < s->count; g++) {
        int j = ts_ledger_find_job(s->l[g], ts_ledger_key(id, attempt));
        if (j >= 0)
            sum += atomic_load(&s->l[g]->jobs[j].swapped_bytes);
    }
    return sum;
}

uint64_t ts_ledgers_swap_used(const struct ts_ledgers *s)
{
    uint64_t u = 0;
    for (unsigned g = 0; g < s->count; g++)
        for (int i = 0; i < TS_LEDGER_PROCS; i++)
            if (atomic_load(&s->l[g]->procs[i].pid) != 0)
                u += s->l[g]->procs[i].swap_len;
    return u;
}

void ts_ledgers_swap_trim(const struct ts_ledgers *s)
{
    if (s->swap_map == NULL || s->swap_pinned)
        return;
    static struct range r[TS_GPUS_MAX * TS_LEDGER_PROCS]; /* broker thread only */
    size_t n = held_ranges(s, r, TS_ARRAY_LEN(r));
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uint64_t at = 0;
    for (size_t i = 0; i <= n; i++) {
        uint64_t end = i < n ? r[i].off : s->swap_bytes;
        /* whole pages strictly between the ranges in use */
        uint64_t lo = (at + page - 1) / page * page, hi = end / page * page;
        if (hi > lo)
            madvise((char *)s->swap_map + lo, hi - lo, MADV_REMOVE);
        if (i < n && r[i].off + r[i].len > at)
            at = r[i].off + r[i].len;
    }
}
