/*
 * cuda_launch.c - cooperative kernel launches of simgpu's libcuda.so.1:
 * cuLaunchCooperativeKernel and its per-thread default stream flavour.
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
