/*
 * swapdirect.c - a move's memory from GPU to GPU, without the host
 * (ts_swap_move, swap.h; README.md "Moving a job to another GPU").
 *
 * Through the host reserve a move costs two copies of every byte, and on a
 * node whose reserve is not pinned (simgpu) a fresh host page behind each
 * one: the time of the move went there (issue 17). Here, with the gate
 * claimed and every allocation resident: every context is synchronized,
 * the memory is booked out as a swap-out books it (uncharged on the old
 * GPU), the shim moves its objects and slots (between), the memory is
 * charged on the new GPU (waiting for room as a swap-in does), and each
 * allocation is copied once, device to device: new physical memory on the
 * new GPU mapped at a spare address, the old memory opened to the new GPU
 * (peer access), the bytes copied on the new context's private stream,
 * then the old memory unmapped and released and the new mapped at the
 * allocation's address. An allocation that cannot go that way (no peer
 * access between the GPUs, a driver error) and those after it go out to
 * the reserve from the old GPU and come back in on the new one, as the
 * move always did: the move still ends whole on the new GPU.
 */
#include <stdlib.h>
#include <string.h>

#include "agent/shim/engine.h"

struct before {
    CUcontext ctx; /* the old context (between retargets the entry's) */
    CUmemGenericAllocationHandle handle;
    bool done; /* on the GPU of now */
};

static bool possible(void)
{
    const struct ts_cu *cu = ts_eng.cu;
    if (!cu->cuMemcpyDtoDAsync_v2 || !cu->cuMemAddressReserve || !cu->cuMemAddressFree ||
        ts_eng.n == 0)
        return false;
    for (size_t i = 0; i < ts_eng.n; i++)
        if (!ts_eng.v[i].resident)
            return false;
    return true;
}

/* Note each entry's context and handle, synchronize every context once. */
static CUresult prepare(struct before *b, uint64_t *want, int *oreal)
{
    const struct ts_cu *cu = ts_eng.cu;
    CUcontext caller = NULL, current;
    cu->cuCtxGetCurrent(&caller);
    current = caller;
    CUresult rc = CUDA_SUCCESS;
    for (size_t i = 0; i < ts_eng.n && rc == CUDA_SUCCESS; i++) {
        const struct ts_vmm_entry *e = &ts_eng.v[i];
        b[i] = (struct before){.ctx = e->ctx, .handle = e->handle, .done = false};
        want[e->dev] += e->size;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = ts_eng.v[j].ctx == e->ctx;
        if (!seen)
            rc = ts_swap_use_ctx(e->ctx, &current);
        if (!seen && rc == CUDA_SUCCESS)
            rc = cu->cuCtxSynchronize();
    }
    for (int d = 0; d < ts_eng.ndev; d++)
        oreal[d] = ts_swap_real(d);
    cu->cuCtxSetCurrent(caller);
    return rc;
}

/* The figures of bytes[d] going out (uncharged, as a swap-out) or back. */
static void book(const uint64_t *bytes, bool out)
{
    for (int d = 0; d < ts_eng.ndev; d++) {
        if (!bytes[d])
            continue;
        if (out) {
            atomic_fetch_sub(&ts_eng.resident[d], bytes[d]);
            atomic_fetch_add(&ts_eng.out[d], bytes[d]);
            if (ts_eng.uncharge)
                ts_eng.uncharge(d, bytes[d]);
        } else {
            atomic_fetch_add(&ts_eng.resident[d], bytes[d]);
            atomic_fetch_sub(&ts_eng.out[d], bytes[d]);
        }
        ts_swap_publish(d, out ? (int64_t)bytes[d] : -(int64_t)bytes[d],
                        out ? TS_SWAP_OUT : TS_SWAP_RESIDENT);
    }
}

/* Map h at e's address in place of the old memory (kept mapped on
 * failure). */
static CUresult swap_under(struct ts_vmm_entry *e, const struct before *b,
                           CUmemGenericAllocationHandle h, int from, int to)
{
    const struct ts_cu *cu = ts_eng.cu;
    CUmemAccessDesc acc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = to},
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUresult rc = cu->cuMemUnmap(e->base, e->size);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = cu->cuMemMap(e->base, e->size, 0, h, 0);
    if (rc == CUDA_SUCCESS)
        rc = cu->cuMemSetAccess(e->base, e->size, &acc, 1);
    if (rc != CUDA_SUCCESS) { /* the old memory back at its address */
        cu->cuMemUnmap(e->base, e->size);
        acc.location.id = from;
        if (cu->cuMemMap(e->base, e->size, 0, b->handle, 0) == CUDA_SUCCESS)
            cu->cuMemSetAccess(e->base, e->size, &acc, 1);
        return rc;
    }
    cu->cuMemRelease(b->handle);
    e->handle = h;
    return CUDA_SUCCESS;
}

/* Copy entry e from GPU `from` to GPU `to` (e->ctx: the new context). */
static CUresult copy_one(struct ts_vmm_entry *e, const struct before *b, int from, int to)
{
    const struct ts_cu *cu = ts_eng.cu;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = to;
    CUmemAccessDesc both[2] = {
        {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = from},
         .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE},
        {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = to},
         .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE},
    };
    CUdeviceptr tmp = 0;
    CUmemGenericAllocationHandle h = 0;
    bool mapped = false;
    CUresult rc = cu->cuCtxSetCurrent(e->ctx);
    if (rc == CUDA_SUCCESS) /* the new GPU reads the old memory: peer access */
        rc = cu->cuMemSetAccess(e->base, e->size, both, 2);
    if (rc == CUDA_SUCCESS)
        rc = cu->cuMemAddressReserve(&tmp, e->size, 0, 0, 0);
    if (rc == CUDA_SUCCESS)
        rc = cu->cuMemCreate(&h, e->size, &prop, 0);
    if (rc == CUDA_SUCCESS)
        mapped = (rc = cu->cuMemMap(tmp, e->size, 0, h, 0)) == CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS)
        rc = cu->cuMemSetAccess(tmp, e->size, &both[1], 1);
    CUstream s = rc == CUDA_SUCCESS ? ts_swap_stream_of(e->ctx) : NULL;
    for (size_t done = 0; done < e->size && rc == CUDA_SUCCESS; done += TS_SWAP_CHUNK) {
        size_t n = e->size - done < TS_SWAP_CHUNK ? e->size - done : TS_SWAP_CHUNK;
        rc = cu->cuMemcpyDtoDAsync_v2(tmp + done, e->base + done, n, s);
    }
    if (rc == CUDA_SUCCESS)
        rc = s ? cu->cuStreamSynchronize(s) : cu->cuCtxSynchronize();
    if (mapped)
        cu->cuMemUnmap(tmp, e->size);
    if (tmp)
        cu->cuMemAddressFree(tmp, e->size);
    if (rc == CUDA_SUCCESS)
        rc = swap_under(e, b, h, from, to);
    if (rc != CUDA_SUCCESS && h)
        cu->cuMemRelease(h);
    return rc;
}

/* The entries not done go from their old GPU to the reserve, with no
 * change of figures (booked out already). -1: no room there; they stay. */
static int park(struct before *b, uint64_t offset, uint64_t len)
{
    const struct ts_cu *cu = ts_eng.cu;
    uint64_t need = 0;
    for (size_t i = 0; i < ts_eng.n; i++)
        need += b[i].done ? 0 : ts_eng.v[i].size;
    if (need == 0)
        return 0;
    if (ts_swap_map_reserve() != 0 || offset > ts_eng.map_len || len > ts_eng.map_len - offset ||
        need > len)
        return -1;
    CUcontext caller = NULL, current;
    cu->cuCtxGetCurrent(&caller);
    current = caller;
    CUresult rc = CUDA_SUCCESS;
    uint64_t at = offset;
    for (size_t i = 0; i < ts_eng.n && rc == CUDA_SUCCESS; i++) {
        struct ts_vmm_entry *e = &ts_eng.v[i];
        if (b[i].done)
            continue;
        e->roff = at;
        rc = ts_swap_use_ctx(b[i].ctx, &current);
        CUstream s = rc == CUDA_SUCCESS ? ts_swap_stream_of(b[i].ctx) : NULL;
        for (size_t done = 0; done < e->size && rc == CUDA_SUCCESS; done += TS_SWAP_CHUNK) {
            size_t n = e->size - done < TS_SWAP_CHUNK ? e->size - done : TS_SWAP_CHUNK;
            rc = cu->cuMemcpyDtoHAsync_v2(ts_eng.map + at + done, e->base + done, n, s);
        }
        at += e->size;
    }
    if (rc == CUDA_SUCCESS)
        rc = ts_swap_sync_streams();
    for (size_t i = 0; i < ts_eng.n && rc == CUDA_SUCCESS; i++) {
        struct ts_vmm_entry *e = &ts_eng.v[i];
        if (b[i].done || cu->cuMemUnmap(e->base, e->size) != CUDA_SUCCESS)
            continue;
        cu->cuMemRelease(b[i].handle);
        e->handle = 0;
        e->resident = false;
    }
    cu->cuCtxSetCurrent(caller);
    return rc == CUDA_SUCCESS ? 0 : -1;
}

/* Copy every entry whose device changed GPU; the rest stay as they are.
 * Stops at the first that fails. */
static CUresult copy_all(struct before *b, const int *oreal, uint64_t *back)
{
    CUresult rc = CUDA_SUCCESS;
    for (size_t i = 0; i < ts_eng.n && rc == CUDA_SUCCESS; i++) {
        struct ts_vmm_entry *e = &ts_eng.v[i];
        int to = ts_swap_real(e->dev);
        if (to != oreal[e->dev])
            rc = copy_one(e, &b[i], oreal[e->dev], to);
        b[i].done = rc == CUDA_SUCCESS;
        if (b[i].done)
            back[e->dev] += e->size;
    }
    return rc;
}

/* After copy_all stopped at a failure (charged on the new GPUs): what is
 * left goes out from the old GPU and comes in on the new one. */
static CUresult through_host(struct before *b, const uint64_t *want, const uint64_t *back,
                             uint64_t offset, uint64_t len)
{
    uint64_t rest[TS_SWAP_MAX_DEV] = {0};
    for (int d = 0; d < ts_eng.ndev; d++)
        rest[d] = want[d] - back[d];
    pthread_rwlock_rdlock(&ts_eng.lock);
    int parked = park(b, offset, len);
    pthread_rwlock_unlock(&ts_eng.lock);
    if (parked != 0) { /* no room in the reserve: left mapped where it was */
        book(rest, false);
        ts_gate_set(TS_GATE_OPEN);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (int d = 0; d < ts_eng.ndev; d++)
        if (rest[d] && ts_eng.uncharge)
            ts_eng.uncharge(d, rest[d]); /* the swap-in charges them again */
    atomic_store(&ts_gate_word, (atomic_load(&ts_gate_word) & ~TS_GATE_STATE) | TS_GATE_COMING_IN);
    return ts_swap_in_claimed();
}

CUresult ts_swap_move_direct(uint64_t offset, uint64_t len, CUresult (*between)(void *), void *arg,
                             uint64_t *moved, bool *handled)
{
    *handled = false;
    pthread_rwlock_rdlock(&ts_eng.lock);
    size_t n = ts_eng.n;
    struct before *b = possible() ? calloc(n, sizeof *b) : NULL;
    pthread_rwlock_unlock(&ts_eng.lock);
    if (!b)
        return CUDA_SUCCESS; /* the way through the host */
    *handled = true;
    if (ts_gate_quiesce(ts_gate_wait_ms()) != 0) {
        free(b);
        ts_gate_set(TS_GATE_OPEN);
        return CUDA_ERROR_TIMEOUT;
    }
    uint64_t want[TS_SWAP_MAX_DEV] = {0}, back[TS_SWAP_MAX_DEV] = {0};
    int oreal[TS_SWAP_MAX_DEV];
    pthread_rwlock_rdlock(&ts_eng.lock);
    CUresult rc = prepare(b, want, oreal);
    pthread_rwlock_unlock(&ts_eng.lock);
    if (rc != CUDA_SUCCESS) {
        free(b);
        ts_gate_set(TS_GATE_OPEN);
        return rc;
    }
    book(want, true);
    CUresult mid = between ? between(arg) : CUDA_SUCCESS;
    for (int d = 0; d < ts_eng.ndev; d++)
        *moved += want[d];
    rc = ts_swap_charge_all(want); /* on the new GPUs; the old ones when between failed */
    if (rc != CUDA_SUCCESS) {
        /* a suspend stopped the wait (or the driver refused): the memory
         * goes out and stays out until a call or TS_CMD_SWAP_IN */
        pthread_rwlock_rdlock(&ts_eng.lock);
        int parked = park(b, offset, len);
        pthread_rwlock_unlock(&ts_eng.lock);
        if (parked != 0)
            book(want, false); /* left where it was, uncharged */
        ts_gate_set(parked == 0 ? TS_GATE_OUT : TS_GATE_OPEN);
        free(b);
        return mid != CUDA_SUCCESS ? mid : rc;
    }
    pthread_rwlock_rdlock(&ts_eng.lock);
    rc = copy_all(b, oreal, back);
    pthread_rwlock_unlock(&ts_eng.lock);
    book(back, false);
    if (rc == CUDA_SUCCESS) {
        if (ts_eng.home)
            atomic_store(&ts_eng.home->swap_state, TS_SWAP_RESIDENT);
        ts_gate_set(TS_GATE_OPEN);
    } else {
        if (ts_eng.log)
            ts_eng.log("move: device to device failed (CUresult %d): through the host", (int)rc);
        rc = through_host(b, want, back, offset, len);
    }
    free(b);
    return mid != CUDA_SUCCESS ? mid : rc;
}
