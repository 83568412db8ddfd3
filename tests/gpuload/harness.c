/*
 * harness.c - what the tessera-gpuload test programs share (gpuload_test.c,
 * gpuload_burst_test.c): the failure count, a fresh simulated GPU in a
 * temporary folder, starting the program and waiting for it, reading its
 * output, the GPU's shared state, and main.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/array.h"
#include "tests/gpuload/harness.h"

int gl_failures;
bool gl_skipped;
const char *gl_gpuload;
char gl_tmp[256], gl_simdir[300];

double gl_now_s(void)
{
    return (double)ts_simgpu_now_ns() / 1e9;
}

void gl_sleep_ms(unsigned n)
{
    struct timespec ts = {n / 1000, (long)(n % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A temporary folder with one simulated GPU of `bytes` in it. */
void gl_setup(uint64_t bytes)
{
    const char *t = getenv("TMPDIR");
    snprintf(gl_tmp, sizeof gl_tmp, "%s/gpuload-test-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(gl_tmp)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(gl_simdir, sizeof gl_simdir, "%s/gpus", gl_tmp);
    int rc = ts_simgpu_create(gl_simdir, 1, bytes, 0);
    if (rc < 0) {
        fprintf(stderr, "could not create GPUs: %s\n", strerror(-rc));
        exit(1);
    }
}

void gl_cleanup(void)
{
    if (!gl_tmp[0])
        return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", gl_tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", gl_tmp);
}

/* ---- running tessera-gpuload ---- */

/*
 * Start tessera-gpuload with args and env ("NAME=VALUE", NULL-terminated
 * lists); stdout and stderr go to TMP/TAG.out and TMP/TAG.err. The child
 * gets TESSERA_SIMGPU_DIR and none of the job variables the test does not
 * give it.
 */
struct gl_child gl_spawn(const char *tag, const char *const *args, const char *const *env)
{
    struct gl_child c = {0};
    snprintf(c.out, sizeof c.out, "%s/%s.out", gl_tmp, tag);
    snprintf(c.err, sizeof c.err, "%s/%s.err", gl_tmp, tag);
    c.pid = fork();
    if (c.pid == 0) {
        int fo = open(c.out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(c.err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(126);
        const char *drop[] = {"TESSERA_CHECKPOINT_DIR",        "TESSERA_RESUME_COUNT",
                              "TESSERA_SIMGPU_FAIL",           "TESSERA_GPULOAD_CORRUPT_STEP",
                              "TESSERA_GPULOAD_CORRUPT_BURST", "TESSERA_CONFIG",
                              "CUDA_VISIBLE_DEVICES"};
        for (size_t i = 0; i < TS_ARRAY_LEN(drop); i++)
            unsetenv(drop[i]);
        setenv("TESSERA_SIMGPU_DIR", gl_simdir, 1);
        for (size_t i = 0; env && env[i]; i++) {
            char kv[1024];
            snprintf(kv, sizeof kv, "%s", env[i]);
            char *eq = strchr(kv, '=');
            if (!eq)
                _exit(126);
            *eq = '\0';
            setenv(kv, eq + 1, 1);
        }
        const char *argv[64] = {gl_gpuload};
        size_t n = 1;
        for (size_t i = 0; args && args[i] && n < 63; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(gl_gpuload, (char *const *)argv);
        _exit(127);
    }
    return c;
}

/* Wait for the child; its exit status, 1000 + N when signal N ended it,
 * -1 (and a failure) when it outlives timeout_s. */
int gl_finish(struct gl_child *c, double timeout_s)
{
    double until = gl_now_s() + timeout_s;
    int status;
    for (;;) {
        pid_t w = waitpid(c->pid, &status, WNOHANG);
        if (w == c->pid)
            break;
        if (w < 0 || gl_now_s() > until) {
            fprintf(stderr, "tessera-gpuload (%s) did not end within %.0f s\n", c->out, timeout_s);
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
            gl_failures++;
            return -1;
        }
        gl_sleep_ms(10);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}

/* Everything in path (new; free it), "" when missing. */
char *gl_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    size_t cap = 1 << 20, n = 0;
    char *buf = calloc(1, cap + 1);
    if (f && buf) {
        n = fread(buf, 1, cap, f);
        buf[n] = '\0';
    }
    if (f)
        fclose(f);
    return buf;
}

bool gl_has(const char *path, const char *needle)
{
    char *text = gl_slurp(path);
    bool found = text && strstr(text, needle) != NULL;
    free(text);
    return found;
}

/* Wait until path holds needle; false after timeout_s. */
bool gl_wait_for(const char *path, const char *needle, double timeout_s)
{
    double until = gl_now_s() + timeout_s;
    while (gl_now_s() < until) {
        if (gl_has(path, needle))
            return true;
        gl_sleep_ms(10);
    }
    fprintf(stderr, "%s: no \"%s\" within %.0f s\n", path, needle, timeout_s);
    return false;
}

struct gl_steps gl_steps_of(const char *path, const char *key)
{
    struct gl_steps s = {0, -1, 0};
    char *text = gl_slurp(path);
    char want[64];
    snprintf(want, sizeof want, " %s=", key ? key : "");
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, "step=", 5) == 0) {
            s.lines++;
            s.last = atoll(line + 5);
            char *k = key ? strstr(line, want) : NULL;
            if (k)
                s.sum += atof(k + strlen(want));
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return s;
}

/* elapsed_s of the "done" line, 0 without one. */
double gl_elapsed_of(const char *path)
{
    char *text = gl_slurp(path), *done = text ? strstr(text, "elapsed_s=") : NULL;
    double e = done ? atof(done + strlen("elapsed_s=")) : 0;
    free(text);
    return e;
}

void gl_dump(const struct gl_child *c)
{
    char *o = gl_slurp(c->out), *e = gl_slurp(c->err);
    fprintf(stderr, "--- %s\n%s--- %s\n%s---\n", c->out, o ? o : "", c->err, e ? e : "");
    free(o);
    free(e);
}

/* The GPU's slot for pid, read under the lock without reaping. */
struct ts_simgpu_proc gl_slot_of(pid_t pid)
{
    struct ts_simgpu_proc p = {0};
    struct ts_simgpu_dev g;
    if (ts_simgpu_open(gl_simdir, 0, &g) != 0)
        return p;
    ts_simgpu_lock(&g);
    for (int i = 0; i < TS_SIMGPU_MAX_PROCS; i++)
        if (g.st->procs[i].pid == pid)
            p = g.st->procs[i];
    ts_simgpu_unlock(&g);
    ts_simgpu_close(&g);
    return p;
}

uint64_t gl_gpu_used_after_reap(void)
{
    struct ts_simgpu_dev g;
    if (ts_simgpu_open(gl_simdir, 0, &g) != 0)
        return ~0ull;
    ts_simgpu_lock(&g);
    ts_simgpu_reap(&g);
    uint64_t used = atomic_load(&g.st->used_bytes);
    ts_simgpu_unlock(&g);
    ts_simgpu_close(&g);
    return used;
}

unsigned gl_gpu_util(void)
{
    struct ts_simgpu_dev g;
    if (ts_simgpu_open(gl_simdir, 0, &g) != 0)
        return 0;
    unsigned u = ts_simgpu_util_percent(&g, 1000000000ull);
    ts_simgpu_close(&g);
    return u;
}

long long gl_checkpoint_step(const char *dir)
{
    uint64_t step = 0;
    bool found = false;
    struct ts_error err;
    if (ts_gpuload_checkpoint_read(dir, &step, &found, &err) != TS_OK || !found)
        return -1;
    return (long long)step;
}

int gl_main(const struct gl_case *cases, size_t n, int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PATH_TO_TESSERA_GPULOAD CASE\n", argv[0]);
        return 2;
    }
    gl_gpuload = argv[1];
    for (size_t i = 0; i < n; i++)
        if (strcmp(cases[i].name, argv[2]) == 0) {
            cases[i].fn();
            gl_cleanup();
            if (gl_failures)
                fprintf(stderr, "%s: %d checks failed\n", argv[2], gl_failures);
            return gl_failures ? 1 : gl_skipped ? 77 : 0;
        }
    fprintf(stderr, "unknown case: %s\n", argv[2]);
    return 2;
}
