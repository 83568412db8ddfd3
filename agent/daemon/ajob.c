/*
 * ajob.c - a job's folder, its start through the supervisor, adoption after
 * a restart, its state, and stopping it (SIGTERM to its group, SIGKILL after
 * the grace period).
 */
#include "agent/daemon/ajob.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/files.h"
#include "agent/daemon/proc.h"
#include "agent/daemon/records.h"
#include "api/log.h"

#define NOTIFY_WAIT_MS 10000
#define MAX_GRACE 86400

int64_t ts_ajob_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void job_path(const struct ts_ajob *j, const char *file, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", j->dir, file);
}

bool ts_ajob_final(const struct ts_ajob *j)
{
    return j->phase == TS_AJOB_EXITED || j->phase == TS_AJOB_FAILED;
}

const char *ts_ajob_state_name(const struct ts_ajob *j)
{
    switch (j->phase) {
    case TS_AJOB_RUNNING:
        return "running";
    case TS_AJOB_EXITED:
        return "exited";
    case TS_AJOB_FAILED:
        return "failed_to_start";
    case TS_AJOB_STARTING:
        break;
    }
    return NULL;
}

void ts_ajob_free(struct ts_ajob *j)
{
    if (j == NULL)
        return;
    free(j->cgroup);
    free(j);
}

static void set_failed(struct ts_ajob *j, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The job cannot start: record it (in status.json and output.log too when
 * the folder exists, so a restarted agent and the user's log both say so). */
static void set_failed(struct ts_ajob *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->message, sizeof(j->message), fmt, ap);
    va_end(ap);
    j->phase = TS_AJOB_FAILED;
    char path[PATH_MAX];
    struct stat st;
    if (stat(j->dir, &st) != 0)
        return;
    job_path(j, "output.log", path, sizeof(path));
    FILE *f = fopen(path, "ae");
    if (f != NULL) {
        fprintf(f, "tessera-agent: %s\n", j->message);
        fclose(f);
    }
    struct ts_rec_status rec = {.state = "failed_to_start", .finished_at = (int64_t)time(NULL)};
    snprintf(rec.message, sizeof(rec.message), "%s", j->message);
    job_path(j, "status.json", path, sizeof(path));
    ts_rec_status_write(path, &rec);
}

enum { REC_STATUS = 1, REC_PIDS = 2, REC_STOP = 4 };

/* Whether reading a record's file (bit rec) gave one. A damaged file
 * counts as absent, as it always has, and is said once a job (the main
 * thread reads status.json every 100 ms). */
static bool rec_ok(struct ts_ajob *j, unsigned rec, enum ts_err e, const struct ts_error *err)
{
    if (e != TS_OK && e != TS_ERR_NOT_FOUND && !(j->damage_said & rec)) {
        ts_log_warn("%s; taken as absent job=%lld attempt=%d", err->message, (long long)j->id,
                    j->attempt);
        j->damage_said |= rec;
    }
    return e == TS_OK;
}

/* Apply status.json when it exists; returns true when it did. */
static bool read_status(struct ts_ajob *j)
{
    char path[PATH_MAX];
    struct ts_error err = {0};
    struct ts_rec_status st;
    job_path(j, "status.json", path, sizeof(path));
    if (!rec_ok(j, REC_STATUS, ts_rec_status_read(path, &st, &err), &err))
        return false;
    if (st.message[0] != '\0') { /* cut to fit, as it always was */
        size_t n = strnlen(st.message, sizeof(j->message) - 1);
        memcpy(j->message, st.message, n);
        j->message[n] = '\0';
    }
    if (strcmp(st.state, "failed_to_start") == 0) {
        j->phase = TS_AJOB_FAILED;
    } else {
        j->phase = TS_AJOB_EXITED;
        j->has_exit_code = st.has_exit_code;
        j->exit_code = (int)st.exit_code;
        j->signal = (int)st.signal;
    }
    return true;
}

/* Apply job.json when it exists; returns true when it did. */
static bool read_pids(struct ts_ajob *j)
{
    char path[PATH_MAX];
    struct ts_error err = {0};
    struct ts_rec_pids r;
    job_path(j, "job.json", path, sizeof(path));
    if (!rec_ok(j, REC_PIDS, ts_rec_pids_read(path, &r, &err), &err))
        return false;
    j->pid = (pid_t)r.pid;
    j->start_ticks = (uint64_t)r.start_ticks;
    j->sup_pid = (pid_t)r.supervisor_pid;
    j->sup_ticks = (uint64_t)r.supervisor_start_ticks;
    j->init_pid = (pid_t)r.init_pid;
    j->init_ticks = (uint64_t)r.init_start_ticks;
    return j->pid > 0;
}

static void save_stop(const struct ts_ajob *j)
{
    char path[PATH_MAX];
    job_path(j, "stop.json", path, sizeof(path));
    struct ts_rec_stop s = {.deadline_ms = j->stop_deadline_ms, .killed = j->killed};
    ts_rec_stop_write(path, &s);
}

/* Signal the job's process group; with SIGKILL also any member of its
 * session that left the group. Never once status.json says it is over. */
static void signal_job(struct ts_ajob *j, int sig)
{
    char path[PATH_MAX];
    job_path(j, "status.json", path, sizeof(path));
    if (j->pid <= 0 || ts_files_exists(path))
        return;
    if (kill(-j->pid, sig) != 0 && errno != ESRCH)
        ts_log_warn("could not signal job: %s job=%lld attempt=%d pgid=%d", strerror(errno),
                    (long long)j->id, j->attempt, (int)j->pid);
    if (sig == SIGKILL) {
        /* sandboxed: the end of its init is the end of every process of it */
        if (j->init_pid > 0 && ts_proc_same(j->init_pid, j->init_ticks))
            kill(j->init_pid, SIGKILL);
        if (j->cgroup != NULL)
            ts_cgroup_kill(j->cgroup); /* and whatever else is in its group */
        pid_t pids[256];
        size_t n = ts_proc_session(j->pid, pids, 256);
        for (size_t i = 0; i < n && i < 256; i++)
            kill(pids[i], SIGKILL);
    }
}

void ts_ajob_stop(struct ts_ajob *j, int grace_seconds, const char *reason)
{
    if (ts_ajob_final(j) || j->stopping)
        return;
    if (grace_seconds < 0)
        grace_seconds = 0;
    if (grace_seconds > MAX_GRACE)
        grace_seconds = MAX_GRACE;
    j->stopping = true;
    j->stop_deadline_ms = ts_ajob_now_ms() + (int64_t)grace_seconds * 1000;
    ts_log_info("stopping job job=%lld attempt=%d pid=%d grace=%ds reason=\"%s\"", (long long)j->id,
                j->attempt, (int)j->pid, grace_seconds, reason);
    if (j->phase == TS_AJOB_RUNNING)
        signal_job(j, grace_seconds == 0 ? SIGKILL : SIGTERM);
    if (grace_seconds == 0)
        j->killed = j->phase == TS_AJOB_RUNNING;
    save_stop(j);
}

bool ts_ajob_poll(struct ts_ajob *j, int64_t now_ms)
{
    enum ts_ajob_phase old = j->phase;
    if (ts_ajob_final(j))
        return false;
    if (read_status(j))
        return true;
    if (j->phase == TS_AJOB_STARTING) {
        if (read_pids(j)) {
            j->phase = TS_AJOB_RUNNING;
            if (j->stopping) /* asked to stop before its pid was known */
                signal_job(j, now_ms >= j->stop_deadline_ms ? SIGKILL : SIGTERM);
        } else if (now_ms >= j->starting_deadline_ms) {
            set_failed(j, "the job's supervisor did not start it within %d s",
                       TS_AJOB_START_TIMEOUT_MS / 1000);
            ts_log_warn("job could not start: %s job=%lld attempt=%d", j->message, (long long)j->id,
                        j->attempt);
        }
        return j->phase != old;
    }
    if (!ts_proc_same(j->pid, j->start_ticks) && !ts_proc_same(j->sup_pid, j->sup_ticks)) {
        /* both gone: the status was written just now, or it is lost */
        if (!read_status(j)) {
            /* -1: not a status a process can exit with, and not a success */
            j->phase = TS_AJOB_EXITED;
            j->has_exit_code = true;
            j->exit_code = -1;
            snprintf(j->message, sizeof(j->message),
                     "exit status lost: the job and its supervisor ended without recording it");
            ts_log_warn("%s job=%lld attempt=%d", j->message, (long long)j->id, j->attempt);
        }
        return true;
    }
    if (j->stopping && !j->killed && now_ms >= j->stop_deadline_ms) {
        ts_log_info("grace period over, killing job job=%lld attempt=%d pgid=%d", (long long)j->id,
                    j->attempt, (int)j->pid);
        signal_job(j, SIGKILL);
        j->killed = true;
        save_stop(j);
    }
    return false;
}

/* ---- starting ------------------------------------------------------------ */

/* The agent's child: setsid, stdio, fd 3 = notify pipe, exec the supervisor.
 * Only async-signal-safe calls: the agent has threads. */
static void exec_supervisor(const char *exe, char *const argv[], int devnull, int logfd, int notify)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    setsid();
    dup2(devnull, 0);
    dup2(logfd, 1);
    dup2(logfd, 2);
    if (notify == 3) {
        fcntl(3, F_SETFD, 0);
    } else {
        dup2(notify, 3);
    }
    if (close_range(4, ~0U, 0) != 0)
        for (int fd = 4; fd < 65536; fd++)
            close(fd);
    execv(exe, argv);
    _exit(127);
}

/* Wait until the supervisor closes the notify pipe (job.json written, or
 * the job failed to start), or NOTIFY_WAIT_MS. */
static void wait_notify(int fd)
{
    int64_t deadline = ts_ajob_now_ms() + NOTIFY_WAIT_MS;
    for (;;) {
        int64_t left = deadline - ts_ajob_now_ms();
        if (left <= 0)
            return;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        char buf[64];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
            return;
    }
}

static void spawn(struct ts_ajob *j, const struct ts_ajob_ctx *ctx)
{
    char logpath[PATH_MAX];
    job_path(j, "supervisor.log", logpath, sizeof(logpath));
    int logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    int p[2] = {-1, -1};
    if (logfd < 0 || devnull < 0 || pipe2(p, O_CLOEXEC) != 0) {
        set_failed(j, "could not prepare the supervisor: %s", strerror(errno));
        goto out;
    }
    char *argv[] = {"tessera-agent", "--supervise", j->dir, NULL};
    const char *exe = ctx->supervisor_exe != NULL ? ctx->supervisor_exe : "/proc/self/exe";
    pid_t pid = fork();
    if (pid < 0) {
        set_failed(j, "could not fork the supervisor: %s", strerror(errno));
        goto out;
    }
    if (pid == 0)
        exec_supervisor(exe, argv, devnull, logfd, p[1]);
    close(p[1]);
    p[1] = -1;
    wait_notify(p[0]);
    j->phase = TS_AJOB_STARTING;
    j->starting_deadline_ms = ts_ajob_now_ms() + TS_AJOB_START_TIMEOUT_MS;
    ts_ajob_poll(j, ts_ajob_now_ms());
    if (j->sup_pid == 0)
        j->sup_pid = pid;
out:
    if (logfd >= 0)
        close(logfd);
    if (devnull >= 0)
        close(devnull);
    if (p[0] >= 0)
        close(p[0]);
    if (p[1] >= 0)
        close(p[1]);
}

/* The GPUs the job may open: its own, then the logical GPUs of a job the
 * node spread, where re-packing may move it (repack.h). The count. */
static unsigned reachable_gpus(const struct ts_ajob *j, unsigned *out)
{
    unsigned n = 0;
    for (unsigned i = 0; i < j->ngpus; i++)
        out[n++] = j->gpus[i];
    for (unsigned i = 0; i < j->ngpus && n < TS_GPUS_MAX; i++) {
        bool listed = false;
        for (unsigned k = 0; k < n; k++)
            listed = listed || out[k] == j->logical[i];
        if (!listed)
            out[n++] = j->logical[i];
    }
    return n;
}

static void read_spec(struct ts_ajob *j, const struct ts_desired_job *spec)
{
    j->grace_seconds = spec->grace_seconds;
    if (j->grace_seconds < 0 || j->grace_seconds > MAX_GRACE)
        j->grace_seconds = TS_AJOB_GRACE_DEFAULT;
    j->priority = spec->priority;
    int64_t idle = spec->idle_swap_after_seconds;
    j->idle_swap_after = idle > 0 && idle <= INT32_MAX ? (int)idle : 0;
    j->ngpus = 0;
    for (size_t i = 0; i < spec->ngpus; i++) {
        int index = spec->gpus[i].index;
        int logical = spec->gpus[i].logical_index >= 0 ? spec->gpus[i].logical_index : index;
        if (j->ngpus < TS_GPUS_MAX && index >= 0 && index < TS_GPUS_MAX && logical >= 0 &&
            logical < TS_GPUS_MAX) {
            j->logical[j->ngpus] = (unsigned)logical;
            j->gpus[j->ngpus++] = (unsigned)index;
        }
    }
}

/* launch.json's "sandbox" into *o (zeroed): what the job's init needs
 * (sandbox.c). */
static void sandbox_spec(const struct ts_ajob_ctx *ctx, const struct ts_ajob *j, const char *ckpt,
                         struct ts_sandbox_spec *o)
{
    const struct ts_sandbox *sb = ctx->sandbox;
    o->uid = j->user.uid;
    o->gid = j->user.gid;
    snprintf(o->user, sizeof(o->user), "%s", j->user.name);
    snprintf(o->data_dir, sizeof(o->data_dir), "%s", ctx->data_dir);
    snprintf(o->job_dir, sizeof(o->job_dir), "%s", j->dir);
    snprintf(o->checkpoint_dir, sizeof(o->checkpoint_dir), "%s", ckpt);
    if (ctx->gpus != NULL)
        snprintf(o->simgpu_dir, sizeof(o->simgpu_dir), "%s", ctx->gpus->simgpu_dir);
    if (ctx->ledgers != NULL && j->shim)
        snprintf(o->swap_path, sizeof(o->swap_path), "%s", ctx->ledgers->swap_path);
    if (ctx->token_file != NULL)
        snprintf(o->token_file, sizeof(o->token_file), "%s", ctx->token_file);
    if (j->shim && sb->driver[0] != '\0' && ctx->shim_lib != NULL) {
        /* libtessera-cuda-overlay.so beside the shim */
        struct ts_sandbox_driver *d = &o->driver;
        snprintf(d->overlay_lib, sizeof(d->overlay_lib), "%s", ctx->shim_lib);
        char *slash = strrchr(d->overlay_lib, '/');
        snprintf(slash != NULL ? slash + 1 : d->overlay_lib,
                 sizeof(d->overlay_lib) - (size_t)(slash ? slash + 1 - d->overlay_lib : 0),
                 "libtessera-cuda-overlay.so");
        snprintf(d->real, sizeof(d->real), "%s", sb->driver);
        snprintf(d->shim, sizeof(d->shim), "%s", ctx->shim_lib);
        for (size_t i = 0; i < json_array_size(sb->overlay) && i < TS_SANDBOX_OVERLAY_MAX; i++)
            snprintf(d->overlay[d->noverlay++], TS_SANDBOX_PATH_MAX, "%s",
                     json_string_value(json_array_get(sb->overlay, i)));
        /* without them (a broken install, a test's stand-in) the job has
         * LD_PRELOAD only, as unsandboxed */
        o->has_driver = ts_files_exists(ctx->shim_lib) && ts_files_exists(d->overlay_lib);
    }
    unsigned reach[TS_GPUS_MAX], nreach = reachable_gpus(j, reach);
    for (unsigned i = 0; i < nreach && o->ngpus < 64; i++)
        o->gpus[o->ngpus++] = reach[i];
    for (int i = 0; i < sb->nmounts && i < TS_SANDBOX_MOUNTS_MAX; i++)
        o->mounts[o->nmounts++] = sb->mounts[i];
    snprintf(o->network, sizeof(o->network), "%s", sb->net_none ? "none" : "host");
}

/* launch.json's "cgroup" (new; NULL when out of memory). On simulated
 * GPUs device memory is the job's own host memory: its GPU memory is added
 * to its memory limit. */
static struct ts_cgroup_spec *cgroup_spec(const struct ts_ajob_ctx *ctx, const struct ts_ajob *j,
                                          const struct ts_desired_job *desired)
{
    uint64_t mem = (uint64_t)desired->memory_bytes;
    if (mem > 0 && ctx->gpus != NULL && ctx->gpus->simgpu_dir[0] != '\0') {
        for (size_t i = 0; i < desired->ngpus; i++) {
            const struct ts_desired_gpu *g = &desired->gpus[i];
            uint64_t lim = g->memory_limit_bytes > 0 ? (uint64_t)g->memory_limit_bytes : 0;
            uint64_t req = g->memory_bytes > 0 ? (uint64_t)g->memory_bytes : 0;
            uint64_t whole = 0;
            for (unsigned k = 0; k < ctx->gpus->count; k++)
                if (ctx->gpus->info[k].index == (unsigned)g->index)
                    whole = ctx->gpus->info[k].memory_bytes;
            mem += lim > req ? lim : req > 0 ? req : whole;
        }
    }
    unsigned reach[TS_GPUS_MAX], nreach = reachable_gpus(j, reach);
    struct ts_cgroup_spec *spec = malloc(sizeof(*spec));
    if (spec != NULL)
        ts_cgroup_spec(&ctx->sandbox->cg, j->id, j->attempt, desired->cpu, mem,
                       ctx->sandbox->pids_max, reach, nreach, spec);
    return spec;
}

/* The job's checkpoint folder, made if missing: its checkpoint_dir, else
 * DATA/checkpoints/ID; *made when it did not exist. -1 (j failed) when it
 * cannot be made. */
static int make_checkpoint_dir(const struct ts_ajob_ctx *ctx, struct ts_ajob *j,
                               const struct ts_desired_job *desired, char *ckpt, size_t len,
                               bool *made)
{
    const char *cd = desired->checkpoint_dir;
    if (cd != NULL && cd[0] != '\0')
        snprintf(ckpt, len, "%s", cd);
    else
        snprintf(ckpt, len, "%s/checkpoints/%lld", ctx->data_dir, (long long)j->id);
    *made = !ts_files_exists(ckpt);
    int rc = ts_files_mkdirs(ckpt, 0700);
    if (rc != 0) {
        set_failed(j, "could not create checkpoint_dir %s: %s", ckpt, strerror(-rc));
        return -1;
    }
    return 0;
}

/* A GPU fraction: its slots in the ledgers, handed to the shim; sandboxed,
 * the mount point of its ledgers inside the work folder, and who it is
 * beside them (the shim reads it in the sandbox). -1 (j failed) on failure. */
static int add_to_ledgers(const struct ts_ajob_ctx *ctx, struct ts_ajob *j,
                          const struct ts_desired_job *desired, bool sandboxed)
{
    char path[PATH_MAX];
    struct ts_error lerr = {0};
    if (ts_ledgers_job_add(ctx->ledgers, desired, j->dir, &lerr) != TS_OK) {
        set_failed(j, "could not set up the job's GPU memory ledger: %s", lerr.message);
        return -1;
    }
    j->shim = true;
    job_path(j, TS_SANDBOX_WORK "/shim", path, sizeof(path));
    if (sandboxed && (mkdir(path, 0755) != 0 || chmod(path, 0755) != 0)) {
        set_failed(j, "could not create %s: %s", path, strerror(errno));
        return -1;
    }
    char who[64];
    int n = snprintf(who, sizeof(who), "%lld:%d\n", (long long)j->id, j->attempt);
    job_path(j, "shim/job", path, sizeof(path));
    if (sandboxed && ts_files_write_atomic(path, who, (size_t)n, 0644) != 0) {
        set_failed(j, "could not write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* launch.json, what the supervisor starts: the command, the environment,
 * the working folder (without a working_dir, the job's own folder), and
 * sandboxed, the sandbox and the cgroup. -1 (j failed) on failure. */
static int write_launch(const struct ts_ajob_ctx *ctx, struct ts_ajob *j,
                        const struct ts_desired_job *desired, const char *ckpt,
                        const struct ts_sandbox *sb)
{
    char path[PATH_MAX], msg[256];
    char **env = ts_ajob_env_build(ctx, desired, ckpt, msg, sizeof(msg));
    if (env == NULL) {
        set_failed(j, "%s", msg);
        return -1;
    }
    struct ts_rec_launch *l = calloc(1, sizeof(*l));
    char **argv = calloc(desired->ncommand + 1, sizeof(*argv));
    int rc = -ENOMEM;
    if (l == NULL || argv == NULL)
        goto out;
    for (size_t i = 0; i < desired->ncommand; i++)
        argv[i] = (char *)desired->command[i]; /* borrowed: only written */
    const char *wd = desired->working_dir;
    l->argv = argv;
    l->env = env;
    snprintf(l->working_dir, sizeof(l->working_dir), "%s",
             wd != NULL && wd[0] != '\0' ? wd : j->dir);
    if (sb != NULL) {
        l->has_sandbox = true;
        sandbox_spec(ctx, j, ckpt, &l->sandbox);
        if (sb->cg.version > 0) {
            if ((j->cgroup = cgroup_spec(ctx, j, desired)) == NULL)
                goto out;
            l->has_cgroup = true;
            l->cgroup = *j->cgroup;
        }
    }
    job_path(j, "launch.json", path, sizeof(path));
    rc = ts_rec_launch_write(path, l);
out:
    ts_ajob_env_free(env);
    free(argv);
    free(l);
    if (rc != 0) {
        job_path(j, "launch.json", path, sizeof(path));
        set_failed(j, "could not write %s: %s", path, strerror(-rc));
        return -1;
    }
    return 0;
}

struct ts_ajob *ts_ajob_start(const struct ts_ajob_ctx *ctx, const struct ts_desired_job *desired,
                              struct ts_error *err)
{
    struct ts_ajob *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    j->id = desired->id;
    j->attempt = desired->attempt;
    snprintf(j->dir, sizeof(j->dir), "%s/jobs/%lld-%d", ctx->data_dir, (long long)j->id,
             j->attempt);
    read_spec(j, desired);
    char path[PATH_MAX], msg[256];

    if (mkdir(j->dir, 0700) != 0 || chmod(j->dir, 0700) != 0) {
        int e = errno;
        snprintf(j->message, sizeof(j->message), "could not create %.300s: %s", j->dir,
                 strerror(e));
        j->phase = TS_AJOB_FAILED;
        if (e == EEXIST) /* never overwrite a folder of a job that may run */
            return j;
        set_failed(j, "could not create %s: %s", j->dir, strerror(e));
        return j;
    }
    job_path(j, "spec.json", path, sizeof(path));
    json_t *spec = ts_wire_desired_job_encode(desired);
    int rc = spec != NULL ? ts_files_write_json(path, spec, 0600) : -ENOMEM;
    json_decref(spec);
    if (rc < 0) {
        set_failed(j, "could not write %s: %s", path, strerror(-rc));
        return j;
    }

    size_t ncmd = desired->ncommand;
    for (size_t i = 0; i < ncmd; i++)
        if (desired->command[i][0] == '\0') {
            ncmd = 0;
            break;
        }
    if (ncmd == 0) {
        set_failed(j, "the job has no command: command must be a non-empty array of strings");
        return j;
    }
    char ckpt[PATH_MAX];
    const char *cd = desired->checkpoint_dir;
    bool ckpt_new;
    if (make_checkpoint_dir(ctx, j, desired, ckpt, sizeof(ckpt), &ckpt_new) != 0)
        return j;
    const struct ts_sandbox *sb = ctx->sandbox != NULL && ctx->sandbox->on ? ctx->sandbox : NULL;
    if (ctx->sandbox != NULL &&
        ts_sandbox_job_user(ctx->sandbox, desired->job_user, desired->allow_root, &j->user, msg,
                            sizeof(msg)) != 0) {
        set_failed(j, "%s", msg);
        return j;
    }
    /* sandboxed, the job writes only its work folder (which it sees at its
     * folder's path) and its checkpoints */
    if (sb != NULL && (ckpt_new || cd == NULL || cd[0] == '\0') &&
        chown(ckpt, j->user.uid, j->user.gid) != 0) {
        set_failed(j, "could not give checkpoint_dir %s to %s: %s", ckpt, j->user.name,
                   strerror(errno));
        return j;
    }
    if (sb != NULL) {
        job_path(j, TS_SANDBOX_WORK, path, sizeof(path));
        if (mkdir(path, 0700) != 0 || chmod(path, 0700) != 0 ||
            chown(path, j->user.uid, j->user.gid) != 0) {
            set_failed(j, "could not create %s for %s: %s", path, j->user.name, strerror(errno));
            return j;
        }
    }
    if (ctx->ledgers != NULL && ts_ledgers_fractional(ctx->ledgers, desired) &&
        add_to_ledgers(ctx, j, desired, sb != NULL) != 0)
        return j;
    if (write_launch(ctx, j, desired, ckpt, sb) != 0)
        return j;
    spawn(j, ctx);
    if (j->phase == TS_AJOB_RUNNING || (j->phase == TS_AJOB_EXITED && j->pid > 0))
        ts_log_info("job started job=%lld attempt=%d pid=%d", (long long)j->id, j->attempt,
                    (int)j->pid);
    else if (j->phase == TS_AJOB_FAILED)
        ts_log_warn("job could not start: %s job=%lld attempt=%d", j->message, (long long)j->id,
                    j->attempt);
    return j;
}

/* ---- adoption ------------------------------------------------------------ */

/* The job's group, from its launch.json (none when it has no "cgroup");
 * a damaged launch.json is said and taken as naming none, as it always
 * was. */
static void load_cgroup(struct ts_ajob *j)
{
    char path[PATH_MAX];
    job_path(j, "launch.json", path, sizeof(path));
    struct ts_rec_launch *l = calloc(1, sizeof(*l));
    struct ts_error err = {0};
    enum ts_err e = l != NULL ? ts_rec_launch_read(path, l, &err) : TS_ERR_NOMEM;
    if (e != TS_OK && e != TS_ERR_NOT_FOUND && e != TS_ERR_NOMEM)
        ts_log_warn("%s; the job is taken as having no cgroup job=%lld attempt=%d", err.message,
                    (long long)j->id, j->attempt);
    if (e == TS_OK && l->has_cgroup && (j->cgroup = malloc(sizeof(*j->cgroup))) != NULL)
        *j->cgroup = l->cgroup;
    if (e == TS_OK)
        ts_rec_launch_free(l);
    free(l);
}

struct ts_ajob *ts_ajob_load(const char *dir)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/spec.json", dir);
    json_t *v = ts_files_read_json(path);
    struct ts_arena *ar = v != NULL ? ts_arena_new() : NULL;
    struct ts_desired_job spec;
    struct ts_error err = {0};
    struct ts_ajob *j = NULL;
    if (ar != NULL && ts_wire_desired_job_decode(v, "", ar, &spec, &err) == TS_OK)
        j = calloc(1, sizeof(*j));
    else if (ar != NULL)
        ts_log_warn("could not read %s: %s", path, err.message);
    json_decref(v);
    if (j == NULL) {
        ts_arena_free(ar);
        return NULL;
    }
    j->id = spec.id;
    j->attempt = spec.attempt;
    snprintf(j->dir, sizeof(j->dir), "%s", dir);
    read_spec(j, &spec);
    ts_arena_free(ar);

    snprintf(path, sizeof(path), "%s/log.offset", dir);
    char *off = ts_files_read(path, 64, NULL);
    if (off != NULL)
        j->log_acked = strtoll(off, NULL, 10);
    free(off);

    snprintf(path, sizeof(path), "%s/evicted", dir);
    char *ev = ts_files_read(path, sizeof(j->evict_msg) - 1, NULL);
    if (ev != NULL) {
        j->evicted = true;
        snprintf(j->evict_msg, sizeof(j->evict_msg), "%s", ev);
        free(ev);
    }

    load_cgroup(j);

    struct ts_rec_stop stop;
    snprintf(path, sizeof(path), "%s/stop.json", dir);
    if (rec_ok(j, REC_STOP, ts_rec_stop_read(path, &stop, &err), &err)) {
        j->stopping = true;
        j->stop_deadline_ms = stop.deadline_ms;
        j->killed = stop.killed;
    }

    j->phase = TS_AJOB_STARTING;
    j->starting_deadline_ms = ts_ajob_now_ms() + TS_AJOB_START_TIMEOUT_MS;
    bool started = read_pids(j);
    if (read_status(j))
        return j;
    if (started) {
        j->phase = TS_AJOB_RUNNING;
        ts_ajob_poll(j, ts_ajob_now_ms());
    }
    /* else: an agent stopped while starting it; the supervisor may still
     * write job.json, or the start deadline makes it failed_to_start */
    return j;
}

void ts_ajob_save_log_offset(const struct ts_ajob *j)
{
    char path[PATH_MAX], text[32];
    job_path(j, "log.offset", path, sizeof(path));
    int n = snprintf(text, sizeof(text), "%lld\n", (long long)j->log_acked);
    ts_files_write_quick(path, text, (size_t)n, 0600); /* lost: the server says where */
}

void ts_ajob_evict(struct ts_ajob *j, int grace_seconds, const char *msg)
{
    if (ts_ajob_final(j))
        return;
    char path[PATH_MAX];
    j->evicted = true;
    if (msg != j->evict_msg)
        snprintf(j->evict_msg, sizeof(j->evict_msg), "%s", msg);
    job_path(j, "evicted", path, sizeof(path));
    ts_files_write_atomic(path, j->evict_msg, strlen(j->evict_msg), 0600);
    ts_ajob_stop(j, grace_seconds, "ended to make room for another job's GPU memory");
}

void ts_ajob_mark_reported(const struct ts_ajob *j)
{
    char path[PATH_MAX];
    job_path(j, "reported", path, sizeof(path));
    ts_files_write_atomic(path, "", 0, 0600);
}
