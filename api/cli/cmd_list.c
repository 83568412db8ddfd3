/*
 * cmd_list.c - jobs as tables: list (the jobs of a project or of all, by
 * state, kind and node, page after page) and queue (pending jobs in queue
 * order with their reasons).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "api/cli/cli.h"
#include "api/cli/cmd_jobs.h"
#include "api/cli/out.h"
#include "api/cli/req.h"
#include "api/cli/show.h"
#include "api/cli/table.h"
#include "api/wire.h"

/* ---- list ---------------------------------------------------------------------- */

static const struct ts_col list_cols[] = {
    {"ID", 0, true},   {"NAME", 12, false}, {"PROJECT", 8, false},      {"STATE", 0, false},
    {"GPU", 0, false}, {"AGE", 0, true},    {"NODE/REASON", 12, false},
};
static const struct ts_col wide_cols[] = {
    {"ID", 0, true},       {"NAME", 12, false},    {"PROJECT", 8, false}, {"KIND", 0, false},
    {"PRI", 0, true},      {"PREEMPT", 0, false},  {"STATE", 0, false},   {"GPU", 0, false},
    {"CPU", 0, true},      {"MEMORY", 0, true},    {"NODE", 8, false},    {"AGE", 0, true},
    {"REASON", 16, false}, {"COMMAND", 12, false},
};

/* "code: message" of a pending reason (borrowed, or NULL: "-"). */
static void reason_cell(struct ts_table *t, const json_t *reason)
{
    if (reason)
        ts_table_addf(t, "%s: %s", json_string_value(json_object_get(reason, "code")),
                      json_string_value(json_object_get(reason, "message")));
    else
        ts_table_add(t, "-");
}

/* A job's row; wide (ud non-NULL): every column of -o wide. */
static void list_row(struct ts_table *t, const json_t *j, void *ud)
{
    bool wide = ud != NULL;
    char buf[1024];
    long long pos;
    const json_t *reason = ts_cmd_jobs_reason(j, &pos);
    ts_table_add(t, ts_out_member(j, "id", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(j, "name", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(j, "project", buf, sizeof(buf)));
    if (wide) {
        ts_table_add(t, ts_out_member(j, "kind", buf, sizeof(buf)));
        ts_table_add(t, ts_out_member(j, "priority", buf, sizeof(buf)));
        ts_table_add(t, json_is_true(json_object_get(j, "preemptible")) ? "yes" : "no");
    }
    ts_table_add(t, ts_out_member(j, "state", buf, sizeof(buf)));
    ts_table_add(t, ts_out_gpu(json_object_get(j, "gpu"), buf, sizeof(buf)));
    if (wide) {
        const json_t *cpu = json_object_get(j, "cpu");
        ts_table_add(t, json_number_value(cpu) > 0 ? ts_out_num(cpu, buf, sizeof(buf)) : "-");
        const json_t *mem = json_object_get(j, "memory_bytes");
        ts_table_add(t, json_integer_value(mem) > 0 ? ts_out_bytes(mem, buf, sizeof(buf)) : "-");
        ts_table_add(t, ts_out_member(j, "node", buf, sizeof(buf)));
        ts_table_add(t, ts_out_age(json_object_get(j, "created_at"), buf, sizeof(buf)));
        reason_cell(t, reason);
        char *cmd = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&cmd, &len);
        size_t i;
        json_t *w;
        json_array_foreach(json_object_get(j, "command"), i, w)
            fprintf(m, "%s%s", i ? " " : "", json_string_value(w));
        fclose(m);
        ts_table_add(t, cmd);
        free(cmd);
        return;
    }
    ts_table_add(t, ts_out_age(json_object_get(j, "created_at"), buf, sizeof(buf)));
    const char *node = json_string_value(json_object_get(j, "node"));
    if (node)
        ts_table_add(t, node);
    else if (reason)
        ts_table_addf(t, "(%s)", json_string_value(json_object_get(reason, "code")));
    else
        ts_table_add(t, "-");
}

const struct ts_opt ts_cmd_jobs_list_opts[] = {
    {"all-projects", 'A', NULL, "every project the token sees", false},
    TS_OPT_PROJECT,
    {"all", 0, NULL, "finished jobs too (default: unfinished jobs only)", false},
    {"state", 0, "STATE", "only these states: pending,running,... (comma-separated)", false},
    {"kind", 0, "KIND", "only this kind: train, interactive or inference", false},
    {"node", 0, "NODE", "only jobs on this node", false},
    TS_OPT_OUTPUT,
    TS_OPT_NO_HEADERS,
    {"page-size", 0, "N", "jobs per request while following the pages (default 500)", false},
    TS_OPT_END,
};

/* After an empty answer for project: TS_EXIT_NOT_FOUND after saying so
 * when it does not exist, else TS_EXIT_OK (it exists, or the token may not
 * read it: then the empty answer stands). */
static int project_check(struct ts_cli *cli, const char *project)
{
    char path[300], esc[200];
    snprintf(path, sizeof(path), "/api/v1/projects/%s", ts_req_escape(project, esc, sizeof(esc)));
    struct ts_response r;
    int rc = ts_req(cli, "GET", path, NULL, NULL, TS_REQ_KEEP, &r);
    if (rc == TS_EXIT_NOT_FOUND)
        fprintf(stderr, "error: project \"%s\" does not exist\n", project);
    ts_response_free(&r);
    return rc == TS_EXIT_NOT_FOUND ? rc : TS_EXIT_OK;
}

int ts_cmd_jobs_list(struct ts_cli *cli, const struct ts_args *a)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    if (ts_args_has(a, "all-projects") && ts_args_has(a, "project"))
        return ts_cli_usage_error(cli, "give -A or -p, not both");
    if (ts_args_has(a, "all") && ts_args_has(a, "state"))
        return ts_cli_usage_error(cli, "give --all or --state, not both");
    /* by default the jobs not yet finished: every state but the final ones */
    char unfinished[256] = "";
    for (int s = 0; s <= TS_JOB_CANCELLED; s++)
        if (!ts_job_state_finished((enum ts_job_state)s)) {
            size_t n = strlen(unfinished);
            snprintf(unfinished + n, sizeof(unfinished) - n, "%s%s", n ? "," : "",
                     ts_job_state_name((enum ts_job_state)s));
        }
    const char *state = ts_args_get(a, "state");
    if (state == NULL && !ts_args_has(a, "all"))
        state = unfinished;
    long long page = TS_CMD_JOBS_PAGE_SIZE;
    struct ts_error err;
    ts_error_clear(&err);
    if (ts_args_int(a, "page-size", 1, 1000, &page, &err) != 0)
        return ts_cli_usage_error(cli, "%s", err.message);
    char query[1024] = "", esc[300];
    size_t n = 0;
    const char *project = ts_args_has(a, "all-projects") ? NULL : ts_cli_project(cli, a);
    const char *filters[][2] = {{"project", project},
                                {"state", state},
                                {"kind", ts_args_get(a, "kind")},
                                {"node", ts_args_get(a, "node")}};
    for (size_t i = 0; i < TS_ARRAY_LEN(filters); i++)
        if (filters[i][1])
            n += (size_t)snprintf(query + n, sizeof(query) - n, "%s%s=%s", n ? "&" : "",
                                  filters[i][0], ts_req_escape(filters[i][1], esc, sizeof(esc)));
    if (n >= sizeof(query))
        return ts_cli_usage_error(cli, "filters are too long");
    json_t *jobs;
    char *raw;
    int rc = ts_cmd_jobs_fetch(cli, query, page, &jobs, &raw);
    if (rc == TS_EXIT_OK && project && json_array_size(jobs) == 0)
        rc = project_check(cli, project);
    if (rc == TS_EXIT_OK && fmt == TS_OUT_JSON) {
        if (raw) {
            printf("%s\n", raw);
        } else {
            json_t *o = json_pack("{s:O, s:n}", "jobs", jobs, "next_cursor");
            ts_out_json(o);
            json_decref(o);
        }
    } else if (rc == TS_EXIT_OK) {
        static const struct ts_show_table tab = {list_cols, TS_ARRAY_LEN(list_cols), list_row};
        static const struct ts_show_table wide_tab = {wide_cols, TS_ARRAY_LEN(wide_cols), list_row};
        bool wide = fmt == TS_OUT_WIDE;
        ts_show_rows(cli, jobs, wide ? &wide_tab : &tab, wide ? (void *)wide_cols : NULL);
    }
    free(raw);
    json_decref(jobs);
    return rc;
}

/* ---- queue ------------------------------------------------------------------------------- */

static int by_position(const void *x, const void *y)
{
    long long pa, pb;
    ts_cmd_jobs_reason(*(json_t *const *)x, &pa);
    ts_cmd_jobs_reason(*(json_t *const *)y, &pb);
    if (pa <= 0)
        pa = (long long)1 << 62;
    if (pb <= 0)
        pb = (long long)1 << 62;
    if (pa != pb)
        return (pa > pb) - (pa < pb);
    json_int_t ia = json_integer_value(json_object_get(*(json_t *const *)x, "id"));
    json_int_t ib = json_integer_value(json_object_get(*(json_t *const *)y, "id"));
    return (ia > ib) - (ia < ib);
}

static const struct ts_col queue_cols[] = {
    {"POS", 0, true}, {"ID", 0, true},   {"NAME", 12, false}, {"PROJECT", 8, false},
    {"PRI", 0, true}, {"GPU", 0, false}, {"AGE", 0, true},    {"REASON", 20, false},
};

static void queue_row(struct ts_table *t, const json_t *j, void *ud)
{
    (void)ud;
    char buf[1024];
    long long pos;
    const json_t *reason = ts_cmd_jobs_reason(j, &pos);
    if (pos > 0)
        ts_table_addf(t, "%lld", pos);
    else
        ts_table_add(t, "-");
    ts_table_add(t, ts_out_member(j, "id", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(j, "name", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(j, "project", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(j, "priority", buf, sizeof(buf)));
    ts_table_add(t, ts_out_gpu(json_object_get(j, "gpu"), buf, sizeof(buf)));
    ts_table_add(t, ts_out_age(json_object_get(j, "created_at"), buf, sizeof(buf)));
    reason_cell(t, reason);
}

const struct ts_opt ts_cmd_jobs_queue_opts[] = {
    {"all-projects", 'A', NULL, "every project (the default without -p)", false},
    TS_OPT_PROJECT,
    TS_OPT_OUTPUT,
    TS_OPT_NO_HEADERS,
    TS_OPT_END,
};

int ts_cmd_jobs_queue(struct ts_cli *cli, const struct ts_args *a)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    const char *project = ts_args_has(a, "all-projects") ? NULL : ts_args_get(a, "project");
    char path[300] = "/api/v1/queue", esc[200];
    if (project)
        snprintf(path, sizeof(path), "/api/v1/queue?project=%s",
                 ts_req_escape(project, esc, sizeof(esc)));
    struct ts_response r;
    json_t *items = NULL;
    int rc = ts_req(cli, "GET", path, NULL, NULL, TS_REQ_KEEP, &r);
    if (rc == TS_EXIT_OK) {
        if (fmt == TS_OUT_JSON) {
            ts_out_raw(&r);
            ts_response_free(&r);
            return TS_EXIT_OK;
        }
        /* {"jobs": [...]}; {"items": [...]} in an early draft */
        items = json_object_get(r.json, "jobs");
        if (!json_is_array(items))
            items = json_object_get(r.json, "items");
        items = json_is_array(items) ? json_incref(items) : json_array();
    } else if (r.status == 404 && json_string_value(json_object_get(r.json, "code")) &&
               strcmp(json_string_value(json_object_get(r.json, "code")), "route_not_found") == 0) {
        /* a server without GET /queue: the pending jobs and their reasons */
        char query[300] = "state=pending";
        if (project)
            snprintf(query, sizeof(query), "state=pending&project=%s",
                     ts_req_escape(project, esc, sizeof(esc)));
        char *raw;
        rc = ts_cmd_jobs_fetch(cli, query, TS_CMD_JOBS_PAGE_SIZE, &items, &raw);
        free(raw);
    } else if (r.status) {
        ts_req_print_problem(&r);
    }
    ts_response_free(&r);
    if (rc == TS_EXIT_OK && project && json_array_size(items) == 0)
        rc = project_check(cli, project);
    if (rc != TS_EXIT_OK) {
        json_decref(items);
        return rc;
    }
    size_t n = json_array_size(items);
    json_t **v = calloc(n ? n : 1, sizeof(*v));
    if (v == NULL) {
        json_decref(items);
        return TS_EXIT_SERVER;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(items, i);
    qsort(v, n, sizeof(*v), by_position);
    json_t *sorted = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append(sorted, v[i]);
    free(v);
    json_decref(items);
    if (fmt == TS_OUT_JSON) {
        json_t *o = json_pack("{s:o}", "items", sorted);
        ts_out_json(o);
        json_decref(o);
    } else {
        static const struct ts_show_table tab = {queue_cols, TS_ARRAY_LEN(queue_cols), queue_row};
        ts_show_rows(cli, sorted, &tab, NULL);
        json_decref(sorted);
    }
    return TS_EXIT_OK;
}
