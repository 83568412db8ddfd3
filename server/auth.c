/*
 * auth.c - token secrets, hashing, and the role/route access rules:
 *   admin   everything
 *   member  reads, and submits/cancels jobs of its projects
 *   viewer  reads (of its projects when it was given some)
 *   agent   only the node endpoints, and of the nodes its token names
 *           (a token naming none acts for any node)
 * With --tls-client-ca (mTLS), an agent token is accepted only over a
 * connection whose client certificate chains to that CA; a certificate any
 * other client sends must chain to it too. People's tokens need none.
 */
#include "server/auth.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <string.h>
#include <strings.h>

#include "api/log.h"
#include "server/authcache.h"
#include "server/http/tls.h"
#include "server/routes.h"
#include "server/store/store.h"

void ts_auth_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    static const char hex[] = "0123456789abcdef";
    EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

enum ts_err ts_auth_new_secret(char out[TS_AUTH_SECRET_LEN], struct ts_error *err)
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char raw[33];
    if (RAND_bytes(raw, 32) != 1)
        return ts_error_set(err, TS_ERR_INTERNAL, "could not generate a random token");
    raw[32] = 0;
    memcpy(out, "tsk_", 4);
    size_t o = 4;
    /* 32 bytes -> 43 base64url characters, no padding */
    for (size_t i = 0; i < 32; i += 3) {
        unsigned v =
            (unsigned)raw[i] << 16 | (unsigned)raw[i + 1] << 8 | (i + 2 < 32 ? raw[i + 2] : 0);
        out[o++] = b64url[(v >> 18) & 63];
        out[o++] = b64url[(v >> 12) & 63];
        out[o++] = b64url[(v >> 6) & 63];
        if (i + 2 < 32)
            out[o++] = b64url[v & 63];
    }
    out[o] = '\0';
    return TS_OK;
}

static bool role_allows(enum ts_role role, enum ts_access access, const char *method)
{
    bool read = strcmp(method, "GET") == 0;
    switch (access) {
    case TS_ACCESS_PUBLIC:
        return true;
    case TS_ACCESS_READ:
        return role != TS_ROLE_AGENT;
    case TS_ACCESS_SUBMIT:
        return role == TS_ROLE_ADMIN || role == TS_ROLE_MEMBER;
    case TS_ACCESS_NODE:
        return role == TS_ROLE_ADMIN || role == TS_ROLE_AGENT || (read && role != TS_ROLE_AGENT);
    case TS_ACCESS_ADMIN:
        return role == TS_ROLE_ADMIN;
    case TS_ACCESS_AGENT:
        return role == TS_ROLE_ADMIN || role == TS_ROLE_AGENT;
    case TS_ACCESS_ANY:
        return true;
    }
    return false;
}

/* mTLS (--tls-client-ca): the client certificate the token t comes with. */
static enum ts_err client_cert_check(const struct ts_ctx *ctx, const struct ts_token_auth *t,
                                     struct ts_error *err)
{
    if (ctx->srv->cfg.tls_client_ca == NULL)
        return TS_OK;
    char why[512];
    enum ts_http_peer p = ts_http_client_cert(ctx->req, why, sizeof(why));
    if (p == TS_HTTP_PEER_REFUSED) {
        ts_error_set(err, TS_ERR_FORBIDDEN,
                     "the client certificate is not signed by a CA this server trusts: %s", why);
        ts_error_hint(err, "use a certificate issued by the server's --tls-client-ca, or none");
        return TS_ERR_FORBIDDEN;
    }
    if (p == TS_HTTP_PEER_NONE && t->role == TS_ROLE_AGENT) {
        ts_error_set(err, TS_ERR_FORBIDDEN,
                     "token \"%s\" has the agent role: it is accepted only with a client "
                     "certificate, and this connection sent none",
                     t->name);
        ts_error_hint(err, "give the agent --cert FILE and --key FILE, a certificate issued by "
                           "the server's --tls-client-ca");
        return TS_ERR_FORBIDDEN;
    }
    if (p == TS_HTTP_PEER_VERIFIED && t->role == TS_ROLE_AGENT)
        ts_log_debug("agent token \"%s\" with client certificate \"%s\"", t->name, why);
    return TS_OK;
}

enum ts_err ts_auth_check(struct ts_ctx *ctx, enum ts_access access, struct ts_error *err)
{
    if (access == TS_ACCESS_PUBLIC)
        return TS_OK;
    const char *h = ts_http_header(ctx->req, "Authorization");
    if (h == NULL) {
        ts_error_set(err, TS_ERR_UNAUTHENTICATED, "missing bearer token");
        ts_error_hint(err, "send the header \"Authorization: Bearer TOKEN\"");
        return TS_ERR_UNAUTHENTICATED;
    }
    if (strncasecmp(h, "Bearer ", 7) != 0 || h[7] == '\0' || strlen(h + 7) > 256)
        return ts_error_set(err, TS_ERR_UNAUTHENTICATED,
                            "malformed Authorization header: expected \"Bearer TOKEN\"");
    char hash[65];
    ts_auth_sha256_hex(h + 7, strlen(h + 7), hash);
    struct ts_token_auth t;
    if (!ts_authcache_get(ctx->srv->auth_cache, hash, ctx->req->arena, &t)) {
        struct ts_dbconn *c = ts_ctx_db(ctx, err);
        if (c == NULL)
            return err ? err->code : TS_ERR_DATABASE;
        enum ts_err e = ts_store_token_authenticate(c, hash, ctx->req->arena, &t, err);
        if (e == TS_ERR_NOT_FOUND)
            return ts_error_set(err, TS_ERR_UNAUTHENTICATED, "invalid or revoked token");
        if (e != TS_OK)
            return e;
        ts_authcache_put(ctx->srv->auth_cache, hash, &t);
    }
    ctx->who.token_id = t.id;
    memcpy(ctx->who.name, t.name, sizeof(ctx->who.name));
    ctx->who.role = t.role;
    ctx->who.project_ids = t.project_ids;
    ctx->who.nprojects = t.nprojects;
    ctx->who.nodes = t.nodes;
    ctx->authenticated = true;
    enum ts_err ce = client_cert_check(ctx, &t, err);
    if (ce != TS_OK)
        return ce;
    if (!role_allows(t.role, access, ctx->req->method)) {
        return ts_error_set(err, TS_ERR_FORBIDDEN, "token \"%s\" with role %s may not %s %s",
                            t.name, ts_role_name(t.role), ctx->req->method, ctx->req->path);
    }
    /* every route under /nodes/{name} acts as or reads that node: an agent
     * token bound to nodes may use them only for its own */
    const struct ts_request *r = ctx->req;
    static const char node_routes[] = "/api/v1/nodes/{name}";
    if (t.role == TS_ROLE_AGENT && r->route_index >= 0 &&
        (size_t)r->route_index < ts_routes_count &&
        strncmp(ts_routes[r->route_index].path, node_routes, sizeof(node_routes) - 1) == 0 &&
        r->nparams > 0 && !ts_auth_node_allowed(ctx, r->params[0])) {
        ts_error_set(err, TS_ERR_FORBIDDEN, "token \"%s\" may not act for node \"%s\"", t.name,
                     r->params[0]);
        ts_error_hint(err, "an agent token acts only for the nodes it was created with");
        return TS_ERR_FORBIDDEN;
    }
    return TS_OK;
}

bool ts_auth_node_allowed(const struct ts_ctx *ctx, const char *node)
{
    const struct ts_principal *w = &ctx->who;
    if (w->role != TS_ROLE_AGENT || w->nodes == NULL)
        return true;
    for (const char *p = w->nodes; *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (ts_token_node_matches(p, len, node))
            return true;
        p += len;
        if (*p == ',')
            p++;
    }
    return false;
}

bool ts_auth_restricted(const struct ts_ctx *ctx)
{
    const struct ts_principal *w = &ctx->who;
    return w->role == TS_ROLE_MEMBER || (w->role == TS_ROLE_VIEWER && w->nprojects > 0);
}

bool ts_auth_project_allowed(const struct ts_ctx *ctx, int64_t project_id)
{
    if (!ts_auth_restricted(ctx))
        return true;
    for (size_t i = 0; i < ctx->who.nprojects; i++)
        if (ctx->who.project_ids[i] == project_id)
            return true;
    return false;
}

const int64_t *ts_auth_project_ids(const struct ts_ctx *ctx, size_t *n)
{
    static const int64_t none[1];
    *n = ctx->who.nprojects;
    if (!ts_auth_restricted(ctx))
        return NULL;
    return ctx->who.project_ids ? ctx->who.project_ids : none;
}

bool ts_auth_env_visible(const struct ts_ctx *ctx)
{
    return ctx->who.role == TS_ROLE_ADMIN || ts_auth_restricted(ctx);
}
