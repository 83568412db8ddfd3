/*
 * harness.h - what the simgpu test programs share (simgpu_test.c,
 * simgpu_alloc_test.c, simgpu_ops_test.c): the checks and their failure
 * count, fresh GPUs in a temporary folder named by TESSERA_SIMGPU_DIR, the
 * simulated libraries loaded with dlopen through LD_LIBRARY_PATH as a job
 * loads them, the folder's removal, and the program's main: one case per
 * run, named by its argument.
 */
#ifndef TS_TESTS_SIMGPU_HARNESS_H
#define TS_TESTS_SIMGPU_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int sg_failures;  /* checks failed in this run */
extern char sg_dir[256]; /* the GPUs' folder ("" before sg_make_gpus) */

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            sg_failures++;                                                                         \
        }                                                                                          \
    } while (0)
#define CHECK_RC(expr, want)                                                                       \
    do {                                                                                           \
        long got_ = (long)(expr);                                                                  \
        if (got_ != (long)(want)) {                                                                \
            fprintf(stderr, "%s:%d: %s returned %ld, wanted %ld\n", __FILE__, __LINE__, #expr,     \
                    got_, (long)(want));                                                           \
            sg_failures++;                                                                         \
        }                                                                                          \
    } while (0)
#define OK(expr) CHECK_RC(expr, 0)
#define CHECK_EQ(got, want)                                                                        \
    do {                                                                                           \
        unsigned long long g_ = (got), w_ = (want);                                                \
        if (g_ != w_) {                                                                            \
            fprintf(stderr, "%s:%d: %s is %llu, wanted %llu\n", __FILE__, __LINE__, #got, g_, w_); \
            sg_failures++;                                                                         \
        }                                                                                          \
    } while (0)

/* count GPUs of bytes (copy bandwidth bw, 0: memcpy speed) in a new folder
 * $TMPDIR/simgpu-<tag>-XXXXXX, named by TESSERA_SIMGPU_DIR; exits on
 * failure. */
void sg_make_gpus(const char *tag, unsigned count, uint64_t bytes, uint64_t bw);
/* dlopen(lib) or exit. */
void *sg_load(const char *lib);
/* dlsym(lib, name) or exit. */
void *sg_sym(void *lib, const char *name);
/* Remove the GPUs' folder (nothing before sg_make_gpus). */
void sg_cleanup(void);

struct sg_case {
    const char *name;
    void (*fn)(void);
};
#define SG_CASE(f)                                                                                 \
    {                                                                                              \
#f, f                                                                                      \
    }

/* Run the case argv[1] of cases, then sg_cleanup: 0 when every check
 * held, 1 when one failed, 2 on a usage error or an unknown case. */
int sg_main(const char *prog, const struct sg_case *cases, size_t n, int argc, char **argv);

#endif /* TS_TESTS_SIMGPU_HARNESS_H */
