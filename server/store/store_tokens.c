/*
 * store_tokens.c - API tokens: creation, listing, revocation, lookup by the
 * SHA-256 of the secret, and the bootstrap admin token.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "server/store/db_pg.h"
#include "server/store/row.h"
#include "server/store/store.h"

/* A text[] literal of names ([a-z0-9-] only, so no quoting is needed). */
static char *name_array(struct ts_arena *a, const char *const *names, size_t n)
{
    size_t cap = 3;
    for (size_t i = 0; i < n; i++)
        cap += strlen(names[i]) + 1;
    char *s = ts_arena_alloc(a, cap);
    if (s == NULL)
        return NULL;
    size_t len = 0;
    s[len++] = '{';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s%s", i ? "," : "", names[i]);
    s[len++] = '}';
    s[len] = '\0';
    return s;
}

/* The n entries of a text[] literal of names or node patterns ("{a,b}",
 * "{gpu-*}": never quoted) in the arena; *count gets how many were read. */
static const char **text_array(struct ts_arena *a, const char *lit, size_t n, size_t *count)
{
    *count = 0;
    const char **v = ts_arena_alloc(a, sizeof(char *) * (n ? n : 1));
    char *list = ts_arena_strdup(a, lit);
    if (v == NULL || list == NULL || strlen(list) < 2)
        return v;
    list[strlen(list) - 1] = '\0';
    for (char *save = NULL, *tok = strtok_r(list + 1, ",", &save); tok && *count < n;
         tok = strtok_r(NULL, ",", &save))
        v[(*count)++] = tok;
    return v;
}

enum ts_err ts_store_token_create(struct ts_dbconn *c, const struct ts_token_spec *spec,
                                  const char *sha256_hex, struct ts_arena *a, struct ts_token *out,
                                  struct ts_error *err)
{
    PGresult *res = NULL;
    enum ts_err e;
    char *names = name_array(a, spec->projects, spec->nprojects);
    char *nodes = name_array(a, spec->nodes, spec->nnodes);
    if (names == NULL || nodes == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    /* one statement: the token and its project grants, or nothing */
    static const char sql[] =
        "WITH p AS (SELECT id, name FROM project WHERE name = ANY($4::text[])),"
        " missing AS (SELECT n FROM unnest($4::text[]) n WHERE n NOT IN (SELECT name FROM p)),"
        " t AS (INSERT INTO api_token (name, role, token_sha256)"
        "       SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM missing)"
        "       RETURNING id, " TS_SQL_US(
            "created_at") " AS created_us),"
                          " g AS (INSERT INTO api_token_project (token_id, project_id)"
                          "       SELECT t.id, p.id FROM t, p),"
                          " nd AS (INSERT INTO api_token_node (token_id, node_pattern)"
                          "       SELECT t.id, unnest($5::text[]) FROM t)"
                          " SELECT t.id, t.created_us, (SELECT min(n) FROM missing) FROM t"
                          " RIGHT JOIN (SELECT 1) one ON true";
    const char *params[] = {spec->name, ts_role_name(spec->role), sha256_hex, names, nodes};
    e = ts_db_exec(c, sql, TS_ARRAY_LEN(params), params, &res, err);
    if (e == TS_ERR_ALREADY_EXISTS) {
        return ts_error_field(err, e, "name", "token \"%s\" already exists", spec->name);
    }
    if (e != TS_OK)
        return e;
    if (ts_row_null(res, 0, 0)) {
        char missing[TS_NAME_MAX + 1];
        ts_row_copy(res, 0, 2, missing, sizeof(missing));
        PQclear(res);
        return ts_error_field(err, TS_ERR_UNKNOWN_REFERENCE, "projects",
                              "project \"%s\" does not exist", missing);
    }
    memset(out, 0, sizeof(*out));
    out->id = ts_row_i64(res, 0, 0);
    out->created_at_us = ts_row_i64(res, 0, 1);
    out->spec = *spec;
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_token_list(struct ts_dbconn *c, struct ts_arena *a, struct ts_token **out,
                                size_t *n, struct ts_error *err)
{
    PGresult *res = NULL;
    static const char sql[] =
        "SELECT t.id, t.name, t.role, " TS_SQL_US("t.created_at") ", " TS_SQL_US(
            "t.last_used_at") ", coalesce((SELECT array_agg(p.name ORDER BY p.name) FROM "
                              "api_token_project tp"
                              "   JOIN project p ON p.id = tp.project_id WHERE tp.token_id = "
                              "t.id), '{}')::text[]"
                              ", (SELECT count(*) FROM api_token_project tp WHERE tp.token_id = "
                              "t.id)"
                              ", coalesce((SELECT array_agg(node_pattern ORDER BY node_pattern)"
                              "   FROM api_token_node tn WHERE tn.token_id = t.id), '{}')::text[]"
                              ", (SELECT count(*) FROM api_token_node tn WHERE tn.token_id = t.id)"
                              " FROM api_token t ORDER BY t.id";
    enum ts_err e = ts_db_exec(c, sql, 0, NULL, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    struct ts_token *v = ts_arena_alloc(a, sizeof(*v) * (size_t)(rows ? rows : 1));
    if (v == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rows; i++) {
        v[i].id = ts_row_i64(res, i, 0);
        ts_row_copy(res, i, 1, v[i].spec.name, sizeof(v[i].spec.name));
        ts_role_parse(PQgetvalue(res, i, 2), &v[i].spec.role);
        v[i].created_at_us = ts_row_i64(res, i, 3);
        v[i].last_used_at_us = ts_row_i64(res, i, 4);
        v[i].spec.projects = text_array(a, PQgetvalue(res, i, 5), (size_t)ts_row_i64(res, i, 6),
                                        &v[i].spec.nprojects);
        v[i].spec.nodes =
            text_array(a, PQgetvalue(res, i, 7), (size_t)ts_row_i64(res, i, 8), &v[i].spec.nnodes);
    }
    *out = v;
    *n = (size_t)rows;
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_token_delete(struct ts_dbconn *c, int64_t id, struct ts_error *err)
{
    PGresult *res = NULL;
    char idbuf[24];
    snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
    const char *params[] = {idbuf};
    enum ts_err e = ts_db_exec(c, "DELETE FROM api_token WHERE id = $1", TS_ARRAY_LEN(params),
                               params, &res, err);
    if (e != TS_OK)
        return e;
    bool gone = strcmp(PQcmdTuples(res), "0") == 0;
    PQclear(res);
    if (gone)
        return ts_error_set(err, TS_ERR_NOT_FOUND, "token %lld does not exist", (long long)id);
    return TS_OK;
}

enum ts_err ts_store_token_authenticate(struct ts_dbconn *c, const char *sha256_hex,
                                        struct ts_arena *a, struct ts_token_auth *out,
                                        struct ts_error *err)
{
    PGresult *res = NULL;
    static const char sql[] =
        "SELECT t.id, t.name, t.role,"
        " coalesce(t.last_used_at < now() - interval '1 minute' OR t.last_used_at IS NULL, true),"
        " coalesce((SELECT array_agg(project_id ORDER BY project_id) FROM api_token_project"
        "   WHERE token_id = t.id), '{}')::text,"
        " (SELECT string_agg(node_pattern, ',' ORDER BY node_pattern) FROM api_token_node"
        "   WHERE token_id = t.id)"
        " FROM api_token t WHERE t.token_sha256 = $1";
    const char *params[] = {sha256_hex};
    enum ts_err e = ts_db_exec(c, sql, TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "unknown token");
    }
    memset(out, 0, sizeof(*out));
    out->id = ts_row_i64(res, 0, 0);
    ts_row_copy(res, 0, 1, out->name, sizeof(out->name));
    ts_role_parse(PQgetvalue(res, 0, 2), &out->role);
    bool stale = ts_row_bool(res, 0, 3);
    if (!ts_row_null(res, 0, 5) &&
        (out->nodes = ts_arena_strdup(a, PQgetvalue(res, 0, 5))) == NULL) {
        PQclear(res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    const char *ids = PQgetvalue(res, 0, 4);
    size_t count = 0;
    for (const char *p = ids; *p; p++)
        count += (*p == ',');
    if (strcmp(ids, "{}") != 0) {
        count++;
        out->project_ids = ts_arena_alloc(a, sizeof(int64_t) * count);
        if (out->project_ids == NULL) {
            PQclear(res);
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        }
        const char *p = ids + 1;
        while (*p && *p != '}') {
            char *end;
            out->project_ids[out->nprojects++] = strtoll(p, &end, 10);
            p = (*end == ',') ? end + 1 : end;
        }
    }
    PQclear(res);
    if (stale) {
        char idbuf[24];
        snprintf(idbuf, sizeof(idbuf), "%lld", (long long)out->id);
        const char *p2[] = {idbuf};
        if (ts_db_exec(c, "UPDATE api_token SET last_used_at = now() WHERE id = $1",
                       TS_ARRAY_LEN(p2), p2, &res, NULL) == TS_OK)
            PQclear(res);
    }
    return TS_OK;
}

enum ts_err ts_store_token_bootstrap(struct ts_dbconn *c, const char *sha256_hex, bool replace,
                                     bool *created, struct ts_error *err)
{
    PGresult *res = NULL;
    const char *params[] = {sha256_hex};
    const char *sql =
        replace ? "INSERT INTO api_token (name, role, token_sha256, bootstrap)"
                  " VALUES ('admin', 'admin', $1, true)"
                  " ON CONFLICT (name) DO UPDATE SET token_sha256 = EXCLUDED.token_sha256,"
                  "   role = 'admin', bootstrap = true"
                  " RETURNING (xmax = 0)"
                : "INSERT INTO api_token (name, role, token_sha256, bootstrap)"
                  " SELECT 'admin', 'admin', $1, true"
                  " WHERE NOT EXISTS (SELECT 1 FROM api_token WHERE bootstrap)"
                  " ON CONFLICT DO NOTHING RETURNING true";
    enum ts_err e = ts_db_exec(c, sql, TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    *created = PQntuples(res) == 1 && ts_row_bool(res, 0, 0);
    PQclear(res);
    return TS_OK;
}

enum ts_err ts_store_token_hidden_projects(struct ts_dbconn *c, const int64_t *ids, size_t n,
                                           struct ts_arena *a, const char ***out, size_t *count,
                                           struct ts_error *err)
{
    *out = NULL;
    *count = 0;
    char *list = ts_row_id_array(a, ids, n);
    if (list == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    const char *params[] = {list};
    PGresult *res = NULL;
    enum ts_err e = ts_db_exec(
        c, "SELECT name FROM project WHERE id <> ALL($1::bigint[]) ORDER BY length(name) DESC",
        TS_ARRAY_LEN(params), params, &res, err);
    if (e != TS_OK)
        return e;
    int rows = PQntuples(res);
    const char **v = ts_arena_alloc(a, sizeof(*v) * (size_t)(rows ? rows : 1));
    for (int i = 0; v != NULL && i < rows; i++)
        if ((v[i] = ts_arena_strdup(a, PQgetvalue(res, i, 0))) == NULL)
            v = NULL;
    PQclear(res);
    if (v == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    *out = v;
    *count = (size_t)rows;
    return TS_OK;
}
