/*
 * clock.h - the monotonic clock and sleeping, for everything that times a
 * wait, a cache entry or a request (never the wall clock: it jumps).
 */
#ifndef TS_API_CLOCK_H
#define TS_API_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds and in nanoseconds. */
int64_t ts_now_ms(void);
int64_t ts_now_ns(void);
/* Sleep ms milliseconds, the whole of it even when a signal interrupts. */
void ts_sleep_ms(long ms);

#endif /* TS_API_CLOCK_H */
