/*
 * driver_calls.c - the CUDA driver entry points tessera-gpuload calls, from
 * libcuda.so.1 found by the dynamic loader (LD_LIBRARY_PATH: simgpu's or
 * the real driver's), and the PTX of its kernel.
 *
 * The symbols looked up are the versioned ones both drivers export
 * (cuMemAlloc_v2, ...), so the Tessera shim sees the same calls as from a
 * program built with NVIDIA's headers.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "agent/gpuload/gpuload.h"

/*
 * tessera_busy_ns(u64 ns): one thread spins until %globaltimer (the GPU's
 * nanosecond clock) has moved on by ns. PTX ISA 6.0 for sm_50, so the
 * driver JIT-compiles it for any GPU from Maxwell on. simgpu keeps the GPU
 * busy for ns for any kernel whose name ends in busy_ns.
 */
const char ts_gpuload_cuda_ptx[] = ".version 6.0\n"
                                   ".target sm_50\n"
                                   ".address_size 64\n"
                                   "\n"
                                   ".visible .entry tessera_busy_ns(\n"
                                   "\t.param .u64 tessera_busy_ns_param_0\n"
                                   ")\n"
                                   "{\n"
                                   "\t.reg .pred %p<2>;\n"
                                   "\t.reg .b64 %rd<5>;\n"
                                   "\n"
                                   "\tld.param.u64 %rd1, [tessera_busy_ns_param_0];\n"
                                   "\tmov.u64 %rd2, %globaltimer;\n"
                                   "\tadd.s64 %rd3, %rd2, %rd1;\n"
                                   "SPIN:\n"
                                   "\tmov.u64 %rd4, %globaltimer;\n"
                                   "\tsetp.lt.u64 %p1, %rd4, %rd3;\n"
                                   "\t@%p1 bra SPIN;\n"
                                   "\tret;\n"
                                   "}\n";

enum ts_err ts_gpuload_cuda_load(struct ts_gpuload_cuda *cu, struct ts_error *err)
{
    *cu = (struct ts_gpuload_cuda){0};
    cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu->lib)
        return ts_error_set(err, TS_ERR_NOT_FOUND, "could not load libcuda.so.1: %s", dlerror());
#define TS_GPULOAD_CUDA_LOOKUP(name)                                                               \
    if (!(*(void **)&cu->name = dlsym(cu->lib, #name))) {                                          \
        ts_error_set(err, TS_ERR_NOT_FOUND, "libcuda.so.1 lacks %s", #name);                       \
        dlclose(cu->lib);                                                                          \
        *cu = (struct ts_gpuload_cuda){0};                                                         \
        return TS_ERR_NOT_FOUND;                                                                   \
    }
    TS_GPULOAD_CUDA_FNS(TS_GPULOAD_CUDA_LOOKUP)
#undef TS_GPULOAD_CUDA_LOOKUP
    *(void **)&cu->cuModuleLoadDataEx = dlsym(cu->lib, "cuModuleLoadDataEx");
    return TS_OK;
}

const char *ts_gpuload_cuda_describe(const struct ts_gpuload_cuda *cu, CUresult rc, char *buf,
                                     size_t len)
{
    const char *name = NULL, *text = NULL;
    if (cu->cuGetErrorName)
        cu->cuGetErrorName(rc, &name);
    if (cu->cuGetErrorString)
        cu->cuGetErrorString(rc, &text);
    if (name && text)
        snprintf(buf, len, "%s (%s)", name, text);
    else if (name)
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "CUDA error %d", (int)rc);
    return buf;
}
