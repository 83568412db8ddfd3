/*
 * log.c - line-oriented logging to stderr; one write(2) per line so lines
 * from several threads never interleave.
 */
#include "api/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum ts_log_level ts_log_threshold = TS_LOG_INFO;

static _Thread_local const char *request_id;

static const char *const names[] = {"error", "warn", "info", "debug"};

int ts_log_parse_level(const char *s, enum ts_log_level *out)
{
    for (int i = 0; i <= TS_LOG_DEBUG; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (enum ts_log_level)i;
            return 0;
        }
    }
    return -1;
}

void ts_log_set_request(const char *id)
{
    request_id = id;
}

void ts_log_write(enum ts_log_level level, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %-5s ", ts.tv_nsec / 1000000,
                          names[level]);
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    va_end(ap);
    n = (w < 0) ? n : n + (size_t)w;
    if (n > sizeof(line) - 64)
        n = sizeof(line) - 64;
    if (request_id != NULL)
        n += (size_t)snprintf(line + n, sizeof(line) - n, " request=%s", request_id);
    line[n++] = '\n';
    ssize_t r = write(STDERR_FILENO, line, n);
    (void)r;
}
