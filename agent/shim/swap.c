/*
 * swap.c - moving the process's VMM allocations to the node's host swap
 * reserve and back (swap.h).
 *
 * Out: claim the gate (OPEN -> CLOSING), wait for the threads inside,
 * synchronize every context that has allocations, copy each resident
 * allocation to [offset, offset + len) of the reserve file (mapped
 * MAP_SHARED once, registered with the driver once when it can be) in
 * 64 MiB async copies on a private stream per context, then unmap and
 * release the physical memory, keeping the address ranges; uncharge and
 * publish the figures in the ledger slots. In: charge, create, map and
 * enable each allocation at its address, copy back, open the gate. A
 * failure before the release leaves everything resident (gate open); a
 * failed swap-in leaves everything out (gate OUT: the next call retries).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/shim/engine.h"

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_child(void)
{
    ts_gate_fork_child();
    ts_swap_fork_child();
    ts_watch_fork_child();
}

static void install_atfork(void)
{
    pthread_atfork(NULL, NULL, fork_child);
}

int ts_swap_init(const struct ts_swap_config *cfg)
{
    if (!cfg || !cfg->cu || cfg->ndevices < 0 || cfg->ndevices > TS_SWAP_MAX_DEV)
        return -1;
    pthread_once(&atfork_once, install_atfork);
    ts_eng.cu = cfg->cu;
    ts_eng.ndev = cfg->ndevices;
    ts_eng.charge = cfg->charge;
    ts_eng.uncharge = cfg->uncharge;
    ts_eng.reserve_path[0] = '\0';
    ts_eng.reserve_pinned = cfg->reserve_pinned;
    if (cfg->reserve_path && strlen(cfg->reserve_path) < sizeof ts_eng.reserve_path)
        strcpy(ts_eng.reserve_path, cfg->reserve_path);
    for (int d = 0; d < TS_SWAP_MAX_DEV; d++) {
        ts_eng.ledgers[d] = cfg->ledgers && d < cfg->ndevices ? cfg->ledgers[d] : NULL;
        ts_eng.procs[d] = cfg->procs && d < cfg->ndevices ? cfg->procs[d] : NULL;
    }
    ts_eng.home = cfg->home;
    ts_eng.wait_ms = cfg->wait_ms;
    ts_eng.log = cfg->log;
    ts_eng.move = cfg->move;
    for (int d = 0; d < TS_SWAP_MAX_DEV; d++)
        atomic_store(&ts_eng.real[d], d);
    ts_eng.configured = true;
    if (ts_eng.reserve_path[0] == '\0')
        return 0;
    ts_gate_barrier_init();
    if (ts_eng.home && ts_watch_start() != 0)
        return -1;
    return 0;
}

void ts_swap_fork_child(void)
{
    /* The parent's device memory is not the child's (CUDA contexts do not
     * survive fork): forget the table, leaking its memory rather than
     * touching the parent's handles. */
    pthread_rwlock_init(&ts_eng.lock, NULL);
    ts_eng.v = NULL;
    ts_eng.n = ts_eng.cap = 0;
    for (int d = 0; d < TS_SWAP_MAX_DEV; d++) {
        atomic_store(&ts_eng.resident[d], 0);
        atomic_store(&ts_eng.out[d], 0);
    }
    ts_eng.map = NULL; /* the mapping is inherited; it stays, unused */
    ts_eng.map_len = 0;
    ts_eng.pop_lo = ts_eng.pop_hi = 0;
    ts_eng.registered = false;
    ts_eng.nstreams = 0;
    ts_eng.home = NULL;
    for (int d = 0; d < TS_SWAP_MAX_DEV; d++)
        ts_eng.procs[d] = NULL;
}

int ts_swap_map_reserve(void)
{
    if (ts_eng.map)
        return 0;
    int fd = open(ts_eng.reserve_path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size > 0)
        p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return -1;
    ts_eng.map = p;
    ts_eng.map_len = (size_t)st.st_size;
    return 0;
}

/* Fault the reserve pages about to be written in, in one call rather than
 * one fault per page during the copies (best effort: Linux >= 5.14). The
 * pages of the reserve stay (it is a file the agent keeps), so a range
 * this process has faulted in before is not walked again: that walk costs
 * as much as a fifth of the copy itself with 4 KiB pages. */
static void populate(uint64_t offset, uint64_t len)
{
    if (!ts_eng.reserve_pinned || (offset >= ts_eng.pop_lo && offset + len <= ts_eng.pop_hi))
        return;
#ifdef MADV_POPULATE_WRITE
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)(ts_eng.map + offset) & ~(page - 1);
    uintptr_t hi = (uintptr_t)(ts_eng.map + offset + len);
    if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) != 0)
        return;
    if (offset + len < ts_eng.pop_lo || offset > ts_eng.pop_hi || ts_eng.pop_lo == ts_eng.pop_hi) {
        ts_eng.pop_lo = offset; /* apart from the known range: it replaces it */
        ts_eng.pop_hi = offset + len;
    } else {
        ts_eng.pop_lo = offset < ts_eng.pop_lo ? offset : ts_eng.pop_lo;
        ts_eng.pop_hi = offset + len > ts_eng.pop_hi ? offset + len : ts_eng.pop_hi;
    }
#else
    (void)offset, (void)len;
#endif
}

/* The private stream of ctx (ctx current), or NULL: the null stream. */
CUstream ts_swap_stream_of(CUcontext ctx)
{
    for (int i = 0; i < ts_eng.nstreams; i++)
        if (ts_eng.streams[i].ctx == ctx)
            return ts_eng.streams[i].stream;
    CUstream s = NULL;
    if (ts_eng.nstreams < TS_SWAP_MAX_DEV && ts_eng.cu->cuStreamCreate &&
        ts_eng.cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS) {
        ts_eng.streams[ts_eng.nstreams].ctx = ctx;
        ts_eng.streams[ts_eng.nstreams].stream = s;
        ts_eng.nstreams++;
        return s;
    }
    return NULL;
}

/* Copy one allocation between the device and the reserve, queued on the
 * context's private stream (ctx current); the caller synchronizes. */
static CUresult queue_copy(const struct ts_vmm_entry *e, bool out)
{
    const struct ts_cu *cu = ts_eng.cu;
    CUstream s = ts_swap_stream_of(e->ctx);
    unsigned char *host = ts_eng.map + e->roff;
    for (size_t done = 0; done < e->size; done += TS_SWAP_CHUNK) {
        size_t n = e->size - done < TS_SWAP_CHUNK ? e->size - done : TS_SWAP_CHUNK;
        CUresult rc = out ? cu->cuMemcpyDtoHAsync_v2(host + done, e->base + done, n, s)
                          : cu->cuMemcpyHtoDAsync_v2(e->base + done, host + done, n, s);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

/* Synchronize the private streams of every context (each made current). */
CUresult ts_swap_sync_streams(void)
{
    CUresult first = CUDA_SUCCESS;
    for (int i = 0; i < ts_eng.nstreams; i++) {
        CUresult rc = ts_eng.cu->cuCtxSetCurrent(ts_eng.streams[i].ctx);
        if (rc == CUDA_SUCCESS)
            rc = ts_eng.cu->cuStreamSynchronize(ts_eng.streams[i].stream);
        if (rc != CUDA_SUCCESS && first == CUDA_SUCCESS)
            first = rc;
    }
    return first;
}

CUresult ts_swap_use_ctx(CUcontext ctx, CUcontext *current)
{
    if (*current == ctx)
        return CUDA_SUCCESS;
    CUresult rc = ts_eng.cu->cuCtxSetCurrent(ctx);
    if (rc == CUDA_SUCCESS)
        *current = ctx;
    return rc;
}

/* Publish the figures of device d in this process's slot and its job's. */
void ts_swap_publish(int d, int64_t delta_out, uint32_t state)
{
    struct ts_ledger_proc *p = ts_eng.procs[d];
    if (!p)
        return;
    if (delta_out) {
        atomic_fetch_add(&p->swapped_bytes, (uint64_t)delta_out);
        struct ts_ledger *l = ts_eng.ledgers[d];
        if (l && p->job >= 0 && p->job < TS_LEDGER_JOBS)
            atomic_fetch_add(&l->jobs[p->job].swapped_bytes, (uint64_t)delta_out);
    }
    if (state == TS_SWAP_RESIDENT && delta_out < 0)
        atomic_store(&p->turn_ns, ts_ledger_now_ns()); /* back: a turn begins */
    atomic_store(&p->swap_state, state);
}

CUresult ts_swap_out_claimed(uint64_t offset, uint64_t len, uint64_t *moved)
{
    const struct ts_cu *cu = ts_eng.cu;
    if (ts_gate_quiesce(ts_gate_wait_ms()) != 0) {
        if (ts_eng.log)
            ts_eng.log("swap-out: a thread stayed inside a GPU call for %u ms", ts_gate_wait_ms());
        return CUDA_ERROR_TIMEOUT;
    }
    pthread_rwlock_rdlock(&ts_eng.lock);
    CUresult rc = CUDA_SUCCESS;
    uint64_t need = 0;
    for (size_t i = 0; i < ts_eng.n; i++)
        if (ts_eng.v[i].resident)
            need += ts_eng.v[i].size;
    if (need == 0) {
        *moved = 0;
        goto out_unlocked;
    }
    if (ts_swap_map_reserve() != 0 || offset > ts_eng.map_len || len > ts_eng.map_len - offset) {
        rc = CUDA_ERROR_INVALID_VALUE; /* no reserve file, or the range is not inside it */
        goto out_unlocked;
    }
    if (need > len) {
        rc = CUDA_ERROR_OUT_OF_MEMORY; /* the granted range cannot hold this process */
        goto out_unlocked;
    }
    CUcontext caller = NULL, current;
    cu->cuCtxGetCurrent(&caller);
    current = caller;
    /* Synchronize every context once: work queued before the close ends. */
    for (size_t i = 0; i < ts_eng.n && rc == CUDA_SUCCESS; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = ts_eng.v[j].ctx == ts_eng.v[i].ctx;
        if (seen)
            continue;
        rc = ts_swap_use_ctx(ts_eng.v[i].ctx, &current);
        if (rc == CUDA_SUCCESS)
            rc = cu->cuCtxSynchronize();
    }
    if (rc == CUDA_SUCCESS && !ts_eng.registered && cu->cuMemHostRegister_v2)
        ts_eng.registered = cu->cuMemHostRegister_v2(ts_eng.map, ts_eng.map_len,
                                                     CU_MEMHOSTREGISTER_PORTABLE) == CUDA_SUCCESS;
    populate(offset, need);
    uint64_t at = offset;
    for (size_t i = 0; i < ts_eng.n && rc == CUDA_SUCCESS; i++) {
        struct ts_vmm_entry *e = &ts_eng.v[i];
        if (!e->resident)
            continue;
        e->roff = at;
        at += e->size;
        rc = ts_swap_use_ctx(e->ctx, &current);
        if (rc == CUDA_SUCCESS)
            rc = queue_copy(e, true);
    }
    CUresult sync = ts_swap_sync_streams();
    current = NULL;
    if (rc == CUDA_SUCCESS)
        rc = sync;
    uint64_t gone[TS_SWAP_MAX_DEV] = {0};
    for (size_t i = 0; i < ts_eng.n && rc == CUDA_SUCCESS; i++) {
        struct ts_vmm_entry *e = &ts_eng.v[i];
        if (!e->resident)
            continue;
        /* An allocation that will not unmap stays resident (its copy in
         * the reserve is unused); the others go out. */
        if (cu->cuMemUnmap(e->base, e->size) != CUDA_SUCCESS)
            continue;
        cu->cuMemRelease(e->handle);
        e->handle = 0;
        e->resident = false;
        gone[e->dev] += e->size;
    }
    cu->cuCtxSetCurrent(caller);
    *moved = 0;
    for (int d = 0; d < ts_eng.ndev; d++) {
        if (!gone[d])
            continue;
        atomic_fetch_sub(&ts_eng.resident[d], gone[d]);
        atomic_fetch_add(&ts_eng.out[d], gone[d]);
        if (ts_eng.uncharge)
            ts_eng.uncharge(d, gone[d]);
        ts_swap_publish(d, (int64_t)gone[d], TS_SWAP_OUT);
        *moved += gone[d];
    }
    if (rc == CUDA_SUCCESS && *moved == 0)
        rc = CUDA_ERROR_UNMAP_FAILED;
    if (*moved && ts_eng.home)
        atomic_store(&ts_eng.home->swap_state, TS_SWAP_OUT);
out_unlocked:
    pthread_rwlock_unlock(&ts_eng.lock);
    return rc;
}

CUresult ts_swap_out(uint64_t offset, uint64_t len, uint64_t *moved)
{
    uint64_t dummy;
    if (!moved)
        moved = &dummy;
    *moved = 0;
    if (!ts_eng.configured || !ts_eng.cu)
        return CUDA_ERROR_NOT_INITIALIZED;
    uint64_t deadline = ts_swap_now_ms() + ts_gate_wait_ms();
    for (;;) {
        uint32_t w = atomic_load(&ts_gate_word);
        if ((w & TS_GATE_STATE) == TS_GATE_OUT) {
            for (int d = 0; d < ts_eng.ndev; d++)
                *moved += atomic_load(&ts_eng.out[d]); /* already out: nothing more to move */
            return CUDA_SUCCESS;
        }
        if ((w & TS_GATE_STATE) == TS_GATE_OPEN &&
            atomic_compare_exchange_strong(&ts_gate_word, &w,
                                           (w & ~TS_GATE_STATE) | TS_GATE_CLOSING))
            break;
        if (ts_swap_now_ms() >= deadline)
            return CUDA_ERROR_NOT_READY; /* another swap is under way */
        ts_gate_wait_change(w, 50u);
    }
    CUresult rc = ts_swap_out_claimed(offset, len, moved);
    ts_gate_set(*moved ? TS_GATE_OUT : TS_GATE_OPEN);
    return *moved ? CUDA_SUCCESS : rc;
}

/* Charge what comes back on every device, waiting for room as long as it
 * takes. One device: one wait. Several: each wait is bounded, and a device
 * that times out lets go of the others before all are tried again, so two
 * processes coming back on the same GPUs in the other order cannot hold
 * one each for ever. */
CUresult ts_swap_charge_all(const uint64_t *want)
{
    int ndev = 0;
    for (int d = 0; d < ts_eng.ndev; d++)
        ndev += want[d] != 0;
    if (!ts_eng.charge || ndev == 0)
        return CUDA_SUCCESS;
    for (unsigned round = 0;; round++) {
        CUresult rc = CUDA_SUCCESS;
        int d = 0;
        for (; d < ts_eng.ndev && rc == CUDA_SUCCESS; d++)
            if (want[d])
                rc = ts_eng.charge(d, want[d], ndev > 1);
        if (rc == CUDA_SUCCESS)
            return CUDA_SUCCESS;
        for (int k = 0; k < d - 1; k++)
            if (want[k] && ts_eng.uncharge)
                ts_eng.uncharge(k, want[k]);
        if (rc != CUDA_ERROR_TIMEOUT || ts_swap_held())
            return rc == CUDA_ERROR_TIMEOUT ? CUDA_ERROR_NOT_READY : rc;
        usleep(1000u * (10u + (unsigned)getpid() % 7u * 5u + round % 3u * 10u));
    }
}

CUresult ts_swap_in_claimed(void)
{
    const struct ts_cu *cu = ts_eng.cu;
    pthread_rwlock_rdlock(&ts_eng.lock);
    CUresult rc = CUDA_SUCCESS;
    uint64_t want[TS_SWAP_MAX_DEV] = {0};
    for (size_t i = 0; i < ts_eng.n; i++)
        if (!ts_eng.v[i].resident)
            want[ts_eng.v[i].dev] += ts_eng.v[i].size;
    rc = ts_swap_charge_all(want);
    if (rc != CUDA_SUCCESS) {
        pthread_rwlock_unlock(&ts_eng.lock);
        ts_gate_set(TS_GATE_OUT);
        /* NOT_READY: a suspend stopped the wait; the memory stays out */
        return rc == CUDA_ERROR_NOT_READY ? rc : CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUcontext caller = NULL, current;
    cu->cuCtxGetCurrent(&caller);
    current = caller;
    /* Map new memory at every address, marking the entries "coming in"
     * by their handle (resident stays false until the copies are done). */
    for (size_t i = 0; i < ts_eng.n && rc == CUDA_SUCCESS; i++) {
        struct ts_vmm_entry *e = &ts_eng.v[i];
        if (e->resident)
            continue;
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = ts_swap_real(e->dev);
        CUmemAccessDesc access = {.location = prop.location,
                                  .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        CUmemGenericAllocationHandle h = 0;
        rc = ts_swap_use_ctx(e->ctx, &current);
        if (rc == CUDA_SUCCESS)
            rc = cu->cuMemCreate(&h, e->size, &prop, 0);
        if (rc != CUDA_SUCCESS)
            break;
        rc = cu->cuMemMap(e->base, e->size, 0, h, 0);
        if (rc != CUDA_SUCCESS) {
            cu->cuMemRelease(h);
            break;
        }
        e->handle = h;
        rc = cu->cuMemSetAccess(e->base, e->size, &access, 1);
        if (rc == CUDA_SUCCESS)
            rc = queue_copy(e, false);
    }
    CUresult sync = ts_swap_sync_streams();
    if (rc == CUDA_SUCCESS)
        rc = sync;
    for (size_t i = 0; i < ts_eng.n; i++) {
        struct ts_vmm_entry *e = &ts_eng.v[i];
        if (e->resident || !e->handle)
            continue;
        if (rc == CUDA_SUCCESS) {
            e->resident = true;
        } else {
            cu->cuMemUnmap(e->base, e->size);
            cu->cuMemRelease(e->handle);
            e->handle = 0;
        }
    }
    cu->cuCtxSetCurrent(caller);
    for (int d = 0; d < ts_eng.ndev; d++) {
        if (!want[d])
            continue;
        if (rc != CUDA_SUCCESS) {
            if (ts_eng.uncharge)
                ts_eng.uncharge(d, want[d]);
            continue;
        }
        atomic_fetch_add(&ts_eng.resident[d], want[d]);
        atomic_fetch_sub(&ts_eng.out[d], want[d]);
        ts_swap_publish(d, -(int64_t)want[d], TS_SWAP_RESIDENT);
    }
    pthread_rwlock_unlock(&ts_eng.lock);
    if (rc == CUDA_SUCCESS && ts_eng.home)
        atomic_store(&ts_eng.home->swap_state, TS_SWAP_RESIDENT);
    ts_gate_set(rc == CUDA_SUCCESS ? TS_GATE_OPEN : TS_GATE_OUT);
    return rc;
}

CUresult ts_swap_in(void)
{
    if (!ts_eng.configured)
        return CUDA_SUCCESS;
    for (;;) {
        uint32_t w = atomic_load(&ts_gate_word);
        uint32_t state = w & TS_GATE_STATE;
        if (state == TS_GATE_OPEN)
            return CUDA_SUCCESS;
        if (state == TS_GATE_OUT &&
            atomic_compare_exchange_strong(&ts_gate_word, &w,
                                           (w & ~TS_GATE_STATE) | TS_GATE_COMING_IN))
            return ts_swap_in_claimed();
        /* a swap under way in another thread: it ends (a swap-out is
         * bounded, a swap-in waits for room as this one would) */
        ts_gate_wait_change(w, 100u);
    }
}

/* ---- moving to other GPUs ---------------------------------------------- */

CUresult ts_swap_move(uint64_t offset, uint64_t len, CUresult (*between)(void *), void *arg,
                      uint64_t *moved)
{
    uint64_t dummy;
    if (!moved)
        moved = &dummy;
    *moved = 0;
    if (!ts_eng.configured || !ts_eng.cu)
        return CUDA_ERROR_NOT_INITIALIZED;
    /* Claim the gate: resident memory goes out as in a swap-out (the gate
     * stays CLOSING, so no call brings it back); memory out already is
     * claimed as a swap-in would claim it. */
    uint64_t deadline = ts_swap_now_ms() + ts_gate_wait_ms();
    bool was_out = false;
    for (;;) {
        uint32_t w = atomic_load(&ts_gate_word);
        uint32_t state = w & TS_GATE_STATE;
        if (state == TS_GATE_OPEN && atomic_compare_exchange_strong(
                                         &ts_gate_word, &w, (w & ~TS_GATE_STATE) | TS_GATE_CLOSING))
            break;
        if (state == TS_GATE_OUT &&
            atomic_compare_exchange_strong(
                &ts_gate_word, &w, (w & ~(TS_GATE_STATE | TS_GATE_HELD)) | TS_GATE_COMING_IN)) {
            was_out = true;
            break;
        }
        if (ts_swap_now_ms() >= deadline)
            return CUDA_ERROR_NOT_READY; /* another swap is under way */
        ts_gate_wait_change(w, 50u);
    }
    CUresult rc = CUDA_SUCCESS;
    uint64_t t0 = ts_swap_now_ms();
    if (!was_out) { /* GPU to GPU when it can (swapdirect.c) */
        bool handled = false;
        rc = ts_swap_move_direct(offset, len, between, arg, moved, &handled);
        if (handled) {
            if (ts_eng.log)
                ts_eng.log("move: device to device %llu ms, CUresult %d",
                           (unsigned long long)(ts_swap_now_ms() - t0), (int)rc);
            return rc;
        }
        rc = ts_swap_out_claimed(offset, len, moved);
        if (rc != CUDA_SUCCESS && *moved == 0) {
            ts_gate_set(TS_GATE_OPEN); /* everything stayed resident */
            return rc;
        }
    }
    for (int d = 0; d < ts_eng.ndev; d++)
        if (was_out)
            *moved += atomic_load(&ts_eng.out[d]);
    /* Every other thread is held (CLOSING or COMING_IN): the shim moves
     * contexts, handles and ledger slots. */
    uint64_t t1 = ts_swap_now_ms();
    CUresult mid = rc == CUDA_SUCCESS && between ? between(arg) : rc;
    uint64_t t2 = ts_swap_now_ms();
    /* Back in, wherever between left each device (where it was when it
     * failed); the gate opens, or stays OUT for the next call to retry. */
    atomic_store(&ts_gate_word, (atomic_load(&ts_gate_word) & ~TS_GATE_STATE) | TS_GATE_COMING_IN);
    CUresult in = ts_swap_in_claimed();
    if (ts_eng.log)
        ts_eng.log("move: out %llu ms, objects %llu ms, in %llu ms", (unsigned long long)(t1 - t0),
                   (unsigned long long)(t2 - t1), (unsigned long long)(ts_swap_now_ms() - t2));
    return mid != CUDA_SUCCESS ? mid : in;
}

void ts_swap_retarget(int dev, int real, CUcontext (*xl)(CUcontext))
{
    if (dev < 0 || dev >= TS_SWAP_MAX_DEV)
        return;
    pthread_rwlock_wrlock(&ts_eng.lock);
    for (size_t i = 0; i < ts_eng.n; i++)
        if (ts_eng.v[i].dev == dev && xl)
            ts_eng.v[i].ctx = xl(ts_eng.v[i].ctx);
    pthread_rwlock_unlock(&ts_eng.lock);
    atomic_store(&ts_eng.real[dev], real);
    /* the private streams were the old contexts' (they stay with them) */
    ts_eng.nstreams = 0;
}

void ts_swap_set_slot(int dev, struct ts_ledger *l, struct ts_ledger_proc *p)
{
    if (dev < 0 || dev >= TS_SWAP_MAX_DEV)
        return;
    ts_eng.ledgers[dev] = l;
    ts_eng.procs[dev] = p;
}

void ts_swap_set_home(struct ts_ledger_proc *home)
{
    ts_eng.home = home;
}
