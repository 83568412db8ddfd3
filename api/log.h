/*
 * log.h - one line per event: "TIME LEVEL message key=value ...".
 *
 * The request id of the current thread (ts_log_set_request) is appended to
 * every line while set. Arguments are not evaluated when the level is off.
 * Never log a secret.
 */
#ifndef TS_API_LOG_H
#define TS_API_LOG_H

enum ts_log_level { TS_LOG_ERROR, TS_LOG_WARN, TS_LOG_INFO, TS_LOG_DEBUG };

extern enum ts_log_level ts_log_threshold;

/* "error", "warn", "info", "debug"; returns 0, or -1 when unknown. */
int ts_log_parse_level(const char *s, enum ts_log_level *out);
/* Borrowed string, kept until the next call on this thread or NULL. */
void ts_log_set_request(const char *request_id);
void ts_log_write(enum ts_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define TS_LOG(level, ...)                                                                         \
    do {                                                                                           \
        if ((level) <= ts_log_threshold)                                                           \
            ts_log_write((level), __VA_ARGS__);                                                    \
    } while (0)
#define ts_log_error(...) TS_LOG(TS_LOG_ERROR, __VA_ARGS__)
#define ts_log_warn(...) TS_LOG(TS_LOG_WARN, __VA_ARGS__)
#define ts_log_info(...) TS_LOG(TS_LOG_INFO, __VA_ARGS__)
#define ts_log_debug(...) TS_LOG(TS_LOG_DEBUG, __VA_ARGS__)

#endif /* TS_API_LOG_H */
