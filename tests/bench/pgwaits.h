/*
 * pgwaits.h - what PostgreSQL's busy backends wait on, sampled from
 * pg_stat_activity while a benchmark runs (bench_fleet --waits).
 *
 * A thread with its own connection reads, every 20 ms, each active client
 * backend's wait event ("CPU" when it waits on none) and the first words of
 * its statement, and counts the pairs. The printed table says where the
 * database time of a latency tail goes: a report waiting on IO:WALSync is
 * its commit's flush, on Lock:transactionid or Lock:tuple a row another
 * transaction holds.
 */
#ifndef TS_TESTS_BENCH_PGWAITS_H
#define TS_TESTS_BENCH_PGWAITS_H

struct ts_bench_waits;

/* Starts sampling over conninfo; NULL (with a message) when it cannot. */
struct ts_bench_waits *ts_bench_waits_start(const char *conninfo);
/* Stops, prints the counts (most first) and frees. */
void ts_bench_waits_stop_print(struct ts_bench_waits *w, int nodes);

#endif
