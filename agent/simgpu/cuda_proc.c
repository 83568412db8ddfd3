/*
 * cuda_proc.c - simgpu's libcuda.so.1: cuGetProcAddress, the driver's
 * functions found by name and version.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#pragma GCC visibility push(default)
#include "agent/abi/cuda.h"
#pragma GCC visibility pop
#include "agent/simgpu/state.h"

#include "agent/simgpu/cuda_int.h"

/* ---- cuGetProcAddress ---- */

static const struct {
    const char *name;
    void *fn;
} procs[] = {
#define SIMGPU_FN(name) {#name, (void *)name},
#include "agent/simgpu/cuda_fns.def"
#include "api/array.h"
#undef SIMGPU_FN
};

static void *proc_find(const char *name)
{
    for (size_t i = 0; i < TS_ARRAY_LEN(procs); i++)
        if (strcmp(procs[i].name, name) == 0)
            return procs[i].fn;
    return NULL;
}

/* Base names whose _v2 the driver hands out only from CUDA 12.0 (the
 * version whose cuda.h calls it): the CUDA 11 programs asking for them call
 * the first version. */
static const char *const v2_from_12[] = {
    "cuGetProcAddress",    "cuStreamWriteValue32", "cuStreamWriteValue64",
    "cuStreamWaitValue32", "cuStreamWaitValue64",  "cuStreamBatchMemOp",
};

static bool v2_at(const char *symbol, int cudaVersion)
{
    for (size_t i = 0; cudaVersion < 12000 && i < TS_ARRAY_LEN(v2_from_12); i++)
        if (strcmp(symbol, v2_from_12[i]) == 0)
            return false;
    return true;
}

/*
 * The newest version of `symbol` (a base name, "cuMemAlloc") that exists at
 * cudaVersion, as the real driver does: _v2 where we export one, except that
 * the names of v2_from_12 are _v2 only from CUDA 12.0. With
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, the _ptds or _ptsz flavour
 * of that version where one exists; without it (DEFAULT, LEGACY_STREAM), the
 * plain one.
 */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    char name[128], pt[160];
    void *fn = NULL;
    if (v2_at(symbol, cudaVersion)) {
        snprintf(name, sizeof name, "%s_v2", symbol);
        fn = proc_find(name);
    }
    if (!fn) {
        snprintf(name, sizeof name, "%s", symbol);
        fn = proc_find(name);
    }
    if (fn && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
        void *ptfn = NULL;
        for (int i = 0; i < 2 && !ptfn; i++) {
            snprintf(pt, sizeof pt, "%s%s", name, i == 0 ? "_ptds" : "_ptsz");
            ptfn = proc_find(pt);
        }
        if (ptfn)
            fn = ptfn;
    }
    if (status)
        *status = fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    *pfn = fn;
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
