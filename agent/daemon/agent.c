/*
 * agent.c - tessera-agent's main loop: set up (data folder, lock, GPUs,
 * adoption of the jobs a previous agent left running), then until SIGTERM or
 * SIGINT: take new desired states and reconcile, watch jobs (status files,
 * liveness, stop deadlines), reap supervisors, sample GPUs and jobs once a
 * second, forget jobs the server has fully, and remove their folders after
 * --keep-finished. Stopping the agent leaves every job running.
 */
#include "agent/daemon/agent.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/daemon/broker.h"
#include "agent/daemon/driver.h"
#include "agent/daemon/nodesched.h"
#include "agent/daemon/proc.h"
#include "agent/daemon/reconcile.h"
#include "agent/daemon/upstream.h"
#include "api/array.h"
#include "api/clock.h"
#include "api/files.h"
#include "api/log.h"
#include "api/sdnotify.h"
#include "api/tlsfiles.h"
#include "api/units.h"

#define TICK_MS 100
#define SAMPLE_MS 1000
#define GC_MS 60000

/* ---- setup ----------------------------------------------------------------- */

static int check_config(const struct ts_agent_config *c)
{
    const char *missing = c->node == NULL           ? "--node"
                          : c->data_dir == NULL     ? "--data-dir"
                          : c->desired_file != NULL ? NULL
                          : c->server == NULL       ? "--server"
                          : c->token_file == NULL   ? "--token-file"
                                                    : NULL;
    if (missing != NULL) {
        fprintf(stderr, "tessera-agent: %s is required\n", missing);
        return -1;
    }
    struct ts_error err;
    ts_error_clear(&err);
    if (ts_tlsfiles_check_client(c->ca, c->cert, c->key, &err) != TS_OK) {
        fprintf(stderr, "tessera-agent: %s%s%s\n", err.message, err.hint[0] ? "; " : "", err.hint);
        return -1;
    }
    if (!ts_name_valid(c->node)) {
        fprintf(stderr,
                "tessera-agent: invalid value for --node: \"%.64s\": expected a name of "
                "lower-case letters, digits and '-' (at most 63)\n",
                c->node);
        return -1;
    }
    if (c->labels != NULL && c->labels[0] != '\0') {
        char *copy = strdup(c->labels), *save = NULL;
        int bad = copy == NULL;
        for (char *kv = copy ? strtok_r(copy, ",", &save) : NULL; kv != NULL && !bad;
             kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            bad = eq == NULL || eq == kv;
        }
        free(copy);
        if (bad) {
            fprintf(stderr,
                    "tessera-agent: invalid value for --labels: \"%.128s\": expected "
                    "KEY=VALUE,...\n",
                    c->labels);
            return -1;
        }
    }
    return 0;
}

/* PATH beside the agent binary: ../lib/tessera/NAME where it exists (an
 * installed tree: packaging/), else ../lib/NAME (a build folder's bin/ and
 * lib/); "" when the path does not fit, FALLBACK without /proc. */
static void beside_exe(const char *name, const char *fallback, char *out, size_t len)
{
    char exe[PATH_MAX], guess[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        snprintf(out, len, "%s", fallback);
        return;
    }
    exe[n] = '\0';
    const char *dir = dirname(exe);
    static const char *const layouts[] = {"%s/../lib/tessera/%s", "%s/../lib/%s"};
    for (size_t i = 0; i < TS_ARRAY_LEN(layouts); i++) {
        snprintf(guess, sizeof(guess), layouts[i], dir, name);
        char real[PATH_MAX];
        if (realpath(guess, real) != NULL && strlen(real) < len) {
            snprintf(out, len, "%s", real);
            return;
        }
    }
    if (snprintf(out, len, "%s", guess) >= (int)len) /* the last layout, for messages */
        out[0] = '\0';
}

/* simgpu/ beside the agent binary, unless --simgpu-lib-dir */
static void find_lib_dir(struct ts_agent *a)
{
    if (a->cfg.simgpu_lib_dir != NULL)
        snprintf(a->lib_dir, sizeof(a->lib_dir), "%s", a->cfg.simgpu_lib_dir);
    else
        beside_exe("simgpu", "lib/simgpu", a->lib_dir, sizeof(a->lib_dir));
}

/* libtessera-cuda.so beside the agent binary, unless --shim-lib */
static void find_shim_lib(struct ts_agent *a)
{
    if (a->cfg.shim_lib != NULL)
        snprintf(a->shim_lib, sizeof(a->shim_lib), "%s", a->cfg.shim_lib);
    else
        beside_exe("libtessera-cuda.so", "libtessera-cuda.so", a->shim_lib, sizeof(a->shim_lib));
}

/* Jobs on GPUs need a CUDA driver the shim can use: refuse to start
 * without one rather than fail every job (driver.h). */
static int check_driver(struct ts_agent *a)
{
    if (strcmp(a->gpus->ops->name, "none") == 0)
        return 0;
    struct ts_driver d;
    struct ts_error err = {0};
    if (ts_driver_check(a->gpus, &d, &err) != TS_OK) {
        ts_log_error("%s%s%s", err.message, err.hint[0] ? "; " : "", err.hint);
        return -1;
    }
    ts_log_info("cuda driver path=%s cuda=%d.%d driver=%s", d.path, d.cuda_version / 1000,
                d.cuda_version % 1000 / 10,
                a->gpus->driver_version[0] ? a->gpus->driver_version : "unknown");
    return 0;
}

static int take_lock(struct ts_agent *a)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/agent.lock", a->cfg.data_dir);
    a->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (a->lock_fd < 0) {
        ts_log_error("could not open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(a->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        ts_log_error("another tessera-agent uses %s", a->cfg.data_dir);
        return -1;
    }
    char pid[32];
    int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(a->lock_fd, 0) != 0 || write(a->lock_fd, pid, (size_t)n) != n)
        ts_log_warn("could not write %s", path);
    return 0;
}

/* Take over the jobs of an earlier agent: every folder in DATA/jobs that is
 * not marked reported. Running ones are checked to be the same processes
 * (pid and start time) and are never started again. */
static void adopt(struct ts_agent *a)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/jobs", a->cfg.data_dir);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[PATH_MAX], marker[PATH_MAX + 16];
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
            continue;
        snprintf(marker, sizeof(marker), "%s/reported", path);
        if (ts_files_exists(marker))
            continue;
        struct ts_ajob *j = ts_ajob_load(path);
        if (j == NULL) {
            ts_log_warn("not a job folder, ignored: %s", path);
            continue;
        }
        j->shim = j->ngpus > 0 && ts_ledgers_job_has(&a->ledgers, j->id, j->attempt, j->gpus[0]);
        ts_events_load(a->events, j->id, j->attempt);
        ts_log_info("adopted job job=%lld attempt=%d state=%s pid=%d", (long long)j->id, j->attempt,
                    ts_ajob_state_name(j) ? ts_ajob_state_name(j) : "starting", (int)j->pid);
        j->next = a->jobtab.jobs;
        a->jobtab.jobs = j;
    }
    closedir(d);
}

/* The job sandbox: decided once; jobs' paths made absolute (they are mount
 * points in its namespace). */
/* A sandboxed job reaches its folder through the data folder's parents, as
 * its own user: one that others cannot search (mktemp -d makes 0700) fails
 * every job with "could not change to working_dir". Said once, at start.
 * Under the folders a sandbox mounts afresh (/tmp, ...) the parents are the
 * sandbox's own, made for the job's binds. */
static void warn_unreachable_parents(const char *data_dir)
{
    static const char *const fresh[] = {"/tmp/", "/var/tmp/", "/dev/shm/", "/run/"};
    for (size_t i = 0; i < TS_ARRAY_LEN(fresh); i++)
        if (strncmp(data_dir, fresh[i], strlen(fresh[i])) == 0)
            return;
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s", data_dir);
    for (char *slash = strrchr(p, '/'); slash != NULL && slash != p; slash = strrchr(p, '/')) {
        *slash = '\0';
        struct stat st;
        if (stat(p, &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
            ts_log_warn("sandboxed jobs cannot reach their folders: %s (a parent of the data "
                        "folder) is mode %04o, not searchable by other users; every job will "
                        "fail to start (chmod o+x %s, or another --data-dir)",
                        p, (unsigned)(st.st_mode & 07777), p);
            return;
        }
    }
}

static int setup_sandbox(struct ts_agent *a)
{
    struct ts_sandbox_opts o = {.mode = a->cfg.sandbox,
                                .user = a->cfg.job_user,
                                .mounts = a->cfg.job_mount,
                                .network = a->cfg.job_network,
                                .data_dir = a->cfg.data_dir,
                                .secrets = {a->cfg.token_file, a->cfg.key, NULL}};
    char msg[512];
    if (ts_sandbox_setup(&a->sandbox, &o, msg, sizeof(msg)) != 0) {
        ts_log_error("%s", msg);
        return -1;
    }
    if (!a->sandbox.on) {
        ts_log_warn("jobs are not sandboxed (%s): they run as uid %d in the agent's namespaces, "
                    "without cgroup limits, and can bypass the GPU limit by loading the driver "
                    "themselves",
                    a->sandbox.why_off, (int)geteuid());
        if (a->sandbox.net_none)
            ts_log_warn("--job-network none is not enforced: jobs use the node's network");
        return 0;
    }
    char **paths[] = {&a->cfg.data_dir, &a->cfg.token_file};
    for (size_t i = 0; i < TS_ARRAY_LEN(paths); i++) {
        char *abs = *paths[i] != NULL ? realpath(*paths[i], NULL) : NULL;
        if (abs != NULL) {
            free(*paths[i]);
            *paths[i] = abs;
        }
    }
    warn_unreachable_parents(a->cfg.data_dir);
    a->sandbox.pids_max = a->cfg.job_pids;
    ts_cgroup_detect(&a->sandbox.cg, a->cfg.data_dir);
    if (a->sandbox.cg.version == 0)
        ts_log_warn("jobs run without cgroup limits: %s", a->sandbox.cg.why);
    else if (a->sandbox.cg.note[0] != '\0')
        ts_log_warn("jobs' cgroups are not below the agent's service: %s", a->sandbox.cg.note);
    ts_log_info("jobs are sandboxed user=%s uid=%d gid=%d cgroup=v%d base=%s", a->sandbox.user,
                (int)a->sandbox.uid, (int)a->sandbox.gid, a->sandbox.cg.version,
                a->sandbox.cg.base);
    return 0;
}

/* Sandboxed jobs open the ledgers, simulated GPUs and the swap reserve of
 * their GPUs as their own user, through the mounts of their own namespace:
 * the files are open to that user, the data folder to root only. */
static void open_shared_files(struct ts_agent *a)
{
    if (!a->sandbox.on)
        return;
    char path[PATH_MAX + 32];
    if (chmod(a->cfg.data_dir, 0700) != 0)
        ts_log_warn("could not close %s to other users: %s", a->cfg.data_dir, strerror(errno));
    if (a->gpus->simgpu_dir[0] != '\0')
        chmod(a->gpus->simgpu_dir, 0755); /* a job's simgpu reads the folder */
    for (unsigned i = 0; i < a->gpus->count; i++) {
        snprintf(path, sizeof(path), "%s/gpu%u.ledger", a->ledgers.dir, a->gpus->info[i].index);
        if (chmod(path, 0666) != 0 && errno != ENOENT)
            ts_log_warn("could not open %s to jobs: %s", path, strerror(errno));
        if (a->gpus->simgpu_dir[0] == '\0')
            continue;
        snprintf(path, sizeof(path), "%s/gpu%u.state", a->gpus->simgpu_dir, a->gpus->info[i].index);
        if (chmod(path, 0666) != 0)
            ts_log_warn("could not open %s to jobs: %s", path, strerror(errno));
    }
    if (a->ledgers.swap_path[0] != '\0' && chown(a->ledgers.swap_path, a->sandbox.uid, 0) != 0)
        ts_log_warn("could not give the swap reserve to %s: %s", a->sandbox.user, strerror(errno));
}

/* ---- the loop -------------------------------------------------------------- */

static void reap(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* Per job, what one sample found. */
struct job_sample {
    uint64_t mem;
    double util[TS_GPUS_MAX];
    bool any_util;
};

static void sample(struct ts_agent *a)
{
    size_t njobs = 0;
    for (struct ts_ajob *j = a->jobtab.jobs; j != NULL; j = j->next)
        njobs++;
    struct job_sample *js = calloc(njobs + 1, sizeof(*js));
    if (js == NULL)
        return;
    struct ts_gpu_sample gs[TS_GPUS_MAX];
    bool gok[TS_GPUS_MAX] = {false}, procs_ok = a->gpus->count > 0;
    struct ts_gpu_proc procs[TS_GPU_PROCS_MAX];
    for (unsigned i = 0; i < a->gpus->count; i++) {
        struct ts_error err;
        gok[i] = a->gpus->ops->sample(a->gpus, i, &gs[i], &err) == TS_OK;
        if (!gok[i])
            ts_log_debug("%s", err.message);
        int n = a->gpus->ops->procs(a->gpus, i, procs, TS_GPU_PROCS_MAX);
        if (n < 0) {
            procs_ok = false;
            continue;
        }
        for (int p = 0; p < n; p++) {
            struct ts_proc_stat st;
            if (ts_proc_stat(procs[p].pid, &st) != 0)
                continue;
            size_t k = 0;
            for (struct ts_ajob *j = a->jobtab.jobs; j != NULL; j = j->next, k++) {
                if (j->phase != TS_AJOB_RUNNING || j->pid != st.session)
                    continue;
                js[k].mem += procs[p].used_bytes;
                if (procs[p].has_util) {
                    js[k].util[i] += procs[p].utilization;
                    js[k].any_util = true;
                }
            }
        }
    }
    pthread_mutex_lock(&a->mu);
    for (unsigned i = 0; i < a->gpus->count; i++) {
        if (!gok[i])
            continue;
        a->gpu_util_sum[i] += gs[i].utilization;
        a->gpu_util_n[i]++;
        a->gpu_mem[i] = gs[i].memory_used_bytes;
        a->gpu_sampled[i] = true;
    }
    size_t k = 0;
    for (struct ts_ajob *j = a->jobtab.jobs; j != NULL; j = j->next, k++) {
        if (j->phase != TS_AJOB_RUNNING || !procs_ok)
            continue;
        j->mem_used = js[k].mem;
        j->has_usage = true;
        if (!js[k].any_util)
            continue;
        /* the mean over the job's GPUs of its processes' share of each */
        double sum = 0;
        unsigned n = 0;
        for (unsigned g = 0; g < j->ngpus; g++) {
            for (unsigned i = 0; i < a->gpus->count; i++)
                if (a->gpus->info[i].index == j->gpus[g])
                    sum += js[k].util[i] > 1 ? 1 : js[k].util[i];
            n++;
        }
        if (n == 0) /* no GPU assigned, yet it uses some */
            for (unsigned i = 0; i < a->gpus->count; i++)
                if (js[k].util[i] > 0) {
                    sum += js[k].util[i] > 1 ? 1 : js[k].util[i];
                    n++;
                }
        j->util_sum += n > 0 ? sum / n : 0;
        j->util_n++;
    }
    pthread_mutex_unlock(&a->mu);
    free(js);
}

/* Jobs the server has entirely (final state and output) and no longer
 * names: marked reported and forgotten. */
static void forget_done(struct ts_agent *a)
{
    if (a->desired == NULL)
        return;
    const struct ts_desired *desired = &a->desired->d;
    pthread_mutex_lock(&a->mu);
    for (struct ts_ajob **pp = &a->jobtab.jobs; *pp != NULL;) {
        struct ts_ajob *j = *pp;
        bool named = false;
        for (size_t i = 0; i < desired->njobs; i++)
            if (desired->jobs[i].id == j->id && desired->jobs[i].attempt == j->attempt)
                named = true;
        if (ts_ajob_final(j) && j->final_reported && j->log_done && !named) {
            ts_ajob_mark_reported(j);
            ts_log_debug("job fully reported job=%lld attempt=%d", (long long)j->id, j->attempt);
            *pp = j->next;
            ts_ajob_free(j);
        } else {
            pp = &j->next;
        }
    }
    pthread_mutex_unlock(&a->mu);
}

/* Folders of reported jobs older than --keep-finished. */
static void remove_old(struct ts_agent *a)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/jobs", a->cfg.data_dir);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[PATH_MAX], marker[PATH_MAX + 16];
        struct stat st;
        if (e->d_name[0] == '.' ||
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
            continue;
        snprintf(marker, sizeof(marker), "%s/reported", path);
        if (stat(marker, &st) != 0 || now - st.st_mtime < a->cfg.keep_finished)
            continue;
        int rc = ts_files_remove_tree(path);
        if (rc != 0)
            ts_log_warn("could not remove %s: %s", path, strerror(-rc));
    }
    closedir(d);
}

/* Jobs the broker could not suspend are stopped, and those it ends to make
 * room; the slots of jobs that are over are freed once their processes are
 * gone. */
static void after_jobs(struct ts_agent *a)
{
    for (struct ts_ajob *j = a->jobtab.jobs; j != NULL; j = j->next) {
        pthread_mutex_lock(&a->mu);
        bool failed = j->suspend_failed && !j->stopping && !ts_ajob_final(j);
        if (j->evict_req && !j->stopping) {
            if (j->suspended && j->pid > 0 && !ts_ajob_final(j))
                kill(-j->pid, SIGCONT);
            ts_ajob_evict(j, j->evict_grace, j->evict_msg);
            a->report_now = true;
            pthread_cond_broadcast(&a->cond);
        }
        j->evict_req = false;
        pthread_mutex_unlock(&a->mu);
        if (failed)
            ts_reconcile_stop(a, j, j->grace_seconds, "could not be suspended");
        if (j->shim && !j->slots_freed && ts_ajob_final(j)) {
            /* its GPUs and its logical ones: a job some of whose processes
             * a re-pack moved holds a slot in both (repack.h) */
            unsigned g[2 * TS_GPUS_MAX], n = 0;
            for (unsigned k = 0; k < j->ngpus; k++) {
                g[n++] = j->gpus[k];
                if (j->logical[k] != j->gpus[k])
                    g[n++] = j->logical[k];
            }
            j->slots_freed = ts_ledgers_job_remove(&a->ledgers, j->id, j->attempt, g, n);
        }
    }
}

static void loop(struct ts_agent *a, int sigfd)
{
    int64_t next_sample = 0, next_gc = 0;
    while (!atomic_load(&a->stop)) {
        struct pollfd p[2] = {{.fd = sigfd, .events = POLLIN},
                              {.fd = a->jobtab.wake_fd, .events = POLLIN}};
        if (poll(p, 2, TICK_MS) < 0 && errno != EINTR) {
            ts_log_error("poll: %s", strerror(errno));
            break;
        }
        struct signalfd_siginfo si;
        while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
            if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
                ts_log_info("stopping on %s; jobs keep running",
                            si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
                ts_sdnotify("STOPPING=1");
                atomic_store(&a->stop, true);
            }
        }
        uint64_t v;
        while (read(a->jobtab.wake_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
            ;
        if (atomic_load(&a->stop))
            break;
        reap();

        bool again = false;
        pthread_mutex_lock(&a->mu);
        struct ts_agent_desired *d = a->desired_new;
        a->desired_new = NULL;
        pthread_mutex_unlock(&a->mu);
        if (d != NULL) {
            ts_agent_desired_free(a->desired);
            a->desired = d;
            again = true;
        }
        bool changed = false;
        int64_t now = ts_ajob_now_ms();
        pthread_mutex_lock(&a->mu);
        for (struct ts_ajob *j = a->jobtab.jobs; j != NULL; j = j->next) {
            if (ts_ajob_poll(j, now)) {
                changed = true;
                if (j->phase == TS_AJOB_EXITED && j->signal > 0)
                    ts_log_info("job ended job=%lld attempt=%d signal=%d", (long long)j->id,
                                j->attempt, j->signal);
                else if (j->phase == TS_AJOB_EXITED)
                    ts_log_info("job ended job=%lld attempt=%d exit_code=%d", (long long)j->id,
                                j->attempt, j->exit_code);
            }
        }
        if (changed) {
            a->report_now = true;
            pthread_cond_broadcast(&a->cond);
        }
        pthread_mutex_unlock(&a->mu);
        if (again || changed || a->repack_pending)
            ts_reconcile(a);
        after_jobs(a);
        if (ts_now_ms() >= next_sample) {
            next_sample = ts_now_ms() + SAMPLE_MS;
            sample(a);
        }
        forget_done(a);
        if (ts_now_ms() >= next_gc) {
            next_gc = ts_now_ms() + GC_MS;
            remove_old(a);
        }
    }
}

/* Everything before the jobs are adopted: the configuration checked, the
 * data folder locked, the sandbox, the GPUs and their driver, the ledgers,
 * the events; -1 (said in the log) when the agent cannot run. */
static int open_node(struct ts_agent *a)
{
    if (check_config(&a->cfg) != 0)
        return -1;
    a->file_mode = a->cfg.desired_file != NULL;
    char jobs[PATH_MAX];
    snprintf(jobs, sizeof(jobs), "%s/jobs", a->cfg.data_dir);
    int rc = ts_files_mkdirs(jobs, 0700);
    if (rc != 0) {
        ts_log_error("could not create %s: %s", jobs, strerror(-rc));
        return -1;
    }
    if (take_lock(a) != 0)
        return -1;
    if (setup_sandbox(a) != 0)
        return -1;
    find_lib_dir(a);
    struct ts_error err = {0};
    if (ts_gpus_open(a->cfg.gpus, a->cfg.data_dir, a->lib_dir, &a->gpus, &err) != TS_OK) {
        ts_log_error("%s%s%s", err.message, err.hint[0] ? "; " : "", err.hint);
        return -1;
    }
    if (check_driver(a) != 0)
        return -1;
    for (unsigned i = 0; i < a->gpus->count; i++) {
        if ((uint64_t)a->cfg.gpu_reserve >= a->gpus->info[i].memory_bytes) {
            ts_log_error("--gpu-reserve must be below the memory of every GPU: %lld >= %llu "
                         "(GPU %u)",
                         (long long)a->cfg.gpu_reserve,
                         (unsigned long long)a->gpus->info[i].memory_bytes, a->gpus->info[i].index);
            return -1;
        }
    }
    for (unsigned i = 0; i < a->gpus->count; i++)
        ts_log_info("gpu index=%u uuid=%s model=\"%s\" memory_bytes=%llu", a->gpus->info[i].index,
                    a->gpus->info[i].uuid, a->gpus->info[i].model,
                    (unsigned long long)a->gpus->info[i].memory_bytes);
    find_shim_lib(a);
    if (ts_ledgers_open(&a->ledgers, a->gpus, a->cfg.data_dir, (uint64_t)a->cfg.gpu_reserve,
                        ts_ledgers_collision_parse(a->cfg.collision),
                        (uint32_t)a->cfg.collision_wait * 1000u, (uint64_t)a->cfg.swap_reserve,
                        a->gpus->simgpu_dir[0] == '\0', &err) != TS_OK) {
        ts_log_error("%s", err.message);
        return -1;
    }
    open_shared_files(a);
    if (a->sandbox.on) {
        ts_sandbox_drivers(&a->sandbox, a->gpus->simgpu_dir[0] != '\0' ? a->lib_dir : NULL);
        ts_log_info("jobs under the shim find it as every libcuda: driver=%s overlays=%zu",
                    a->sandbox.driver[0] ? a->sandbox.driver : "none",
                    json_array_size(a->sandbox.overlay));
    }
    a->events = ts_events_new(a->cfg.data_dir);
    if (a->events == NULL) {
        ts_log_error("out of memory");
        return -1;
    }
    ts_log_info("fractions collision=%s collision_wait=%llds swap_reserve=%llu swap_path=%s "
                "shim=%s",
                a->cfg.collision, (long long)a->cfg.collision_wait,
                (unsigned long long)a->ledgers.swap_bytes,
                a->ledgers.swap_path[0] ? a->ledgers.swap_path : "none", a->shim_lib);
    a->spread = ts_nodesched_spreads(a->cfg.node_scheduler, a->ledgers.swap_bytes);
    ts_log_info("node scheduler mode=%s spread=%s", a->cfg.node_scheduler,
                a->spread ? "yes" : "no");
    a->ctx = (struct ts_ajob_ctx){.data_dir = a->cfg.data_dir,
                                  .node = a->cfg.node,
                                  .gpus = a->gpus,
                                  .supervisor_exe = "/proc/self/exe",
                                  .ledgers = &a->ledgers,
                                  .shim_lib = a->shim_lib,
                                  .sandbox = &a->sandbox,
                                  .token_file = a->cfg.token_file};
    if (a->file_mode) {
        /* what registration would send, for tests and debugging */
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/node.json", a->cfg.data_dir);
        json_t *reg = ts_upstream_registration(a);
        if (reg != NULL)
            ts_files_write_json(path, reg, 0600);
        json_decref(reg);
    }
    return 0;
}

/* Stop the threads, free the jobs and close what open_node and the loop
 * opened. */
static void close_node(struct ts_agent *a, int sigfd)
{
    atomic_store(&a->stop, true);
    ts_broker_join(a);
    ts_upstream_join(a);
    while (a->jobtab.jobs != NULL) {
        struct ts_ajob *j = a->jobtab.jobs;
        a->jobtab.jobs = j->next;
        ts_ajob_free(j);
    }
    ts_agent_desired_free(a->desired);
    ts_agent_desired_free(a->desired_new);
    ts_ledgers_close(&a->ledgers);
    if (a->sandbox.on)
        ts_cgroup_release(&a->sandbox.cg);
    ts_events_free(a->events);
    ts_gpus_close(a->gpus);
    if (sigfd >= 0)
        close(sigfd);
    if (a->jobtab.wake_fd >= 0)
        close(a->jobtab.wake_fd);
    if (a->lock_fd >= 0)
        close(a->lock_fd);
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->mu);
}

int ts_agent_run(struct ts_agent *a)
{
    int status = 1, sigfd = -1;
    /* Blocked before anything starts a thread: the GPU driver and NVML
     * start theirs when loaded, and a thread that had them unblocked took
     * SIGTERM with its default action, ending the agent without its clean
     * stop (seen on an H200). The loop reads them from a signalfd. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    a->lock_fd = -1;
    a->jobtab.wake_fd = -1;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cond, NULL);
    if (open_node(a) != 0)
        goto out;
    adopt(a);

    signal(SIGPIPE, SIG_IGN);
    sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    a->jobtab.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (sigfd < 0 || a->jobtab.wake_fd < 0) {
        ts_log_error("could not set up signals: %s", strerror(errno));
        goto out;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    srandom((unsigned)getpid() ^ (unsigned)time(NULL));
    if (ts_upstream_start(a) != 0 || ts_broker_start(a) != 0) {
        ts_log_error("could not start threads");
        goto out;
    }
    ts_log_info("agent running node=%s data_dir=%s gpus=%s jobs_adopted=%d", a->cfg.node,
                a->cfg.data_dir, a->gpus->ops->name, a->jobtab.jobs != NULL);
    loop(a, sigfd);
    status = atomic_load(&a->failed) ? 1 : 0;
out:
    close_node(a, sigfd);
    return status;
}
