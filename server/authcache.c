/*
 * authcache.c - a small direct-mapped table of authenticated tokens under
 * one mutex; an entry is replaced by the next token hashing to its slot.
 */
#include "server/authcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/clock.h"

#define SLOTS 1024
#define MAX_PROJECTS 32
#define MAX_NODES_TEXT 512 /* a token with a longer node list is not cached */

struct entry {
    char hash[65];
    int64_t expires_ms;
    struct ts_token_auth t; /* project_ids and nodes point at ids and nodes below */
    int64_t ids[MAX_PROJECTS];
    char nodes[MAX_NODES_TEXT];
};

struct ts_authcache {
    pthread_mutex_t mu;
    int64_t ttl_ms;
    struct entry slots[SLOTS];
};

static size_t slot_of(const char *hex)
{
    /* the hash is uniformly random: its first hex digits are index enough */
    return (size_t)strtoul((char[4]){hex[0], hex[1], hex[2], 0}, NULL, 16) % SLOTS;
}

struct ts_authcache *ts_authcache_new(int64_t ttl_ms)
{
    if (ttl_ms <= 0)
        return NULL;
    struct ts_authcache *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    pthread_mutex_init(&c->mu, NULL);
    c->ttl_ms = ttl_ms;
    return c;
}

void ts_authcache_free(struct ts_authcache *c)
{
    if (c == NULL)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c);
}

bool ts_authcache_get(struct ts_authcache *c, const char *sha256_hex, struct ts_arena *a,
                      struct ts_token_auth *out)
{
    if (c == NULL)
        return false;
    bool hit = false;
    struct entry *e = &c->slots[slot_of(sha256_hex)];
    pthread_mutex_lock(&c->mu);
    if (e->expires_ms > ts_now_ms() && strcmp(e->hash, sha256_hex) == 0) {
        *out = e->t;
        out->project_ids = NULL;
        out->nodes = NULL;
        hit = true;
        if (e->t.nodes != NULL && (out->nodes = ts_arena_strdup(a, e->nodes)) == NULL)
            hit = false;
        if (e->t.nprojects > 0) {
            out->project_ids = ts_arena_alloc(a, sizeof(int64_t) * e->t.nprojects);
            if (out->project_ids != NULL)
                memcpy(out->project_ids, e->ids, sizeof(int64_t) * e->t.nprojects);
            else
                hit = false;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void ts_authcache_put(struct ts_authcache *c, const char *sha256_hex, const struct ts_token_auth *t)
{
    if (c == NULL || t->nprojects > MAX_PROJECTS ||
        (t->nodes != NULL && strlen(t->nodes) >= MAX_NODES_TEXT))
        return;
    struct entry *e = &c->slots[slot_of(sha256_hex)];
    pthread_mutex_lock(&c->mu);
    memcpy(e->hash, sha256_hex, 65);
    e->t = *t;
    e->t.project_ids = NULL;
    e->t.nodes = NULL;
    if (t->nodes != NULL) {
        memcpy(e->nodes, t->nodes, strlen(t->nodes) + 1);
        e->t.nodes = e->nodes; /* only tested for NULL: get copies e->nodes */
    }
    if (t->nprojects > 0)
        memcpy(e->ids, t->project_ids, sizeof(int64_t) * t->nprojects);
    e->expires_ms = ts_now_ms() + c->ttl_ms;
    pthread_mutex_unlock(&c->mu);
}

void ts_authcache_clear(struct ts_authcache *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < SLOTS; i++)
        c->slots[i].expires_ms = 0;
    pthread_mutex_unlock(&c->mu);
}
