/*
 * cmd_admin.c - what admins manage: projects and departments (create,
 * set-quota, delete, list, describe project), tokens (create, list,
 * revoke) and the audit log of admin writes.
 *
 * set-quota reads the quota with its ETag, changes only the members given,
 * and writes it back with If-Match: when someone else changed it in between,
 * the server answers 412 and nothing is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "api/cli/cli.h"
#include "api/cli/out.h"
#include "api/cli/req.h"
#include "api/cli/show.h"
#include "api/cli/table.h"
#include "api/wire.h"

#define QUOTA_OPTS                                                                                 \
    {"gpus", 0, "N", "guaranteed GPUs, fractional allowed (2.5)", false},                          \
        {"limit", 0, "N", "never more than N GPUs", false},                                        \
        {"no-limit", 0, NULL, "remove the limit", false},                                          \
        {"weight", 0, "W", "over-quota weight: share of the surplus (default 1)", false},          \
    {                                                                                              \
        "priority", 0, "N", "-1000 to 1000: higher is served surplus first (default 0)", false     \
    }

/* What a command manages: "project" at /api/v1/projects. */
struct kind {
    const char *word;       /* "project" */
    const char *collection; /* "projects" */
};
static const struct kind project_kind = {"project", "projects"};
static const struct kind department_kind = {"department", "departments"};

/* Apply the quota flags to q (a JSON object, changed in place). Returns the
 * number of members set, or -1 after a usage error. */
static int apply_quota(struct ts_cli *cli, const struct ts_args *a, json_t *q)
{
    struct ts_error err;
    ts_error_clear(&err);
    double gpus = 0, limit = 0, weight = 0;
    long long priority = 0, max_pending = 0;
    if (ts_args_double(a, "gpus", 0, TS_QUOTA_GPUS_MAX, &gpus, &err) != 0 ||
        ts_args_double(a, "limit", 0, TS_QUOTA_GPUS_MAX, &limit, &err) != 0 ||
        ts_args_double(a, "weight", 0, TS_QUOTA_WEIGHT_MAX, &weight, &err) != 0 ||
        ts_args_int(a, "priority", -1000, 1000, &priority, &err) != 0 ||
        ts_args_int(a, "max-pending", 0, TS_MAX_PENDING_MAX, &max_pending, &err) != 0) {
        ts_cli_usage_error(cli, "%s", err.message);
        return -1;
    }
    if (ts_args_has(a, "limit") && ts_args_has(a, "no-limit")) {
        ts_cli_usage_error(cli, "give --limit or --no-limit, not both");
        return -1;
    }
    int n = 0;
    if (ts_args_has(a, "gpus"))
        n++, json_object_set_new(q, "gpus", json_real(gpus));
    if (ts_args_has(a, "limit"))
        n++, json_object_set_new(q, "limit", json_real(limit));
    if (ts_args_has(a, "no-limit"))
        n++, json_object_set_new(q, "limit", json_null());
    if (ts_args_has(a, "weight"))
        n++, json_object_set_new(q, "over_quota_weight", json_real(weight));
    if (ts_args_has(a, "priority"))
        n++, json_object_set_new(q, "priority", json_integer(priority));
    if (ts_args_has(a, "max-pending"))
        n++, json_object_set_new(q, "max_pending", json_integer(max_pending));
    if (ts_args_has(a, "job-user") && ts_args_has(a, "default-job-user")) {
        ts_cli_usage_error(cli, "give --job-user or --default-job-user, not both");
        return -1;
    }
    if (ts_args_has(a, "job-user"))
        n++, json_object_set_new(q, "job_user", json_string(ts_args_get(a, "job-user")));
    if (ts_args_has(a, "default-job-user"))
        n++, json_object_set_new(q, "job_user", json_null());
    if (ts_args_has(a, "allow-root") && ts_args_has(a, "no-allow-root")) {
        ts_cli_usage_error(cli, "give --allow-root or --no-allow-root, not both");
        return -1;
    }
    if (ts_args_has(a, "allow-root"))
        n++, json_object_set_new(q, "allow_root", json_true());
    if (ts_args_has(a, "no-allow-root"))
        n++, json_object_set_new(q, "allow_root", json_false());
    return n;
}

static void print_quota(const char *word, const char *name, const json_t *q, const char *etag)
{
    char g[32], l[32], w[32], p[32], m[48] = "";
    if (json_is_integer(json_object_get(q, "max_pending")))
        snprintf(m, sizeof(m), ", max pending %lld",
                 (long long)json_integer_value(json_object_get(q, "max_pending")));
    printf("%s %s quota: %s GPUs, limit %s, weight %s, priority %s%s%s%s\n", word, name,
           ts_out_member(q, "gpus", g, sizeof(g)),
           json_is_number(json_object_get(q, "limit")) ? ts_out_member(q, "limit", l, sizeof(l))
                                                       : "none",
           ts_out_member(q, "over_quota_weight", w, sizeof(w)),
           ts_out_member(q, "priority", p, sizeof(p)), m, etag ? "; ETag " : "", etag ? etag : "");
}

/* ---- create, set-quota, delete, list ----------------------------------------------- */

static int create(struct ts_cli *cli, const struct ts_args *a, const struct kind *k)
{
    const char *name = a->pos[0];
    json_t *body = json_pack("{s:s}", "name", name), *q = json_object();
    const char *dept = ts_args_get(a, "department");
    if (k == &project_kind && dept == NULL) {
        json_decref(body);
        json_decref(q);
        return ts_cli_usage_error(cli, "a project needs --department DEPARTMENT");
    }
    if (dept)
        json_object_set_new(body, "department", json_string(dept));
    int n = apply_quota(cli, a, q);
    if (n < 0) {
        json_decref(body);
        json_decref(q);
        return TS_EXIT_USAGE;
    }
    if (n > 0)
        json_object_set(body, "quota", q);
    json_decref(q);
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/%s", k->collection);
    struct ts_response r;
    int rc = ts_req(cli, "POST", path, body, NULL, 0, &r);
    json_decref(body);
    if (rc != TS_EXIT_OK)
        return rc;
    char etag[64];
    printf("%s %s created%s%s\n", k->word, name, dept ? " in department " : "", dept ? dept : "");
    print_quota(k->word, name, json_object_get(r.json, "quota"),
                ts_response_header(&r, "ETag", etag, sizeof(etag)));
    ts_response_free(&r);
    return TS_EXIT_OK;
}

static int set_quota(struct ts_cli *cli, const struct ts_args *a, const struct kind *k)
{
    const char *name = a->pos[0];
    char esc[256], path[320], etag[128], header[160];
    ts_req_escape(name, esc, sizeof(esc));
    /* 1. read it with its ETag */
    snprintf(path, sizeof(path), "/api/v1/%s/%s", k->collection, esc);
    struct ts_response r;
    int rc = ts_req(cli, "GET", path, NULL, NULL, 0, &r);
    if (rc != TS_EXIT_OK)
        return rc;
    /* the members of a Quota request, as read (the answer may hold more) */
    static const char *const members[] = {
        "gpus", "over_quota_weight", "limit", "priority", "max_pending", "job_user", "allow_root"};
    const json_t *read = json_object_get(r.json, "quota");
    json_t *q = json_object();
    for (size_t i = 0; i < TS_ARRAY_LEN(members); i++)
        if (json_object_get(read, members[i]))
            json_object_set(q, members[i], json_object_get(read, members[i]));
    const char *read_etag = ts_response_header(&r, "ETag", etag, sizeof(etag));
    ts_response_free(&r);
    /* 2. change what the flags say */
    int n = apply_quota(cli, a, q);
    if (n <= 0) {
        json_decref(q);
        return n < 0
                   ? TS_EXIT_USAGE
                   : ts_cli_usage_error(cli, "nothing to change: give --gpus, --limit, "
                                             "--no-limit, --weight, --priority or "
                                             "--max-pending, --job-user, --allow-root (projects)");
    }
    const char *given = ts_args_get(a, "if-match");
    if (given && given[0] != '"' && strcmp(given, "*") != 0)
        snprintf(header, sizeof(header), "If-Match: \"%s\"", given);
    else if (given)
        snprintf(header, sizeof(header), "If-Match: %s", given);
    else if (read_etag)
        snprintf(header, sizeof(header), "If-Match: %s", read_etag);
    else {
        json_decref(q);
        fprintf(stderr, "error: the server sent no ETag for %s %s\n", k->word, name);
        return TS_EXIT_SERVER;
    }
    /* 3. write it back only if nobody changed it meanwhile */
    const char *headers[] = {header, NULL};
    snprintf(path, sizeof(path), "/api/v1/%s/%s/quota", k->collection, esc);
    rc = ts_req(cli, "PUT", path, q, headers, TS_REQ_KEEP, &r);
    json_decref(q);
    if (r.status == 412) {
        fprintf(stderr,
                "error: %s %s was changed by someone else since ETag %s was read: nothing was "
                "written\n",
                k->word, name, header + 10);
        fprintf(stderr,
                "hint: look at the new quota (tessera describe %s %s) and run the "
                "command again\n",
                k->word, name);
    } else if (rc != TS_EXIT_OK && r.status) {
        ts_req_print_problem(&r);
    } else if (rc == TS_EXIT_OK) {
        print_quota(k->word, name, json_object_get(r.json, "quota"),
                    ts_response_header(&r, "ETag", etag, sizeof(etag)));
    }
    ts_response_free(&r);
    return rc;
}

static int delete_named(struct ts_cli *cli, const struct ts_args *a, const struct kind *k)
{
    char esc[256], path[320];
    snprintf(path, sizeof(path), "/api/v1/%s/%s", k->collection,
             ts_req_escape(a->pos[0], esc, sizeof(esc)));
    struct ts_response r;
    int rc = ts_req(cli, "DELETE", path, NULL, NULL, 0, &r);
    if (rc != TS_EXIT_OK)
        return rc;
    ts_response_free(&r);
    printf("%s %s deleted\n", k->word, a->pos[0]);
    return TS_EXIT_OK;
}

static const struct ts_col list_cols[] = {
    {"NAME", 10, false},    {"DEPARTMENT", 8, false}, {"QUOTA", 0, true},
    {"LIMIT", 0, true},     {"WEIGHT", 0, true},      {"PRIORITY", 0, true},
    {"ALLOCATED", 0, true}, {"RUNNING", 0, true},     {"PENDING", 0, true},
};

/* A row of project list (ud: non-NULL) or department list (NULL: no
 * DEPARTMENT column). */
static void list_row(struct ts_table *t, const json_t *o, void *ud)
{
    const json_t *q = json_object_get(o, "quota"), *s = json_object_get(o, "status");
    char buf[256];
    ts_table_add(t, ts_out_member(o, "name", buf, sizeof(buf)));
    if (ud != NULL)
        ts_table_add(t, ts_out_member(o, "department", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(q, "gpus", buf, sizeof(buf)));
    ts_table_add(t, json_is_number(json_object_get(q, "limit"))
                        ? ts_out_member(q, "limit", buf, sizeof(buf))
                        : "none");
    ts_table_add(t, ts_out_member(q, "over_quota_weight", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(q, "priority", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(s, "allocated_gpus", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(s, "running_jobs", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(s, "pending_jobs", buf, sizeof(buf)));
}

static int list(struct ts_cli *cli, const struct ts_args *a, const struct kind *k)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/%s", k->collection);
    /* departments have no DEPARTMENT column: skip it */
    bool dept = k == &project_kind;
    struct ts_col cols[TS_ARRAY_LEN(list_cols)];
    size_t ncols = 0;
    for (size_t c = 0; c < TS_ARRAY_LEN(list_cols); c++)
        if (dept || c != 1)
            cols[ncols++] = list_cols[c];
    const struct ts_show_table tab = {cols, ncols, list_row};
    return ts_show_list(cli, fmt, path, k->collection, &tab, dept ? cols : NULL);
}

static int cmd_project_create(struct ts_cli *cli, const struct ts_args *a)
{
    return create(cli, a, &project_kind);
}
static int cmd_project_set_quota(struct ts_cli *cli, const struct ts_args *a)
{
    return set_quota(cli, a, &project_kind);
}
static int cmd_project_delete(struct ts_cli *cli, const struct ts_args *a)
{
    return delete_named(cli, a, &project_kind);
}
static int cmd_project_list(struct ts_cli *cli, const struct ts_args *a)
{
    return list(cli, a, &project_kind);
}
static int cmd_department_create(struct ts_cli *cli, const struct ts_args *a)
{
    return create(cli, a, &department_kind);
}
static int cmd_department_set_quota(struct ts_cli *cli, const struct ts_args *a)
{
    return set_quota(cli, a, &department_kind);
}
static int cmd_department_delete(struct ts_cli *cli, const struct ts_args *a)
{
    return delete_named(cli, a, &department_kind);
}
static int cmd_department_list(struct ts_cli *cli, const struct ts_args *a)
{
    return list(cli, a, &department_kind);
}

/* ---- describe project ------------------------------------------------------------------- */

static int show_project(struct ts_cli *cli, const struct ts_response *r, void *ud)
{
    (void)cli;
    (void)ud;
    char etag[64];
    const json_t *p = r->json, *q = json_object_get(p, "quota"), *s = json_object_get(p, "status");
    char b[256];
    ts_out_kv("Project", "%s", ts_out_member(p, "name", b, sizeof(b)));
    ts_out_kv("Department", "%s", ts_out_member(p, "department", b, sizeof(b)));
    ts_out_kv("Quota", "%s GPUs", ts_out_member(q, "gpus", b, sizeof(b)));
    ts_out_kv("Limit", "%s",
              json_is_number(json_object_get(q, "limit")) ? ts_out_member(q, "limit", b, sizeof(b))
                                                          : "none");
    ts_out_kv("Weight", "%s", ts_out_member(q, "over_quota_weight", b, sizeof(b)));
    ts_out_kv("Priority", "%s", ts_out_member(q, "priority", b, sizeof(b)));
    ts_out_kv("Allocated", "%s GPUs", ts_out_member(s, "allocated_gpus", b, sizeof(b)));
    ts_out_kv("Non-preemptible", "%s GPUs",
              ts_out_member(s, "allocated_nonpreemptible_gpus", b, sizeof(b)));
    ts_out_kv("Requested", "%s GPUs", ts_out_member(s, "requested_gpus", b, sizeof(b)));
    ts_out_kv("Running jobs", "%s", ts_out_member(s, "running_jobs", b, sizeof(b)));
    ts_out_kv("Pending jobs", "%s", ts_out_member(s, "pending_jobs", b, sizeof(b)));
    ts_out_kv("Max pending", "%s", ts_out_member(q, "max_pending", b, sizeof(b)));
    const json_t *ju = json_object_get(q, "job_user");
    ts_out_kv("Job user", "%s%s", json_is_string(ju) ? json_string_value(ju) : "the agent's",
              json_is_true(json_object_get(q, "allow_root")) ? " (root allowed)" : "");
    ts_out_kv("Created", "%s", ts_out_time(json_object_get(p, "created_at"), b, sizeof(b)));
    const char *tag = ts_response_header(r, "ETag", etag, sizeof(etag));
    ts_out_kv("ETag", "%s", tag ? tag : "-");
    return TS_EXIT_OK;
}

static int cmd_describe_project(struct ts_cli *cli, const struct ts_args *a)
{
    return ts_show_named(cli, a, "projects", show_project, NULL);
}

/* ---- tokens -----------------------------------------------------------------------------------
 */

static int cmd_token_create(struct ts_cli *cli, const struct ts_args *a)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    const char *role = ts_args_get(a, "role");
    enum ts_role rl;
    if (role == NULL || ts_role_parse(role, &rl) != 0)
        return ts_cli_usage_error(cli, "--role must be admin, member, viewer or agent");
    const char *projects[TS_TOKEN_PROJECTS_MAX + 1];
    size_t n = ts_args_all(a, "project", projects, TS_TOKEN_PROJECTS_MAX + 1);
    if (n > TS_TOKEN_PROJECTS_MAX)
        return ts_cli_usage_error(cli, "too many --project (at most %d)", TS_TOKEN_PROJECTS_MAX);
    const char *nodes[TS_TOKEN_NODES_MAX + 1];
    size_t nn = ts_args_all(a, "node", nodes, TS_TOKEN_NODES_MAX + 1);
    if (nn > TS_TOKEN_NODES_MAX)
        return ts_cli_usage_error(cli, "too many --node (at most %d)", TS_TOKEN_NODES_MAX);
    if (nn > 0 && rl != TS_ROLE_AGENT)
        return ts_cli_usage_error(cli, "--node is only for agent tokens");
    json_t *body = json_pack("{s:s, s:s}", "name", a->pos[0], "role", role);
    if (n > 0) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(arr, json_string(projects[i]));
        json_object_set_new(body, "projects", arr);
    }
    if (nn > 0) {
        json_t *arr = json_array();
        for (size_t i = 0; i < nn; i++)
            json_array_append_new(arr, json_string(nodes[i]));
        json_object_set_new(body, "nodes", arr);
    }
    struct ts_response r;
    int rc = ts_req(cli, "POST", "/api/v1/tokens", body, NULL, 0, &r);
    json_decref(body);
    if (rc != TS_EXIT_OK)
        return rc;
    if (fmt == TS_OUT_JSON) {
        ts_out_raw(&r);
    } else {
        char id[32];
        fprintf(stderr, "token %s (%s, role %s) created; the secret below is shown only now\n",
                ts_out_member(r.json, "id", id, sizeof(id)), a->pos[0], role);
        printf("%s\n", json_string_value(json_object_get(r.json, "token")));
    }
    ts_response_free(&r);
    return TS_EXIT_OK;
}

static const struct ts_col token_cols[] = {
    {"ID", 0, true},      {"NAME", 10, false},  {"ROLE", 0, false},     {"PROJECTS", 10, false},
    {"NODES", 10, false}, {"CREATED", 0, true}, {"LAST-USED", 0, true},
};

/* The strings of o[key] joined by commas into buf; "-" when none, and
 * any_text for an empty array when any_text is not NULL. */
static const char *joined(const json_t *o, const char *key, const char *any_text, char *buf,
                          size_t len)
{
    size_t n = 0, k;
    json_t *p, *arr = json_object_get(o, key);
    buf[0] = '\0';
    json_array_foreach(arr, k, p) {
        if (n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", k ? "," : "", json_string_value(p));
    }
    if (buf[0] != '\0')
        return buf;
    return json_is_array(arr) && any_text != NULL ? any_text : "-";
}

static void token_row(struct ts_table *t, const json_t *o, void *ud)
{
    (void)ud;
    char buf[1024];
    ts_table_add(t, ts_out_member(o, "id", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(o, "name", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(o, "role", buf, sizeof(buf)));
    ts_table_add(t, joined(o, "projects", NULL, buf, sizeof(buf)));
    ts_table_add(t, joined(o, "nodes", "any", buf, sizeof(buf)));
    ts_table_add(t, ts_out_age(json_object_get(o, "created_at"), buf, sizeof(buf)));
    ts_table_add(t, ts_out_age(json_object_get(o, "last_used_at"), buf, sizeof(buf)));
}

static int cmd_token_list(struct ts_cli *cli, const struct ts_args *a)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    static const struct ts_show_table tab = {token_cols, TS_ARRAY_LEN(token_cols), token_row};
    return ts_show_list(cli, fmt, "/api/v1/tokens", "tokens", &tab, NULL);
}

/* A token's id from an id or a name. */
static int token_id(struct ts_cli *cli, const char *s, long long *id)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (s[0] >= '0' && s[0] <= '9' && *end == '\0') {
        *id = v;
        return TS_EXIT_OK;
    }
    struct ts_response r;
    int rc = ts_req(cli, "GET", "/api/v1/tokens", NULL, NULL, 0, &r);
    if (rc != TS_EXIT_OK)
        return rc;
    int found = 0;
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(r.json, "tokens"), i, o) {
        const char *name = json_string_value(json_object_get(o, "name"));
        if (name && strcmp(name, s) == 0) {
            found++;
            *id = json_integer_value(json_object_get(o, "id"));
        }
    }
    ts_response_free(&r);
    if (found == 1)
        return TS_EXIT_OK;
    if (found == 0) {
        fprintf(stderr, "error: no token named \"%s\"\n", s);
        return TS_EXIT_NOT_FOUND;
    }
    fprintf(stderr, "error: %d tokens are named \"%s\"\nhint: give the id (tessera token list)\n",
            found, s);
    return TS_EXIT_USAGE;
}

static int cmd_token_revoke(struct ts_cli *cli, const struct ts_args *a)
{
    int worst = TS_EXIT_OK;
    for (int i = 0; i < a->npos; i++) {
        long long id;
        int rc = token_id(cli, a->pos[i], &id);
        if (rc == TS_EXIT_OK) {
            char path[64];
            struct ts_response r;
            snprintf(path, sizeof(path), "/api/v1/tokens/%lld", id);
            rc = ts_req(cli, "DELETE", path, NULL, NULL, 0, &r);
            ts_response_free(&r);
            if (rc == TS_EXIT_OK)
                printf("token %lld revoked\n", id);
        }
        if (worst == TS_EXIT_OK)
            worst = rc;
    }
    return worst;
}

#define MAX_PENDING_OPT                                                                            \
    {                                                                                              \
        "max-pending", 0, "N", "at most N of its jobs pending; more are refused (default 10000)",  \
            false                                                                                  \
    }
/* A project's job user (agent/README.md "The job sandbox"). */
#define JOB_USER_OPTS                                                                              \
    {"job-user", 0, "USER", "its jobs run as this Unix user on the nodes (default: the agent's)",  \
     false},                                                                                       \
        {"default-job-user", 0, NULL, "its jobs run as the agent's --job-user", false},            \
        {"allow-root", 0, NULL, "let --job-user be root for this project", false},                 \
    {                                                                                              \
        "no-allow-root", 0, NULL, "withdraw --allow-root", false                                   \
    }
/* ---- audit ------------------------------------------------------------------------------- */

static const struct ts_col audit_cols[] = {
    {"ID", 0, true},      {"TIME", 0, false},   {"ACTOR", 8, false},
    {"ROLE", 0, false},   {"METHOD", 0, false}, {"PATH", 12, false},
    {"TARGET", 6, false}, {"STATUS", 0, true},  {"CHANGES", 12, false},
};

static void audit_row(struct ts_table *t, const json_t *o, void *ud)
{
    (void)ud;
    const json_t *who = json_object_get(o, "actor");
    char buf[1024];
    ts_table_add(t, ts_out_member(o, "id", buf, sizeof(buf)));
    ts_table_add(t, ts_out_time(json_object_get(o, "at"), buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(who, "name", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(who, "role", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(o, "method", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(o, "path", buf, sizeof(buf)));
    ts_table_add(t, json_is_string(json_object_get(o, "target"))
                        ? ts_out_member(o, "target", buf, sizeof(buf))
                        : "-");
    ts_table_add(t, ts_out_member(o, "status", buf, sizeof(buf)));
    char *changes = json_is_object(json_object_get(o, "changes"))
                        ? json_dumps(json_object_get(o, "changes"), JSON_COMPACT)
                        : NULL;
    ts_table_add(t, changes);
    free(changes);
}

/* The page's table, then on stderr the cursor of the next page. */
static int show_audit(struct ts_cli *cli, const struct ts_response *r, void *ud)
{
    (void)ud;
    static const struct ts_show_table tab = {audit_cols, TS_ARRAY_LEN(audit_cols), audit_row};
    ts_show_rows(cli, json_object_get(r->json, "events"), &tab, NULL);
    const char *next = json_string_value(json_object_get(r->json, "next_cursor"));
    if (next != NULL && cli->headers)
        fprintf(stderr, "more: tessera audit --cursor %s\n", next);
    return TS_EXIT_OK;
}

static int cmd_audit(struct ts_cli *cli, const struct ts_args *a)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    struct ts_error err;
    ts_error_clear(&err);
    long long limit = 50;
    if (ts_args_int(a, "limit", 1, 1000, &limit, &err) != 0)
        return ts_cli_usage_error(cli, "%s", err.message);
    char path[768], esc[256];
    int n = snprintf(path, sizeof(path), "/api/v1/audit?limit=%lld", limit);
    const char *since = ts_args_get(a, "since"), *actor = ts_args_get(a, "actor");
    const char *cursor = ts_args_get(a, "cursor");
    if (since)
        n += snprintf(path + n, sizeof(path) - (size_t)n, "&since=%s",
                      ts_req_escape(since, esc, sizeof(esc)));
    if (actor)
        n += snprintf(path + n, sizeof(path) - (size_t)n, "&actor=%s",
                      ts_req_escape(actor, esc, sizeof(esc)));
    if (cursor)
        snprintf(path + n, sizeof(path) - (size_t)n, "&cursor=%s",
                 ts_req_escape(cursor, esc, sizeof(esc)));
    return ts_show_get(cli, fmt, path, show_audit, NULL);
}

static const struct ts_opt audit_opts[] = {
    {"since", 0, "TIME", "only writes since an RFC 3339 time or a duration before now (1h)", false},
    {"actor", 0, "TOKEN", "only writes by this token (name or id)", false},
    {"limit", 0, "N", "at most N writes, newest first (default 50, at most 1000)", false},
    {"cursor", 0, "CURSOR", "the page after the one that printed this cursor", false},
    TS_OPT_OUTPUT,
    TS_OPT_NO_HEADERS,
    TS_OPT_END,
};

static const struct ts_opt project_create_opts[] = {
    {"department", 'd', "DEPARTMENT", "the department it belongs to (required)", false},
    QUOTA_OPTS,
    MAX_PENDING_OPT,
    JOB_USER_OPTS,
    TS_OPT_END,
};
static const struct ts_opt create_opts[] = {QUOTA_OPTS, TS_OPT_END};
static const struct ts_opt project_set_quota_opts[] = {
    QUOTA_OPTS,
    MAX_PENDING_OPT,
    JOB_USER_OPTS,
    {"if-match", 0, "ETAG", "write only if the ETag is still this one (default: the one read)",
     false},
    TS_OPT_END,
};
static const struct ts_opt set_quota_opts[] = {
    QUOTA_OPTS,
    {"if-match", 0, "ETAG", "write only if the ETag is still this one (default: the one read)",
     false},
    TS_OPT_END,
};
static const struct ts_opt output_opts[] = {TS_OPT_OUTPUT, TS_OPT_END};
static const struct ts_opt table_opts[] = {TS_OPT_OUTPUT, TS_OPT_NO_HEADERS, TS_OPT_END};
static const struct ts_opt token_create_opts[] = {
    {"role", 'r', "ROLE", "admin, member, viewer or agent (required)", false},
    {"project", 'p', "PROJECT", "a project a member or a restricted viewer may act on", true},
    {"node", 'n', "NODE", "a node an agent token may act as: a name, PREFIX* or *", true},
    TS_OPT_OUTPUT,
    TS_OPT_END,
};

#define TOKEN_CREATE_HELP                                                                          \
    "An agent token with --node acts only as those nodes (register, desired state,\n"              \
    "reports, output): give each agent its own, e.g. --node gpu-07, or --node 'gpu-*'\n"           \
    "for a fleet named by a prefix. Without --node it acts for any node; keep such a\n"            \
    "token for agents whose names are not known in advance."

#define SET_QUOTA_HELP                                                                             \
    "Reads the quota and its ETag, changes the members given, and writes it back with\n"           \
    "If-Match. When someone else changed it in between, nothing is written and the\n"              \
    "exit status is 4."

const struct ts_cmd ts_cmds_admin[] = {
    {"describe project", "NAME [-o table|json]", "show a project's quota, usage and ETag", NULL,
     output_opts, 1, 1, false, false, cmd_describe_project},
    {"project create",
     "NAME -d DEPARTMENT [--gpus N] [--limit N] [--weight W] [--priority N] [--max-pending N]"
     " [--job-user USER [--allow-root]]",
     "create a project (admin)", NULL, project_create_opts, 1, 1, false, false, cmd_project_create},
    {"project set-quota",
     "NAME [--gpus N] [--limit N | --no-limit] [--weight W] [--priority N] [--max-pending N] "
     "[--job-user USER | --default-job-user] [--allow-root | --no-allow-root] [--if-match ETAG]",
     "change a project's quota (admin)", SET_QUOTA_HELP, project_set_quota_opts, 1, 1, false, false,
     cmd_project_set_quota},
    {"project delete", "NAME", "delete a project whose jobs have all finished (admin)", NULL, NULL,
     1, 1, false, false, cmd_project_delete},
    {"project list", "[-o table|json] [--no-headers]", "list projects with their quotas", NULL,
     table_opts, 0, 0, false, false, cmd_project_list},
    {"department create", "NAME [--gpus N] [--limit N] [--weight W] [--priority N]",
     "create a department (admin)", NULL, create_opts, 1, 1, false, false, cmd_department_create},
    {"department set-quota",
     "NAME [--gpus N] [--limit N | --no-limit] [--weight W] [--priority N] [--if-match ETAG]",
     "change a department's quota (admin)", SET_QUOTA_HELP, set_quota_opts, 1, 1, false, false,
     cmd_department_set_quota},
    {"department delete", "NAME", "delete a department without projects (admin)", NULL, NULL, 1, 1,
     false, false, cmd_department_delete},
    {"department list", "[-o table|json] [--no-headers]", "list departments with their quotas",
     NULL, table_opts, 0, 0, false, false, cmd_department_list},
    {"token create", "NAME -r ROLE [-p PROJECT]... [-n NODE]... [-o table|json]",
     "create an API token and print its secret, once (admin)", TOKEN_CREATE_HELP, token_create_opts,
     1, 1, false, false, cmd_token_create},
    {"token list", "[-o table|json] [--no-headers]", "list tokens; secrets are never shown (admin)",
     NULL, table_opts, 0, 0, false, false, cmd_token_list},
    {"token revoke", "ID|NAME...", "revoke tokens (admin)", NULL, NULL, 1, -1, false, false,
     cmd_token_revoke},
    {"audit", "[--since TIME] [--actor TOKEN] [--limit N] [-o table|json] [--no-headers]",
     "show the admin writes made, newest first: who, when, what (admin)", NULL, audit_opts, 0, 0,
     false, false, cmd_audit},
};
const size_t ts_cmds_admin_count = TS_ARRAY_LEN(ts_cmds_admin);
