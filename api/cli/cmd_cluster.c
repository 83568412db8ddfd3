/*
 * cmd_cluster.c - nodes and GPUs: describe node, top node|gpu|project
 * (allocation next to utilization), node drain|undrain.
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

static const struct ts_opt output_opts[] = {TS_OPT_OUTPUT, TS_OPT_END};
static const struct ts_opt table_opts[] = {TS_OPT_OUTPUT, TS_OPT_NO_HEADERS, TS_OPT_END};

/* A fraction 0..1 as "42%", "-" when not a number. */
static char *percent(const json_t *v, char *buf, size_t len)
{
    if (!json_is_number(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.0f%%", 100 * json_number_value(v));
    return buf;
}

/* "1.5 (38%)": a number of GPUs and its share of total. */
static char *gpus_of(const json_t *v, size_t total, char *buf, size_t len)
{
    char n[32];
    if (!json_is_number(v))
        snprintf(buf, len, "-");
    else if (total == 0)
        snprintf(buf, len, "%s", ts_out_num(v, n, sizeof(n)));
    else
        snprintf(buf, len, "%s (%.0f%%)", ts_out_num(v, n, sizeof(n)),
                 100 * json_number_value(v) / (double)total);
    return buf;
}

/* The physical GPU job id of GPU g runs on (its moved_jobs), or -1 when it
 * runs on g itself. */
static json_int_t moved_to(const json_t *g, json_int_t id)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(g, "moved_jobs"), i, m) {
        if (json_integer_value(json_object_get(m, "id")) == id)
            return json_integer_value(json_object_get(m, "physical_index"));
    }
    return -1;
}

/* Job ids allocated on GPU g as "12,40(on 1)": "(on 1)" when the node runs
 * the job on its GPU 1 (the node-level scheduler); "-" when none. */
static char *job_ids(const json_t *g, char *buf, size_t len)
{
    size_t n = 0, i;
    json_t *v;
    buf[0] = '\0';
    json_array_foreach(json_object_get(g, "jobs"), i, v) {
        json_int_t id = json_integer_value(v), to = moved_to(g, id);
        char on[32] = "";
        if (to >= 0)
            snprintf(on, sizeof(on), "(on %" JSON_INTEGER_FORMAT ")", to);
        if (n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%" JSON_INTEGER_FORMAT "%s", i ? "," : "",
                                  id, on);
    }
    if (buf[0] == '\0')
        snprintf(buf, len, "-");
    return buf;
}

/* The jobs running on GPU g of node: those allocated on it and not moved,
 * and those of its other GPUs moved onto it, "40(from 0)"; "-" when none. */
static char *runs_here(const json_t *node, const json_t *g, char *buf, size_t len)
{
    size_t n = 0, i, k;
    json_t *v, *other;
    json_int_t index = json_integer_value(json_object_get(g, "index"));
    buf[0] = '\0';
    json_array_foreach(json_object_get(g, "jobs"), i, v) {
        if (moved_to(g, json_integer_value(v)) < 0 && n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%" JSON_INTEGER_FORMAT, n ? "," : "",
                                  json_integer_value(v));
    }
    json_array_foreach(json_object_get(node, "gpus"), k, other) {
        json_array_foreach(json_object_get(other, "moved_jobs"), i, v) {
            if (json_integer_value(json_object_get(v, "physical_index")) == index && n < len)
                n += (size_t)snprintf(buf + n, len - n,
                                      "%s%" JSON_INTEGER_FORMAT "(from %" JSON_INTEGER_FORMAT ")",
                                      n ? "," : "", json_integer_value(json_object_get(v, "id")),
                                      json_integer_value(json_object_get(other, "index")));
        }
    }
    if (buf[0] == '\0')
        snprintf(buf, len, "-");
    return buf;
}

/* JOBS: allocated on the GPU (logical, the scheduler's); RUNS-HERE: running
 * on it (physical, where the node-level scheduler put them). */
static const struct ts_col gpu_cols[] = {
    {"NODE", 10, false},   {"IDX", 0, true},   {"MODEL", 10, false},
    {"MEMORY", 0, true},   {"ALLOC", 0, true}, {"UTIL", 0, true},
    {"MEM-USED", 0, true}, {"JOBS", 6, false}, {"RUNS-HERE", 6, false},
};

static void gpu_rows(struct ts_table *t, const json_t *node)
{
    char buf[1024];
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(node, "gpus"), i, g) {
        ts_table_add(t, ts_out_member(node, "name", buf, sizeof(buf)));
        ts_table_add(t, ts_out_member(g, "index", buf, sizeof(buf)));
        ts_table_add(t, ts_out_member(g, "model", buf, sizeof(buf)));
        ts_table_add(t, ts_out_bytes(json_object_get(g, "memory_bytes"), buf, sizeof(buf)));
        ts_table_add(t, percent(json_object_get(g, "allocated"), buf, sizeof(buf)));
        ts_table_add(t, percent(json_object_get(g, "utilization"), buf, sizeof(buf)));
        ts_table_add(t, ts_out_bytes(json_object_get(g, "memory_used_bytes"), buf, sizeof(buf)));
        ts_table_add(t, job_ids(g, buf, sizeof(buf)));
        ts_table_add(t, runs_here(node, g, buf, sizeof(buf)));
    }
}

static int show_node(struct ts_cli *cli, const struct ts_response *r, void *ud)
{
    (void)ud;
    const json_t *n = r->json;
    size_t ngpus = json_array_size(json_object_get(n, "gpus"));
    char b[1024];
    ts_out_kv("Node", "%s", ts_out_member(n, "name", b, sizeof(b)));
    ts_out_kv("State", "%s", ts_out_member(n, "state", b, sizeof(b)));
    ts_out_kv("Labels", "%s", ts_out_member(n, "labels", b, sizeof(b)));
    ts_out_kv("CPU", "%s", ts_out_member(n, "cpu", b, sizeof(b)));
    ts_out_kv("Memory", "%s", ts_out_bytes(json_object_get(n, "memory_bytes"), b, sizeof(b)));
    ts_out_kv("Swap", "%s", ts_out_bytes(json_object_get(n, "swap_bytes"), b, sizeof(b)));
    ts_out_kv("Collision", "%s", ts_out_member(n, "collision", b, sizeof(b)));
    ts_out_kv("GPUs", "%zu", ngpus);
    ts_out_kv("Allocated", "%s",
              gpus_of(json_object_get(n, "allocated_gpus"), ngpus, b, sizeof(b)));
    ts_out_kv("Utilized", "%s", gpus_of(json_object_get(n, "utilized_gpus"), ngpus, b, sizeof(b)));
    ts_out_kv("Running jobs", "%s", ts_out_member(n, "running_jobs", b, sizeof(b)));
    ts_out_kv("Agent", "%s", ts_out_member(n, "agent_version", b, sizeof(b)));
    ts_out_kv("Last seen", "%s", ts_out_time(json_object_get(n, "last_seen_at"), b, sizeof(b)));
    ts_out_kv("Created", "%s", ts_out_time(json_object_get(n, "created_at"), b, sizeof(b)));
    if (ngpus > 0) {
        printf("GPUs:\n");
        struct ts_table *t = ts_table_new(gpu_cols, TS_ARRAY_LEN(gpu_cols));
        gpu_rows(t, n);
        ts_cli_table_print(cli, t);
        ts_table_free(t);
    }
    return TS_EXIT_OK;
}

static int cmd_describe_node(struct ts_cli *cli, const struct ts_args *a)
{
    return ts_show_named(cli, a, "nodes", show_node, NULL);
}

static const struct ts_col node_cols[] = {
    {"NODE", 10, false},    {"STATE", 0, false},   {"GPUS", 0, true},
    {"ALLOCATED", 0, true}, {"UTILIZED", 0, true}, {"JOBS", 0, true},
    {"CPU", 0, true},       {"MEMORY", 0, true},   {"LAST-SEEN", 0, true},
};

static void node_row(struct ts_table *t, const json_t *n, void *ud)
{
    (void)ud;
    char buf[256];
    size_t ngpus = json_array_size(json_object_get(n, "gpus"));
    ts_table_add(t, ts_out_member(n, "name", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(n, "state", buf, sizeof(buf)));
    ts_table_addf(t, "%zu", ngpus);
    ts_table_add(t, gpus_of(json_object_get(n, "allocated_gpus"), ngpus, buf, sizeof(buf)));
    ts_table_add(t, gpus_of(json_object_get(n, "utilized_gpus"), ngpus, buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(n, "running_jobs", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(n, "cpu", buf, sizeof(buf)));
    ts_table_add(t, ts_out_bytes(json_object_get(n, "memory_bytes"), buf, sizeof(buf)));
    ts_table_add(t, ts_out_age(json_object_get(n, "last_seen_at"), buf, sizeof(buf)));
}

/* The rows of a node's GPUs. */
static void node_gpu_rows(struct ts_table *t, const json_t *n, void *ud)
{
    (void)ud;
    gpu_rows(t, n);
}

/* GET /nodes; with -o json the body unchanged; else the table of kind. */
static int top_nodes(struct ts_cli *cli, const struct ts_args *a, bool gpus)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    static const struct ts_show_table node_tab = {node_cols, TS_ARRAY_LEN(node_cols), node_row};
    static const struct ts_show_table gpu_tab = {gpu_cols, TS_ARRAY_LEN(gpu_cols), node_gpu_rows};
    return ts_show_list(cli, fmt, "/api/v1/nodes", "nodes", gpus ? &gpu_tab : &node_tab, NULL);
}

static int cmd_top_node(struct ts_cli *cli, const struct ts_args *a)
{
    return top_nodes(cli, a, false);
}

static int cmd_top_gpu(struct ts_cli *cli, const struct ts_args *a)
{
    return top_nodes(cli, a, true);
}

/* The newest value per project of the metric "utilized" in the last 5
 * minutes (new object: name -> number), or NULL when the server has none. */
static json_t *project_utilization(struct ts_cli *cli)
{
    struct ts_response r;
    if (ts_req(cli, "GET", "/api/v1/metrics/query?metric=utilized&by=project&from=5m", NULL, NULL,
               TS_REQ_KEEP, &r) != TS_EXIT_OK) {
        ts_response_free(&r);
        return NULL;
    }
    json_t *out = json_object();
    size_t i, k;
    json_t *s, *p;
    json_array_foreach(json_object_get(r.json, "series"), i, s) {
        const char *key = json_string_value(json_object_get(s, "key"));
        json_array_foreach(json_object_get(s, "points"), k, p) {
            const json_t *v = json_array_get(p, 1);
            if (key && json_is_number(v))
                json_object_set_new(out, key, json_real(json_number_value(v)));
        }
    }
    ts_response_free(&r);
    return out;
}

static const struct ts_col project_cols[] = {
    {"PROJECT", 10, false}, {"QUOTA", 0, true},       {"LIMIT", 0, true},
    {"ALLOC", 0, true},     {"NON-PREEMPT", 0, true}, {"UTIL", 0, true},
    {"REQUESTED", 0, true}, {"RUNNING", 0, true},     {"PENDING", 0, true},
};

/* ud: the utilization of each project (project_utilization), or NULL. */
static void project_row(struct ts_table *t, const json_t *p, void *ud)
{
    const json_t *util = ud;
    const json_t *q = json_object_get(p, "quota"), *s = json_object_get(p, "status");
    const char *name = json_string_value(json_object_get(p, "name"));
    char buf[256];
    ts_table_add(t, name);
    ts_table_add(t, ts_out_member(q, "gpus", buf, sizeof(buf)));
    ts_table_add(t, json_is_number(json_object_get(q, "limit"))
                        ? ts_out_member(q, "limit", buf, sizeof(buf))
                        : "none");
    ts_table_add(t, ts_out_member(s, "allocated_gpus", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(s, "allocated_nonpreemptible_gpus", buf, sizeof(buf)));
    ts_table_add(t, ts_out_num(name ? json_object_get(util, name) : NULL, buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(s, "requested_gpus", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(s, "running_jobs", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(s, "pending_jobs", buf, sizeof(buf)));
}

/* The projects' table beside their utilization, asked after the list. */
static int show_projects(struct ts_cli *cli, const struct ts_response *r, void *ud)
{
    (void)ud;
    static const struct ts_show_table tab = {project_cols, TS_ARRAY_LEN(project_cols), project_row};
    json_t *util = project_utilization(cli);
    ts_show_rows(cli, json_object_get(r->json, "projects"), &tab, util);
    json_decref(util);
    return TS_EXIT_OK;
}

static int cmd_top_project(struct ts_cli *cli, const struct ts_args *a)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    return ts_show_get(cli, fmt, "/api/v1/projects", show_projects, NULL);
}

static int drain(struct ts_cli *cli, const struct ts_args *a, const char *action)
{
    char esc[256], path[320];
    snprintf(path, sizeof(path), "/api/v1/nodes/%s/%s", ts_req_escape(a->pos[0], esc, sizeof(esc)),
             action);
    struct ts_response r;
    int rc = ts_req(cli, "POST", path, NULL, NULL, TS_REQ_RETRY, &r);
    if (rc != TS_EXIT_OK)
        return rc;
    char state[32];
    printf("node %s: %s\n", a->pos[0], ts_out_member(r.json, "state", state, sizeof(state)));
    ts_response_free(&r);
    return TS_EXIT_OK;
}

static int cmd_node_drain(struct ts_cli *cli, const struct ts_args *a)
{
    return drain(cli, a, "drain");
}

static int cmd_node_undrain(struct ts_cli *cli, const struct ts_args *a)
{
    return drain(cli, a, "undrain");
}

const struct ts_cmd ts_cmds_cluster[] = {
    {"describe node", "NAME [-o table|json]", "show a node and its GPUs", NULL, output_opts, 1, 1,
     false, false, cmd_describe_node},
    {"top node", "[-o table|json] [--no-headers]", "nodes: GPUs allocated next to GPUs utilized",
     NULL, table_opts, 0, 0, false, false, cmd_top_node},
    {"top gpu", "[-o table|json] [--no-headers]",
     "every GPU: share allocated, utilization, memory used, jobs", NULL, table_opts, 0, 0, false,
     false, cmd_top_gpu},
    {"top project", "[-o table|json] [--no-headers]",
     "projects: quota, GPUs allocated (and non-preemptible), utilized, requested, jobs", NULL,
     table_opts, 0, 0, false, false, cmd_top_project},
    {"node drain", "NAME", "place nothing new on a node; its jobs keep running (admin)", NULL, NULL,
     1, 1, false, false, cmd_node_drain},
    {"node undrain", "NAME", "let the scheduler use a drained node again (admin)", NULL, NULL, 1, 1,
     false, false, cmd_node_undrain},
};
const size_t ts_cmds_cluster_count = TS_ARRAY_LEN(ts_cmds_cluster);
