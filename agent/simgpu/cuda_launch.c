/*
 * cuda_launch.c - kernel launches of simgpu's libcuda.so.1: cuLaunchKernel,
 * cuLaunchKernelEx (and its per-thread flavour), the add_u32 kernel that
 * computes, and the cooperative launches (cuLaunchCooperativeKernel and its
 * per-thread default stream flavour).
 *
 * Kernels run no code here, so a cooperative launch is a launch like
 * cuLaunchKernel's (the same checks, the same busy time); what it adds is
 * the limit of a grid whose blocks must all be resident at once: at most
 * as many blocks as the GPU's multiprocessors can hold by thread count
 * (MULTIPROCESSOR_COUNT x MAX_THREADS_PER_MULTIPROCESSOR / threads per
 * block), else CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE. Registers and
 * shared memory, which lower that limit on a real GPU, are not modelled.
 */
#include <stdint.h>
#include <string.h>

#pragma GCC visibility push(default)
#include "agent/abi/cuda.h"
#pragma GCC visibility pop
#include "agent/simgpu/cuda_int.h"

/* Whether `blocks` blocks of `threads` threads fit at once on the current
 * context's GPU. */
static bool grid_resident(uint64_t blocks, uint64_t threads)
{
    int sms = 0, per_sm = 0;
    CUdevice dev = cur()->ordinal;
    if (cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS ||
        cuDeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev) !=
            CUDA_SUCCESS)
        return false;
    return blocks <= (uint64_t)sms * ((uint64_t)per_sm / threads);
}

static CUresult coop_launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                            unsigned int bx, unsigned int by, unsigned int bz, CUstream hs,
                            void **params)
{
    NEED_CTX();
    uint64_t threads = (uint64_t)bx * by * bz, blocks = (uint64_t)gx * gy * gz;
    /* A shape launch() refuses (an empty grid or block, a block of more
     * than 1024 threads) is its CUDA_ERROR_INVALID_VALUE. */
    if (blocks > 0 && threads > 0 && threads <= 1024 && !grid_resident(blocks, threads))
        return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    return launch(f, gx, gy, gz, bx, by, bz, hs, params);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams)
{
    FAIL(cuLaunchCooperativeKernel, CUDA_ERROR_LAUNCH_FAILED);
    (void)sharedMemBytes;
    return coop_launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream,
                       kernelParams);
}

/* Counted with the plain call; calls no entry point (an interposer would
 * catch that call, as it never catches a real driver's own). */
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX,
                                        unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int sharedMemBytes, CUstream hStream,
                                        void **kernelParams)
{
    FAIL(cuLaunchCooperativeKernel, CUDA_ERROR_LAUNCH_FAILED);
    (void)sharedMemBytes;
    return coop_launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                       per_thread(hStream), kernelParams);
}

/* The one kernel that computes: p[0..n) += v over u32 words of device
 * memory the launching context's device reaches (its own cuMemAlloc
 * memory, or mappings it was given access to); else an illegal address,
 * as a real GPU faults. */
static CUresult add_u32(void **params)
{
    if (!params || !params[0] || !params[1] || !params[2])
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr p;
    unsigned int n, v;
    memcpy(&p, params[0], sizeof p);
    memcpy(&n, params[1], sizeof n);
    memcpy(&v, params[2], sizeof v);
    int ord = -1;
    if (p % 4 || range_check(p, (size_t)n * 4, true, &ord) != CUDA_SUCCESS || ord != cur()->ordinal)
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    _Atomic uint32_t *w = (_Atomic uint32_t *)(uintptr_t)p;
    for (unsigned int i = 0; i < n; i++)
        atomic_fetch_add(&w[i], v);
    return CUDA_SUCCESS;
}

CUresult launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                unsigned int by, unsigned int bz, CUstream hs, void **params)
{
    NEED_CTX();
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (!known(&funcs, f))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    /* A context is bound to one device: its kernels are its modules' and
     * run on its streams. */
    if (f->mod->ctx != cur() || s->ctx != cur())
        return CUDA_ERROR_INVALID_CONTEXT;
    uint64_t dur = kernel_ns_default;
    if (f->busy_param) {
        if (!params || !params[0])
            return CUDA_ERROR_INVALID_VALUE;
        memcpy(&dur, params[0], sizeof dur);
    }
    if (f->add_u32) {
        CUresult rc = add_u32(params);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    uint64_t not_before = max_u64(ts_simgpu_now_ns(), atomic_load(&s->done_ns));
    uint64_t end = ts_simgpu_busy_add(&devs[s->ctx->ordinal], not_before, dur);
    atomic_store(&s->done_ns, end);
    return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                        CUstream hs, void **params, void **extra)
{
    FAIL(cuLaunchKernel, CUDA_ERROR_LAUNCH_FAILED);
    (void)shmem;
    (void)extra;
    return launch(f, gx, gy, gz, bx, by, bz, hs, params);
}

/* cuLaunchKernelEx: cuLaunchKernel with its arguments in a CUlaunchConfig.
 * The attributes are checked for shape (an id simgpu knows) and otherwise
 * ignored: clusters, priorities and cooperative launches change nothing in
 * busy time here. */
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
    FAIL(cuLaunchKernelEx, CUDA_ERROR_LAUNCH_FAILED);
    (void)extra;
    if (!config || (config->numAttrs && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < config->numAttrs; i++)
        if ((unsigned)config->attrs[i].id > CU_LAUNCH_ATTRIBUTE_PRIORITY)
            return CUDA_ERROR_INVALID_VALUE;
    return launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                  config->blockDimY, config->blockDimZ, config->hStream, params);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                               void **extra)
{
    if (!config)
        return cuLaunchKernelEx(config, f, params, extra);
    CUlaunchConfig c = *config;
    c.hStream = per_thread(c.hStream);
    return cuLaunchKernelEx(&c, f, params, extra);
}
