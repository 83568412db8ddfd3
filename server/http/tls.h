/*
 * tls.h - HTTPS for the server: the certificate, key and client CA read and
 * checked at start, and the client certificate of a request.
 *
 * libmicrohttpd (built with GnuTLS) does the TLS. With a client CA it asks
 * every client for a certificate but neither requires one nor checks it:
 * ts_http_client_cert checks it against the client CA when asked, so the
 * dispatcher decides which requests need one (server/README.md: agents').
 */
#ifndef TS_SERVER_HTTP_TLS_H
#define TS_SERVER_HTTP_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "api/err.h"
#include "server/http/http.h"

/* The PEM texts handed to libmicrohttpd. */
struct ts_http_tls {
    char *cert;      /* the server's certificate chain */
    char *key;       /* its private key */
    char *client_ca; /* CA certificates client certificates must chain to; NULL: none asked */
};

/*
 * Read and check the files (client_ca may be NULL): each readable PEM, the
 * key private (api/tlsfiles.h), the key the certificate's, the CA file
 * holding certificates, and this libmicrohttpd able to serve HTTPS.
 * TS_ERR_CONFIG naming the option and file otherwise. *out is new (free
 * with ts_http_tls_free).
 */
enum ts_err ts_http_tls_load(const char *cert_file, const char *key_file,
                             const char *client_ca_file, struct ts_http_tls **out,
                             struct ts_error *err);
void ts_http_tls_free(struct ts_http_tls *t); /* NULL is a no-op */

enum ts_http_peer {
    TS_HTTP_PEER_NONE,     /* plain HTTP, or no client certificate sent */
    TS_HTTP_PEER_VERIFIED, /* a client certificate that chains to the client CA */
    TS_HTTP_PEER_REFUSED,  /* one that does not (expired, another CA, ...) */
};

/* The request's client certificate, checked against the client CA;
 * with TS_HTTP_PEER_REFUSED why gets the reason, with TS_HTTP_PEER_VERIFIED
 * the certificate's subject (both at most len-1 bytes). Checked once per
 * connection: a TLS session's client certificate cannot change (no
 * renegotiation), so its later requests reuse the answer. */
enum ts_http_peer ts_http_client_cert(const struct ts_request *r, char *why, size_t len);

/* What a connection's client certificate was found to be: libmicrohttpd's
 * socket context of each connection of a server with a client CA (made and
 * freed by http.c). */
struct ts_http_peer_cache {
    bool known;
    enum ts_http_peer peer;
    char why[512];
};

#endif /* TS_SERVER_HTTP_TLS_H */
