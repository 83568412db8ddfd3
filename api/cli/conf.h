/*
 * conf.h - where the CLI finds its server, token and default project.
 *
 * Precedence, highest first: --server/--token/--ca/--cert/--key (and -p for
 * the project), TESSERA_SERVER/TESSERA_TOKEN/TESSERA_CA/TESSERA_CERT/
 * TESSERA_KEY/TESSERA_PROJECT, the config file, and for the server the
 * built-in http://127.0.0.1:8080. The config file is
 * $XDG_CONFIG_HOME/tessera/config.json, else ~/.config/tessera/config.json:
 * one JSON object with the string members "server", "token", "project",
 * "ca", "cert" and "key" (an unknown member is an error, so that a typo is
 * not silently ignored). ca, cert and key are file names, for an https://
 * server: the CA the server's certificate must chain to, and a client
 * certificate with its key.
 * It is written by `tessera login` and `tessera config set`, mode 0600 in a
 * folder of mode 0700, replaced atomically.
 */
#ifndef TS_API_CLI_CONF_H
#define TS_API_CLI_CONF_H

#include <jansson.h>
#include <stdbool.h>

#include "api/err.h"

#define TS_CONF_DEFAULT_SERVER "http://127.0.0.1:8080"

struct ts_conf {
    char *server, *token, *project; /* new; token and project may be NULL */
    char *ca, *cert, *key;          /* new; TLS files, each NULL when not given */
    /* where each came from: "--server", "TESSERA_SERVER", "config file",
     * "default" (static strings), or NULL when unset */
    const char *server_from, *token_from, *project_from;
    const char *ca_from, *cert_from, *key_from;
    char path[4096]; /* the config file */
    json_t *file;    /* its object (new); {} when it does not exist */
};

/* The global flags, each NULL when not given (borrowed). */
struct ts_conf_flags {
    const char *server, *token, *ca, *cert, *key;
};

/* Fill c from the flags, the environment and the config file.
 * TS_ERR_CONFIG with a message naming the file when it cannot be read or
 * is malformed. ts_conf_free(c) either way. */
enum ts_err ts_conf_load(struct ts_conf *c, const struct ts_conf_flags *flags,
                         struct ts_error *err);
/* Set (value a string, borrowed) or remove (value NULL) member key of
 * c->file and write the file. TS_ERR_IO with the path on failure. */
enum ts_err ts_conf_store(struct ts_conf *c, const char *key, const char *value,
                          struct ts_error *err);
void ts_conf_free(struct ts_conf *c); /* NULL is a no-op */

/* Whether key is one the config file may hold. */
bool ts_conf_key_valid(const char *key);

#endif /* TS_API_CLI_CONF_H */
