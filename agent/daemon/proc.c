/*
 * proc.c - /proc readers: a process's stat line and a session's members.
 */
#include "agent/daemon/proc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ts_proc_stat(pid_t pid, struct ts_proc_stat *out)
{
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, line, sizeof(line) - 1);
    int saved = errno;
    close(fd);
    if (n <= 0)
        return n < 0 ? -saved : -ENOENT;
    line[n] = '\0';
    /* "PID (COMM) STATE PPID PGRP SESSION ..."; COMM may hold spaces and
     * parentheses, so fields are counted from the last ')'. */
    char *p = strrchr(line, ')');
    if (p == NULL)
        return -EPROTO;
    p++;
    unsigned long long v[20] = {0};
    char state = 0;
    /* fields 3 (state) to 22 (starttime) */
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ')
            p++;
        if (*p == '\0')
            return -EPROTO;
        if (field == 3) {
            state = *p++;
            continue;
        }
        char *end;
        long long x = strtoll(p, &end, 10);
        if (end == p)
            return -EPROTO;
        v[field - 3] = (unsigned long long)x;
        p = end;
    }
    out->state = state;
    out->ppid = (pid_t)v[4 - 3];
    out->pgrp = (pid_t)v[5 - 3];
    out->session = (pid_t)v[6 - 3];
    out->start_ticks = v[22 - 3];
    return 0;
}

bool ts_proc_same(pid_t pid, uint64_t start_ticks)
{
    struct ts_proc_stat st;
    return pid > 0 && ts_proc_stat(pid, &st) == 0 && st.start_ticks == start_ticks;
}

size_t ts_proc_session(pid_t sid, pid_t *out, size_t max)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        struct ts_proc_stat st;
        if (pid <= 0 || ts_proc_stat(pid, &st) != 0 || st.session != sid)
            continue;
        if (n < max)
            out[n] = pid;
        n++;
    }
    closedir(d);
    return n;
}
