/*
 * auth.h - bearer tokens: secrets, their SHA-256, and who may do what.
 *
 * A secret is "tsk_" followed by 43 base64url characters (32 random bytes
 * from OpenSSL). Only its SHA-256, in hex, is stored; the secret is shown once.
 */
#ifndef TS_SERVER_AUTH_H
#define TS_SERVER_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "server/http/route.h"
#include "server/server.h"

#define TS_AUTH_SECRET_LEN 48 /* "tsk_" + 43 + NUL, rounded */

/* out gets 64 hex digits and a NUL. */
void ts_auth_sha256_hex(const void *data, size_t len, char out[65]);
/* A new random secret; TS_ERR_INTERNAL when the RNG fails. */
enum ts_err ts_auth_new_secret(char out[TS_AUTH_SECRET_LEN], struct ts_error *err);

/* Authenticate the request's bearer token (401 on a missing or unknown
 * token) and check the role against the route's access (403). Fills
 * ctx->who. */
enum ts_err ts_auth_check(struct ts_ctx *ctx, enum ts_access access, struct ts_error *err);

/* Whether the caller may act as this node: false only for an agent token
 * bound to nodes none of which matches (ts_auth_check refuses such a token
 * every /nodes/{name}/... route). */
bool ts_auth_node_allowed(const struct ts_ctx *ctx, const char *node);
/* Whether the caller may read the values of the env of a job it can see:
 * admins, and members and viewers limited to projects (which see only their
 * projects' jobs); an unrestricted viewer sees the names only. */
bool ts_auth_env_visible(const struct ts_ctx *ctx);

/* Whether the caller may act on / see this project. Admins and unrestricted
 * viewers may see every project; members only theirs. */
bool ts_auth_project_allowed(const struct ts_ctx *ctx, int64_t project_id);
/* ctx->who limits reads to a set of projects (a member, or a viewer given
 * projects). */
bool ts_auth_restricted(const struct ts_ctx *ctx);
/* The ids a restricted caller is limited to (never NULL then, even when it
 * has none: a member without projects sees nothing), or NULL when the caller
 * sees every project. Borrowed for the request. */
const int64_t *ts_auth_project_ids(const struct ts_ctx *ctx, size_t *n);

#endif /* TS_SERVER_AUTH_H */
