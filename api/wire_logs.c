/*
 * wire_logs.c - job output on the wire (POST /nodes/{name}/logs): the
 * chunks an agent sends, in base64, and the server's answer, where each
 * job's output resumes. The agent encodes the chunks and decodes the
 * answer; the server decodes the chunks (strict: it reads an agent's
 * body) and encodes the answer.
 *
 * The answer's decoder skips members it does not know, as the desired
 * state's does: a server is upgraded before its agents (api/version.h).
 */
#include "api/wire.h"

#include <stdlib.h>
#include <string.h>

#include "api/wire_dec.h"
#include "api/wire_enc.h"

#define OFFSET_MAX ((int64_t)1 << 62)

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static enum ts_err nomem(struct ts_error *err)
{
    return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
}

/* n bytes of p as padded base64. New (free()), NULL when out of memory. */
static char *b64_encode(const unsigned char *p, size_t n)
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

static int b64_value(unsigned char ch)
{
    const char *p = ch != '\0' ? strchr(b64, ch) : NULL;
    return p != NULL ? (int)(p - b64) : -1;
}

/* Strict RFC 4648 base64: the standard alphabet, padded to a multiple of 4,
 * no whitespace, no bits set past the data. The bytes go to arena a. 0, or
 * -1 (not base64, or out of memory). */
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
            v[j] = padded ? 0 : b64_value((unsigned char)s[i + (size_t)j]);
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

/* ---- the chunks: encoded by the agent, decoded by the server ---------------- */

json_t *ts_wire_log_chunks_encode(const struct ts_log_chunk *v, size_t n)
{
    json_t *o = json_object(), *arr = json_array();
    bool ok = arr != NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_object();
        char *text = b64_encode(v[i].data, v[i].len);
        ts_wire_enc_set(c, "id", json_integer(v[i].job_id), &ok);
        ts_wire_enc_set(c, "attempt", json_integer(v[i].attempt), &ok);
        ts_wire_enc_set(c, "offset", json_integer(v[i].offset), &ok);
        ts_wire_enc_set(c, "data", text != NULL ? json_string(text) : NULL, &ok);
        free(text);
        ts_wire_enc_append(arr, ts_wire_enc_finish(c, ok), &ok);
    }
    ts_wire_enc_set(o, "chunks", arr, &ok);
    return ts_wire_enc_finish(o, ok);
}

static enum ts_err chunk_decode(const json_t *o, const char *path, struct ts_arena *a,
                                struct ts_log_chunk *out, struct ts_error *err)
{
    static const char *const fields[] = {"id", "attempt", "offset", "data", NULL};
    char field[TS_WIRE_PATH_MAX];
    enum ts_err e = ts_wire_dec_object(o, path, "a log chunk", fields, NULL, err);
    for (int k = 0; e == TS_OK && fields[k] != NULL; k++)
        if (ts_wire_dec_member(o, fields[k]) == NULL) {
            ts_wire_dec_path(field, sizeof(field), path, fields[k]);
            return ts_error_field(err, TS_ERR_MISSING_FIELD, field, "%s is required", field);
        }
    int64_t id = 0, attempt = 0, offset = 0;
    const char *data = NULL;
    if (e == TS_OK)
        e = ts_wire_dec_integer(o, path, "id", 1, INT64_MAX, NULL, &id, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(o, path, "attempt", 0, INT32_MAX, NULL, &attempt, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(o, path, "offset", 0, OFFSET_MAX, NULL, &offset, err);
    if (e == TS_OK)
        e = ts_wire_dec_string(o, path, "data", true, &data, err);
    if (e != TS_OK)
        return e;
    unsigned char *bytes = NULL;
    size_t len = 0;
    if (b64_decode(data, strlen(data), a, &bytes, &len) != 0) {
        ts_wire_dec_path(field, sizeof(field), path, "data");
        ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s is not valid base64", field);
        ts_error_hint(err, "standard base64 (RFC 4648 section 4) with = padding, no spaces");
        return TS_ERR_INVALID_VALUE;
    }
    if (offset > OFFSET_MAX - (int64_t)len) {
        ts_wire_dec_path(field, sizeof(field), path, "offset");
        return ts_error_field(err, TS_ERR_INVALID_VALUE, field,
                              "%s plus the data's length is past 2^62: %lld", field,
                              (long long)offset);
    }
    *out = (struct ts_log_chunk){
        .job_id = id, .attempt = (int)attempt, .offset = offset, .data = bytes, .len = len};
    return TS_OK;
}

enum ts_err ts_wire_log_chunks_decode(const json_t *in, struct ts_arena *a,
                                      struct ts_log_chunk **out, size_t *n, struct ts_error *err)
{
    static const char *const top[] = {"chunks", NULL};
    *out = NULL;
    *n = 0;
    enum ts_err e = ts_wire_dec_object(in, "", "log chunks", top, NULL, err);
    if (e != TS_OK)
        return e;
    const json_t *arr = ts_wire_dec_member(in, "chunks");
    if (arr == NULL)
        return ts_error_field(err, TS_ERR_MISSING_FIELD, "chunks", "chunks is required");
    if (!json_is_array(arr))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, "chunks", "chunks must be an array");
    size_t count = json_array_size(arr);
    if (count > TS_LOG_CHUNKS_MAX)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "chunks",
                              "chunks must hold at most %d chunks: %zu", TS_LOG_CHUNKS_MAX, count);
    struct ts_log_chunk *v = ts_arena_alloc(a, (count + 1) * sizeof(*v));
    if (v == NULL)
        return nomem(err);
    for (size_t i = 0; i < count; i++) {
        char path[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(path, sizeof(path), "chunks", i);
        if ((e = chunk_decode(json_array_get(arr, i), path, a, &v[i], err)) != TS_OK)
            return e;
    }
    *out = v;
    *n = count;
    return TS_OK;
}

/* ---- the answer: encoded by the server, decoded by the agent ---------------- */

json_t *ts_wire_log_ack_encode(const struct ts_log_ack *r)
{
    json_t *o = json_object(), *marks = json_array(), *ignored = json_array();
    bool ok = marks != NULL && ignored != NULL;
    for (size_t i = 0; i < r->nmarks; i++) {
        json_t *m = json_object();
        ts_wire_enc_set(m, "id", json_integer(r->marks[i].job_id), &ok);
        ts_wire_enc_set(m, "attempt", json_integer(r->marks[i].attempt), &ok);
        ts_wire_enc_set(m, "next_offset", json_integer(r->marks[i].next_offset), &ok);
        ts_wire_enc_append(marks, ts_wire_enc_finish(m, ok), &ok);
    }
    for (size_t i = 0; i < r->nignored; i++)
        ts_wire_enc_append(ignored, json_integer(r->ignored[i]), &ok);
    ts_wire_enc_set(o, "chunks", marks, &ok);
    ts_wire_enc_set(o, "ignored", ignored, &ok);
    return ts_wire_enc_finish(o, ok);
}

static enum ts_err mark_decode(const json_t *v, const char *path, struct ts_log_mark *m,
                               struct ts_error *err)
{
    static const char *const required[] = {"id", "attempt", "next_offset", NULL};
    int64_t attempt = 0;
    if (!json_is_object(v))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, path, "%s must be an object", path);
    for (int k = 0; required[k] != NULL; k++)
        if (ts_wire_dec_member(v, required[k]) == NULL) {
            char f[TS_WIRE_PATH_MAX];
            ts_wire_dec_path(f, sizeof(f), path, required[k]);
            return ts_error_field(err, TS_ERR_MISSING_FIELD, f, "%s is required", f);
        }
    enum ts_err e = ts_wire_dec_integer(v, path, "id", 1, INT64_MAX, NULL, &m->job_id, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "attempt", 0, INT32_MAX, NULL, &attempt, err);
    if (e == TS_OK)
        e = ts_wire_dec_integer(v, path, "next_offset", 0, OFFSET_MAX, NULL, &m->next_offset, err);
    m->attempt = (int)attempt;
    return e;
}

enum ts_err ts_wire_log_ack_decode(const json_t *in, struct ts_arena *a, struct ts_log_ack *out,
                                   struct ts_error *err)
{
    memset(out, 0, sizeof(*out));
    const json_t *marks = NULL, *ignored = NULL;
    if (!json_is_object(in))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, "",
                              "the answer to job output must be an object");
    enum ts_err e = ts_wire_dec_array(in, "", "chunks", false, TS_LOG_CHUNKS_MAX, &marks, err);
    if (e == TS_OK)
        e = ts_wire_dec_array(in, "", "ignored", false, TS_LOG_CHUNKS_MAX, &ignored, err);
    if (e != TS_OK)
        return e;
    size_t nm = json_array_size(marks), ni = json_array_size(ignored);
    out->marks = ts_arena_alloc(a, sizeof(*out->marks) * (nm + 1));
    out->ignored = ts_arena_alloc(a, sizeof(*out->ignored) * (ni + 1));
    if (out->marks == NULL || out->ignored == NULL)
        return nomem(err);
    for (size_t i = 0; i < nm; i++) {
        char p[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(p, sizeof(p), "chunks", i);
        if ((e = mark_decode(json_array_get(marks, i), p, &out->marks[i], err)) != TS_OK)
            return e;
    }
    for (size_t i = 0; i < ni; i++) {
        const json_t *v = json_array_get(ignored, i);
        char p[TS_WIRE_PATH_MAX];
        ts_wire_dec_index(p, sizeof(p), "ignored", i);
        if (!json_is_integer(v) || json_integer_value(v) < 1)
            return ts_error_field(err, TS_ERR_INVALID_VALUE, p, "%s must be a job id", p);
        out->ignored[i] = json_integer_value(v);
    }
    out->nmarks = nm;
    out->nignored = ni;
    return TS_OK;
}
