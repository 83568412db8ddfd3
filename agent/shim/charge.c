/*
 * charge.c - the ledger client: charging and uncharging device memory on
 * the job's ledgers (ledger.h, "Accounting" and "Agent <-> shim"), and the
 * process-local table of what each allocation was charged.
 *
 * Within the request, a charge is one fetch_add on the job's used_bytes;
 * when burst_bytes is 0 it is granted without the lock. Above the request
 * it is a burst, granted under the lock while the GPU has room and bursts
 * are open, else refused at once. Over the limit it is always refused. A
 * within-request charge that finds bursts and no room asks the agent for
 * room and waits on room_seq, bounded by the ledger's wait_ms.
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

/* Under the lock, with the job's used already raised: publish the new
 * burst figure first, then look at the room. */
static bool burst_fits_locked(struct ts_ledger *l)
{
    atomic_store(&l->burst_bytes, ts_ledger_burst_locked(l));
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&l->burst_closed) != 0)
        return false;
    return ts_ledger_used(l) <= usable(l);
}

static int try_charge(struct ts_shim_dev *d, uint64_t bytes, bool reap)
{
    struct ts_ledger *l = d->l;
    struct ts_ledger_job *job = d->job;
    uint64_t used = atomic_fetch_add(&job->used_bytes, bytes) + bytes;
    if (used <= job->request_bytes) {
        if (atomic_load(&l->burst_bytes) == 0)
            return GRANTED; /* the fast path: one atomic operation */
        if (ts_ledger_lock(l) != 0) {
            sub_sat(&job->used_bytes, bytes);
            return REFUSED;
        }
        if (reap)
            ts_ledger_reap_locked(l);
        bool ok = ts_ledger_used(l) <= usable(l);
        if (!ok)
            sub_sat(&job->used_bytes, bytes);
        ts_ledger_unlock(l);
        return ok ? GRANTED : NO_ROOM;
    }
    if (used > job->limit_bytes) {
        sub_sat(&job->used_bytes, bytes);
        return REFUSED;
    }
    if (ts_ledger_lock(l) != 0) {
        sub_sat(&job->used_bytes, bytes);
        return REFUSED;
    }
    bool ok = burst_fits_locked(l);
    if (!ok) {
        sub_sat(&job->used_bytes, bytes);
        atomic_store(&l->burst_bytes, ts_ledger_burst_locked(l));
    }
    ts_ledger_unlock(l);
    return ok ? GRANTED : REFUSED;
}

CUresult ts_charge(int ord, uint64_t bytes, bool may_wait)
{
    if (ts_shim.mode == TS_SHIM_BROKEN)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct ts_shim_dev *d = ts_shim_dev(ord);
    if (d == NULL || bytes == 0)
        return CUDA_SUCCESS;
    struct ts_ledger *l = d->l;
    uint64_t deadline = 0;
    bool asked = false;
    for (;;) {
        uint32_t seq = atomic_load(&l->room_seq);
        int r = try_charge(d, bytes, asked);
        if (r == GRANTED) {
            atomic_fetch_add_explicit(&d->proc->used_bytes, bytes, memory_order_relaxed);
            if (asked)
                atomic_store(&d->proc->need_bytes, 0);
            return CUDA_SUCCESS;
        }
        uint64_t now = ts_ledger_now_ns();
        if (deadline == 0)
            deadline = now + (uint64_t)ts_shim.wait_ms * 1000000u;
        if (r == REFUSED || !may_wait || now >= deadline) {
            if (asked)
                atomic_store(&d->proc->need_bytes, 0);
            ts_shim_log("charge of %llu bytes on device %d refused (%s)", (unsigned long long)bytes,
                        ord,
                        r == REFUSED ? "over the limit or no room to burst" : "no room in time");
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        /* a collision: ask the agent for room, then wait for it */
        atomic_store(&d->proc->need_bytes, bytes);
        atomic_fetch_add(&l->agent_wake, 1);
        ts_futex_wake(&l->agent_wake);
        asked = true;
        uint64_t left_ms = (deadline - now + 999999u) / 1000000u;
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

static CUresult swap_charge(int dev, uint64_t bytes)
{
    return ts_charge(dev, bytes, true);
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
