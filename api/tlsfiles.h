/*
 * tlsfiles.h - the PEM files of TLS: certificates, private keys and CA
 * bundles named on a command line, read and checked the same way by the
 * server, the agent and the CLI, so that each refuses to start with a clear
 * message naming the option and the file.
 *
 * A private key must not be open to others: a key file readable or writable
 * by "others", or by its group unless root owns it (0640 root:ssl-cert is
 * Debian's way), is refused, as PostgreSQL and OpenSSH refuse theirs.
 */
#ifndef TS_API_TLSFILES_H
#define TS_API_TLSFILES_H

#include <stdbool.h>
#include <stddef.h>

#include "api/err.h"

#define TS_TLSFILES_MAX (1u << 20) /* largest PEM file read */

/*
 * Read the PEM file path, named by option opt ("--tls-cert") in messages.
 * private_key: also check its permissions (see above). The text must hold
 * a "-----BEGIN " line. New NUL-terminated text (free), *len its length
 * (len may be NULL); NULL with err filled (TS_ERR_CONFIG) when the file is
 * missing, unreadable, empty, too large, not PEM, or a key open to others.
 */
char *ts_tlsfiles_read(const char *opt, const char *path, bool private_key, size_t *len,
                       struct ts_error *err);

/*
 * Check what a TLS client is given (each NULL when not given): the CA file
 * and the client certificate and key, which go together. TS_OK, or
 * TS_ERR_CONFIG naming the option and file.
 */
enum ts_err ts_tlsfiles_check_client(const char *ca, const char *cert, const char *key,
                                     struct ts_error *err);

#endif /* TS_API_TLSFILES_H */
