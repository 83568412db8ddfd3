/*
 * broker.c - the broker thread (broker.h): waiters served in the ledger's
 * order, room, the actions in flight, out-of-memory after a wait, processes
 * back from the reserve.
 */
#include "agent/daemon/broker.h"

#include <errno.h>
#include <signal.h>
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

bool ts_broker_alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

unsigned ts_broker_job_gpus(struct ts_broker *b, int64_t id, int attempt, unsigned *pos)
{
    unsigned n = 0;
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_jobtab_find(b->jobtab, id, attempt);
    for (unsigned k = 0; j != NULL && k < j->ngpus; k++) {
        int p = ts_ledgers_pos(b->s, j->gpus[k]);
        if (p >= 0)
            pos[n++] = (unsigned)p;
    }
    pthread_mutex_unlock(&b->a->mu);
    return n;
}

bool ts_broker_busy_job(const struct ts_broker *b, int64_t id, int attempt)
{
    for (int k = 0; k < TS_BROKER_ACTIONS; k++)
        if (b->act[k].used && b->act[k].id == id && b->act[k].attempt == attempt)
            return true;
    return ts_repack_moving(b, id, attempt);
}

bool ts_broker_busy_pid(const struct ts_broker *b, pid_t pid)
{
    for (int k = 0; k < TS_BROKER_ACTIONS; k++)
        if (b->act[k].used && b->act[k].pid == pid)
            return true;
    for (int k = 0; k < TS_REPACK_MOVES; k++)
        for (size_t i = 0; b->mv[k].used && i < b->mv[k].n; i++)
            if (b->mv[k].pid[i] == pid)
                return true;
    return false;
}

struct ts_action *ts_broker_action_new(struct ts_broker *b)
{
    for (int k = 0; k < TS_BROKER_ACTIONS; k++)
        if (!b->act[k].used) {
            memset(&b->act[k], 0, sizeof(b->act[k]));
            b->act[k].used = true;
            b->act[k].started_ms = ts_now_ms();
            return &b->act[k];
        }
    return NULL;
}

void ts_broker_holders(struct ts_broker *b, unsigned g, int64_t except, char *buf, size_t len)
{
    struct ts_ledger *l = b->s->l[g];
    size_t at = 0;
    buf[0] = '\0';
    for (int j = 0; j < TS_LEDGER_JOBS && at + 64 < len; j++) {
        struct ts_ledger_job *job = &l->jobs[j];
        uint64_t used = atomic_load(&job->used_bytes);
        if (atomic_load(&job->key) == 0 || job->job_id == except || used <= job->request_bytes)
            continue;
        char x[32];
        int n = snprintf(buf + at, len - at, "%sjob %lld (%s)",
                         at ? ", " : "held above their requests by ", (long long)job->job_id,
                         ts_broker_bytes(used - job->request_bytes, x, sizeof(x)));
        at += n > 0 ? (size_t)n : 0;
    }
    if (at == 0)
        snprintf(buf, len, "no job holds memory above its request there");
}

/* ---- starting actions ---------------------------------------------------- */

struct ts_action *ts_broker_swap_out(struct ts_broker *b, int64_t id, int attempt, pid_t pid,
                                     enum ts_action_why why, bool *no_room, bool *nothing,
                                     char *whybuf, size_t whylen)
{
    unsigned pos[TS_GPUS_MAX];
    unsigned n = ts_broker_job_gpus(b, id, attempt, pos);
    *no_room = *nothing = false;
    struct ts_ledger *home = n > 0 ? b->s->l[pos[0]] : NULL;
    int hi = home != NULL ? ts_ledger_find_proc(home, pid) : -1;
    if (hi < 0) {
        snprintf(whybuf, whylen, "pid %d has no slot in the ledger of its job's first GPU",
                 (int)pid);
        return NULL;
    }
    struct ts_ledger_proc *p = &home->procs[hi];
    uint32_t state = atomic_load(&p->swap_state);
    bool out = state == TS_SWAP_OUT && p->swap_len > 0;
    uint64_t frees[TS_GPUS_MAX] = {0}, total = 0;
    for (unsigned k = 0; k < n; k++) {
        struct ts_ledger *l = b->s->l[pos[k]];
        int i = ts_ledger_find_proc(l, pid);
        if (i >= 0) {
            frees[pos[k]] = atomic_load(&l->procs[i].used_bytes);
            total += frees[pos[k]];
        }
    }
    if (!out && total == 0) {
        *nothing = true;
        snprintf(whybuf, whylen, "pid %d holds no GPU memory", (int)pid);
        return NULL;
    }
    if (out && why != TS_WHY_SUSPEND) {
        *nothing = true; /* already out: nothing more to move */
        snprintf(whybuf, whylen, "pid %d is already out", (int)pid);
        return NULL;
    }
    struct ts_action *x = ts_broker_action_new(b);
    if (x == NULL) {
        snprintf(whybuf, whylen, "the broker has %d actions in flight", TS_BROKER_ACTIONS);
        return NULL;
    }
    if (!out) {
        uint64_t off;
        if (!ts_ledgers_swap_alloc(b->s, total, &off)) {
            char a1[32], c[32], d[32];
            snprintf(whybuf, whylen, "the host swap reserve has no room for %s: %s of %s in use",
                     ts_broker_bytes(total, a1, sizeof(a1)),
                     ts_broker_bytes(ts_ledgers_swap_used(b->s), c, sizeof(c)),
                     ts_broker_bytes(b->s->swap_bytes, d, sizeof(d)));
            *no_room = true;
            x->used = false;
            return NULL;
        }
        /* written before any other range is handed out: the allocator's
         * state is the slots */
        p->swap_offset = off;
        p->swap_len = total;
    }
    x->kind = TS_ACT_SWAP_OUT;
    x->why = why;
    x->id = id;
    x->attempt = attempt;
    x->pid = pid;
    x->home = pos[0];
    x->slot = hi;
    x->bytes = out ? p->swap_len : total;
    memcpy(x->frees, frees, sizeof(frees));
    /* a big move takes its time on a slow host: 10 s more per GiB */
    x->deadline_ms = x->started_ms + TS_BROKER_ACK_MS + (int64_t)(x->bytes >> 30) * 10000;
    int j = p->job;
    x->priority = j >= 0 && j < TS_LEDGER_JOBS ? home->jobs[j].priority : 0;
    atomic_store(&p->cmd, why == TS_WHY_SUSPEND ? TS_CMD_SUSPEND : TS_CMD_SWAP_OUT);
    x->seq = atomic_fetch_add(&p->cmd_seq, 1) + 1;
    ts_futex_wake(&p->cmd_seq);
    return x;
}

struct ts_action *ts_broker_end_job(struct ts_broker *b, int64_t id, int attempt, int32_t priority,
                                    pid_t pid, int slot, const struct ts_waiter *w,
                                    const char *note)
{
    struct ts_action *x = ts_broker_action_new(b);
    if (x == NULL)
        return NULL;
    int grace = b->collision_grace_s;
    bool found = false;
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_jobtab_find(b->jobtab, id, attempt);
    if (j != NULL && !ts_ajob_final(j) && !j->stopping) {
        if (j->grace_seconds < grace)
            grace = j->grace_seconds;
        j->evict_req = true;
        j->evict_grace = grace;
        snprintf(j->evict_msg, sizeof(j->evict_msg), "%s", note);
        found = true;
    }
    pthread_mutex_unlock(&b->a->mu);
    if (!found) {
        x->used = false;
        return NULL;
    }
    ts_jobtab_wake(b->jobtab);
    struct ts_ledger *l = b->s->l[w->g];
    int jslot = l->procs[slot].job;
    x->kind = TS_ACT_END;
    x->why = TS_WHY_COLLISION;
    x->id = id;
    x->attempt = attempt;
    x->priority = priority;
    x->pid = pid;
    x->slot = slot;
    x->bytes = jslot >= 0 && jslot < TS_LEDGER_JOBS ? atomic_load(&l->jobs[jslot].used_bytes) : 0;
    x->frees[w->g] = x->bytes;
    x->w = *w;
    x->deadline_ms = x->started_ms + grace * 1000 + TS_BROKER_FREE_MS;
    snprintf(x->note, sizeof(x->note), "%s", note);
    return x;
}

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

const char *ts_broker_need_words(uint32_t kind)
{
    if (kind & TS_NEED_SWAPIN)
        return kind & TS_NEED_BURST ? "its memory coming back, above its request"
                                    : "its memory coming back, within its request";
    return kind & TS_NEED_BURST ? "a burst above its request" : "within its request";
}

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
