/*
 * broker.c - the broker thread (broker.h): waiters served in the ledger's
 * order, room, the actions in flight, out-of-memory after a wait, processes
 * back from the reserve. Each pass hands the resolver (resolve.c), suspend,
 * resume and detach (jobswap.c) and re-pack (repack.c) their turn; they and
 * this file use broker_act.c, and nothing calls back into this file.
 */
#include "agent/daemon/broker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/abi/cuda.h"
#include "api/clock.h"
#include "api/log.h"

#define PASS_MS 50   /* a pass at least this often; a waiter's wake starts one at once */
#define REAP_MS 1000 /* dead processes' slots are freed at least this often */
#define TRIM_MS 2000 /* an unpinned reserve gives back unused pages this often */
#define WAITERS_MAX TS_LEDGER_PROCS

/* ---- actions in flight ---------------------------------------------------- */

static void collision_swapped(struct ts_broker *b, struct ts_action *x)
{
    char m[32], n[32];
    const struct ts_waiter *w = &x->w;
    ts_broker_bytes(x->bytes, m, sizeof(m));
    ts_broker_bytes(w->need, n, sizeof(n));
    ts_events_add(b->ev, x->id, x->attempt, "swapped_out",
                  "pid %d swapped out: %s moved to the host swap reserve (%s) to make room for "
                  "job %lld (pid %d needs %s on GPU %u); it comes back at its next GPU call",
                  (int)x->pid, m, x->note, (long long)w->id, (int)w->pid, n, b->s->index[w->g]);
    ts_events_add(b->ev, w->id, w->attempt, "swapped_out",
                  "job %lld (pid %d, priority %d) was swapped out (%s) to make room for pid %d: "
                  "%s on GPU %u",
                  (long long)x->id, (int)x->pid, (int)x->priority, x->note, (int)w->pid, n,
                  b->s->index[w->g]);
}

/* A swap-out acknowledged (or overdue): how it went. */
static void poll_swap(struct ts_broker *b, struct ts_action *x, int64_t now)
{
    struct ts_ledger *home = b->s->l[x->home];
    struct ts_ledger_proc *p = &home->procs[x->slot];
    bool gone = atomic_load(&p->pid) != x->pid || !ts_broker_alive(x->pid);
    bool acked = !gone && atomic_load(&p->ack_seq) == x->seq;
    if (!acked && !gone && now < x->deadline_ms)
        return;
    char why[256] = "";
    int32_t err = acked ? atomic_load(&p->swap_error) : 0;
    uint64_t moved = acked ? atomic_load(&p->moved_bytes) : 0;
    bool ok = acked && err == CUDA_SUCCESS && moved > 0;
    if (gone)
        snprintf(why, sizeof(why), "pid %d ended", (int)x->pid);
    else if (!acked)
        snprintf(why, sizeof(why), "pid %d did not answer the swap-out within %.0f s", (int)x->pid,
                 (double)(x->deadline_ms - x->started_ms) / 1000.0);
    else if (err == CUDA_ERROR_TIMEOUT)
        snprintf(why, sizeof(why), "pid %d stayed inside a GPU call", (int)x->pid);
    else if (err == CUDA_ERROR_NOT_READY)
        snprintf(why, sizeof(why), "pid %d was moving its memory already", (int)x->pid);
    else if (err != CUDA_SUCCESS)
        snprintf(why, sizeof(why), "pid %d could not swap out (CUDA error %d)", (int)x->pid,
                 (int)err);
    else if (!ok)
        snprintf(why, sizeof(why), "pid %d had nothing to move", (int)x->pid);
    /* a range that was not used is free again; one that was stays the
     * process's until it is back (swapped_in), and one it never answered
     * for, until it answers or its slot is reaped: it may still be
     * copying */
    if (acked && !ok && x->why != TS_WHY_SUSPEND)
        p->swap_len = 0;
    if (x->why == TS_WHY_COLLISION) {
        if (ok) {
            collision_swapped(b, x);
            ts_broker_room(b, x->w.g);
        } else {
            ts_log_info("swap-out for a collision did not happen: %s job=%lld", why,
                        (long long)x->id);
        }
    } else {
        ts_jobswap_done(b, x, ok, why);
    }
    x->used = false;
}

/* An ended job: done when its processes' slots on the GPU are reaped. */
static void poll_end(struct ts_broker *b, struct ts_action *x, int64_t now)
{
    struct ts_ledger *l = b->s->l[x->w.g];
    bool freed = atomic_load(&l->procs[x->slot].pid) != x->pid;
    if (!freed && now < x->deadline_ms) {
        if (!ts_broker_alive(x->pid) && ts_ledger_lock(l) == 0) {
            ts_ledger_reap_locked(l);
            ts_ledger_unlock(l);
        }
        return;
    }
    char m[32], n[32];
    const struct ts_waiter *w = &x->w;
    ts_broker_bytes(x->bytes, m, sizeof(m));
    ts_broker_bytes(w->need, n, sizeof(n));
    ts_events_add(b->ev, x->id, x->attempt, "memory_ended",
                  "%s; this job (priority %d) held %s there and goes back to the queue%s", x->note,
                  (int)x->priority, m, freed ? "" : "; its memory was not freed in time");
    ts_events_add(b->ev, w->id, w->attempt, "memory_ended",
                  "job %lld (priority %d, %s on GPU %u) was ended to make room for pid %d: %s %s",
                  (long long)x->id, (int)x->priority, m, b->s->index[w->g], (int)w->pid, n,
                  ts_broker_need_words(w->kind));
    ts_broker_room(b, w->g);
    x->used = false;
}

static void poll_actions(struct ts_broker *b)
{
    int64_t now = ts_now_ms();
    for (int k = 0; k < TS_BROKER_ACTIONS; k++) {
        struct ts_action *x = &b->act[k];
        if (!x->used)
            continue;
        if (x->kind == TS_ACT_SWAP_OUT)
            poll_swap(b, x, now);
        else
            poll_end(b, x, now);
    }
}

/* Room on ledger position g that actions in flight are making. */
static uint64_t coming(const struct ts_broker *b, unsigned g)
{
    uint64_t c = 0;
    for (int k = 0; k < TS_BROKER_ACTIONS; k++)
        if (b->act[k].used)
            c += b->act[k].frees[g];
    return c;
}

/* ---- one pass over a GPU ------------------------------------------------- */

static void report_wait(struct ts_broker *b, const struct ts_waiter *w)
{
    char n[32], f[32], u[32], h[512];
    ts_broker_holders(b, w->g, w->id, h, sizeof(h));
    ts_events_add(b->ev, w->id, w->attempt, "memory_wait",
                  "pid %d waits for %s on GPU %u (%s): %s free of %s usable; %s; resolver %s",
                  (int)w->pid, ts_broker_bytes(w->need, n, sizeof(n)), b->s->index[w->g],
                  ts_broker_need_words(w->kind),
                  ts_broker_bytes(ts_broker_free(b, w->g), f, sizeof(f)),
                  ts_broker_bytes(b->s->usable[w->g], u, sizeof(u)), h, b->resolver->name);
}

/* A wait that ended in out-of-memory (the shim bumped its job entry's
 * gaveup_seq): the waiter's job and every job holding room above its
 * request hear of it. Read from the job entry, which outlives the process
 * (a job that exits on out-of-memory at once has its slot reaped before
 * the broker runs). */
static void report_gave_up(struct ts_broker *b, unsigned g, const struct ts_ledger_job *w)
{
    struct ts_ledger *l = b->s->l[g];
    int64_t id = w->job_id;
    char n[32], h[512];
    ts_broker_bytes(atomic_load(&w->gaveup_bytes), n, sizeof(n));
    ts_broker_holders(b, g, id, h, sizeof(h));
    ts_events_add(b->ev, id, w->attempt, "out_of_memory",
                  "pid %d's allocation of %s on GPU %u failed with out-of-memory after waiting "
                  "%.1f s (--collision-wait); %s",
                  (int)atomic_load(&w->gaveup_pid), n, b->s->index[g], l->h.wait_ms / 1000.0, h);
    for (int j = 0; j < TS_LEDGER_JOBS; j++) {
        struct ts_ledger_job *job = &l->jobs[j];
        uint64_t used = atomic_load(&job->used_bytes);
        if (atomic_load(&job->key) == 0 || job->job_id == id || used <= job->request_bytes)
            continue;
        char x[32];
        ts_events_add(b->ev, job->job_id, job->attempt, "out_of_memory",
                      "job %lld's allocation of %s on GPU %u failed after waiting %.1f s while "
                      "this job held %s above its request there",
                      (long long)id, n, b->s->index[g], l->h.wait_ms / 1000.0,
                      ts_broker_bytes(used - job->request_bytes, x, sizeof(x)));
    }
}

/* Every job entry of GPU g whose gaveup_seq moved since the last look. */
static void gave_up_gpu(struct ts_broker *b, unsigned g)
{
    struct ts_ledger *l = b->s->l[g];
    for (int j = 0; j < TS_LEDGER_JOBS; j++) {
        struct ts_ledger_job *job = &l->jobs[j];
        uint64_t key = atomic_load(&job->key);
        uint32_t gs = atomic_load(&job->gaveup_seq);
        if (key == 0 || b->gaveup_key[g][j] != key) {
            b->gaveup_key[g][j] = key;
            b->gaveup_seq[g][j] = gs; /* a new entry: nothing seen yet */
        } else if (b->gaveup_seq[g][j] != gs) {
            b->gaveup_seq[g][j] = gs;
            report_gave_up(b, g, job);
        }
    }
}

static int waiter_cmp(const void *x, const void *y)
{
    const struct ts_waiter *a = x, *c = y;
    int ra = ts_ledger_need_rank(a->kind), rc = ts_ledger_need_rank(c->kind);
    if (ra != rc)
        return ra < rc ? -1 : 1;
    return a->since_ns < c->since_ns ? -1 : a->since_ns > c->since_ns;
}

static void pass_gpu(struct ts_broker *b, unsigned g)
{
    struct ts_ledger *l = b->s->l[g];
    gave_up_gpu(b, g);
    uint64_t used = ts_ledger_used(l);
    if (used < b->last_used[g])
        ts_broker_room(b, g);
    b->last_used[g] = used;
    static struct ts_waiter w[WAITERS_MAX]; /* broker thread only */
    size_t nw = 0;
    for (int i = 0; i < TS_LEDGER_PROCS; i++) {
        struct ts_ledger_proc *p = &l->procs[i];
        pid_t pid = atomic_load(&p->pid);
        int64_t id;
        int attempt;
        if (pid == 0 || !ts_broker_job_of(l, i, &id, &attempt)) {
            b->waiting[g][i] = 0;
            continue;
        }
        uint64_t need = atomic_load(&p->need_bytes);
        if (need == 0 || !ts_broker_alive(pid)) {
            b->waiting[g][i] = 0;
            continue;
        }
        struct ts_waiter *x = &w[nw++];
        *x = (struct ts_waiter){g,
                                i,
                                pid,
                                need,
                                atomic_load(&p->need_kind),
                                atomic_load(&p->need_since_ns),
                                id,
                                attempt,
                                l->jobs[p->job].priority};
        if (b->waiting[g][i] != pid) {
            b->waiting[g][i] = pid;
            report_wait(b, x);
        }
    }
    qsort(w, nw, sizeof(w[0]), waiter_cmp);
    uint64_t free = ts_broker_free(b, g), incoming = coming(b, g), sum = 0;
    for (size_t k = 0; k < nw; k++) {
        sum += w[k].need;
        if (sum <= free) {
            ts_broker_room(b, g); /* it fits: the waiter looks again */
            continue;
        }
        if (sum <= free + incoming)
            continue; /* room is on its way */
        uint64_t missing = sum - free - incoming;
        uint64_t got = b->resolver->resolve(b, &w[k], missing);
        incoming += got;
        if (got < missing && ts_ledger_need_rank(w[k].kind) > 0)
            break; /* first come, first served: nobody behind it jumps ahead */
    }
    b->last_used[g] = ts_ledger_used(l);
}

/* Processes that came back from the reserve: their range is free. */
static void swapped_in(struct ts_broker *b, unsigned g)
{
    struct ts_ledger *l = b->s->l[g];
    for (int i = 0; i < TS_LEDGER_PROCS; i++) {
        struct ts_ledger_proc *p = &l->procs[i];
        pid_t pid = atomic_load(&p->pid);
        if (pid == 0 || p->swap_len == 0 || atomic_load(&p->ack_seq) != atomic_load(&p->cmd_seq) ||
            atomic_load(&p->swap_state) != TS_SWAP_RESIDENT || ts_broker_busy_pid(b, pid))
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

/* ---- the thread ----------------------------------------------------------- */

static void housekeeping(struct ts_broker *b)
{
    int64_t now = ts_now_ms();
    if (now >= b->next_reap_ms) {
        b->next_reap_ms = now + REAP_MS;
        for (unsigned g = 0; g < b->s->count; g++)
            if (ts_ledger_lock(b->s->l[g]) == 0) {
                ts_ledger_reap_locked(b->s->l[g]);
                ts_ledger_unlock(b->s->l[g]);
            }
    }
    if (now >= b->next_trim_ms) {
        b->next_trim_ms = now + TRIM_MS;
        ts_ledgers_swap_trim(b->s);
    }
}

static void *broker_main(void *arg)
{
    struct ts_broker *b = arg;
    unsigned turn = 0;
    uint32_t seen[TS_GPUS_MAX] = {0};
    while (!atomic_load(&b->a->stop)) {
        for (unsigned g = 0; g < b->s->count; g++)
            seen[g] = atomic_load(&b->s->l[g]->agent_wake);
        housekeeping(b);
        poll_actions(b);
        for (unsigned g = 0; g < b->s->count; g++) {
            pass_gpu(b, g);
            swapped_in(b, g);
        }
        ts_jobswap_pass(b);
        ts_repack_pass(b);
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
    b->jobtab = &a->jobtab;
    b->s = &a->ledgers;
    b->ev = a->events;
    b->swap_idle_ns = (uint64_t)a->cfg.swap_idle * 1000000000ull;
    b->quantum_ns = (uint64_t)a->cfg.swap_quantum * 1000000000ull;
    b->priority_idle_ns = (uint64_t)a->cfg.priority_idle * 1000000000ull;
    b->collision_grace_s = (int)a->cfg.collision_grace;
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
