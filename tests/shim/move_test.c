/*
 * move_test.c - the node-level scheduler's move (issue 17; README.md,
 * "Moving a job to another GPU"): a shimmed job on GPU 1 of a swapping
 * two-GPU simgpu node, holding memory, a module's kernel, a stream and an
 * event, is moved to GPU 0 by the agent's TS_CMD_MOVE while it launches
 * kernels, and keeps running there. simgpu binds a context to its device
 * (a kernel of GPU 1's context cannot reach GPU 0's memory), so the job's
 * kernels after the move run in contexts the shim made on GPU 0. Run by
 * shim_test.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/abi/cuda.h"
#include "agent/simgpu/state.h"
#include "tests/shim/harness.h"

#define LINE_MS 20000
#define A(...)                                                                                     \
    (const char *const[])                                                                          \
    {                                                                                              \
        __VA_ARGS__, NULL                                                                          \
    }

static uint64_t kernels(const struct world *w, unsigned gpu)
{
    struct ts_simgpu_dev d;
    if (ts_simgpu_open(w->sim, gpu, &d) != 0)
        return UINT64_MAX;
    uint64_t k = atomic_load(&d.st->kernels);
    ts_simgpu_close(&d);
    return k;
}

static uint64_t gpu_used(const struct world *w, unsigned gpu)
{
    struct ts_simgpu_dev d;
    if (ts_simgpu_open(w->sim, gpu, &d) != 0)
        return UINT64_MAX;
    uint64_t u = atomic_load(&d.st->used_bytes);
    ts_simgpu_close(&d);
    return u;
}

/* Bytes of the host swap reserve file in memory: what a move wrote there. */
static uint64_t reserve_written(const struct world *w)
{
    char path[400];
    struct stat st;
    snprintf(path, sizeof path, "%s/reserve", w->root);
    return stat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512u : UINT64_MAX;
}

/* A job on GPU 1 alone: its folder's dev0.ledger is GPU 1's ledger (GPU
 * 0's waits beside the folder), and the driver shows GPU 1 first, then
 * GPU 0, the GPU it may move to. Returns the job's slot in GPU 1's. */
static int job_on_gpu1(struct world *w, char *gpu0_ledger, size_t n)
{
    char dev0[400], dev1[400];
    snprintf(gpu0_ledger, n, "%s/gpu0.ledger", w->root);
    snprintf(dev0, sizeof dev0, "%s/dev0.ledger", w->shim);
    snprintf(dev1, sizeof dev1, "%s/dev1.ledger", w->shim);
    if (rename(dev0, gpu0_ledger) != 0 || rename(dev1, dev0) != 0)
        return -1;
    int j = world_job(w->l[1], 7, 4 * GiB, 4 * GiB);
    w->l[1]->jobs[j].flags = TS_LJ_SWAP_OK;
    return j;
}

/* The agent's side of a move: the job gets a slot in GPU 0's ledger, its
 * folder's dev0.ledger becomes GPU 0's, and the command goes to its home
 * slot. Returns the acknowledged outcome (swap_error), -1 on a timeout. */
static int move_to_gpu0(struct world *w, const char *gpu0_ledger, pid_t pid, uint64_t *moved,
                        uint64_t *took_ms)
{
    world_job(w->l[0], 7, 4 * GiB, 4 * GiB);
    char tmp[400], dev0[400];
    snprintf(tmp, sizeof tmp, "%s/dev0.ledger.new", w->shim);
    snprintf(dev0, sizeof dev0, "%s/dev0.ledger", w->shim);
    if (link(gpu0_ledger, tmp) != 0 || rename(tmp, dev0) != 0)
        return -1;
    struct ts_ledger_proc *home = slot_of(w->l[1], pid);
    if (!home)
        return -1;
    home->swap_offset = 0;
    home->swap_len = 64 * MiB;
    atomic_store(&home->cmd, TS_CMD_MOVE);
    uint64_t t0 = now_ms();
    uint32_t seq = atomic_fetch_add(&home->cmd_seq, 1) + 1;
    ts_futex_wake(&home->cmd_seq);
    while (atomic_load(&home->ack_seq) != seq && now_ms() - t0 < LINE_MS)
        ts_futex_wait(&home->ack_seq, atomic_load(&home->ack_seq), 100);
    *took_ms = now_ms() - t0;
    *moved = atomic_load(&home->moved_bytes);
    return atomic_load(&home->ack_seq) == seq ? (int)atomic_load(&home->swap_error) : -1;
}

int a_job_moves_from_gpu_1_to_gpu_0_and_keeps_running(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, true);
    world_swap(&w, 64 * MiB);
    char gpu0_ledger[300];
    int j1 = job_on_gpu1(&w, gpu0_ledger, sizeof gpu0_ledger);
    CHECK(j1 >= 0);
    struct probe p;
    char l[512], before[512];
    probe_start_bin(&p, getenv("TS_MOVE_PROBE"), &w, 7, false, "CUDA_VISIBLE_DEVICES=1,0",
                    A("init", "setup:8", "work", "wait", "spin:1500", "work", "init", "wait"));
    CHECK(probe_line(&p, "init rc=0 devices=1 dev=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "setup rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "work rc=0 bad=0", before, sizeof before, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    /* on GPU 1: its ledger charged, its kernels there */
    CHECK_EQ(job_used(w.l[1], j1), 8 * MiB);
    uint64_t k0 = kernels(&w, 0), k1 = kernels(&w, 1);
    CHECK(k1 >= 1);
    CHECK_EQ(k0, 0);
    CHECK(gpu_used(&w, 1) >= 8 * MiB);

    /* moved while it launches kernels */
    probe_go(&p);
    usleep(400 * 1000);
    uint64_t moved = 0, took = 0;
    CHECK_EQ(move_to_gpu0(&w, gpu0_ledger, p.pid, &moved, &took), 0);
    CHECK_EQ(moved, 8 * MiB);
    fprintf(stderr, "move of 8 MiB acknowledged in %llu ms\n", (unsigned long long)took);
    /* GPU to GPU: not a byte went through the host reserve */
    CHECK_EQ(reserve_written(&w), 0);
    uint64_t k1_at_ack = kernels(&w, 1);
    CHECK(probe_line(&p, "spin rc=0", l, sizeof l, LINE_MS));
    fprintf(stderr, "%s", l);
    CHECK_EQ(field(l, "fails"), 0);
    CHECK(field(l, "launches") > 10);
    /* the same pointer, every word the pattern plus every kernel's add,
     * and the job's device is still its device 0 */
    CHECK(probe_line(&p, "work rc=0 bad=0", l, sizeof l, LINE_MS));
    CHECK(strcmp(strstr(l, "ptr="), strstr(before, "ptr=")) == 0);
    CHECK(probe_line(&p, "init rc=0 devices=1 dev=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    /* charged on GPU 0 now, nothing on GPU 1; the kernels after the move
     * ran on GPU 0; the memory is GPU 0's */
    int j0 = 0;
    while (j0 < TS_LEDGER_JOBS && w.l[0]->jobs[j0].job_id != 7)
        j0++;
    CHECK(j0 < TS_LEDGER_JOBS);
    CHECK_EQ(job_used(w.l[0], j0), 8 * MiB);
    CHECK_EQ(job_used(w.l[1], j1), 0);
    CHECK(slot_of(w.l[0], p.pid) != NULL);
    CHECK(kernels(&w, 0) > 1);
    uint64_t k1_after = kernels(&w, 1);
    CHECK_EQ(k1_after, k1_at_ack); /* the launches after the move ran on GPU 0 */
    CHECK(gpu_used(&w, 0) >= 8 * MiB);
    CHECK(gpu_used(&w, 1) < 8 * MiB);
    /* nothing more runs on GPU 1 */
    probe_go(&p);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    CHECK_EQ(kernels(&w, 1), k1_after);
    world_free(&w);
    return 0;
}

/* Memory the swap engine does not hold (managed) cannot move: the command
 * is refused with CUDA_ERROR_NOT_SUPPORTED, nothing moved, no slot taken
 * on GPU 0, and the job goes on on GPU 1, charged there. */
int a_job_the_shim_cannot_move_is_refused_and_stays(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, true);
    world_swap(&w, 64 * MiB);
    char gpu0_ledger[300];
    int j1 = job_on_gpu1(&w, gpu0_ledger, sizeof gpu0_ledger);
    CHECK(j1 >= 0);
    struct probe p;
    char l[512];
    probe_start_bin(&p, getenv("TS_MOVE_PROBE"), &w, 7, false, "CUDA_VISIBLE_DEVICES=1,0",
                    A("init", "setup:4", "managed:2", "wait", "work", "wait"));
    CHECK(probe_line(&p, "managed rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    uint64_t used = job_used(w.l[1], j1), k1 = kernels(&w, 1);
    CHECK_EQ(used, 6 * MiB);
    uint64_t moved = 1, took = 0;
    CHECK_EQ(move_to_gpu0(&w, gpu0_ledger, p.pid, &moved, &took), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_EQ(moved, 0);
    CHECK(slot_of(w.l[0], p.pid) == NULL);
    CHECK_EQ(job_used(w.l[1], j1), used);
    probe_go(&p);
    CHECK(probe_line(&p, "work rc=0 bad=0", l, sizeof l, LINE_MS));
    CHECK(strstr(l, "dev=0") != NULL);
    CHECK_EQ(kernels(&w, 1), k1 + 1); /* still on GPU 1 */
    CHECK_EQ(kernels(&w, 0), 0);
    probe_go(&p);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

/* GPUs without a peer path (here: the move's first device-to-device copy
 * fails, TESSERA_SIMGPU_FAIL): the move goes through the host reserve as a
 * swap-out and a swap-in, and still ends whole on GPU 0: the same pointer
 * and contents, charged on GPU 0 only, its kernels there. */
int a_move_without_a_peer_path_goes_through_the_host_and_ends_whole(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, true);
    world_swap(&w, 64 * MiB);
    char gpu0_ledger[300];
    int j1 = job_on_gpu1(&w, gpu0_ledger, sizeof gpu0_ledger);
    CHECK(j1 >= 0);
    struct probe p;
    char l[512], before[512];
    setenv("TESSERA_SIMGPU_FAIL", "cuMemcpyDtoDAsync_v2:1", 1);
    probe_start_bin(&p, getenv("TS_MOVE_PROBE"), &w, 7, false, "CUDA_VISIBLE_DEVICES=1,0",
                    A("init", "setup:8", "work", "wait", "work", "wait"));
    unsetenv("TESSERA_SIMGPU_FAIL");
    CHECK(probe_line(&p, "setup rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "work rc=0 bad=0", before, sizeof before, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(reserve_written(&w), 0);
    uint64_t moved = 0, took = 0, k1 = kernels(&w, 1);
    CHECK_EQ(move_to_gpu0(&w, gpu0_ledger, p.pid, &moved, &took), 0);
    CHECK_EQ(moved, 8 * MiB);
    CHECK(reserve_written(&w) >= 8 * MiB); /* through the host */
    int j0 = 0;
    while (j0 < TS_LEDGER_JOBS && w.l[0]->jobs[j0].job_id != 7)
        j0++;
    CHECK(j0 < TS_LEDGER_JOBS);
    CHECK_EQ(job_used(w.l[0], j0), 8 * MiB);
    CHECK_EQ(job_used(w.l[1], j1), 0);
    probe_go(&p);
    CHECK(probe_line(&p, "work rc=0 bad=0", l, sizeof l, LINE_MS));
    CHECK(strcmp(strstr(l, "ptr="), strstr(before, "ptr=")) == 0);
    CHECK(kernels(&w, 0) >= 1);
    CHECK_EQ(kernels(&w, 1), k1);
    CHECK(gpu_used(&w, 1) < 8 * MiB);
    probe_go(&p);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

/* The job's second move (the agent's all-or-nothing re-pack moves a
 * process back): GPU 1 -> GPU 0 -> GPU 1, launching kernels on the way;
 * the same pointer and contents, charged on GPU 1 again, its kernels
 * there. The swap engine holds the driver's contexts, which a second move
 * must follow from the first (objects.c, ts_obj_moved_ctx). */
int a_job_moves_there_and_back_and_keeps_its_memory(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, true);
    world_swap(&w, 64 * MiB);
    char gpu0_ledger[300], gpu1_ledger[300], dev0[400], tmp[400];
    int j1 = job_on_gpu1(&w, gpu0_ledger, sizeof gpu0_ledger);
    CHECK(j1 >= 0);
    snprintf(gpu1_ledger, sizeof gpu1_ledger, "%s/gpu1.ledger", w.root);
    snprintf(dev0, sizeof dev0, "%s/dev0.ledger", w.shim);
    snprintf(tmp, sizeof tmp, "%s/dev0.ledger.new", w.shim);
    CHECK(link(dev0, gpu1_ledger) == 0); /* GPU 1's ledger keeps a name */
    struct probe p;
    char l[512], before[512];
    probe_start_bin(&p, getenv("TS_MOVE_PROBE"), &w, 7, false, "CUDA_VISIBLE_DEVICES=1,0",
                    A("init", "setup:8", "work", "wait", "work", "wait", "work", "wait"));
    CHECK(probe_line(&p, "work rc=0 bad=0", before, sizeof before, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    uint64_t moved = 0, took = 0;
    CHECK_EQ(move_to_gpu0(&w, gpu0_ledger, p.pid, &moved, &took), 0);
    probe_go(&p);
    CHECK(probe_line(&p, "work rc=0 bad=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    /* back to GPU 1: its folder points there again, the command goes to
     * its home slot of now, in GPU 0's ledger */
    CHECK(link(gpu1_ledger, tmp) == 0 && rename(tmp, dev0) == 0);
    struct ts_ledger_proc *home = slot_of(w.l[0], p.pid);
    CHECK(home != NULL);
    home->swap_offset = 0;
    home->swap_len = 64 * MiB;
    atomic_store(&home->cmd, TS_CMD_MOVE);
    uint64_t t0 = now_ms();
    uint32_t seq = atomic_fetch_add(&home->cmd_seq, 1) + 1;
    ts_futex_wake(&home->cmd_seq);
    while (atomic_load(&home->ack_seq) != seq && now_ms() - t0 < LINE_MS)
        ts_futex_wait(&home->ack_seq, atomic_load(&home->ack_seq), 100);
    CHECK_EQ(atomic_load(&home->ack_seq), seq);
    CHECK_EQ(atomic_load(&home->swap_error), 0);
    CHECK_EQ(atomic_load(&home->moved_bytes), 8 * MiB);
    uint64_t k0 = kernels(&w, 0), k1 = kernels(&w, 1);
    probe_go(&p);
    CHECK(probe_line(&p, "work rc=0 bad=0", l, sizeof l, LINE_MS));
    CHECK(strcmp(strstr(l, "ptr="), strstr(before, "ptr=")) == 0);
    CHECK_EQ(kernels(&w, 0), k0); /* the kernel after the second move ran on GPU 1 */
    CHECK(kernels(&w, 1) > k1);
    CHECK_EQ(job_used(w.l[1], j1), 8 * MiB);
    CHECK(slot_of(w.l[1], p.pid) != NULL);
    probe_go(&p);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}
