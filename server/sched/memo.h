/*
 * memo.h - a set of request signatures, or a map of them to a value (memo.c).
 */
#ifndef TS_SERVER_SCHED_MEMO_H
#define TS_SERVER_SCHED_MEMO_H

#include <stdbool.h>
#include <stdint.h>

struct memo;
struct memo *ts_sched_memo_new(void);
void ts_sched_memo_free(struct memo *m);
void ts_sched_memo_clear(struct memo *m);
bool ts_sched_memo_has(const struct memo *m, uint64_t key);
bool ts_sched_memo_get(const struct memo *m, uint64_t key, uint64_t *val);
void ts_sched_memo_add(struct memo *m, uint64_t key);
void ts_sched_memo_put(struct memo *m, uint64_t key, uint64_t val);
/* h and x mixed into a key (never 0) */
uint64_t ts_sched_memo_fold(uint64_t h, uint64_t x);

#endif /* TS_SERVER_SCHED_MEMO_H */
