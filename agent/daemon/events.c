/*
 * events.c - the jobs' events, numbered, kept on disk and sent until
 * accepted (events.h). A line of events.log is a report's event, written
 * and read with its codec in api/wire.h.
 */
#include "agent/daemon/events.h"

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/daemon/ajob.h"
#include "api/array.h"
#include "api/files.h"
#include "api/log.h"

#define PENDING_MAX 4096
#define JOBS_MAX 1024  /* seq counters kept; the oldest is read back from disk */
#define QUIET_MS 30000 /* a routine event of a type: at most one per job this often */

/* Routine events: time-sharing makes them every few seconds, for hours.
 * The first of a type is sent at once, then at most one per QUIET_MS,
 * saying how many were left out. */
static const char *const routine[] = {"memory_wait", "swapped_out", "swapped_in"};
#define ROUTINE_N (TS_ARRAY_LEN(routine))

struct seqent {
    int64_t id;
    int attempt;
    int next; /* the next event's seq */
    int64_t last_ms[ROUTINE_N];
    unsigned quiet[ROUTINE_N]; /* left out since the last one */
};

struct ts_events {
    const char *data_dir;
    pthread_mutex_t mu;
    struct ts_report_event *pending; /* oldest first; type and message new */
    size_t npending;
    struct seqent seqs[JOBS_MAX];
    size_t nseqs, oldest;
};

static void drop(struct ts_report_event *e)
{
    free((char *)e->type);
    free((char *)e->message);
}

struct ts_events *ts_events_new(const char *data_dir)
{
    struct ts_events *ev = calloc(1, sizeof(*ev));
    if (ev == NULL)
        return NULL;
    ev->data_dir = data_dir;
    ev->pending = calloc(PENDING_MAX, sizeof(*ev->pending));
    if (ev->pending == NULL) {
        free(ev);
        return NULL;
    }
    pthread_mutex_init(&ev->mu, NULL);
    return ev;
}

void ts_events_free(struct ts_events *ev)
{
    if (ev == NULL)
        return;
    for (size_t i = 0; i < ev->npending; i++)
        drop(&ev->pending[i]);
    free(ev->pending);
    pthread_mutex_destroy(&ev->mu);
    free(ev);
}

static void job_file(const struct ts_events *ev, int64_t id, int attempt, const char *name,
                     char *buf, size_t len)
{
    snprintf(buf, len, "%s/jobs/%lld-%d/%s", ev->data_dir, (long long)id, attempt, name);
}

/* Each line of the job's events.log, decoded, to fn (borrowed for the
 * call). A damaged line is said and skipped, as it always was. */
static void each_logged(const struct ts_events *ev, int64_t id, int attempt,
                        void (*fn)(const struct ts_report_event *e, void *arg), void *arg)
{
    char path[PATH_MAX];
    job_file(ev, id, attempt, "events.log", path, sizeof(path));
    char *text = ts_files_read(path, 64 << 20, NULL);
    struct ts_arena *a = text != NULL ? ts_arena_new() : NULL;
    size_t n = 0;
    for (char *line = text, *nl; a != NULL && line != NULL && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        json_error_t je;
        json_t *v = json_loads(line, JSON_REJECT_DUPLICATES, &je);
        struct ts_report_event e;
        struct ts_error err = {0};
        n++;
        if (v == NULL)
            ts_log_warn("%s: line %zu is damaged: %s; skipped", path, n, je.text);
        else if (ts_wire_report_event_decode(v, "event", a, &e, &err) != TS_OK)
            ts_log_warn("%s: line %zu: %s; skipped", path, n, err.message);
        else
            fn(&e, arg);
        json_decref(v);
        ts_arena_reset(a);
        if (nl == NULL)
            break;
    }
    ts_arena_free(a);
    free(text);
}

static void max_seq(const struct ts_report_event *e, void *arg)
{
    int *m = arg;
    if (e->seq > *m)
        *m = (int)e->seq;
}

/* Under mu: the counter of the job, read back from its log the first time. */
static struct seqent *seq_of(struct ts_events *ev, int64_t id, int attempt)
{
    for (size_t i = 0; i < ev->nseqs; i++)
        if (ev->seqs[i].id == id && ev->seqs[i].attempt == attempt)
            return &ev->seqs[i];
    struct seqent *s;
    if (ev->nseqs < JOBS_MAX) {
        s = &ev->seqs[ev->nseqs++];
    } else {
        s = &ev->seqs[ev->oldest];
        ev->oldest = (ev->oldest + 1) % JOBS_MAX;
    }
    int m = 0;
    each_logged(ev, id, attempt, max_seq, &m);
    *s = (struct seqent){.id = id, .attempt = attempt, .next = m + 1};
    return s;
}

/* Under mu: a copy of e at the end of the queue, the oldest dropped when
 * it is full. */
static void queue(struct ts_events *ev, const struct ts_report_event *e)
{
    struct ts_report_event c = *e;
    c.type = strdup(e->type);
    c.message = strdup(e->message);
    if (c.type == NULL || c.message == NULL) {
        drop(&c);
        ts_log_warn("out of memory: an event is left out of the reports");
        return;
    }
    if (ev->npending >= PENDING_MAX) {
        ts_log_warn("too many events not yet accepted: the oldest is dropped from the reports");
        drop(&ev->pending[0]);
        memmove(ev->pending, ev->pending + 1, (ev->npending - 1) * sizeof(*ev->pending));
        ev->npending--;
    }
    ev->pending[ev->npending++] = c;
}

void ts_events_add(struct ts_events *ev, int64_t id, int attempt, const char *type, const char *fmt,
                   ...)
{
    char msg[TS_EVENT_MESSAGE_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ts_log_info("job event job=%lld attempt=%d type=%s message=\"%s\"", (long long)id, attempt,
                type, msg);
    if (ev == NULL)
        return;
    pthread_mutex_lock(&ev->mu);
    struct seqent *s = seq_of(ev, id, attempt);
    for (size_t r = 0; r < ROUTINE_N; r++) {
        if (strcmp(type, routine[r]) != 0)
            continue;
        int64_t now = ts_ajob_now_ms();
        if (s->last_ms[r] != 0 && now - s->last_ms[r] < QUIET_MS) {
            s->quiet[r]++;
            pthread_mutex_unlock(&ev->mu);
            return;
        }
        if (s->quiet[r] > 0) {
            size_t n = strlen(msg);
            snprintf(msg + n, sizeof(msg) - n, " (and %u more %s event%s in the last %.0f s)",
                     s->quiet[r], type, s->quiet[r] == 1 ? "" : "s",
                     (double)(now - s->last_ms[r]) / 1000.0);
        }
        s->last_ms[r] = now;
        s->quiet[r] = 0;
    }
    struct ts_report_event e = {
        .id = id, .attempt = attempt, .seq = s->next, .type = type, .message = msg};
    json_t *v = ts_wire_report_event_encode(&e);
    if (v != NULL) {
        s->next++;
        char path[PATH_MAX], *line = json_dumps(v, JSON_COMPACT);
        job_file(ev, id, attempt, "events.log", path, sizeof(path));
        FILE *f = line != NULL ? fopen(path, "ae") : NULL;
        if (f != NULL) {
            fprintf(f, "%s\n", line);
            fclose(f);
        } else {
            ts_log_warn("could not write %s", path);
        }
        free(line);
        queue(ev, &e);
        json_decref(v);
    }
    pthread_mutex_unlock(&ev->mu);
}

struct load_arg {
    struct ts_events *ev;
    int acked;
};

static void requeue(const struct ts_report_event *e, void *arg)
{
    struct load_arg *la = arg;
    if (e->seq > la->acked)
        queue(la->ev, e);
}

static int read_acked(const struct ts_events *ev, int64_t id, int attempt)
{
    char path[PATH_MAX];
    job_file(ev, id, attempt, "events.acked", path, sizeof(path));
    char *t = ts_files_read(path, 64, NULL);
    int v = t != NULL ? atoi(t) : 0;
    free(t);
    return v;
}

void ts_events_load(struct ts_events *ev, int64_t id, int attempt)
{
    pthread_mutex_lock(&ev->mu);
    struct load_arg la = {ev, read_acked(ev, id, attempt)};
    each_logged(ev, id, attempt, requeue, &la);
    pthread_mutex_unlock(&ev->mu);
}

size_t ts_events_pending(struct ts_events *ev, struct ts_arena *a, size_t max,
                         struct ts_report_event **out)
{
    size_t n = 0;
    pthread_mutex_lock(&ev->mu);
    size_t total = ev->npending;
    if (total > max)
        total = max;
    *out = ts_arena_alloc(a, sizeof(**out) * (total + 1));
    for (size_t i = 0; *out != NULL && i < total; i++) {
        const struct ts_report_event *e = &ev->pending[i];
        struct ts_report_event *r = &(*out)[n];
        *r = *e;
        r->type = ts_arena_strdup(a, e->type);
        r->message = ts_arena_strdup(a, e->message);
        if (r->type != NULL && r->message != NULL)
            n++;
    }
    pthread_mutex_unlock(&ev->mu);
    return n;
}

static bool same_event(const struct ts_report_event *a, const struct ts_report_event *b)
{
    return a->id == b->id && a->attempt == b->attempt && a->seq == b->seq;
}

void ts_events_acked(struct ts_events *ev, const struct ts_report_event *events, size_t n)
{
    pthread_mutex_lock(&ev->mu);
    for (size_t i = 0; i < n; i++) {
        const struct ts_report_event *e = &events[i];
        for (size_t k = 0; k < ev->npending; k++) {
            if (same_event(&ev->pending[k], e)) {
                drop(&ev->pending[k]);
                memmove(ev->pending + k, ev->pending + k + 1,
                        (ev->npending - k - 1) * sizeof(*ev->pending));
                ev->npending--;
                break;
            }
        }
        if (e->seq > read_acked(ev, e->id, e->attempt)) {
            char path[PATH_MAX], text[32];
            job_file(ev, e->id, e->attempt, "events.acked", path, sizeof(path));
            int len = snprintf(text, sizeof(text), "%d\n", (int)e->seq);
            ts_files_write_quick(path, text, (size_t)len, 0600);
        }
    }
    pthread_mutex_unlock(&ev->mu);
}
