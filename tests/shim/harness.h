/*
 * harness.h - what the shim tests need around a job: simulated GPUs, the
 * job's ledgers, and probe processes run under LD_PRELOAD with pipes to
 * talk to them (harness.c).
 */
#ifndef TS_TESTS_SHIM_HARNESS_H
#define TS_TESTS_SHIM_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/ledger/ledger.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

struct world {
    char root[200];
    char sim[300];  /* simgpu state folder */
    char shim[300]; /* the job's folder: dev<K>.ledger */
    struct ts_ledger *l[2];
    char uuid[2][64];
};

/* Two simulated GPUs of gpu_bytes; a ledger for GPU 0 as the job's dev0
 * (and GPU 1 as dev1 when two_devs). Aborts the test on failure. */
void world_make(struct world *w, uint64_t gpu_bytes, uint64_t reserve, uint32_t wait_ms,
                bool two_devs);
void world_free(struct world *w);
/* Make the node a swapping one: a host swap reserve file of `bytes`
 * named in every ledger's header. */
void world_swap(struct world *w, uint64_t bytes);
/* Add job (id, attempt 0) to ledger l with request and limit; returns its
 * slot index. */
int world_job(struct ts_ledger *l, int64_t id, uint64_t request, uint64_t limit);

struct probe {
    pid_t pid;
    int in;  /* its stdin */
    int out; /* its stdout */
    char buf[65536];
    size_t len;
};

/* Start the probe with args (NULL-terminated) as job `job_id` (0: no
 * TESSERA_SHIM_JOB), shimmed unless plain; extra_env "K=V" or NULL. */
void probe_start(struct probe *p, const struct world *w, int64_t job_id, bool plain,
                 const char *extra_env, const char *const *args);
void probe_start_bin(struct probe *p, const char *bin, const struct world *w, int64_t job_id,
                     bool plain, const char *extra_env, const char *const *args);
/* The next line that starts with prefix, within timeout_ms; the line is
 * copied to line (NUL-terminated). false on timeout or end of output. */
bool probe_line(struct probe *p, const char *prefix, char *line, size_t n, int timeout_ms);
/* Let a probe blocked in a "wait" step go on. */
void probe_go(struct probe *p);
/* Wait for its exit (bounded; killed after timeout_ms); its status. */
int probe_end(struct probe *p, int timeout_ms);

/* Value of key=<u64> in line, or UINT64_MAX. */
uint64_t field(const char *line, const char *key);

uint64_t job_used(struct ts_ledger *l, int job);
/* The slot of pid, or NULL. */
struct ts_ledger_proc *slot_of(struct ts_ledger *l, pid_t pid);
uint64_t now_ms(void);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);             \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: %s == %llu, expected %s == %llu\n", __FILE__, __LINE__, #a,    \
                    a_, #b, b_);                                                                   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* The cases of procs_test.c and paths_test.c. */
#define TS_SHIM_MORE_CASES(X)                                                                      \
    X(a_killed_lock_holder_is_reaped_and_the_lock_recovered)                                       \
    X(fork_after_init_registers_the_child_in_its_own_slot)                                         \
    X(many_processes_initialize_at_once)                                                           \
    X(a_within_request_allocation_waits_for_room_and_gets_it)                                      \
    X(a_within_request_allocation_gives_up_after_wait_ms)                                          \
    X(a_burst_waits_first_come_first_served_and_gives_up_after_wait_ms)                            \
    X(an_allocation_during_stream_capture_never_waits)                                             \
    X(every_entry_path_routes_through_the_hooks)                                                   \
    X(get_proc_address_hands_out_hooks_for_every_version_and_flag)                                 \
    X(a_program_linked_against_libcuda_is_interposed)                                              \
    X(the_readme_hooks_table_matches_hooks_def)                                                    \
    X(every_per_thread_flavour_of_a_hooked_call_is_hooked)                                         \
    X(on_a_swap_node_allocations_go_through_the_engine_at_the_rounded_size)                        \
    X(the_agent_swaps_a_shimmed_process_out_and_its_next_call_brings_it_back)                      \
    X(a_swapped_out_process_is_swapped_in_by_a_2d_copy_or_a_launch_ex)                             \
    X(a_swapped_out_process_is_swapped_in_by_each_newly_gated_call)                                \
    X(a_swapped_out_process_waits_for_its_memory_as_long_as_it_takes)                              \
    X(a_job_moves_from_gpu_1_to_gpu_0_and_keeps_running)                                           \
    X(a_job_the_shim_cannot_move_is_refused_and_stays)                                             \
    X(a_move_without_a_peer_path_goes_through_the_host_and_ends_whole)                             \
    X(a_job_moves_there_and_back_and_keeps_its_memory)
#define TS_SHIM_DECLARE(f) int f(void);
TS_SHIM_MORE_CASES(TS_SHIM_DECLARE)

#endif /* TS_TESTS_SHIM_HARNESS_H */
