/*
 * shim_probe.c - the job of the shim tests: a program linked against
 * nothing CUDA that dlopens libcuda.so.1 and libnvidia-ml.so.1 as a
 * framework does, and runs the steps named on its command line, printing
 * one line per step on stdout. shim_test.c runs it under LD_PRELOAD and
 * checks what it prints and what the ledger says.
 *
 * How the probe finds its functions is the entry path under test:
 *   --via=handle      dlsym(dlopen("libcuda.so.1"), name)   (default)
 *   --via=default     dlsym(RTLD_DEFAULT, name)
 *   --via=next        dlsym(RTLD_NEXT, name)
 *   --via=proc:V:F    cuGetProcAddress_v2(base name, V, flags F), itself
 *                     found through cuGetProcAddress_v2("cuGetProcAddress")
 *   --via=proc1:V:F   the same with the CUDA 11 cuGetProcAddress
 * Steps: init, dev:K, alloc:B, pitch:W:H, managed:B, create:B, async:B,
 * pool:B, array:W:H, array3d:W:H:D, free, freeall, badfree, meminfo,
 * totalmem:K, nvml:K, nvml2:K, capture_async:B, lookup:V:F:NAME...,
 * where:NAME, fork:B, launch:N, fill:B, check:B, check2d:B, launchex:NS,
 * gated:NAME:B (shim_probe_gated.c), holdlock, wait, sleep:MS.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/abi/cuda.h"
#include "agent/abi/nvml.h"
#include "agent/ledger/ledger.h"
#include "api/array.h"
#include "tests/shim/shim_probe.h"

static void *libcuda, *libnvml;
static const char *via = "handle";

typedef CUresult (*proc2_fn)(const char *, void **, int, cuuint64_t,
                             CUdriverProcAddressQueryResult *);
typedef CUresult (*proc1_fn)(const char *, void **, int, cuuint64_t);

/* Strip the version suffix cuGetProcAddress wants a base name without. */
static void base_name(const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s", name);
    char *v = strstr(out, "_v2");
    if (v != NULL && v[3] == '\0')
        *v = '\0';
}

static void *find(const char *name)
{
    if (strncmp(via, "proc", 4) == 0) {
        int ver = 12000;
        unsigned long long flags = 0;
        const char *c = strchr(via, ':');
        if (c != NULL)
            sscanf(c + 1, "%d:%llu", &ver, &flags);
        char base[128];
        base_name(name, base, sizeof(base));
        void *fn = NULL;
        if (strncmp(via, "proc1", 5) == 0) {
            proc1_fn gpa = (proc1_fn)dlsym(libcuda, "cuGetProcAddress");
            if (gpa == NULL || gpa(base, &fn, ver, flags) != CUDA_SUCCESS)
                return NULL;
        } else {
            proc2_fn boot = (proc2_fn)dlsym(libcuda, "cuGetProcAddress_v2");
            proc2_fn gpa = NULL;
            if (boot == NULL ||
                boot("cuGetProcAddress", (void **)&gpa, ver, flags, NULL) != CUDA_SUCCESS)
                return NULL;
            if (gpa(base, &fn, ver, flags, NULL) != CUDA_SUCCESS)
                return NULL;
        }
        return fn;
    }
    if (strcmp(via, "default") == 0)
        return dlsym(RTLD_DEFAULT, name);
    if (strcmp(via, "next") == 0)
        return dlsym(RTLD_NEXT, name);
    return dlsym(libcuda, name);
}

void *probe_find(const char *name)
{
    return find(name);
}

#define CALL(type, name, ...)                                                                      \
    ({                                                                                             \
        type fn_ = (type)find(#name);                                                              \
        fn_ ? fn_(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND;                                             \
    })

typedef CUresult (*f_int)(unsigned);
typedef CUresult (*f_devget)(CUdevice *, int);
typedef CUresult (*f_retain)(CUcontext *, CUdevice);
typedef CUresult (*f_setcur)(CUcontext);
typedef CUresult (*f_alloc)(CUdeviceptr *, size_t);
typedef CUresult (*f_pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
typedef CUresult (*f_managed)(CUdeviceptr *, size_t, unsigned);
typedef CUresult (*f_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                             unsigned long long);
typedef CUresult (*f_async)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*f_pool)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*f_getpool)(CUmemoryPool *, CUdevice);
typedef CUresult (*f_arr)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
typedef CUresult (*f_arr3)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
typedef CUresult (*f_ptr)(CUdeviceptr);
typedef CUresult (*f_handle)(CUmemGenericAllocationHandle);
typedef CUresult (*f_array)(CUarray);
typedef CUresult (*f_freeasync)(CUdeviceptr, CUstream);
typedef CUresult (*f_stream)(CUstream);
typedef CUresult (*f_info)(size_t *, size_t *);
typedef CUresult (*f_total)(size_t *, CUdevice);
typedef CUresult (*f_capture)(CUstream, CUstreamCaptureMode);
typedef CUresult (*f_endcap)(CUstream, CUgraph *);
typedef CUresult (*f_screate)(CUstream *, unsigned);
typedef CUresult (*f_htod)(CUdeviceptr, const void *, size_t);
typedef CUresult (*f_dtoh)(void *, CUdeviceptr, size_t);
typedef CUresult (*f_copy2d)(const CUDA_MEMCPY2D *);
typedef CUresult (*f_modload)(CUmodule *, const void *);
typedef CUresult (*f_getfn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*f_launchex)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef nvmlReturn_t (*n_init)(void);
typedef nvmlReturn_t (*n_handle)(unsigned, nvmlDevice_t *);
typedef nvmlReturn_t (*n_mem)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*n_mem2)(nvmlDevice_t, nvmlMemory_v2_t *);

enum kind { K_PTR, K_MANAGED, K_HANDLE, K_ASYNC, K_ARRAY };
struct held {
    enum kind kind;
    uint64_t v;
};
static struct held stack[256];
static int nheld;

static void push(enum kind k, uint64_t v)
{
    if (nheld < (int)(TS_ARRAY_LEN(stack)))
        stack[nheld++] = (struct held){k, v};
}

static CUresult release(struct held h)
{
    switch (h.kind) {
    case K_PTR:
    case K_MANAGED:
        return CALL(f_ptr, cuMemFree_v2, h.v);
    case K_HANDLE:
        return CALL(f_handle, cuMemRelease, h.v);
    case K_ASYNC: {
        CUresult rc = CALL(f_freeasync, cuMemFreeAsync, h.v, NULL);
        CALL(f_stream, cuStreamSynchronize, NULL);
        return rc;
    }
    case K_ARRAY:
        return CALL(f_array, cuArrayDestroy, (CUarray)(uintptr_t)h.v);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult set_device(int k)
{
    CUdevice d;
    CUcontext c;
    CUresult rc = CALL(f_devget, cuDeviceGet, &d, k);
    if (rc == CUDA_SUCCESS)
        rc = CALL(f_retain, cuDevicePrimaryCtxRetain, &c, d);
    if (rc == CUDA_SUCCESS)
        rc = CALL(f_setcur, cuCtxSetCurrent, c);
    return rc;
}

static nvmlDevice_t nvml_device(unsigned k)
{
    nvmlDevice_t h = NULL;
    n_init init = (n_init)dlsym(libnvml, "nvmlInit_v2");
    n_handle get = (n_handle)dlsym(libnvml, "nvmlDeviceGetHandleByIndex_v2");
    if (init == NULL || get == NULL || init() != NVML_SUCCESS || get(k, &h) != NVML_SUCCESS)
        return NULL;
    return h;
}

/* Which file holds fn, and under which name. */
static void where(const char *label, void *fn)
{
    Dl_info di;
    if (fn == NULL || dladdr(fn, &di) == 0) {
        printf("%s none\n", label);
        return;
    }
    const char *file = strrchr(di.dli_fname, '/');
    printf("%s %s %s\n", label, di.dli_sname ? di.dli_sname : "?", file ? file + 1 : di.dli_fname);
}

static unsigned long long bytes_arg(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'K')
        v <<= 10;
    else if (*end == 'M')
        v <<= 20;
    else if (*end == 'G')
        v <<= 30;
    return v;
}

static void step(const char *s);

static void run_fork(unsigned long long b)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        /* the child: a CUDA call of its own registers it */
        printf("child pid=%d\n", (int)getpid());
        step("init");
        char a[64];
        snprintf(a, sizeof(a), "alloc:%llu", b);
        step(a);
        step("wait");
        step("freeall");
        fflush(stdout);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    printf("fork child_status=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static void step(const char *s)
{
    const char *a = strchr(s, ':');
    a = a ? a + 1 : "";
    CUresult rc;
    if (strcmp(s, "init") == 0) {
        rc = CALL(f_int, cuInit, 0);
        if (rc == CUDA_SUCCESS)
            rc = set_device(0);
        printf("init rc=%d\n", rc);
    } else if (strncmp(s, "dev:", 4) == 0) {
        printf("dev rc=%d\n", set_device(atoi(a)));
    } else if (strncmp(s, "alloc:", 6) == 0) {
        CUdeviceptr p = 0;
        rc = CALL(f_alloc, cuMemAlloc_v2, &p, bytes_arg(a));
        if (rc == CUDA_SUCCESS)
            push(K_PTR, p);
        printf("alloc rc=%d\n", rc);
    } else if (strncmp(s, "pitch:", 6) == 0) {
        unsigned long long w = bytes_arg(a), h = bytes_arg(strchr(a, ':') + 1);
        CUdeviceptr p = 0;
        size_t pitch = 0;
        rc = CALL(f_pitch, cuMemAllocPitch_v2, &p, &pitch, w, h, 4);
        if (rc == CUDA_SUCCESS)
            push(K_PTR, p);
        printf("pitch rc=%d pitch=%zu\n", rc, pitch);
    } else if (strncmp(s, "managed:", 8) == 0) {
        CUdeviceptr p = 0;
        rc = CALL(f_managed, cuMemAllocManaged, &p, bytes_arg(a), CU_MEM_ATTACH_GLOBAL);
        if (rc == CUDA_SUCCESS)
            push(K_MANAGED, p);
        printf("managed rc=%d\n", rc);
    } else if (strncmp(s, "create:", 7) == 0) {
        CUmemAllocationProp prop = {0};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = 0;
        CUmemGenericAllocationHandle h = 0;
        rc = CALL(f_create, cuMemCreate, &h, bytes_arg(a), &prop, 0);
        if (rc == CUDA_SUCCESS)
            push(K_HANDLE, h);
        printf("create rc=%d\n", rc);
    } else if (strncmp(s, "async:", 6) == 0) {
        CUdeviceptr p = 0;
        rc = CALL(f_async, cuMemAllocAsync, &p, bytes_arg(a), NULL);
        if (rc == CUDA_SUCCESS)
            push(K_ASYNC, p);
        printf("async rc=%d\n", rc);
    } else if (strncmp(s, "pool:", 5) == 0) {
        CUmemoryPool pool = NULL;
        CUdeviceptr p = 0;
        rc = CALL(f_getpool, cuDeviceGetDefaultMemPool, &pool, 0);
        if (rc == CUDA_SUCCESS)
            rc = CALL(f_pool, cuMemAllocFromPoolAsync, &p, bytes_arg(a), pool, NULL);
        if (rc == CUDA_SUCCESS)
            push(K_ASYNC, p);
        printf("pool rc=%d\n", rc);
    } else if (strncmp(s, "array:", 6) == 0) {
        CUDA_ARRAY_DESCRIPTOR d = {bytes_arg(a), bytes_arg(strchr(a, ':') + 1), CU_AD_FORMAT_FLOAT,
                                   1};
        CUarray arr = NULL;
        rc = CALL(f_arr, cuArrayCreate_v2, &arr, &d);
        if (rc == CUDA_SUCCESS)
            push(K_ARRAY, (uint64_t)(uintptr_t)arr);
        printf("array rc=%d\n", rc);
    } else if (strncmp(s, "array3d:", 8) == 0) {
        unsigned long long w = 0, h = 0, dd = 0;
        sscanf(a, "%llu:%llu:%llu", &w, &h, &dd);
        CUDA_ARRAY3D_DESCRIPTOR d = {w, h, dd, CU_AD_FORMAT_UNSIGNED_INT16, 2, 0};
        CUarray arr = NULL;
        rc = CALL(f_arr3, cuArray3DCreate_v2, &arr, &d);
        if (rc == CUDA_SUCCESS)
            push(K_ARRAY, (uint64_t)(uintptr_t)arr);
        printf("array3d rc=%d\n", rc);
    } else if (strcmp(s, "free") == 0) {
        printf("free rc=%d\n", nheld > 0 ? (int)release(stack[--nheld]) : -1);
    } else if (strcmp(s, "freeall") == 0) {
        int bad = 0;
        while (nheld > 0)
            bad += release(stack[--nheld]) != CUDA_SUCCESS;
        printf("freeall failed=%d\n", bad);
    } else if (strcmp(s, "badfree") == 0) {
        static char not_device[64];
        printf("badfree rc=%d\n", CALL(f_ptr, cuMemFree_v2, (CUdeviceptr)(uintptr_t)not_device));
    } else if (strcmp(s, "meminfo") == 0) {
        size_t f = 0, t = 0;
        rc = CALL(f_info, cuMemGetInfo_v2, &f, &t);
        printf("meminfo rc=%d free=%zu total=%zu\n", rc, f, t);
    } else if (strncmp(s, "totalmem:", 9) == 0) {
        size_t t = 0;
        rc = CALL(f_total, cuDeviceTotalMem_v2, &t, atoi(a));
        printf("totalmem rc=%d total=%zu\n", rc, t);
    } else if (strncmp(s, "nvml:", 5) == 0) {
        nvmlMemory_t m = {0};
        n_mem fn = (n_mem)dlsym(libnvml, "nvmlDeviceGetMemoryInfo");
        nvmlDevice_t h = nvml_device((unsigned)atoi(a));
        int r = fn && h ? (int)fn(h, &m) : -1;
        printf("nvml rc=%d total=%llu free=%llu used=%llu\n", r, m.total, m.free, m.used);
    } else if (strncmp(s, "nvml2:", 6) == 0) {
        nvmlMemory_v2_t m = {0};
        m.version = nvmlMemory_v2;
        n_mem2 fn = (n_mem2)dlsym(libnvml, "nvmlDeviceGetMemoryInfo_v2");
        nvmlDevice_t h = nvml_device((unsigned)atoi(a));
        int r = fn && h ? (int)fn(h, &m) : -1;
        printf("nvml2 rc=%d total=%llu free=%llu used=%llu reserved=%llu\n", r, m.total, m.free,
               m.used, m.reserved);
    } else if (strncmp(s, "capture_async:", 14) == 0) {
        CUstream st = NULL;
        CUgraph g = NULL;
        CUdeviceptr p = 0;
        uint64_t t0 = (uint64_t)time(NULL);
        rc = CALL(f_screate, cuStreamCreate, &st, CU_STREAM_NON_BLOCKING);
        if (rc == CUDA_SUCCESS)
            rc = CALL(f_capture, cuStreamBeginCapture_v2, st, CU_STREAM_CAPTURE_MODE_RELAXED);
        if (rc == CUDA_SUCCESS) {
            rc = CALL(f_async, cuMemAllocAsync, &p, bytes_arg(a), st);
            CALL(f_endcap, cuStreamEndCapture, st, &g);
        }
        printf("capture_async rc=%d seconds=%llu\n", rc,
               (unsigned long long)((uint64_t)time(NULL) - t0));
    } else if (strncmp(s, "lookup:", 7) == 0) {
        /* lookup:V:F:NAME through cuGetProcAddress_v2 (and v1 when V < 12000) */
        int ver = 0;
        unsigned long long flags = 0;
        char name[128] = "";
        sscanf(a, "%d:%llu:%127s", &ver, &flags, name);
        proc2_fn gpa2 = (proc2_fn)dlsym(libcuda, "cuGetProcAddress_v2");
        void *fn = NULL;
        CUdriverProcAddressQueryResult q;
        char label[200];
        snprintf(label, sizeof(label), "lookup %d %llu %s", ver, flags, name);
        if (gpa2 == NULL || gpa2(name, &fn, ver, flags, &q) != CUDA_SUCCESS)
            fn = NULL;
        where(label, fn);
        proc1_fn gpa1 = (proc1_fn)dlsym(libcuda, "cuGetProcAddress");
        fn = NULL;
        snprintf(label, sizeof(label), "lookup1 %d %llu %s", ver, flags, name);
        if (gpa1 == NULL || gpa1(name, &fn, ver, flags) != CUDA_SUCCESS)
            fn = NULL;
        where(label, fn);
    } else if (strncmp(s, "where:", 6) == 0) {
        char label[200];
        snprintf(label, sizeof(label), "where %s %s", via, a);
        where(label, strncmp(a, "nvml", 4) == 0 ? dlsym(libnvml, a) : find(a));
    } else if (strncmp(s, "fork:", 5) == 0) {
        run_fork(bytes_arg(a));
    } else if (strncmp(s, "launch:", 7) == 0) {
        /* copies through the gated hooks: the work of a job */
        long n = atol(a);
        CUdeviceptr p = 0;
        char buf[256] = {0};
        rc = CALL(f_alloc, cuMemAlloc_v2, &p, sizeof(buf));
        f_htod htod = (f_htod)find("cuMemcpyHtoD_v2");
        for (long i = 0; i < n && rc == CUDA_SUCCESS; i++)
            rc = htod(p, buf, sizeof(buf));
        if (p)
            CALL(f_ptr, cuMemFree_v2, p);
        printf("launch rc=%d\n", rc);
    } else if (strncmp(s, "fill:", 5) == 0 || strncmp(s, "check:", 6) == 0) {
        /* fill:B / check:B: write a pattern over the first B bytes of the
         * newest allocation, or read them back and compare */
        bool fill = s[0] == 'f';
        size_t n = (size_t)bytes_arg(a);
        unsigned char *buf = malloc(n);
        rc = buf != NULL && nheld > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        size_t bad = 0;
        if (rc == CUDA_SUCCESS && fill) {
            for (size_t i = 0; i < n; i++)
                buf[i] = probe_pattern(i);
            rc = CALL(f_htod, cuMemcpyHtoD_v2, stack[nheld - 1].v, buf, n);
        } else if (rc == CUDA_SUCCESS) {
            rc = CALL(f_dtoh, cuMemcpyDtoH_v2, buf, stack[nheld - 1].v, n);
            for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++)
                bad += buf[i] != probe_pattern(i);
        }
        free(buf);
        printf("%s rc=%d bad=%zu ptr=%llu\n", fill ? "fill" : "check", rc, bad,
               nheld > 0 ? (unsigned long long)stack[nheld - 1].v : 0ull);
    } else if (strncmp(s, "check2d:", 8) == 0) {
        /* check2d:B: check:B through cuMemcpy2D_v2, in rows of 1 KiB read
         * from a device pitch of 1 KiB into a host pitch of 2 KiB */
        size_t n = (size_t)bytes_arg(a), rows = n / 1024;
        unsigned char *buf = calloc(rows ? rows : 1, 2048);
        rc = buf != NULL && nheld > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        size_t bad = 0;
        if (rc == CUDA_SUCCESS) {
            CUDA_MEMCPY2D c = {0};
            c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
            c.srcDevice = stack[nheld - 1].v;
            c.srcPitch = 1024;
            c.dstMemoryType = CU_MEMORYTYPE_HOST;
            c.dstHost = buf;
            c.dstPitch = 2048;
            c.WidthInBytes = 1024;
            c.Height = rows;
            rc = CALL(f_copy2d, cuMemcpy2D_v2, &c);
            for (size_t i = 0; rc == CUDA_SUCCESS && i < rows * 1024; i++)
                bad += buf[(i / 1024) * 2048 + i % 1024] != probe_pattern(i);
        }
        free(buf);
        printf("check2d rc=%d bad=%zu\n", rc, bad);
    } else if (strncmp(s, "launchex:", 9) == 0) {
        /* launchex:NS: a busy kernel of NS nanoseconds by cuLaunchKernelEx
         * (the only gated call of the step: loading a module is not) */
        static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                                  ".visible .entry tessera_busy_ns(\n\t.param .u64 ns\n)\n"
                                  "{\n\tret;\n}\n";
        CUmodule m = NULL;
        CUfunction f = NULL;
        unsigned long long ns = strtoull(a, NULL, 10);
        void *params[] = {&ns};
        CUlaunchConfig cfg = {.gridDimX = 1,
                              .gridDimY = 1,
                              .gridDimZ = 1,
                              .blockDimX = 32,
                              .blockDimY = 1,
                              .blockDimZ = 1};
        rc = CALL(f_modload, cuModuleLoadData, &m, ptx);
        if (rc == CUDA_SUCCESS)
            rc = CALL(f_getfn, cuModuleGetFunction, &f, m, "tessera_busy_ns");
        if (rc == CUDA_SUCCESS)
            rc = CALL(f_launchex, cuLaunchKernelEx, &cfg, f, params, NULL);
        printf("launchex rc=%d\n", rc);
    } else if (strncmp(s, "gated:", 6) == 0) {
        /* gated:NAME:B on the newest allocation; the one before it (on
         * device 1) is the peer copies' destination */
        char name[128] = "";
        unsigned long long n = 0;
        const char *colon = strchr(a, ':');
        snprintf(name, sizeof(name), "%.*s", colon ? (int)(colon - a) : 0, a);
        n = colon ? bytes_arg(colon + 1) : 0;
        size_t bad = 0;
        rc = nheld >= 2 ? probe_gated(name, stack[nheld - 1].v, stack[nheld - 2].v, n, &bad)
                        : CUDA_ERROR_INVALID_VALUE;
        printf("gated %s rc=%d bad=%zu\n", name, rc, bad);
    } else if (strcmp(s, "holdlock") == 0) {
        /* take the ledger's lock as the shim does, and keep it until killed */
        char path[4096];
        snprintf(path, sizeof(path), "%s/dev0.ledger", getenv("TESSERA_SHIM_DIR"));
        struct ts_ledger *l = ts_ledger_open(path);
        printf("holdlock rc=%d\n", l ? ts_ledger_lock(l) : -1);
        fflush(stdout);
        for (int i = 0; i < 600; i++)
            sleep(1);
    } else if (strcmp(s, "wait") == 0) {
        printf("waiting\n");
        fflush(stdout);
        char line[16];
        if (fgets(line, sizeof(line), stdin) == NULL)
            printf("wait eof\n");
    } else if (strncmp(s, "sleep:", 6) == 0) {
        usleep((useconds_t)atoi(a) * 1000);
    } else {
        printf("unknown step %s\n", s);
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    /* global, as a library linked against it would be: RTLD_DEFAULT finds it */
    libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    libnvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (libcuda == NULL) {
        printf("no libcuda\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--via=", 6) == 0)
            via = argv[i] + 6;
        else
            step(argv[i]);
    }
    return 0;
}
