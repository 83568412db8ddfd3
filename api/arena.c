/*
 * arena.c - a chain of blocks; large requests get a block of their own.
 * ts_arena_reset keeps the blocks for the next round: an arena reused for
 * the same work (the scheduler's cycle) touches memory that is already
 * mapped instead of faulting in fresh pages each time.
 */
#include "api/arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_SIZE 8192

struct block {
    struct block *next;
    size_t used;
    size_t size;
    _Alignas(16) unsigned char data[];
};

struct ts_arena {
    struct block *head;
    struct block *spare;     /* kept by the last reset: BLOCK_SIZE blocks */
    struct block *spare_big; /* kept by the last reset: larger ones */
};

static void free_chain(struct block *b)
{
    while (b) {
        struct block *next = b->next;
        free(b);
        b = next;
    }
}

struct ts_arena *ts_arena_new(void)
{
    return calloc(1, sizeof(struct ts_arena));
}

void ts_arena_free(struct ts_arena *a)
{
    if (a == NULL)
        return;
    free_chain(a->head);
    free_chain(a->spare);
    free_chain(a->spare_big);
    free(a);
}

void ts_arena_reset(struct ts_arena *a)
{
    if (a == NULL)
        return;
    /* what the last reset kept and this round did not use goes back */
    free_chain(a->spare);
    free_chain(a->spare_big);
    a->spare = a->spare_big = NULL;
    struct block *b = a->head;
    while (b) {
        struct block *next = b->next;
        struct block **list = b->size == BLOCK_SIZE ? &a->spare : &a->spare_big;
        b->used = 0;
        b->next = *list;
        *list = b;
        b = next;
    }
    a->head = NULL;
}

/* A kept block of `size` bytes or more (the smallest that fits), taken off
 * its list, or a new one. */
static struct block *block_get(struct ts_arena *a, size_t size)
{
    if (size == BLOCK_SIZE && a->spare != NULL) {
        struct block *b = a->spare;
        a->spare = b->next;
        return b;
    }
    struct block **best = NULL;
    for (struct block **p = &a->spare_big; *p != NULL; p = &(*p)->next)
        if ((*p)->size >= size && (best == NULL || (*p)->size < (*best)->size))
            best = p;
    if (best != NULL) {
        struct block *b = *best;
        *best = b->next;
        return b;
    }
    struct block *nb = malloc(sizeof(*nb) + size);
    if (nb == NULL)
        return NULL;
    nb->used = 0;
    nb->size = size;
    return nb;
}

void *ts_arena_alloc_uninit(struct ts_arena *a, size_t n)
{
    if (n > SIZE_MAX - 64)
        return NULL;
    n = (n + 15) & ~(size_t)15;
    struct block *b = a->head;
    if (b == NULL || b->size - b->used < n) {
        size_t size = n > BLOCK_SIZE / 2 ? n : BLOCK_SIZE;
        struct block *nb = block_get(a, size);
        if (nb == NULL)
            return NULL;
        if (n > BLOCK_SIZE / 2 && b != NULL) {
            /* keep the current block in front: it still has room */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

void *ts_arena_alloc(struct ts_arena *a, size_t n)
{
    void *p = ts_arena_alloc_uninit(a, n);
    if (p != NULL)
        memset(p, 0, n);
    return p;
}

char *ts_arena_strndup(struct ts_arena *a, const char *s, size_t n)
{
    char *p = ts_arena_alloc(a, n + 1);
    if (p == NULL)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *ts_arena_strdup(struct ts_arena *a, const char *s)
{
    return ts_arena_strndup(a, s, strlen(s));
}

char *ts_arena_printf(struct ts_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *p = ts_arena_alloc(a, (size_t)n + 1);
    if (p == NULL)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}
