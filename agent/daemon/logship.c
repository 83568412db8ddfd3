/*
 * logship.c - job output to the server: POST /nodes/NAME/logs with the
 * new bytes of each job's output.log in base64 chunks, each request body at
 * most 256 KiB, from the offset the server last acknowledged (saved in the
 * job folder, so a restarted agent resumes there). The body and the answer
 * go through api/wire_logs.c, the codec the server uses too.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/daemon/logship.h"

#include <limits.h>

#include "agent/daemon/ajob.h"
#include "api/arena.h"
#include "api/log.h"
#include "api/wire.h"

#define LOG_BODY_MAX (256 * 1024)
/* raw bytes per request: base64 makes 4 of 3, plus room for the JSON */
#define LOG_RAW_MAX ((LOG_BODY_MAX - 4096) / 4 * 3)
#define LOG_REQUESTS_PER_ROUND 64
#define LOG_PENDING_MAX 64 /* attempts in one request */

/* The job list the agent shares, and the lock of its shared fields. */
struct shared {
    pthread_mutex_t *mu;
    struct ts_jobtab *jobtab;
};

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
static size_t collect_logs(const struct shared *s, struct pending_log *out, size_t max)
{
    size_t n = 0, budget = LOG_RAW_MAX;
    pthread_mutex_lock(s->mu);
    for (struct ts_ajob *j = s->jobtab->jobs; j != NULL && n < max && budget > 0; j = j->next) {
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
    pthread_mutex_unlock(s->mu);
    return n;
}

/* p's bytes into c (data new: free()); false when none could be read. */
static bool read_chunk(const struct pending_log *p, struct ts_log_chunk *c)
{
    int fd = open(p->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    unsigned char *buf = malloc(p->len > 0 ? p->len : 1);
    ssize_t got = buf != NULL ? pread(fd, buf, p->len, p->from) : -1;
    close(fd);
    if (got <= 0) {
        free(buf);
        return false;
    }
    *c = (struct ts_log_chunk){
        .job_id = p->id, .attempt = p->attempt, .offset = p->from, .data = buf, .len = (size_t)got};
    return true;
}

/* The request body of the chunks of pend[0..n). New, NULL when out of
 * memory. */
static json_t *chunks_body(const struct pending_log *pend, size_t n)
{
    struct ts_log_chunk chunks[LOG_PENDING_MAX];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += read_chunk(&pend[i], &chunks[k]);
    json_t *body = ts_wire_log_chunks_encode(chunks, k);
    for (size_t i = 0; i < k; i++)
        free((void *)chunks[i].data);
    return body;
}

/* The server's mark for attempt (id, attempt), or NULL when it left the
 * job out (it does not want its output). */
static const struct ts_log_mark *mark_of(const struct ts_log_ack *ack, int64_t id, int attempt)
{
    const struct ts_log_mark *found = NULL;
    for (size_t k = 0; k < ack->nmarks; k++)
        if (ack->marks[k].job_id == id && ack->marks[k].attempt == attempt)
            found = &ack->marks[k];
    return found;
}

/* Pending attempts the server left out of its answer are not sent again;
 * the others resume where it says. */
static void take_ack(const struct shared *s, const struct pending_log *pend, size_t n,
                     const struct ts_log_ack *ack)
{
    pthread_mutex_lock(s->mu);
    for (size_t i = 0; i < n; i++) {
        struct ts_ajob *j = ts_jobtab_find(s->jobtab, pend[i].id, pend[i].attempt);
        if (j == NULL)
            continue;
        const struct ts_log_mark *m =
            ack != NULL ? mark_of(ack, pend[i].id, pend[i].attempt) : NULL;
        if (m == NULL) {
            j->log_done = true; /* the server does not want this job's output */
            continue;
        }
        j->log_acked = m->next_offset;
        ts_ajob_save_log_offset(j);
    }
    pthread_mutex_unlock(s->mu);
}

/* One request with the chunks of pend[0..n): true when the round may go on,
 * false to try again later (the server unreachable, or answering so). */
static bool send_round(const struct shared *s, struct ts_conn *c, const char *path,
                       const struct pending_log *pend, size_t n)
{
    json_t *body = chunks_body(pend, n), *resp = NULL;
    long status;
    struct ts_error err = {0};
    if (body == NULL) {
        ts_log_warn("could not send job output: out of memory");
        return false;
    }
    enum ts_err e = ts_conn_json(c, "POST", path, body, 60, &status, &resp, &err);
    json_decref(body);
    if (e != TS_OK) {
        ts_log_warn("could not send job output: %s", err.message);
        return false;
    }
    bool go_on = true;
    if (status != 200) {
        ts_log_warn("job output refused: status=%ld %s", status, ts_problem_text(resp));
        if (status >= 500 || status == 401 || status == 403 || status == 404 || status == 429)
            go_on = false;
        else /* the server will not take these chunks: do not send them forever */
            take_ack(s, pend, n, NULL);
        json_decref(resp);
        return go_on;
    }
    struct ts_arena *arena = ts_arena_new();
    struct ts_log_ack ack;
    e = arena != NULL ? ts_wire_log_ack_decode(resp, arena, &ack, &err) : ts_error_nomem(&err);
    if (e == TS_OK) {
        take_ack(s, pend, n, &ack);
    } else {
        /* sent again next round: the server stores a resent byte once */
        ts_log_warn("could not read the answer to job output: %s%s%s", err.message,
                    err.field[0] ? " field=" : "", err.field);
        go_on = false;
    }
    ts_arena_free(arena);
    json_decref(resp);
    return go_on;
}

bool ts_logship_send(pthread_mutex_t *mu, struct ts_jobtab *jobtab, const atomic_bool *stop,
                     struct ts_conn *c, const char *base)
{
    const struct shared s = {mu, jobtab};
    struct pending_log pend[LOG_PENDING_MAX];
    char path[512];
    snprintf(path, sizeof(path), "%s/logs", base);
    for (int round = 0; round < LOG_REQUESTS_PER_ROUND && !atomic_load(stop); round++) {
        size_t n = collect_logs(&s, pend, LOG_PENDING_MAX);
        if (n == 0)
            return true;
        if (!send_round(&s, c, path, pend, n))
            return false;
    }
    return true;
}
