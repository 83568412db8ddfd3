/*
 * order.c - the order in which one pass looks at pending jobs.
 *
 * Projects furthest below their fair share go first: the key is
 * allocated / fair share (a project with no fair share comes after all that
 * have one, by allocation), then project priority (higher first), then
 * project id. Within a project: job priority (higher first), then
 * submission time (older first), then job id. The key is taken again after
 * every attempt, so a project that gets a GPU makes room for the next one.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "server/sched/order.h"

#define QAHEAD 4 /* jobs ahead in a project's queue to prefetch */

struct order {
    struct cycle *cy;
    int *heap; /* project indexes with jobs left */
    size_t n;
    int *buf; /* every project's queue, one after the other */
};

static bool before(const struct cycle *cy, int a, int b)
{
    const struct proj *pa = &cy->projs[a], *pb = &cy->projs[b];
    double ka = pa->fair > EPS ? pa->alloc / pa->fair : INFINITY;
    double kb = pb->fair > EPS ? pb->alloc / pb->fair : INFINITY;
    if (ka < kb - 1e-12)
        return true;
    if (ka > kb + 1e-12)
        return false;
    if (pa->alloc < pb->alloc - 1e-12)
        return true;
    if (pa->alloc > pb->alloc + 1e-12)
        return false;
    const struct ts_sched_project *sa = &cy->snap->projects[a], *sb = &cy->snap->projects[b];
    if (sa->priority != sb->priority)
        return sa->priority > sb->priority;
    return sa->id < sb->id;
}

static void swap(struct order *o, size_t i, size_t j)
{
    int t = o->heap[i];
    o->heap[i] = o->heap[j];
    o->heap[j] = t;
    o->cy->projs[o->heap[i]].heap_pos = (int)i;
    o->cy->projs[o->heap[j]].heap_pos = (int)j;
}

static void sift_up(struct order *o, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(o->cy, o->heap[i], o->heap[p]))
            break;
        swap(o, i, p);
        i = p;
    }
}

static void sift_down(struct order *o, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < o->n && before(o->cy, o->heap[l], o->heap[m]))
            m = l;
        if (r < o->n && before(o->cy, o->heap[r], o->heap[m]))
            m = r;
        if (m == i)
            break;
        swap(o, i, m);
        i = m;
    }
}

/* A job's place in the queue, copied out of struct job: the sort reads
 * these 24 bytes in order instead of a job's ~300 scattered across the
 * cycle's array (at 160,000 jobs the sort was 6 % of a cycle's time, most of
 * it cache misses). */
struct okey {
    int project, priority;
    int64_t submitted_at, id;
    int job;
};

static bool okey_before(const struct okey *a, const struct okey *b)
{
    if (a->project != b->project)
        return a->project < b->project;
    if (a->priority != b->priority)
        return a->priority > b->priority;
    if (a->submitted_at != b->submitted_at)
        return a->submitted_at < b->submitted_at;
    return a->id < b->id;
}

/* The merge sort of the keys: stable, and no global context as qsort
 * would need; k and tmp hold n keys, the result ends in *k. */
static void merge_sort(struct okey **k, struct okey **tmp, size_t n)
{
    for (size_t w = 1; w < n; w *= 2) {
        struct okey *a = *k, *t = *tmp;
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                t[o++] = okey_before(&a[j], &a[i]) ? a[j++] : a[i++];
            while (i < mid)
                t[o++] = a[i++];
            while (j < hi)
                t[o++] = a[j++];
        }
        *k = t;
        *tmp = a;
    }
}

/* Bits that hold every value of 0..span. */
static int span_bits(uint64_t span)
{
    return span == 0 ? 0 : 64 - __builtin_clzll(span);
}

/* A key packed into one word: each field less its least value, most
 * significant first (project, highest priority first, submission, id), so
 * that one key is below another exactly when okey_before says so. */
struct rkey {
    uint64_t key;
    int job;
};

/* Each field's least and greatest value (priority negated: the highest
 * first) and its shift in the packed key. */
struct kspan {
    int64_t min[4], max[4];
    int shift[4]; /* of project, priority, submitted_at, id */
};

/* A key's fields as packed: project, priority negated (the highest
 * first), submission, id. */
static void okey_fields(const struct okey *k, int64_t f[4])
{
    f[0] = k->project;
    f[1] = -(int64_t)k->priority;
    f[2] = k->submitted_at;
    f[3] = k->id;
}

/* k's fields into the span (the first key starts it). */
static void kspan_add(struct kspan *s, const struct okey *k, bool first)
{
    int64_t f[4];
    okey_fields(k, f);
    for (int i = 0; i < 4; i++) {
        if (first || f[i] < s->min[i])
            s->min[i] = f[i];
        if (first || f[i] > s->max[i])
            s->max[i] = f[i];
    }
}

/* The shifts of a packed key; false when the fields need more than 64 bits
 * (then the merge sort). */
static bool kspan_pack(struct kspan *s, int *nbits)
{
    int total = 0;
    for (int f = 3; f >= 0; f--) {
        s->shift[f] = total;
        total += span_bits((uint64_t)s->max[f] - (uint64_t)s->min[f]);
    }
    *nbits = total;
    return total <= 64;
}

/* (A field of no span adds 0, whatever its shift: a shift of 64 is never
 * taken.) */
static uint64_t kspan_key(const struct kspan *s, const struct okey *k)
{
    int64_t f[4];
    okey_fields(k, f);
    uint64_t key = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t d = (uint64_t)f[i] - (uint64_t)s->min[i];
        key |= d ? d << s->shift[i] : 0;
    }
    return key;
}

#define RADIX_BITS 12

/* A least-significant-digit radix sort of r[0..n) on nbits of key (stable,
 * as the merge sort: equal keys keep their order); the result ends in *r.
 * false when out of memory. */
static bool radix_sort(struct ts_arena *a, struct rkey **r, struct rkey **tmp, size_t n, int nbits)
{
    int passes = (nbits + RADIX_BITS - 1) / RADIX_BITS;
    if (passes == 0)
        return true;
    int d = (nbits + passes - 1) / passes;
    size_t nb = (size_t)1 << d;
    size_t *count = ts_arena_alloc(a, (size_t)passes * nb * sizeof(*count));
    if (count == NULL)
        return false;
    uint64_t mask = nb - 1;
    for (size_t i = 0; i < n; i++)
        for (int p = 0; p < passes; p++)
            count[(size_t)p * nb + (((*r)[i].key >> (p * d)) & mask)]++;
    for (int p = 0; p < passes; p++) {
        size_t *c = count + (size_t)p * nb, sum = 0;
        bool one = false; /* every key has the same digit: the pass moves nothing */
        for (size_t b = 0; b < nb; b++) {
            size_t m = c[b];
            one = one || m == n;
            c[b] = sum;
            sum += m;
        }
        if (one)
            continue;
        struct rkey *from = *r, *t = *tmp;
        for (size_t i = 0; i < n; i++)
            t[c[(from[i].key >> (p * d)) & mask]++] = from[i];
        *r = t;
        *tmp = from;
    }
    return true;
}

/* The jobs idx[0..n) in queue order: by a radix sort of packed keys where
 * the fields' spans fit in 64 bits (at 160,000 jobs the merge sort was a
 * tenth of a large cycle's instructions), else by the merge sort; both
 * stable, so the same order. */
static void sort_jobs(struct cycle *cy, int *idx, size_t n)
{
    if (n < 2)
        return;
    /* two buffers of n keys, each read as okey or rkey, never both; from
     * the cycle's arena, whose memory is kept from cycle to cycle (8 MB
     * malloc'ed and freed each cycle came back as fresh pages, some 200
     * page faults a cycle at 160,000 jobs) */
    void *kb = ts_arena_alloc_uninit(cy->a, n * sizeof(struct okey));
    void *tb = ts_arena_alloc_uninit(cy->a, n * sizeof(struct okey));
    if (kb == NULL || tb == NULL) {
        cy->nomem = true;
        return;
    }
    struct okey *k = kb;
    struct kspan span = {0}; /* the first key sets it */
    for (size_t i = 0; i < n; i++) {
        const struct job *J = &cy->jobs[idx[i]];
        k[i] = (struct okey){J->project, J->priority, J->submitted_at, J->id, idx[i]};
        kspan_add(&span, &k[i], i == 0);
    }
    int nbits;
    if (kspan_pack(&span, &nbits)) {
        struct rkey *r = tb, *rt = kb;
        for (size_t i = 0; i < n; i++)
            r[i] = (struct rkey){kspan_key(&span, &k[i]), k[i].job};
        if (!radix_sort(cy->a, &r, &rt, n, nbits))
            cy->nomem = true;
        for (size_t i = 0; i < n; i++)
            idx[i] = r[i].job;
    } else {
        struct okey *t = tb;
        merge_sort(&k, &t, n);
        for (size_t i = 0; i < n; i++)
            idx[i] = k[i].job;
    }
}

bool ts_sched_order_sort(struct cycle *cy)
{
    if (cy->job_order != NULL)
        return true;
    cy->job_order = ts_arena_alloc(cy->a, (cy->njobs ? cy->njobs : 1) * sizeof(int));
    if (cy->job_order == NULL) {
        cy->nomem = true;
        return false;
    }
    for (size_t i = 0; i < cy->njobs; i++)
        cy->job_order[i] = (int)i;
    sort_jobs(cy, cy->job_order, cy->njobs);
    return !cy->nomem;
}

struct order *ts_sched_order_new(struct cycle *cy)
{
    struct order *o = calloc(1, sizeof(*o));
    size_t np = cy->snap->nprojects;
    int *idx = malloc((cy->njobs ? cy->njobs : 1) * sizeof(int));
    if (o == NULL || idx == NULL) {
        free(o);
        free(idx);
        cy->nomem = true;
        return NULL;
    }
    o->cy = cy;
    o->heap = malloc((np ? np : 1) * sizeof(int));
    if (o->heap == NULL) {
        free(o);
        free(idx);
        cy->nomem = true;
        return NULL;
    }
    /* the order of jobs does not change in a cycle: sorted once, then each
     * pass takes the pending ones */
    if (!ts_sched_order_sort(cy)) {
        free(o->heap);
        free(o);
        free(idx);
        return NULL;
    }
    for (size_t p = 0; p < np; p++) {
        cy->projs[p].nqueue = 0;
        cy->projs[p].qhead = 0;
        cy->projs[p].heap_pos = -1;
    }
    /* the pending jobs in one buffer, split per project: job_order is
     * sorted by project first, so each project's are together, and its
     * slice is found as the job is read (reading the jobs again for their
     * projects was a third of this function's time at 160,000 jobs) */
    size_t n = 0;
    for (size_t i = 0; i < cy->njobs; i++) {
        /* from cy->hot, 24 bytes a job (the jobs themselves were a cache
         * miss each); scattered in queue order: the one a few ahead fetched */
        if (i + QAHEAD * 4 < cy->njobs)
            __builtin_prefetch(&cy->hot[cy->job_order[i + QAHEAD * 4]]);
        const struct jhot *h = &cy->hot[cy->job_order[i]];
        if (h->running)
            continue;
        struct proj *P = &cy->projs[h->project];
        if (P->nqueue == 0)
            P->queue = &idx[n];
        P->nqueue++;
        idx[n++] = cy->job_order[i];
    }
    o->n = 0;
    for (size_t p = 0; p < np; p++)
        if (cy->projs[p].nqueue > 0) {
            o->heap[o->n] = (int)p;
            cy->projs[p].heap_pos = (int)o->n;
            o->n++;
            sift_up(o, o->n - 1);
        }
    o->buf = idx;
    return o;
}

int ts_sched_order_next(struct order *o)
{
    if (o == NULL || o->n == 0)
        return -1;
    int p = o->heap[0];
    struct proj *pr = &o->cy->projs[p];
    int j = pr->queue[pr->qhead++];
    /* the project's next jobs, most often the next asked for: a job's first
     * read was a cache miss, the most of a large cycle's time in one place
     * (the fields an attempt reads first, cycle.h's struct job, span 2 or
     * 3 lines). The next one alone came too late for a job whose attempt
     * repeats a failure (short): the one QAHEAD on is fetched, and at the
     * project's first job all those before it */
    size_t ahead = pr->qhead == 1 ? 0 : QAHEAD - 1;
    for (; ahead < QAHEAD && pr->qhead + ahead < pr->nqueue; ahead++) {
        const char *next = (const char *)&o->cy->jobs[pr->queue[pr->qhead + ahead]];
        size_t end = offsetof(struct job, p) + offsetof(struct preq, r);
        for (size_t off = 0; off < end; off += 64)
            __builtin_prefetch(next + off);
        __builtin_prefetch(next + end - 1);
    }
    if (pr->qhead == pr->nqueue) {
        /* the project is done for this pass: drop it from the heap */
        o->n--;
        pr->heap_pos = -1;
        if (o->n > 0) {
            o->heap[0] = o->heap[o->n];
            o->cy->projs[o->heap[0]].heap_pos = 0;
            sift_down(o, 0);
        }
    }
    return j;
}

void ts_sched_order_update(struct order *o, int project)
{
    if (o == NULL)
        return;
    int i = o->cy->projs[project].heap_pos;
    if (i < 0)
        return;
    sift_up(o, (size_t)i);
    sift_down(o, (size_t)o->cy->projs[project].heap_pos);
}

void ts_sched_order_free(struct order *o)
{
    if (o == NULL)
        return;
    free(o->heap);
    free(o->buf);
    free(o);
}
