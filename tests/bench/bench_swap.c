/*
 * bench_swap.c - swap-out and swap-in throughput of the shim's swap engine
 * as a share of plain pinned-copy bandwidth on the same machine (simgpu).
 *
 *     bench_swap BANDWIDTH SIZE_MIB...
 *
 * BANDWIDTH: the simulated GPU's copy bandwidth in bytes/s (0: memcpy
 * speed). For each size: one VMM allocation filled with data; the plain
 * figure is one cuMemcpyDtoH_v2 / cuMemcpyHtoD_v2 of it into the reserve
 * file registered as pinned memory (after a warm-up copy); then
 * ts_swap_out and ts_swap_in of the same allocation, timed. Contents are
 * checked after the swap-in. The reserve lives in /dev/shm when it exists
 * (host memory, as the agent's pinned reserve is).
 *
 * A second line times the driver calls a swap cannot avoid, made plainly
 * in sequence on another allocation of the same size (copy out, unmap,
 * release; create, map, enable, copy in): the engine's share of that is
 * its own overhead, apart from what the platform charges for fresh
 * physical memory (on simgpu: host page faults; on a GPU: little).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "agent/shim/swap.h"
#include "tests/shim/swap_env.h"

#define MiB ((uint64_t)1 << 20)

static struct swap_env env;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static CUresult charge(int dev, uint64_t bytes, bool bounded)
{
    (void)bounded;
    (void)dev, (void)bytes;
    return CUDA_SUCCESS;
}

static void uncharge(int dev, uint64_t bytes)
{
    (void)dev, (void)bytes;
}

static int fill(CUdeviceptr p, size_t size)
{
    size_t chunk = 64 * MiB;
    unsigned char *buf = malloc(chunk);
    if (!buf)
        return -1;
    int rc = 0;
    for (size_t off = 0; off < size && rc == 0; off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk;
        ts_swap_env_pattern(buf, n, (uint32_t)(off / chunk));
        rc = env.cu.cuMemcpyHtoD_v2(p + off, buf, n) == CUDA_SUCCESS ? 0 : -1;
    }
    free(buf);
    return rc;
}

static int check(CUdeviceptr p, size_t size)
{
    size_t chunk = 64 * MiB;
    unsigned char *buf = malloc(chunk);
    if (!buf)
        return -1;
    int rc = 0;
    for (size_t off = 0; off < size && rc == 0; off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk;
        rc = env.cu.cuMemcpyDtoH_v2(buf, p + off, n) == CUDA_SUCCESS &&
                     ts_swap_env_check(buf, n, (uint32_t)(off / chunk)) == 0
                 ? 0
                 : -1;
    }
    free(buf);
    return rc;
}

struct figures {
    double dtoh, htod;          /* plain pinned copies, GB/s */
    double out_plain, in_plain; /* the same driver calls a swap makes, in sequence, GB/s */
};

/* New physical memory mapped read-write at va (reserved, size bytes). */
static CUresult create_at(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle *h)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemAccessDesc access = {.location = prop.location,
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUresult rc = env.cu.cuMemCreate(h, size, &prop, 0);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = env.cu.cuMemMap(va, size, 0, *h, 0);
    if (rc == CUDA_SUCCESS)
        rc = env.cu.cuMemSetAccess(va, size, &access, 1);
    return rc;
}

/* The platform's own cost of what a swap must do, without the engine:
 * out = copy to pinned host memory, unmap, release; in = create, map,
 * enable, copy back. On simgpu creating and mapping fresh memory faults
 * in host pages, which a real GPU does not pay; this separates the
 * engine's overhead from that. */
static int plain_swap(const unsigned char *host, size_t size, struct figures *f)
{
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h = 0;
    if (env.cu.cuMemAddressReserve(&va, size, 0, 0, 0) != CUDA_SUCCESS)
        return -1;
    int rc = -1;
    if (create_at(va, size, &h) != CUDA_SUCCESS ||
        env.cu.cuMemcpyHtoD_v2(va, host, size) != CUDA_SUCCESS)
        goto out;
    double t0 = now_s();
    if (env.cu.cuMemcpyDtoH_v2((void *)host, va, size) != CUDA_SUCCESS ||
        env.cu.cuMemUnmap(va, size) != CUDA_SUCCESS || env.cu.cuMemRelease(h) != CUDA_SUCCESS)
        goto out;
    h = 0;
    double t1 = now_s();
    if (create_at(va, size, &h) != CUDA_SUCCESS ||
        env.cu.cuMemcpyHtoD_v2(va, host, size) != CUDA_SUCCESS)
        goto out;
    double t2 = now_s();
    f->out_plain = (double)size / (t1 - t0) / 1e9;
    f->in_plain = (double)size / (t2 - t1) / 1e9;
    rc = 0;
out:
    if (h) {
        env.cu.cuMemUnmap(va, size);
        env.cu.cuMemRelease(h);
    }
    env.cu.cuMemAddressFree(va, size);
    return rc;
}

/* Plain pinned copies of the allocation into the reserve file, then the
 * plain swap through the same host memory. */
static int pinned(CUdeviceptr p, size_t size, struct figures *f)
{
    int fd = -1;
    FILE *file = fopen(env.reserve, "r+b");
    if (file)
        fd = fileno(file);
    void *host = fd >= 0 ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (file)
        fclose(file);
    if (host == MAP_FAILED || env.cu.cuMemHostRegister_v2(host, size, 0) != CUDA_SUCCESS)
        return -1;
    int rc = -1;
    if (env.cu.cuMemcpyDtoH_v2(host, p, size) != CUDA_SUCCESS) /* warm-up: pages in */
        goto out;
    double t0 = now_s();
    if (env.cu.cuMemcpyDtoH_v2(host, p, size) != CUDA_SUCCESS)
        goto out;
    double t1 = now_s();
    if (env.cu.cuMemcpyHtoD_v2(p, host, size) != CUDA_SUCCESS)
        goto out;
    double t2 = now_s();
    f->dtoh = (double)size / (t1 - t0) / 1e9;
    f->htod = (double)size / (t2 - t1) / 1e9;
    rc = plain_swap(host, size, f);
out:
    env.cu.cuMemHostUnregister(host);
    munmap(host, size);
    return rc;
}

static int run(uint64_t bw, size_t size)
{
    if (env.cu.cuCtxSetCurrent(env.ctx[0]) != CUDA_SUCCESS)
        return -1;
    CUdeviceptr p = 0;
    size = ts_vmm_round(0, size);
    if (ts_vmm_alloc(0, size, &p) != CUDA_SUCCESS || fill(p, size) != 0) {
        fprintf(stderr, "bench_swap: could not allocate and fill %zu MiB\n", size / MiB);
        return -1;
    }
    struct figures f = {0};
    if (pinned(p, size, &f) != 0) {
        fprintf(stderr, "bench_swap: pinned copies failed\n");
        return -1;
    }
    /* The first swap of a process maps and registers the reserve. */
    uint64_t moved = 0;
    double c0 = now_s();
    CUresult rc = ts_swap_out(0, size, &moved);
    double c1 = now_s();
    if (rc != CUDA_SUCCESS || ts_swap_in() != CUDA_SUCCESS)
        return -1;
    double c2 = now_s();
    double t0 = now_s();
    rc = ts_swap_out(0, size, &moved);
    double t1 = now_s();
    if (rc != CUDA_SUCCESS || moved != size) {
        fprintf(stderr, "bench_swap: swap-out failed (%d)\n", (int)rc);
        return -1;
    }
    rc = ts_swap_in();
    double t2 = now_s();
    if (rc != CUDA_SUCCESS || check(p, size) != 0) {
        fprintf(stderr, "bench_swap: swap-in failed (%d) or contents differ\n", (int)rc);
        return -1;
    }
    double out = (double)size / (t1 - t0) / 1e9, in = (double)size / (t2 - t1) / 1e9;
    char bws[32];
    if (bw)
        snprintf(bws, sizeof bws, "%.1f GB/s", (double)bw / 1e9);
    else
        snprintf(bws, sizeof bws, "unthrottled");
    printf("bench_swap bandwidth=%s size=%zu MiB: pinned DtoH %.2f GB/s HtoD %.2f GB/s | "
           "swap-out %.2f GB/s (%.0f%%) in %.3f s, swap-in %.2f GB/s (%.0f%%) in %.3f s | "
           "first swap of the process: out %.3f s, in %.3f s\n",
           bws, size / MiB, f.dtoh, f.htod, out, 100 * out / f.dtoh, t1 - t0, in, 100 * in / f.htod,
           t2 - t1, c1 - c0, c2 - c1);
    printf("bench_swap bandwidth=%s size=%zu MiB: the same driver calls without the engine: "
           "out %.2f GB/s, in %.2f GB/s | engine vs them: swap-out %.0f%%, swap-in %.0f%%\n",
           bws, size / MiB, f.out_plain, f.in_plain, 100 * out / f.out_plain,
           100 * in / f.in_plain);
    fflush(stdout);
    int dev;
    size_t bytes;
    bool resident;
    return ts_vmm_free(p, &dev, &bytes, &resident) == CUDA_SUCCESS ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_swap BANDWIDTH SIZE_MIB...\n");
        return 2;
    }
    uint64_t bw = strtoull(argv[1], NULL, 10), most = 0;
    for (int i = 2; i < argc; i++) {
        uint64_t s = strtoull(argv[i], NULL, 10) * MiB;
        most = s > most ? s : most;
    }
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : NULL;
    if (ts_swap_env_setup(&env, base, 1, 2 * most + 1024 * MiB, bw, most) != 0)
        return 1;
    struct ts_swap_config cfg = {.cu = &env.cu,
                                 .ndevices = 1,
                                 .charge = charge,
                                 .uncharge = uncharge,
                                 .reserve_path = env.reserve,
                                 .reserve_pinned = true,
                                 .wait_ms = 60000};
    int rc = ts_swap_init(&cfg) == 0 && ts_vmm_active() ? 0 : 1;
    for (int i = 2; i < argc && rc == 0; i++)
        rc = run(bw, (size_t)strtoull(argv[i], NULL, 10) * MiB) == 0 ? 0 : 1;
    ts_swap_env_teardown(&env);
    return rc;
}
