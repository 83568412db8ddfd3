/*
 * arena.h - lifetime-scoped memory.
 *
 * One arena per HTTP request (and per other unit of work): everything
 * allocated from it is freed together by ts_arena_free, so an early return
 * cannot leak. Allocation failure returns NULL.
 */
#ifndef TS_API_ARENA_H
#define TS_API_ARENA_H

#include <stddef.h>

struct ts_arena;

struct ts_arena *ts_arena_new(void);    /* new; NULL on failure */
void ts_arena_free(struct ts_arena *a); /* NULL is a no-op */
/* Empties the arena (everything allocated from it is gone) but keeps its
 * memory for the next allocations; what the next round leaves unused is
 * freed by the reset after it. NULL is a no-op. */
void ts_arena_reset(struct ts_arena *a);
void *ts_arena_alloc(struct ts_arena *a, size_t n); /* 16-byte aligned, zeroed */
/* The same, not zeroed: for an array the caller writes whole before reading
 * it (a reset arena hands back the last round's bytes). */
void *ts_arena_alloc_uninit(struct ts_arena *a, size_t n);
char *ts_arena_strdup(struct ts_arena *a, const char *s);
char *ts_arena_strndup(struct ts_arena *a, const char *s, size_t n);
char *ts_arena_printf(struct ts_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* TS_API_ARENA_H */
