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
