/*
 * swapnode_test.c - the shim on a node that swaps: allocations go through
 * the swap engine, charged at the size they really take, and the agent's
 * swap-out command reaches a shimmed process's watcher (started by the
 * shim's registration) and comes back on its next GPU call with the same
 * addresses and bytes. Run by shim_test.c.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/array.h"
#include "tests/shim/harness.h"

#define LINE_MS 20000
#define A(...)                                                                                     \
    (const char *const[])                                                                          \
    {                                                                                              \
        __VA_ARGS__, NULL                                                                          \
    }
#define GRANULE (2 * MiB) /* simgpu's VMM granularity */

int on_a_swap_node_allocations_go_through_the_engine_at_the_rounded_size(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    world_swap(&w, 64 * MiB);
    int j = world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    struct probe p;
    char l[512];
    probe_start(&p, &w, 7, false, NULL,
                A("init", "alloc:1M", "pitch:1000:100", "meminfo", "wait", "free", "free", "wait"));
    CHECK(probe_line(&p, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "pitch rc=0", l, sizeof l, LINE_MS));
    CHECK(field(l, "pitch") >= 1000);
    CHECK(probe_line(&p, "meminfo rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "free"), 4 * GiB - 2 * GRANULE);
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], j), 2 * GRANULE);
    CHECK_EQ(atomic_load(&slot_of(w.l[0], p.pid)->used_bytes), 2 * GRANULE);
    probe_go(&p);
    CHECK(probe_line(&p, "free rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "free rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], j), 0);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

int the_agent_swaps_a_shimmed_process_out_and_its_next_call_brings_it_back(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    world_swap(&w, 64 * MiB);
    int j = world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    atomic_store(&w.l[0]->jobs[j].key, 0); /* flags are written before the key */
    w.l[0]->jobs[j].flags = TS_LJ_SWAP_OK;
    atomic_store(&w.l[0]->jobs[j].key, ts_ledger_key(7, 0));
    struct probe p;
    char l[512], before[512];
    probe_start(&p, &w, 7, false, NULL,
                A("init", "alloc:6M", "fill:6M", "wait", "check:6M", "wait"));
    CHECK(probe_line(&p, "fill rc=0", before, sizeof before, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], j), 6 * MiB);
    /* the agent: swap out into [0, 64 MiB) of the reserve */
    struct ts_ledger_proc *home = slot_of(w.l[0], p.pid);
    CHECK(home != NULL);
    home->swap_offset = 0;
    home->swap_len = 64 * MiB;
    atomic_store(&home->cmd, TS_CMD_SWAP_OUT);
    uint32_t seq = atomic_fetch_add(&home->cmd_seq, 1) + 1;
    ts_futex_wake(&home->cmd_seq);
    uint64_t t0 = now_ms();
    while (atomic_load(&home->ack_seq) != seq && now_ms() - t0 < LINE_MS)
        ts_futex_wait(&home->ack_seq, atomic_load(&home->ack_seq), 100);
    CHECK_EQ(atomic_load(&home->ack_seq), seq);
    CHECK_EQ(atomic_load(&home->swap_state), TS_SWAP_OUT);
    CHECK_EQ(job_used(w.l[0], j), 0); /* uncharged while out */
    /* its next GPU call brings it back: same address, same bytes */
    probe_go(&p);
    CHECK(probe_line(&p, "check rc=0 bad=0", l, sizeof l, LINE_MS));
    CHECK(strcmp(strstr(l, "ptr="), strstr(before, "ptr=")) == 0);
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], j), 6 * MiB);
    CHECK_EQ(atomic_load(&home->used_bytes), 6 * MiB);
    probe_go(&p);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

/* The agent's swap-out command to the probe's slot, acknowledged. */
static int swap_out_now(struct world *w, struct probe *p)
{
    struct ts_ledger_proc *home = slot_of(w->l[0], p->pid);
    CHECK(home != NULL);
    home->swap_offset = 0;
    home->swap_len = 64 * MiB;
    atomic_store(&home->cmd, TS_CMD_SWAP_OUT);
    uint32_t seq = atomic_fetch_add(&home->cmd_seq, 1) + 1;
    ts_futex_wake(&home->cmd_seq);
    uint64_t t0 = now_ms();
    while (atomic_load(&home->ack_seq) != seq && now_ms() - t0 < LINE_MS)
        ts_futex_wait(&home->ack_seq, atomic_load(&home->ack_seq), 100);
    CHECK_EQ(atomic_load(&home->ack_seq), seq);
    CHECK_EQ(atomic_load(&home->swap_state), TS_SWAP_OUT);
    return 0;
}

/* The hooks added for calls that used to pass through ungated: a 2D copy
 * and a cuLaunchKernelEx as the first GPU call after a swap-out each bring
 * the memory back first (the copy reads the right bytes, the process is
 * charged and resident again). */
int a_swapped_out_process_is_swapped_in_by_a_2d_copy_or_a_launch_ex(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    world_swap(&w, 64 * MiB);
    int j = world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    atomic_store(&w.l[0]->jobs[j].key, 0); /* flags are written before the key */
    w.l[0]->jobs[j].flags = TS_LJ_SWAP_OK;
    atomic_store(&w.l[0]->jobs[j].key, ts_ledger_key(7, 0));
    struct probe p;
    char l[512];
    probe_start(&p, &w, 7, false, NULL,
                A("init", "alloc:6M", "fill:6M", "wait", "check2d:6M", "wait", "launchex:1000000",
                  "wait", "check:6M", "wait"));
    CHECK(probe_line(&p, "fill rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    struct ts_ledger_proc *home = slot_of(w.l[0], p.pid);
    CHECK(swap_out_now(&w, &p) == 0);
    CHECK_EQ(job_used(w.l[0], j), 0);
    probe_go(&p); /* cuMemcpy2D_v2 first */
    CHECK(probe_line(&p, "check2d rc=0 bad=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK(home != NULL && atomic_load(&home->swap_state) != TS_SWAP_OUT);
    CHECK_EQ(job_used(w.l[0], j), 6 * MiB);
    CHECK(swap_out_now(&w, &p) == 0);
    CHECK_EQ(job_used(w.l[0], j), 0);
    probe_go(&p); /* cuModuleLoadData, cuModuleGetFunction (ungated), cuLaunchKernelEx */
    CHECK(probe_line(&p, "launchex rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK(home != NULL && atomic_load(&home->swap_state) != TS_SWAP_OUT);
    CHECK_EQ(job_used(w.l[0], j), 6 * MiB);
    probe_go(&p);
    CHECK(probe_line(&p, "check rc=0 bad=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    probe_go(&p);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

/* Every entry point gated after the 2D copies and cuLaunchKernelEx: the
 * driver's exported names, all flavours (a list of its own, not read from
 * hooks.def, so that a hook missing there fails here). */
static const char *const newly_gated[] = {
    "cuMemcpy3D_v2",
    "cuMemcpy3D_v2_ptds",
    "cuMemcpy3DAsync_v2",
    "cuMemcpy3DAsync_v2_ptsz",
    "cuMemcpy3DPeer",
    "cuMemcpy3DPeer_ptds",
    "cuMemcpy3DPeerAsync",
    "cuMemcpy3DPeerAsync_ptsz",
    "cuMemcpyPeer",
    "cuMemcpyPeer_ptds",
    "cuMemcpyPeerAsync",
    "cuMemcpyPeerAsync_ptsz",
    "cuMemsetD2D8_v2",
    "cuMemsetD2D8_v2_ptds",
    "cuMemsetD2D16_v2",
    "cuMemsetD2D16_v2_ptds",
    "cuMemsetD2D32_v2",
    "cuMemsetD2D32_v2_ptds",
    "cuMemsetD2D8Async",
    "cuMemsetD2D8Async_ptsz",
    "cuMemsetD2D16Async",
    "cuMemsetD2D16Async_ptsz",
    "cuMemsetD2D32Async",
    "cuMemsetD2D32Async_ptsz",
    "cuMemsetD16Async",
    "cuMemsetD16Async_ptsz",
    "cuLaunchCooperativeKernel",
    "cuLaunchCooperativeKernel_ptsz",
    "cuStreamWriteValue32_v2",
    "cuStreamWriteValue32_v2_ptsz",
    "cuStreamWriteValue64_v2",
    "cuStreamWriteValue64_v2_ptsz",
    "cuStreamWaitValue32_v2",
    "cuStreamWaitValue32_v2_ptsz",
    "cuStreamWaitValue64_v2",
    "cuStreamWaitValue64_v2_ptsz",
    "cuStreamBatchMemOp_v2",
    "cuStreamBatchMemOp_v2_ptsz",
    "cuStreamWriteValue32",
    "cuStreamWriteValue32_ptsz",
    "cuStreamWriteValue64",
    "cuStreamWriteValue64_ptsz",
    "cuStreamWaitValue32",
    "cuStreamWaitValue32_ptsz",
    "cuStreamWaitValue64",
    "cuStreamWaitValue64_ptsz",
    "cuStreamBatchMemOp",
    "cuStreamBatchMemOp_ptsz",
};
#define NGATED (TS_ARRAY_LEN(newly_gated))

/* The job's memory on both GPUs is swapped out before each call. */
static int both_out(struct world *w, struct probe *p, const int j[2])
{
    CHECK(swap_out_now(w, p) == 0);
    CHECK_EQ(job_used(w->l[0], j[0]), 0);
    CHECK_EQ(job_used(w->l[1], j[1]), 0);
    return 0;
}

/* Each newly gated call (probe step gated:NAME:1M, shim_probe_gated.c),
 * made as the first GPU call after a swap-out of memory on two GPUs,
 * brings it back first: the call succeeds (simgpu refuses memory that is
 * not mapped, as a GPU faults on it) and what it copied, set or wrote is
 * right to the byte; a cooperative launch, which touches no memory here,
 * leaves the process resident and charged again before anything else of
 * the step is gated. */
int a_swapped_out_process_is_swapped_in_by_each_newly_gated_call(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, true);
    world_swap(&w, 64 * MiB);
    int j[2] = {world_job(w.l[0], 7, 4 * GiB, 4 * GiB), world_job(w.l[1], 7, 4 * GiB, 4 * GiB)};
    static char steps[NGATED][96];
    static const char *args[2 * NGATED + 8];
    size_t na = 0;
    /* device 1: the peer copies' destination; device 0: the pattern */
    for (const char *const *s =
             A("init", "dev:1", "alloc:6M", "dev:0", "alloc:6M", "fill:6M", "wait");
         *s; s++)
        args[na++] = *s;
    for (size_t i = 0; i < NGATED; i++) {
        snprintf(steps[i], sizeof(steps[i]), "gated:%s:1M", newly_gated[i]);
        args[na++] = steps[i];
        args[na++] = "wait";
    }
    args[na] = NULL;
    struct probe p;
    char l[512], want[160];
    probe_start(&p, &w, 7, false, NULL, args);
    CHECK(probe_line(&p, "fill rc=0 bad=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[1], j[1]), 6 * MiB);
    struct ts_ledger_proc *home = slot_of(w.l[0], p.pid);
    CHECK(home != NULL);
    for (size_t i = 0; i < NGATED; i++) {
        CHECK(both_out(&w, &p, j) == 0);
        probe_go(&p);
        snprintf(want, sizeof(want), "gated %s rc=0 bad=0", newly_gated[i]);
        if (!probe_line(&p, "gated ", l, sizeof l, LINE_MS) || strcmp(l, want) != 0) {
            fprintf(stderr, "wanted \"%s\", got \"%s\"\n", want, l);
            return 1;
        }
        CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
        if (atomic_load(&home->swap_state) == TS_SWAP_OUT || job_used(w.l[0], j[0]) != 6 * MiB ||
            job_used(w.l[1], j[1]) != 6 * MiB) {
            fprintf(stderr, "%s: not swapped in (used %llu and %llu)\n", newly_gated[i],
                    (unsigned long long)job_used(w.l[0], j[0]),
                    (unsigned long long)job_used(w.l[1], j[1]));
            return 1;
        }
    }
    probe_go(&p);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

/* A process swapped out whose memory has no room to come back (another
 * job's burst took it) waits in its next GPU call for as long as it takes
 * (past wait_ms), asking for the room as memory it held; it never gets
 * out-of-memory, and once the room frees its call goes on with the same
 * bytes at the same addresses. */
int a_swapped_out_process_waits_for_its_memory_as_long_as_it_takes(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 16 * GiB - 96 * MiB, 1000, false); /* 96 MiB usable */
    world_swap(&w, 64 * MiB);
    int ja = world_job(w.l[0], 7, 16 * MiB, 64 * MiB);
    int jb = world_job(w.l[0], 8, 16 * MiB, 80 * MiB);
    atomic_store(&w.l[0]->jobs[ja].key, 0); /* flags are written before the key */
    w.l[0]->jobs[ja].flags = TS_LJ_SWAP_OK;
    atomic_store(&w.l[0]->jobs[ja].key, ts_ledger_key(7, 0));
    struct probe a, b;
    char l[512], before[512];
    probe_start(&a, &w, 7, false, NULL,
                A("init", "alloc:48M", "fill:48M", "wait", "check:48M", "wait"));
    CHECK(probe_line(&a, "fill rc=0", before, sizeof before, LINE_MS));
    CHECK(probe_line(&a, "waiting", l, sizeof l, LINE_MS));
    CHECK(swap_out_now(&w, &a) == 0);
    CHECK_EQ(job_used(w.l[0], ja), 0);
    probe_start(&b, &w, 8, false, NULL, A("init", "alloc:64M", "wait", "free", "wait"));
    CHECK(probe_line(&b, "alloc rc=0", l, sizeof l, LINE_MS)); /* the room a held */
    CHECK(probe_line(&b, "waiting", l, sizeof l, LINE_MS));
    probe_go(&a); /* its next call: 48 MiB to come back, 32 MiB free */
    CHECK(!probe_line(&a, "check", l, sizeof l, 2500)); /* 2.5 x wait_ms: still waiting */
    struct ts_ledger_proc *home = slot_of(w.l[0], a.pid);
    CHECK_EQ(atomic_load(&home->need_bytes), 48 * MiB);
    CHECK_EQ(atomic_load(&home->need_kind), TS_NEED_SWAPIN | TS_NEED_BURST);
    CHECK_EQ(atomic_load(&home->gaveup_seq), 0);
    probe_go(&b); /* b frees its burst */
    CHECK(probe_line(&a, "check rc=0 bad=0", l, sizeof l, LINE_MS));
    CHECK(strcmp(strstr(l, "ptr="), strstr(before, "ptr=")) == 0);
    CHECK_EQ(job_used(w.l[0], ja), 48 * MiB);
    CHECK_EQ(atomic_load(&home->need_bytes), 0);
    CHECK_EQ(atomic_load(&home->swap_state), TS_SWAP_RESIDENT);
    CHECK(atomic_load(&home->turn_ns) != 0); /* back: its turn began */
    probe_go(&a);
    probe_go(&b);
    CHECK_EQ(probe_end(&a, LINE_MS), 0);
    CHECK_EQ(probe_end(&b, LINE_MS), 0);
    CHECK_EQ(job_used(w.l[0], jb), 0);
    world_free(&w);
    return 0;
}
