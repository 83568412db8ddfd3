/*
 * certpin.c - the server certificate's SHA-256 fingerprint (certpin.h):
 * libcurl's CURLINFO_CERTINFO hands over the chain as PEM, OpenSSL's
 * libcrypto digests the DER of the first, the server's own.
 */
#include "agent/daemon/certpin.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

static size_t discard(char *p, size_t s, size_t n, void *u)
{
    (void)p;
    (void)u;
    return s * n;
}

/* The PEM of the chain's first certificate, new, or NULL. */
static char *first_pem(CURL *h)
{
    struct curl_certinfo *ci = NULL;
    if (curl_easy_getinfo(h, CURLINFO_CERTINFO, &ci) != CURLE_OK || ci == NULL ||
        ci->num_of_certs < 1)
        return NULL;
    for (struct curl_slist *s = ci->certinfo[0]; s != NULL; s = s->next)
        if (strncmp(s->data, "Cert:", 5) == 0)
            return strdup(s->data + 5);
    return NULL;
}

static enum ts_err digest(const char *pem, char fp[TS_CERTPIN_LEN], struct ts_error *err)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = b != NULL ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    bool ok = x != NULL && X509_digest(x, EVP_sha256(), md, &n) == 1 && n == 32;
    X509_free(x);
    BIO_free(b);
    if (!ok)
        return ts_error_set(err, TS_ERR_IO, "could not read the server's certificate");
    for (unsigned int i = 0; i < n; i++)
        snprintf(fp + 3 * i, 4, i + 1 < n ? "%02X:" : "%02X", md[i]);
    return TS_OK;
}

enum ts_err ts_certpin_fetch(const char *url, const struct ts_conn_tls *tls, bool verify,
                             char **pem, char fp[TS_CERTPIN_LEN], struct ts_error *err)
{
    *pem = NULL;
    char full[2048], errbuf[CURL_ERROR_SIZE] = "";
    if (snprintf(full, sizeof(full), "%s/healthz", url) >= (int)sizeof(full))
        return ts_error_set(err, TS_ERR_CONFIG, "the server's URL is too long");
    CURL *h = curl_easy_init();
    if (h == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_CERTINFO, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    if (tls->ca != NULL)
        curl_easy_setopt(h, CURLOPT_CAINFO, tls->ca);
    if (tls->cert != NULL)
        curl_easy_setopt(h, CURLOPT_SSLCERT, tls->cert);
    if (tls->key != NULL)
        curl_easy_setopt(h, CURLOPT_SSLKEY, tls->key);
    if (!verify) { /* the caller compares the fingerprint instead */
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    CURLcode rc = curl_easy_perform(h);
    enum ts_err e = TS_OK;
    if (rc != CURLE_OK)
        e = ts_error_set(err, TS_ERR_IO, "could not reach %s: %s", url,
                         errbuf[0] ? errbuf : curl_easy_strerror(rc));
    else if ((*pem = first_pem(h)) == NULL)
        e = ts_error_set(err, TS_ERR_IO, "the server at %s showed no certificate", url);
    else
        e = digest(*pem, fp, err);
    curl_easy_cleanup(h);
    if (e != TS_OK) {
        free(*pem);
        *pem = NULL;
    }
    return e;
}

bool ts_certpin_matches(const char *given, const char *fp)
{
    if (strncasecmp(given, "sha256:", 7) == 0)
        given += 7;
    else if (strncasecmp(given, "sha256 fingerprint=", 19) == 0)
        given += 19;
    size_t j = 0;
    for (const char *p = given; *p != '\0'; p++) {
        if (*p == ':')
            continue;
        while (fp[j] == ':')
            j++;
        if (fp[j] == '\0' || toupper((unsigned char)*p) != fp[j])
            return false;
        j++;
    }
    return fp[j] == '\0' && j > 0;
}
