/*
 * sdnotify.c - the sd_notify(3) protocol in a few lines: a datagram with
 * "KEY=VALUE" lines to the AF_UNIX socket in $NOTIFY_SOCKET, a path
 * ("/run/systemd/notify") or an abstract name ("@..."). systemd's units
 * for Tessera are Type=notify (packaging/); without a service manager
 * nothing is sent.
 */
#include "api/sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un notify_addr;
static socklen_t notify_len; /* 0: nobody listens */

void ts_sdnotify_init(void)
{
    const char *path = getenv("NOTIFY_SOCKET");
    notify_len = 0;
    if (path == NULL)
        return;
    size_t len = strlen(path);
    /* "vsock:" addresses (virtual machines' managers) are not supported */
    if ((path[0] == '/' || path[0] == '@') && len >= 2 && len < sizeof(notify_addr.sun_path)) {
        memset(&notify_addr, 0, sizeof(notify_addr));
        notify_addr.sun_family = AF_UNIX;
        memcpy(notify_addr.sun_path, path, len);
        if (path[0] == '@')
            notify_addr.sun_path[0] = '\0'; /* abstract: no trailing NUL counted */
        notify_len =
            (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/' ? 1 : 0));
    }
    unsetenv("NOTIFY_SOCKET");
}

int ts_sdnotify(const char *state)
{
    if (notify_len == 0)
        return 0;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    ssize_t n = sendto(fd, state, strlen(state), MSG_NOSIGNAL,
                       (const struct sockaddr *)&notify_addr, notify_len);
    int rc = n < 0 ? -errno : 1;
    close(fd);
    return rc;
}
