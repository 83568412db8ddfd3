/*
 * swap_test.c - the swap engine of libtessera-cuda.so on simgpu: the
 * engine linked directly (ts_shim_swap), driven through struct ts_cu
 * filled from simgpu's libcuda.so.1. One case per CTest test:
 *     swap_test CASE
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/shim/swap.h"
#include "api/array.h"
#include "tests/shim/swap_env.h"

#define MiB ((size_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define OK(call) CHECK((call) == CUDA_SUCCESS)

static struct swap_env env;
static _Atomic uint64_t charged[4], uncharged[4];
static _Atomic int refuse_charge;

static CUresult charge(int dev, uint64_t bytes, bool bounded)
{
    (void)bounded;
    if (atomic_load(&refuse_charge))
        return CUDA_ERROR_OUT_OF_MEMORY;
    atomic_fetch_add(&charged[dev], bytes);
    return CUDA_SUCCESS;
}

static void uncharge(int dev, uint64_t bytes)
{
    atomic_fetch_add(&uncharged[dev], bytes);
}

static void init_engine(struct ts_ledger *const *ledgers, struct ts_ledger_proc *const *procs,
                        struct ts_ledger_proc *home)
{
    struct ts_swap_config cfg = {.cu = &env.cu,
                                 .ndevices = (int)env.ngpus,
                                 .charge = charge,
                                 .uncharge = uncharge,
                                 .reserve_path = env.reserve,
                                 .ledgers = ledgers,
                                 .procs = procs,
                                 .home = home,
                                 .wait_ms = 10000};
    CHECK(ts_swap_init(&cfg) == 0);
    CHECK(ts_vmm_active());
}

static void setup(unsigned ngpus, uint64_t bw, uint64_t reserve)
{
    CHECK(ts_swap_env_setup(&env, NULL, ngpus, 1 * GiB, bw, reserve) == 0);
    init_engine(NULL, NULL, NULL);
}

/* An allocation of `bytes` on dev filled with the pattern of seed. */
static CUdeviceptr alloc_fill(int dev, size_t bytes, uint32_t seed)
{
    OK(env.cu.cuCtxSetCurrent(env.ctx[dev]));
    size_t size = ts_vmm_round(dev, bytes);
    CHECK(size >= bytes && size % (2 * MiB) == 0);
    CUdeviceptr p = 0;
    OK(ts_vmm_alloc(dev, size, &p));
    void *buf = malloc(size);
    CHECK(buf);
    ts_swap_env_pattern(buf, size, seed);
    OK(env.cu.cuMemcpyHtoD_v2(p, buf, size));
    free(buf);
    return p;
}

static bool holds(int dev, CUdeviceptr p, size_t size, uint32_t seed)
{
    void *buf = malloc(size);
    CHECK(buf);
    env.cu.cuCtxSetCurrent(env.ctx[dev]);
    bool ok = env.cu.cuMemcpyDtoH_v2(buf, p, size) == CUDA_SUCCESS &&
              ts_swap_env_check(buf, size, seed) == 0;
    free(buf);
    return ok;
}

static uint32_t gate_state(void)
{
    return atomic_load(&ts_gate_word) & 0xffu;
}

struct allocs {
    int n;
    int dev[8];
    CUdeviceptr p[8];
    size_t size[8];
    uint64_t per_dev[4];
};

static void make_allocs(struct allocs *a, unsigned ngpus)
{
    static const size_t sizes[] = {3 * MiB, 8 * MiB, 17 * MiB};
    memset(a, 0, sizeof *a);
    for (unsigned d = 0; d < ngpus; d++)
        for (int k = 0; k < 3; k++) {
            int i = a->n++;
            a->dev[i] = (int)d;
            a->p[i] = alloc_fill((int)d, sizes[k], 100u + (uint32_t)i);
            a->size[i] = ts_vmm_round((int)d, sizes[k]);
            a->per_dev[d] += a->size[i];
        }
}

static void expect_contents(const struct allocs *a)
{
    for (int i = 0; i < a->n; i++) {
        CUdeviceptr base = 0;
        size_t size = 0;
        OK(ts_vmm_lookup(a->p[i] + a->size[i] - 1, &base, &size));
        CHECK(base == a->p[i] && size == a->size[i]);
        CHECK(holds(a->dev[i], a->p[i], a->size[i], 100u + (uint32_t)i));
    }
}

static int swap_round_trip_keeps_addresses_and_contents_on_two_gpus(void)
{
    setup(2, 0, 256 * MiB);
    struct allocs a;
    make_allocs(&a, 2);
    uint64_t used0 = ts_swap_env_gpu_used(&env, 0), used1 = ts_swap_env_gpu_used(&env, 1);
    CHECK(ts_swap_resident_bytes(0) == a.per_dev[0] && ts_swap_resident_bytes(1) == a.per_dev[1]);

    uint64_t moved = 0;
    OK(ts_swap_out(4096, 200 * MiB, &moved));
    CHECK(moved == a.per_dev[0] + a.per_dev[1]);
    CHECK(gate_state() != 0);
    /* The GPUs' memory is really released, and the engine uncharged it. */
    CHECK(ts_swap_env_gpu_used(&env, 0) == used0 - a.per_dev[0]);
    CHECK(ts_swap_env_gpu_used(&env, 1) == used1 - a.per_dev[1]);
    CHECK(uncharged[0] == a.per_dev[0] && uncharged[1] == a.per_dev[1]);
    CHECK(ts_swap_out_bytes(0) == a.per_dev[0] && ts_swap_resident_bytes(0) == 0);
    /* The addresses are kept but hold nothing: a copy from them is refused. */
    char byte;
    CHECK(env.cu.cuMemcpyDtoH_v2(&byte, a.p[0], 1) != CUDA_SUCCESS);

    OK(ts_swap_in());
    CHECK(gate_state() == 0);
    CHECK(ts_swap_env_gpu_used(&env, 0) == used0 && ts_swap_env_gpu_used(&env, 1) == used1);
    CHECK(charged[0] == a.per_dev[0] && charged[1] == a.per_dev[1]);
    CHECK(ts_swap_out_bytes(1) == 0 && ts_swap_resident_bytes(1) == a.per_dev[1]);
    expect_contents(&a);

    /* A second round trip works the same. */
    OK(ts_swap_out(0, 256 * MiB, &moved));
    OK(ts_swap_in());
    expect_contents(&a);
    return 0;
}

static int the_next_gpu_call_brings_memory_back_transparently(void)
{
    setup(1, 0, 64 * MiB);
    struct allocs a;
    make_allocs(&a, 1);
    uint64_t moved = 0;
    OK(ts_swap_out(0, 64 * MiB, &moved));
    CHECK(moved == a.per_dev[0]);
    /* What a hook does: enter the gate, call the driver, leave. */
    OK(ts_gate_enter());
    CHECK(holds(0, a.p[1], a.size[1], 101));
    ts_gate_leave();
    CHECK(gate_state() == 0 && ts_swap_out_bytes(0) == 0 && charged[0] == a.per_dev[0]);
    expect_contents(&a);
    return 0;
}

static int a_swap_in_without_room_fails_with_out_of_memory_and_retries_later(void)
{
    setup(1, 0, 64 * MiB);
    struct allocs a;
    make_allocs(&a, 1);
    uint64_t moved = 0, used = ts_swap_env_gpu_used(&env, 0);
    OK(ts_swap_out(0, 64 * MiB, &moved));
    atomic_store(&refuse_charge, 1);
    CHECK(ts_gate_enter() == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(ts_swap_out_bytes(0) == a.per_dev[0] && ts_swap_env_gpu_used(&env, 0) == used - moved);
    atomic_store(&refuse_charge, 0);
    OK(ts_gate_enter());
    ts_gate_leave();
    expect_contents(&a);
    return 0;
}

static int a_too_small_or_outside_range_fails_cleanly_and_everything_stays_resident(void)
{
    setup(2, 0, 64 * MiB);
    struct allocs a;
    make_allocs(&a, 2);
    uint64_t used0 = ts_swap_env_gpu_used(&env, 0), moved = 1;
    uint64_t total = a.per_dev[0] + a.per_dev[1];
    CHECK(ts_swap_out(0, total - 2 * MiB, &moved) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(moved == 0 && gate_state() == 0 && uncharged[0] == 0);
    CHECK(ts_swap_out(32 * MiB, total, &moved) == CUDA_ERROR_INVALID_VALUE); /* past the file */
    CHECK(moved == 0 && gate_state() == 0 && ts_swap_env_gpu_used(&env, 0) == used0);
    CHECK(ts_swap_resident_bytes(0) == a.per_dev[0] && ts_swap_out_bytes(0) == 0);
    OK(ts_gate_enter()); /* the gate is open: no wait, no swap-in */
    ts_gate_leave();
    CHECK(charged[0] == 0);
    expect_contents(&a);
    /* Nothing is wedged: a range that fits works. */
    OK(ts_swap_out(0, total, &moved));
    CHECK(moved == total);
    OK(ts_swap_in());
    expect_contents(&a);
    return 0;
}

/* A workload thread: each iteration, inside the gate, a busy kernel and
 * async copies of a fresh pattern through its own allocation. */
struct worker {
    CUdeviceptr p;
    size_t size;
    CUfunction busy;
    unsigned hold_us; /* inside the bracket between the write and the read back */
    _Atomic int stop;
    _Atomic int iterations;
    _Atomic int errors;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    OK(env.cu.cuCtxSetCurrent(env.ctx[0]));
    CUstream s;
    OK(env.cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    unsigned char *in = malloc(w->size), *out = malloc(w->size);
    CHECK(in && out);
    for (uint32_t it = 1; !atomic_load(&w->stop); it++) {
        ts_swap_env_pattern(in, w->size, 7000 + it);
        if (ts_gate_enter() != CUDA_SUCCESS) {
            atomic_fetch_add(&w->errors, 1);
            continue;
        }
        unsigned long long ns = 3000000; /* 3 ms on the GPU */
        void *params[] = {&ns};
        CUresult rc = env.cuLaunchKernel(w->busy, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
        if (rc == CUDA_SUCCESS)
            rc = env.cu.cuMemcpyHtoDAsync_v2(w->p, in, w->size, s);
        if (rc == CUDA_SUCCESS && w->hold_us) {
            rc = env.cu.cuStreamSynchronize(s);
            usleep(w->hold_us); /* a slow GPU call: the swap-out must wait for it */
        }
        if (rc == CUDA_SUCCESS)
            rc = env.cu.cuMemcpyDtoHAsync_v2(out, w->p, w->size, s);
        if (rc == CUDA_SUCCESS)
            rc = env.cu.cuStreamSynchronize(s);
        ts_gate_leave();
        if (rc != CUDA_SUCCESS || ts_swap_env_check(out, w->size, 7000 + it) != 0)
            atomic_fetch_add(&w->errors, 1);
        atomic_fetch_add(&w->iterations, 1);
    }
    free(in);
    free(out);
    return NULL;
}

static void wait_iterations(struct worker *w, int n)
{
    for (int i = 0; i < 20000 && atomic_load(&w->iterations) < n; i++)
        usleep(1000);
    CHECK(atomic_load(&w->iterations) >= n);
}

static void swap_under_work(uint64_t bw, unsigned hold_us)
{
    setup(1, bw, 128 * MiB);
    struct allocs a;
    make_allocs(&a, 1);
    struct worker w = {.size = 4 * MiB, .hold_us = hold_us};
    w.busy = ts_swap_env_busy_kernel(&env);
    CHECK(w.busy);
    OK(env.cu.cuCtxSetCurrent(env.ctx[0]));
    OK(ts_vmm_alloc(0, w.size, &w.p));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, work, &w) == 0);
    for (int round = 0; round < 4; round++) {
        wait_iterations(&w, atomic_load(&w.iterations) + 2);
        uint64_t moved = 0;
        OK(ts_swap_out(0, 128 * MiB, &moved));
        CHECK(moved == a.per_dev[0] + w.size);
        /* The worker's next GPU call brings everything back. */
        int before = atomic_load(&w.iterations);
        wait_iterations(&w, before + 2);
        CHECK(ts_swap_out_bytes(0) == 0);
    }
    atomic_store(&w.stop, 1);
    pthread_join(t, NULL);
    CHECK(atomic_load(&w.errors) == 0);
    CHECK(charged[0] == 4 * (a.per_dev[0] + w.size));
    expect_contents(&a);
}

static int kernels_and_copies_in_flight_are_held_at_the_gate_and_finish_after_swap_in(void)
{
    /* 1 GB/s: swapping ~60 MiB out takes ~60 ms, while the worker waits. */
    swap_under_work(1000000000ull, 0);
    return 0;
}

static int a_swap_out_waits_for_a_thread_inside_a_slow_gpu_call(void)
{
    /* Unthrottled: the swap-out itself takes ~1 ms, the worker's call 30. */
    swap_under_work(0, 30000);
    return 0;
}

/* The job's side of the watcher case: allocate, then wait for the agent's
 * word on the pipe, then check the contents. */
static int watched_job(struct ts_ledger **ledgers, int ready_fd, int go_fd)
{
    if (ts_swap_env_load(&env) != 0)
        return 2;
    struct ts_ledger_proc *procs[2];
    for (int d = 0; d < 2; d++) {
        procs[d] = &ledgers[d]->procs[0];
        procs[d]->job = 0;
        atomic_store(&procs[d]->pid, ts_ledger_host_pid());
    }
    init_engine(ledgers, procs, procs[0]);
    struct allocs a;
    make_allocs(&a, 2);
    CHECK(write(ready_fd, a.per_dev, sizeof a.per_dev) == sizeof a.per_dev);
    char c;
    CHECK(read(go_fd, &c, 1) == 1);
    expect_contents(&a);
    return 0;
}

static void command(struct ts_ledger_proc *home, uint32_t cmd, uint64_t off, uint64_t len)
{
    home->swap_offset = off;
    home->swap_len = len;
    atomic_store(&home->cmd, cmd);
    uint32_t seq = atomic_fetch_add(&home->cmd_seq, 1) + 1;
    ts_futex_wake(&home->cmd_seq);
    for (int i = 0; i < 300 && atomic_load(&home->ack_seq) != seq; i++)
        ts_futex_wait(&home->ack_seq, atomic_load(&home->ack_seq), 100);
    CHECK(atomic_load(&home->ack_seq) == seq);
}

static int the_watcher_carries_out_the_agents_commands(void)
{
    CHECK(ts_swap_env_create(&env, NULL, 2, 1 * GiB, 0, 256 * MiB) == 0);
    struct ts_ledger *ledgers[2];
    for (int d = 0; d < 2; d++) {
        char path[320];
        snprintf(path, sizeof path, "%s/gpu%d.ledger", env.dir, d);
        ledgers[d] = ts_ledger_create(path, (uint32_t)d, "GPU-test", 1 * GiB, 0, TS_COLLISION_SWAP,
                                      5000, env.reserve, 256 * MiB);
        CHECK(ledgers[d]);
        atomic_store(&ledgers[d]->jobs[0].key, ts_ledger_key(42, 1));
    }
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        _exit(watched_job(ledgers, ready[1], go[0]));
    uint64_t per_dev[4];
    CHECK(read(ready[0], per_dev, sizeof per_dev) == sizeof per_dev);
    uint64_t used0 = ts_swap_env_gpu_used(&env, 0), used1 = ts_swap_env_gpu_used(&env, 1);
    struct ts_ledger_proc *home = &ledgers[0]->procs[0];

    command(home, TS_CMD_SWAP_OUT, 6 * MiB, 128 * MiB);
    CHECK(atomic_load(&home->swap_state) == TS_SWAP_OUT && atomic_load(&home->swap_error) == 0);
    CHECK(atomic_load(&home->moved_bytes) == per_dev[0] + per_dev[1]);
    for (int d = 0; d < 2; d++) {
        CHECK(atomic_load(&ledgers[d]->procs[0].swapped_bytes) == per_dev[d]);
        CHECK(atomic_load(&ledgers[d]->jobs[0].swapped_bytes) == per_dev[d]);
    }
    CHECK(ts_swap_env_gpu_used(&env, 0) == used0 - per_dev[0]);
    CHECK(ts_swap_env_gpu_used(&env, 1) == used1 - per_dev[1]);
    /* The contents are in the granted range of the reserve: the job's
     * first allocation (the lowest address) or another one starts there. */
    FILE *f = fopen(env.reserve, "rb");
    CHECK(f);
    uint64_t first[2], zero[2] = {0, 0};
    CHECK(fseek(f, 6 * MiB, SEEK_SET) == 0 && fread(first, 1, sizeof first, f) == sizeof first);
    fclose(f);
    CHECK(memcmp(first, zero, sizeof zero) != 0);

    command(home, TS_CMD_SWAP_IN, 0, 0);
    CHECK(atomic_load(&home->swap_state) == TS_SWAP_RESIDENT &&
          atomic_load(&home->swap_error) == 0);
    CHECK(atomic_load(&ledgers[1]->procs[0].swapped_bytes) == 0);
    CHECK(ts_swap_env_gpu_used(&env, 0) == used0 && ts_swap_env_gpu_used(&env, 1) == used1);

    /* A range too small for the job: the command fails, nothing moves. */
    command(home, TS_CMD_SWAP_OUT, 0, 2 * MiB);
    CHECK(atomic_load(&home->swap_state) == TS_SWAP_RESIDENT);
    CHECK(atomic_load(&home->swap_error) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(atomic_load(&home->moved_bytes) == 0);
    CHECK(ts_swap_env_gpu_used(&env, 0) == used0);

    CHECK(write(go[1], "x", 1) == 1);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return 0;
}

static int frees_and_lookups_of_interior_pointers_follow_the_table(void)
{
    setup(1, 0, 64 * MiB);
    uint64_t used = ts_swap_env_gpu_used(&env, 0);
    CUdeviceptr p = alloc_fill(0, 5 * MiB, 1), q = alloc_fill(0, 1, 2);
    CHECK(ts_swap_env_gpu_used(&env, 0) == used + 8 * MiB);
    CUdeviceptr base;
    size_t size;
    OK(ts_vmm_lookup(p + 3 * MiB, &base, &size));
    CHECK(base == p && size == 6 * MiB);
    CHECK(ts_vmm_lookup(p + 6 * MiB, &base, &size) == CUDA_ERROR_NOT_FOUND || base != p);
    CHECK(ts_vmm_free(p + 4096, NULL, NULL, NULL) == CUDA_ERROR_NOT_FOUND);
    int dev = -1;
    bool resident = false;
    OK(ts_vmm_free(p, &dev, &size, &resident));
    CHECK(dev == 0 && size == 6 * MiB && resident);
    CHECK(ts_swap_env_gpu_used(&env, 0) == used + 2 * MiB);
    CHECK(ts_vmm_lookup(p, &base, &size) == CUDA_ERROR_NOT_FOUND);
    CHECK(holds(0, q, 2 * MiB, 2));
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(void);
} cases[] = {
#define CASE(f)                                                                                    \
    {                                                                                              \
#f, f                                                                                      \
    }
    CASE(swap_round_trip_keeps_addresses_and_contents_on_two_gpus),
    CASE(the_next_gpu_call_brings_memory_back_transparently),
    CASE(a_swap_in_without_room_fails_with_out_of_memory_and_retries_later),
    CASE(a_too_small_or_outside_range_fails_cleanly_and_everything_stays_resident),
    CASE(kernels_and_copies_in_flight_are_held_at_the_gate_and_finish_after_swap_in),
    CASE(a_swap_out_waits_for_a_thread_inside_a_slow_gpu_call),
    CASE(the_watcher_carries_out_the_agents_commands),
    CASE(frees_and_lookups_of_interior_pointers_follow_the_table),
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: swap_test CASE\n");
        return 2;
    }
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            int rc = cases[i].fn();
            ts_swap_env_teardown(&env);
            return rc;
        }
    fprintf(stderr, "swap_test: no case %s\n", argv[1]);
    return 2;
}
