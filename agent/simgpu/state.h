/*
 * state.h - the shared state of a simulated GPU, one file per GPU.
 *
 * The agent creates DIR/gpu<N>.state (ts_simgpu_create); every process that
 * loads simgpu's libcuda.so.1 or libnvidia-ml.so.1 maps the files of the
 * folder named by TESSERA_SIMGPU_DIR with MAP_SHARED, so capacity and busy
 * time are shared across processes. Layout and invariants: README.md.
 *
 * Locking: ts_simgpu_lock takes an in-process mutex, then an OFD fcntl write
 * lock on the file, which the kernel drops when the holder dies. Fields
 * marked "lock" are read and written only under it; _Atomic fields may be
 * read without it. This module is linked into the two shared libraries and
 * the tool, so it depends on libc only and reports errors as -errno.
 */
#ifndef TS_AGENT_SIMGPU_STATE_H
#define TS_AGENT_SIMGPU_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define TS_SIMGPU_MAGIC 0x31555047u /* "GPU1" read as little-endian bytes */
#define TS_SIMGPU_ABI_MAJOR 2
#define TS_SIMGPU_ABI_MINOR 0
#define TS_SIMGPU_MAX_PROCS 128
#define TS_SIMGPU_SPANS 4096
#define TS_SIMGPU_MAX_GPUS 64
#define TS_SIMGPU_NAME_LEN 64

/* One process that holds a context or memory on the GPU. */
struct ts_simgpu_proc {
    int32_t pid; /* lock; 0 = free slot */
    uint32_t reserved;
    uint64_t start_ticks; /* lock; /proc/PID/stat starttime, tells pid reuse apart */
    uint64_t used_bytes;  /* lock; device memory this process holds */
    uint64_t busy_ns;     /* lock; kernel time this process has queued */
};

/* A period during which the GPU ran kernels of one process, on
 * CLOCK_MONOTONIC. */
struct ts_simgpu_span {
    uint64_t from_ns;
    uint64_t until_ns;
    int32_t pid;
    uint32_t reserved;
};

struct ts_simgpu_state {
    /* Written once by ts_simgpu_create, read-only afterwards. */
    uint32_t magic;
    uint16_t abi_major;
    uint16_t abi_minor;
    uint32_t size; /* sizeof(struct ts_simgpu_state) of the writer */
    uint32_t index;
    uint64_t total_bytes;
    uint64_t copy_bytes_per_s; /* host<->device copy bandwidth, 0 = memcpy speed */
    unsigned char uuid[16];
    char name[TS_SIMGPU_NAME_LEN];
    /* Shared, changing. */
    _Atomic uint64_t used_bytes;                  /* == sum of procs[].used_bytes <= total_bytes */
    _Atomic uint64_t kernels;                     /* kernels launched, ever */
    uint64_t busy_until_ns;                       /* lock; end of the last queued kernel */
    uint32_t span_next;                           /* lock; slot the next new span goes to */
    uint32_t span_count;                          /* lock; valid spans, <= TS_SIMGPU_SPANS */
    struct ts_simgpu_span spans[TS_SIMGPU_SPANS]; /* lock; ring, newest at span_next-1 */
    struct ts_simgpu_proc procs[TS_SIMGPU_MAX_PROCS];
};

/* A process's handle on one GPU file. */
struct ts_simgpu_dev {
    int fd;
    struct ts_simgpu_state *st; /* MAP_SHARED view of the file */
    pthread_mutex_t mu;
};

/*
 * Create DIR (mode 0700 if missing) and DIR/gpu0.state .. gpu<count-1>.state
 * for GPUs of `bytes` memory each and a copy bandwidth (0 = unlimited).
 * A file that already exists and is valid is kept as it is, so an agent that
 * restarts does not wipe the usage of running jobs. Returns 0 or -errno.
 */
int ts_simgpu_create(const char *dir, unsigned count, uint64_t bytes, uint64_t copy_bytes_per_s);
/* Number of consecutive gpu<N>.state files in dir, from 0. */
unsigned ts_simgpu_count(const char *dir);
/* Map DIR/gpu<index>.state into dev. Returns 0, -ENOENT, or -EPROTO for a
 * file of another ABI major version or a wrong size. */
int ts_simgpu_open(const char *dir, unsigned index, struct ts_simgpu_dev *dev);
void ts_simgpu_close(struct ts_simgpu_dev *dev);

void ts_simgpu_lock(struct ts_simgpu_dev *dev);
void ts_simgpu_unlock(struct ts_simgpu_dev *dev);

/* Under the lock: forget processes that have exited (their memory is freed)
 * and recompute used_bytes from the slots. */
void ts_simgpu_reap(struct ts_simgpu_dev *dev);
/* Under the lock: this process's slot, created when create != 0 (NULL when
 * the table is full or the slot is missing). */
struct ts_simgpu_proc *ts_simgpu_self(struct ts_simgpu_dev *dev, int create);
/* Take (delta > 0) or give back (delta < 0) device memory for this process.
 * Takes the lock. Returns 0, or -ENOMEM when the GPU lacks room. */
int ts_simgpu_charge(struct ts_simgpu_dev *dev, int64_t delta);
/* Queue a kernel of dur_ns that may not start before not_before_ns; kernels
 * of all processes on a GPU run one after another. Returns its end time. */
uint64_t ts_simgpu_busy_add(struct ts_simgpu_dev *dev, uint64_t not_before_ns, uint64_t dur_ns);
/* Busy time in [now - window_ns, now], in percent (0..100). Takes the lock. */
unsigned ts_simgpu_util_percent(struct ts_simgpu_dev *dev, uint64_t window_ns);
/* Under the lock: nanoseconds of [from_ns, to_ns) during which the GPU ran
 * kernels of pid (any process when pid is 0), as far back as the span ring
 * reaches. */
uint64_t ts_simgpu_busy_ns(struct ts_simgpu_dev *dev, pid_t pid, uint64_t from_ns, uint64_t to_ns);

uint64_t ts_simgpu_now_ns(void);
/* Sleep until CLOCK_MONOTONIC reaches t_ns. */
void ts_simgpu_sleep_until(uint64_t t_ns);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" into buf (>= 41 bytes). */
void ts_simgpu_uuid_format(const unsigned char uuid[16], char *buf);

/*
 * Failure injection from TESSERA_SIMGPU_FAIL="name:N[:code],...": the Nth
 * call (from 1) of API function `name` in this process fails. Returns 0 to
 * go on, the code given, or dflt when none was given.
 */
int ts_simgpu_fail(const char *name, int dflt);
/* Message to stderr when TESSERA_SIMGPU_LOG is set; never to stdout. */
void ts_simgpu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* TS_AGENT_SIMGPU_STATE_H */
