/*
 * files.c - atomic writes, whole-file reads and folder trees.
 */
#include "api/files.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/wire.h"

static int write_file(const char *path, const void *data, size_t len, mode_t mode, bool sync)
{
    char tmp[PATH_MAX];
    /* one temporary name per thread: two writers never share one */
    if (snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)gettid()) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    if (fchmod(fd, mode) != 0) { /* the mode asked for, not what the umask left */
        int e = errno;
        close(fd);
        unlink(tmp);
        return -e;
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return -e;
        }
        p += n;
        left -= (size_t)n;
    }
    int bad = sync && fsync(fd) != 0;
    int e = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(tmp);
        return -e;
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return -e;
    }
    return 0;
}

int ts_files_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
    return write_file(path, data, len, mode, true);
}

int ts_files_write_quick(const char *path, const void *data, size_t len, mode_t mode)
{
    return write_file(path, data, len, mode, false);
}

int ts_files_write_json(const char *path, const json_t *v, mode_t mode)
{
    char *text = ts_wire_dumps(v);
    if (text == NULL)
        return -ENOMEM;
    size_t n = strlen(text);
    int rc = ts_files_write_atomic(path, text, n, mode);
    free(text);
    return rc;
}

char *ts_files_read(const char *path, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf != NULL) {
        if (n == cap) {
            if (cap >= max) {
                free(buf);
                buf = NULL;
                errno = EFBIG;
                break;
            }
            cap = cap * 2 > max ? max : cap * 2;
            char *nb = realloc(buf, cap + 1);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(buf);
            buf = NULL;
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    int e = errno;
    close(fd);
    if (buf == NULL) {
        errno = e;
        return NULL;
    }
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

json_t *ts_files_read_json(const char *path)
{
    size_t n;
    char *text = ts_files_read(path, 16u << 20, &n);
    if (text == NULL)
        return NULL;
    json_t *v = json_loadb(text, n, JSON_REJECT_DUPLICATES, NULL);
    free(text);
    return v;
}

int ts_files_mkdirs(const char *path, mode_t mode)
{
    return ts_files_mkdirs_parents(path, mode, mode);
}

int ts_files_mkdirs_parents(const char *path, mode_t parents, mode_t mode)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -(errno = ENAMETOOLONG);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        mode_t m = c == '\0' ? mode : parents;
        /* made: its mode exactly, not what the umask leaves of it */
        if (mkdir(buf, m) == 0 ? chmod(buf, m) != 0 : errno != EEXIST)
            return -errno;
        *p = c;
        if (c == '\0')
            break;
    }
    struct stat st;
    if (stat(buf, &st) != 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -(errno = ENOTDIR);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

int ts_files_remove_tree(const char *path)
{
    if (nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return errno == ENOENT ? 0 : -errno;
    return 0;
}

bool ts_files_exists(const char *path)
{
    return access(path, F_OK) == 0;
}
