/*
 * harness.h - what the tessera-gpuload test programs share (gpuload_test.c,
 * gpuload_burst_test.c): the checks and their failure count, a fresh
 * simulated GPU in a temporary folder, starting tessera-gpuload as the agent
 * would (simgpu's libcuda.so.1 through LD_LIBRARY_PATH, set by CTest) and
 * waiting for it, reading its output, what the GPU's shared state says
 * about it, and the programs' main: one case per run, named by its
 * argument.
 */
#ifndef TS_TESTS_GPULOAD_HARNESS_H
#define TS_TESTS_GPULOAD_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "agent/gpuload/gpuload.h"
#include "agent/simgpu/state.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)
#define MS 1000000ull

extern int gl_failures;        /* checks failed in this run */
extern bool gl_skipped;        /* exit 77: CTest's skip */
extern const char *gl_gpuload; /* the program under test (argv[1]) */
extern char gl_tmp[256];       /* the case's temporary folder ("" before gl_setup) */
extern char gl_simdir[300];    /* its GPUs: TESSERA_SIMGPU_DIR of every child */

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            gl_failures++;                                                                         \
        }                                                                                          \
    } while (0)
#define CHECK_EQ(got, want)                                                                        \
    do {                                                                                           \
        long long got_ = (long long)(got), want_ = (long long)(want);                              \
        if (got_ != want_) {                                                                       \
            fprintf(stderr, "%s:%d: %s is %lld, wanted %lld\n", __FILE__, __LINE__, #got, got_,    \
                    want_);                                                                        \
            gl_failures++;                                                                         \
        }                                                                                          \
    } while (0)

/* simgpu's clock (CLOCK_MONOTONIC) in seconds. */
double gl_now_s(void);
void gl_sleep_ms(unsigned n);
/* A temporary folder with one simulated GPU of `bytes` in it; exits on
 * failure. */
void gl_setup(uint64_t bytes);
/* Remove the folder (nothing before gl_setup). */
void gl_cleanup(void);

struct gl_child {
    pid_t pid;
    char out[400], err[400]; /* files of its stdout and stderr */
};

/*
 * Start tessera-gpuload with args and env ("NAME=VALUE", NULL-terminated
 * lists, borrowed); stdout and stderr go to TMP/TAG.out and TMP/TAG.err.
 * The child gets TESSERA_SIMGPU_DIR and none of the job variables the test
 * does not give it.
 */
struct gl_child gl_spawn(const char *tag, const char *const *args, const char *const *env);
/* Wait for the child; its exit status, 1000 + N when signal N ended it,
 * -1 (and a failure) when it outlives timeout_s. */
int gl_finish(struct gl_child *c, double timeout_s);
/* Everything in path (new; free it), "" when missing. */
char *gl_slurp(const char *path);
bool gl_has(const char *path, const char *needle);
/* Wait until path holds needle; false after timeout_s. */
bool gl_wait_for(const char *path, const char *needle, double timeout_s);

/* The step lines of an output: how many, the last step, and the sum of a
 * numeric key over them. */
struct gl_steps {
    int lines;
    long long last;
    double sum;
};
struct gl_steps gl_steps_of(const char *path, const char *key);
/* elapsed_s of the "done" line, 0 without one. */
double gl_elapsed_of(const char *path);
/* Print the child's stdout and stderr to stderr. */
void gl_dump(const struct gl_child *c);

/* The GPU's slot for pid, read under the lock without reaping. */
struct ts_simgpu_proc gl_slot_of(pid_t pid);
uint64_t gl_gpu_used_after_reap(void);
/* Busy share of the last second, in percent. */
unsigned gl_gpu_util(void);
/* The step in DIR's checkpoint, -1 without a readable one. */
long long gl_checkpoint_step(const char *dir);

struct gl_case {
    const char *name;
    void (*fn)(void);
};

/* Run the case argv[2] of cases with tessera-gpuload at argv[1], then
 * gl_cleanup: 0 when every check held, 77 when it was skipped, 1 when one
 * failed, 2 on a usage error or an unknown case. */
int gl_main(const struct gl_case *cases, size_t n, int argc, char **argv);

#endif /* TS_TESTS_GPULOAD_HARNESS_H */
