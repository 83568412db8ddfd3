/*
 * store_logs.c - job output: chunks agents ship (idempotent on job, attempt
 * and offset, contiguous per attempt, capped per job) and reads in order.
 *
 * What is stored for one attempt is always one contiguous byte range: a chunk
 * past its end (a gap) is not stored, and the part of a chunk already stored
 * is cut off, so a resent chunk never stores a byte twice. When a job's output
 * passes its cap the oldest chunks are deleted; an attempt that loses all of
 * them keeps an empty row at its end, so that its end is still known and a
 * late resend is still recognised.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

static int chunk_cmp(const void *pa, const void *pb)
{
    const struct ts_log_chunk *a = pa, *b = pb;
    if (a->job_id != b->job_id)
        return a->job_id < b->job_id ? -1 : 1;
    if (a->attempt != b->attempt)
        return a->attempt < b->attempt ? -1 : 1;
    if (a->offset != b->offset)
        return a->offset < b->offset ? -1 : 1;
    return 0;
}

/* One job named by the request, as locked in the database. */
struct job_row {
    int64_t id;
    int attempt;       /* the job's current attempt */
    int64_t log_bytes; /* before this call */
    int64_t added;     /* bytes stored by this call */
    bool accepted;     /* placed on the node */
};

/* One (job, attempt) named by the request: where its stored output ends. */
struct end_row {
    int64_t job_id;
    int attempt;
    int64_t end; /* -1: nothing stored */
};

static struct job_row *find_job(struct job_row *v, size_t n, int64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].id == id)
            return &v[i];
    return NULL;
}

static struct end_row *find_end(struct end_row *v, size_t n, int64_t id, int attempt)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].job_id == id && v[i].attempt == attempt)
            return &v[i];
    return NULL;
}

/* bytes as a bytea parameter in hex form: "\x0a1b..." */
static char *bytea_hex(struct ts_arena *a, const unsigned char *p, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    char *s = ts_arena_alloc(a, 2 * len + 3);
    if (s == NULL)
        return NULL;
    s[0] = '\\';
    s[1] = 'x';
    for (size_t i = 0; i < len; i++) {
        s[2 + 2 * i] = digits[p[i] >> 4];
        s[3 + 2 * i] = digits[p[i] & 15];
    }
    return s;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A bytea value in PostgreSQL's hex output ("\x...") into the arena. */
static unsigned char *bytea_unhex(struct ts_arena *a, const char *s, size_t *len)
{
    size_t n = strlen(s);
    if (n < 2 || s[0] != '\\' || s[1] != 'x' || n % 2 != 0)
        return NULL;
    size_t out = (n - 2) / 2;
    unsigned char *p = ts_arena_alloc(a, out + 1);
    if (p == NULL)
        return NULL;
    for (size_t i = 0; i < out; i++) {
        int hi = hexval(s[2 + 2 * i]), lo = hexval(s[3 + 2 * i]);
        if (hi < 0 || lo < 0)
            return NULL;
        p[i] = (unsigned char)(hi << 4 | lo);
    }
    *len = out;
    return p;
}

static enum ts_err exec1(struct ts_dbconn *c, const char *sql, int n, const char *const *params,
                         struct ts_error *err)
{
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c, sql, n, params, &res, err);
    PQclear(res);
    return e;
}

/* Delete the oldest chunks of job until at most max bytes are left (the
 * newest chunk is never over max: the caller cut it), leaving an empty row
 * at the end of each attempt that lost all its chunks, and set log_bytes. */
static enum ts_err trim(struct ts_dbconn *c, int64_t job, int64_t max, struct ts_error *err)
{
    char idbuf[24], maxbuf[24];
    snprintf(idbuf, sizeof(idbuf), "%lld", (long long)job);
    snprintf(maxbuf, sizeof(maxbuf), "%lld", (long long)max);
    const char *params[] = {idbuf, maxbuf};
    enum ts_err e =
        exec1(c,
              "WITH o AS ("
              " SELECT attempt, offset_bytes,"
              "  sum(length(data)) OVER (ORDER BY attempt DESC, offset_bytes DESC) AS upto,"
              "  row_number() OVER (PARTITION BY attempt ORDER BY offset_bytes DESC) AS nth"
              " FROM job_log WHERE job_id = $1 AND length(data) > 0),"
              " gone AS ("
              " DELETE FROM job_log l USING o WHERE l.job_id = $1 AND l.attempt = o.attempt"
              "  AND l.offset_bytes = o.offset_bytes AND o.upto > $2"
              "  RETURNING l.attempt, l.offset_bytes + length(l.data) AS end_bytes, o.nth)"
              " INSERT INTO job_log (job_id, attempt, offset_bytes, data)"
              " SELECT $1, attempt, end_bytes, ''::bytea FROM gone WHERE nth = 1"
              " ON CONFLICT DO NOTHING",
              2, params, err);
    if (e != TS_OK)
        return e;
    return exec1(c,
                 "UPDATE job SET log_bytes = (SELECT coalesce(sum(length(data)), 0)"
                 " FROM job_log WHERE job_id = $1) WHERE id = $1",
                 1, params, err);
}

/* Read the node, lock the jobs the chunks name that are placed on it, and
 * where each (job, attempt) named ends. */
static enum ts_err load(struct ts_dbconn *c, const char *node, const struct ts_log_chunk *chunks,
                        size_t n, struct ts_arena *a, struct job_row **jobs, size_t *njobs,
                        struct end_row **ends, size_t *nends, struct ts_error *err)
{
    const char *p1[] = {node};
    PGresult *res = NULL;
    enum ts_err e =
        ts_db_exec(c, "SELECT id FROM node WHERE name = $1", TS_ARRAY_LEN(p1), p1, &res, err);
    if (e != TS_OK)
        return e;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "node \"%s\" does not exist", node);
    }
    char nodeid[24];
    ts_row_copy(res, 0, 0, nodeid, sizeof(nodeid));
    PQclear(res);

    /* chunks are sorted: distinct ids and (id, attempt) pairs are runs */
    struct job_row *jv = ts_arena_alloc(a, (n ? n : 1) * sizeof(*jv));
    struct end_row *ev = ts_arena_alloc(a, (n ? n : 1) * sizeof(*ev));
    int64_t *ids = ts_arena_alloc(a, (n ? n : 1) * sizeof(*ids));
    if (jv == NULL || ev == NULL || ids == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    size_t nj = 0, ne = 0;
    for (size_t i = 0; i < n; i++) {
        if (nj == 0 || jv[nj - 1].id != chunks[i].job_id) {
            jv[nj].id = chunks[i].job_id;
            ids[nj] = chunks[i].job_id;
            nj++;
        }
        if (ne == 0 || ev[ne - 1].job_id != chunks[i].job_id ||
            ev[ne - 1].attempt != chunks[i].attempt) {
            ev[ne].job_id = chunks[i].job_id;
            ev[ne].attempt = chunks[i].attempt;
            ev[ne].end = -1;
            ne++;
        }
    }
    char *idarr = ts_row_id_array(a, ids, nj);
    if (idarr == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    const char *p2[] = {idarr, nodeid};
    e = ts_db_exec(c,
                   "SELECT id, attempt, log_bytes FROM job WHERE id = ANY($1::bigint[])"
                   " AND node_id = $2 ORDER BY id FOR UPDATE",
                   TS_ARRAY_LEN(p2), p2, &res, err);
    if (e != TS_OK)
        return e;
    for (int r = 0; r < PQntuples(res); r++) {
        struct job_row *j = find_job(jv, nj, ts_row_i64(res, r, 0));
        if (j != NULL) {
            j->accepted = true;
            j->attempt = (int)ts_row_i64(res, r, 1);
            j->log_bytes = ts_row_i64(res, r, 2);
        }
    }
    PQclear(res);
    e = ts_db_exec(c,
                   "SELECT job_id, attempt, max(offset_bytes + length(data)) FROM job_log"
                   " WHERE job_id = ANY($1::bigint[]) GROUP BY job_id, attempt",
                   1, p2, &res, err);
    if (e != TS_OK)
        return e;
    for (int r = 0; r < PQntuples(res); r++) {
        struct end_row *x = find_end(ev, ne, ts_row_i64(res, r, 0), (int)ts_row_i64(res, r, 1));
        if (x != NULL)
            x->end = ts_row_i64(res, r, 2);
    }
    PQclear(res);
    *jobs = jv;
    *njobs = nj;
    *ends = ev;
    *nends = ne;
    return TS_OK;
}

/* Store one chunk (after sorting) against the end of its attempt. */
static enum ts_err store_chunk(struct ts_dbconn *c, const struct ts_log_chunk *k, struct end_row *x,
                               struct job_row *j, int64_t max, struct ts_arena *a,
                               struct ts_error *err)
{
    int64_t off = k->offset;
    const unsigned char *p = k->data;
    int64_t len = (int64_t)k->len;
    if (len == 0)
        return TS_OK;
    if (x->end >= 0) {
        if (off > x->end)
            return TS_OK; /* a gap: the answer says where to resume */
        if (off + len <= x->end)
            return TS_OK; /* stored before */
        p += x->end - off;
        len -= x->end - off;
        off = x->end;
    }
    int64_t end = off + len;
    if (len > max) { /* alone over the cap: keep its newest bytes */
        p += len - max;
        off += len - max;
        len = max;
    }
    char *hex = bytea_hex(a, p, (size_t)len);
    if (hex == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    char idbuf[24], attbuf[16], offbuf[24];
    snprintf(idbuf, sizeof(idbuf), "%lld", (long long)k->job_id);
    snprintf(attbuf, sizeof(attbuf), "%d", k->attempt);
    snprintf(offbuf, sizeof(offbuf), "%lld", (long long)off);
    const char *params[] = {idbuf, attbuf, offbuf, hex};
    enum ts_err e = exec1(c,
                          "INSERT INTO job_log (job_id, attempt, offset_bytes, data)"
                          " VALUES ($1, $2, $3, $4::bytea) ON CONFLICT DO NOTHING",
                          4, params, err);
    if (e != TS_OK)
        return e;
    x->end = end;
    j->added += len;
    return TS_OK;
}

enum ts_err ts_store_log_append(struct ts_dbconn *c, const char *node, struct ts_log_chunk *chunks,
                                size_t n, int64_t max_bytes, struct ts_arena *a,
                                struct ts_log_mark **marks, size_t *nmarks, int64_t **ignored,
                                size_t *nignored, struct ts_error *err)
{
    qsort(chunks, n, sizeof(*chunks), chunk_cmp);
    enum ts_err e = ts_db_begin(c, err);
    if (e != TS_OK)
        return e;
    struct job_row *jobs = NULL;
    struct end_row *ends = NULL;
    size_t njobs = 0, nends = 0;
    e = load(c, node, chunks, n, a, &jobs, &njobs, &ends, &nends, err);
    for (size_t i = 0; i < n && e == TS_OK; i++) {
        struct job_row *j = find_job(jobs, njobs, chunks[i].job_id);
        if (!j->accepted || chunks[i].attempt > j->attempt)
            continue;
        struct end_row *x = find_end(ends, nends, chunks[i].job_id, chunks[i].attempt);
        e = store_chunk(c, &chunks[i], x, j, max_bytes, a, err);
    }
    for (size_t i = 0; i < njobs && e == TS_OK; i++) {
        struct job_row *j = &jobs[i];
        if (j->added == 0)
            continue;
        char idbuf[24], addbuf[24];
        snprintf(idbuf, sizeof(idbuf), "%lld", (long long)j->id);
        snprintf(addbuf, sizeof(addbuf), "%lld", (long long)j->added);
        const char *params[] = {idbuf, addbuf};
        if (j->log_bytes + j->added > max_bytes)
            e = trim(c, j->id, max_bytes, err);
        else
            e = exec1(c, "UPDATE job SET log_bytes = log_bytes + $2 WHERE id = $1", 2, params, err);
        if (e == TS_OK)
            e = exec1(c, "SELECT pg_notify('tessera_log', $1)", 1, params, err);
    }
    if (e == TS_OK)
        e = ts_db_commit(c, err);
    if (e != TS_OK) {
        ts_db_rollback(c);
        return e;
    }
    struct ts_log_mark *mv = ts_arena_alloc(a, (nends ? nends : 1) * sizeof(*mv));
    int64_t *iv = ts_arena_alloc(a, (njobs ? njobs : 1) * sizeof(*iv));
    if (mv == NULL || iv == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    size_t nm = 0, ni = 0;
    for (size_t i = 0; i < nends; i++) {
        struct job_row *j = find_job(jobs, njobs, ends[i].job_id);
        if (!j->accepted || ends[i].attempt > j->attempt) {
            if (ni == 0 || iv[ni - 1] != j->id)
                iv[ni++] = j->id;
            continue;
        }
        mv[nm].job_id = ends[i].job_id;
        mv[nm].attempt = ends[i].attempt;
        mv[nm].next_offset = ends[i].end < 0 ? 0 : ends[i].end;
        nm++;
    }
    *marks = mv;
    *nmarks = nm;
    *ignored = iv;
    *nignored = ni;
    return TS_OK;
}

enum ts_err ts_store_log_read(struct ts_dbconn *c, int64_t job_id, int attempt, int64_t offset,
                              int limit, struct ts_arena *a, struct ts_log_piece **out, size_t *n,
                              struct ts_error *err)
{
    char idbuf[24], attbuf[16], offbuf[24], limbuf[16];
    snprintf(idbuf, sizeof(idbuf), "%lld", (long long)job_id);
    snprintf(attbuf, sizeof(attbuf), "%d", attempt);
    snprintf(offbuf, sizeof(offbuf), "%lld", (long long)offset);
    snprintf(limbuf, sizeof(limbuf), "%d", limit);
    const char *params[] = {idbuf, attbuf, offbuf, limit > 0 ? limbuf : NULL};
    PGresult *res = NULL;
    enum ts_err e =
        ts_db_exec(c,
                   "SELECT attempt, offset_bytes, data FROM job_log"
                   " WHERE job_id = $1 AND length(data) > 0"
                   " AND (attempt > $2 OR (attempt = $2 AND offset_bytes + length(data) > $3))"
                   " ORDER BY attempt, offset_bytes LIMIT $4",
                   TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    struct ts_log_piece *v = ts_arena_alloc(a, (size_t)(rows ? rows : 1) * sizeof(*v));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int r = 0; r < rows; r++) {
        v[r].attempt = (int)ts_row_i64(res, r, 0);
        v[r].offset = ts_row_i64(res, r, 1);
        v[r].data = bytea_unhex(a, PQgetvalue(res, r, 2), &v[r].len);
        if (v[r].data == NULL) {
            PQclear(res);
            return ts_error_set(err, TS_ERR_INTERNAL, "could not read job output: bad bytea");
        }
        /* a piece that starts before the position: only its new part */
        if (v[r].attempt == attempt && v[r].offset < offset) {
            size_t skip = (size_t)(offset - v[r].offset);
            v[r].data += skip;
            v[r].len -= skip;
            v[r].offset = offset;
        }
    }
    PQclear(res);
    *out = v;
    *n = (size_t)rows;
    return TS_OK;
}

enum ts_err ts_store_log_job_state(struct ts_dbconn *c, int64_t job_id, enum ts_job_state *state,
                                   struct ts_error *err)
{
    char idbuf[24];
    snprintf(idbuf, sizeof(idbuf), "%lld", (long long)job_id);
    const char *params[] = {idbuf};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c, "SELECT state FROM job WHERE id = $1", TS_ARRAY_LEN(params),
                               params, &res, err);
    if (e != TS_OK)
        return e;
    if (PQntuples(res) != 1 || ts_job_state_parse(PQgetvalue(res, 0, 0), state) != 0) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "job %lld does not exist", (long long)job_id);
    }
    PQclear(res);
    return TS_OK;
}
