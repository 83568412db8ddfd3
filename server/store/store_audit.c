/*
 * store_audit.c - the audit log of admin writes (audit_event, migration
 * 0007): one row written in the transaction of the write it records, and
 * the admins' reading of it, newest first.
 */
#include <stdio.h>

#include "api/array.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

enum ts_err ts_store_audit_insert(struct ts_dbconn *c, const struct ts_audit_event *ev,
                                  struct ts_error *err)
{
    char tok[24], status[16];
    snprintf(tok, sizeof(tok), "%lld", (long long)ev->token_id);
    snprintf(status, sizeof(status), "%d", ev->status);
    const char *p[] = {tok,        ev->token_name, ev->token_role, ev->method,    ev->path,
                       ev->target, ev->changes,    status,         ev->request_id};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(c,
                               "INSERT INTO audit_event (token_id, token_name, token_role, method,"
                               " path, target, changes, status, request_id)"
                               " VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9)",
                               TS_ARRAY_LEN(p), p, &res, err);
    PQclear(res);
    return e;
}

enum ts_err ts_store_audit_list(struct ts_dbconn *c, const struct ts_audit_filter *f,
                                struct ts_arena *a, struct ts_audit_event **out, size_t *n,
                                bool *more, struct ts_error *err)
{
    char since[24], before[24], limit[16];
    snprintf(since, sizeof(since), "%lld", (long long)f->since_s);
    snprintf(before, sizeof(before), "%lld", (long long)f->before_id);
    snprintf(limit, sizeof(limit), "%d", f->limit + 1);
    const char *p[] = {f->has_since ? since : NULL, f->before_id > 0 ? before : NULL, f->actor,
                       limit};
    PGresult *res = NULL;
    /* actor: a token's name, or its id */
    enum ts_err e =
        ts_db_exec(c,
                   "SELECT id, " TS_SQL_US(
                       "at") ", token_id, token_name, token_role, method, path, target,"
                             " changes::text, status, request_id FROM audit_event"
                             " WHERE ($1::bigint IS NULL OR at >= to_timestamp($1::bigint))"
                             " AND ($2::bigint IS NULL OR id < $2::bigint)"
                             " AND ($3::text IS NULL OR token_name = $3 OR token_id::text = $3)"
                             " ORDER BY id DESC LIMIT $4::int",
                   TS_ARRAY_LEN(p), p, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    *more = rows > f->limit;
    if (*more)
        rows = f->limit;
    struct ts_audit_event *v = ts_arena_alloc(a, sizeof(*v) * (size_t)(rows ? rows : 1));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rows; i++) {
        v[i] = (struct ts_audit_event){
            .id = ts_row_i64(res, i, 0),
            .at_us = ts_row_i64(res, i, 1),
            .token_id = ts_row_i64(res, i, 2),
            .token_name = ts_row_text(res, i, 3, a),
            .token_role = ts_row_text(res, i, 4, a),
            .method = ts_row_text(res, i, 5, a),
            .path = ts_row_text(res, i, 6, a),
            .target = ts_row_text(res, i, 7, a),
            .changes = ts_row_text(res, i, 8, a),
            .status = (int)ts_row_i64(res, i, 9),
            .request_id = ts_row_text(res, i, 10, a),
        };
    }
    *out = v;
    *n = (size_t)rows;
    PQclear(res);
    return TS_OK;
}
