/*
 * shim_probe_linked.c - a job linked against libcuda.so.1 (simgpu's) the
 * ordinary way: its calls bind to the first definition, which under
 * LD_PRELOAD is the shim's exported hook. Allocates argv[1] bytes, prints
 * what cuMemGetInfo_v2 says, waits for a line on stdin, frees.
 */
#include <stdio.h>
#include <stdlib.h>

#include "agent/abi/cuda.h"

int main(int argc, char **argv)
{
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : 1 << 20;
    CUdevice d;
    CUcontext c;
    CUdeviceptr p = 0;
    CUresult rc = cuInit(0);
    if (rc == CUDA_SUCCESS)
        rc = cuDeviceGet(&d, 0);
    if (rc == CUDA_SUCCESS)
        rc = cuDevicePrimaryCtxRetain(&c, d);
    if (rc == CUDA_SUCCESS)
        rc = cuCtxSetCurrent(c);
    if (rc == CUDA_SUCCESS)
        rc = cuMemAlloc_v2(&p, bytes);
    printf("linked alloc rc=%d\n", rc);
    size_t f = 0, t = 0;
    rc = cuMemGetInfo_v2(&f, &t);
    printf("linked meminfo rc=%d free=%zu total=%zu\n", rc, f, t);
    printf("waiting\n");
    fflush(stdout);
    char line[16];
    if (fgets(line, sizeof(line), stdin) == NULL)
        return 1;
    printf("linked free rc=%d\n", cuMemFree_v2(p));
    return 0;
}
