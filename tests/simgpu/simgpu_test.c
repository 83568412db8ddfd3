/*
 * simgpu_test.c - checks of simgpu as a job sees it: the program loads
 * libcuda.so.1 and libnvidia-ml.so.1 with dlopen through LD_LIBRARY_PATH
 * (set by CTest to build/lib/simgpu), after creating fresh simulated GPUs in
 * a temporary folder named by TESSERA_SIMGPU_DIR.
 *
 * Usage: simgpu_test CASE. Multi-process cases run this program again as a
 * child with "child-alloc BYTES HOLD".
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/abi/cuda.h"
#include "agent/abi/nvml.h"
#include "agent/simgpu/state.h"
#include "api/array.h"
#include "tests/simgpu/harness.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

/* The entry points, looked up with dlsym as a job would. */
#define CU_FNS(X)                                                                                  \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)                                                                            \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGetName)                                                                             \
    X(cuDeviceGetUuid)                                                                             \
    X(cuDeviceGetUuid_v2)                                                                          \
    X(cuDeviceTotalMem_v2)                                                                         \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuMemGetInfo_v2)                                                                             \
    X(cuStreamDestroy_v2)                                                                          \
    X(cuEventElapsedTime)                                                                          \
    X(cuDevicePrimaryCtxRelease_v2)                                                                \
    X(cuCtxSetCurrent)                                                                             \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxSynchronize)                                                                            \
    X(cuMemAlloc_v2)                                                                               \
    X(cuMemFree_v2)                                                                                \
    X(cuMemcpyHtoD_v2)                                                                             \
    X(cuMemcpyDtoH_v2)                                                                             \
    X(cuMemcpyDtoD_v2)                                                                             \
    X(cuMemcpyHtoDAsync_v2)                                                                        \
    X(cuMemcpyDtoHAsync_v2)                                                                        \
    X(cuStreamCreate)                                                                              \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamQuery)                                                                               \
    X(cuEventCreate)                                                                               \
    X(cuEventDestroy_v2)                                                                           \
    X(cuEventRecord)                                                                               \
    X(cuEventQuery)                                                                                \
    X(cuEventSynchronize)                                                                          \
    X(cuMemAddressReserve)                                                                         \
    X(cuMemAddressFree)                                                                            \
    X(cuMemCreate)                                                                                 \
    X(cuMemRelease)                                                                                \
    X(cuMemMap)                                                                                    \
    X(cuMemUnmap)                                                                                  \
    X(cuMemSetAccess)                                                                              \
    X(cuMemGetAllocationGranularity)                                                               \
    X(cuModuleLoadData)                                                                            \
    X(cuModuleGetFunction)                                                                         \
    X(cuLaunchKernel)                                                                              \
    X(cuGetProcAddress)                                                                            \
    X(cuGetProcAddress_v2)                                                                         \
    X(cuCtxCreate_v2)                                                                              \
    X(cuCtxDestroy_v2)                                                                             \
    X(cuCtxPushCurrent_v2)                                                                         \
    X(cuCtxPopCurrent_v2)                                                                          \
    X(cuCtxGetDevice)                                                                              \
    X(cuMemHostAlloc)                                                                              \
    X(cuMemAllocHost_v2)                                                                           \
    X(cuMemFreeHost)                                                                               \
    X(cuMemHostRegister_v2)                                                                        \
    X(cuMemHostUnregister)                                                                         \
    X(cuMemHostGetDevicePointer_v2)                                                                \
    X(cuMemsetD8_v2)                                                                               \
    X(cuGetExportTable)                                                                            \
    X(cuModuleLoadDataEx)
#define NVML_FNS(X)                                                                                \
    X(nvmlInit_v2)                                                                                 \
    X(nvmlShutdown)                                                                                \
    X(nvmlDeviceGetCount_v2)                                                                       \
    X(nvmlDeviceGetHandleByIndex_v2)                                                               \
    X(nvmlDeviceGetUUID)                                                                           \
    X(nvmlDeviceGetName)                                                                           \
    X(nvmlDeviceGetMemoryInfo)                                                                     \
    X(nvmlDeviceGetMemoryInfo_v2)                                                                  \
    X(nvmlDeviceGetUtilizationRates)                                                               \
    X(nvmlDeviceGetComputeRunningProcesses_v3)                                                     \
    X(nvmlErrorString)                                                                             \
    X(nvmlDeviceGetProcessUtilization)

#define DECL(name) static __typeof__(name) *p_##name;
CU_FNS(DECL)
NVML_FNS(DECL)
#undef DECL

static void *cu_lib;

static void load_all(void)
{
    void *cu = cu_lib = sg_load("libcuda.so.1");
    void *nv = sg_load("libnvidia-ml.so.1");
#define LOOK(name)                                                                                 \
    if (!(*(void **)&p_##name = dlsym(HANDLE, #name))) {                                           \
        fprintf(stderr, "missing symbol %s\n", #name);                                             \
        exit(1);                                                                                   \
    }
#define HANDLE cu
    CU_FNS(LOOK)
#undef HANDLE
#define HANDLE nv
    NVML_FNS(LOOK)
#undef HANDLE
#undef LOOK
}

/* Fresh GPUs in a temporary folder, libraries loaded, device 0 current. */
static CUcontext setup(unsigned count, uint64_t bytes, uint64_t bw)
{
    sg_make_gpus("test", count, bytes, bw);
    load_all();
    OK(p_cuInit(0));
    CUcontext ctx = NULL;
    OK(p_cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(p_cuCtxSetCurrent(ctx));
    return ctx;
}

static double now_s(void)
{
    return (double)ts_simgpu_now_ns() / 1e9;
}

static size_t free_bytes(void)
{
    size_t fr = 0, total = 0;
    OK(p_cuMemGetInfo_v2(&fr, &total));
    return fr;
}

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry tessera_busy_ns(\n\t.param .u64 ns\n)\n{\n\tret;\n}\n";

/* ---- cases ---- */

static void device_queries_report_the_configured_gpus(void)
{
    setup(2, 80 * GiB, 0);
    int n = 0, v = 0;
    OK(p_cuDeviceGetCount(&n));
    CHECK(n == 2);
    OK(p_cuDriverGetVersion(&v));
    CHECK(v >= 12000);
    CUdevice d0, d1;
    OK(p_cuDeviceGet(&d0, 0));
    OK(p_cuDeviceGet(&d1, 1));
    CHECK_RC(p_cuDeviceGet(&d1, 2), CUDA_ERROR_INVALID_DEVICE);
    char name[128];
    OK(p_cuDeviceGetName(name, sizeof name, d0));
    CHECK(strstr(name, "SimGPU 80GiB") != NULL);
    size_t total = 0;
    OK(p_cuDeviceTotalMem_v2(&total, d1));
    CHECK(total == 80 * GiB);
    CUuuid u0, u1, u0b;
    OK(p_cuDeviceGetUuid(&u0, d0));
    OK(p_cuDeviceGetUuid_v2(&u0b, d0));
    OK(p_cuDeviceGetUuid(&u1, d1));
    CHECK(memcmp(u0.bytes, u1.bytes, 16) != 0);
    CHECK(memcmp(u0.bytes, u0b.bytes, 16) == 0);
    int major = 0, minor = -1, vmm = 0;
    OK(p_cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d0));
    OK(p_cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d0));
    OK(p_cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d0));
    CHECK(major == 9 && minor == 0 && vmm == 1);
    CUcontext cur = NULL;
    OK(p_cuCtxGetCurrent(&cur));
    CHECK(cur != NULL);
    const char *s = NULL;
    OK(p_cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
    CHECK(s && strcmp(s, "CUDA_ERROR_OUT_OF_MEMORY") == 0);
    OK(p_cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    CHECK(s && strcmp(s, "out of memory") == 0);
    CHECK_RC(p_cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuDevicePrimaryCtxRelease_v2(d0));
}

static void allocations_are_distinct_and_counted_in_memory_info(void)
{
    setup(1, 1 * GiB, 0);
    size_t fr = 0, total = 0;
    OK(p_cuMemGetInfo_v2(&fr, &total));
    CHECK(total == 1 * GiB && fr == 1 * GiB);
    CUdeviceptr p[8];
    size_t sizes[8] = {1, 4096, 5000, MiB, 3 * MiB, 100, 64 * MiB, 7};
    size_t sum = 0;
    for (int i = 0; i < 8; i++) {
        OK(p_cuMemAlloc_v2(&p[i], sizes[i]));
        sum += (sizes[i] + 4095) / 4096 * 4096;
    }
    CHECK(free_bytes() == 1 * GiB - sum);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            if (i != j)
                CHECK(p[i] + sizes[i] <= p[j] || p[j] + sizes[j] <= p[i]);
    CUdeviceptr big;
    CHECK_RC(p_cuMemAlloc_v2(&big, 1 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
    for (int i = 0; i < 8; i++)
        OK(p_cuMemFree_v2(p[i]));
    CHECK(free_bytes() == 1 * GiB);
    CHECK_RC(p_cuMemFree_v2(p[0]), CUDA_ERROR_INVALID_VALUE); /* twice */
    OK(p_cuMemAlloc_v2(&big, 1 * GiB));
    CHECK(free_bytes() == 0);
    OK(p_cuMemFree_v2(big));
    OK(p_cuCtxSetCurrent(NULL));
    CHECK_RC(p_cuMemAlloc_v2(&big, 4096), CUDA_ERROR_INVALID_CONTEXT);
}

static void a_large_gpu_is_simulated_without_touching_its_memory(void)
{
    setup(1, 80 * GiB, 0);
    CUdeviceptr a, b;
    OK(p_cuMemAlloc_v2(&a, 40 * GiB));
    OK(p_cuMemAlloc_v2(&b, 39 * GiB));
    CHECK(free_bytes() == 1 * GiB);
    /* Write and read back at both ends of a 40 GiB buffer. */
    uint64_t x = 0x0123456789abcdefull, y = 0;
    OK(p_cuMemcpyHtoD_v2(a + 40 * GiB - 8, &x, 8));
    OK(p_cuMemcpyDtoH_v2(&y, a + 40 * GiB - 8, 8));
    CHECK(x == y);
    OK(p_cuMemFree_v2(a));
    OK(p_cuMemFree_v2(b));
}

static void fill(unsigned char *buf, size_t n, unsigned seed)
{
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        buf[i] = (unsigned char)(s >> 24);
    }
}

static void copies_are_byte_exact_and_bad_pointers_are_refused(void)
{
    setup(1, 1 * GiB, 0);
    size_t n = 3 * MiB + 17;
    unsigned char *in = malloc(n), *out = malloc(n);
    fill(in, n, 1);
    CUdeviceptr a, b;
    OK(p_cuMemAlloc_v2(&a, n));
    OK(p_cuMemAlloc_v2(&b, n));
    OK(p_cuMemcpyHtoD_v2(a, in, n));
    OK(p_cuMemcpyDtoD_v2(b, a, n));
    memset(out, 0, n);
    OK(p_cuMemcpyDtoH_v2(out, b, n));
    CHECK(memcmp(in, out, n) == 0);
    /* Async on a stream, then synchronize. */
    CUstream s;
    OK(p_cuStreamCreate(&s, 0));
    fill(in, n, 2);
    OK(p_cuMemcpyHtoDAsync_v2(a, in, n, s));
    memset(out, 0, n);
    OK(p_cuMemcpyDtoHAsync_v2(out, a, n, s));
    OK(p_cuStreamSynchronize(s));
    CHECK(memcmp(in, out, n) == 0);
    OK(p_cuStreamDestroy_v2(s));
    /* Past the end, a host pointer, a freed pointer: refused, no crash. */
    CHECK_RC(p_cuMemcpyHtoD_v2(a + 1, in, n), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(p_cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)out, in, 16), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemFree_v2(b));
    CHECK_RC(p_cuMemcpyDtoH_v2(out, b, 16), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemFree_v2(a));
    free(in);
    free(out);
}

static void copies_run_at_the_configured_bandwidth(void)
{
    setup(1, 1 * GiB, 10 * 1000 * 1000); /* 10 MB/s */
    size_t n = 10 * 1000 * 1000;         /* 1 s, far more than moving the bytes */
    unsigned char *buf = malloc(n);
    memset(buf, 1, n); /* no page faults inside the timed calls */
    CUdeviceptr a;
    OK(p_cuMemAlloc_v2(&a, n));
    double t0 = now_s();
    OK(p_cuMemcpyHtoD_v2(a, buf, n));
    double t1 = now_s();
    CHECK(t1 - t0 >= 0.99 && t1 - t0 < 5.0);
    CUstream s;
    OK(p_cuStreamCreate(&s, 0));
    t0 = now_s();
    OK(p_cuMemcpyDtoHAsync_v2(buf, a, n, s));
    CHECK(now_s() - t0 < 0.9); /* the caller does not wait for the copy's 1 s */
    CHECK_RC(p_cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    OK(p_cuStreamSynchronize(s));
    CHECK(now_s() - t0 >= 0.99);
    OK(p_cuStreamDestroy_v2(s));
    OK(p_cuMemFree_v2(a));
    free(buf);
}

static void vmm_keeps_address_and_contents_when_physical_memory_is_unmapped_and_remapped(void)
{
    setup(1, 1 * GiB, 0);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    OK(p_cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(gran == 2 * MiB);
    size_t size = 4 * gran;
    CUdeviceptr va = 0;
    OK(p_cuMemAddressReserve(&va, size, 0, 0, 0));
    CHECK(va != 0 && va % gran == 0);
    CHECK(free_bytes() == 1 * GiB); /* address space costs no memory */
    CUmemGenericAllocationHandle h1, h2;
    OK(p_cuMemCreate(&h1, size, &prop, 0));
    CHECK(free_bytes() == 1 * GiB - size);
    OK(p_cuMemMap(va, size, 0, h1, 0));
    unsigned char *in = malloc(size), *out = malloc(size);
    fill(in, size, 3);
    /* Not accessible before cuMemSetAccess. */
    CHECK_RC(p_cuMemcpyHtoD_v2(va, in, size), CUDA_ERROR_INVALID_VALUE);
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    OK(p_cuMemSetAccess(va, size, &acc, 1));
    OK(p_cuMemcpyHtoD_v2(va, in, size));

    /* 1. The same handle unmapped and mapped again keeps its contents. */
    OK(p_cuMemUnmap(va, size));
    CHECK_RC(p_cuMemcpyDtoH_v2(out, va, 16), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemMap(va, size, 0, h1, 0));
    OK(p_cuMemSetAccess(va, size, &acc, 1));
    memset(out, 0, size);
    OK(p_cuMemcpyDtoH_v2(out, va, size));
    CHECK(memcmp(in, out, size) == 0);

    /* 2. Swap out as issue 5's engine does: copy to host, unmap, release
     * (the memory is free again), then create, map at the same address,
     * copy back. */
    memset(out, 0, size);
    OK(p_cuMemcpyDtoH_v2(out, va, size));
    OK(p_cuMemUnmap(va, size));
    OK(p_cuMemRelease(h1));
    CHECK(free_bytes() == 1 * GiB);
    OK(p_cuMemCreate(&h2, size, &prop, 0));
    /* Mapped in two halves this time. */
    OK(p_cuMemMap(va, size / 2, 0, h2, 0));
    OK(p_cuMemMap(va + size / 2, size / 2, size / 2, h2, 0));
    CHECK_RC(p_cuMemMap(va, gran, 0, h2, 0), CUDA_ERROR_ALREADY_MAPPED);
    OK(p_cuMemSetAccess(va, size, &acc, 1));
    OK(p_cuMemcpyHtoD_v2(va, out, size));
    unsigned char *back = malloc(size);
    OK(p_cuMemcpyDtoH_v2(back, va, size));
    CHECK(memcmp(in, back, size) == 0);
    /* A partial unmap of a mapping is refused; release while mapped keeps
     * the memory until it is unmapped. */
    CHECK_RC(p_cuMemUnmap(va, gran), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemRelease(h2));
    CHECK(free_bytes() == 1 * GiB - size);
    OK(p_cuMemUnmap(va, size));
    CHECK(free_bytes() == 1 * GiB);
    OK(p_cuMemAddressFree(va, size));
    /* Sizes off the granularity are refused. */
    CHECK_RC(p_cuMemCreate(&h1, gran + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(p_cuMemCreate(&h1, 2 * GiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    free(in);
    free(out);
    free(back);
}

static void get_proc_address_returns_working_entry_points(void)
{
    setup(1, 1 * GiB, 0);
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    OK(p_cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
    CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK(fn == (void *)p_cuMemAlloc_v2);
    __typeof__(cuMemAlloc_v2) *alloc = (__typeof__(cuMemAlloc_v2) *)fn;
    CUdeviceptr d;
    OK(alloc(&d, MiB));
    CHECK(free_bytes() == 1 * GiB - MiB);
    OK(p_cuGetProcAddress("cuMemFree", &fn, 11080, CU_GET_PROC_ADDRESS_DEFAULT));
    OK(((__typeof__(cuMemFree_v2) *)fn)(d));
    CHECK(free_bytes() == 1 * GiB);
    OK(p_cuGetProcAddress_v2("cuMemMap", &fn, 12000, 0, &st));
    CHECK(fn == (void *)p_cuMemMap);
    OK(p_cuGetProcAddress_v2("cuGetProcAddress", &fn, 12000, 0, &st));
    CHECK(fn == (void *)p_cuGetProcAddress_v2);
    OK(p_cuGetProcAddress_v2("cuGetProcAddress", &fn, 11080, 0, &st));
    CHECK(fn == (void *)p_cuGetProcAddress);
    CHECK_RC(p_cuGetProcAddress_v2("cuNoSuchThing", &fn, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
    CHECK(fn == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

static void kernel_launch_keeps_the_gpu_busy_and_raises_utilization(void)
{
    setup(1, 1 * GiB, 0);
    OK(p_nvmlInit_v2());
    nvmlDevice_t dev;
    OK(p_nvmlDeviceGetHandleByIndex_v2(0, &dev));
    nvmlUtilization_t u = {99, 99};
    OK(p_nvmlDeviceGetUtilizationRates(dev, &u));
    CHECK(u.gpu == 0);
    CUmodule m;
    CUfunction f;
    OK(p_cuModuleLoadData(&m, ptx));
    CHECK_RC(p_cuModuleGetFunction(&f, m, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    OK(p_cuModuleGetFunction(&f, m, "tessera_busy_ns"));
    CUstream s;
    OK(p_cuStreamCreate(&s, 0));
    CUevent e0, e1;
    OK(p_cuEventCreate(&e0, 0));
    OK(p_cuEventCreate(&e1, 0));
    uint64_t ns = 300 * 1000 * 1000;
    void *params[] = {&ns};
    double t0 = now_s();
    OK(p_cuEventRecord(e0, s));
    OK(p_cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
    OK(p_cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
    OK(p_cuEventRecord(e1, s));
    CHECK(now_s() - t0 < 0.1); /* launches are asynchronous */
    CHECK_RC(p_cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CHECK_RC(p_cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    struct timespec ts = {0, 250 * 1000 * 1000};
    nanosleep(&ts, NULL);
    OK(p_nvmlDeviceGetUtilizationRates(dev, &u));
    CHECK(u.gpu >= 15); /* >= 250 ms busy of the last second */
    OK(p_cuEventSynchronize(e1));
    double waited = now_s() - t0;
    CHECK(waited >= 0.59 && waited < 2.0);
    OK(p_cuEventQuery(e1));
    float ms = 0;
    OK(p_cuEventElapsedTime(&ms, e0, e1));
    CHECK(ms >= 599.0f && ms < 700.0f);
    OK(p_cuStreamQuery(s));
    OK(p_nvmlDeviceGetUtilizationRates(dev, &u));
    CHECK(u.gpu >= 55);
    OK(p_cuCtxSynchronize());
    OK(p_cuEventDestroy_v2(e0));
    OK(p_cuEventDestroy_v2(e1));
    OK(p_cuStreamDestroy_v2(s));
    CHECK_RC(p_cuStreamDestroy_v2(s), CUDA_ERROR_INVALID_HANDLE);
    OK(p_nvmlShutdown());
}

static void injected_failures_hit_the_chosen_call(void)
{
    setenv("TESSERA_SIMGPU_FAIL", "cuMemAlloc_v2:3,cuStreamCreate:1:999", 1);
    setup(1, 1 * GiB, 0);
    CUdeviceptr p[4];
    OK(p_cuMemAlloc_v2(&p[0], MiB));
    OK(p_cuMemAlloc_v2(&p[1], MiB));
    CHECK_RC(p_cuMemAlloc_v2(&p[2], MiB), CUDA_ERROR_OUT_OF_MEMORY);
    OK(p_cuMemAlloc_v2(&p[3], MiB));
    CHECK(free_bytes() == 1 * GiB - 3 * MiB);
    CUstream s;
    CHECK_RC(p_cuStreamCreate(&s, 0), CUDA_ERROR_UNKNOWN);
    OK(p_cuStreamCreate(&s, 0));
    OK(p_cuStreamDestroy_v2(s));
    unsetenv("TESSERA_SIMGPU_FAIL");
}

static void nvml_reports_uuid_name_memory_and_processes(void)
{
    setup(2, 16 * GiB, 0);
    CHECK_RC(p_nvmlDeviceGetCount_v2(&(unsigned){0}), NVML_ERROR_UNINITIALIZED);
    OK(p_nvmlInit_v2());
    unsigned n = 0;
    OK(p_nvmlDeviceGetCount_v2(&n));
    CHECK(n == 2);
    nvmlDevice_t dev;
    OK(p_nvmlDeviceGetHandleByIndex_v2(0, &dev));
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    OK(p_nvmlDeviceGetUUID(dev, uuid, sizeof uuid));
    CUuuid cu;
    OK(p_cuDeviceGetUuid(&cu, 0));
    char want[48];
    ts_simgpu_uuid_format((const unsigned char *)cu.bytes, want);
    CHECK(strcmp(uuid, want) == 0 && strlen(uuid) == 40);
    CHECK_RC(p_nvmlDeviceGetUUID(dev, uuid, 8), NVML_ERROR_INSUFFICIENT_SIZE);
    OK(p_nvmlDeviceGetName(dev, name, sizeof name));
    CHECK(strstr(name, "16GiB") != NULL);
    CUdeviceptr d;
    OK(p_cuMemAlloc_v2(&d, 3 * GiB));
    nvmlMemory_t mem;
    OK(p_nvmlDeviceGetMemoryInfo(dev, &mem));
    CHECK(mem.total == 16 * GiB && mem.used == 3 * GiB && mem.free == 13 * GiB);
    nvmlMemory_v2_t m2 = {0};
    CHECK_RC(p_nvmlDeviceGetMemoryInfo_v2(dev, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    m2.version = nvmlMemory_v2;
    OK(p_nvmlDeviceGetMemoryInfo_v2(dev, &m2));
    CHECK(m2.used == 3 * GiB && m2.free == 13 * GiB);
    unsigned count = 0;
    CHECK_RC(p_nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, NULL),
             NVML_ERROR_INSUFFICIENT_SIZE);
    CHECK(count == 1);
    nvmlProcessInfo_t procs[4];
    count = 4;
    OK(p_nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, procs));
    CHECK(count == 1 && procs[0].pid == (unsigned)getpid() && procs[0].usedGpuMemory == 3 * GiB);
    nvmlDevice_t dev1;
    OK(p_nvmlDeviceGetHandleByIndex_v2(1, &dev1));
    count = 4;
    OK(p_nvmlDeviceGetComputeRunningProcesses_v3(dev1, &count, procs));
    CHECK(count == 0);
    CHECK(strcmp(p_nvmlErrorString(NVML_ERROR_NOT_FOUND), "Not Found") == 0);
    OK(p_cuMemFree_v2(d));
    OK(p_nvmlShutdown());
}

static void cuda_visible_devices_selects_and_orders_gpus(void)
{
    /* Create three GPUs first, then restrict the process to "2,0". */
    const char *tmp = getenv("TMPDIR");
    snprintf(sg_dir, sizeof sg_dir, "%s/simgpu-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(sg_dir) || ts_simgpu_create(sg_dir, 3, 8 * GiB, 0) < 0) {
        sg_failures++;
        return;
    }
    setenv("TESSERA_SIMGPU_DIR", sg_dir, 1);
    setenv("CUDA_VISIBLE_DEVICES", "2,0", 1);
    load_all();
    OK(p_cuInit(0));
    int n = 0;
    OK(p_cuDeviceGetCount(&n));
    CHECK(n == 2);
    struct ts_simgpu_dev g2;
    OK(ts_simgpu_open(sg_dir, 2, &g2));
    CUuuid u;
    OK(p_cuDeviceGetUuid(&u, 0));
    CHECK(memcmp(u.bytes, g2.st->uuid, 16) == 0);
    /* Memory taken on ordinal 0 is taken on GPU 2. */
    CUcontext ctx;
    OK(p_cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(p_cuCtxSetCurrent(ctx));
    CUdeviceptr d;
    OK(p_cuMemAlloc_v2(&d, GiB));
    CHECK(g2.st->used_bytes == GiB);
    OK(p_cuMemFree_v2(d));
    ts_simgpu_close(&g2);
    unsetenv("CUDA_VISIBLE_DEVICES");
}

/* Run this program as "child-alloc BYTES HOLD BUSY_MS"; returns its pid.
 * The child writes a line to the pipe once it has tried its allocation and
 * run its kernel. */
static pid_t spawn_child(uint64_t bytes, int hold, unsigned busy_ms, int *ready_fd)
{
    int fds[2];
    if (pipe(fds) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 3);
        char b[32], h[8], k[16];
        snprintf(b, sizeof b, "%llu", (unsigned long long)bytes);
        snprintf(h, sizeof h, "%d", hold);
        snprintf(k, sizeof k, "%u", busy_ms);
        execl("/proc/self/exe", "simgpu_test", "child-alloc", b, h, k, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    *ready_fd = fds[0];
    return pid;
}

/* Child: allocate BYTES on GPU 0, run a kernel of BUSY_MS (if not 0) to its
 * end, report on fd 3 ('y' granted, 'n' out of memory, then the free bytes
 * it sees), then hold until killed if HOLD. */
static int child_alloc(uint64_t bytes, int hold, unsigned busy_ms)
{
    load_all();
    if (p_cuInit(0) != CUDA_SUCCESS)
        return 10;
    CUcontext ctx;
    if (p_cuDevicePrimaryCtxRetain(&ctx, 0) || p_cuCtxSetCurrent(ctx))
        return 11;
    CUdeviceptr d;
    CUresult rc = p_cuMemAlloc_v2(&d, bytes);
    if (busy_ms) {
        CUmodule m;
        CUfunction f;
        uint64_t ns = (uint64_t)busy_ms * 1000000u;
        void *params[] = {&ns};
        if (p_cuModuleLoadData(&m, ptx) || p_cuModuleGetFunction(&f, m, "tessera_busy_ns") ||
            p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) || p_cuCtxSynchronize())
            return 13;
    }
    size_t fr = 0, total = 0;
    p_cuMemGetInfo_v2(&fr, &total);
    char msg[64];
    int n = snprintf(msg, sizeof msg, "%c %zu\n", rc == CUDA_SUCCESS ? 'y' : 'n', fr);
    if (write(3, msg, (size_t)n) != n)
        return 12;
    while (hold)
        pause();
    return 0;
}

static int read_child(int fd, char *granted, size_t *fr)
{
    char buf[64] = {0};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 && sscanf(buf, "%c %zu", granted, fr) == 2 ? 0 : -1;
}

static void capacity_is_enforced_across_two_processes(void)
{
    setup(1, 10 * GiB, 0);
    CUdeviceptr d;
    OK(p_cuMemAlloc_v2(&d, 6 * GiB));
    int fd, status;
    char granted = '?';
    size_t fr = 0;
    pid_t pid = spawn_child(6 * GiB, 0, 0, &fd);
    OK(read_child(fd, &granted, &fr));
    waitpid(pid, &status, 0);
    CHECK(granted == 'n' && fr == 4 * GiB);
    pid = spawn_child(3 * GiB, 1, 0, &fd);
    OK(read_child(fd, &granted, &fr));
    CHECK(granted == 'y' && fr == 1 * GiB);
    CHECK(free_bytes() == 1 * GiB); /* this process sees the child's 3 GiB */
    CUdeviceptr e;
    CHECK_RC(p_cuMemAlloc_v2(&e, 2 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
    kill(pid, SIGTERM);
    waitpid(pid, &status, 0);
    OK(p_cuMemFree_v2(d));
}

static void memory_of_a_dead_process_is_reclaimed(void)
{
    setup(1, 10 * GiB, 0);
    OK(p_nvmlInit_v2());
    int fd, status;
    char granted = '?';
    size_t fr = 0;
    pid_t pid = spawn_child(8 * GiB, 1, 0, &fd);
    OK(read_child(fd, &granted, &fr));
    CHECK(granted == 'y');
    nvmlDevice_t dev;
    OK(p_nvmlDeviceGetHandleByIndex_v2(0, &dev));
    nvmlMemory_t mem;
    OK(p_nvmlDeviceGetMemoryInfo(dev, &mem));
    CHECK(mem.used == 8 * GiB);
    CHECK(free_bytes() == 2 * GiB);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    CHECK(free_bytes() == 10 * GiB);
    OK(p_nvmlDeviceGetMemoryInfo(dev, &mem));
    CHECK(mem.used == 0);
    CUdeviceptr d;
    OK(p_cuMemAlloc_v2(&d, 9 * GiB));
    OK(p_cuMemFree_v2(d));
    OK(p_nvmlShutdown());
}

/* A thread that makes ctx current, then waits for the main thread to
 * destroy it, then tries to allocate in it. */
struct stale_ctx {
    CUcontext ctx;
    sem_t current, destroyed;
    CUresult set_rc, alloc_rc, get_rc;
    CUcontext seen_at_start;
};

static void *stale_ctx_thread(void *arg)
{
    struct stale_ctx *t = arg;
    p_cuCtxGetCurrent(&t->seen_at_start); /* a new thread starts with none */
    t->set_rc = p_cuCtxSetCurrent(t->ctx);
    sem_post(&t->current);
    sem_wait(&t->destroyed);
    CUdeviceptr d;
    t->alloc_rc = p_cuMemAlloc_v2(&d, MiB);
    CUdevice dev;
    t->get_rc = p_cuCtxGetDevice(&dev);
    return NULL;
}

static void created_contexts_stack_per_thread_and_take_their_memory_with_them(void)
{
    CUcontext primary = setup(2, 1 * GiB, 0);
    CUcontext c1 = NULL, c2 = NULL, got = NULL;
    OK(p_cuCtxCreate_v2(&c1, CU_CTX_SCHED_AUTO, 0));
    CHECK(c1 != NULL && c1 != primary);
    OK(p_cuCtxGetCurrent(&got));
    CHECK(got == c1); /* created contexts are pushed */
    CUdeviceptr a, b;
    OK(p_cuMemAlloc_v2(&a, 64 * MiB));
    CHECK(free_bytes() == 1 * GiB - 64 * MiB);
    CUstream s;
    OK(p_cuStreamCreate(&s, 0));

    /* Push and pop. */
    OK(p_cuCtxPushCurrent_v2(primary));
    OK(p_cuCtxGetCurrent(&got));
    CHECK(got == primary);
    OK(p_cuCtxPopCurrent_v2(&got));
    CHECK(got == primary);
    OK(p_cuCtxGetCurrent(&got));
    CHECK(got == c1);
    OK(p_cuCtxPopCurrent_v2(&got));
    CHECK(got == c1);
    OK(p_cuCtxGetCurrent(&got));
    CHECK(got == primary);             /* the one setup made current, below */
    OK(p_cuMemAlloc_v2(&b, 16 * MiB)); /* in the primary context */

    /* A context on the second GPU charges that GPU. */
    OK(p_cuCtxCreate_v2(&c2, CU_CTX_SCHED_BLOCKING_SYNC, 1));
    CUdevice dev = -1;
    OK(p_cuCtxGetDevice(&dev));
    CHECK(dev == 1);
    CHECK(free_bytes() == 1 * GiB); /* GPU 1 is empty */
    CUdeviceptr c;
    OK(p_cuMemAlloc_v2(&c, 32 * MiB));
    CHECK(free_bytes() == 1 * GiB - 32 * MiB);
    OK(p_cuCtxPopCurrent_v2(NULL));

    /* Destroying c1 frees its memory and its streams, not the primary's. */
    OK(p_cuCtxDestroy_v2(c1));
    CHECK(free_bytes() == 1 * GiB - 16 * MiB);
    CHECK_RC(p_cuStreamDestroy_v2(s), CUDA_ERROR_INVALID_HANDLE);
    CHECK_RC(p_cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(p_cuCtxDestroy_v2(c1), CUDA_ERROR_INVALID_CONTEXT);      /* twice */
    CHECK_RC(p_cuCtxDestroy_v2(primary), CUDA_ERROR_INVALID_CONTEXT); /* not a created one */
    CHECK_RC(p_cuCtxPushCurrent_v2(c1), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_RC(p_cuCtxSetCurrent(c1), CUDA_ERROR_INVALID_CONTEXT);
    OK(p_cuMemFree_v2(b));

    /* Destroyed while current on another thread: that thread is told so. */
    struct stale_ctx t = {.ctx = c2};
    sem_init(&t.current, 0, 0);
    sem_init(&t.destroyed, 0, 0);
    pthread_t th;
    pthread_create(&th, NULL, stale_ctx_thread, &t);
    sem_wait(&t.current);
    OK(p_cuCtxDestroy_v2(c2));
    sem_post(&t.destroyed);
    pthread_join(th, NULL);
    CHECK(t.seen_at_start == NULL);
    OK(t.set_rc);
    CHECK_RC(t.alloc_rc, CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CHECK_RC(t.get_rc, CUDA_ERROR_CONTEXT_IS_DESTROYED);
    OK(p_cuCtxSetCurrent(primary));
    CHECK(free_bytes() == 1 * GiB);

    /* Bad arguments; an empty stack. */
    CHECK_RC(p_cuCtxCreate_v2(&c1, CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD, 0),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(p_cuCtxCreate_v2(&c1, 0x100, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(p_cuCtxCreate_v2(&c1, 0, 7), CUDA_ERROR_INVALID_DEVICE);
    CHECK_RC(p_cuCtxPushCurrent_v2(NULL), CUDA_ERROR_INVALID_CONTEXT);
    OK(p_cuCtxPopCurrent_v2(&got));
    CHECK(got == primary);
    CHECK_RC(p_cuCtxPopCurrent_v2(&got), CUDA_ERROR_INVALID_CONTEXT);
    OK(p_cuCtxSetCurrent(NULL)); /* nothing to pop: no error */
    CHECK_RC(p_cuMemAlloc_v2(&a, MiB), CUDA_ERROR_INVALID_CONTEXT);
    /* A created context can be made again after one was destroyed. */
    OK(p_cuCtxCreate_v2(&c1, 0, 0));
    OK(p_cuMemAlloc_v2(&a, MiB));
    OK(p_cuCtxDestroy_v2(c1));
    CHECK_RC(p_cuMemAlloc_v2(&a, MiB), CUDA_ERROR_INVALID_CONTEXT); /* popped */
}

static void pinned_host_memory_is_allocated_registered_and_copied_through(void)
{
    setup(1, 1 * GiB, 0);
    size_t n = 3 * MiB + 5;
    unsigned char *src = NULL, *dst = NULL;
    OK(p_cuMemHostAlloc((void **)&src, n, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    OK(p_cuMemAllocHost_v2((void **)&dst, n));
    CHECK(src && dst && (uintptr_t)src % 4096 == 0);
    CHECK(free_bytes() == 1 * GiB); /* host memory, not the GPU's */
    fill(src, n, 7);
    CUdeviceptr d;
    OK(p_cuMemAlloc_v2(&d, n));
    OK(p_cuMemcpyHtoD_v2(d, src, n));
    OK(p_cuMemcpyDtoH_v2(dst, d, n));
    CHECK(memcmp(src, dst, n) == 0);
    /* Async through a stream, from and to pinned memory. */
    CUstream s;
    OK(p_cuStreamCreate(&s, 0));
    fill(src, n, 8);
    memset(dst, 0, n);
    OK(p_cuMemcpyHtoDAsync_v2(d, src, n, s));
    OK(p_cuMemcpyDtoHAsync_v2(dst, d, n, s));
    OK(p_cuStreamSynchronize(s));
    CHECK(memcmp(src, dst, n) == 0);
    OK(p_cuStreamDestroy_v2(s));
    /* Mapped: the device pointer is the host address; device copies reach it. */
    CUdeviceptr mapped = 0;
    OK(p_cuMemHostGetDevicePointer_v2(&mapped, dst + 100, 0));
    CHECK(mapped == (CUdeviceptr)(uintptr_t)(dst + 100));
    memset(dst, 0, n);
    OK(p_cuMemcpyDtoD_v2((CUdeviceptr)(uintptr_t)dst, d, n));
    CHECK(memcmp(src, dst, n) == 0);
    CHECK_RC(p_cuMemcpyDtoD_v2((CUdeviceptr)(uintptr_t)dst + 1, d, n), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(p_cuMemHostGetDevicePointer_v2(&mapped, dst, 1), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemFreeHost(src));
    OK(p_cuMemFreeHost(dst));
    CHECK_RC(p_cuMemFreeHost(src), CUDA_ERROR_INVALID_VALUE); /* twice */
    CHECK_RC(p_cuMemHostGetDevicePointer_v2(&mapped, dst, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(p_cuMemcpyDtoD_v2((CUdeviceptr)(uintptr_t)dst, d, 16), CUDA_ERROR_INVALID_VALUE);

    /* Registered memory. */
    size_t rn = 2 * MiB;
    unsigned char *reg = aligned_alloc(4096, rn), *ro = aligned_alloc(4096, 4096);
    void *plain = malloc(64);
    OK(p_cuMemHostRegister_v2(reg, rn, CU_MEMHOSTREGISTER_DEVICEMAP));
    CHECK_RC(p_cuMemHostRegister_v2(reg, rn, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK_RC(p_cuMemHostRegister_v2(reg + 4096, 4096, 0),
             CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK_RC(p_cuMemHostRegister_v2(reg, rn, CU_MEMHOSTREGISTER_IOMEMORY),
             CUDA_ERROR_NOT_SUPPORTED);
    CHECK_RC(p_cuMemHostRegister_v2(reg, rn, 0x100), CUDA_ERROR_INVALID_VALUE);
    fill(reg, rn, 9);
    OK(p_cuMemcpyHtoD_v2(d, reg, rn));
    OK(p_cuMemsetD8_v2((CUdeviceptr)(uintptr_t)reg, 0xab, 10)); /* the device writes it */
    CHECK(reg[0] == 0xab && reg[9] == 0xab);
    unsigned char back[64];
    OK(p_cuMemcpyDtoH_v2(back, d + 10, sizeof back));
    CHECK(memcmp(back, reg + 10, sizeof back) == 0);
    OK(p_cuMemHostRegister_v2(ro, 4096, CU_MEMHOSTREGISTER_READ_ONLY));
    CHECK_RC(p_cuMemsetD8_v2((CUdeviceptr)(uintptr_t)ro, 0, 16), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemcpyDtoD_v2(d, (CUdeviceptr)(uintptr_t)ro, 16)); /* reading it is fine */
    OK(p_cuMemHostUnregister(reg));
    OK(p_cuMemHostUnregister(ro));
    CHECK_RC(p_cuMemHostUnregister(reg), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CHECK_RC(p_cuMemHostUnregister(plain), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CHECK_RC(p_cuMemFreeHost(plain), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(p_cuMemsetD8_v2((CUdeviceptr)(uintptr_t)reg, 0, 16), CUDA_ERROR_INVALID_VALUE);
    /* Memory that is not mapped cannot be registered; device memory neither. */
    void *gone = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(gone, 8192);
    CHECK_RC(p_cuMemHostRegister_v2(gone, 8192, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(p_cuMemHostRegister_v2((void *)(uintptr_t)d, 4096, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(p_cuMemHostRegister_v2(NULL, 4096, 0), CUDA_ERROR_INVALID_VALUE);
    /* Through cuGetProcAddress; and not without a context. */
    void *fn = NULL;
    OK(p_cuGetProcAddress_v2("cuMemAllocHost", &fn, 12000, 0, NULL));
    CHECK(fn == (void *)p_cuMemAllocHost_v2);
    OK(p_cuGetProcAddress_v2("cuMemHostRegister", &fn, 12000, 0, NULL));
    CHECK(fn == (void *)p_cuMemHostRegister_v2);
    OK(p_cuMemFree_v2(d));
    OK(p_cuCtxSetCurrent(NULL));
    CHECK_RC(p_cuMemHostAlloc((void **)&src, 4096, 0), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_RC(p_cuMemHostRegister_v2(reg, rn, 0), CUDA_ERROR_INVALID_CONTEXT);
    free(reg);
    free(ro);
    free(plain);
}

/* The per-thread default stream flavours and the plain call each stands for. */
static const struct {
    const char *pt, *plain, *base;
} pt_fns[] = {
    {"cuMemcpyHtoD_v2_ptds", "cuMemcpyHtoD_v2", "cuMemcpyHtoD"},
    {"cuMemcpyDtoH_v2_ptds", "cuMemcpyDtoH_v2", "cuMemcpyDtoH"},
    {"cuMemcpyDtoD_v2_ptds", "cuMemcpyDtoD_v2", "cuMemcpyDtoD"},
    {"cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync"},
    {"cuMemcpyDtoHAsync_v2_ptsz", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync"},
    {"cuMemcpyDtoDAsync_v2_ptsz", "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync"},
    {"cuMemsetD8_v2_ptds", "cuMemsetD8_v2", "cuMemsetD8"},
    {"cuMemsetD32_v2_ptds", "cuMemsetD32_v2", "cuMemsetD32"},
    {"cuStreamSynchronize_ptsz", "cuStreamSynchronize", "cuStreamSynchronize"},
    {"cuStreamQuery_ptsz", "cuStreamQuery", "cuStreamQuery"},
    {"cuEventRecord_ptsz", "cuEventRecord", "cuEventRecord"},
    {"cuLaunchKernel_ptsz", "cuLaunchKernel", "cuLaunchKernel"},
};

static void per_thread_default_stream_flavours_are_exported_and_handed_out(void)
{
    setup(1, 1 * GiB, 0);
    for (size_t i = 0; i < TS_ARRAY_LEN(pt_fns); i++) {
        void *pt = dlsym(cu_lib, pt_fns[i].pt), *plain = dlsym(cu_lib, pt_fns[i].plain);
        void *fn = NULL;
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CHECK(pt != NULL && plain != NULL && pt != plain);
        OK(p_cuGetProcAddress_v2(pt_fns[i].base, &fn, 12000,
                                 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
        if (fn != pt)
            fprintf(stderr, "per-thread %s: got %p, wanted %s\n", pt_fns[i].base, fn, pt_fns[i].pt);
        CHECK(fn == pt && st == CU_GET_PROC_ADDRESS_SUCCESS);
        OK(p_cuGetProcAddress(pt_fns[i].base, &fn, 11080,
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
        CHECK(fn == pt);
        OK(p_cuGetProcAddress_v2(pt_fns[i].base, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
        CHECK(fn == plain);
        OK(p_cuGetProcAddress_v2(pt_fns[i].base, &fn, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                                 &st));
        CHECK(fn == plain);
    }
    /* A call without such a flavour is the plain one under either flag. */
    void *fn = NULL;
    OK(p_cuGetProcAddress_v2("cuMemAlloc", &fn, 12000,
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    CHECK(fn == (void *)p_cuMemAlloc_v2);

    /* They work, with NULL meaning the thread's default stream. */
#define PT(name) ((__typeof__(name) *)dlsym(cu_lib, #name))
    size_t n = MiB;
    unsigned char *in = malloc(n), *out = calloc(1, n);
    fill(in, n, 11);
    CUdeviceptr a, b;
    OK(p_cuMemAlloc_v2(&a, n));
    OK(p_cuMemAlloc_v2(&b, n));
    OK(PT(cuMemcpyHtoD_v2_ptds)(a, in, n));
    OK(PT(cuMemcpyDtoD_v2_ptds)(b, a, n));
    OK(PT(cuMemcpyDtoH_v2_ptds)(out, b, n));
    CHECK(memcmp(in, out, n) == 0);
    OK(PT(cuMemsetD8_v2_ptds)(a, 0x11, 8));
    OK(PT(cuMemsetD32_v2_ptds)(a + 8, 0x22222222u, 2));
    OK(PT(cuMemcpyDtoDAsync_v2_ptsz)(b, a, 16, NULL));
    OK(PT(cuMemcpyHtoDAsync_v2_ptsz)(a, in, n, NULL));
    memset(out, 0, n);
    OK(PT(cuMemcpyDtoHAsync_v2_ptsz)(out, b, 16, NULL));
    OK(PT(cuStreamSynchronize_ptsz)(NULL));
    CHECK(out[0] == 0x11 && out[7] == 0x11 && out[8] == 0x22 && out[15] == 0x22);
    CUmodule m;
    CUfunction f;
    OK(p_cuModuleLoadData(&m, ptx));
    OK(p_cuModuleGetFunction(&f, m, "tessera_busy_ns"));
    CUevent e;
    OK(p_cuEventCreate(&e, 0));
    uint64_t ns = 200 * 1000 * 1000;
    void *params[] = {&ns};
    double t0 = now_s();
    OK(PT(cuLaunchKernel_ptsz)(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    OK(PT(cuEventRecord_ptsz)(e, NULL));
    CHECK_RC(PT(cuStreamQuery_ptsz)(NULL), CUDA_ERROR_NOT_READY);
    OK(PT(cuStreamSynchronize_ptsz)(NULL));
    CHECK(now_s() - t0 >= 0.19);
    OK(PT(cuStreamQuery_ptsz)(NULL));
    OK(p_cuEventQuery(e));
    OK(p_cuEventDestroy_v2(e));
#undef PT
    OK(p_cuMemFree_v2(a));
    OK(p_cuMemFree_v2(b));
    free(in);
    free(out);
}

static void export_tables_and_module_options_are_answered_cleanly(void)
{
    setup(1, 1 * GiB, 0);
    /* Any id, even before cuInit in a real program: NOT_SUPPORTED, no crash. */
    CUuuid id = {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12,
                  0xfd, 0x9d, 0xf9}};
    const void *table = (const void *)&id;
    CHECK_RC(p_cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
    CHECK(table == NULL);
    CHECK_RC(p_cuGetExportTable(NULL, &id), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(p_cuGetExportTable(&table, NULL), CUDA_ERROR_INVALID_VALUE);
    void *fn = NULL;
    OK(p_cuGetProcAddress_v2("cuGetExportTable", &fn, 12000, 0, NULL));
    CHECK(fn == (void *)p_cuGetExportTable);
    /* cuModuleLoadDataEx: the JIT log asked for is empty. */
    char log[64];
    memset(log, 'x', sizeof log);
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {log, (void *)(uintptr_t)sizeof log};
    CUmodule m;
    CUfunction f;
    OK(p_cuModuleLoadDataEx(&m, ptx, 2, opts, vals));
    CHECK(log[0] == '\0' && vals[1] == NULL);
    OK(p_cuModuleGetFunction(&f, m, "tessera_busy_ns"));
    CHECK_RC(p_cuModuleGetFunction(&f, m, "other"), CUDA_ERROR_NOT_FOUND);
    CHECK_RC(p_cuModuleLoadDataEx(&m, ptx, 2, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuModuleLoadDataEx(&m, ptx, 0, NULL, NULL));
}

static unsigned long long realtime_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000ull;
}

static void nvml_attributes_memory_and_busy_time_to_each_process(void)
{
    setup(1, 10 * GiB, 0);
    OK(p_nvmlInit_v2());
    nvmlDevice_t dev;
    OK(p_nvmlDeviceGetHandleByIndex_v2(0, &dev));
    unsigned n = 8;
    nvmlProcessUtilizationSample_t u[8];
    unsigned long long t0 = realtime_us();
    CHECK_RC(p_nvmlDeviceGetProcessUtilization(dev, u, &n, 0), NVML_ERROR_NOT_FOUND);
    CHECK(n == 0);

    /* This process: 2 GiB and a 300 ms kernel; a child: 3 GiB and 100 ms. */
    CUdeviceptr d;
    OK(p_cuMemAlloc_v2(&d, 2 * GiB));
    CUmodule m;
    CUfunction f;
    OK(p_cuModuleLoadData(&m, ptx));
    OK(p_cuModuleGetFunction(&f, m, "tessera_busy_ns"));
    uint64_t ns = 300 * 1000 * 1000;
    void *params[] = {&ns};
    OK(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    OK(p_cuCtxSynchronize());
    int fd, status;
    char granted = '?';
    size_t fr = 0;
    pid_t pid = spawn_child(3 * GiB, 1, 100, &fd);
    OK(read_child(fd, &granted, &fr));
    CHECK(granted == 'y');

    /* Memory, per process. */
    nvmlProcessInfo_t procs[4];
    unsigned count = 4;
    OK(p_nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, procs));
    CHECK(count == 2);
    for (unsigned i = 0; i < count && i < 4; i++) {
        if (procs[i].pid == (unsigned)getpid())
            CHECK(procs[i].usedGpuMemory == 2 * GiB);
        else
            CHECK(procs[i].pid == (unsigned)pid && procs[i].usedGpuMemory == 3 * GiB);
    }

    /* Busy time, per process, since t0: 300 ms and 100 ms of the window. */
    unsigned long long t1 = realtime_us();
    n = 0;
    CHECK_RC(p_nvmlDeviceGetProcessUtilization(dev, NULL, &n, t0), NVML_ERROR_INSUFFICIENT_SIZE);
    CHECK(n == 2);
    n = 1;
    CHECK_RC(p_nvmlDeviceGetProcessUtilization(dev, u, &n, t0), NVML_ERROR_INSUFFICIENT_SIZE);
    CHECK(n == 2);
    n = 8;
    OK(p_nvmlDeviceGetProcessUtilization(dev, u, &n, t0));
    CHECK(n == 2);
    double window_ms = (double)(realtime_us() - t0) / 1000.0;
    unsigned mine = 0, child = 0;
    unsigned long long stamp = 0;
    for (unsigned i = 0; i < n && i < 8; i++) {
        if (u[i].pid == (unsigned)getpid())
            mine = u[i].smUtil;
        else if (u[i].pid == (unsigned)pid)
            child = u[i].smUtil;
        CHECK(u[i].timeStamp >= t1 && u[i].memUtil == 0);
        stamp = u[i].timeStamp;
    }
    double want_mine = 300 * 100 / window_ms, want_child = 100 * 100 / window_ms;
    if (mine < want_mine - 5 || mine > want_mine + 5 || child < want_child - 5 ||
        child > want_child + 5)
        fprintf(stderr, "smUtil %u and %u, wanted about %.0f and %.0f\n", mine, child, want_mine,
                want_child);
    CHECK(mine >= want_mine - 5 && mine <= want_mine + 5);
    CHECK(child >= want_child - 5 && child <= want_child + 5 && child > 0);
    /* Nothing ran since the last sample. */
    n = 8;
    CHECK_RC(p_nvmlDeviceGetProcessUtilization(dev, u, &n, stamp), NVML_ERROR_NOT_FOUND);

    /* The tool lists the same. */
    const char *tool = getenv("TS_SIMGPU_TOOL");
    if (tool && *tool) {
        char cmd[1024], line[256], want[128];
        snprintf(cmd, sizeof cmd, "'%s' procs '%s'", tool, sg_dir);
        snprintf(want, sizeof want, "gpu=0 pid=%d used=3GiB busy_ms=100 ", (int)pid);
        FILE *f2 = popen(cmd, "r");
        bool found = false;
        while (f2 && fgets(line, sizeof line, f2))
            found = found || strncmp(line, want, strlen(want)) == 0;
        CHECK(f2 && pclose(f2) == 0 && found);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    count = 4;
    OK(p_nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, procs));
    CHECK(count == 1 && procs[0].pid == (unsigned)getpid());
    OK(p_cuMemFree_v2(d));
    OK(p_nvmlShutdown());
}

/* clang-format off */
static const struct sg_case cases[] = {
#define CASE(f) SG_CASE(f)
    CASE(device_queries_report_the_configured_gpus),
    CASE(allocations_are_distinct_and_counted_in_memory_info),
    CASE(a_large_gpu_is_simulated_without_touching_its_memory),
    CASE(copies_are_byte_exact_and_bad_pointers_are_refused),
    CASE(copies_run_at_the_configured_bandwidth),
    CASE(vmm_keeps_address_and_contents_when_physical_memory_is_unmapped_and_remapped),
    CASE(get_proc_address_returns_working_entry_points),
    CASE(kernel_launch_keeps_the_gpu_busy_and_raises_utilization),
    CASE(injected_failures_hit_the_chosen_call),
    CASE(nvml_reports_uuid_name_memory_and_processes),
    CASE(cuda_visible_devices_selects_and_orders_gpus),
    CASE(capacity_is_enforced_across_two_processes),
    CASE(memory_of_a_dead_process_is_reclaimed),
    CASE(created_contexts_stack_per_thread_and_take_their_memory_with_them),
    CASE(pinned_host_memory_is_allocated_registered_and_copied_through),
    CASE(per_thread_default_stream_flavours_are_exported_and_handed_out),
    CASE(export_tables_and_module_options_are_answered_cleanly),
    CASE(nvml_attributes_memory_and_busy_time_to_each_process),
#undef CASE
};
/* clang-format on */

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "child-alloc") == 0)
        return child_alloc(strtoull(argv[2], NULL, 10), atoi(argv[3]),
                           (unsigned)strtoul(argv[4], NULL, 10));
    return sg_main("simgpu_test", cases, TS_ARRAY_LEN(cases), argc, argv);
}
