/*
 * buffer.c - writing and checking tessera-gpuload's device memory: the
 * touched bytes of a buffer (half at its head, half at its tail, all of it
 * when smaller than --touch) hold a pattern of (seed, buffer, step), and
 * every byte read back is compared with it.
 *
 * The base buffers are keyed by their index; the burst buffer by its
 * burst's number as well, so a burst never finds what an earlier one left
 * at the same address.
 */
#include <inttypes.h>
#include <stdio.h>

#include "agent/gpuload/run.h"

#define BURST_INDEX 0xffffu /* the burst buffer's index in pattern keys */

/* The head and the tail of a buffer that are written and checked. */
static unsigned windows_of(const struct run *r, const struct buffer *b, uint64_t off[2],
                           uint64_t len[2])
{
    uint64_t t = r->plan->touch;
    if (t == 0)
        return 0;
    if (t >= b->size) {
        off[0] = 0;
        len[0] = b->size;
        return 1;
    }
    uint64_t tail = t / 2;
    off[0] = 0;
    len[0] = t - tail;
    if (tail == 0)
        return 1;
    off[1] = b->size - tail;
    len[1] = tail;
    return 2;
}

/* The pattern b holds after it is written at step: base buffers by their
 * index, the burst buffer by its burst's number as well, so a burst never
 * finds what an earlier one left at the same address. */
static uint64_t key_of(const struct run *r, const struct buffer *b, uint64_t step)
{
    if (b == &r->burst)
        return ts_gpuload_data_key(ts_gpuload_data_key(r->plan->seed, BURST_INDEX, r->burst_no),
                                   BURST_INDEX, step);
    return ts_gpuload_data_key(r->plan->seed, (unsigned)(b - r->bufs), step);
}

int ts_gpuload_buffer_write(struct run *r, struct buffer *b, uint64_t step)
{
    uint64_t key = key_of(r, b, step);
    uint64_t off[2], len[2];
    unsigned nw = windows_of(r, b, off, len);
    for (unsigned w = 0; w < nw; w++)
        for (uint64_t pos = 0; pos < len[w]; pos += TS_GPULOAD_CHUNK) {
            size_t n = len[w] - pos < TS_GPULOAD_CHUNK ? (size_t)(len[w] - pos) : TS_GPULOAD_CHUNK;
            ts_gpuload_data_fill(r->want, n, key, off[w] + pos);
            CUresult rc = r->cu.cuMemcpyHtoD_v2(b->ptr + off[w] + pos, r->want, n);
            if (rc != CUDA_SUCCESS)
                return cuda_failed(r, rc, "copy to the device (cuMemcpyHtoD_v2)");
        }
    b->written = step;
    return 0;
}

/* Check b against the pattern it was last written with; the bytes found
 * right are added to *checked. `in_step`: the step under way (false: the
 * check before a burst is freed, after step r->step). */
int ts_gpuload_buffer_check(struct run *r, struct buffer *b, bool in_step, uint64_t *checked)
{
    uint64_t key = key_of(r, b, b->written);
    uint64_t off[2], len[2];
    unsigned nw = windows_of(r, b, off, len);
    for (unsigned w = 0; w < nw; w++)
        for (uint64_t pos = 0; pos < len[w]; pos += TS_GPULOAD_CHUNK) {
            size_t n = len[w] - pos < TS_GPULOAD_CHUNK ? (size_t)(len[w] - pos) : TS_GPULOAD_CHUNK;
            uint64_t at = off[w] + pos;
            CUresult rc = r->cu.cuMemcpyDtoH_v2(r->got, b->ptr + at, n);
            if (rc != CUDA_SUCCESS)
                return cuda_failed(r, rc, "copy from the device (cuMemcpyDtoH_v2)");
            ts_gpuload_data_fill(r->want, n, key, at);
            size_t first, count;
            if (!ts_gpuload_data_same(r->got, r->want, n, &first, &count)) {
                char size[32], name[64], when[64];
                if (b == &r->burst)
                    snprintf(name, sizeof name, "the burst buffer of burst %" PRIu64, r->burst_no);
                else
                    snprintf(name, sizeof name, "buffer %u of %u", (unsigned)(b - r->bufs),
                             r->nbufs);
                if (in_step)
                    snprintf(when, sizeof when, "in step %" PRIu64, r->step + 1);
                else
                    snprintf(when, sizeof when, "before the burst was freed, after step %" PRIu64,
                             r->step);
                fprintf(stderr,
                        "tessera-gpuload: data loss detected: %s (%s at device address 0x%llx), "
                        "byte %" PRIu64 ": expected 0x%02x, found 0x%02x; %zu of %zu bytes read "
                        "back differ (written at step %" PRIu64 ", checked %s)\n",
                        name, ts_bytesize_format((int64_t)b->size, size, sizeof size),
                        (unsigned long long)b->ptr, at + first, r->want[first], r->got[first],
                        count, n, b->written, when);
                return TS_GPULOAD_EXIT_DATA_LOSS;
            }
            *checked += n;
        }
    return 0;
}

/* Check every buffer and the burst buffer, then rewrite one buffer (round
 * robin) and the burst buffer with the pattern of step s. */
int ts_gpuload_buffer_step(struct run *r, uint64_t s)
{
    r->checked = 0;
    if (r->plan->touch == 0)
        return 0;
    int st = 0;
    for (unsigned i = 0; i < r->nbufs && !st; i++)
        st = ts_gpuload_buffer_check(r, &r->bufs[i], true, &r->checked);
    if (!st && r->burst_held) {
        uint64_t c = 0;
        st = ts_gpuload_buffer_check(r, &r->burst, true, &c);
        r->burst_checked += c;
        r->checked += c;
    }
    if (!st && r->nbufs > 0)
        st = ts_gpuload_buffer_write(r, &r->bufs[s % r->nbufs], s);
    if (!st && r->burst_held)
        st = ts_gpuload_buffer_write(r, &r->burst, s);
    return st;
}

/* Test hooks: change one byte of buffer 0 (or of the burst buffer) behind
 * the pattern's back, as a faulty swap would; the next check must find it. */
int ts_gpuload_buffer_corrupt(struct run *r, struct buffer *b, const char *hook)
{
    uint64_t off[2], len[2];
    if (!b || windows_of(r, b, off, len) == 0) {
        fprintf(stderr, "tessera-gpuload: %s needs memory and --touch\n", hook);
        return 0;
    }
    CUdeviceptr at = b->ptr + len[0] / 2;
    unsigned char byte;
    CUresult rc = r->cu.cuMemcpyDtoH_v2(&byte, at, 1);
    byte ^= 0x5a;
    if (rc == CUDA_SUCCESS)
        rc = r->cu.cuMemcpyHtoD_v2(at, &byte, 1);
    if (rc != CUDA_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "change a byte for %s", hook);
        return cuda_failed(r, rc, what);
    }
    char name[64];
    if (b == &r->burst)
        snprintf(name, sizeof name, "the burst buffer of burst %" PRIu64, r->burst_no);
    else
        snprintf(name, sizeof name, "buffer 0");
    fprintf(stderr,
            "tessera-gpuload: test hook: changed byte %" PRIu64 " of %s after step %" PRIu64 "\n",
            len[0] / 2, name, r->step);
    return 0;
}
