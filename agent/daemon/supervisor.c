/*
 * supervisor.c - the small process between the agent and a job.
 *
 * The agent forks it in a session of its own and execs itself as
 * `tessera-agent --supervise JOBDIR`, so it survives the agent. It reads
 * JOBDIR/launch.json, forks the job (a session and process group of its own,
 * output to JOBDIR/output.log, the environment and argv from the file, no
 * shell), writes JOBDIR/job.json (pids and start times), tells the agent on
 * fd 3 by closing it, waits for the job, kills what is left of the job's
 * process group, writes JOBDIR/status.json atomically and exits. A restarted
 * agent reads that file to learn how a job ended while it was down.
 *
 * It ignores SIGTERM, SIGINT, SIGHUP and SIGQUIT: stopping a job is done by
 * signalling the job's group, never the supervisor.
 *
 * Sandboxed (launch.json has "sandbox", sandbox.h): the supervisor makes a
 * PID namespace for the job; its first process, the job's init (pid 1
 * inside), waits until the supervisor has put it in the job's cgroup,
 * enters the sandbox, forks the job and reaps whatever is orphaned inside
 * until the job ends, then hands the job's wait status up a pipe and exits,
 * which kills every process left in the namespace. The job still leads its
 * own session and group, so the agent signals it as before; job.json also
 * names the init. The supervisor meanwhile answers the host-pid socket
 * (hostpid.h) in the job folder.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/daemon/ajob.h"
#include "agent/daemon/cgroup.h"
#include "api/files.h"
#include "agent/daemon/proc.h"
#include "agent/daemon/records.h"
#include "agent/daemon/sandbox.h"

#define NOTIFY_FD 3
/* Every job's umask, whatever the agent's: a login shell's usual one */
#define JOB_UMASK 0022

/* What the job's child sends up the exec pipe when it cannot run. */
struct exec_failure {
    char what; /* 'c': chdir, 'x': exec, 's': the sandbox (text) */
    int errnum;
    char text[400];
};

static void write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* status.json with rec, stamped now. 0, or -errno (said). */
static int write_status(const char *jobdir, struct ts_rec_status *rec)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/status.json", jobdir);
    rec->finished_at = (int64_t)time(NULL);
    int rc = ts_rec_status_write(path, rec);
    if (rc < 0)
        fprintf(stderr, "supervisor: could not write %s: %s\n", path, strerror(-rc));
    return rc;
}

/* The job could not start: say so in its output and in status.json. */
static int failed_to_start(const char *jobdir, int outfd, const char *msg)
{
    if (outfd >= 0) {
        char line[1024];
        int n = snprintf(line, sizeof(line), "tessera-agent: %s\n", msg);
        write_all(outfd, line, n > 0 && (size_t)n < sizeof(line) ? (size_t)n : 0);
    }
    struct ts_rec_status st = {.state = "failed_to_start"};
    snprintf(st.message, sizeof(st.message), "%s", msg);
    return write_status(jobdir, &st) == 0 ? 0 : 1;
}

/* In the job's child: never returns. */
static void run_job(char **argv, char **envp, const char *wd, int outfd, int pipefd)
{
    struct exec_failure f = {0};
    setsid();
    struct sigaction sa = {.sa_handler = SIG_DFL};
    for (int s = 1; s < NSIG; s++)
        sigaction(s, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0 && devnull != 0) {
        dup2(devnull, 0);
        close(devnull);
    }
    dup2(outfd, 1);
    dup2(outfd, 2);
    if (outfd > 2)
        close(outfd);
    /* the job's own umask, not the agent's (its unit's UMask=): what a job
     * writes in its folders and checkpoints is readable as from a login
     * shell */
    umask(JOB_UMASK);
    if (wd != NULL && chdir(wd) != 0) {
        f = (struct exec_failure){.what = 'c', .errnum = errno};
        write_all(pipefd, (const char *)&f, sizeof(f));
        _exit(127);
    }
    extern char **environ;
    environ = envp; /* execvp searches this environment's PATH */
    execvp(argv[0], argv);
    f = (struct exec_failure){.what = 'x', .errnum = errno};
    write_all(pipefd, (const char *)&f, sizeof(f));
    _exit(127);
}

/* ---- the sandbox ---------------------------------------------------------- */

/* pid 1 of the job's PID namespace: waits for the supervisor (cgroup), enters
 * the sandbox, runs the job, reaps, and hands the job's wait status up
 * statusfd. Never returns. */
static void run_init(const struct ts_sandbox_spec *sb, char **argv, char **envp, const char *wd,
                     int outfd, int pipefd, int statusfd, int gofd)
{
    char c;
    while (read(gofd, &c, 1) < 0 && errno == EINTR)
        ;
    close(gofd);
    setsid();
    struct exec_failure f = {.what = 's'};
    if (ts_sandbox_enter(sb, f.text, sizeof(f.text)) != 0) {
        write_all(pipefd, (const char *)&f, sizeof(f));
        _exit(127);
    }
    pid_t job = fork();
    if (job < 0) {
        f.errnum = errno;
        snprintf(f.text, sizeof(f.text), "could not fork the job: %s", strerror(errno));
        write_all(pipefd, (const char *)&f, sizeof(f));
        _exit(127);
    }
    if (job == 0)
        run_job(argv, envp, wd, outfd, pipefd);
    close(pipefd);
    close(outfd);
    int wst = 0;
    for (;;) {
        int st;
        pid_t w = waitpid(-1, &st, 0);
        if (w == job) {
            wst = st;
            break;
        }
        if (w < 0 && errno != EINTR) {
            wst = 127 << 8;
            break;
        }
    }
    write_all(statusfd, (const char *)&wst, sizeof(wst));
    _exit(WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst));
}

/* The host-pid socket in the job folder (hostpid.h); -1 on failure. */
static int pid_socket(const char *jobdir)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (snprintf(a.sun_path, sizeof(a.sun_path), "%s/" TS_SANDBOX_PIDSOCK, jobdir) >=
        (int)sizeof(a.sun_path)) {
        fprintf(stderr, "supervisor: the job folder's path is too long for a socket\n");
        return -1;
    }
    unlink(a.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || chmod(a.sun_path, 0666) != 0 ||
        listen(fd, 64) != 0) {
        fprintf(stderr, "supervisor: could not listen on %s: %s\n", a.sun_path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Answer every waiting connection with the peer's pid as this (the host's)
 * namespace sees it. */
static void serve_pids(int lfd)
{
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            return;
        struct ucred cr;
        socklen_t len = sizeof(cr);
        if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.pid > 0) {
            int32_t v = (int32_t)cr.pid;
            write_all(c, (const char *)&v, sizeof(v));
        }
        close(c);
    }
}

/* The init's child: the job leader, in the host's numbering. */
static pid_t child_of(pid_t parent)
{
    for (int tries = 0; tries < 50; tries++) {
        DIR *d = opendir("/proc");
        struct dirent *e;
        pid_t found = 0;
        while (d != NULL && (e = readdir(d)) != NULL) {
            pid_t pid = (pid_t)atoi(e->d_name);
            struct ts_proc_stat st;
            if (pid > 0 && ts_proc_stat(pid, &st) == 0 && st.ppid == parent) {
                found = pid;
                break;
            }
        }
        if (d != NULL)
            closedir(d);
        if (found > 0)
            return found;
        usleep(10000);
    }
    return 0;
}

/* Wait for the init, serving the pid socket meanwhile. */
static void wait_init(pid_t init, int lfd, int *wst)
{
    int pfd = (int)syscall(SYS_pidfd_open, init, 0);
    for (;;) {
        pid_t w = waitpid(init, wst, WNOHANG);
        if (w == init || (w < 0 && errno != EINTR))
            break;
        struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = pfd, .events = POLLIN}};
        int n = poll(p, pfd >= 0 ? 2 : 1, pfd >= 0 ? -1 : 200);
        if (n > 0 && (p[0].revents & POLLIN))
            serve_pids(lfd);
    }
    if (pfd >= 0)
        close(pfd);
}

/* The supervisor outlives the agent's stop and the terminal's signals;
 * its children get the default for SIGCHLD. */
static void ignore_signals(void)
{
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGTERM, &ign, NULL);
    sigaction(SIGINT, &ign, NULL);
    sigaction(SIGHUP, &ign, NULL);
    sigaction(SIGQUIT, &ign, NULL);
    sigaction(SIGPIPE, &ign, NULL);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGCHLD, &dfl, NULL);
}

/* EOF on fd: the job called setsid and exec'd (the pipe is close-on-exec),
 * false; data: it could not, said in msg (pid reaped), true. */
static bool exec_failed(int fd, pid_t pid, const char *wd, const char *argv0, char *msg, size_t len)
{
    struct exec_failure f;
    ssize_t n;
    do
        n = read(fd, &f, sizeof(f));
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(f))
        return false;
    int wst;
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
        ;
    f.text[sizeof(f.text) - 1] = '\0';
    if (f.what == 'c')
        snprintf(msg, len, "could not change to working_dir \"%s\": %s", wd, strerror(f.errnum));
    else if (f.what == 's')
        snprintf(msg, len, "could not set up the job's sandbox: %s", f.text);
    else
        snprintf(msg, len, "could not execute \"%s\": %s", argv0, strerror(f.errnum));
    return true;
}

/* job.json: the job's pid and start time, the supervisor's and its init's
 * (init 0: none). Written only once the job leads its own session and
 * process group, so whoever reads the file may signal the group. */
static void write_job_record(const char *jobdir, pid_t pid, pid_t init)
{
    struct ts_proc_stat js = {0}, ss = {0}, is = {0};
    ts_proc_stat(pid, &js);
    ts_proc_stat(getpid(), &ss);
    if (init > 0)
        ts_proc_stat(init, &is);
    struct ts_rec_pids rec = {.pid = pid,
                              .start_ticks = (int64_t)js.start_ticks,
                              .supervisor_pid = getpid(),
                              .supervisor_start_ticks = (int64_t)ss.start_ticks,
                              .started_at = (int64_t)time(NULL),
                              .init_pid = init > 0 ? init : 0,
                              .init_start_ticks = init > 0 ? (int64_t)is.start_ticks : 0};
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/job.json", jobdir);
    if (ts_rec_pids_write(path, &rec) != 0)
        fprintf(stderr, "supervisor: could not write %s\n", path);
}

/* The job's wait status: from its init (which took it from statusfd) when
 * it has one, else its own. */
static int wait_job(pid_t pid, pid_t init, int lfd, int statusfd)
{
    int wst = 0;
    if (init > 0) {
        /* the init's exit kills whatever is left in the namespace */
        wait_init(init, lfd, &wst);
        int jst;
        if (read(statusfd, &jst, sizeof(jst)) == (ssize_t)sizeof(jst))
            wst = jst;
        return wst;
    }
    while (waitpid(pid, &wst, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "supervisor: waitpid: %s\n", strerror(errno));
            break;
        }
    }
    return wst;
}

/* A sandboxed job's start: the pid socket its init's children are named
 * through (*lfd), and a new PID namespace for the next child, the job's
 * init (*nsfd: the supervisor's own, to return to after the fork); -1 with
 * msg on failure. */
static int prepare_pid_ns(const char *jobdir, int *lfd, int *nsfd, char *msg, size_t len)
{
    if ((*lfd = pid_socket(jobdir)) < 0) {
        snprintf(msg, len, "could not listen on the job's pid socket");
        return -1;
    }
    /* later children (LeakSanitizer's at exit, among others) are made in
     * this namespace again (setns after the fork): in the job's, once its
     * init is gone, fork fails */
    *nsfd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    if (unshare(CLONE_NEWPID) != 0) {
        snprintf(msg, len, "could not make the job's PID namespace: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* The init into the job's cgroup; when it cannot be, the init is killed,
 * the cgroup removed, and msg says why: -1. */
static int enter_cgroup(const struct ts_cgroup_spec *cg, pid_t init, char *msg, size_t len)
{
    char why[600];
    if (ts_cgroup_enter(cg, init, why, sizeof(why)) == 0)
        return 0;
    kill(init, SIGKILL);
    while (waitpid(init, NULL, 0) < 0 && errno == EINTR)
        ;
    snprintf(msg, len, "could not set up the job's cgroup: %s", why);
    ts_cgroup_remove(cg);
    return -1;
}

/* status.json from the job's wait status; 0, or 1 when it cannot be written. */
static int write_exit(const char *jobdir, int wst)
{
    struct ts_rec_status st = {.state = "exited"};
    if (WIFSIGNALED(wst)) {
        st.signal = WTERMSIG(wst);
    } else {
        st.has_exit_code = true;
        st.exit_code = WEXITSTATUS(wst);
    }
    return write_status(jobdir, &st) == 0 ? 0 : 1;
}

/* The child of the fork: the job's init when sandboxed, else the job
 * itself; never returns. The ends of the pipes that are the parent's are
 * closed first. */
static void start_child(const struct ts_sandbox_spec *sb, char **argv, char **envp, const char *wd,
                        int outfd, const int pipefd[2], const int statusp[2], const int gop[2],
                        int lfd)
{
    close(pipefd[0]);
    close(statusp[0]);
    close(gop[1]);
    close(NOTIFY_FD);
    if (lfd >= 0)
        close(lfd);
    if (sb != NULL)
        run_init(sb, argv, envp, wd, outfd, pipefd[1], statusp[1], gop[0]);
    run_job(argv, envp, wd, outfd, pipefd[1]);
}

/* After the fork into the job's PID namespace: the supervisor goes back
 * to its own (nsfd, closed here; -1: it never left), the child stays. */
static void leave_pid_ns(int *nsfd, pid_t pid)
{
    if (*nsfd < 0)
        return;
    if (pid != 0 && setns(*nsfd, CLONE_NEWPID) != 0)
        fprintf(stderr, "supervisor: could not return to its PID namespace: %s\n", strerror(errno));
    close(*nsfd);
    *nsfd = -1;
}

static void close_pair(int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* What launch.json says (ajob.c writes it), read and checked. */
struct launch {
    struct ts_rec_launch *rec; /* new; NULL: it could not be read */
    char **argv, **envp;       /* rec's */
    const char *wd;
    const struct ts_sandbox_spec *sb; /* its sandbox, or NULL */
    const struct ts_cgroup_spec *cg;  /* its group, or NULL */
    struct ts_error err;
};

/* JOBDIR/launch.json into l: NULL, or why the job cannot start (l->rec
 * NULL when the file could not be read at all). A damaged sandbox or
 * cgroup is refused: a job never runs outside the user and the limits
 * launch.json names. */
static const char *launch_read(const char *jobdir, struct launch *l)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/launch.json", jobdir);
    if ((l->rec = calloc(1, sizeof(*l->rec))) == NULL)
        return "out of memory";
    enum ts_err e = ts_rec_launch_read(path, l->rec, &l->err);
    if (e == TS_ERR_NOT_FOUND || e == TS_ERR_IO || e == TS_ERR_MALFORMED_JSON) {
        free(l->rec);
        l->rec = NULL;
        return "could not read launch.json";
    }
    if (e != TS_OK)
        return l->err.message; /* l->rec zeroed: no command, nothing to free */
    l->argv = l->rec->argv;
    l->envp = l->rec->env;
    l->wd = l->rec->working_dir[0] != '\0' ? l->rec->working_dir : NULL;
    l->sb = l->rec->has_sandbox ? &l->rec->sandbox : NULL;
    l->cg = l->rec->has_cgroup ? &l->rec->cgroup : NULL;
    if (l->argv == NULL || l->argv[0] == NULL || l->envp == NULL)
        return "launch.json has no command or environment";
    return NULL;
}

static void launch_free(struct launch *l)
{
    if (l->rec != NULL)
        ts_rec_launch_free(l->rec);
    free(l->rec);
}

int ts_supervisor_main(const char *jobdir)
{
    ignore_signals();
    fcntl(NOTIFY_FD, F_SETFD, FD_CLOEXEC);

    char path[PATH_MAX];
    struct launch l = {0};
    const char *bad = launch_read(jobdir, &l);
    snprintf(path, sizeof(path), "%s/output.log", jobdir);
    int outfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (l.rec == NULL || outfd < 0) {
        char msg[PATH_MAX + 64];
        snprintf(msg, sizeof(msg), "could not read %s/launch.json or open its output.log", jobdir);
        int rc = failed_to_start(jobdir, outfd, msg);
        launch_free(&l);
        return rc;
    }
    char **argv = l.argv, **envp = l.envp;
    const char *wd = l.wd;
    const struct ts_sandbox_spec *sb = l.sb;
    const struct ts_cgroup_spec *cg = l.cg;
    int status = 1;
    int pipefd[2] = {-1, -1}, statusp[2] = {-1, -1}, gop[2] = {-1, -1}, lfd = -1, nsfd = -1;
    if (bad != NULL) {
        status = failed_to_start(jobdir, outfd, bad);
        goto out;
    }
    if (pipe2(pipefd, O_CLOEXEC) != 0 || pipe2(statusp, O_CLOEXEC) != 0 ||
        pipe2(gop, O_CLOEXEC) != 0) {
        status = failed_to_start(jobdir, outfd, "could not make a pipe");
        goto out;
    }
    char failure[PATH_MAX + 256];
    /* the next child is pid 1 of a new PID namespace: the job's init */
    if (sb != NULL && prepare_pid_ns(jobdir, &lfd, &nsfd, failure, sizeof(failure)) != 0) {
        status = failed_to_start(jobdir, outfd, failure);
        goto out;
    }
    pid_t pid = fork();
    if (pid < 0) {
        char msg[128];
        snprintf(msg, sizeof(msg), "could not fork: %s", strerror(errno));
        status = failed_to_start(jobdir, outfd, msg);
        goto out;
    }
    leave_pid_ns(&nsfd, pid);
    if (pid == 0)
        start_child(sb, argv, envp, wd, outfd, pipefd, statusp, gop, lfd);
    pid_t init = sb != NULL ? pid : 0;
    close(pipefd[1]);
    close(statusp[1]);
    close(gop[0]);
    pipefd[1] = statusp[1] = gop[0] = -1;
    if (init > 0 && cg != NULL && enter_cgroup(cg, init, failure, sizeof(failure)) != 0) {
        status = failed_to_start(jobdir, outfd, failure);
        goto out;
    }
    close(gop[1]); /* the init goes on, in its group */
    gop[1] = -1;

    if (exec_failed(pipefd[0], pid, wd, argv[0], failure, sizeof(failure))) {
        status = failed_to_start(jobdir, outfd, failure);
        goto out;
    }
    if (init > 0 && (pid = child_of(init)) <= 0) {
        /* it exec'd and is gone already: its init has its status */
        pid = init;
    }

    write_job_record(jobdir, pid, init);
    close(NOTIFY_FD); /* the agent reads EOF: job.json is there */
    int wst = wait_job(pid, init, lfd, statusp[0]);
    /* whatever the job left behind in its group goes with it */
    kill(-pid, SIGKILL);
    if (init > 0 && cg != NULL) {
        ts_cgroup_kill(cg);
        ts_cgroup_remove(cg);
    }
    status = write_exit(jobdir, wst);
out:
    close_pair(pipefd);
    close_pair(statusp);
    close_pair(gop);
    if (nsfd >= 0)
        close(nsfd);
    if (lfd >= 0) {
        close(lfd);
        snprintf(path, sizeof(path), "%s/" TS_SANDBOX_PIDSOCK, jobdir);
        unlink(path);
    }
    close(outfd);
    launch_free(&l);
    return status;
}
