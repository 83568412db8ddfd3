/*
 * hooks.c - the tables made from hooks.def, the generated bodies of the
 * plain (PASS) hooks, and the two lookup entry paths that must hand out
 * hooks instead of the driver's functions: the exported dlsym and
 * cuGetProcAddress / cuGetProcAddress_v2.
 *
 * The driver's functions are found with dlopen("libcuda.so.1") and libc's
 * own dlsym (dlvsym(RTLD_NEXT, "dlsym", ...), since the exported dlsym
 * below is this file's). A pointer the driver hands out is turned into a
 * hook by identity: if it is the real function of a hook, the hook is
 * returned. That also covers the base names the driver resolves to _v2,
 * and the _ptds/_ptsz flavours it picks by version and flags.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#pragma GCC visibility push(default)
#include "agent/abi/cuda.h"
#include "agent/abi/nvml.h"
#pragma GCC visibility pop

#include "agent/shim/objects.h"
#include "agent/shim/shim.h"
#include "agent/shim/swap.h"

void *ts_real[TS_HOOK_COUNT];

static const char *const hook_names[TS_HOOK_COUNT] = {
#define TS_HOOK(name, kind, gate, fail, params, args) [TS_H_##name] = #name,
#define TS_NVML_HOOK(name, fail) [TS_H_##name] = #name,
#include "agent/shim/hooks.def"
#undef TS_HOOK
#undef TS_NVML_HOOK
};

static const bool hook_is_nvml[TS_HOOK_COUNT] = {
#define TS_HOOK(name, kind, gate, fail, params, args) [TS_H_##name] = false,
#define TS_NVML_HOOK(name, fail) [TS_H_##name] = true,
#include "agent/shim/hooks.def"
#undef TS_HOOK
#undef TS_NVML_HOOK
};

/* The pointers handed out: the exported hooks themselves. */
static void *const hook_fns[TS_HOOK_COUNT] = {
#define TS_HOOK(name, kind, gate, fail, params, args) [TS_H_##name] = (void *)name,
#define TS_NVML_HOOK(name, fail) [TS_H_##name] = (void *)name,
#include "agent/shim/hooks.def"
#undef TS_HOOK
#undef TS_NVML_HOOK
};

/* ---- resolving the real functions ---- */

/* dlsym is called by the sanitizer runtimes while they start, before
 * their shadow memory exists: the code on that path is not instrumented
 * and calls no function they intercept (no strcmp). */
#define NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn libc_dlsym;
static pthread_once_t dlsym_once = PTHREAD_ONCE_INIT;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static _Atomic int cuda_done, nvml_done;

NO_SANITIZE static void find_libc_dlsym(void)
{
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (p == NULL)
        p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    libc_dlsym = (dlsym_fn)p;
}

NO_SANITIZE void *ts_real_dlsym(void *handle, const char *name)
{
    pthread_once(&dlsym_once, find_libc_dlsym);
    return libc_dlsym ? libc_dlsym(handle, name) : NULL;
}

/* The real driver: in a job's sandbox, where the agent hides it (every
 * libcuda.so.1 the loader finds there is this library); else libcuda.so.1. */
const char *ts_shim_driver_path(void)
{
    return access(TS_SHIM_SANDBOX_DRIVER, F_OK) == 0 ? TS_SHIM_SANDBOX_DRIVER : "libcuda.so.1";
}

static void *cuda_lib; /* the real driver's handle, once resolved */

static void resolve_lib(const char *soname, bool nvml)
{
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return;
    if (!nvml)
        cuda_lib = lib;
    for (int i = 0; i < TS_HOOK_COUNT; i++)
        if (hook_is_nvml[i] == nvml)
            ts_real[i] = ts_real_dlsym(lib, hook_names[i]);
    /* the library stays loaded for the life of the process */
}

static void resolve_cuda(void)
{
    resolve_lib(ts_shim_driver_path(), false);
    atomic_store(&cuda_done, 1);
}

static void resolve_nvml(void)
{
    resolve_lib("libnvidia-ml.so.1", true);
    atomic_store(&nvml_done, 1);
}

void ts_hooks_resolve(void)
{
    if (!atomic_load_explicit(&cuda_done, memory_order_acquire))
        pthread_once(&cuda_once, resolve_cuda);
}

void ts_hooks_resolve_nvml(void)
{
    if (!atomic_load_explicit(&nvml_done, memory_order_acquire))
        pthread_once(&nvml_once, resolve_nvml);
}

NO_SANITIZE static bool same_name(const char *a, const char *b)
{
    while (*a != '\0' && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

NO_SANITIZE static int hook_by_name(const char *name)
{
    for (int i = 0; i < TS_HOOK_COUNT; i++)
        if (same_name(hook_names[i], name))
            return i;
    return -1;
}

/* The hook whose real function is `fn`, or -1. */
static int hook_by_real(const void *fn)
{
    for (int i = 0; i < TS_HOOK_COUNT; i++)
        if (ts_real[i] == fn)
            return i;
    return -1;
}

/* ---- the plain hooks: gate, touch, call through ---- */

#define OWN(name, params, args)
#define PASS(name, params, args)                                                                   \
    TS_EXPORT CUresult name params                                                                 \
    {                                                                                              \
        ts_shim_init();                                                                            \
        if (__builtin_expect(ts_real[TS_H_##name] == NULL, 0))                                     \
            return CUDA_ERROR_NOT_SUPPORTED;                                                       \
        CUresult gate_rc = ts_gate_enter();                                                        \
        if (gate_rc != CUDA_SUCCESS)                                                               \
            return gate_rc;                                                                        \
        ts_obj_sync();                                                                             \
        ts_shim_touch();                                                                           \
        CUresult rc =                                                                              \
            __builtin_expect(atomic_load_explicit(&ts_obj_epoch, memory_order_relaxed), 0)         \
                ? TS_REAL(name) TS_XL_ARGS args                                                    \
                : TS_REAL(name) args;                                                              \
        ts_gate_leave();                                                                           \
        return rc;                                                                                 \
    }
#define TS_HOOK(name, kind, gate, fail, params, args) kind(name, params, args)
#define TS_NVML_HOOK(name, fail)
#include "agent/shim/hooks.def"
#undef TS_HOOK
#undef TS_NVML_HOOK
#undef PASS
#undef OWN

/* ---- dlsym ---- */

/* Hand out the hook for a hooked name when the lookup found the driver's
 * (or NVML's) own function, whatever the handle: a handle of libcuda.so.1
 * or libnvidia-ml.so.1, RTLD_DEFAULT or RTLD_NEXT. A lookup of that name
 * that finds some other library's function is left alone. RTLD_NEXT is
 * resolved from the shim's place in the search order, not the caller's
 * (README.md, limitations). */
NO_SANITIZE TS_EXPORT void *dlsym(void *handle, const char *name)
{
    void *r = ts_real_dlsym(handle, name);
    bool cu = name[0] == 'c' && name[1] == 'u';
    if (r == NULL && cu && strcmp(ts_shim_driver_path(), TS_SHIM_SANDBOX_DRIVER) == 0) {
        /* in a sandbox this library is libcuda.so.1: what it does not
         * export comes from the hidden driver */
        ts_hooks_resolve();
        if (cuda_lib != NULL)
            r = ts_real_dlsym(cuda_lib, name);
    }
    if (r == NULL) /* also when name is not a symbol at all */
        return r;
    bool nvml = name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l';
    if (!cu && !nvml)
        return r;
    int id = hook_by_name(name);
    if (id < 0)
        return r;
    if (hook_is_nvml[id])
        ts_hooks_resolve_nvml();
    else
        ts_hooks_resolve();
    if (r == ts_real[id] || r == hook_fns[id])
        return hook_fns[id];
    return r;
}

/* ---- cuGetProcAddress ---- */

static void *to_hook(void *fn)
{
    int id = hook_by_real(fn);
    return id >= 0 ? hook_fns[id] : fn;
}

TS_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags)
{
    ts_hooks_resolve();
    if (ts_real[TS_H_cuGetProcAddress] == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = TS_REAL(cuGetProcAddress)(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS && pfn != NULL && *pfn != NULL)
        *pfn = to_hook(*pfn);
    return rc;
}

TS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    ts_hooks_resolve();
    if (ts_real[TS_H_cuGetProcAddress_v2] == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = TS_REAL(cuGetProcAddress_v2)(symbol, pfn, cudaVersion, flags, status);
    if (rc == CUDA_SUCCESS && pfn != NULL && *pfn != NULL)
        *pfn = to_hook(*pfn);
    return rc;
}
