/*
 * cuda_memop.c - the stream memory operations of simgpu's libcuda.so.1:
 * cuStreamWriteValue32/64, cuStreamWaitValue32/64 and cuStreamBatchMemOp, in
 * their _v2 form, the CUDA 11 form of the same signature (which needs no
 * opt-in here), and the per-thread default stream flavours of both.
 *
 * simgpu runs a stream's work when it is queued, so the operations happen
 * at the call: a write stores the value at once (atomically, so another
 * thread polling the word sees all of it); a wait holds the caller until the
 * condition holds on the word, which another thread (of the host, or a
 * write on another stream) must make true, polling with a backoff up to
 * 1 ms and giving up after WAIT_LIMIT_NS with CUDA_ERROR_TIMEOUT (a real
 * GPU would hold the stream instead, without a bound). A wait already
 * satisfied returns at once. The word is read and written under `mu`, and
 * found again in the table each time, so a wait on memory unmapped or freed
 * meanwhile ends with CUDA_ERROR_INVALID_VALUE, never a crash. Flush and
 * barrier operations have nothing to do. The stream's later work starts
 * after a wait.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

#pragma GCC visibility push(default)
#include "agent/abi/cuda.h"
#pragma GCC visibility pop
#include "agent/simgpu/cuda_int.h"

#define WAIT_LIMIT_NS (10ull * 1000 * 1000 * 1000)
#define MAX_BATCH 256 /* cuStreamBatchMemOp takes fewer operations than this */
#define WAIT_OPS_MASK 0x3u

/* One operation, from a call or from a batch. */
struct memop {
    CUstreamBatchMemOpType type;
    uint64_t addr, value;
    unsigned int flags;
};

static size_t op_bytes(CUstreamBatchMemOpType t)
{
    switch (t) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        return 4;
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        return 8;
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
    case CU_STREAM_MEM_OP_BARRIER:
        return 0;
    }
    return SIZE_MAX;
}

static bool op_writes(CUstreamBatchMemOpType t)
{
    return t == CU_STREAM_MEM_OP_WRITE_VALUE_32 || t == CU_STREAM_MEM_OP_WRITE_VALUE_64;
}

/* The shape of an operation and its word: aligned device memory of this
 * process, readable (a wait) or writable (a write). */
static CUresult op_check(const struct memop *op)
{
    size_t n = op_bytes(op->type);
    if (n == SIZE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (n == 0)
        return CUDA_SUCCESS;
    unsigned int known_flags = op_writes(op->type) ? CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER
                                                   : WAIT_OPS_MASK | CU_STREAM_WAIT_VALUE_FLUSH;
    if ((op->flags & ~known_flags) != 0 || op->addr % n != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return range_check(op->addr, n, op_writes(op->type), NULL);
}

/* Under mu: whether the n-byte word at addr is still mapped device memory
 * this process may read (or write). */
static bool word_ok(uint64_t addr, size_t n, bool write)
{
    const struct region *r = region_at(addr);
    if (!r || addr + n > r->va + r->size)
        return false;
    return r->kind == REGION_ALLOC || (r->prot & (write ? PROT_WRITE : PROT_READ));
}

static CUresult word_write(uint64_t addr, size_t n, uint64_t v)
{
    pthread_mutex_lock(&mu);
    bool ok = word_ok(addr, n, true);
    if (ok && n == 4)
        __atomic_store_n((uint32_t *)(uintptr_t)addr, (uint32_t)v, __ATOMIC_SEQ_CST);
    else if (ok)
        __atomic_store_n((uint64_t *)(uintptr_t)addr, v, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&mu);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult word_read(uint64_t addr, size_t n, uint64_t *v)
{
    pthread_mutex_lock(&mu);
    bool ok = word_ok(addr, n, false);
    if (ok && n == 4)
        *v = __atomic_load_n((uint32_t *)(uintptr_t)addr, __ATOMIC_SEQ_CST);
    else if (ok)
        *v = __atomic_load_n((uint64_t *)(uintptr_t)addr, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&mu);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The conditions of CUstreamWaitValue_flags; GEQ compares cyclically, as
 * a signed difference of the word's width. */
static bool wait_met(uint64_t word, uint64_t v, unsigned int how, size_t n)
{
    if (n == 4) {
        word = (uint32_t)word;
        v = (uint32_t)v;
    }
    switch (how & WAIT_OPS_MASK) {
    case CU_STREAM_WAIT_VALUE_GEQ:
        return n == 4 ? (int32_t)(uint32_t)(word - v) >= 0 : (int64_t)(word - v) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
        return word == v;
    case CU_STREAM_WAIT_VALUE_AND:
        return (word & v) != 0;
    default: /* NOR */
        return (n == 4 ? (uint32_t) ~(word | v) : ~(word | v)) != 0;
    }
}

static CUresult wait_word(const struct memop *op, struct CUstream_st *s)
{
    size_t n = op_bytes(op->type);
    uint64_t deadline = ts_simgpu_now_ns() + WAIT_LIMIT_NS, pause_ns = 1000;
    for (;;) {
        uint64_t word = 0;
        CUresult rc = word_read(op->addr, n, &word);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (wait_met(word, op->value, op->flags, n))
            break;
        if (ts_simgpu_now_ns() >= deadline)
            return CUDA_ERROR_TIMEOUT;
        struct timespec ts = {0, (long)pause_ns};
        nanosleep(&ts, NULL);
        pause_ns = pause_ns < 1000000 ? pause_ns * 2 : 1000000;
    }
    /* What the stream queues next starts after the wait. */
    atomic_store(&s->done_ns, max_u64(atomic_load(&s->done_ns), ts_simgpu_now_ns()));
    return CUDA_SUCCESS;
}

static CUresult op_run(const struct memop *op, struct CUstream_st *s)
{
    size_t n = op_bytes(op->type);
    if (n == 0)
        return CUDA_SUCCESS;
    if (op_writes(op->type))
        return word_write(op->addr, n, op->value);
    return wait_word(op, s);
}

/* Every operation is checked before the first one runs. */
static CUresult run_ops(CUstream hs, const struct memop *ops, unsigned int count)
{
    NEED_CTX();
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    for (unsigned int i = 0; i < count; i++) {
        CUresult rc = op_check(&ops[i]);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    for (unsigned int i = 0; i < count; i++) {
        CUresult rc = op_run(&ops[i], s);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

static CUresult one_op(CUstream hs, CUstreamBatchMemOpType t, CUdeviceptr addr, uint64_t v,
                       unsigned int flags)
{
    struct memop op = {t, addr, v, flags};
    return run_ops(hs, &op, 1);
}

static CUresult batch(CUstream hs, unsigned int count, const CUstreamBatchMemOpParams *p,
                      unsigned int flags)
{
    if (flags != 0 || count >= MAX_BATCH || (count > 0 && !p))
        return CUDA_ERROR_INVALID_VALUE;
    struct memop ops[MAX_BATCH];
    for (unsigned int i = 0; i < count; i++) {
        CUstreamBatchMemOpType t = p[i].operation;
        ops[i] = (struct memop){.type = t};
        if (t == CU_STREAM_MEM_OP_WAIT_VALUE_32 || t == CU_STREAM_MEM_OP_WAIT_VALUE_64)
            ops[i] = (struct memop){t, p[i].waitValue.address,
                                    t == CU_STREAM_MEM_OP_WAIT_VALUE_32 ? p[i].waitValue.value
                                                                        : p[i].waitValue.value64,
                                    p[i].waitValue.flags};
        else if (op_writes(t))
            ops[i] = (struct memop){t, p[i].writeValue.address,
                                    t == CU_STREAM_MEM_OP_WRITE_VALUE_32 ? p[i].writeValue.value
                                                                         : p[i].writeValue.value64,
                                    p[i].writeValue.flags};
    }
    return run_ops(hs, ops, count);
}

/* ---- the entry points ----
 *
 * The CUDA 11 ones and the per-thread flavours are counted by failure
 * injection with the _v2 call. None calls another entry point: inside the
 * library that call would go through the PLT, and so through an
 * interposer's hook of it, which a real driver's internal calls never do. */

CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                 unsigned int flags)
{
    FAIL(cuStreamWriteValue32_v2, CUDA_ERROR_UNKNOWN);
    return one_op(stream, CU_STREAM_MEM_OP_WRITE_VALUE_32, addr, value, flags);
}

CUresult cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                 unsigned int flags)
{
    FAIL(cuStreamWriteValue64_v2, CUDA_ERROR_UNKNOWN);
    return one_op(stream, CU_STREAM_MEM_OP_WRITE_VALUE_64, addr, value, flags);
}

CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                unsigned int flags)
{
    FAIL(cuStreamWaitValue32_v2, CUDA_ERROR_UNKNOWN);
    return one_op(stream, CU_STREAM_MEM_OP_WAIT_VALUE_32, addr, value, flags);
}

CUresult cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                unsigned int flags)
{
    FAIL(cuStreamWaitValue64_v2, CUDA_ERROR_UNKNOWN);
    return one_op(stream, CU_STREAM_MEM_OP_WAIT_VALUE_64, addr, value, flags);
}

CUresult cuStreamBatchMemOp_v2(CUstream stream, unsigned int count,
                               CUstreamBatchMemOpParams *paramArray, unsigned int flags)
{
    FAIL(cuStreamBatchMemOp_v2, CUDA_ERROR_UNKNOWN);
    return batch(stream, count, paramArray, flags);
}

CUresult cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                              unsigned int flags)
{
    FAIL(cuStreamWriteValue32_v2, CUDA_ERROR_UNKNOWN);
    return one_op(stream, CU_STREAM_MEM_OP_WRITE_VALUE_32, addr, value, flags);
}

CUresult cuStreamWriteValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                              unsigned int flags)
{
    FAIL(cuStreamWriteValue64_v2, CUDA_ERROR_UNKNOWN);
    return one_op(stream, CU_STREAM_MEM_OP_WRITE_VALUE_64, addr, value, flags);
}

CUresult cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                             unsigned int flags)
{
    FAIL(cuStreamWaitValue32_v2, CUDA_ERROR_UNKNOWN);
    return one_op(stream, CU_STREAM_MEM_OP_WAIT_VALUE_32, addr, value, flags);
}

CUresult cuStreamWaitValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                             unsigned int flags)
{
    FAIL(cuStreamWaitValue64_v2, CUDA_ERROR_UNKNOWN);
    return one_op(stream, CU_STREAM_MEM_OP_WAIT_VALUE_64, addr, value, flags);
}

CUresult cuStreamBatchMemOp(CUstream stream, unsigned int count,
                            CUstreamBatchMemOpParams *paramArray, unsigned int flags)
{
    FAIL(cuStreamBatchMemOp_v2, CUDA_ERROR_UNKNOWN);
    return batch(stream, count, paramArray, flags);
}

CUresult cuStreamWriteValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                      unsigned int flags)
{
    FAIL(cuStreamWriteValue32_v2, CUDA_ERROR_UNKNOWN);
    return one_op(per_thread(stream), CU_STREAM_MEM_OP_WRITE_VALUE_32, addr, value, flags);
}

CUresult cuStreamWriteValue64_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                      unsigned int flags)
{
    FAIL(cuStreamWriteValue64_v2, CUDA_ERROR_UNKNOWN);
    return one_op(per_thread(stream), CU_STREAM_MEM_OP_WRITE_VALUE_64, addr, value, flags);
}

CUresult cuStreamWaitValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                     unsigned int flags)
{
    FAIL(cuStreamWaitValue32_v2, CUDA_ERROR_UNKNOWN);
    return one_op(per_thread(stream), CU_STREAM_MEM_OP_WAIT_VALUE_32, addr, value, flags);
}

CUresult cuStreamWaitValue64_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                     unsigned int flags)
{
    FAIL(cuStreamWaitValue64_v2, CUDA_ERROR_UNKNOWN);
    return one_op(per_thread(stream), CU_STREAM_MEM_OP_WAIT_VALUE_64, addr, value, flags);
}

CUresult cuStreamBatchMemOp_v2_ptsz(CUstream stream, unsigned int count,
                                    CUstreamBatchMemOpParams *paramArray, unsigned int flags)
{
    FAIL(cuStreamBatchMemOp_v2, CUDA_ERROR_UNKNOWN);
    return batch(per_thread(stream), count, paramArray, flags);
}

CUresult cuStreamWriteValue32_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                   unsigned int flags)
{
    FAIL(cuStreamWriteValue32_v2, CUDA_ERROR_UNKNOWN);
    return one_op(per_thread(stream), CU_STREAM_MEM_OP_WRITE_VALUE_32, addr, value, flags);
}

CUresult cuStreamWriteValue64_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                   unsigned int flags)
{
    FAIL(cuStreamWriteValue64_v2, CUDA_ERROR_UNKNOWN);
    return one_op(per_thread(stream), CU_STREAM_MEM_OP_WRITE_VALUE_64, addr, value, flags);
}

CUresult cuStreamWaitValue32_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                  unsigned int flags)
{
    FAIL(cuStreamWaitValue32_v2, CUDA_ERROR_UNKNOWN);
    return one_op(per_thread(stream), CU_STREAM_MEM_OP_WAIT_VALUE_32, addr, value, flags);
}

CUresult cuStreamWaitValue64_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                  unsigned int flags)
{
    FAIL(cuStreamWaitValue64_v2, CUDA_ERROR_UNKNOWN);
    return one_op(per_thread(stream), CU_STREAM_MEM_OP_WAIT_VALUE_64, addr, value, flags);
}

CUresult cuStreamBatchMemOp_ptsz(CUstream stream, unsigned int count,
                                 CUstreamBatchMemOpParams *paramArray, unsigned int flags)
{
    FAIL(cuStreamBatchMemOp_v2, CUDA_ERROR_UNKNOWN);
    return batch(per_thread(stream), count, paramArray, flags);
}
