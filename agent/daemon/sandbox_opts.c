/*
 * sandbox_opts.c - what an admin lets sandboxed jobs reach beyond their own
 * folders (sandbox.h): host folders granted with --job-mount, and the
 * loopback of a job's own network namespace (--job-network none).
 */
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/daemon/sandbox.h"

static int refuse(char *msg, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return -1;
}

/* Whether path is folder dir or lies under it (both real paths). */
static bool under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/')
        return true;
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* One PATH[:ro|:rw] of --job-mount into m; 0, or -1 with msg. */
static int parse_one(const char *item, const struct ts_sandbox_opts *o, struct ts_sandbox_mount *m,
                     char *msg, size_t len)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s", item) >= (int)sizeof(path))
        return refuse(msg, len, "invalid value for --job-mount: a path is too long");
    m->rw = false;
    char *colon = strrchr(path, ':');
    if (colon != NULL && (strcmp(colon, ":ro") == 0 || strcmp(colon, ":rw") == 0)) {
        m->rw = colon[2] == 'w';
        *colon = '\0';
    }
    if (path[0] != '/')
        return refuse(msg, len,
                      "invalid value for --job-mount: \"%.200s\": not an absolute path "
                      "(PATH, PATH:ro or PATH:rw)",
                      item);
    char real[PATH_MAX];
    struct stat st;
    if (realpath(path, real) == NULL)
        return refuse(msg, len, "invalid value for --job-mount: \"%.200s\": %s", path,
                      strerror(errno));
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
        return refuse(msg, len, "invalid value for --job-mount: \"%.200s\": not a folder", path);
    if (strlen(real) >= sizeof(m->path))
        return refuse(msg, len, "invalid value for --job-mount: \"%.200s\": path too long", path);
    char data[PATH_MAX];
    if (o->data_dir != NULL && realpath(o->data_dir, data) == NULL) /* made later */
        snprintf(data, sizeof(data), "%s", o->data_dir[0] == '/' ? o->data_dir : "/");
    if (o->data_dir != NULL && (under(real, data) || under(data, real)))
        return refuse(msg, len,
                      "invalid value for --job-mount: \"%.200s\" would show jobs the data "
                      "folder %.200s (other jobs' folders, ledgers, the agent's state)",
                      path, data);
    for (int i = 0; i < 3 && o->secrets[i] != NULL; i++) {
        char secret[PATH_MAX];
        if (realpath(o->secrets[i], secret) != NULL && under(secret, real))
            return refuse(msg, len,
                          "invalid value for --job-mount: \"%.200s\" holds the agent's %.200s",
                          path, secret);
    }
    snprintf(m->path, sizeof(m->path), "%s", real);
    return 0;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const struct ts_sandbox_mount *)a)->path,
                  ((const struct ts_sandbox_mount *)b)->path);
}

int ts_sandbox_mounts_parse(struct ts_sandbox *sb, const struct ts_sandbox_opts *o, char *msg,
                            size_t msglen)
{
    sb->nmounts = 0;
    if (o->mounts == NULL || o->mounts[0] == '\0')
        return 0;
    char *text = strdup(o->mounts);
    if (text == NULL)
        return refuse(msg, msglen, "out of memory");
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(text, ",", &save); item != NULL && rc == 0;
         item = strtok_r(NULL, ",", &save)) {
        if (sb->nmounts == TS_SANDBOX_MOUNTS_MAX) {
            rc = refuse(msg, msglen, "invalid value for --job-mount: more than %d folders",
                        TS_SANDBOX_MOUNTS_MAX);
            break;
        }
        rc = parse_one(item, o, &sb->mounts[sb->nmounts], msg, msglen);
        if (rc == 0)
            sb->nmounts++;
    }
    free(text);
    /* a folder before the folders inside it, whatever the order given: bound
     * later, the outer one would cover the inner one's bind */
    qsort(sb->mounts, (size_t)sb->nmounts, sizeof(sb->mounts[0]), by_path);
    return rc;
}

int ts_sandbox_loopback_up(char *msg, size_t msglen)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    int rc = fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) != 0 ? -1 : 0;
    if (rc == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
    }
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (rc != 0)
        return refuse(msg, msglen, "could not bring up the job's loopback: %s", strerror(e));
    return 0;
}
