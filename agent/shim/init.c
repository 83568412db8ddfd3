/*
 * init.c - the process's registration with its job's ledgers, done once
 * at the first hooked call (pthread_once) and again, lazily, in a forked
 * child; the cuInit hook; logging.
 *
 * Environment (set by the agent): TESSERA_SHIM_DIR, the folder holding
 * dev<K>.ledger for each CUDA ordinal K the job sees; TESSERA_SHIM_JOB,
 * "<job id>:<attempt>". Unset dir: pass-through. Set but unusable: the
 * shim fails closed (cuInit CUDA_ERROR_NOT_INITIALIZED, allocations
 * CUDA_ERROR_OUT_OF_MEMORY) and says so once on stderr.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/shim/objects.h"
#include "agent/shim/shim.h"
#include "agent/shim/swap.h"

struct ts_shim ts_shim;
_Atomic int ts_shim_ready;
_Atomic uint64_t ts_shim_last_touch;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static struct ts_ledger *swap_ledgers[TS_SHIM_MAX_DEVS];
static struct ts_ledger_proc *swap_procs[TS_SHIM_MAX_DEVS];

void ts_shim_log(const char *fmt, ...)
{
    if (!ts_shim.log)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';
    /* one write, so lines of concurrent processes do not interleave */
    ssize_t w = write(STDERR_FILENO, "tessera-cuda: ", 14);
    w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
}

static void say_broken(const char *dir, const char *why)
{
    char buf[512];
    int n = snprintf(buf, sizeof(buf),
                     "tessera-cuda: could not register with the GPU ledgers in %s: %s; "
                     "CUDA calls of this process fail\n",
                     dir, why);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf));
        (void)w;
    }
}

static bool parse_job(const char *s, uint64_t *key)
{
    if (s == NULL)
        return false;
    char *end;
    errno = 0;
    long long id = strtoll(s, &end, 10);
    if (errno || end == s || *end != ':' || id <= 0)
        return false;
    const char *a = end + 1;
    long att = strtol(a, &end, 10);
    if (errno || end == a || *end != '\0' || att < 0 || att > INT32_MAX)
        return false;
    *key = ts_ledger_key(id, (int32_t)att);
    return true;
}

/* Under the lock: a free process slot of `job` for this process. */
struct ts_ledger_proc *ts_shim_claim_slot(struct ts_ledger *l, int job, pid_t pid, uint64_t ticks)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < TS_LEDGER_PROCS; i++) {
            struct ts_ledger_proc *p = &l->procs[i];
            if (atomic_load(&p->pid) != 0)
                continue;
            memset((char *)p + sizeof(p->pid), 0, sizeof(*p) - sizeof(p->pid));
            p->job = job;
            p->start_ticks = ticks;
            atomic_store(&p->last_call_ns, ts_ledger_now_ns());
            atomic_store_explicit(&p->pid, pid, memory_order_release);
            return p;
        }
        ts_ledger_reap_locked(l); /* full: dead processes' slots come back */
    }
    return NULL;
}

static void release_slots(void)
{
    for (int k = 0; k < ts_shim.ndevs; k++) {
        struct ts_shim_dev *d = &ts_shim.dev[k];
        if (d->proc != NULL && ts_ledger_lock(d->l) == 0) {
            atomic_store(&d->proc->pid, 0);
            ts_ledger_unlock(d->l);
        }
        ts_ledger_close(d->l);
        memset(d, 0, sizeof(*d));
    }
    ts_shim.ndevs = 0;
}

/* Returns NULL when registered, or why not. */
static const char *register_job(const char *dir)
{
    uint64_t key;
    char who[64] = "";
    const char *job = getenv("TESSERA_SHIM_JOB");
    if (strcmp(dir, TS_SHIM_SANDBOX_DIR) == 0) {
        /* a sandbox: the agent wrote who the job is beside its ledgers */
        int fd = open(TS_SHIM_SANDBOX_DIR "/job", O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, who, sizeof(who) - 1) : -1;
        if (fd >= 0)
            close(fd);
        who[n > 0 ? n : 0] = '\0';
        who[strcspn(who, "\n")] = '\0';
        job = who;
    }
    if (!parse_job(job, &key))
        return "TESSERA_SHIM_JOB is not <job id>:<attempt>";
    ts_shim.key = key;
    snprintf(ts_shim.dir, sizeof ts_shim.dir, "%s", dir);
    pid_t pid = ts_ledger_host_pid();
    uint64_t ticks = ts_ledger_start_ticks(getpid());
    for (int k = 0; k < TS_SHIM_MAX_DEVS; k++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/dev%d.ledger", dir, k);
        struct ts_ledger *l = ts_ledger_open(path);
        if (l == NULL) {
            if (errno == ENOENT && k > 0)
                break;
            return errno == EPROTO ? "a ledger of another version or size"
                                   : "a ledger could not be opened";
        }
        struct ts_shim_dev *d = &ts_shim.dev[k];
        d->l = l;
        ts_shim.ndevs = k + 1;
        int j = ts_ledger_find_job(l, key);
        if (j < 0)
            return "the job has no slot in the ledger";
        d->job = &l->jobs[j];
        if (ts_ledger_lock(l) != 0)
            return "the ledger's lock is not recoverable";
        d->proc = ts_shim_claim_slot(l, j, pid, ticks);
        ts_ledger_unlock(l);
        if (d->proc == NULL)
            return "the ledger has no free process slot";
    }
    ts_shim.wait_ms = ts_shim.dev[0].l->h.wait_ms;
    return NULL;
}

static void atfork_prepare(void);
static void atfork_parent(void);
static void atfork_child(void);

static void install_atfork(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void do_init(void)
{
    ts_hooks_resolve();
    pthread_once(&atfork_once, install_atfork);
    ts_shim.log = getenv("TESSERA_SHIM_LOG") != NULL;
    void *lib = dlopen(ts_shim_driver_path(), RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL)
        ts_cu_load(&ts_shim.cu, lib, ts_real_dlsym);
    const char *dir = getenv("TESSERA_SHIM_DIR");
    if (access(TS_SHIM_SANDBOX_DIR "/dev0.ledger", F_OK) == 0)
        dir = TS_SHIM_SANDBOX_DIR; /* a sandbox: not the job's environment to change */
    if (dir == NULL || dir[0] == '\0') {
        ts_shim.mode = TS_SHIM_OFF;
        return;
    }
    const char *why = register_job(dir);
    if (why != NULL) {
        release_slots();
        ts_shim.mode = TS_SHIM_BROKEN;
        say_broken(dir, why);
        return;
    }
    ts_shim.mode = TS_SHIM_ON;
    for (int k = 0; k < ts_shim.ndevs; k++) {
        swap_ledgers[k] = ts_shim.dev[k].l;
        swap_procs[k] = ts_shim.dev[k].proc;
    }
    struct ts_ledger *l0 = ts_shim.dev[0].l;
    struct ts_swap_config cfg = {
        .cu = &ts_shim.cu,
        .ndevices = ts_shim.ndevs,
        .charge = NULL,
        .uncharge = NULL,
        .reserve_path = l0->h.swap_path,
        .reserve_bytes = l0->h.swap_bytes,
        .reserve_pinned = (l0->h.flags & TS_LH_SWAP_PINNED) != 0,
        .ledgers = swap_ledgers,
        .procs = swap_procs,
        .home = ts_shim.dev[0].proc,
        .wait_ms = ts_shim.wait_ms,
        .log = ts_shim.log ? ts_shim_log : NULL,
        .move = ts_shim_move,
    };
    ts_charge_fill_swap_config(&cfg);
    if (ts_swap_init(&cfg) != 0)
        ts_shim_log("swap engine not started: allocations are not swappable");
    ts_shim_log("registered pid=%d devices=%d wait_ms=%" PRIu32, (int)ts_ledger_host_pid(),
                ts_shim.ndevs, ts_shim.wait_ms);
}

static void run_init(void)
{
    do_init();
    atomic_store_explicit(&ts_shim_ready, 1, memory_order_release);
}

void ts_shim_init_slow(void)
{
    pthread_once(&init_once, run_init);
}

void ts_shim_touch_slow(uint64_t now)
{
    atomic_store_explicit(&ts_shim_last_touch, now, memory_order_relaxed);
    if (ts_shim.mode != TS_SHIM_ON)
        return;
    for (int k = 0; k < ts_shim.ndevs; k++)
        atomic_store_explicit(&ts_shim.dev[k].proc->last_call_ns, now, memory_order_relaxed);
}

int ts_shim_current_ordinal(void)
{
    CUdevice d;
    ts_obj_sync();
    if (ts_shim.cu.cuCtxGetDevice == NULL || ts_shim.cu.cuCtxGetDevice(&d) != CUDA_SUCCESS)
        return -1;
    /* a CUdevice is its ordinal, as the driver hands them out; the job's
     * device index differs from it once the process moved */
    return ts_obj_virtual((int)d);
}

/* ---- fork: a child registers again, lazily, in its own slots ---- */

static void atfork_prepare(void)
{
    ts_alloc_lock_for_fork(true);
}

static void atfork_parent(void)
{
    ts_alloc_lock_for_fork(false);
}

static void atfork_child(void)
{
    ts_alloc_reset_in_child();
    ts_obj_fork_child();
    /* the parent's slots and charges stay the parent's: drop our view */
    for (int k = 0; k < ts_shim.ndevs; k++)
        ts_ledger_close(ts_shim.dev[k].l);
    memset(ts_shim.dev, 0, sizeof(ts_shim.dev));
    ts_shim.ndevs = 0;
    ts_shim.mode = TS_SHIM_OFF;
    atomic_store(&ts_shim_last_touch, 0);
    init_once = (pthread_once_t)PTHREAD_ONCE_INIT;
    atomic_store(&ts_shim_ready, 0);
}

/* ---- cuInit ---- */

TS_EXPORT CUresult cuInit(unsigned int flags)
{
    ts_shim_init();
    if (ts_shim.mode == TS_SHIM_BROKEN)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ts_real[TS_H_cuInit] == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    return TS_REAL(cuInit)(flags);
}
