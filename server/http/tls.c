/*
 * tls.c - HTTPS material and client certificates (see tls.h). GnuTLS is the
 * library libmicrohttpd does its TLS with; it is called here to check the
 * files at start (libmicrohttpd would only fail to start, saying nothing
 * useful) and to verify a client's certificate.
 */
#include "server/http/tls.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/tlsfiles.h"

void ts_http_tls_free(struct ts_http_tls *t)
{
    if (t == NULL)
        return;
    if (t->key != NULL)
        memset(t->key, 0, strlen(t->key));
    free(t->cert);
    free(t->key);
    free(t->client_ca);
    free(t);
}

/* The certificate and key parse, and the key is the certificate's. */
static enum ts_err check_pair(const struct ts_http_tls *t, const char *cert_file,
                              const char *key_file, struct ts_error *err)
{
    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) < 0)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    gnutls_datum_t c = {(unsigned char *)t->cert, (unsigned)strlen(t->cert)};
    gnutls_datum_t k = {(unsigned char *)t->key, (unsigned)strlen(t->key)};
    int rc = gnutls_certificate_set_x509_key_mem2(cred, &c, &k, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_certificate_free_credentials(cred);
    if (rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH)
        return ts_error_set(err, TS_ERR_CONFIG,
                            "the --tls-key %s is not the key of the --tls-cert %s", key_file,
                            cert_file);
    if (rc < 0) {
        ts_error_set(err, TS_ERR_CONFIG, "could not load --tls-cert %s with --tls-key %s: %s",
                     cert_file, key_file, gnutls_strerror(rc));
        ts_error_hint(err, "both must be PEM; an encrypted key is not supported");
        return TS_ERR_CONFIG;
    }
    return TS_OK;
}

/* The CA file holds at least one certificate GnuTLS can use. */
static enum ts_err check_ca(const char *ca, const char *file, struct ts_error *err)
{
    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) < 0)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    gnutls_datum_t d = {(unsigned char *)ca, (unsigned)strlen(ca)};
    int n = gnutls_certificate_set_x509_trust_mem(cred, &d, GNUTLS_X509_FMT_PEM);
    gnutls_certificate_free_credentials(cred);
    if (n < 0)
        return ts_error_set(err, TS_ERR_CONFIG, "could not load --tls-client-ca %s: %s", file,
                            gnutls_strerror(n));
    if (n == 0)
        return ts_error_set(err, TS_ERR_CONFIG, "--tls-client-ca %s holds no certificate", file);
    return TS_OK;
}

enum ts_err ts_http_tls_load(const char *cert_file, const char *key_file,
                             const char *client_ca_file, struct ts_http_tls **out,
                             struct ts_error *err)
{
    *out = NULL;
    if (cert_file == NULL || key_file == NULL)
        return ts_error_set(err, TS_ERR_CONFIG, "%s is given without %s: HTTPS needs both",
                            cert_file ? "--tls-cert" : "--tls-key",
                            cert_file ? "--tls-key" : "--tls-cert");
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return ts_error_set(err, TS_ERR_CONFIG,
                            "this libmicrohttpd was built without TLS: --tls-cert cannot be used");
    struct ts_http_tls *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    enum ts_err e = TS_ERR_CONFIG;
    t->cert = ts_tlsfiles_read("--tls-cert", cert_file, false, NULL, err);
    if (t->cert == NULL)
        goto out;
    t->key = ts_tlsfiles_read("--tls-key", key_file, true, NULL, err);
    if (t->key == NULL)
        goto out;
    e = check_pair(t, cert_file, key_file, err);
    if (e != TS_OK)
        goto out;
    if (client_ca_file != NULL) {
        e = TS_ERR_CONFIG;
        t->client_ca = ts_tlsfiles_read("--tls-client-ca", client_ca_file, false, NULL, err);
        if (t->client_ca == NULL)
            goto out;
        e = check_ca(t->client_ca, client_ca_file, err);
        if (e != TS_OK)
            goto out;
    }
    *out = t;
    return TS_OK;
out:
    ts_http_tls_free(t);
    return e;
}

/* The subject of the first certificate the client sent, into buf. */
static void subject(const gnutls_datum_t *der, char *buf, size_t len)
{
    gnutls_x509_crt_t crt;
    snprintf(buf, len, "?");
    if (gnutls_x509_crt_init(&crt) < 0)
        return;
    size_t n = len;
    if (gnutls_x509_crt_import(crt, der, GNUTLS_X509_FMT_DER) >= 0 &&
        gnutls_x509_crt_get_dn(crt, buf, &n) < 0)
        snprintf(buf, len, "?");
    gnutls_x509_crt_deinit(crt);
}

/* The client certificate of TLS session s, checked (see the header). */
static enum ts_http_peer verify(gnutls_session_t s, char *why, size_t len)
{
    unsigned n = 0;
    const gnutls_datum_t *certs = gnutls_certificate_get_peers(s, &n);
    if (certs == NULL || n == 0)
        return TS_HTTP_PEER_NONE;
    /* checked against the trusted CAs libmicrohttpd was given
     * (MHD_OPTION_HTTPS_MEM_TRUST), for use by a TLS client */
    gnutls_typed_vdata_st purpose = {.type = GNUTLS_DT_KEY_PURPOSE_OID,
                                     .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT};
    unsigned status = 0;
    int rc = gnutls_certificate_verify_peers(s, &purpose, 1, &status);
    if (rc < 0) {
        snprintf(why, len, "%s", gnutls_strerror(rc));
        return TS_HTTP_PEER_REFUSED;
    }
    if (status != 0) {
        gnutls_datum_t text = {NULL, 0};
        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0) >= 0 &&
            text.data != NULL)
            snprintf(why, len, "%s", (const char *)text.data);
        else
            snprintf(why, len, "verification status 0x%x", status);
        gnutls_free(text.data);
        return TS_HTTP_PEER_REFUSED;
    }
    subject(&certs[0], why, len);
    return TS_HTTP_PEER_VERIFIED;
}

enum ts_http_peer ts_http_client_cert(const struct ts_request *r, char *why, size_t len)
{
    if (len > 0)
        why[0] = '\0';
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (ci == NULL || ci->tls_session == NULL)
        return TS_HTTP_PEER_NONE;
    gnutls_session_t s = (gnutls_session_t)ci->tls_session;
    ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct ts_http_peer_cache *cache = ci != NULL ? ci->socket_context : NULL;
    if (cache == NULL)
        return verify(s, why, len);
    if (!cache->known) {
        cache->peer = verify(s, cache->why, sizeof(cache->why));
        cache->known = true;
    }
    snprintf(why, len, "%s", cache->why);
    return cache->peer;
}
