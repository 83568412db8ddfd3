/*
 * benchcpu.h - the CPU time a benchmark's server and its embedded
 * PostgreSQL have used, from /proc (bench_fleet, bench_submit).
 */
#ifndef TS_TESTS_BENCH_BENCHCPU_H
#define TS_TESTS_BENCH_BENCHCPU_H

#include <sys/types.h>

/* CPU seconds of pid (utime + stime + reaped children's), 0 when gone;
 * *ppid (may be NULL) its parent. */
double ts_bench_proc_cpu(long pid, long *ppid);
/* The postmaster of the embedded PostgreSQL in data_dir/pg, 0 if none. */
long ts_bench_postmaster_pid(const char *data_dir);
/* CPU seconds of the server and of its PostgreSQL: the postmaster (started
 * apart with setsid: not the server's child) and every process it started;
 * *pg_out the PostgreSQL part. */
double ts_bench_server_cpu(pid_t server, const char *data_dir, double *pg_out);

#endif
