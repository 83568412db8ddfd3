/*
 * broker.c - the broker thread (broker.h): waiters, room, swap commands,
 * swapped-in processes, suspend and resume.
 */
#include "agent/daemon/broker.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/log.h"

#define PASS_MS 50 /* a pass at least this often; a waiter's wake starts one at once */
#define REQUESTS_MAX 16

const char *ts_broker_bytes(uint64_t bytes, char *buf, size_t len)
{
    if (bytes >= (1ull << 30))
        snprintf(buf, len, "%.2f GiB", (double)bytes / (double)(1ull << 30));
    else
        snprintf(buf, len, "%.1f MiB", (double)bytes / (double)(1ull << 20));
    return buf;
}

bool ts_broker_job_of(const struct ts_ledger *l, int slot, int64_t *id, int *attempt)
{
    int j = l->procs[slot].job;
    if (j < 0 || j >= TS_LEDGER_JOBS || atomic_load(&l->jobs[j].key) == 0)
        return false;
    *id = l->jobs[j].job_id;
    *attempt = l->jobs[j].attempt;
    return true;
}

void ts_broker_room(struct ts_broker *b, unsigned g)
{
    atomic_fetch_add(&b->s->l[g]->room_seq, 1);
    ts_futex_wake(&b->s->l[g]->room_seq);
}

uint64_t ts_broker_free(const struct ts_broker *b, unsigned g)
{
    uint64_t used = ts_ledger_used(b->s->l[g]);
    return used < b->s->usable[g] ? b->s->usable[g] - used : 0;
}

/* The job's GPUs in CUDA order (device 0 first) from the job list. */
static unsigned job_gpus(struct ts_broker *b, int64_t id, int attempt, unsigned *out)
{
    unsigned n = 0;
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_agent_find(b->a, id, attempt);
    if (j != NULL) {
        n = j->ngpus;
        memcpy(out, j->gpus, n * sizeof(*out));
    }
    pthread_mutex_unlock(&b->a->mu);
    return n;
}

static bool alive(pid_t pid)
{
    return kill(pid, 0) == 0 || errno != ESRCH;
}

enum ts_swap_result ts_broker_swap_out(struct ts_broker *b, int64_t id, int attempt, pid_t pid,
                                       bool hold, uint64_t *moved, char *why, size_t whylen)
{
    unsigned gpus[TS_GPUS_MAX];
    unsigned n = job_gpus(b, id, attempt, gpus);
    *moved = 0;
    struct ts_ledger *home = n > 0 ? ts_ledgers_get(b->s, gpus[0]) : NULL;
    int hi = home != NULL ? ts_ledger_find_proc(home, pid) : -1;
    if (hi < 0) {
        snprintf(why, whylen, "pid %d has no slot in the ledger of its job's first GPU", (int)pid);
        return TS_SWAP_FAILURE;
    }
    struct ts_ledger_proc *p = &home->procs[hi];
    if (atomic_load(&p->swap_state) == TS_SWAP_OUT)
        return TS_SWAP_DONE; /* already out */
    uint64_t total = 0;
    for (unsigned k = 0; k < n; k++) {
        struct ts_ledger *l = ts_ledgers_get(b->s, gpus[k]);
        int i = l != NULL ? ts_ledger_find_proc(l, pid) : -1;
        if (i >= 0)
            total += atomic_load(&l->procs[i].used_bytes);
    }
    if (total == 0)
        return TS_SWAP_DONE;
    uint64_t off;
    if (!ts_ledgers_swap_alloc(b->s, total, &off)) {
        char a[32], c[32], d[32];
        snprintf(why, whylen, "the host swap reserve has no room for %s: %s of %s in use",
                 ts_broker_bytes(total, a, sizeof(a)),
                 ts_broker_bytes(ts_ledgers_swap_used(b->s), c, sizeof(c)),
                 ts_broker_bytes(b->s->swap_bytes, d, sizeof(d)));
        return TS_SWAP_NO_ROOM;
    }
    p->swap_offset = off;
    p->swap_len = total;
    atomic_store(&p->cmd, hold ? TS_CMD_SUSPEND : TS_CMD_SWAP_OUT);
    uint32_t seq = atomic_fetch_add(&p->cmd_seq, 1) + 1;
    ts_futex_wake(&p->cmd_seq);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        uint32_t ack = atomic_load(&p->ack_seq);
        if (ack == seq)
            break;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        int64_t ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (ms >= TS_BROKER_ACK_MS || !alive(pid) || atomic_load(&b->a->stop)) {
            snprintf(why, whylen, "pid %d did not answer the swap-out within %d s", (int)pid,
                     TS_BROKER_ACK_MS / 1000);
            if (atomic_load(&p->pid) == pid)
                p->swap_len = 0;
            return TS_SWAP_FAILURE;
        }
        ts_futex_wait(&p->ack_seq, ack, 100);
    }
    if (atomic_load(&p->swap_state) != TS_SWAP_OUT) {
        snprintf(why, whylen, "pid %d could not swap out (CUDA error %d)", (int)pid,
                 (int)atomic_load(&p->swap_error));
        p->swap_len = 0;
        return TS_SWAP_FAILURE;
    }
    *moved = total;
    return TS_SWAP_DONE;
}

/* ---- one pass over a GPU ------------------------------------------------- */

static void report_wait(struct ts_broker *b, unsigned g, int i, uint64_t need)
{
    struct ts_ledger *l = b->s->l[g];
    int64_t id;
    int attempt;
    if (!ts_broker_job_of(l, i, &id, &attempt))
        return;
    char n[32], f[32], u[32], br[32];
    ts_events_add(b->ev, id, attempt, "memory_wait",
                  "pid %d waits for %s on GPU %u: %s free of %s usable, %s borrowed above "
                  "requests; resolver %s",
                  (int)atomic_load(&l->procs[i].pid), ts_broker_bytes(need, n, sizeof(n)),
                  b->s->index[g], ts_broker_bytes(ts_broker_free(b, g), f, sizeof(f)),
                  ts_broker_bytes(b->s->usable[g], u, sizeof(u)),
                  ts_broker_bytes(atomic_load(&l->burst_bytes), br, sizeof(br)), b->resolver->name);
}

static void pass_gpu(struct ts_broker *b, unsigned g)
{
    struct ts_ledger *l = b->s->l[g];
    uint64_t used = ts_ledger_used(l);
    if (used < b->last_used[g])
        ts_broker_room(b, g);
    b->last_used[g] = used;
    bool any = false;
    for (int i = 0; i < TS_LEDGER_PROCS; i++) {
        struct ts_ledger_proc *p = &l->procs[i];
        pid_t pid = atomic_load(&p->pid);
        uint64_t need = pid != 0 ? atomic_load(&p->need_bytes) : 0;
        if (need == 0 || !alive(pid)) {
            b->waiting[g][i] = 0;
            continue;
        }
        any = true;
        /* new bursts fail fast while someone waits for room */
        atomic_store(&l->burst_closed, 1);
        if (b->waiting[g][i] != pid) {
            b->waiting[g][i] = pid;
            report_wait(b, g, i, need);
        }
        uint64_t free = ts_broker_free(b, g);
        if (need > free) {
            b->resolver->resolve(b, g, i, need - free);
            free = ts_broker_free(b, g);
        }
        if (need <= free)
            ts_broker_room(b, g); /* the waiter looks again */
    }
    if (!any)
        atomic_store(&l->burst_closed, 0);
    b->last_used[g] = ts_ledger_used(l);
}

/* Swapped-out processes that are resident again: their range is free. */
static void swapped_in(struct ts_broker *b, unsigned g)
{
    struct ts_ledger *l = b->s->l[g];
    for (int i = 0; i < TS_LEDGER_PROCS; i++) {
        struct ts_ledger_proc *p = &l->procs[i];
        pid_t pid = atomic_load(&p->pid);
        if (pid == 0 || p->swap_len == 0 || atomic_load(&p->ack_seq) != atomic_load(&p->cmd_seq) ||
            atomic_load(&p->swap_state) != TS_SWAP_RESIDENT)
            continue;
        int64_t id;
        int attempt;
        char x[32];
        if (ts_broker_job_of(l, i, &id, &attempt))
            ts_events_add(b->ev, id, attempt, "swapped_in",
                          "pid %d is back on its GPUs: %s from the host swap reserve", (int)pid,
                          ts_broker_bytes(p->swap_len, x, sizeof(x)));
        p->swap_len = 0;
    }
}

/* ---- suspend and resume ---------------------------------------------------- */

struct request {
    int64_t id;
    int attempt;
    pid_t pgid;
    bool shim, resume;
    unsigned gpu0;
};

static size_t requests(struct ts_broker *b, struct request *out)
{
    size_t n = 0;
    pthread_mutex_lock(&b->a->mu);
    for (struct ts_ajob *j = b->a->jobs; j != NULL && n < REQUESTS_MAX; j = j->next) {
        if (j->phase != TS_AJOB_RUNNING || j->stopping || j->suspend_failed)
            continue;
        if (j->want_suspend != j->suspended)
            out[n++] = (struct request){j->id,   j->attempt,   j->pid,
                                        j->shim, j->suspended, j->ngpus > 0 ? j->gpus[0] : 0};
    }
    pthread_mutex_unlock(&b->a->mu);
    return n;
}

/* The job's processes: live slots of its home ledger. */
static size_t job_procs(struct ts_broker *b, const struct request *r, struct ts_ledger **home,
                        pid_t *pids, size_t max)
{
    *home = ts_ledgers_get(b->s, r->gpu0);
    int j = *home != NULL ? ts_ledger_find_job(*home, ts_ledger_key(r->id, r->attempt)) : -1;
    size_t n = 0;
    for (int i = 0; j >= 0 && i < TS_LEDGER_PROCS && n < max; i++)
        if (atomic_load(&(*home)->procs[i].pid) != 0 && (*home)->procs[i].job == j)
            pids[n++] = atomic_load(&(*home)->procs[i].pid);
    return n;
}

static uint64_t job_swapped(struct ts_broker *b, int64_t id, int attempt)
{
    uint64_t sum = 0;
    for (unsigned g = 0; g < b->s->count; g++) {
        int j = ts_ledger_find_job(b->s->l[g], ts_ledger_key(id, attempt));
        if (j >= 0)
            sum += atomic_load(&b->s->l[g]->jobs[j].swapped_bytes);
    }
    return sum;
}

static void resume_procs(struct ts_broker *b, const struct request *r)
{
    struct ts_ledger *home;
    pid_t pids[TS_LEDGER_PROCS];
    size_t n = job_procs(b, r, &home, pids, TS_LEDGER_PROCS);
    for (size_t k = 0; k < n; k++) {
        struct ts_ledger_proc *p = &home->procs[ts_ledger_find_proc(home, pids[k])];
        if (atomic_load(&p->swap_state) != TS_SWAP_OUT)
            continue;
        atomic_store(&p->cmd, TS_CMD_SWAP_IN);
        atomic_fetch_add(&p->cmd_seq, 1);
        ts_futex_wake(&p->cmd_seq);
    }
}

static void suspend(struct ts_broker *b, const struct request *r)
{
    char why[512] = "", x[32];
    uint64_t total = 0;
    if (!r->shim) {
        snprintf(why, sizeof(why), "the job runs without the shim (whole GPUs): cannot swap it");
    } else if (b->s->swap_bytes == 0) {
        snprintf(why, sizeof(why), "this node has no host swap reserve (--swap-reserve)");
    } else {
        struct ts_ledger *home;
        pid_t pids[TS_LEDGER_PROCS];
        size_t n = job_procs(b, r, &home, pids, TS_LEDGER_PROCS);
        for (size_t k = 0; k < n && why[0] == '\0'; k++) {
            uint64_t moved = 0;
            if (ts_broker_swap_out(b, r->id, r->attempt, pids[k], true, &moved, why, sizeof(why)) ==
                TS_SWAP_DONE)
                total += moved;
        }
    }
    bool stopped = false, rerun = false;
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_agent_find(b->a, r->id, r->attempt);
    if (j != NULL && why[0] != '\0') {
        j->suspend_failed = true;
    } else if (j != NULL && j->want_suspend && !j->stopping && !ts_ajob_final(j)) {
        kill(-j->pid, SIGSTOP);
        j->suspended = stopped = true;
        j->swapped_bytes = job_swapped(b, r->id, r->attempt);
        b->a->report_now = true;
        pthread_cond_broadcast(&b->a->cond);
    } else if (j != NULL && !j->stopping && !j->want_suspend) {
        rerun = true; /* listed with run again before it was stopped */
    }
    pthread_mutex_unlock(&b->a->mu);
    if (why[0] != '\0') {
        ts_events_add(b->ev, r->id, r->attempt, "swap_failed",
                      "could not suspend the job: %s; it is stopped instead", why);
        ts_agent_wake(b->a);
    } else if (stopped) {
        ts_events_add(b->ev, r->id, r->attempt, "suspended",
                      "suspended: %s of GPU memory moved to the host swap reserve, processes "
                      "stopped",
                      ts_broker_bytes(job_swapped(b, r->id, r->attempt), x, sizeof(x)));
    } else if (rerun) {
        resume_procs(b, r);
    }
    ts_log_debug("suspend pass job=%lld attempt=%d moved=%llu", (long long)r->id, r->attempt,
                 (unsigned long long)total);
}

static void resume(struct ts_broker *b, const struct request *r)
{
    char x[32];
    uint64_t swapped = job_swapped(b, r->id, r->attempt);
    bool go = false;
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_agent_find(b->a, r->id, r->attempt);
    if (j != NULL && j->suspended && !j->want_suspend) {
        kill(-j->pid, SIGCONT);
        j->suspended = false;
        j->swapped_bytes = 0;
        b->a->report_now = true;
        pthread_cond_broadcast(&b->a->cond);
        go = true;
    }
    pthread_mutex_unlock(&b->a->mu);
    if (!go)
        return;
    resume_procs(b, r);
    ts_events_add(b->ev, r->id, r->attempt, "resumed",
                  "resumed: processes continued, %s coming back from the host swap reserve",
                  ts_broker_bytes(swapped, x, sizeof(x)));
}

/* ---- the thread --------------------------------------------------------------- */

static void *broker_main(void *arg)
{
    struct ts_broker *b = arg;
    unsigned turn = 0;
    uint32_t seen[TS_GPUS_MAX] = {0};
    while (!atomic_load(&b->a->stop)) {
        for (unsigned g = 0; g < b->s->count; g++) {
            seen[g] = atomic_load(&b->s->l[g]->agent_wake);
            pass_gpu(b, g);
            swapped_in(b, g);
        }
        struct request req[REQUESTS_MAX];
        size_t n = requests(b, req);
        for (size_t k = 0; k < n; k++) {
            if (req[k].resume)
                resume(b, &req[k]);
            else
                suspend(b, &req[k]);
        }
        if (b->s->count == 0) {
            struct timespec ts = {0, PASS_MS * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        /* a waiter bumps agent_wake of its GPU: wait on one in turn */
        unsigned g = turn++ % b->s->count;
        ts_futex_wait(&b->s->l[g]->agent_wake, seen[g],
                      b->s->count == 1 ? PASS_MS : PASS_MS / 2 + 1);
    }
    return NULL;
}

int ts_broker_start(struct ts_agent *a)
{
    struct ts_broker *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return -1;
    b->a = a;
    b->s = &a->ledgers;
    b->ev = a->events;
    b->swap_idle_ns = (uint64_t)a->cfg.swap_idle * 1000000000ull;
    enum ts_ledger_collision c = ts_ledgers_collision_parse(a->cfg.collision);
    b->resolver = c == TS_COLLISION_PRIORITY ? &ts_resolver_priority
                  : c == TS_COLLISION_SWAP   ? &ts_resolver_swap
                                             : &ts_resolver_wait;
    for (unsigned g = 0; g < b->s->count; g++)
        b->last_used[g] = ts_ledger_used(b->s->l[g]);
    if (pthread_create(&b->thread, NULL, broker_main, b) != 0) {
        free(b);
        return -1;
    }
    a->broker = b;
    return 0;
}

void ts_broker_join(struct ts_agent *a)
{
    if (a->broker == NULL)
        return;
    pthread_join(a->broker->thread, NULL);
    free(a->broker);
    a->broker = NULL;
}
