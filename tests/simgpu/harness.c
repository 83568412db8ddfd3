/*
 * harness.c - what the simgpu test programs share (harness.h).
 */
#include "tests/simgpu/harness.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/simgpu/state.h"

int sg_failures;
char sg_dir[256];

void sg_make_gpus(const char *tag, unsigned count, uint64_t bytes, uint64_t bw)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(sg_dir, sizeof sg_dir, "%s/simgpu-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (!mkdtemp(sg_dir)) {
        perror("mkdtemp");
        exit(1);
    }
    int rc = ts_simgpu_create(sg_dir, count, bytes, bw);
    if (rc < 0) {
        fprintf(stderr, "could not create GPUs in %s: %s\n", sg_dir, strerror(-rc));
        exit(1);
    }
    setenv("TESSERA_SIMGPU_DIR", sg_dir, 1);
}

void *sg_load(const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "could not load %s: %s\n", lib, dlerror());
        exit(1);
    }
    return h;
}

void *sg_sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "missing symbol %s\n", name);
        exit(1);
    }
    return p;
}

void sg_cleanup(void)
{
    if (!sg_dir[0])
        return;
    char path[512];
    for (unsigned i = 0; i < TS_SIMGPU_MAX_GPUS; i++) {
        snprintf(path, sizeof path, "%s/gpu%u.state", sg_dir, i);
        unlink(path);
    }
    rmdir(sg_dir);
}

int sg_main(const char *prog, const struct sg_case *cases, size_t n, int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASE\n", prog);
        return 2;
    }
    for (size_t i = 0; i < n; i++)
        if (strcmp(cases[i].name, argv[1]) == 0) {
            cases[i].fn();
            sg_cleanup();
            if (sg_failures)
                fprintf(stderr, "%s: %d checks failed\n", argv[1], sg_failures);
            return sg_failures ? 1 : 0;
        }
    fprintf(stderr, "unknown case: %s\n", argv[1]);
    return 2;
}
