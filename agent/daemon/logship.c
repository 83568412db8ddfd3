/*
 * logship.c - job output to the server: POST /nodes/NAME/logs with the
 * new bytes of each job's output.log in base64 chunks, each request body at
 * most 256 KiB, from the offset the server last acknowledged (saved in the
 * job folder, so a restarted agent resumes there).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/daemon/agent.h"
#include "agent/daemon/logship.h"
#include "api/log.h"

#define LOG_BODY_MAX (256 * 1024)
/* raw bytes per request: base64 makes 4 of 3, plus room for the JSON */
#define LOG_RAW_MAX ((LOG_BODY_MAX - 4096) / 4 * 3)
#define LOG_REQUESTS_PER_ROUND 64

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *base64(const unsigned char *p, size_t n)
{
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (out == NULL)
        return NULL;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
        *o++ = b64[v >> 18 & 63];
        *o++ = b64[v >> 12 & 63];
        *o++ = b64[v >> 6 & 63];
        *o++ = b64[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0);
        *o++ = b64[v >> 18 & 63];
        *o++ = b64[v >> 12 & 63];
        *o++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

struct pending_log {
    int64_t id;
    int attempt;
    char path[PATH_MAX];
    int64_t from;
    size_t len;
};

/* One request's worth of output of the jobs that have unsent output. Jobs
 * whose whole output is acknowledged and that are over are marked done.
 * Returns the number of entries filled. */
static size_t collect_logs(struct ts_agent *a, struct pending_log *out, size_t max)
{
    size_t n = 0, budget = LOG_RAW_MAX;
    pthread_mutex_lock(&a->mu);
    for (struct ts_ajob *j = a->jobs; j != NULL && n < max && budget > 0; j = j->next) {
        if (j->log_done || j->phase == TS_AJOB_STARTING)
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/output.log", j->dir);
        struct stat st;
        int64_t size = stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
        if (j->log_acked >= size) {
            /* over, reported, and everything it wrote is on the server */
            if (ts_ajob_final(j) && j->final_reported)
                j->log_done = true;
            continue;
        }
        size_t len = (size_t)(size - j->log_acked);
        if (len > budget)
            len = budget;
        budget -= len;
        out[n] = (struct pending_log){
            .id = j->id, .attempt = j->attempt, .from = j->log_acked, .len = len};
        snprintf(out[n].path, sizeof(out[n].path), "%s", path);
        n++;
    }
    pthread_mutex_unlock(&a->mu);
    return n;
}

static json_t *read_chunk(const struct pending_log *p)
{
    int fd = open(p->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    unsigned char *buf = malloc(p->len > 0 ? p->len : 1);
    ssize_t got = buf != NULL ? pread(fd, buf, p->len, p->from) : -1;
    close(fd);
    if (got <= 0) {
        free(buf);
        return NULL;
    }
    char *text = base64(buf, (size_t)got);
    free(buf);
    if (text == NULL)
        return NULL;
    json_t *o = json_pack("{s:I, s:i, s:I, s:s}", "id", (json_int_t)p->id, "attempt", p->attempt,
                          "offset", (json_int_t)p->from, "data", text);
    free(text);
    return o;
}

bool ts_logship_send(struct ts_agent *a, struct ts_conn *c, const char *base)
{
    struct pending_log pend[64];
    char path[512];
    snprintf(path, sizeof(path), "%s/logs", base);
    for (int round = 0; round < LOG_REQUESTS_PER_ROUND && !atomic_load(&a->stop); round++) {
        size_t n = collect_logs(a, pend, 64);
        if (n == 0)
            return true;
        json_t *chunks = json_array();
        for (size_t i = 0; i < n; i++) {
            json_t *ch = read_chunk(&pend[i]);
            if (ch != NULL)
                json_array_append_new(chunks, ch);
        }
        json_t *body = json_pack("{s:o}", "chunks", chunks);
        long status;
        json_t *resp = NULL;
        struct ts_error err = {0};
        enum ts_err e = ts_conn_json(c, "POST", path, body, 60, &status, &resp, &err);
        json_decref(body);
        if (e != TS_OK) {
            ts_log_warn("could not send job output: %s", err.message);
            return false;
        }
        if (status != 200) {
            ts_log_warn("job output refused: status=%ld %s", status, ts_problem_text(resp));
            json_decref(resp);
            if (status >= 500 || status == 401 || status == 403 || status == 404 || status == 429)
                return false;
            /* the server will not take these chunks: do not send them forever */
            pthread_mutex_lock(&a->mu);
            for (size_t i = 0; i < n; i++) {
                struct ts_ajob *j = ts_agent_find(a, pend[i].id, pend[i].attempt);
                if (j != NULL)
                    j->log_done = true;
            }
            pthread_mutex_unlock(&a->mu);
            continue;
        }
        const json_t *acks = json_object_get(resp, "chunks");
        pthread_mutex_lock(&a->mu);
        for (size_t i = 0; i < n; i++) {
            struct ts_ajob *j = ts_agent_find(a, pend[i].id, pend[i].attempt);
            if (j == NULL)
                continue;
            const json_t *ack = NULL, *o;
            size_t k;
            json_array_foreach((json_t *)acks, k, o) {
                if (json_integer_value(json_object_get(o, "id")) == pend[i].id &&
                    json_integer_value(json_object_get(o, "attempt")) == pend[i].attempt)
                    ack = o;
            }
            json_t *next = json_object_get(ack, "next_offset");
            if (ack == NULL || !json_is_integer(next)) {
                j->log_done = true; /* the server does not want this job's output */
                continue;
            }
            j->log_acked = json_integer_value(next);
            ts_ajob_save_log_offset(j);
        }
        pthread_mutex_unlock(&a->mu);
        json_decref(resp);
    }
    return true;
}
