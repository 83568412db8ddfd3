/* swap_env.c - a simulated node for the swap engine's tests (swap_env.h). */
#include "tests/shim/swap_env.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char busy_ptx[] =
    ".version 7.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry tessera_busy_ns(\n\t.param .u64 ns\n)\n{\n\tret;\n}\n";

#define LOAD(table, name)                                                                          \
    do {                                                                                           \
        *(void **)&(table).name = dlsym(e->lib, #name);                                            \
        if (!(table).name) {                                                                       \
            fprintf(stderr, "swap_env: %s missing from libcuda.so.1\n", #name);                    \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static int load(struct swap_env *e)
{
    struct ts_cu *c = &e->cu;
    LOAD(*c, cuCtxGetCurrent);
    LOAD(*c, cuCtxSetCurrent);
    LOAD(*c, cuCtxGetDevice);
    LOAD(*c, cuCtxSynchronize);
    LOAD(*c, cuDevicePrimaryCtxRetain);
    LOAD(*c, cuDeviceGet);
    LOAD(*c, cuDeviceGetCount);
    LOAD(*c, cuDeviceTotalMem_v2);
    LOAD(*c, cuMemGetInfo_v2);
    LOAD(*c, cuMemAddressReserve);
    LOAD(*c, cuMemAddressFree);
    LOAD(*c, cuMemCreate);
    LOAD(*c, cuMemRelease);
    LOAD(*c, cuMemMap);
    LOAD(*c, cuMemUnmap);
    LOAD(*c, cuMemSetAccess);
    LOAD(*c, cuMemGetAllocationGranularity);
    LOAD(*c, cuMemcpyDtoH_v2);
    LOAD(*c, cuMemcpyHtoD_v2);
    LOAD(*c, cuMemcpyDtoHAsync_v2);
    LOAD(*c, cuMemcpyHtoDAsync_v2);
    LOAD(*c, cuStreamCreate);
    LOAD(*c, cuStreamSynchronize);
    LOAD(*c, cuMemHostRegister_v2);
    LOAD(*c, cuMemHostUnregister);
    LOAD(*e, cuLaunchKernel);
    LOAD(*e, cuModuleLoadData);
    LOAD(*e, cuModuleGetFunction);
    LOAD(*e, cuMemAllocHost_v2);
    LOAD(*e, cuMemFreeHost);
    return 0;
}

int ts_swap_env_create(struct swap_env *e, const char *base, unsigned ngpus, uint64_t gpu_bytes,
                       uint64_t bw, uint64_t reserve_bytes)
{
    memset(e, 0, sizeof *e);
    if (ngpus == 0 || ngpus > SWAP_ENV_MAX_GPUS)
        return -1;
    if (!base)
        base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(e->dir, sizeof e->dir, "%s/ts-swap-XXXXXX", base);
    if (!mkdtemp(e->dir)) {
        perror("swap_env: mkdtemp");
        return -1;
    }
    char gpus[300];
    snprintf(gpus, sizeof gpus, "%s/gpus", e->dir);
    if (ts_simgpu_create(gpus, ngpus, gpu_bytes, bw) != 0) {
        fprintf(stderr, "swap_env: ts_simgpu_create failed\n");
        return -1;
    }
    setenv("TESSERA_SIMGPU_DIR", gpus, 1);
    e->ngpus = ngpus;
    for (unsigned i = 0; i < ngpus; i++)
        if (ts_simgpu_open(gpus, i, &e->gpu[i]) != 0)
            return -1;
    snprintf(e->reserve, sizeof e->reserve, "%s/reserve", e->dir);
    int fd = open(e->reserve, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)reserve_bytes) != 0) {
        perror("swap_env: reserve");
        return -1;
    }
    close(fd);
    return 0;
}

int ts_swap_env_load(struct swap_env *e)
{
    e->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!e->lib) {
        fprintf(stderr, "swap_env: %s (set LD_LIBRARY_PATH to simgpu)\n", dlerror());
        return -1;
    }
    if (load(e) != 0)
        return -1;
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(e->lib, "cuInit");
    if (!init || init(0) != CUDA_SUCCESS)
        return -1;
    for (unsigned i = 0; i < e->ngpus; i++) {
        CUdevice d;
        if (e->cu.cuDeviceGet(&d, (int)i) || e->cu.cuDevicePrimaryCtxRetain(&e->ctx[i], d))
            return -1;
    }
    return e->cu.cuCtxSetCurrent(e->ctx[0]) == CUDA_SUCCESS ? 0 : -1;
}

int ts_swap_env_setup(struct swap_env *e, const char *base, unsigned ngpus, uint64_t gpu_bytes,
                      uint64_t bw, uint64_t reserve_bytes)
{
    if (ts_swap_env_create(e, base, ngpus, gpu_bytes, bw, reserve_bytes) != 0)
        return -1;
    return ts_swap_env_load(e);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void ts_swap_env_teardown(struct swap_env *e)
{
    for (unsigned i = 0; i < e->ngpus; i++)
        ts_simgpu_close(&e->gpu[i]);
    if (e->dir[0])
        nftw(e->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

uint64_t ts_swap_env_gpu_used(struct swap_env *e, unsigned gpu)
{
    return atomic_load(&e->gpu[gpu].st->used_bytes);
}

CUfunction ts_swap_env_busy_kernel(struct swap_env *e)
{
    CUmodule m;
    CUfunction f = NULL;
    if (e->cuModuleLoadData(&m, busy_ptx) || e->cuModuleGetFunction(&f, m, "tessera_busy_ns"))
        return NULL;
    return f;
}

static uint64_t word_of(size_t i, uint32_t seed)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed << 32 | seed);
    x ^= x >> 29;
    return x * 0xbf58476d1ce4e5b9ull;
}

void ts_swap_env_pattern(void *buf, size_t n, uint32_t seed)
{
    uint64_t *w = buf;
    for (size_t i = 0; i < n / 8; i++)
        w[i] = word_of(i, seed);
}

int ts_swap_env_check(const void *buf, size_t n, uint32_t seed)
{
    const uint64_t *w = buf;
    for (size_t i = 0; i < n / 8; i++)
        if (w[i] != word_of(i, seed))
            return -1;
    return 0;
}
