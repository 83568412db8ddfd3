/*
 * cuda_module.c - simgpu's libcuda.so.1: modules and their kernels
 * (loading PTX or a cubin that names its entries, functions).
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

static struct table modules; /* mu; loaded modules */

/* ---- modules and kernels ---- */

static CUresult module_load(CUmodule *module, const void *image)
{
    NEED_CTX();
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->ctx = cur();
    /* PTX is text; keep it to check function names. Binary images (cubin,
     * fatbin: ELF or fatbin magic) are accepted with any function name. */
    const unsigned char *b = image;
    bool elf = b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
    bool fatbin = b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba;
    if (!elf && !fatbin) {
        size_t n = strnlen(image, (size_t)64 << 20);
        m->image = malloc(n + 1);
        if (!m->image) {
            free(m);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(m->image, image, n);
        m->image[n] = '\0';
    }
    pthread_mutex_lock(&mu);
    bool ok = table_add(&modules, m);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        free(m->image);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *module = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    FAIL(cuModuleLoadData, CUDA_ERROR_INVALID_IMAGE);
    return module_load(module, image);
}

/* Nothing is compiled, so the logs asked for are empty. */
CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n,
                            CUjit_option *options, void **values)
{
    FAIL(cuModuleLoadDataEx, CUDA_ERROR_INVALID_IMAGE);
    if (n > 0 && (!options || !values))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        if ((options[i] == CU_JIT_INFO_LOG_BUFFER || options[i] == CU_JIT_ERROR_LOG_BUFFER) &&
            values[i]) {
            /* The size is the next option's value when given. */
            for (unsigned j = 0; j < n; j++)
                if (options[j] == options[i] + 1 && (uintptr_t)values[j] > 0)
                    *(char *)values[i] = '\0';
        }
    }
    for (unsigned i = 0; i < n; i++)
        if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
            options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            values[i] = (void *)(uintptr_t)0;
    return module_load(module, image);
}

CUresult cuModuleUnload(CUmodule m)
{
    NEED_INIT();
    pthread_mutex_lock(&mu);
    bool ok = table_del(&modules, m);
    pthread_mutex_unlock(&mu);
    if (!ok)
        return CUDA_ERROR_INVALID_HANDLE;
    free(m->image);
    free(m);
    return CUDA_SUCCESS;
}

/* PTX declares kernels as ".entry NAME(" (or ".entry NAME" then a newline). */
static bool ptx_has_entry(const char *ptx, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(ptx, ".entry"); p; p = strstr(p + 1, ".entry")) {
        const char *q = p + 6;
        while (*q == ' ' || *q == '\t')
            q++;
        if (strncmp(q, name, n) == 0 &&
            (q[n] == '(' || q[n] == ' ' || q[n] == '\t' || q[n] == '\n' || q[n] == '\r'))
            return true;
    }
    return false;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule m, const char *name)
{
    FAIL(cuModuleGetFunction, CUDA_ERROR_NOT_FOUND);
    NEED_INIT();
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!known(&modules, m))
        return CUDA_ERROR_INVALID_HANDLE;
    if (m->image && strstr(m->image, ".entry") && !ptx_has_entry(m->image, name))
        return CUDA_ERROR_NOT_FOUND;
    struct CUfunc_st *f = calloc(1, sizeof *f);
    if (!f)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t n = strlen(name);
    f->mod = m;
    f->busy_param = n >= 7 && strcmp(name + n - 7, "busy_ns") == 0;
    f->add_u32 = n >= 7 && strcmp(name + n - 7, "add_u32") == 0;
    pthread_mutex_lock(&mu);
    bool ok = table_add(&funcs, f);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        free(f);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *hfunc = f;
    return CUDA_SUCCESS;
}
