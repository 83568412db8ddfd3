/*
 * tlsfiles.c - reading and checking the PEM files of TLS (see tlsfiles.h).
 */
#include "api/tlsfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/array.h"

/* A key file that group or others may read or write; TS_OK when private. */
static enum ts_err key_private(const char *opt, const char *path, const struct stat *st,
                               struct ts_error *err)
{
    mode_t open_bits = st->st_uid == 0 ? (S_IWGRP | S_IXGRP | S_IRWXO) : (S_IRWXG | S_IRWXO);
    if ((st->st_mode & open_bits) == 0)
        return TS_OK;
    ts_error_set(err, TS_ERR_CONFIG,
                 "private key file for %s is open to group or others: %s (mode %04o)", opt, path,
                 (unsigned)(st->st_mode & 07777));
    ts_error_hint(err, "chmod 600 %s (or 640 with owner root)", path);
    return TS_ERR_CONFIG;
}

char *ts_tlsfiles_read(const char *opt, const char *path, bool private_key, size_t *len,
                       struct ts_error *err)
{
    if (path == NULL || path[0] == '\0') {
        ts_error_set(err, TS_ERR_CONFIG, "%s needs a file name", opt);
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ts_error_set(err, TS_ERR_CONFIG, "could not open %s file %s: %s", opt, path,
                     strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ts_error_set(err, TS_ERR_CONFIG, "could not read %s file %s: %s", opt, path,
                     strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        ts_error_set(err, TS_ERR_CONFIG, "%s file %s is not a regular file", opt, path);
        goto out;
    }
    if (private_key && key_private(opt, path, &st, err) != TS_OK)
        goto out;
    if (st.st_size <= 0 || (size_t)st.st_size > TS_TLSFILES_MAX) {
        ts_error_set(err, TS_ERR_CONFIG, "%s file %s is %lld bytes; a PEM file has 1 to %u", opt,
                     path, (long long)st.st_size, TS_TLSFILES_MAX);
        goto out;
    }
    size_t want = (size_t)st.st_size, n = 0;
    buf = malloc(want + 1);
    if (buf == NULL) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto out;
    }
    while (n < want) {
        ssize_t r = read(fd, buf + n, want - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            ts_error_set(err, TS_ERR_CONFIG, "could not read %s file %s: %s", opt, path,
                         r < 0 ? strerror(errno) : "it shrank while read");
            free(buf);
            buf = NULL;
            goto out;
        }
        n += (size_t)r;
    }
    buf[n] = '\0';
    if (strstr(buf, "-----BEGIN ") == NULL) {
        ts_error_set(err, TS_ERR_CONFIG, "%s file %s holds no PEM block (\"-----BEGIN ...\")", opt,
                     path);
        free(buf);
        buf = NULL;
        goto out;
    }
    if (len != NULL)
        *len = n;
out:
    close(fd);
    return buf;
}

enum ts_err ts_tlsfiles_check_client(const char *ca, const char *cert, const char *key,
                                     struct ts_error *err)
{
    if ((cert == NULL) != (key == NULL))
        return ts_error_set(err, TS_ERR_CONFIG,
                            "%s is given without %s: a client certificate "
                            "needs both",
                            cert ? "--cert" : "--key", cert ? "--key" : "--cert");
    const struct {
        const char *opt, *path;
        bool key;
    } files[] = {{"--ca", ca, false}, {"--cert", cert, false}, {"--key", key, true}};
    for (size_t i = 0; i < TS_ARRAY_LEN(files); i++) {
        if (files[i].path == NULL)
            continue;
        char *text = ts_tlsfiles_read(files[i].opt, files[i].path, files[i].key, NULL, err);
        if (text == NULL)
            return err ? err->code : TS_ERR_CONFIG;
        free(text);
    }
    return TS_OK;
}
