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
#include <stdlib.h>

#include "server/sched/order.h"

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

static void sort_jobs(struct cycle *cy, int *idx, size_t n)
{
    /* a merge sort: stable, and no global context as qsort would need */
    if (n < 2)
        return;
    struct okey *k = malloc(n * sizeof(*k)), *tmp = malloc(n * sizeof(*tmp));
    if (k == NULL || tmp == NULL) {
        free(k);
        free(tmp);
        cy->nomem = true;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const struct job *J = &cy->jobs[idx[i]];
        k[i] = (struct okey){J->project, J->priority, J->submitted_at, J->id, idx[i]};
    }
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                tmp[o++] = okey_before(&k[j], &k[i]) ? k[j++] : k[i++];
            while (i < mid)
                tmp[o++] = k[i++];
            while (j < hi)
                tmp[o++] = k[j++];
        }
        struct okey *t = k;
        k = tmp;
        tmp = t;
    }
    for (size_t i = 0; i < n; i++)
        idx[i] = k[i].job;
    free(k);
    free(tmp);
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
    size_t n = 0;
    for (size_t i = 0; i < cy->njobs; i++)
        if (!cy->jobs[cy->job_order[i]].running)
            idx[n++] = cy->job_order[i];
    for (size_t p = 0; p < np; p++) {
        cy->projs[p].nqueue = 0;
        cy->projs[p].qhead = 0;
        cy->projs[p].heap_pos = -1;
    }
    /* one buffer, split per project: idx is sorted by project first */
    for (size_t i = 0; i < n;) {
        int p = cy->jobs[idx[i]].project;
        size_t k = i;
        while (k < n && cy->jobs[idx[k]].project == p)
            k++;
        cy->projs[p].queue = &idx[i];
        cy->projs[p].nqueue = k - i;
        i = k;
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
    if (pr->qhead < pr->nqueue) {
        /* the project's next job, most often the next asked for: its first
         * read was a cache miss a job, the most of a large cycle's time in
         * one place (the fields an attempt reads first span 4 lines) */
        const char *next = (const char *)&o->cy->jobs[pr->queue[pr->qhead]];
        for (size_t off = 0; off < offsetof(struct job, failed_at) + 8; off += 64)
            __builtin_prefetch(next + off);
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
