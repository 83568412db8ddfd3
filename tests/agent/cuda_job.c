/*
 * cuda_job.c - the job of fraction_test's real-shim cases: a program linked
 * against nothing CUDA that dlopens libcuda.so.1 as a framework does (so
 * the agent's preloaded libtessera-cuda.so interposes it), allocates device
 * memory with cuMemAlloc_v2, fills every byte with a pattern of its own,
 * and later reads every byte back at the same addresses and compares.
 *
 * Usage: cuda_job [fork] STEP...
 *   fork           (first only) two processes run the steps, each with its
 *                  own driver and allocations: a job of several processes.
 *                  The second one's lines start "w1 " and the files it
 *                  marks end ".w1"; the first waits for it at the end and
 *                  exits with its status if its own is 0
 *   alloc DEV MiB  on CUDA ordinal DEV: one allocation, every byte written;
 *                  prints "alloc ok dev=D mib=N addr=0x... ms=T" (T: how
 *                  long cuMemAlloc_v2 took) or "alloc failed dev=D mib=N err=E"
 *   check          read back every byte of every allocation at its address;
 *                  prints "check dev=D addr=0x... intact|lost" per
 *                  allocation, then "data intact N bytes" or "data lost"
 *   managed DEV MiB  as alloc, with cuMemAllocManaged (memory the shim's
 *                  swap engine does not hold: a job it cannot move)
 *   managed1 DEV MiB  as managed, in the second process of fork only (the
 *                  first skips it): a job one of whose processes cannot move
 *   free           free every allocation; prints "freed N bytes"
 *   drop           free the last allocation (a burst given back, the rest
 *                  kept for check); prints "dropped N bytes"
 *   idle SECONDS   no GPU call
 *   mark FILE      create FILE
 *   await FILE     wait (at most 120 s) until FILE exists, with no GPU call
 * Exit 0; 3 when data was lost; 4 when an allocation or a copy failed;
 * 2 on a usage error or no driver.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/abi/cuda.h"
#include "agent/ledger/hostpid.h"

#define MiB (1ull << 20)
#define CHUNK (4 * MiB)
#define MAX_BUFS 16

typedef CUresult (*f_init)(unsigned);
typedef CUresult (*f_devget)(CUdevice *, int);
typedef CUresult (*f_retain)(CUcontext *, CUdevice);
typedef CUresult (*f_setcur)(CUcontext);
typedef CUresult (*f_alloc)(CUdeviceptr *, size_t);
typedef CUresult (*f_managed)(CUdeviceptr *, size_t, unsigned);
typedef CUresult (*f_free)(CUdeviceptr);
typedef CUresult (*f_htod)(CUdeviceptr, const void *, size_t);
typedef CUresult (*f_dtoh)(void *, CUdeviceptr, size_t);

static struct {
    f_init init;
    f_devget devget;
    f_retain retain;
    f_setcur setcur;
    f_alloc alloc;
    f_managed managed;
    f_free free;
    f_htod htod;
    f_dtoh dtoh;
} cu;

struct buf {
    int dev;
    CUdeviceptr addr;
    size_t len;
};
static struct buf bufs[MAX_BUFS];
static int nbufs;
static CUcontext ctxs[8];
static unsigned char *host, *back; /* CHUNK bytes each */
static int worker;                 /* 1 in the second process of "fork" */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (worker)
        printf("w%d ", worker);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The pattern of buffer b at byte offset off (a multiple of 8), 8 bytes at
 * a time: a function of the buffer's number and the offset only. */
static void pattern(int b, size_t off, unsigned char *out, size_t len)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t x = ((uint64_t)(b + 1) << 40) ^ (uint64_t)(off + i);
        x ^= x >> 31;
        x *= 0x9e3779b97f4a7c15ull;
        x ^= x >> 29;
        memcpy(out + i, &x, 8);
    }
}

static int load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h == NULL) {
        say("no driver: %s", dlerror());
        return -1;
    }
    cu.init = (f_init)dlsym(h, "cuInit");
    cu.devget = (f_devget)dlsym(h, "cuDeviceGet");
    cu.retain = (f_retain)dlsym(h, "cuDevicePrimaryCtxRetain");
    cu.setcur = (f_setcur)dlsym(h, "cuCtxSetCurrent");
    cu.alloc = (f_alloc)dlsym(h, "cuMemAlloc_v2");
    cu.managed = (f_managed)dlsym(h, "cuMemAllocManaged"); /* only for "managed" */
    cu.free = (f_free)dlsym(h, "cuMemFree_v2");
    cu.htod = (f_htod)dlsym(h, "cuMemcpyHtoD_v2");
    cu.dtoh = (f_dtoh)dlsym(h, "cuMemcpyDtoH_v2");
    if (!cu.init || !cu.devget || !cu.retain || !cu.setcur || !cu.alloc || !cu.free || !cu.htod ||
        !cu.dtoh) {
        say("the driver lacks a function");
        return -1;
    }
    CUresult rc = cu.init(0);
    if (rc != CUDA_SUCCESS) {
        say("cuInit failed: %d", (int)rc);
        return -1;
    }
    return 0;
}

/* Make device dev's primary context current. */
static CUresult use(int dev)
{
    if (dev < 0 || dev >= 8)
        return CUDA_ERROR_INVALID_DEVICE;
    if (ctxs[dev] == NULL) {
        CUdevice d;
        CUresult rc = cu.devget(&d, dev);
        if (rc == CUDA_SUCCESS)
            rc = cu.retain(&ctxs[dev], d);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return cu.setcur(ctxs[dev]);
}

static int do_alloc(int dev, unsigned long mib, bool managed)
{
    size_t len = (size_t)mib * MiB;
    CUdeviceptr p = 0;
    CUresult rc = nbufs < MAX_BUFS ? use(dev) : CUDA_ERROR_INVALID_VALUE;
    double t0 = now_s();
    if (rc == CUDA_SUCCESS && managed)
        rc = cu.managed != NULL ? cu.managed(&p, len, CU_MEM_ATTACH_GLOBAL)
                                : CUDA_ERROR_NOT_SUPPORTED;
    else if (rc == CUDA_SUCCESS)
        rc = cu.alloc(&p, len);
    double ms = (now_s() - t0) * 1000;
    if (rc != CUDA_SUCCESS) {
        say("alloc failed dev=%d mib=%lu err=%d", dev, mib, (int)rc);
        return 4;
    }
    int b = nbufs++;
    bufs[b] = (struct buf){dev, p, len};
    for (size_t off = 0; off < len; off += CHUNK) {
        size_t n = len - off < CHUNK ? len - off : CHUNK;
        pattern(b, off, host, n);
        rc = cu.htod(p + off, host, n);
        if (rc != CUDA_SUCCESS) {
            say("write failed dev=%d addr=0x%llx err=%d", dev, (unsigned long long)p, (int)rc);
            return 4;
        }
    }
    say("alloc ok dev=%d mib=%lu addr=0x%llx ms=%.0f", dev, mib, (unsigned long long)p, ms);
    return 0;
}

static int do_check(void)
{
    int lost = 0;
    size_t total = 0;
    for (int b = 0; b < nbufs; b++) {
        int ok = use(bufs[b].dev) == CUDA_SUCCESS;
        for (size_t off = 0; ok && off < bufs[b].len; off += CHUNK) {
            size_t n = bufs[b].len - off < CHUNK ? bufs[b].len - off : CHUNK;
            CUresult rc = cu.dtoh(back, bufs[b].addr + off, n);
            pattern(b, off, host, n);
            if (rc != CUDA_SUCCESS) {
                say("read failed dev=%d addr=0x%llx err=%d", bufs[b].dev,
                    (unsigned long long)bufs[b].addr, (int)rc);
                return 4;
            }
            ok = memcmp(back, host, n) == 0;
        }
        say("check dev=%d addr=0x%llx %s", bufs[b].dev, (unsigned long long)bufs[b].addr,
            ok ? "intact" : "lost");
        lost |= !ok;
        total += bufs[b].len;
    }
    if (lost) {
        say("data lost");
        return 3;
    }
    say("data intact %zu bytes", total);
    return 0;
}

static int do_free(void)
{
    size_t total = 0;
    for (int b = nbufs - 1; b >= 0; b--) {
        if (use(bufs[b].dev) != CUDA_SUCCESS || cu.free(bufs[b].addr) != CUDA_SUCCESS) {
            say("free failed dev=%d addr=0x%llx", bufs[b].dev, (unsigned long long)bufs[b].addr);
            return 4;
        }
        total += bufs[b].len;
    }
    nbufs = 0;
    say("freed %zu bytes", total);
    return 0;
}

static int do_drop(void)
{
    if (nbufs == 0)
        return 4;
    struct buf *b = &bufs[nbufs - 1];
    if (use(b->dev) != CUDA_SUCCESS || cu.free(b->addr) != CUDA_SUCCESS) {
        say("drop failed dev=%d addr=0x%llx", b->dev, (unsigned long long)b->addr);
        return 4;
    }
    nbufs--;
    say("dropped %zu bytes", b->len);
    return 0;
}

/* The first process's status, or the second's when the first's is 0. */
static int join(pid_t child, int rc)
{
    int st = 0;
    if (child <= 0 || waitpid(child, &st, 0) != child)
        return child < 0 ? rc : 4;
    int crc = WIFEXITED(st) ? WEXITSTATUS(st) : 4;
    return rc != 0 ? rc : crc;
}

int main(int argc, char **argv)
{
    int first = 1;
    pid_t child = 0; /* 0: no second process (or this is it) */
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {
        first = 2;
        fflush(stdout);
        child = fork();
        if (child < 0)
            return 2;
        worker = child == 0;
    }
    if (child == 0 && !worker)
        child = -1;
    host = malloc(CHUNK);
    back = malloc(CHUNK);
    if (host == NULL || back == NULL || load() != 0)
        return 2;
    say("pid %d", (int)ts_hostpid()); /* as the host sees it */
    int rc = 0;
    for (int i = first; i < argc && rc == 0; i++) {
        const char *s = argv[i];
        if (strcmp(s, "alloc") == 0 && i + 2 < argc) {
            rc = do_alloc(atoi(argv[i + 1]), strtoul(argv[i + 2], NULL, 10), false);
            i += 2;
        } else if (strcmp(s, "managed") == 0 && i + 2 < argc) {
            rc = do_alloc(atoi(argv[i + 1]), strtoul(argv[i + 2], NULL, 10), true);
            i += 2;
        } else if (strcmp(s, "managed1") == 0 && i + 2 < argc) {
            if (worker)
                rc = do_alloc(atoi(argv[i + 1]), strtoul(argv[i + 2], NULL, 10), true);
            i += 2;
        } else if (strcmp(s, "check") == 0) {
            rc = do_check();
        } else if (strcmp(s, "drop") == 0) {
            rc = do_drop();
        } else if (strcmp(s, "free") == 0) {
            rc = do_free();
        } else if (strcmp(s, "idle") == 0 && i + 1 < argc) {
            sleep_s(atof(argv[++i]));
        } else if (strcmp(s, "mark") == 0 && i + 1 < argc) {
            char f[4096];
            snprintf(f, sizeof(f), "%s%s", argv[++i], worker ? ".w1" : "");
            int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (fd >= 0)
                close(fd);
        } else if (strcmp(s, "await") == 0 && i + 1 < argc) {
            const char *f = argv[++i];
            double until = now_s() + 120;
            while (access(f, F_OK) != 0 && now_s() < until)
                sleep_s(0.05);
            if (access(f, F_OK) != 0) {
                say("no %s after 120 s", f);
                rc = 2;
            }
        } else {
            say("bad step: %s", s);
            rc = 2;
        }
    }
    free(host);
    free(back);
    return worker ? rc : join(child, rc);
}
