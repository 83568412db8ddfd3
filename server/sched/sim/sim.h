/*
 * sim.h - the pieces of tessera-sim: each subcommand is one file.
 */
#ifndef TS_SERVER_SCHED_SIM_SIM_H
#define TS_SERVER_SCHED_SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "api/arena.h"
#include "api/err.h"
#include "server/sched/sched.h"
#include "server/sched/trace.h"

/* main.c: the whole file as a new NUL-terminated buffer (free it). */
enum ts_err sim_read_file(const char *path, char **out, size_t *len, struct ts_error *err);

/* A deterministic generator (splitmix64): the same seed, the same numbers. */
struct sim_rng {
    uint64_t s;
};
uint64_t sim_rng_next(struct sim_rng *r);
double sim_rng_unit(struct sim_rng *r); /* [0, 1) */
size_t sim_rng_below(struct sim_rng *r, size_t n);

/* Nodes of a trace as snapshot nodes and GPUs (arena); GPU memory is
 * 1000 units so that gpu_milli packs exactly. */
enum ts_err sim_nodes_snapshot(const struct ts_sched_trace_node *tn, size_t n, struct ts_arena *a,
                               struct ts_sched_snapshot *s, struct ts_error *err);
/* A pod or job's request in the same terms; models split from spec (arena). */
void sim_request(int num_gpu, int gpu_milli, int64_t cpu_milli, int64_t memory_mib,
                 const char *gpu_spec, struct ts_arena *a, struct ts_sched_request *r);

int sim_placement_main(int argc, char **argv);
int sim_replay_main(int argc, char **argv);
int sim_generate_main(int argc, char **argv);
int sim_minimize_main(int argc, char **argv);
int sim_variant_main(int argc, char **argv);

#endif /* TS_SERVER_SCHED_SIM_SIM_H */
