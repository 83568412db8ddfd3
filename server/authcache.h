/*
 * authcache.h - recently authenticated tokens, kept for a few seconds so a
 * busy client does not cost a database query per request.
 *
 * A token revoked through this server is dropped at once (ts_authcache_clear);
 * one revoked through another replica stops working here within the TTL
 * (--auth-cache-ttl, default 2 s; 0 turns the cache off). Thread-safe.
 */
#ifndef TS_SERVER_AUTHCACHE_H
#define TS_SERVER_AUTHCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "api/arena.h"
#include "server/store/store.h"

struct ts_authcache;

/* New; NULL when ttl_ms is 0 (no cache) or out of memory. */
struct ts_authcache *ts_authcache_new(int64_t ttl_ms);
void ts_authcache_free(struct ts_authcache *c); /* NULL is a no-op */
/* A fresh entry for the SHA-256 hex: copies it into *out (project ids and nodes into
 * the arena). False when absent, stale, or c is NULL. */
bool ts_authcache_get(struct ts_authcache *c, const char *sha256_hex, struct ts_arena *a,
                      struct ts_token_auth *out);
void ts_authcache_put(struct ts_authcache *c, const char *sha256_hex,
                      const struct ts_token_auth *t);
void ts_authcache_clear(struct ts_authcache *c);

#endif /* TS_SERVER_AUTHCACHE_H */
