/*
 * sandbox.c - the job sandbox (sandbox.h): the agent's decision at start,
 * and what the job's init does as root before it becomes the job's user.
 *
 * Kernel interfaces directly (unshare, mount, mount_setattr, prctl,
 * setresuid): bubblewrap would do the mounts, but not the pid service, the
 * cgroup or the driver overlay, and would add a process and a dependency
 * between the supervisor and the job.
 */
#include "agent/daemon/sandbox.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <pwd.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/ledger/hostpid.h"
#include "api/files.h"

#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif

static int fail(char *msg, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *msg, size_t len, const char *fmt, ...)
{
    int e = errno;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < len && e != 0)
        snprintf(msg + n, len - (size_t)n, ": %s", strerror(e));
    return -1;
}

/* ---- the agent, at start ------------------------------------------------ */

/* Whether a child can make the namespaces and mounts a job gets (a
 * container without CAP_SYS_ADMIN, or whose seccomp filter refuses
 * mount_setattr, cannot). */
static bool namespaces_work(int more, char *why, size_t len)
{
    pid_t pid = fork();
    if (pid < 0)
        return fail(why, len, "could not fork"), false;
    if (pid == 0) {
        struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
        if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | more) != 0 ||
            mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0 ||
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") != 0 ||
            syscall(SYS_mount_setattr, -1, "/", AT_RECURSIVE, &ro, sizeof(ro)) != 0)
            _exit(10 + errno % 100);
        _exit(0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return true;
    errno = WIFEXITED(st) && WEXITSTATUS(st) >= 10 ? WEXITSTATUS(st) - 10 : 0;
    fail(why, len, "making mount, PID and IPC namespaces and a read-only mount failed");
    return false;
}

int ts_sandbox_setup(struct ts_sandbox *sb, const struct ts_sandbox_opts *o, char *msg,
                     size_t msglen)
{
    memset(sb, 0, sizeof(*sb));
    errno = 0;
    if (o->network != NULL && strcmp(o->network, "none") != 0 && strcmp(o->network, "host") != 0)
        return fail(msg, msglen, "invalid value for --job-network: \"%.32s\": host or none",
                    o->network);
    sb->net_none = o->network != NULL && strcmp(o->network, "none") == 0;
    if (ts_sandbox_mounts_parse(sb, o, msg, msglen) != 0)
        return -1;
    if (o->mode != NULL && strcmp(o->mode, "off") == 0) {
        snprintf(sb->why_off, sizeof(sb->why_off), "--sandbox off");
        return 0;
    }
    const char *name = o->user != NULL && o->user[0] != '\0' ? o->user : "nobody";
    errno = 0;
    struct passwd *pw = getpwnam(name);
    if (pw == NULL) {
        errno = errno == ENOENT ? 0 : errno;
        return fail(msg, msglen, "invalid value for --job-user: \"%.64s\": no such user", name);
    }
    snprintf(sb->user, sizeof(sb->user), "%s", name);
    sb->uid = pw->pw_uid;
    sb->gid = pw->pw_gid;
    if (geteuid() != 0) {
        snprintf(sb->why_off, sizeof(sb->why_off), "the agent does not run as root");
        return 0;
    }
    if (!namespaces_work(0, sb->why_off, sizeof(sb->why_off)))
        return 0;
    char why[200];
    if (sb->net_none && !namespaces_work(CLONE_NEWNET, why, sizeof(why)))
        return fail(msg, msglen, "--job-network none: a job's network namespace: %s", why);
    sb->on = true;
    return 0;
}

int ts_sandbox_job_user(const struct ts_sandbox *sb, const char *project_user, bool allow_root,
                        struct ts_job_user *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof(*out));
    errno = 0;
    bool own = project_user != NULL && project_user[0] != '\0';
    if (!own && !sb->on)
        return 0; /* unsandboxed: the agent's own user, as before */
    if (own && !sb->on)
        return fail(msg, msglen,
                    "job_user_invalid: its project's jobs run as \"%.40s\", but this node does "
                    "not sandbox jobs (%.100s)",
                    project_user, sb->why_off);
    const char *name = own ? project_user : sb->user;
    errno = 0;
    struct passwd *pw = getpwnam(name);
    if (pw == NULL) {
        errno = errno == ENOENT ? 0 : errno;
        return fail(msg, msglen, "job_user_invalid: %s \"%.40s\" is no user on this node",
                    own ? "its project's job_user" : "the agent's --job-user", name);
    }
    if (pw->pw_uid == 0 && !allow_root)
        return fail(msg, msglen,
                    "job_user_invalid: %s \"%.40s\" is root (uid 0) and its project does not "
                    "allow root (an admin sets allow_root on the project)",
                    own ? "its project's job_user" : "the agent's --job-user", name);
    snprintf(out->name, sizeof(out->name), "%s", name);
    out->uid = pw->pw_uid;
    out->gid = pw->pw_gid;
    return 0;
}

/* The folders the dynamic loader searches for libcuda.so.1 on common
 * distributions and in NVIDIA's container layout. */
static const char *const driver_dirs[] = {"/usr/lib/x86_64-linux-gnu",
                                          "/usr/lib/aarch64-linux-gnu",
                                          "/usr/lib64",
                                          "/usr/lib",
                                          "/lib64",
                                          "/lib/x86_64-linux-gnu",
                                          "/lib/aarch64-linux-gnu",
                                          "/lib",
                                          "/usr/local/nvidia/lib64",
                                          "/usr/local/nvidia/lib",
                                          "/usr/local/cuda/lib64",
                                          "/usr/local/cuda/compat",
                                          NULL};

static void add_overlay(json_t *list, const char *path)
{
    char *real = realpath(path, NULL); /* a bind follows links: the file itself */
    if (real == NULL)
        return;
    size_t i;
    json_t *v;
    bool seen = false;
    json_array_foreach(list, i, v)
        seen |= strcmp(json_string_value(v), real) == 0;
    if (!seen)
        json_array_append_new(list, json_string(real));
    free(real);
}

static void add_dir(json_t *list, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "libcuda.so", 10) != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        add_overlay(list, path);
    }
    if (d != NULL)
        closedir(d);
}

void ts_sandbox_drivers(struct ts_sandbox *sb, const char *sim_lib_dir)
{
    sb->overlay = json_array();
    sb->driver[0] = '\0';
    char path[4096];
    if (sim_lib_dir != NULL && sim_lib_dir[0] != '\0') {
        snprintf(path, sizeof(path), "%s/libcuda.so.1", sim_lib_dir);
        char *real = realpath(path, NULL);
        if (real != NULL)
            snprintf(sb->driver, sizeof(sb->driver), "%s", real);
        free(real);
        add_dir(sb->overlay, sim_lib_dir);
    } else {
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        struct link_map *lm = NULL;
        if (h != NULL && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL &&
            realpath(lm->l_name, path) != NULL) {
            snprintf(sb->driver, sizeof(sb->driver), "%s", path);
            char *slash = strrchr(path, '/');
            if (slash != NULL) {
                *slash = '\0';
                add_dir(sb->overlay, path);
            }
        }
    }
    for (int i = 0; driver_dirs[i] != NULL; i++)
        add_dir(sb->overlay, driver_dirs[i]);
}

/* ---- the job's init, as root --------------------------------------------- */

/* Can uid (primary group gid) pass through the folder st describes? */
static bool searchable(const struct stat *st, uid_t uid, gid_t gid)
{
    if (st->st_uid == uid)
        return (st->st_mode & S_IXUSR) != 0;
    if (st->st_gid == gid)
        return (st->st_mode & S_IXGRP) != 0;
    return (st->st_mode & S_IXOTH) != 0;
}

/* What the job keeps is bound at its own path (its folder under the data
 * folder, its checkpoint, the --job-mount folders), but the folders above
 * it may be closed to the job's user: the agent makes a server-named
 * ROOT/PROJECT/ID with ROOT and PROJECT 0700, so that no job reads
 * another's, and a data folder or a granted folder may lie under a folder
 * only root may pass (/root, a 0700 /srv/cluster). The first such folder
 * above path is covered with a tmpfs in the job's view: the way down is
 * made again under it before the binds, so the job reaches what it keeps
 * and sees nothing else there. Folders the user may pass stay as they are.
 * Called for every kept path before any bind, so that no cover hides a
 * bind made before it. */
static int open_way_to(const struct ts_sandbox_spec *sb, const char *path, char *msg, size_t len)
{
    uid_t uid = (uid_t)sb->uid;
    gid_t gid = (gid_t)sb->gid;
    char p[4096];
    if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
        return errno = ENAMETOOLONG, fail(msg, len, "%s is too long", path);
    for (char *s = strchr(p + 1, '/'); s != NULL; s = strchr(s + 1, '/')) {
        *s = '\0';
        struct stat st;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode) && !searchable(&st, uid, gid)) {
            if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
                return fail(msg, len, "could not cover %s", p);
            return 0;
        }
        *s = '/';
    }
    return 0;
}

/* An empty file at path (a mount point for a file), its folders made. */
static int touch(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        if (ts_files_mkdirs(dir, 0755) != 0)
            return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

/* Bind what fd holds (opened before the host's view was covered) onto
 * target, read-write unless ro. */
static int bind_fd(int fd, const char *target, bool ro, char *msg, size_t len)
{
    char src[64];
    snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
    if (mount(src, target, NULL, MS_BIND, NULL) != 0)
        return fail(msg, len, "could not bind onto %s", target);
    unsigned long fl = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (ro ? MS_RDONLY : 0);
    if (mount(NULL, target, NULL, fl, NULL) != 0)
        return fail(msg, len, "could not remount %s", target);
    return 0;
}

static int tmpfs(const char *target, const char *opts, char *msg, size_t len)
{
    struct stat st;
    if (stat(target, &st) != 0)
        return 0; /* not on this machine: nothing to cover */
    if (mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
        return fail(msg, len, "could not mount a tmpfs on %s", target);
    return 0;
}

/* A path of the spec when it is absolute, else NULL (none). */
static const char *str(const char *s)
{
    return s[0] == '/' ? s : NULL;
}

/* The paths the job keeps, opened while the host's view is still there. */
struct keep {
    const char *path; /* where the job sees it */
    int fd;           /* O_PATH */
    bool dir;
    bool ro;
};

static int open_keep(struct keep *k, const char *from, const char *to, bool ro, char *msg,
                     size_t len)
{
    k->path = to;
    k->ro = ro;
    k->fd = open(from, O_PATH | O_CLOEXEC);
    if (k->fd < 0)
        return fail(msg, len, "could not open %s", from);
    struct stat st;
    if (fstat(k->fd, &st) != 0)
        return fail(msg, len, "could not stat %s", from);
    k->dir = S_ISDIR(st.st_mode);
    return 0;
}

/* Capabilities, user, no_new_privs: the last step before the job. */
static int drop_privileges(const struct ts_sandbox_spec *sb, char *msg, size_t len)
{
    uid_t uid = (uid_t)sb->uid;
    gid_t gid = (gid_t)sb->gid;
    const char *user = sb->user[0] != '\0' ? sb->user : NULL;
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno == EINVAL)
            break;
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if ((user != NULL ? initgroups(user, gid) : setgroups(1, &gid)) != 0)
        return fail(msg, len, "could not set the groups of %s", user ? user : "the job user");
    if (setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0)
        return fail(msg, len, "could not become uid %u gid %u", (unsigned)uid, (unsigned)gid);
    if (uid == 0) {
        /* root allowed: root without capabilities, and exec gives none back
         * (the securebits first: setting them takes CAP_SETPCAP) */
        if (prctl(PR_SET_SECUREBITS, 0x2f /* NOROOT, NO_SETUID_FIXUP, and both locked */, 0, 0,
                  0) != 0)
            return fail(msg, len, "could not lock the securebits");
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct d[2] = {{0}};
        if (syscall(SYS_capset, &h, d) != 0)
            return fail(msg, len, "could not drop capabilities");
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return fail(msg, len, "could not set no_new_privs");
    return 0;
}

/* The job's own mount and IPC namespaces (and network, with "network":
 * "none": only loopback, up), its mounts private to it. */
static int enter_namespaces(const struct ts_sandbox_spec *sb, char *msg, size_t msglen)
{
    bool net_none = strcmp(sb->network, "none") == 0;
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC | (net_none ? CLONE_NEWNET : 0)) != 0)
        return fail(msg, msglen, "could not make the job's %s namespaces",
                    net_none ? "mount, IPC and network" : "mount and IPC");
    if (net_none && ts_sandbox_loopback_up(msg, msglen) != 0)
        return -1;
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0)
        return fail(msg, msglen, "could not make the job's mounts private");
    return 0;
}

/* What the job keeps of the host, opened before the host is made
 * read-only: its folder, its ledgers, checkpoint, simulated GPUs, swap,
 * the pid socket, the --job-mount folders and, under the shim, the real
 * driver, the shim and the ledgers where the shim reads them; *ovfd the
 * driver overlay (-1: none). keep holds 12 + TS_SANDBOX_MOUNTS_MAX; the
 * paths it points to are the job's folder, sb's strings, literals and
 * shim_at (PATH_MAX bytes, the caller's: it outlives the keeps). */
static int open_keeps(const struct ts_sandbox_spec *sb, const char *jobdir, char *shim_at,
                      struct keep *keep, int *nkeep, int *ovfd, char *msg, size_t msglen)
{
    const char *ckpt = str(sb->checkpoint_dir), *sim = str(sb->simgpu_dir);
    const char *swap = str(sb->swap_path);
    char work[PATH_MAX], shim[PATH_MAX], sock[PATH_MAX];
    if (snprintf(work, sizeof(work), "%s/" TS_SANDBOX_WORK, jobdir) >= (int)sizeof(work) ||
        snprintf(shim, sizeof(shim), "%s/shim", jobdir) >= (int)sizeof(shim) ||
        snprintf(shim_at, PATH_MAX, "%s/shim", jobdir) >= PATH_MAX || /* inside the work bind */
        snprintf(sock, sizeof(sock), "%s/" TS_SANDBOX_PIDSOCK, jobdir) >= (int)sizeof(sock))
        return errno = ENAMETOOLONG, fail(msg, msglen, "%s is too long", jobdir);
    int n = 0;
    *ovfd = -1;
    if (open_keep(&keep[n++], work, jobdir, false, msg, msglen) != 0)
        return -1;
    if (access(shim, F_OK) == 0 && open_keep(&keep[n++], shim, shim_at, false, msg, msglen) != 0)
        return -1;
    if (ckpt != NULL && open_keep(&keep[n++], ckpt, ckpt, false, msg, msglen) != 0)
        return -1;
    if (sim != NULL && open_keep(&keep[n++], sim, sim, false, msg, msglen) != 0)
        return -1;
    if (swap != NULL && open_keep(&keep[n++], swap, swap, false, msg, msglen) != 0)
        return -1;
    if (open_keep(&keep[n++], sock, TS_HOSTPID_SOCK, false, msg, msglen) != 0)
        return -1;
    /* the host folders an admin granted every job (--job-mount) */
    if (sb->nmounts > TS_SANDBOX_MOUNTS_MAX)
        return errno = 0, fail(msg, msglen, "launch.json's sandbox has too many mounts");
    for (size_t mi = 0; mi < sb->nmounts; mi++) {
        const char *path = str(sb->mounts[mi].path);
        if (path == NULL)
            return errno = 0, fail(msg, msglen, "launch.json's sandbox has a bad mount");
        if (open_keep(&keep[n++], path, path, !sb->mounts[mi].rw, msg, msglen) != 0)
            return -1;
    }
    *nkeep = n;
    /* under the shim: the real driver where only the shim looks, the job's
     * ledgers where the shim reads them whatever the environment says, and
     * the shim in place of every libcuda file the loader could find */
    if (!sb->has_driver)
        return 0;
    const char *real = str(sb->driver.real), *shimlib = str(sb->driver.shim);
    const char *overlay = str(sb->driver.overlay_lib);
    if (real == NULL || shimlib == NULL || overlay == NULL)
        return 0;
    if (open_keep(&keep[n++], real, "/run/tessera/lib/libcuda.so.1", true, msg, msglen) != 0 ||
        open_keep(&keep[n++], shimlib, "/run/tessera/lib/libtessera-cuda.so", true, msg, msglen) !=
            0 ||
        open_keep(&keep[n++], shim, "/run/tessera/shim", false, msg, msglen) != 0)
        return -1;
    *nkeep = n;
    *ovfd = open(overlay, O_PATH | O_CLOEXEC);
    if (*ovfd < 0)
        return fail(msg, msglen, "could not open %s", overlay);
    return 0;
}

/* The host read-only, a /tmp, /var/tmp, /dev/shm and /run of the job's
 * own, the data folder covered; then what it keeps bound back in place
 * and the overlay over every libcuda file the driver names. */
static int build_mounts(const struct ts_sandbox_spec *sb, const char *data, struct keep *keep,
                        int nkeep, int ovfd, char *msg, size_t msglen)
{
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID};
    if (syscall(SYS_mount_setattr, -1, "/", AT_RECURSIVE, &ro, sizeof(ro)) != 0)
        return fail(msg, msglen, "could not make the host's file systems read-only");
    if (tmpfs("/tmp", "mode=1777", msg, msglen) != 0 ||
        tmpfs("/var/tmp", "mode=1777", msg, msglen) != 0 ||
        tmpfs("/dev/shm", "mode=1777", msg, msglen) != 0 ||
        tmpfs("/run", "mode=0755", msg, msglen) != 0)
        return -1;
    if (open_way_to(sb, data, msg, msglen) != 0)
        return -1;
    if (ts_files_mkdirs(data, 0755) != 0)
        return fail(msg, msglen, "could not make %s", data);
    if (mount("tmpfs", data, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
        return fail(msg, msglen, "could not cover %s", data);
    for (int i = 0; i < nkeep; i++)
        if (open_way_to(sb, keep[i].path, msg, msglen) != 0)
            return -1;
    for (int i = 0; i < nkeep; i++) {
        struct keep *k = &keep[i];
        if ((k->dir ? ts_files_mkdirs(k->path, 0755) : touch(k->path)) != 0)
            return fail(msg, msglen, "could not make %s", k->path);
        if (bind_fd(k->fd, k->path, k->ro, msg, msglen) != 0)
            return -1;
        close(k->fd);
    }
    if (ovfd >= 0) {
        for (size_t i = 0; i < sb->driver.noverlay; i++) {
            const char *target = sb->driver.overlay[i];
            if (target[0] != '\0' && access(target, F_OK) == 0 &&
                bind_fd(ovfd, target, true, msg, msglen) != 0)
                return -1;
        }
        close(ovfd);
    }
    return 0;
}

/* The device nodes of GPUs that are not the job's read as /dev/null (the
 * devices controller refuses them too on cgroup v1), and so does the
 * agent's token; then the job's own /proc. */
static int hide_the_rest(const struct ts_sandbox_spec *sb, char *msg, size_t msglen)
{
    const char *token = str(sb->token_file);
    for (int n = 0; n < 64; n++) {
        char node[32];
        snprintf(node, sizeof(node), "/dev/nvidia%d", n);
        bool mine = false;
        for (size_t i = 0; i < sb->ngpus; i++)
            mine |= sb->gpus[i] == n;
        if (!mine && access(node, F_OK) == 0 && mount("/dev/null", node, NULL, MS_BIND, NULL) != 0)
            return fail(msg, msglen, "could not hide %s", node);
    }
    if (token != NULL && access(token, F_OK) == 0 &&
        mount("/dev/null", token, NULL, MS_BIND, NULL) != 0)
        return fail(msg, msglen, "could not hide %s", token);
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        return fail(msg, msglen, "could not mount the job's /proc");
    return 0;
}

int ts_sandbox_enter(const struct ts_sandbox_spec *sb, char *msg, size_t msglen)
{
    const char *data = str(sb->data_dir), *jobdir = str(sb->job_dir);
    if (data == NULL || jobdir == NULL)
        return errno = 0, fail(msg, msglen, "launch.json's sandbox has no data_dir or job_dir");
    if (enter_namespaces(sb, msg, msglen) != 0)
        return -1;
    struct keep keep[12 + TS_SANDBOX_MOUNTS_MAX];
    char shim_at[PATH_MAX];
    int nkeep = 0, ovfd = -1;
    if (open_keeps(sb, jobdir, shim_at, keep, &nkeep, &ovfd, msg, msglen) != 0 ||
        build_mounts(sb, data, keep, nkeep, ovfd, msg, msglen) != 0 ||
        hide_the_rest(sb, msg, msglen) != 0)
        return -1;
    return drop_privileges(sb, msg, msglen);
}
