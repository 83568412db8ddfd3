/*
 * logs.c - job output: agents ship it (POST /nodes/{name}/logs), users read
 * and follow it (GET /jobs/{id}/logs?tail=N&follow=true).
 *
 * A follower gives the request's database connection back before it
 * streams; each read borrows a pooled connection for two statements and
 * returns it, and between reads the stream waits on NOTIFY tessera_log for
 * its job (at most a second, so a job that finishes is noticed).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "api/log.h"
#include "server/auth.h"
#include "server/handlers/handlers.h"
#include "server/notify.h"
#include "server/store/store.h"

#define TAIL_MAX 100000000LL   /* lines */
#define FOLLOW_READ_PIECES 16  /* stored chunks read at once by a follower */
#define FOLLOW_WAIT_MS 1000    /* longest wait before the job's state is read again */
#define FOLLOW_DB_WAIT_MS 5000 /* for a pooled connection */

/* ---- POST /nodes/{name}/logs ------------------------------------------------------ */

enum ts_err ts_h_node_logs(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    const char *node = r->params[0];
    json_t *body = NULL;
    enum ts_err e = ts_h_body(r, &body, err);
    if (e != TS_OK)
        return e;
    struct ts_log_chunk *chunks = NULL;
    size_t n = 0;
    e = ts_wire_log_chunks_decode(body, r->arena, &chunks, &n, err);
    json_decref(body);
    if (e != TS_OK)
        return e;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    struct ts_log_ack ack;
    e = ts_store_log_append(conn, node, chunks, n, c->srv->cfg.log_max_bytes, r->arena, &ack.marks,
                            &ack.nmarks, &ack.ignored, &ack.nignored, err);
    if (e != TS_OK)
        return e;
    if (ack.nignored > 0)
        ts_log_info("job output ignored node=%s jobs=%zu first=%lld", node, ack.nignored,
                    (long long)ack.ignored[0]);
    json_t *o = ts_wire_log_ack_encode(&ack);
    if (o == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    ts_http_reply_json(r, 200, o);
    return TS_OK;
}

/* ---- GET /jobs/{id}/logs ------------------------------------------------------------- */

/* Where a reader is in a job's output, and the text it made from it. */
struct reader {
    int attempt; /* the end of what was read: -1 before anything */
    int64_t offset;
    char last; /* the last byte output; '\n' when none */
};

/* Append pieces to b: attempts in order, a newline between two attempts
 * when the earlier one's output does not end with one. */
static enum ts_err append_pieces(struct reader *rd, const struct ts_log_piece *p, size_t n,
                                 struct ts_buf *b)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i].attempt != rd->attempt && rd->last != '\n' && ts_buf_append(b, "\n", 1) != TS_OK)
            return TS_ERR_NOMEM;
        if (ts_buf_append(b, p[i].data, p[i].len) != TS_OK)
            return TS_ERR_NOMEM;
        rd->attempt = p[i].attempt;
        rd->offset = p[i].offset + (int64_t)p[i].len;
        if (p[i].len > 0)
            rd->last = (char)p[i].data[p[i].len - 1];
    }
    return TS_OK;
}

/* The start of the last `lines` lines of text[0..len) (a last line without
 * a newline counts as a line). */
static size_t tail_start(const char *text, size_t len, long long lines)
{
    if (lines <= 0)
        return len;
    size_t i = len;
    if (i > 0 && text[i - 1] == '\n')
        i--;
    long long seen = 0;
    while (i > 0) {
        if (text[i - 1] == '\n' && ++seen == lines)
            return i;
        i--;
    }
    return 0;
}

/* A follower: what it has to send, where it is, and when it is done. */
struct follow {
    struct ts_server *srv;
    int64_t job_id;
    struct reader rd;
    struct ts_buf out; /* ready to send from `sent` on */
    size_t sent;
    bool finished; /* the job was seen finished and one last wait passed */
    bool done;
    char request_id[20];
};

static void follow_free(void *cls)
{
    struct follow *f = cls;
    ts_buf_free(&f->out);
    free(f);
}

/* Read what was stored since the last read. -1 on an error (logged). */
static int follow_read(struct follow *f, bool *finished)
{
    struct ts_error err;
    ts_error_clear(&err);
    struct ts_arena *a = ts_arena_new();
    if (a == NULL)
        return -1;
    struct ts_dbconn *c = ts_db_acquire(f->srv->db, FOLLOW_DB_WAIT_MS, &err);
    enum ts_job_state state = TS_JOB_PENDING;
    struct ts_log_piece *p = NULL;
    size_t n = 0;
    enum ts_err e = c ? TS_OK : err.code;
    /* the state first: output stored before it finished is read after */
    if (e == TS_OK)
        e = ts_store_log_job_state(c, f->job_id, &state, &err);
    if (e == TS_OK)
        e = ts_store_log_read(c, f->job_id, f->rd.attempt, f->rd.offset, FOLLOW_READ_PIECES, a, &p,
                              &n, &err);
    if (c)
        ts_db_release(f->srv->db, c);
    if (e == TS_OK)
        e = append_pieces(&f->rd, p, n, &f->out);
    ts_arena_free(a);
    if (e == TS_ERR_NOT_FOUND) { /* deleted while followed */
        *finished = true;
        return 0;
    }
    if (e != TS_OK) {
        ts_log_warn("could not follow job output job=%lld: %s request=%s", (long long)f->job_id,
                    err.message, f->request_id);
        return -1;
    }
    *finished = ts_job_state_finished(state);
    return 0;
}

static ssize_t follow_next(void *cls, char *buf, size_t max)
{
    struct follow *f = cls;
    if (f->sent == f->out.len && !f->done) {
        ts_buf_reset(&f->out);
        f->sent = 0;
        uint64_t seen = ts_notify_seq(f->srv->notify, "tessera_log", f->job_id);
        bool finished = false;
        if (follow_read(f, &finished) != 0)
            return TS_HTTP_STREAM_ERROR;
        if (f->out.len == 0) {
            if (finished && f->finished) {
                f->done = true;
            } else {
                /* output a finished job's agent ships late still comes: one
                 * last wait after the job is seen finished */
                f->finished = finished;
                ts_notify_wait(f->srv->notify, "tessera_log", f->job_id, seen, FOLLOW_WAIT_MS);
                return 0;
            }
        }
    }
    if (f->sent < f->out.len) {
        size_t k = f->out.len - f->sent < max ? f->out.len - f->sent : max;
        memcpy(buf, f->out.data + f->sent, k);
        f->sent += k;
        return (ssize_t)k;
    }
    return TS_HTTP_STREAM_END;
}

/* GET /jobs/{id}/logs: what the query string may hold (the CLI's `tessera
 * logs` and the dashboard send follow and tail). */
struct logs_query {
    long long tail; /* -1: all */
    bool follow;
};

static const struct ts_query_param logs_params[] = {
    {.name = "tail",
     .type = TS_QUERY_INT,
     .offset = offsetof(struct logs_query, tail),
     .min = 0,
     .max = TAIL_MAX},
    {.name = "follow", .type = TS_QUERY_BOOL, .offset = offsetof(struct logs_query, follow)},
};

enum ts_err ts_h_job_logs(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    struct logs_query q = {.tail = -1};
    int64_t id, pid;
    enum ts_err e = ts_h_param_id(r, 0, "job", &id, err);
    if (e == TS_OK)
        e = ts_h_query(r, logs_params, TS_ARRAY_LEN(logs_params), &q, NULL, err);
    if (e != TS_OK)
        return e;
    long long tail = q.tail;
    bool follow = q.follow;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    struct ts_job job;
    if ((e = ts_store_job_get(conn, id, r->arena, &job, &pid, err)) != TS_OK)
        return e;
    if (!ts_auth_project_allowed(c, pid))
        return ts_error_set(err, TS_ERR_FORBIDDEN, "token \"%s\" has no access to project \"%s\"",
                            c->who.name, job.spec.project);
    struct ts_log_piece *p;
    size_t n;
    if ((e = ts_store_log_read(conn, id, -1, 0, 0, r->arena, &p, &n, err)) != TS_OK)
        return e;
    struct reader rd = {.attempt = -1, .offset = 0, .last = '\n'};
    struct ts_buf text;
    ts_buf_init(&text, 0);
    if (append_pieces(&rd, p, n, &text) != TS_OK) {
        ts_buf_free(&text);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    size_t from = tail >= 0 ? tail_start(text.data ? text.data : "", text.len, tail) : 0;
    ts_http_add_header(r, "X-Content-Type-Options", "nosniff");
    if (!follow || ts_job_state_finished(job.state)) {
        size_t len = text.len - from;
        char *raw = ts_arena_alloc(r->arena, len + 1);
        if (raw != NULL && len > 0)
            memcpy(raw, text.data + from, len);
        ts_buf_free(&text);
        if (raw == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        r->raw = raw;
        r->raw_len = len;
        r->status = 200;
        r->content_type = "text/plain; charset=utf-8";
        return TS_OK;
    }
    struct follow *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        ts_buf_free(&text);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    f->srv = c->srv;
    f->job_id = id;
    f->rd = rd;
    ts_buf_init(&f->out, 0);
    snprintf(f->request_id, sizeof(f->request_id), "%s", r->request_id);
    if (text.len > from && ts_buf_append(&f->out, text.data + from, text.len - from) != TS_OK) {
        ts_buf_free(&text);
        follow_free(f);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    ts_buf_free(&text);
    /* the stream can last for hours: it borrows a connection per read */
    ts_ctx_db_release(c);
    ts_log_debug("following job output job=%lld", (long long)id);
    ts_http_reply_stream(r, 200, "text/plain; charset=utf-8", follow_next, f, follow_free);
    return TS_OK;
}
