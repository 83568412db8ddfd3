/*
 * hostpid.c - this process's pid in the host's PID namespace (hostpid.h).
 */
#include "agent/ledger/hostpid.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* (getpid() << 32 | host pid) of the last answer: a forked child's getpid()
 * differs, so it asks again without an atfork handler */
static _Atomic uint64_t cached;

static pid_t nspid_first(void)
{
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return getpid();
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return getpid();
    buf[n] = '\0';
    const char *p = strstr(buf, "\nNSpid:");
    if (p == NULL)
        return getpid();
    /* the first figure is the pid in the outermost namespace the
     * process's /proc belongs to */
    long v = strtol(p + 7, NULL, 10);
    return v > 0 ? (pid_t)v : getpid();
}

/* Ask the supervisor; 0 when there is no socket, -1 when it fails. */
static pid_t ask_supervisor(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, TS_HOSTPID_SOCK, sizeof(TS_HOSTPID_SOCK));
    if (access(TS_HOSTPID_SOCK, F_OK) != 0)
        return 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int32_t v = -1;
    size_t got = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        while (got < sizeof(v)) {
            ssize_t n = read(fd, (char *)&v + got, sizeof(v) - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += (size_t)n;
        }
    }
    close(fd);
    return got == sizeof(v) && v > 0 ? (pid_t)v : -1;
}

pid_t ts_hostpid(void)
{
    pid_t me = getpid();
    uint64_t c = atomic_load(&cached);
    if (c != 0 && (pid_t)(c >> 32) == me)
        return (pid_t)(uint32_t)c;
    pid_t host = ask_supervisor();
    if (host == 0)
        host = nspid_first();
    if (host > 0)
        atomic_store(&cached, (uint64_t)(uint32_t)me << 32 | (uint32_t)host);
    return host;
}

bool ts_hostpid_foreign(void)
{
    pid_t host = ts_hostpid();
    return host != getpid();
}
