/*
 * bench_move.c - the pause a job sees when the node-level scheduler moves
 * it to another GPU (issue 17; agent/shim/README.md, "Moving a job to
 * another GPU"), on simgpu: a shimmed job on GPU 1 of a swapping two-GPU
 * node writes B MiB of device memory, then launches a small kernel and
 * synchronizes in a loop; the bench sends TS_CMD_MOVE to GPU 0 and prints
 * the time to its acknowledgement and the longest gap the job saw between
 * two launches, then checks every byte on GPU 0. Then, for comparison in
 * the same period: a plain memcpy of B MiB from memory written before into
 * fresh memory of the kind simgpu's device memory is (a memfd): what
 * copying the bytes costs on this machine.
 *
 *   bench_move MIB...        e.g. bench_move 1024 4096
 *
 * Uses the shim tests' harness (tests/shim/harness.c) and their job,
 * move_probe (TS_MOVE_PROBE, with the variables shim_test reads).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tests/shim/harness.h"

#define A(...)                                                                                     \
    (const char *const[])                                                                          \
    {                                                                                              \
        __VA_ARGS__, NULL                                                                          \
    }

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Seconds of a memcpy of mib MiB from written memory into fresh memfd
 * pages (-1 when there is no memory for it). */
static double plain_copy(unsigned mib)
{
    size_t n = (size_t)mib * MiB;
    int a = memfd_create("bench_move_src", MFD_CLOEXEC),
        b = memfd_create("bench_move_dst", MFD_CLOEXEC);
    double took = -1;
    if (a >= 0 && b >= 0 && ftruncate(a, (off_t)n) == 0 && ftruncate(b, (off_t)n) == 0) {
        unsigned char *src = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, a, 0);
        unsigned char *dst = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, b, 0);
        if (src != MAP_FAILED && dst != MAP_FAILED) {
            memset(src, 0x5a, n);
            double t0 = now_s();
            memcpy(dst, src, n);
            took = now_s() - t0;
        }
        if (src != MAP_FAILED)
            munmap(src, n);
        if (dst != MAP_FAILED)
            munmap(dst, n);
    }
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
    return took;
}

static int one(unsigned mib)
{
    struct world w;
    world_make(&w, 80 * GiB, 0, 60000, true);
    world_swap(&w, (uint64_t)mib * MiB + 64 * MiB);
    char gpu0[300], dev0[400], dev1[400], tmp[400];
    snprintf(gpu0, sizeof gpu0, "%s/gpu0.ledger", w.root);
    snprintf(dev0, sizeof dev0, "%s/dev0.ledger", w.shim);
    snprintf(dev1, sizeof dev1, "%s/dev1.ledger", w.shim);
    snprintf(tmp, sizeof tmp, "%s/dev0.ledger.new", w.shim);
    CHECK(rename(dev0, gpu0) == 0 && rename(dev1, dev0) == 0);
    world_job(w.l[1], 7, 40 * GiB, 40 * GiB);
    char setup[32], spin[32];
    snprintf(setup, sizeof setup, "setup:%u", mib);
    snprintf(spin, sizeof spin, "spin:%u", 4000 + mib * 10);
    struct probe p;
    char l[512];
    probe_start_bin(&p, getenv("TS_MOVE_PROBE"), &w, 7, false, "CUDA_VISIBLE_DEVICES=1,0",
                    A("init", setup, "wait", spin, "work"));
    CHECK(probe_line(&p, "setup rc=0", l, sizeof l, 600000));
    CHECK(probe_line(&p, "waiting", l, sizeof l, 600000));
    probe_go(&p);
    usleep(1000 * 1000);
    world_job(w.l[0], 7, 40 * GiB, 40 * GiB);
    CHECK(link(gpu0, tmp) == 0 && rename(tmp, dev0) == 0);
    struct ts_ledger_proc *home = slot_of(w.l[1], p.pid);
    CHECK(home != NULL);
    home->swap_offset = 0;
    home->swap_len = (uint64_t)mib * MiB + 64 * MiB;
    atomic_store(&home->cmd, TS_CMD_MOVE);
    uint64_t t0 = now_ms();
    uint32_t seq = atomic_fetch_add(&home->cmd_seq, 1) + 1;
    ts_futex_wake(&home->cmd_seq);
    while (atomic_load(&home->ack_seq) != seq && now_ms() - t0 < 600000)
        ts_futex_wait(&home->ack_seq, atomic_load(&home->ack_seq), 100);
    uint64_t ack = now_ms() - t0;
    CHECK_EQ(atomic_load(&home->swap_error), 0);
    CHECK(probe_line(&p, "spin rc=0", l, sizeof l, 600000));
    uint64_t gap = field(l, "max_gap_us"), fails = field(l, "fails");
    CHECK(probe_line(&p, "work rc=0 bad=0", l, sizeof l, 600000));
    printf("move %u MiB: ack %llu ms, longest pause the job saw %llu ms, %llu failed launches, "
           "contents intact on GPU 0\n",
           mib, (unsigned long long)ack, (unsigned long long)(gap / 1000),
           (unsigned long long)fails);
    fflush(stdout);
    probe_end(&p, 60000);
    world_free(&w);
    printf("  the same bytes by a plain memcpy into fresh memory: %.0f ms\n",
           plain_copy(mib) * 1000);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_move MIB...\n");
        return 2;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++)
        rc |= one((unsigned)strtoul(argv[i], NULL, 10));
    return rc;
}
