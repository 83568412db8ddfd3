/*
 * harness.c - simulated GPUs, ledgers and probe processes for the shim
 * tests (harness.h). Paths come from the environment CTest sets:
 * TS_SHIM_LIB (libtessera-cuda.so), TS_SIMGPU_LIBDIR, TS_SHIM_PROBE and,
 * in the sanitizer build, TS_SHIM_PRELOAD_FIRST (libasan, which must come
 * before the shim in LD_PRELOAD).
 */
#include "tests/shim/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/simgpu/state.h"

uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void die(const char *what)
{
    fprintf(stderr, "harness: %s: %s\n", what, strerror(errno));
    exit(1);
}

void world_make(struct world *w, uint64_t gpu_bytes, uint64_t reserve, uint32_t wait_ms,
                bool two_devs)
{
    memset(w, 0, sizeof(*w));
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(w->root, sizeof(w->root), "%s/shimtest.XXXXXX", tmp);
    if (mkdtemp(w->root) == NULL)
        die("mkdtemp");
    snprintf(w->sim, sizeof(w->sim), "%s/sim", w->root);
    snprintf(w->shim, sizeof(w->shim), "%s/shim", w->root);
    if (ts_simgpu_create(w->sim, 2, gpu_bytes, 0) != 0 || mkdir(w->shim, 0700) != 0)
        die("simgpu");
    for (int k = 0; k < (two_devs ? 2 : 1); k++) {
        struct ts_simgpu_dev d;
        if (ts_simgpu_open(w->sim, (unsigned)k, &d) != 0)
            die("simgpu open");
        ts_simgpu_uuid_format(d.st->uuid, w->uuid[k]);
        ts_simgpu_close(&d);
        char path[400];
        snprintf(path, sizeof(path), "%s/dev%d.ledger", w->shim, k);
        w->l[k] = ts_ledger_create(path, (uint32_t)k, w->uuid[k], gpu_bytes, reserve,
                                   TS_COLLISION_WAIT, wait_ms, "", 0);
        if (w->l[k] == NULL)
            die("ledger");
    }
}

void world_swap(struct world *w, uint64_t bytes)
{
    char path[240];
    snprintf(path, sizeof(path), "%s/reserve", w->root);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0)
        die("swap reserve");
    close(fd);
    for (int k = 0; k < 2; k++) {
        if (w->l[k] == NULL)
            continue;
        ts_ledger_lock(w->l[k]);
        snprintf(w->l[k]->h.swap_path, sizeof(w->l[k]->h.swap_path), "%s", path);
        w->l[k]->h.swap_bytes = bytes;
        ts_ledger_unlock(w->l[k]);
    }
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

void world_free(struct world *w)
{
    for (int k = 0; k < 2; k++)
        ts_ledger_close(w->l[k]);
    nftw(w->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int world_job(struct ts_ledger *l, int64_t id, uint64_t request, uint64_t limit)
{
    ts_ledger_lock(l);
    int j = 0;
    while (j < TS_LEDGER_JOBS && atomic_load(&l->jobs[j].key) != 0)
        j++;
    struct ts_ledger_job *job = &l->jobs[j];
    job->job_id = id;
    job->attempt = 0;
    job->request_bytes = request;
    job->limit_bytes = limit;
    atomic_store(&job->used_bytes, 0);
    atomic_store(&job->key, ts_ledger_key(id, 0));
    ts_ledger_unlock(l);
    return j;
}

void probe_start_bin(struct probe *p, const char *bin, const struct world *w, int64_t job_id,
                     bool plain, const char *extra_env, const char *const *args)
{
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0)
        die("pipe");
    memset(p, 0, sizeof(*p));
    p->pid = fork();
    if (p->pid < 0)
        die("fork");
    if (p->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        char pre[1024], job[64];
        const char *first = getenv("TS_SHIM_PRELOAD_FIRST");
        snprintf(pre, sizeof(pre), "%s%s%s", first && *first ? first : "",
                 first && *first ? " " : "", getenv("TS_SHIM_LIB"));
        if (!plain)
            setenv("LD_PRELOAD", pre, 1);
        else if (first && *first)
            setenv("LD_PRELOAD", first, 1);
        setenv("LD_LIBRARY_PATH", getenv("TS_SIMGPU_LIBDIR"), 1);
        setenv("TESSERA_SIMGPU_DIR", w->sim, 1);
        setenv("TESSERA_SHIM_DIR", w->shim, 1);
        unsetenv("TESSERA_SHIM_JOB");
        if (job_id > 0) {
            snprintf(job, sizeof(job), "%lld:0", (long long)job_id);
            setenv("TESSERA_SHIM_JOB", job, 1);
        }
        if (extra_env != NULL) {
            char kv[512];
            snprintf(kv, sizeof(kv), "%s", extra_env);
            char *eq = strchr(kv, '=');
            if (eq != NULL) {
                *eq = '\0';
                if (eq[1] == '\0')
                    unsetenv(kv);
                else
                    setenv(kv, eq + 1, 1);
            }
        }
        const char *argv[4200];
        int n = 0;
        argv[n++] = bin;
        for (int i = 0; args[i] != NULL && n < 4199; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    p->in = in[1];
    p->out = out[0];
}

void probe_start(struct probe *p, const struct world *w, int64_t job_id, bool plain,
                 const char *extra_env, const char *const *args)
{
    probe_start_bin(p, getenv("TS_SHIM_PROBE"), w, job_id, plain, extra_env, args);
}

bool probe_line(struct probe *p, const char *prefix, char *line, size_t n, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *nl;
        while ((nl = memchr(p->buf, '\n', p->len)) != NULL) {
            size_t l = (size_t)(nl - p->buf);
            bool match = strncmp(p->buf, prefix, strlen(prefix)) == 0;
            if (match) {
                size_t c = l < n - 1 ? l : n - 1;
                memcpy(line, p->buf, c);
                line[c] = '\0';
            }
            memmove(p->buf, nl + 1, p->len - l - 1);
            p->len -= l + 1;
            if (match)
                return true;
        }
        uint64_t now = now_ms();
        if (now >= deadline || p->len >= sizeof(p->buf) - 1)
            return false;
        struct pollfd pf = {p->out, POLLIN, 0};
        if (poll(&pf, 1, (int)(deadline - now)) <= 0)
            continue;
        ssize_t r = read(p->out, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
        if (r <= 0)
            return false;
        p->len += (size_t)r;
    }
}

void probe_go(struct probe *p)
{
    ssize_t r = write(p->in, "\n", 1);
    (void)r;
}

int probe_end(struct probe *p, int timeout_ms)
{
    close(p->in);
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    int st = 0;
    for (;;) {
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid)
            break;
        if (now_ms() >= deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            break;
        }
        usleep(5000);
    }
    close(p->out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

uint64_t field(const char *line, const char *key)
{
    char k[64];
    snprintf(k, sizeof(k), " %s=", key);
    const char *s = strstr(line, k);
    return s ? strtoull(s + strlen(k), NULL, 10) : UINT64_MAX;
}

uint64_t job_used(struct ts_ledger *l, int job)
{
    return atomic_load(&l->jobs[job].used_bytes);
}

struct ts_ledger_proc *slot_of(struct ts_ledger *l, pid_t pid)
{
    int i = ts_ledger_find_proc(l, pid);
    return i < 0 ? NULL : &l->procs[i];
}
