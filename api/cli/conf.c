/*
 * conf.c - the CLI's configuration: flags, environment, config file (see
 * conf.h for the precedence and the file's form).
 */
#include "api/cli/conf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/array.h"

static const char *const keys[] = {"server", "token", "project", "ca", "cert", "key"};

bool ts_conf_key_valid(const char *key)
{
    for (size_t i = 0; i < TS_ARRAY_LEN(keys); i++)
        if (strcmp(key, keys[i]) == 0)
            return true;
    return false;
}

static enum ts_err find_path(struct ts_conf *c, struct ts_error *err)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    const char *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(c->path, sizeof(c->path), "%s/tessera/config.json", xdg);
    else if (home && home[0])
        n = snprintf(c->path, sizeof(c->path), "%s/.config/tessera/config.json", home);
    else
        return ts_error_set(err, TS_ERR_CONFIG,
                            "could not find the config file: neither HOME nor XDG_CONFIG_HOME "
                            "is set");
    if (n < 0 || (size_t)n >= sizeof(c->path))
        return ts_error_set(err, TS_ERR_CONFIG, "config file path is too long");
    return TS_OK;
}

static enum ts_err read_file(struct ts_conf *c, struct ts_error *err)
{
    json_error_t je;
    FILE *f = fopen(c->path, "r");
    if (f == NULL) {
        if (errno != ENOENT)
            return ts_error_set(err, TS_ERR_CONFIG, "could not read config file %s: %s", c->path,
                                strerror(errno));
        c->file = json_object();
        return c->file ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    c->file = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (c->file == NULL)
        return ts_error_set(err, TS_ERR_CONFIG, "could not parse config file %s line %d: %s",
                            c->path, je.line, je.text);
    if (!json_is_object(c->file))
        return ts_error_set(err, TS_ERR_CONFIG, "config file %s must hold a JSON object", c->path);
    const char *k;
    json_t *v;
    json_object_foreach(c->file, k, v) {
        if (!ts_conf_key_valid(k))
            return ts_error_set(err, TS_ERR_CONFIG,
                                "config file %s: unknown member \"%s\" (known: server, token, "
                                "project, ca, cert, key)",
                                c->path, k);
        if (!json_is_string(v))
            return ts_error_set(err, TS_ERR_CONFIG, "config file %s: \"%s\" must be a string",
                                c->path, k);
    }
    return TS_OK;
}

/* The first set of flag, environment variable env and file member key. */
static enum ts_err pick(struct ts_conf *c, const char *flag, const char *flag_name, const char *env,
                        const char *key, char **out, const char **from)
{
    const char *v = NULL;
    if (flag && flag[0]) {
        v = flag;
        *from = flag_name;
    } else if (getenv(env) && getenv(env)[0]) {
        v = getenv(env);
        *from = env;
    } else if (json_string_value(json_object_get(c->file, key)) &&
               json_string_value(json_object_get(c->file, key))[0]) {
        v = json_string_value(json_object_get(c->file, key));
        *from = "config file";
    }
    if (v == NULL)
        return TS_OK;
    *out = strdup(v);
    return *out ? TS_OK : TS_ERR_NOMEM;
}

enum ts_err ts_conf_load(struct ts_conf *c, const struct ts_conf_flags *f, struct ts_error *err)
{
    memset(c, 0, sizeof(*c));
    enum ts_err e = find_path(c, err);
    if (e == TS_OK)
        e = read_file(c, err);
    if (e != TS_OK)
        return e;
    if (pick(c, f->server, "--server", "TESSERA_SERVER", "server", &c->server, &c->server_from) !=
            TS_OK ||
        pick(c, f->token, "--token", "TESSERA_TOKEN", "token", &c->token, &c->token_from) !=
            TS_OK ||
        pick(c, NULL, NULL, "TESSERA_PROJECT", "project", &c->project, &c->project_from) != TS_OK ||
        pick(c, f->ca, "--ca", "TESSERA_CA", "ca", &c->ca, &c->ca_from) != TS_OK ||
        pick(c, f->cert, "--cert", "TESSERA_CERT", "cert", &c->cert, &c->cert_from) != TS_OK ||
        pick(c, f->key, "--key", "TESSERA_KEY", "key", &c->key, &c->key_from) != TS_OK)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (c->server == NULL) {
        c->server = strdup(TS_CONF_DEFAULT_SERVER);
        c->server_from = "default";
        if (c->server == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    /* the server's base: "http://h:8080/api/v1/" is "http://h:8080", since
     * every path the CLI sends begins with /api/v1 */
    for (size_t n = strlen(c->server);;) {
        static const char api[] = "/api/v1";
        if (n > 0 && c->server[n - 1] == '/')
            c->server[--n] = '\0';
        else if (n >= sizeof(api) - 1 && strcmp(c->server + n - (sizeof(api) - 1), api) == 0)
            c->server[n -= sizeof(api) - 1] = '\0';
        else
            break;
    }
    return TS_OK;
}

/* mkdir -p the folder of path, new folders 0700. */
static int make_parents(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(dir, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

static enum ts_err write_file(const struct ts_conf *c, struct ts_error *err)
{
    char *text = json_dumps(c->file, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (text == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", c->path, (long)getpid());
    enum ts_err e = TS_OK;
    int fd = -1;
    if (make_parents(c->path) != 0) {
        e = ts_error_set(err, TS_ERR_IO, "could not create the folder of %s: %s", c->path,
                         strerror(errno));
        goto out;
    }
    unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        e = ts_error_set(err, TS_ERR_IO, "could not write %s: %s", tmp, strerror(errno));
        goto out;
    }
    size_t len = strlen(text), done = 0;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            e = ts_error_set(err, TS_ERR_IO, "could not write %s: %s", tmp, strerror(errno));
            goto out;
        }
        done += (size_t)w;
    }
    if (write(fd, "\n", 1) != 1 || fchmod(fd, 0600) != 0 || fsync(fd) != 0) {
        e = ts_error_set(err, TS_ERR_IO, "could not write %s: %s", tmp, strerror(errno));
        goto out;
    }
    close(fd);
    fd = -1;
    if (rename(tmp, c->path) != 0)
        e = ts_error_set(err, TS_ERR_IO, "could not replace %s: %s", c->path, strerror(errno));
out:
    if (fd >= 0)
        close(fd);
    if (e != TS_OK)
        unlink(tmp);
    free(text);
    return e;
}

enum ts_err ts_conf_store(struct ts_conf *c, const char *key, const char *value,
                          struct ts_error *err)
{
    if (c->file == NULL && (c->file = json_object()) == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (value == NULL)
        json_object_del(c->file, key);
    else if (json_object_set_new(c->file, key, json_string(value)) != 0)
        return ts_error_set(err, TS_ERR_INVALID_VALUE, "%s must be UTF-8 text", key);
    return write_file(c, err);
}

void ts_conf_free(struct ts_conf *c)
{
    if (c == NULL)
        return;
    free(c->server);
    free(c->token);
    free(c->project);
    free(c->ca);
    free(c->cert);
    free(c->key);
    c->server = c->token = c->project = NULL;
    c->ca = c->cert = c->key = NULL;
    if (c->file)
        json_decref(c->file);
    c->file = NULL;
}
