/*
 * broker_act.c - what the broker's files share (broker.h): looks at the
 * ledgers, the job list and what is in flight, and the actions they start
 * (a swap-out, the end of a job). broker.c's thread, resolve.c, jobswap.c
 * and repack.c call these; these call none of them.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/daemon/broker.h"
#include "api/clock.h"

bool ts_broker_moving(const struct ts_broker *b, int64_t id, int attempt)
{
    for (int k = 0; k < TS_REPACK_MOVES; k++)
        if (b->mv[k].used && b->mv[k].id == id && b->mv[k].attempt == attempt)
            return true;
    return false;
}

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
    return ts_broker_moving(b, id, attempt);
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

const char *ts_broker_need_words(uint32_t kind)
{
    if (kind & TS_NEED_SWAPIN)
        return kind & TS_NEED_BURST ? "its memory coming back, above its request"
                                    : "its memory coming back, within its request";
    return kind & TS_NEED_BURST ? "a burst above its request" : "within its request";
}
