/*
 * checkpoint.c - tessera-gpuload's progress file, DIR/gpuload.ckpt:
 *
 *   # tessera-gpuload checkpoint
 *   step=123
 *   resume_count=1
 *
 * Written to a temporary file in DIR, synced, then renamed over the old one,
 * so a reader sees the old or the new file whole, even after a SIGKILL or a
 * crash of the node. Unknown keys are ignored when read.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/gpuload/gpuload.h"

#define CHECKPOINT_MAX 4096 /* bytes; a larger file is damaged */

static void path_of(const char *dir, const char *suffix, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s%s", dir, TS_GPULOAD_CHECKPOINT_FILE, suffix);
}

enum ts_err ts_gpuload_checkpoint_read(const char *dir, uint64_t *step, bool *found,
                                       struct ts_error *err)
{
    char path[4096], text[CHECKPOINT_MAX + 1];
    path_of(dir, "", path, sizeof path);
    *found = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return TS_OK;
        return ts_error_set(err, TS_ERR_IO, "could not open checkpoint %s: %s", path,
                            strerror(errno));
    }
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, text + n, sizeof text - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return ts_error_set(err, TS_ERR_IO, "could not read checkpoint %s: %s", path,
                                strerror(e));
        }
        if (r == 0 || (n += (size_t)r) == sizeof text - 1)
            break;
    }
    close(fd);
    if (n == sizeof text - 1)
        return ts_error_set(err, TS_ERR_IO, "checkpoint %s is damaged: over %d bytes", path,
                            CHECKPOINT_MAX);
    text[n] = '\0';
    bool have_step = false;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "step=", 5) != 0)
            continue;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(line + 5, &end, 10);
        if (errno || end == line + 5 || *end || line[5] < '0' || line[5] > '9')
            return ts_error_set(err, TS_ERR_IO, "checkpoint %s is damaged: \"%s\"", path, line);
        *step = v;
        have_step = true;
    }
    if (!have_step)
        return ts_error_set(err, TS_ERR_IO, "checkpoint %s is damaged: no step= line", path);
    *found = true;
    return TS_OK;
}

enum ts_err ts_gpuload_checkpoint_write(const char *dir, uint64_t step, int64_t resume_count,
                                        struct ts_error *err)
{
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return ts_error_set(err, TS_ERR_IO, "could not create checkpoint folder %s: %s", dir,
                            strerror(errno));
    char path[4096], tmp[4200], text[256];
    path_of(dir, "", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    int len = snprintf(text, sizeof text,
                       "# tessera-gpuload checkpoint\nstep=%" PRIu64 "\nresume_count=%" PRId64 "\n",
                       step, resume_count);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return ts_error_set(err, TS_ERR_IO, "could not write checkpoint %s: %s", tmp,
                            strerror(errno));
    int e = 0;
    if (write(fd, text, (size_t)len) != len)
        e = errno ? errno : EIO;
    if (!e && fsync(fd) < 0)
        e = errno;
    if (close(fd) < 0 && !e)
        e = errno;
    if (!e && rename(tmp, path) < 0)
        e = errno;
    if (e) {
        unlink(tmp);
        return ts_error_set(err, TS_ERR_IO, "could not write checkpoint %s: %s", path, strerror(e));
    }
    /* The rename itself survives a crash once the folder is synced. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return TS_OK;
}
