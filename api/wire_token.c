/*
 * wire_token.c - roles and API tokens on the wire, and GET /whoami (the
 * calling token: encoded by the server, decoded by `tessera-agent --join`).
 */
#include "api/wire.h"

#include <string.h>

#include "api/array.h"
#include "api/units.h"
#include "api/wire_dec.h"
#include "api/wire_enc.h"

static const char *const role_names[] = {
    [TS_ROLE_VIEWER] = "viewer",
    [TS_ROLE_MEMBER] = "member",
    [TS_ROLE_AGENT] = "agent",
    [TS_ROLE_ADMIN] = "admin",
};
#define NROLES (TS_ARRAY_LEN(role_names))

static const char *const token_fields[] = {"name", "role", "projects", "nodes", NULL};
static const char *const readonly_fields[] = {"id", "token", "created_at", "last_used_at", NULL};

const char *ts_role_name(enum ts_role r)
{
    return (unsigned)r < NROLES ? role_names[r] : "unknown";
}

int ts_role_parse(const char *s, enum ts_role *out)
{
    for (size_t i = 0; s != NULL && i < NROLES; i++) {
        if (strcmp(s, role_names[i]) == 0) {
            *out = (enum ts_role)i;
            return 0;
        }
    }
    return -1;
}

bool ts_token_node_pattern_valid(const char *s)
{
    if (s == NULL)
        return false;
    size_t n = strlen(s);
    if (n == 1 && s[0] == '*')
        return true;
    if (n < 2 || s[n - 1] != '*')
        return ts_name_valid(s);
    /* "prefix*": the prefix must start a valid name */
    char prefix[TS_NAME_MAX + 1];
    if (n - 1 > TS_NAME_MAX - 1)
        return false;
    memcpy(prefix, s, n - 1);
    prefix[n - 1] = '\0';
    return ts_name_valid(prefix) && strchr(prefix, '*') == NULL;
}

bool ts_token_node_matches(const char *pattern, size_t len, const char *node)
{
    if (len > 0 && pattern[len - 1] == '*')
        return strncmp(node, pattern, len - 1) == 0;
    return strlen(node) == len && strncmp(node, pattern, len) == 0;
}

/* A list of distinct strings at in[key], each checked by valid (what says
 * what they must be). */
static enum ts_err decode_names(const json_t *in, const char *key, size_t max,
                                bool (*valid)(const char *), const char *what, struct ts_arena *a,
                                const char ***out, size_t *nout, struct ts_error *err)
{
    json_t *arr = ts_wire_dec_member(in, key);
    if (arr == NULL)
        return TS_OK;
    if (!json_is_array(arr))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, key, "%s must be an array", key);
    size_t n = json_array_size(arr);
    if (n > max)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, key,
                              "%s must have at most %zu entries: %zu", key, max, n);
    const char **names = ts_arena_alloc(a, (n + 1) * sizeof(*names));
    if (names == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        char field[TS_WIRE_PATH_MAX], q[80];
        ts_wire_dec_index(field, sizeof(field), key, i);
        if (!json_is_string(v))
            return ts_error_field(err, TS_ERR_WRONG_TYPE, field, "%s must be a string", field);
        const char *s = json_string_value(v);
        if (!valid(s))
            return ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s must %s: %s", field, what,
                                  ts_wire_dec_quote(s, q, sizeof(q)));
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[j], s) == 0)
                return ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s lists %s twice", key,
                                      ts_wire_dec_quote(s, q, sizeof(q)));
        names[i] = ts_arena_strdup(a, s);
        if (names[i] == NULL)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    *out = names;
    *nout = n;
    return TS_OK;
}

enum ts_err ts_wire_token_decode(const json_t *in, struct ts_arena *a, struct ts_token_spec *out,
                                 struct ts_error *err)
{
    *out = (struct ts_token_spec){.role = TS_ROLE_VIEWER, .projects = NULL, .nprojects = 0};
    const char *role = NULL;
    enum ts_err e = ts_wire_dec_object(in, "", "token", token_fields, readonly_fields, err);
    if (e == TS_OK)
        e = ts_wire_dec_name(in, "", "name", out->name, err);
    if (e == TS_OK)
        e = ts_wire_dec_string(in, "", "role", true, &role, err);
    if (e == TS_OK && ts_role_parse(role, &out->role) != 0) {
        char q[80];
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "role",
                              "role must be one of viewer, member, agent, admin: %s",
                              ts_wire_dec_quote(role, q, sizeof(q)));
    }
    if (e == TS_OK)
        e = decode_names(in, "projects", TS_TOKEN_PROJECTS_MAX, ts_name_valid,
                         "match [a-z0-9][a-z0-9-]{0,62}", a, &out->projects, &out->nprojects, err);
    if (e == TS_OK)
        e = decode_names(in, "nodes", TS_TOKEN_NODES_MAX, ts_token_node_pattern_valid,
                         "be a node name, a name prefix followed by *, or *", a, &out->nodes,
                         &out->nnodes, err);
    if (e == TS_OK && ts_wire_dec_member(in, "nodes") != NULL && out->role != TS_ROLE_AGENT)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "nodes",
                              "nodes is only for agent tokens: the role is %s",
                              ts_role_name(out->role));
    return e;
}

json_t *ts_wire_token_encode(const struct ts_token *t)
{
    bool ok = true;
    json_t *o = json_object();
    json_t *projects = json_array();
    if (o == NULL || projects == NULL) {
        json_decref(o);
        json_decref(projects);
        return NULL;
    }
    for (size_t i = 0; i < t->spec.nprojects; i++)
        ts_wire_enc_append(projects, json_string(t->spec.projects[i]), &ok);
    ts_wire_enc_set(o, "id", json_integer(t->id), &ok);
    ts_wire_enc_set(o, "name", json_string(t->spec.name), &ok);
    ts_wire_enc_set(o, "role", json_string(ts_role_name(t->spec.role)), &ok);
    ts_wire_enc_set(o, "projects", projects, &ok);
    if (t->spec.role == TS_ROLE_AGENT) {
        /* an agent's nodes: [] means any node */
        json_t *nodes = json_array();
        for (size_t i = 0; nodes != NULL && i < t->spec.nnodes; i++)
            ts_wire_enc_append(nodes, json_string(t->spec.nodes[i]), &ok);
        ts_wire_enc_set(o, "nodes", nodes, &ok);
    }
    ts_wire_enc_set(o, "created_at", ts_wire_time(t->created_at_us), &ok);
    ts_wire_enc_set(o, "last_used_at", ts_wire_time(t->last_used_at_us), &ok);
    if (t->secret != NULL)
        ts_wire_enc_set(o, "token", json_string(t->secret), &ok);
    return ts_wire_enc_finish(o, ok);
}

/* ---- GET /whoami ------------------------------------------------------------ */

json_t *ts_wire_whoami_encode(const struct ts_whoami *w)
{
    json_t *o = json_object(), *projects = json_array();
    bool ok = projects != NULL;
    for (size_t i = 0; i < w->nprojects; i++)
        ts_wire_enc_append(projects, json_string(w->projects[i]), &ok);
    ts_wire_enc_set(o, "id", json_integer(w->id), &ok);
    ts_wire_enc_set(o, "name", ts_wire_enc_string(w->name), &ok);
    ts_wire_enc_set(o, "role", ts_wire_enc_string(w->role), &ok);
    ts_wire_enc_set(o, "projects", projects, &ok);
    ts_wire_enc_set(o, "restricted", json_boolean(w->restricted), &ok);
    if (w->has_nodes) {
        /* the nodes it may act as; [] for any node */
        json_t *nodes = json_array();
        for (size_t i = 0; nodes != NULL && i < w->nnodes; i++)
            ts_wire_enc_append(nodes, json_string(w->nodes[i]), &ok);
        ts_wire_enc_set(o, "nodes", nodes, &ok);
    }
    return ts_wire_enc_finish(o, ok);
}

/* An optional string member copied into arena a. */
static enum ts_err dup_string(const json_t *in, const char *key, bool required, struct ts_arena *a,
                              const char **out, struct ts_error *err)
{
    const char *s = NULL;
    enum ts_err e = ts_wire_dec_string(in, "", key, required, &s, err);
    if (e != TS_OK || s == NULL)
        return e;
    if ((*out = ts_arena_strdup(a, s)) == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    return TS_OK;
}

enum ts_err ts_wire_whoami_decode(const json_t *in, struct ts_arena *a, struct ts_whoami *out,
                                  struct ts_error *err)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(in))
        return ts_error_field(err, TS_ERR_WRONG_TYPE, "", "the answer of whoami must be an object");
    enum ts_err e = ts_wire_dec_integer(in, "", "id", 0, INT64_MAX, NULL, &out->id, err);
    if (e == TS_OK)
        e = dup_string(in, "name", false, a, &out->name, err);
    if (e == TS_OK)
        e = dup_string(in, "role", true, a, &out->role, err);
    if (e == TS_OK)
        e = ts_wire_dec_bool(in, "", "restricted", NULL, &out->restricted, err);
    if (e == TS_OK)
        e = decode_names(in, "projects", TS_TOKEN_PROJECTS_MAX, ts_name_valid,
                         "match [a-z0-9][a-z0-9-]{0,62}", a, &out->projects, &out->nprojects, err);
    if (e == TS_OK)
        e = decode_names(in, "nodes", TS_TOKEN_NODES_MAX, ts_token_node_pattern_valid,
                         "be a node name, a name prefix followed by *, or *", a, &out->nodes,
                         &out->nnodes, err);
    out->has_nodes = ts_wire_dec_member(in, "nodes") != NULL;
    return e;
}
