/*
 * benchcpu.c - the CPU time of a benchmark's server and its embedded
 * PostgreSQL, read from /proc/PID/stat.
 */
#include "tests/bench/benchcpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

double ts_bench_proc_cpu(long pid, long *ppid)
{
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[n] = '\0';
    char *p = strrchr(line, ')'); /* the name may hold spaces */
    if (p == NULL)
        return 0;
    char state;
    long pp;
    unsigned long long ut, st;
    long long cut, cst;
    /* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime ... */
    if (sscanf(p + 2, "%c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &state, &pp,
               &ut, &st, &cut, &cst) != 6)
        return 0;
    if (ppid)
        *ppid = pp;
    return (double)(ut + st + (unsigned long long)cut + (unsigned long long)cst) /
           (double)sysconf(_SC_CLK_TCK);
}

long ts_bench_postmaster_pid(const char *data_dir)
{
    char path[300], buf[64] = "";
    snprintf(path, sizeof(path), "%s/pg/data/postmaster.pid", data_dir);
    FILE *f = fopen(path, "r");
    long pm = 0;
    if (f && fgets(buf, sizeof(buf), f))
        pm = atol(buf);
    if (f)
        fclose(f);
    return pm;
}

double ts_bench_server_cpu(pid_t server, const char *data_dir, double *pg_out)
{
    double cpu = ts_bench_proc_cpu(server, NULL);
    long pm = ts_bench_postmaster_pid(data_dir);
    double pg = pm > 0 ? ts_bench_proc_cpu(pm, NULL) : 0;
    FILE *ls = popen("ls /proc", "r");
    char name[64];
    while (pm > 0 && ls && fgets(name, sizeof(name), ls)) {
        long pid = atol(name), pp = 0;
        if (pid <= 0 || pid == pm)
            continue;
        double c = ts_bench_proc_cpu(pid, &pp);
        if (pp == pm)
            pg += c;
    }
    if (ls)
        pclose(ls);
    *pg_out = pg;
    return cpu + pg;
}
