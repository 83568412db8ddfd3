/*
 * charge.c - the ledger client: charging and uncharging device memory on
 * the job's ledgers (ledger.h, "Accounting", "Waiting for room" and "Agent
 * <-> shim"), and the process-local table of what each allocation was
 * charged.
 *
 * Within the request, a charge is one fetch_add on the job's used_bytes;
 * when burst_bytes is 0 it is granted without the lock. Above the request
 * it is a burst, granted under the lock while the GPU has room and no
 * waiter is ahead of it. Over the limit it is always refused. A charge
 * that does not fit asks the agent for room (need_bytes, need_kind,
 * need_since_ns, agent_wake) and waits on room_seq: a new allocation for at
 * most the ledger's wait_ms, a swap-in until its memory is back.
 *
 * The fast path and a burst race without the lock: the charger adds then
 * reads burst_bytes; the burst grantor stores burst_bytes then reads the
 * sum of used (both sequentially consistent), so at least one of them sees
 * the other and the GPU is never overcommitted.
 */
#include <stdlib.h>
#include <string.h>

#include "agent/shim/shim.h"
#include "agent/shim/swap.h"

enum { GRANTED, NO_ROOM, REFUSED };

#define POLL_MS 50 /* a waiter re-checks at least this often */

static uint64_t usable(const struct ts_ledger *l)
{
    return l->h.total_bytes > l->h.reserve_bytes ? l->h.total_bytes - l->h.reserve_bytes : 0;
}

static void sub_sat(_Atomic uint64_t *v, uint64_t n)
{
    uint64_t cur = atomic_load(v);
    while (!atomic_compare_exchange_weak(v, &cur, cur > n ? cur - n : 0))
        ;
}

/* One try. since: when this charge's wait began (UINT64_MAX before it
 * waits); *kind: TS_NEED_* of the charge as tried (swapin given). */
static int try_charge(struct ts_shim_dev *d, uint64_t bytes, bool reap, bool swapin, uint64_t since,
                      uint32_t *kind)
{
    struct ts_ledger *l = d->l;
    struct ts_ledger_job *job = d->job;
    uint64_t used = atomic_fetch_add(&job->used_bytes, bytes) + bytes;
    bool burst = used > job->request_bytes;
    *kind = (burst ? TS_NEED_BURST : 0u) | (swapin ? TS_NEED_SWAPIN : 0u);
    if (used > job->limit_bytes) {
        sub_sat(&job->used_bytes, bytes);
        return REFUSED;
    }
    if (!burst && atomic_load(&l->burst_bytes) == 0)
        return GRANTED; /* the fast path: one atomic operation */
    if (ts_ledger_lock(l) != 0) {
        sub_sat(&job->used_bytes, bytes);
        return REFUSED;
    }
    if (reap)
        ts_ledger_reap_locked(l);
    bool ok;
    if (burst) {
        /* publish the new burst figure first, then look at the room */
        bool first = used - bytes <= job->request_bytes;
        atomic_store(&l->burst_bytes, ts_ledger_burst_locked(l));
        atomic_thread_fence(memory_order_seq_cst);
        ok = ts_ledger_used(l) <= usable(l) &&
             !ts_ledger_ahead_locked(l, (int)(d->proc - l->procs), *kind, since);
        if (ok && first)
            atomic_store(&d->proc->turn_ns, ts_ledger_now_ns()); /* it starts to borrow */
    } else {
        ok = ts_ledger_used(l) <= usable(l);
    }
    if (!ok) {
        sub_sat(&job->used_bytes, bytes);
        if (burst)
            atomic_store(&l->burst_bytes, ts_ledger_burst_locked(l));
    }
    ts_ledger_unlock(l);
    return ok ? GRANTED : NO_ROOM;
}

static void stop_waiting(struct ts_ledger_proc *p)
{
    atomic_store(&p->need_bytes, 0);
    atomic_store(&p->need_since_ns, 0);
    atomic_store(&p->need_kind, 0);
}

CUresult ts_charge(int ord, uint64_t bytes, enum ts_charge_wait how)
{
    if (ts_shim.mode == TS_SHIM_BROKEN)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct ts_shim_dev *d = ts_shim_dev(ord);
    if (d == NULL || bytes == 0)
        return CUDA_SUCCESS;
    struct ts_ledger *l = d->l;
    bool swapin = how == TS_CHARGE_SWAPIN || how == TS_CHARGE_SWAPIN_TRY;
    bool bounded = how != TS_CHARGE_SWAPIN;
    uint64_t deadline = 0, since = UINT64_MAX;
    for (unsigned tries = 0;; tries++) {
        uint32_t seq = atomic_load(&l->room_seq), kind;
        /* the first retry reaps: a dead process's charges may be the room */
        int r = try_charge(d, bytes, tries == 1, swapin, since, &kind);
        if (r == GRANTED) {
            atomic_fetch_add_explicit(&d->proc->used_bytes, bytes, memory_order_relaxed);
            if (since != UINT64_MAX)
                stop_waiting(d->proc);
            return CUDA_SUCCESS;
        }
        uint64_t now = ts_ledger_now_ns();
        if (deadline == 0)
            deadline = now + (uint64_t)ts_shim.wait_ms * 1000000u;
        bool held = swapin && ts_swap_held(); /* a suspend came: the memory stays out */
        if (r == REFUSED || how == TS_CHARGE_NOWAIT || (bounded && now >= deadline) || held) {
            if (since != UINT64_MAX) {
                if (how == TS_CHARGE_WAIT) { /* the agent names the holders in an event */
                    atomic_store(&d->proc->gaveup_bytes, bytes);
                    atomic_fetch_add(&d->proc->gaveup_seq, 1);
                    atomic_store(&d->job->gaveup_pid, atomic_load(&d->proc->pid));
                    atomic_store(&d->job->gaveup_bytes, bytes);
                    atomic_fetch_add(&d->job->gaveup_seq, 1);
                }
                stop_waiting(d->proc);
                atomic_fetch_add(&l->agent_wake, 1);
                ts_futex_wake(&l->agent_wake);
            }
            ts_shim_log("charge of %llu bytes on device %d refused (%s)", (unsigned long long)bytes,
                        ord, r == REFUSED ? "over the limit" : "no room in time");
            if (held && r == NO_ROOM)
                return CUDA_ERROR_NOT_READY;
            return r == NO_ROOM && swapin ? CUDA_ERROR_TIMEOUT : CUDA_ERROR_OUT_OF_MEMORY;
        }
        /* a collision: take a place in the queue, ask the agent for room,
         * wait (written again each time: another thread of the process
         * may have been served meanwhile and cleared the slot's wait) */
        if (since == UINT64_MAX)
            since = now;
        atomic_store(&d->proc->need_since_ns, since);
        atomic_store(&d->proc->need_kind, kind);
        atomic_store(&d->proc->need_bytes, bytes);
        atomic_fetch_add(&l->agent_wake, 1);
        ts_futex_wake(&l->agent_wake);
        uint64_t left_ms = bounded ? (deadline - now + 999999u) / 1000000u : POLL_MS;
        ts_futex_wait(&l->room_seq, seq, left_ms < POLL_MS ? (int)left_ms : POLL_MS);
    }
}

void ts_uncharge(int ord, uint64_t bytes)
{
    struct ts_shim_dev *d = ts_shim_dev(ord);
    if (d == NULL || bytes == 0)
        return;
    struct ts_ledger *l = d->l;
    sub_sat(&d->job->used_bytes, bytes);
    sub_sat(&d->proc->used_bytes, bytes);
    if (atomic_load(&l->burst_bytes) == 0)
        return;
    /* someone borrows: keep burst_bytes true and let waiters re-check */
    if (ts_ledger_lock(l) == 0) {
        atomic_store(&l->burst_bytes, ts_ledger_burst_locked(l));
        ts_ledger_unlock(l);
    }
    atomic_fetch_add(&l->room_seq, 1);
    ts_futex_wake(&l->room_seq);
}

static CUresult swap_charge(int dev, uint64_t bytes, bool bounded)
{
    return ts_charge(dev, bytes, bounded ? TS_CHARGE_SWAPIN_TRY : TS_CHARGE_SWAPIN);
}

void ts_charge_fill_swap_config(struct ts_swap_config *cfg)
{
    cfg->charge = swap_charge;
    cfg->uncharge = ts_uncharge;
}

/* ---- the process-local table: key -> (ordinal, bytes) ---- */

#define BUCKETS 4096

struct entry {
    struct entry *next;
    uint64_t key;
    uint64_t bytes;
    int kind;
    int ord;
};

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct entry *table[BUCKETS];

static size_t bucket(int kind, uint64_t key)
{
    uint64_t h = (key ^ (uint64_t)kind * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
    return (size_t)(h >> 52) % BUCKETS;
}

void ts_alloc_put(enum ts_alloc_kind kind, uint64_t key, int ord, uint64_t bytes)
{
    struct entry *e = malloc(sizeof(*e));
    if (e == NULL)
        return; /* not remembered: its free will not uncharge (README.md) */
    e->key = key;
    e->bytes = bytes;
    e->kind = (int)kind;
    e->ord = ord;
    size_t b = bucket((int)kind, key);
    pthread_mutex_lock(&table_mu);
    e->next = table[b];
    table[b] = e;
    pthread_mutex_unlock(&table_mu);
}

bool ts_alloc_take(enum ts_alloc_kind kind, uint64_t key, int *ord, uint64_t *bytes)
{
    size_t b = bucket((int)kind, key);
    struct entry *found = NULL;
    pthread_mutex_lock(&table_mu);
    for (struct entry **pp = &table[b]; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->key == key && (*pp)->kind == (int)kind) {
            found = *pp;
            *pp = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&table_mu);
    if (found == NULL)
        return false;
    *ord = found->ord;
    *bytes = found->bytes;
    free(found);
    return true;
}

void ts_alloc_lock_for_fork(bool lock)
{
    if (lock)
        pthread_mutex_lock(&table_mu);
    else
        pthread_mutex_unlock(&table_mu);
}

void ts_alloc_reset_in_child(void)
{
    pthread_mutex_init(&table_mu, NULL);
    for (size_t b = 0; b < BUCKETS; b++) {
        while (table[b] != NULL) {
            struct entry *e = table[b];
            table[b] = e->next;
            free(e);
        }
    }
}
