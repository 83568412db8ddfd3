/*
 * resolve.c - the collision resolvers (broker.h): what the broker starts
 * for a process waiting for room on a GPU, beyond serving waiters in the
 * ledger's order as memory frees (which the broker does for every mode).
 *
 * Only burst holders are ever acted on: processes of jobs above their
 * request on that GPU, never of the waiter's own job, never one the broker
 * is already acting on. A waiter within its request (new memory or memory
 * coming back) is owed the room by the scheduler, so it may take from any
 * burst holder; a burst, new or coming back, takes only what the rules of
 * the mode give it.
 *
 *   wait:     nothing more: the waiter has the room when a holder frees it,
 *             first come first served; a new allocation gives up after
 *             --collision-wait (event out_of_memory naming the holders).
 *   priority: end the job of the holder lowest in priority, then longest
 *             idle, then most borrowed. A burst may end only holders of a
 *             lower priority than its own, or idle for --priority-idle.
 *             The ended job gets SIGTERM, SIGKILL after --collision-grace,
 *             and goes back to the queue (reported evicted).
 *   swap:     time-sharing. Swap out a holder that is idle (no GPU call for
 *             --swap-idle) or whose turn is over (resident for
 *             --swap-quantum since it came back or began to borrow); none
 *             before its turn is over unless idle, except for a waiter
 *             within its request. It comes back at its next GPU call, as a
 *             waiter itself. Only when the host reserve has no room for a
 *             holder does the mode fall back to priority, with an event
 *             fell_back_to_priority on both jobs.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent/daemon/broker.h"
#include "api/array.h"
#include "api/log.h"

#define VICTIMS_MAX 16 /* acted on for one waiter in one pass */

struct victim {
    int slot;
    pid_t pid;
    int32_t priority;
    uint64_t idle_ns, turn_ns, borrowed, used, job_used;
    bool idle, turn_over;
    int64_t id;
    int attempt;
};

/* Priority order: lowest priority, then longest idle, then most borrowed. */
static bool before_priority(const struct victim *a, const struct victim *b)
{
    if (a->priority != b->priority)
        return a->priority < b->priority;
    if (a->idle_ns != b->idle_ns)
        return a->idle_ns > b->idle_ns;
    return a->borrowed > b->borrowed;
}

/* Swap order: idle ones first (longest idle), then lowest priority, then
 * the longest turn. */
static bool before_swap(const struct victim *a, const struct victim *b)
{
    if (a->idle != b->idle)
        return a->idle;
    if (a->idle && a->idle_ns != b->idle_ns)
        return a->idle_ns > b->idle_ns;
    if (a->priority != b->priority)
        return a->priority < b->priority;
    return a->turn_ns > b->turn_ns;
}

/* The burst holders on w's GPU, not of w's job, not acted on. */
static size_t holders(struct ts_broker *b, const struct ts_waiter *w, bool swap, struct victim *out,
                      size_t max)
{
    struct ts_ledger *l = b->s->l[w->g];
    uint64_t now = ts_ledger_now_ns();
    size_t n = 0;
    for (int i = 0; i < TS_LEDGER_PROCS && n < max; i++) {
        struct ts_ledger_proc *p = &l->procs[i];
        pid_t pid = atomic_load(&p->pid);
        int j = p->job;
        if (pid == 0 || i == w->slot || j < 0 || j >= TS_LEDGER_JOBS)
            continue;
        struct ts_ledger_job *job = &l->jobs[j];
        uint64_t used = atomic_load(&p->used_bytes), jused = atomic_load(&job->used_bytes);
        if (atomic_load(&job->key) == 0 || job->job_id == w->id || used == 0 ||
            jused <= job->request_bytes)
            continue; /* holds nothing here, or its job is within its request */
        if (!ts_broker_alive(pid) || ts_broker_busy_job(b, job->job_id, job->attempt))
            continue;
        /* a process waiting for more room may go out too: its wait is
         * outside the gate, and what it holds may be what the queue's
         * head needs */
        if (swap &&
            (!(job->flags & TS_LJ_SWAP_OK) || atomic_load(&p->swap_state) != TS_SWAP_RESIDENT))
            continue;
        uint64_t last = atomic_load(&p->last_call_ns), turn = atomic_load(&p->turn_ns);
        struct victim v = {.slot = i,
                           .pid = pid,
                           .priority = job->priority,
                           .idle_ns = now > last ? now - last : 0,
                           .turn_ns = turn != 0 && now > turn ? now - turn : UINT64_MAX / 2,
                           .borrowed = jused - job->request_bytes,
                           .used = used,
                           .job_used = jused,
                           .id = job->job_id,
                           .attempt = job->attempt};
        v.idle = v.idle_ns >= b->swap_idle_ns;
        v.turn_over = v.turn_ns >= b->quantum_ns;
        out[n++] = v;
    }
    return n;
}

static void sort(struct victim *v, size_t n,
                 bool (*before)(const struct victim *, const struct victim *))
{
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && before(&v[k], &v[k - 1]); k--) {
            struct victim t = v[k];
            v[k] = v[k - 1];
            v[k - 1] = t;
        }
}

static bool within_request(const struct ts_waiter *w)
{
    return !(w->kind & TS_NEED_BURST);
}

/* ---- priority ------------------------------------------------------------- */

/* End holders' jobs until `missing` is covered, by the priority rules.
 * fallback: why swapping did not do (an event on both jobs per victim). */
static uint64_t end_holders(struct ts_broker *b, const struct ts_waiter *w, uint64_t missing,
                            const char *fallback)
{
    struct victim v[VICTIMS_MAX * 4];
    size_t n = holders(b, w, false, v, TS_ARRAY_LEN(v));
    sort(v, n, before_priority);
    uint64_t got = 0;
    for (size_t k = 0; k < n && got < missing; k++) {
        bool may = within_request(w) || v[k].priority < w->priority ||
                   (b->priority_idle_ns > 0 && v[k].idle_ns >= b->priority_idle_ns);
        if (!may || ts_broker_busy_job(b, v[k].id, v[k].attempt))
            continue;
        char note[320], n1[32];
        snprintf(note, sizeof(note),
                 "ended on node %s by the %s to make room for job %lld (pid %d needs %s on GPU %u, "
                 "%s%s)%s%s",
                 b->a->cfg.node,
                 fallback ? "swap resolver's fallback to priority" : "priority resolver",
                 (long long)w->id, (int)w->pid, ts_broker_bytes(w->need, n1, sizeof(n1)),
                 b->s->index[w->g], ts_broker_need_words(w->kind),
                 within_request(w)             ? ""
                 : v[k].priority < w->priority ? ", of a higher priority"
                                               : ", while this job was idle too long",
                 fallback ? "; " : "", fallback ? fallback : "");
        if (fallback != NULL) {
            ts_events_add(b->ev, v[k].id, v[k].attempt, "fell_back_to_priority",
                          "not swapped out for job %lld: %s; ended instead", (long long)w->id,
                          fallback);
            ts_events_add(b->ev, w->id, w->attempt, "fell_back_to_priority",
                          "job %lld could not be swapped out to make room for pid %d: %s; it is "
                          "ended instead",
                          (long long)v[k].id, (int)w->pid, fallback);
        }
        if (ts_broker_end_job(b, v[k].id, v[k].attempt, v[k].priority, v[k].pid, v[k].slot, w,
                              note) != NULL)
            got += v[k].job_used;
    }
    return got;
}

static uint64_t resolve_wait(struct ts_broker *b, const struct ts_waiter *w, uint64_t missing)
{
    (void)b, (void)w, (void)missing; /* the broker serves waiters as memory frees */
    return 0;
}

static uint64_t resolve_priority(struct ts_broker *b, const struct ts_waiter *w, uint64_t missing)
{
    return end_holders(b, w, missing, NULL);
}

/* ---- swap ----------------------------------------------------------------- */

static uint64_t resolve_swap(struct ts_broker *b, const struct ts_waiter *w, uint64_t missing)
{
    if (b->s->swap_bytes == 0)
        return end_holders(b, w, missing, "this node has no host swap reserve");
    struct victim v[VICTIMS_MAX * 4];
    size_t n = holders(b, w, true, v, TS_ARRAY_LEN(v));
    sort(v, n, before_swap);
    uint64_t got = 0;
    char full[256] = "";
    for (size_t k = 0; k < n && got < missing; k++) {
        if (!v[k].idle && !v[k].turn_over && !within_request(w))
            continue; /* its turn is not over: the waiter waits for it */
        bool no_room, nothing;
        char why[256];
        struct ts_action *x =
            ts_broker_swap_out(b, v[k].id, v[k].attempt, v[k].pid, TS_WHY_COLLISION, &no_room,
                               &nothing, why, sizeof(why));
        if (x == NULL) {
            if (no_room)
                snprintf(full, sizeof(full), "%s", why);
            continue;
        }
        x->w = *w;
        if (v[k].idle)
            snprintf(x->note, sizeof(x->note), "idle for %.1f s", (double)v[k].idle_ns / 1e9);
        else if (v[k].turn_ns < UINT64_MAX / 4)
            snprintf(x->note, sizeof(x->note), "its turn of %.1f s was over",
                     (double)v[k].turn_ns / 1e9);
        else
            snprintf(x->note, sizeof(x->note), "its turn was over");
        got += x->frees[w->g];
    }
    if (got < missing && full[0] != '\0')
        got += end_holders(b, w, missing - got, full);
    return got;
}

const struct ts_resolver ts_resolver_wait = {"wait", resolve_wait};
const struct ts_resolver ts_resolver_priority = {"priority", resolve_priority};
const struct ts_resolver ts_resolver_swap = {"swap", resolve_swap};
