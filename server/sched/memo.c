/*
 * memo.c - a growable hash map of 64-bit request signatures to a value, so
 * that a cycle does not search the whole cluster again for a request that
 * found no room: only the nodes freed since need a look.
 */
#include <stdlib.h>
#include <string.h>

#include "server/sched/memo.h"
#include "server/sched/sched_int.h"

struct memo {
    uint64_t *slot;
    uint64_t *val;
    size_t cap, n;
};

struct memo *ts_sched_memo_new(void)
{
    struct memo *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->cap = 256;
    m->slot = calloc(m->cap, sizeof(uint64_t));
    m->val = calloc(m->cap, sizeof(uint64_t));
    if (m->slot == NULL || m->val == NULL) {
        free(m->slot);
        free(m->val);
        free(m);
        return NULL;
    }
    return m;
}

void ts_sched_memo_free(struct memo *m)
{
    if (m == NULL)
        return;
    free(m->slot);
    free(m->val);
    free(m);
}

void ts_sched_memo_clear(struct memo *m)
{
    if (m == NULL || m->n == 0)
        return;
    memset(m->slot, 0, m->cap * sizeof(uint64_t));
    m->n = 0;
}

static uint64_t fix(uint64_t k)
{
    return k == 0 ? 1 : k;
}

bool ts_sched_memo_get(const struct memo *m, uint64_t key, uint64_t *val)
{
    if (m == NULL)
        return false;
    key = fix(key);
    for (size_t i = key & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->slot[i] == 0)
            return false;
        if (m->slot[i] == key) {
            if (val)
                *val = m->val[i];
            return true;
        }
    }
}

bool ts_sched_memo_has(const struct memo *m, uint64_t key)
{
    return ts_sched_memo_get(m, key, NULL);
}

void ts_sched_memo_put(struct memo *m, uint64_t key, uint64_t val)
{
    if (m == NULL)
        return;
    key = fix(key);
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap * 2;
        uint64_t *ns = calloc(ncap, sizeof(uint64_t)), *nv = calloc(ncap, sizeof(uint64_t));
        if (ns == NULL || nv == NULL) {
            free(ns);
            free(nv);
            return; /* a memo that cannot grow only costs time */
        }
        for (size_t i = 0; i < m->cap; i++) {
            uint64_t k = m->slot[i];
            if (k == 0)
                continue;
            size_t j = k & (ncap - 1);
            while (ns[j] != 0)
                j = (j + 1) & (ncap - 1);
            ns[j] = k;
            nv[j] = m->val[i];
        }
        free(m->slot);
        free(m->val);
        m->slot = ns;
        m->val = nv;
        m->cap = ncap;
    }
    size_t i = key & (m->cap - 1);
    while (m->slot[i] != 0) {
        if (m->slot[i] == key) {
            m->val[i] = val;
            return;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->slot[i] = key;
    m->val[i] = val;
    m->n++;
}

void ts_sched_memo_add(struct memo *m, uint64_t key)
{
    ts_sched_memo_put(m, key, 0);
}

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
    if (s == NULL)
        s = "";
    return mix(h, s, strlen(s) + 1);
}

static uint64_t fold(uint64_t h, uint64_t x);

static uint64_t bits_of(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

uint64_t ts_sched_preq_hash(const struct preq *p)
{
    /* the numbers a word at a time (byte by byte, every job's hash at the
     * start of a cycle was 3 % of it at 160,000 jobs) */
    uint64_t h = 14695981039346656037ULL;
    h = fold(h, (uint64_t)p->kind);
    h = fold(h, (uint64_t)(int64_t)p->ndev);
    h = fold(h, bits_of(p->portion));
    h = fold(h, (uint64_t)p->mem);
    h = fold(h, bits_of(p->cpu));
    h = fold(h, (uint64_t)p->host_mem);
    const struct ts_sched_request *r = p->r;
    for (size_t i = 0; i < r->ngpu_models; i++)
        h = mix_str(h, r->gpu_models[i]);
    h = mix(h, "|", 1);
    for (size_t i = 0; i < r->nnode_selector; i++) {
        h = mix_str(h, r->node_selector[i].key);
        h = mix_str(h, r->node_selector[i].value);
    }
    h = mix(h, &p->no_swap_node, sizeof(p->no_swap_node));
    return h ? h : 1;
}

static uint64_t fold(uint64_t h, uint64_t x)
{
    uint64_t z = h ^ (x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t ts_sched_memo_fold(uint64_t h, uint64_t x)
{
    uint64_t z = fold(h, x);
    return z ? z : 1; /* 0 marks an empty slot */
}

uint64_t ts_sched_preq_signature(const struct preq *p, uint64_t salt)
{
    uint64_t h = p->hash ? p->hash : ts_sched_preq_hash(p);
    h = fold(h, salt);
    h = fold(h, (uint64_t)(int64_t)p->only_node);
    for (size_t i = 0; p->only_slots != NULL && i < p->nonly_slots; i++)
        h = fold(h, (uint64_t)(int64_t)p->only_slots[i].gpu);
    return fold(h, p->host_mem_held);
}
