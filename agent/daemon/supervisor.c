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
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/daemon/ajob.h"
#include "agent/daemon/files.h"
#include "agent/daemon/proc.h"

#define NOTIFY_FD 3

/* What the job's child sends up the exec pipe when it cannot run. */
struct exec_failure {
    char what; /* 'c': chdir, 'x': exec */
    int errnum;
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

static int write_status(const char *jobdir, json_t *st)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/status.json", jobdir);
    json_object_set_new(st, "finished_at", json_integer((json_int_t)time(NULL)));
    int rc = ts_files_write_json(path, st, 0600);
    if (rc < 0)
        fprintf(stderr, "supervisor: could not write %s: %s\n", path, strerror(-rc));
    json_decref(st);
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
    json_t *st = json_pack("{s:s, s:s}", "state", "failed_to_start", "message", msg);
    return st != NULL && write_status(jobdir, st) == 0 ? 0 : 1;
}

static char **string_array(const json_t *a)
{
    if (!json_is_array(a))
        return NULL;
    size_t n = json_array_size(a);
    char **v = calloc(n + 1, sizeof(*v));
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(a, i));
        if (s == NULL) {
            free(v);
            return NULL;
        }
        v[i] = (char *)s; /* borrowed from the JSON value */
    }
    return v;
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
    if (wd != NULL && chdir(wd) != 0) {
        f = (struct exec_failure){'c', errno};
        write_all(pipefd, (const char *)&f, sizeof(f));
        _exit(127);
    }
    extern char **environ;
    environ = envp; /* execvp searches this environment's PATH */
    execvp(argv[0], argv);
    f = (struct exec_failure){'x', errno};
    write_all(pipefd, (const char *)&f, sizeof(f));
    _exit(127);
}

int ts_supervisor_main(const char *jobdir)
{
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGTERM, &ign, NULL);
    sigaction(SIGINT, &ign, NULL);
    sigaction(SIGHUP, &ign, NULL);
    sigaction(SIGQUIT, &ign, NULL);
    sigaction(SIGPIPE, &ign, NULL);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGCHLD, &dfl, NULL);
    fcntl(NOTIFY_FD, F_SETFD, FD_CLOEXEC);

    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/launch.json", jobdir);
    json_t *launch = ts_files_read_json(path);
    snprintf(path, sizeof(path), "%s/output.log", jobdir);
    int outfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (launch == NULL || outfd < 0) {
        char msg[PATH_MAX + 64];
        snprintf(msg, sizeof(msg), "could not read %s/launch.json or open its output.log", jobdir);
        int rc = failed_to_start(jobdir, outfd, msg);
        json_decref(launch);
        return rc;
    }
    char **argv = string_array(json_object_get(launch, "argv"));
    char **envp = string_array(json_object_get(launch, "env"));
    const char *wd = json_string_value(json_object_get(launch, "working_dir"));
    int status = 1;
    int pipefd[2] = {-1, -1};
    if (argv == NULL || argv[0] == NULL || envp == NULL) {
        status = failed_to_start(jobdir, outfd, "launch.json has no command or environment");
        goto out;
    }
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        status = failed_to_start(jobdir, outfd, "could not make a pipe");
        goto out;
    }
    pid_t pid = fork();
    if (pid < 0) {
        char msg[128];
        snprintf(msg, sizeof(msg), "could not fork: %s", strerror(errno));
        status = failed_to_start(jobdir, outfd, msg);
        goto out;
    }
    if (pid == 0) {
        close(pipefd[0]);
        close(NOTIFY_FD);
        run_job(argv, envp, wd, outfd, pipefd[1]);
    }
    close(pipefd[1]);
    pipefd[1] = -1;

    /* EOF on the pipe: the job called setsid and exec'd (the pipe is
     * close-on-exec); data: it could not */
    struct exec_failure f;
    ssize_t n;
    do
        n = read(pipefd[0], &f, sizeof(f));
    while (n < 0 && errno == EINTR);
    int wst = 0;
    if (n == (ssize_t)sizeof(f)) {
        while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
            ;
        char msg[PATH_MAX + 256];
        if (f.what == 'c')
            snprintf(msg, sizeof(msg), "could not change to working_dir \"%s\": %s", wd,
                     strerror(f.errnum));
        else
            snprintf(msg, sizeof(msg), "could not execute \"%s\": %s", argv[0], strerror(f.errnum));
        status = failed_to_start(jobdir, outfd, msg);
        goto out;
    }

    /* job.json only now: the job leads its own session and process group,
     * so whoever reads the file may signal the group */
    struct ts_proc_stat js = {0}, ss = {0};
    ts_proc_stat(pid, &js);
    ts_proc_stat(getpid(), &ss);
    json_t *rec = json_pack("{s:i, s:I, s:i, s:I, s:I}", "pid", (int)pid, "start_ticks",
                            (json_int_t)js.start_ticks, "supervisor_pid", (int)getpid(),
                            "supervisor_start_ticks", (json_int_t)ss.start_ticks, "started_at",
                            (json_int_t)time(NULL));
    snprintf(path, sizeof(path), "%s/job.json", jobdir);
    if (rec == NULL || ts_files_write_json(path, rec, 0600) != 0)
        fprintf(stderr, "supervisor: could not write %s\n", path);
    json_decref(rec);
    close(NOTIFY_FD); /* the agent reads EOF: job.json is there */

    while (waitpid(pid, &wst, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "supervisor: waitpid: %s\n", strerror(errno));
            break;
        }
    }
    /* whatever the job left behind in its group goes with it */
    kill(-pid, SIGKILL);
    json_t *st;
    if (WIFSIGNALED(wst))
        st = json_pack("{s:s, s:i}", "state", "exited", "signal", WTERMSIG(wst));
    else
        st = json_pack("{s:s, s:i}", "state", "exited", "exit_code", WEXITSTATUS(wst));
    status = st != NULL && write_status(jobdir, st) == 0 ? 0 : 1;
out:
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    close(outfd);
    free(argv);
    free(envp);
    json_decref(launch);
    return status;
}
