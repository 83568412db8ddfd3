/*
 * pgembed_files.c - the file and folder helpers of the embedded PostgreSQL:
 * paths joined with a length check, its folders owned by the PostgreSQL user
 * at 0700, settings written atomically and owned by that user, and the tail
 * of a log for an error's detail.
 */
#include "server/store/pgembed_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/array.h"
#include "api/files.h"

enum ts_err ts_pgembed_join(char *out, size_t len, const char *a, const char *b,
                            struct ts_error *err)
{
    int n = snprintf(out, len, "%s%s", a, b);
    if (n < 0 || (size_t)n >= len)
        return ts_error_set(err, TS_ERR_CONFIG, "path too long: %s%s", a, b);
    return TS_OK;
}

enum ts_err ts_pgembed_io_error(struct ts_error *err, const char *what, const char *path)
{
    return ts_error_set(err, TS_ERR_IO, "could not %s \"%s\": %s", what, path, strerror(errno));
}

bool ts_pgembed_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool ts_pgembed_file_exists(const char *dir, const char *name)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return false;
    return access(path, F_OK) == 0;
}

bool ts_pgembed_dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return true;
    bool empty = true;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            empty = false;
            break;
        }
    }
    closedir(d);
    return empty;
}

/* mkdir -p: missing parents 0755, the folder itself `mode`. */
enum ts_err ts_pgembed_mkdir_p(const char *path, mode_t mode, struct ts_error *err)
{
    int rc = ts_files_mkdirs_parents(path, 0755, mode);
    if (rc == -ENAMETOOLONG)
        return ts_error_set(err, TS_ERR_CONFIG, "path too long: %s", path);
    if (rc == -ENOTDIR)
        return ts_error_set(err, TS_ERR_IO, "could not create folder \"%s\": not a folder", path);
    errno = -rc;
    return rc != 0 ? ts_pgembed_io_error(err, "create folder", path) : TS_OK;
}

/* A folder of ours under DIR/pg: exists, owned by the PostgreSQL user, 0700. */
enum ts_err ts_pgembed_own_dir(const struct ts_pgembed *pg, const char *path, struct ts_error *err)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return ts_pgembed_io_error(err, "create folder", path);
    struct stat st;
    if (lstat(path, &st) != 0)
        return ts_pgembed_io_error(err, "stat", path);
    if (!S_ISDIR(st.st_mode))
        return ts_error_set(err, TS_ERR_IO, "\"%s\" is not a folder", path);
    if (pg->ru.drop && (st.st_uid != pg->ru.uid || st.st_gid != pg->ru.gid) &&
        chown(path, pg->ru.uid, pg->ru.gid) != 0)
        return ts_pgembed_io_error(err, "change the owner of", path);
    if ((st.st_mode & 07777) != 0700 && chmod(path, 0700) != 0)
        return ts_pgembed_io_error(err, "change the mode of", path);
    return TS_OK;
}

/*
 * Write a whole file atomically (temporary file, fsync, rename), owned by the
 * PostgreSQL user so that the cluster can read it.
 */
enum ts_err ts_pgembed_write_file(const struct ts_pgembed *pg, const char *path, const char *text,
                                  struct ts_error *err)
{
    char tmp[PATH_MAX];
    enum ts_err e = ts_pgembed_join(tmp, sizeof(tmp), path, ".tmp", err);
    if (e != TS_OK)
        return e;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return ts_pgembed_io_error(err, "create", tmp);
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            e = ts_pgembed_io_error(err, "write", tmp);
            goto out;
        }
        off += (size_t)w;
    }
    if (pg->ru.drop && fchown(fd, pg->ru.uid, pg->ru.gid) != 0) {
        e = ts_pgembed_io_error(err, "change the owner of", tmp);
        goto out;
    }
    if (fsync(fd) != 0) {
        e = ts_pgembed_io_error(err, "fsync", tmp);
        goto out;
    }
    if (rename(tmp, path) != 0)
        e = ts_pgembed_io_error(err, "rename", tmp);
out:
    close(fd);
    if (e != TS_OK)
        unlink(tmp);
    return e;
}

enum ts_err ts_pgembed_append_file(const char *path, const char *text, struct ts_error *err)
{
    FILE *f = fopen(path, "ae");
    if (f == NULL)
        return ts_pgembed_io_error(err, "open", path);
    bool ok = fputs(text, f) >= 0;
    ok = fflush(f) == 0 && ok;
    ok = fsync(fileno(f)) == 0 && ok;
    if (fclose(f) != 0 || !ok)
        return ts_pgembed_io_error(err, "write", path);
    return TS_OK;
}

bool ts_pgembed_file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, needle) == line;
    fclose(f);
    return found;
}

/* The last lines of a log file that fit in out, joined with " | ". */
void ts_pgembed_log_tail(const char *path, char *out, size_t len)
{
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[4096];
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    char *lines[128];
    int nl = 0;
    char *save = NULL;
    for (char *l = strtok_r(buf, "\r\n", &save); l != NULL; l = strtok_r(NULL, "\r\n", &save)) {
        if (nl == (int)(TS_ARRAY_LEN(lines))) {
            memmove(lines, lines + 1, (size_t)(nl - 1) * sizeof(lines[0]));
            nl--;
        }
        lines[nl++] = l;
    }
    if (nl == 0)
        return;
    int first = nl;
    size_t total = 0;
    while (first > 0) {
        size_t add = strlen(lines[first - 1]) + (first < nl ? 3 : 0);
        if (total + add + 1 > len)
            break;
        total += add;
        first--;
    }
    if (first == nl) { /* even the last line is too long: keep its end */
        size_t l = strlen(lines[nl - 1]);
        snprintf(out, len, "%s", lines[nl - 1] + (l - (len - 1)));
        return;
    }
    size_t o = 0;
    for (int i = first; i < nl; i++)
        o += (size_t)snprintf(out + o, len - o, "%s%s", i > first ? " | " : "", lines[i]);
}
