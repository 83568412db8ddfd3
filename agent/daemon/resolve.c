/*
 * resolve.c - the collision resolvers (broker.h): what the broker does for
 * a process that waits for room on a GPU.
 *
 *   wait:     nothing more than the broker does for everyone (bursts closed
 *             while someone waits, room_seq bumped whenever memory frees);
 *             the shim gives up after the ledger's wait_ms.
 *   priority: end the process holding burst memory on the GPU that is
 *             lowest in priority, then longest idle, then most borrowed;
 *             only processes of jobs above their request, never of the
 *             waiter's own job; SIGKILL, then wait until its slot is
 *             reaped and the GPU's figure is down. Again while room misses.
 *   swap:     ask an idle burst holder (swap accepted, no GPU call for
 *             --swap-idle, lowest priority first) to swap out to the host
 *             reserve; with no one idle, a full reserve or a failed swap,
 *             fall back to priority.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agent/daemon/broker.h"
#include "api/log.h"

#define ROUNDS_MAX 16

struct victim {
    int slot;
    pid_t pid;
    int32_t priority;
    uint64_t last_call_ns, borrowed, used;
    int64_t id;
    int attempt;
};

/* Whether a comes before b as a victim. */
static bool before(const struct victim *a, const struct victim *b)
{
    if (a->priority != b->priority)
        return a->priority < b->priority;
    if (a->last_call_ns != b->last_call_ns)
        return a->last_call_ns < b->last_call_ns;
    return a->borrowed > b->borrowed;
}

/* The first burst holder on ledger position g to act on for waiter w. */
static bool pick(struct ts_broker *b, unsigned g, int w, bool swap, struct victim *out)
{
    struct ts_ledger *l = b->s->l[g];
    int wj = l->procs[w].job;
    uint64_t now = ts_ledger_now_ns();
    bool found = false;
    for (int i = 0; i < TS_LEDGER_PROCS; i++) {
        struct ts_ledger_proc *p = &l->procs[i];
        pid_t pid = atomic_load(&p->pid);
        int j = p->job;
        if (pid == 0 || i == w || j == wj || j < 0 || j >= TS_LEDGER_JOBS)
            continue;
        struct ts_ledger_job *job = &l->jobs[j];
        uint64_t used = atomic_load(&p->used_bytes), jused = atomic_load(&job->used_bytes);
        if (atomic_load(&job->key) == 0 || used == 0 || jused <= job->request_bytes)
            continue; /* holds nothing here, or its job is within its request */
        if (kill(pid, 0) != 0 && errno == ESRCH)
            continue;
        uint64_t last = atomic_load(&p->last_call_ns);
        if (swap) {
            if (!(job->flags & TS_LJ_SWAP_OK) || atomic_load(&p->need_bytes) != 0 ||
                atomic_load(&p->swap_state) != TS_SWAP_RESIDENT || now - last < b->swap_idle_ns ||
                last > now)
                continue;
        }
        struct victim v = {i,    pid,         job->priority, last, jused - job->request_bytes,
                           used, job->job_id, job->attempt};
        if (!found || before(&v, out)) {
            *out = v;
            found = true;
        }
    }
    return found;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until v's slot on l is reaped (bounded). */
static bool wait_freed(struct ts_broker *b, struct ts_ledger *l, const struct victim *v)
{
    int64_t until = mono_ms() + TS_BROKER_FREE_MS;
    while (mono_ms() < until && !atomic_load(&b->a->stop)) {
        if (ts_ledger_lock(l) == 0) {
            ts_ledger_reap_locked(l);
            ts_ledger_unlock(l);
        }
        if (atomic_load(&l->procs[v->slot].pid) != v->pid)
            return true;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* The priority resolver, also the fallback of swap (because: why swapping
 * did not do, or NULL). */
static void end_holders(struct ts_broker *b, unsigned g, int w, const char *because)
{
    struct ts_ledger *l = b->s->l[g];
    pid_t wpid = atomic_load(&l->procs[w].pid);
    int64_t wid;
    int watt;
    if (!ts_broker_job_of(l, w, &wid, &watt))
        return;
    for (int round = 0; round < ROUNDS_MAX; round++) {
        uint64_t need = atomic_load(&l->procs[w].need_bytes);
        if (atomic_load(&l->procs[w].pid) != wpid || need == 0 || need <= ts_broker_free(b, g))
            return;
        struct victim v;
        if (!pick(b, g, w, false, &v)) {
            ts_log_debug("no burst holder to end on gpu=%u for pid=%d", b->s->index[g], (int)wpid);
            return;
        }
        char x[32], y[32];
        ts_broker_bytes(v.borrowed, x, sizeof(x));
        ts_broker_bytes(need, y, sizeof(y));
        kill(v.pid, SIGKILL);
        bool freed = wait_freed(b, l, &v);
        ts_events_add(b->ev, v.id, v.attempt, "memory_ended",
                      "ended pid %d holding %s above its request on GPU %u for job %lld "
                      "(pid %d needs %s)%s%s%s",
                      (int)v.pid, x, b->s->index[g], (long long)wid, (int)wpid, y,
                      because ? "; " : "", because ? because : "",
                      freed ? "" : "; its memory was not freed in time");
        ts_events_add(b->ev, wid, watt, "memory_ended",
                      "pid %d of job %lld (priority %d, %s above its request) was ended to make "
                      "room for pid %d: %s on GPU %u",
                      (int)v.pid, (long long)v.id, (int)v.priority, x, (int)wpid, y,
                      b->s->index[g]);
        ts_broker_room(b, g);
        if (!freed)
            return;
    }
}

static void resolve_wait(struct ts_broker *b, unsigned g, int w, uint64_t missing)
{
    (void)b, (void)g, (void)w, (void)missing; /* the broker's pass does it all */
}

static void resolve_priority(struct ts_broker *b, unsigned g, int w, uint64_t missing)
{
    (void)missing;
    end_holders(b, g, w, NULL);
}

static void resolve_swap(struct ts_broker *b, unsigned g, int w, uint64_t missing)
{
    (void)missing;
    struct ts_ledger *l = b->s->l[g];
    pid_t wpid = atomic_load(&l->procs[w].pid);
    int64_t wid;
    int watt;
    if (!ts_broker_job_of(l, w, &wid, &watt))
        return;
    char why[512];
    for (int round = 0; round < ROUNDS_MAX; round++) {
        uint64_t need = atomic_load(&l->procs[w].need_bytes);
        if (atomic_load(&l->procs[w].pid) != wpid || need == 0 || need <= ts_broker_free(b, g))
            return;
        struct victim v;
        if (b->s->swap_bytes == 0) {
            end_holders(b, g, w, "this node has no host swap reserve");
            return;
        }
        if (!pick(b, g, w, true, &v)) {
            end_holders(b, g, w, "no idle burst holder could be swapped out");
            return;
        }
        uint64_t moved = 0;
        enum ts_swap_result r =
            ts_broker_swap_out(b, v.id, v.attempt, v.pid, false, &moved, why, sizeof(why));
        char x[32], y[32];
        if (r != TS_SWAP_DONE) {
            ts_events_add(b->ev, v.id, v.attempt, "swap_failed",
                          "could not swap out pid %d for job %lld on GPU %u: %s", (int)v.pid,
                          (long long)wid, b->s->index[g], why);
            end_holders(b, g, w, why);
            return;
        }
        ts_broker_bytes(moved, x, sizeof(x));
        ts_broker_bytes(need, y, sizeof(y));
        ts_events_add(b->ev, v.id, v.attempt, "swapped_out",
                      "swapped out pid %d: %s to the host swap reserve, idle %.1f s, for job %lld "
                      "(pid %d needs %s on GPU %u); back on its next GPU call",
                      (int)v.pid, x, (double)(ts_ledger_now_ns() - v.last_call_ns) / 1e9,
                      (long long)wid, (int)wpid, y, b->s->index[g]);
        ts_events_add(b->ev, wid, watt, "swapped_out",
                      "pid %d of job %lld (priority %d) was swapped out to make room for pid %d: "
                      "%s on GPU %u",
                      (int)v.pid, (long long)v.id, (int)v.priority, (int)wpid, y, b->s->index[g]);
        ts_broker_room(b, g);
    }
}

const struct ts_resolver ts_resolver_wait = {"wait", resolve_wait};
const struct ts_resolver ts_resolver_priority = {"priority", resolve_priority};
const struct ts_resolver ts_resolver_swap = {"swap", resolve_swap};
