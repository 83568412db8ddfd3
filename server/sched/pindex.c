/*
 * pindex.c - the placement index: for each request class (a request's
 * signature and the strategy), the score of every node that can take it, in
 * a heap, so that a placement does not score every node again.
 *
 * A node's score for a request depends only on the node's state (and on the
 * cluster's fgd shapes, fixed while the index lives). Every change of a
 * node's state bumps its version and is logged (ts_sched_cluster_node_refresh
 * tells the index through the watch it set, c->watch); a
 * class, when asked, scores again only the nodes logged since it was last
 * asked and pushes their new entries. Entries of an older version are stale
 * and dropped when they reach the top, so the top valid entry is the best
 * node, as a look at every node would find it: lowest score, then lowest
 * node id. Classes are kept while there is room (PINDEX_MAX_CLASSES, and
 * PINDEX_MAX_ENTRIES over all heaps); a request of another class, with a
 * node selector, or pinned to a node is placed by a plain scan.
 */
#include <stdlib.h>
#include <string.h>

#include "server/sched/sched_int.h"

#define PINDEX_MAX_CLASSES 1024
#define PINDEX_MAX_ENTRIES (1 << 21) /* about 48 MiB of entries in all */

struct pentry {
    double score; /* ts_sched_score_key of the node's score */
    int64_t id;   /* the node's id: ties go to the lowest */
    int node;
    uint32_t version;
};

struct pclass {
    uint64_t sig;
    const struct ts_sched_strategy *st;
    struct preq key; /* the request it was made for (r, model_ok not kept) */
    bool *model_ok;  /* its accepted models, or NULL: any */
    struct pentry *heap;
    size_t n, cap;
    size_t seen; /* the change log up to here is in the heap */
};

struct pindex {
    struct pclass *cls;
    size_t ncls, capcls;
    size_t entries; /* capacity of every heap, in entries */
    int *log;       /* nodes whose state changed, in order */
    size_t nlog, caplog;
    uint32_t *stamp; /* per node: last asked in query stamp */
    uint32_t now;
    bool broken; /* out of memory once: every placement scans */
};

static bool entry_before(const struct pentry *a, const struct pentry *b)
{
    if (a->score != b->score)
        return a->score < b->score;
    return a->id < b->id;
}

static void heap_up(struct pentry *h, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!entry_before(&h[i], &h[p]))
            break;
        struct pentry t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

static void heap_down(struct pentry *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && entry_before(&h[l], &h[m]))
            m = l;
        if (r < n && entry_before(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        struct pentry t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static bool push(struct pindex *x, struct pclass *k, const struct pentry *e)
{
    if (k->n == k->cap) {
        size_t ncap = k->cap ? k->cap * 2 : 64;
        struct pentry *nh = realloc(k->heap, ncap * sizeof(*nh));
        if (nh == NULL)
            return false;
        x->entries += ncap - k->cap;
        k->heap = nh;
        k->cap = ncap;
    }
    k->heap[k->n] = *e;
    heap_up(k->heap, k->n++);
    return true;
}

/* Whether a class was made for requests that place like p. */
static bool same_request(const struct ts_sched_cluster *c, const struct pclass *k,
                         const struct preq *p)
{
    const struct preq *a = &k->key;
    if (a->kind != p->kind || a->ndev != p->ndev || a->portion != p->portion || a->mem != p->mem ||
        a->cpu != p->cpu || a->host_mem != p->host_mem || a->only_node != p->only_node ||
        a->host_mem_held != p->host_mem_held || a->no_swap_node != p->no_swap_node ||
        a->only_slots != NULL || p->only_slots != NULL)
        return false;
    if ((k->model_ok == NULL) != (p->model_ok == NULL))
        return false;
    return k->model_ok == NULL ||
           memcmp(k->model_ok, p->model_ok, (size_t)c->nmodels * sizeof(bool)) == 0;
}

void ts_sched_pindex_free(struct ts_sched_cluster *c)
{
    struct pindex *x = c->pidx;
    if (x == NULL)
        return;
    for (size_t i = 0; i < x->ncls; i++) {
        free(x->cls[i].heap);
        free(x->cls[i].model_ok);
    }
    free(x->cls);
    free(x->log);
    free(x->stamp);
    free(x);
    c->pidx = NULL;
    c->watch = NULL;
}

static void clear(struct ts_sched_cluster *c)
{
    struct pindex *x = c->pidx;
    if (x == NULL)
        return;
    for (size_t i = 0; i < x->ncls; i++) {
        free(x->cls[i].heap);
        free(x->cls[i].model_ok);
    }
    x->ncls = 0;
    x->nlog = 0;
    x->entries = 0;
}

/* The node's version was bumped (cluster.c): log it for the classes. */
static void changed(struct ts_sched_cluster *c, int node)
{
    struct pindex *x = c->pidx;
    if (x == NULL || x->broken || x->ncls == 0)
        return;
    if (x->nlog == x->caplog) {
        size_t ncap = x->caplog ? x->caplog * 2 : 1024;
        int *nl = realloc(x->log, ncap * sizeof(int));
        if (nl == NULL) {
            x->broken = true;
            return;
        }
        x->log = nl;
        x->caplog = ncap;
    }
    x->log[x->nlog++] = node;
}

static const struct ts_sched_cluster_watch watch = {changed, clear, ts_sched_pindex_free};

static struct pindex *pindex_get(struct ts_sched_cluster *c)
{
    if (c->pidx == NULL) {
        struct pindex *x = calloc(1, sizeof(*x));
        if (x == NULL)
            return NULL;
        x->stamp = calloc(c->snap->nnodes + 1, sizeof(uint32_t));
        if (x->stamp == NULL) {
            free(x);
            return NULL;
        }
        c->pidx = x;
        c->watch = &watch;
    }
    return c->pidx->broken ? NULL : c->pidx;
}

/* Score node i for p by score into *e; false when it cannot take p. */
static bool score_node(struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                       const struct preq *p, int i, ts_sched_node_score_fn score, struct pentry *e)
{
    double s;
    int pick[TS_SCHED_MAX_DEVICES];
    if (!score(c, st, p, i, &s, pick))
        return false;
    *e = (struct pentry){ts_sched_score_key(s), c->snap->nodes[i].id, i, c->nodes[i].version};
    return true;
}

int ts_sched_pindex_best(struct ts_sched_cluster *c, const struct ts_sched_strategy *st,
                         const struct preq *p, uint64_t sig, ts_sched_node_score_fn score)
{
    if (p->only_node >= 0 || p->has_selector)
        return -2; /* rare, or one node: a scan does */
    struct pindex *x = pindex_get(c);
    if (x == NULL)
        return -2;
    struct pclass *k = NULL;
    for (size_t i = 0; i < x->ncls && k == NULL; i++)
        if (x->cls[i].sig == sig && x->cls[i].st == st && same_request(c, &x->cls[i], p))
            k = &x->cls[i];
    size_t nn = c->snap->nnodes;
    if (k == NULL) {
        if (x->ncls >= PINDEX_MAX_CLASSES || x->entries + nn > PINDEX_MAX_ENTRIES)
            return -2;
        if (x->ncls == x->capcls) {
            size_t ncap = x->capcls ? x->capcls * 2 : 16;
            struct pclass *nc = realloc(x->cls, ncap * sizeof(*nc));
            if (nc == NULL)
                return -2;
            x->cls = nc;
            x->capcls = ncap;
        }
        bool *ok = NULL;
        if (p->model_ok != NULL) {
            ok = malloc((size_t)(c->nmodels > 0 ? c->nmodels : 1) * sizeof(bool));
            if (ok == NULL)
                return -2;
            memcpy(ok, p->model_ok, (size_t)c->nmodels * sizeof(bool));
        }
        k = &x->cls[x->ncls++];
        *k = (struct pclass){.sig = sig, .st = st, .key = *p, .model_ok = ok, .seen = x->nlog};
        k->key.r = NULL;
        k->key.model_ok = NULL;
        for (size_t i = 0; i < nn; i++) {
            struct pentry e;
            if (score_node(c, st, p, (int)i, score, &e) && !push(x, k, &e)) {
                x->broken = true;
                return -2;
            }
        }
    } else {
        if (++x->now == 0) {
            memset(x->stamp, 0, nn * sizeof(uint32_t));
            x->now = 1;
        }
        for (size_t l = k->seen; l < x->nlog; l++) {
            int q = x->log[l];
            if (x->stamp[q] == x->now)
                continue;
            x->stamp[q] = x->now;
            struct pentry e;
            if (score_node(c, st, p, q, score, &e) && !push(x, k, &e)) {
                x->broken = true;
                return -2;
            }
        }
        k->seen = x->nlog;
    }
    while (k->n > 0 && k->heap[0].version != c->nodes[k->heap[0].node].version) {
        k->heap[0] = k->heap[--k->n];
        heap_down(k->heap, k->n, 0);
    }
    if (k->n > 4 * nn + 64) { /* mostly stale: keep the valid entries */
        size_t m = 0;
        for (size_t i = 0; i < k->n; i++)
            if (k->heap[i].version == c->nodes[k->heap[i].node].version)
                k->heap[m++] = k->heap[i];
        k->n = m;
        for (size_t i = m / 2 + 1; i-- > 0;)
            heap_down(k->heap, k->n, i);
    }
    /* the top valid entry: the lowest score key, then the lowest node id */
    return k->n == 0 ? -1 : k->heap[0].node;
}
