/*
 * notify_listen.c - the service manager's end of sd_notify(3), for the
 * install test: binds a datagram socket at PATH and prints each message
 * it receives on one line (its newlines as spaces), flushed, until a
 * message holds STOPPING=1 or SECONDS pass.
 *
 *   notify_listen PATH SECONDS
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: notify_listen PATH SECONDS\n");
        return 2;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(argv[1]) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "notify_listen: path too long: %s\n", argv[1]);
        return 2;
    }
    strcpy(sa.sun_path, argv[1]);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    unlink(argv[1]);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        perror("notify_listen: bind");
        return 1;
    }
    time_t end = time(NULL) + atoi(argv[2]);
    int rc = 1;
    while (time(NULL) < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0)
            continue;
        char msg[4096];
        ssize_t n = recv(fd, msg, sizeof(msg) - 1, 0);
        if (n < 0)
            continue;
        msg[n] = '\0';
        for (char *c = msg; *c != '\0'; c++)
            if (*c == '\n')
                *c = ' ';
        printf("%s\n", msg);
        fflush(stdout);
        if (strstr(msg, "STOPPING=1") != NULL) {
            rc = 0;
            break;
        }
    }
    close(fd);
    unlink(argv[1]);
    return rc;
}
