/*
 * cuda_sparse.c - the byte moves of simgpu's copies (cuda_int.h,
 * ts_simgpu_move), which keep never-written memory free.
 *
 * simgpu backs device memory lazily: a page nobody wrote holds no host
 * memory and reads as zeros. A plain memmove out of such a page makes the
 * kernel allocate and zero one, at a cost of seconds a GiB on small
 * virtual machines, and the copy's destination then holds real zeros too.
 * A GPU has neither cost, and a swap of a job that allocated 40 GiB and
 * wrote little would cost 40 GiB of host memory twice. So a large move
 * looks first (mincore) for whole pages of its source that are not in
 * memory and, when that memory reads as zeros when absent (anonymous
 * private memory, or a shared mapping of a tmpfs file: memfd, /dev/shm),
 * does not read them: the destination's pages are dropped so that they
 * read as zeros too (MADV_REMOVE for a shared tmpfs mapping, MADV_DONTNEED
 * for anonymous private memory), or zeroed where neither applies. Every
 * other byte is copied as it is, into pages faulted in with one call
 * (MADV_POPULATE_WRITE) rather than one fault each; the result is the
 * bytes a memmove gives.
 *
 * mincore cannot tell a page never written from one the kernel moved to a
 * swap device: on a host with swap space every move is a plain memmove.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/simgpu/cuda_int.h"

#define SPARSE_MIN ((size_t)1 << 20) /* smaller moves are plain memmoves */
#define VEC_PAGES 16384              /* pages looked at per mincore call (64 MiB) */

enum kind { OTHER, ANON, TMPFS };

/* A mapping of this process, as /proc/self/maps says. */
struct map {
    uintptr_t lo, hi;
    enum kind kind;
};

/* The mapping holding addr (lo = hi = 0 when none is found). */
static struct map map_of(uintptr_t addr)
{
    struct map m = {0, 0, OTHER};
    FILE *f = fopen("/proc/self/maps", "re");
    if (f == NULL)
        return m;
    char line[512];
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi, inode;
        char perms[8], dev[16], path[400] = "";
        unsigned long long off;
        if (sscanf(line, "%lx-%lx %7s %llx %15s %lu %399s", &lo, &hi, perms, &off, dev, &inode,
                   path) < 6)
            continue;
        if (addr < lo || addr >= hi)
            continue;
        bool shared = perms[3] == 's';
        m.lo = lo;
        m.hi = hi;
        if (!shared && inode == 0 && (path[0] == '\0' || path[0] == '['))
            m.kind = ANON;
        else if (shared && (strncmp(path, "/dev/shm/", 9) == 0 || strncmp(path, "/memfd:", 7) == 0))
            m.kind = TMPFS;
        break;
    }
    fclose(f);
    return m;
}

/* The kind of [p, p + n) when it lies in one mapping (c caches the last
 * one looked up), else OTHER. */
static enum kind kind_of(struct map *c, uintptr_t p, size_t n)
{
    if (p < c->lo || p >= c->hi)
        *c = map_of(p);
    return p >= c->lo && p + n <= c->hi ? c->kind : OTHER;
}

/* Make [p, p + n) (whole pages) read as zeros. */
static void zero_pages(struct map *c, unsigned char *p, size_t n)
{
    enum kind k = kind_of(c, (uintptr_t)p, n);
    if (k == TMPFS && madvise(p, n, MADV_REMOVE) == 0)
        return;
    if (k == ANON && madvise(p, n, MADV_DONTNEED) == 0)
        return;
    memset(p, 0, n);
}

/* Fault the destination's pages in with one call before they are written,
 * when its first page is not there yet (a fresh allocation): a fault per
 * 4 KiB page costs several times more on virtual machines. Pages already
 * there are left alone (a walk over them costs a fifth of the copy). Best
 * effort; Linux 5.14 and later. */
static void fill_in(unsigned char *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
    uintptr_t lo = ((uintptr_t)p + PAGE - 1) / PAGE * PAGE, hi = ((uintptr_t)p + n) / PAGE * PAGE;
    unsigned char v = 1;
    if (hi > lo && mincore((void *)lo, PAGE, &v) == 0 && !(v & 1))
        madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
#else
    (void)p, (void)n;
#endif
}

static pthread_once_t swap_once = PTHREAD_ONCE_INIT;
static bool host_swaps;

static void look_for_swap(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    char line[128];
    unsigned long long kb;
    host_swaps = f == NULL; /* unknown: take no chance */
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "SwapTotal: %llu kB", &kb) == 1)
            host_swaps = kb > 0;
    if (f != NULL)
        fclose(f);
}

void ts_simgpu_move(void *dst, const void *src, size_t n)
{
    uintptr_t s = (uintptr_t)src, d = (uintptr_t)dst;
    bool overlap = s < d + n && d < s + n;
    if (n >= SPARSE_MIN)
        pthread_once(&swap_once, look_for_swap);
    if (n < SPARSE_MIN || overlap) {
        memmove(dst, src, n);
        return;
    }
    if (s % PAGE != d % PAGE || host_swaps) { /* pages do not line up: bytes as they are */
        fill_in(dst, n);
        memcpy(dst, src, n);
        return;
    }
    /* whole pages of the source inside the move; the rest is copied */
    uintptr_t lo = (s + PAGE - 1) / PAGE * PAGE, hi = (s + n) / PAGE * PAGE;
    static _Thread_local unsigned char vec[VEC_PAGES];
    struct map sm = {0, 0, OTHER}, dm = {0, 0, OTHER};
    memcpy(dst, src, lo - s);
    for (uintptr_t at = lo; at < hi;) {
        size_t pages = (hi - at) / PAGE < VEC_PAGES ? (hi - at) / PAGE : VEC_PAGES;
        unsigned char *out = (unsigned char *)(d + (at - s));
        if (mincore((void *)at, pages * PAGE, vec) != 0) {
            memcpy(out, (const void *)at, pages * PAGE);
            at += pages * PAGE;
            continue;
        }
        for (size_t i = 0; i < pages;) {
            size_t j = i;
            bool in = vec[i] & 1;
            while (j < pages && (vec[j] & 1) == in)
                j++;
            uintptr_t from = at + i * PAGE;
            size_t len = (j - i) * PAGE;
            if (in || kind_of(&sm, from, len) == OTHER) {
                fill_in(out + i * PAGE, len);
                memcpy(out + i * PAGE, (const void *)from, len);
            } else {
                zero_pages(&dm, out + i * PAGE, len);
            }
            i = j;
        }
        at += pages * PAGE;
    }
    memcpy((unsigned char *)dst + (hi - s), (const unsigned char *)hi, s + n - hi);
}
