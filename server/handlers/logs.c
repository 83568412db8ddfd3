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

#include "api/log.h"
#include "api/wire_dec.h"
#include "server/auth.h"
#include "server/handlers/handlers.h"
#include "server/notify.h"
#include "server/store/store.h"

#define CHUNKS_MAX 4096        /* chunks in one POST */
#define TAIL_MAX 100000000LL   /* lines */
#define FOLLOW_READ_PIECES 16  /* stored chunks read at once by a follower */
#define FOLLOW_WAIT_MS 1000    /* longest wait before the job's state is read again */
#define FOLLOW_DB_WAIT_MS 5000 /* for a pooled connection */

/* ---- POST /nodes/{name}/logs ------------------------------------------------------ */

static int b64val(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

/* Strict RFC 4648 base64: the standard alphabet, padded to a multiple of 4,
 * no whitespace, no bits set past the data. 0, or -1. */
static int b64_decode(const char *s, size_t n, struct ts_arena *a, unsigned char **out, size_t *len)
{
    if (n % 4 != 0)
        return -1;
    size_t pad = 0;
    if (n > 0 && s[n - 1] == '=')
        pad = n > 1 && s[n - 2] == '=' ? 2 : 1;
    unsigned char *p = ts_arena_alloc(a, n / 4 * 3 + 1);
    if (p == NULL)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        bool last = i + 4 == n;
        int v[4];
        for (int j = 0; j < 4; j++) {
            bool padded = last && j >= 4 - (int)pad;
            v[j] = padded ? 0 : b64val((unsigned char)s[i + (size_t)j]);
            if (v[j] < 0)
                return -1;
        }
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        p[k++] = (unsigned char)(w >> 16);
        if (!last || pad < 2)
            p[k++] = (unsigned char)(w >> 8);
        if (!last || pad < 1)
            p[k++] = (unsigned char)w;
        if (last && ((pad == 1 && (w & 0xff) != 0) || (pad == 2 && (w & 0xffff) != 0)))
            return -1; /* bits past the data: not canonical */
    }
    *out = p;
    *len = k;
    return 0;
}

/* The body {"chunks": [{"id", "attempt", "offset", "data"}]} into v[0..n). */
static enum ts_err decode_chunks(const json_t *body, struct ts_arena *a, struct ts_log_chunk **out,
                                 size_t *n, struct ts_error *err)
{
    static const char *const top[] = {"chunks", NULL};
    static const char *const fields[] = {"id", "attempt", "offset", "data", NULL};
    enum ts_err e = ts_wire_dec_object(body, "", "log chunks", top, NULL, err);
    if (e != TS_OK)
        return e;
    json_t *arr = ts_wire_dec_member(body, "chunks");
    if (arr == NULL)
        return ts_error_field(err, TS_ERR_MISSING_FIELD, "chunks", "chunks is required");
    if (!json_is_array(arr))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, "chunks", "chunks must be an array");
    size_t count = json_array_size(arr);
    if (count > CHUNKS_MAX)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "chunks",
                              "chunks must hold at most %d chunks: %zu", CHUNKS_MAX, count);
    struct ts_log_chunk *v = ts_arena_alloc(a, (count ? count : 1) * sizeof(*v));
    if (v == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < count; i++) {
        json_t *o = json_array_get(arr, i);
        char path[TS_WIRE_PATH_MAX], field[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(path, sizeof(path), "chunks", i);
        if ((e = ts_wire_dec_object(o, path, "a log chunk", fields, NULL, err)) != TS_OK)
            return e;
        static const char *const required[] = {"id", "attempt", "offset", "data"};
        for (int k = 0; k < 4; k++)
            if (ts_wire_dec_member(o, required[k]) == NULL) {
                ts_wire_dec_path(field, sizeof(field), path, required[k]);
                return ts_error_field(err, TS_ERR_MISSING_FIELD, field, "%s is required", field);
            }
        int64_t id = 0, attempt = 0, offset = 0;
        const char *data = NULL;
        if ((e = ts_wire_dec_integer(o, path, "id", 1, INT64_MAX, NULL, &id, err)) != TS_OK ||
            (e = ts_wire_dec_integer(o, path, "attempt", 0, INT32_MAX, NULL, &attempt, err)) !=
                TS_OK ||
            (e = ts_wire_dec_integer(o, path, "offset", 0, (int64_t)1 << 62, NULL, &offset, err)) !=
                TS_OK ||
            (e = ts_wire_dec_string(o, path, "data", true, &data, err)) != TS_OK)
            return e;
        unsigned char *bytes = NULL;
        size_t len = 0;
        if (b64_decode(data, strlen(data), a, &bytes, &len) != 0) {
            ts_wire_dec_path(field, sizeof(field), path, "data");
            ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s is not valid base64", field);
            ts_error_hint(err, "standard base64 (RFC 4648 section 4) with = padding, no spaces");
            return TS_ERR_INVALID_VALUE;
        }
        if (offset > ((int64_t)1 << 62) - (int64_t)len) {
            ts_wire_dec_path(field, sizeof(field), path, "offset");
            return ts_error_field(err, TS_ERR_INVALID_VALUE, field,
                                  "%s plus the data's length is past 2^62: %lld", field,
                                  (long long)offset);
        }
        v[i] = (struct ts_log_chunk){
            .job_id = id, .attempt = (int)attempt, .offset = offset, .data = bytes, .len = len};
    }
    *out = v;
    *n = count;
    return TS_OK;
}

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
    e = decode_chunks(body, r->arena, &chunks, &n, err);
    json_decref(body);
    if (e != TS_OK)
        return e;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    struct ts_log_mark *marks;
    int64_t *ignored;
    size_t nmarks, nignored;
    e = ts_store_log_append(conn, node, chunks, n, c->srv->cfg.log_max_bytes, r->arena, &marks,
                            &nmarks, &ignored, &nignored, err);
    if (e != TS_OK)
        return e;
    json_t *out = json_array();
    for (size_t i = 0; i < nmarks; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(marks[i].job_id));
        json_object_set_new(o, "attempt", json_integer(marks[i].attempt));
        json_object_set_new(o, "next_offset", json_integer(marks[i].next_offset));
        json_array_append_new(out, o);
    }
    json_t *ign = json_array();
    for (size_t i = 0; i < nignored; i++)
        json_array_append_new(ign, json_integer(ignored[i]));
    if (nignored > 0)
        ts_log_info("job output ignored node=%s jobs=%zu first=%lld", node, nignored,
                    (long long)ignored[0]);
    json_t *o = json_object();
    json_object_set_new(o, "chunks", out);
    json_object_set_new(o, "ignored", ign);
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
        e = ts_h_query(r, logs_params, TS_QUERY_NPARAMS(logs_params), &q, NULL, err);
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
