/*
 * certpin.h - the server certificate `tessera-agent --join` shows and pins:
 * fetched over one TLS handshake with libcurl, its SHA-256 fingerprint in
 * the form `openssl x509 -noout -fingerprint -sha256` prints.
 */
#ifndef TS_AGENT_DAEMON_CERTPIN_H
#define TS_AGENT_DAEMON_CERTPIN_H

#include <stdbool.h>

#include "agent/daemon/conn.h"
#include "api/err.h"

/* "AB:CD:...": 32 bytes as 95 characters and a NUL */
#define TS_CERTPIN_LEN 96

/*
 * The certificate the https server at url presents (GET url/healthz, no
 * token sent). With verify, the certificate must pass tls's ca (or the
 * system's CAs); without, any certificate is fetched, for a caller that
 * compares its fingerprint itself. On TS_OK *pem is new (free it) and fp
 * holds the fingerprint. tls is borrowed (cert and key answer a server
 * that asks for a client certificate).
 */
enum ts_err ts_certpin_fetch(const char *url, const struct ts_conn_tls *tls, bool verify,
                             char **pem, char fp[TS_CERTPIN_LEN], struct ts_error *err);

/* Whether the fingerprint given (any case, with or without colons, with
 * or without a "sha256:" or "SHA256 Fingerprint=" prefix) is fp. */
bool ts_certpin_matches(const char *given, const char *fp);

#endif
