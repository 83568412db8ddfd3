/*
 * cmd_jobs.c - jobs after submission: describe job, why, logs, cancel,
 * suspend, resume; finding a job by its name; the table of the group's
 * commands, whose list and queue are in cmd_list.c, events in cmd_events.c.
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
#include "api/units.h"
#include "api/wire.h"

/* ---- fetching and finding jobs ------------------------------------------------ */

int ts_cmd_jobs_fetch(struct ts_cli *cli, const char *query, long long page_size, json_t **jobs,
                      char **raw)
{
    *jobs = json_array();
    *raw = NULL;
    char path[1024], cursor[128] = "";
    for (int page = 0;; page++) {
        snprintf(path, sizeof(path), "/api/v1/jobs?%s%slimit=%lld%s%s", query, query[0] ? "&" : "",
                 page_size, cursor[0] ? "&cursor=" : "", cursor);
        struct ts_response r;
        int rc = ts_req(cli, "GET", path, NULL, NULL, 0, &r);
        if (rc != TS_EXIT_OK) {
            free(*raw);
            *raw = NULL;
            return rc;
        }
        json_array_extend(*jobs, json_object_get(r.json, "jobs"));
        const char *next = json_string_value(json_object_get(r.json, "next_cursor"));
        if (page == 0 && next == NULL)
            *raw = strdup(r.body.data ? r.body.data : "");
        if (next != NULL) {
            char esc[128];
            snprintf(cursor, sizeof(cursor), "%s", ts_req_escape(next, esc, sizeof(esc)));
        }
        ts_response_free(&r);
        if (next == NULL)
            return TS_EXIT_OK;
    }
}

int ts_cmd_jobs_of(struct ts_cli *cli, const char *project, json_t **jobs)
{
    char query[256] = "", esc[200];
    if (project)
        snprintf(query, sizeof(query), "project=%s", ts_req_escape(project, esc, sizeof(esc)));
    char *raw;
    int rc = ts_cmd_jobs_fetch(cli, query, TS_CMD_JOBS_PAGE_SIZE, jobs, &raw);
    free(raw);
    if (rc != TS_EXIT_OK) {
        json_decref(*jobs);
        *jobs = NULL;
    }
    return rc;
}

static bool all_digits(const char *s)
{
    if (s[0] == '\0')
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

int ts_cmd_jobs_resolve(struct ts_cli *cli, const struct ts_args *a, const char *job, long long *id)
{
    if (all_digits(job)) {
        *id = strtoll(job, NULL, 10);
        return TS_EXIT_OK;
    }
    if (!ts_name_valid(job))
        return ts_cli_usage_error(cli, "JOB must be a job's id or name: \"%s\"", job);
    const char *project = ts_cli_project(cli, a);
    json_t *jobs;
    int rc = ts_cmd_jobs_of(cli, project, &jobs);
    if (rc != TS_EXIT_OK)
        return rc;
    /* the newest job of that name in each project */
    json_t *found = json_object();
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j) {
        const char *name = json_string_value(json_object_get(j, "name"));
        const char *proj = json_string_value(json_object_get(j, "project"));
        if (name && proj && strcmp(name, job) == 0)
            json_object_set(found, proj, json_object_get(j, "id"));
    }
    json_decref(jobs);
    size_t n = json_object_size(found);
    if (n == 1) {
        const char *k;
        json_t *v;
        json_object_foreach(found, k, v)
            *id = json_integer_value(v);
        json_decref(found);
        return TS_EXIT_OK;
    }
    if (n == 0) {
        json_decref(found);
        if (project)
            fprintf(stderr, "error: no job named \"%s\" in project \"%s\"\n", job, project);
        else
            fprintf(stderr, "error: no job named \"%s\"\n", job);
        return TS_EXIT_NOT_FOUND;
    }
    fprintf(stderr, "error: jobs named \"%s\" are in %zu projects:", job, n);
    const char *k;
    json_t *v;
    json_object_foreach(found, k, v)
        fprintf(stderr, " %s", k);
    fprintf(stderr, "\nhint: give -p PROJECT, or the job's id\n");
    json_decref(found);
    return TS_EXIT_USAGE;
}

int ts_cmd_jobs_get(struct ts_cli *cli, long long id, const char *suffix, struct ts_response *r)
{
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld%s", id, suffix);
    return ts_req(cli, "GET", path, NULL, NULL, 0, r);
}

const json_t *ts_cmd_jobs_reason(const json_t *j, long long *position)
{
    const json_t *r = json_object_get(j, "pending_reason");
    if (!json_is_object(r))
        r = json_object_get(j, "reason");
    const json_t *pos = json_object_get(j, "queue_position");
    if (!json_is_integer(pos))
        pos = json_object_get(r, "queue_position");
    *position = json_is_integer(pos) ? json_integer_value(pos) : 0;
    return json_is_object(r) ? r : NULL;
}

/* ---- describe job, why ------------------------------------------------------------ */

static void event_row(struct ts_table *t, const json_t *e, void *ud)
{
    char buf[1024];
    ts_table_add(t, ts_out_time(json_object_get(e, "at"), buf, sizeof(buf)));
    if (ud != NULL)
        ts_table_add(t, ts_out_member(e, "job_id", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(e, "type", buf, sizeof(buf)));
    ts_table_add(t, ts_out_member(e, "message", buf, sizeof(buf)));
}

void ts_cmd_jobs_events_table(const struct ts_cli *cli, const json_t *events, bool with_job)
{
    static const struct ts_col cols[] = {
        {"TIME", 0, false}, {"TYPE", 0, false}, {"MESSAGE", 20, false}};
    static const struct ts_col job_cols[] = {
        {"TIME", 0, false}, {"JOB", 0, true}, {"TYPE", 0, false}, {"MESSAGE", 20, false}};
    static const struct ts_show_table tab = {cols, 3, event_row};
    static const struct ts_show_table job_tab = {job_cols, 4, event_row};
    ts_show_rows(cli, events, with_job ? &job_tab : &tab, with_job ? (void *)job_cols : NULL);
}

/* "K=V K=V" of an object of strings, "-" when empty. */
static char *pairs_text(const json_t *o, char *buf, size_t len)
{
    size_t n = 0;
    const char *k;
    json_t *v;
    buf[0] = '\0';
    json_object_foreach((json_t *)o, k, v) {
        if (n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s=%s", n ? " " : "", k,
                                  json_string_value(v) ? json_string_value(v)
                                  : json_is_null(v)    ? "(redacted)"
                                                       : "");
    }
    if (buf[0] == '\0')
        snprintf(buf, len, "-");
    return buf;
}

/* Words of an array of strings joined by spaces, "-" when empty. */
static char *words_text(const json_t *arr, char *buf, size_t len)
{
    size_t n = 0;
    size_t i;
    json_t *v;
    buf[0] = '\0';
    json_array_foreach(arr, i, v) {
        if (n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? " " : "",
                                  json_string_value(v) ? json_string_value(v) : "");
    }
    if (buf[0] == '\0')
        snprintf(buf, len, "-");
    return buf;
}

/* The GPUs of an allocation: "0 (20GiB), 1 (20GiB)", "-" when none; a GPU
 * its node runs elsewhere (the node-level scheduler) says where:
 * "0 (20GiB, runs on GPU 1)". */
static char *devices_text(const json_t *devices, char *buf, size_t len)
{
    size_t n = 0, i;
    json_t *d;
    char idx[32], mem[32], on[48];
    buf[0] = '\0';
    json_array_foreach(devices, i, d) {
        const json_t *phys = json_object_get(d, "physical_index");
        on[0] = '\0';
        if (json_is_integer(phys) &&
            json_integer_value(phys) != json_integer_value(json_object_get(d, "index")))
            snprintf(on, sizeof(on), ", runs on GPU %" JSON_INTEGER_FORMAT,
                     json_integer_value(phys));
        if (n < len)
            n += (size_t)snprintf(
                buf + n, len - n, "%s%s (%s%s)", i ? ", " : "",
                ts_out_member(d, "index", idx, sizeof(idx)),
                ts_out_bytes(json_object_get(d, "memory_bytes"), mem, sizeof(mem)), on);
    }
    if (buf[0] == '\0')
        snprintf(buf, len, "-");
    return buf;
}

static const struct ts_opt job_opts[] = {TS_OPT_PROJECT, TS_OPT_OUTPUT, TS_OPT_END};

/* A job's "key: value" lines, then its events (ud: the job's id). */
static int show_job(struct ts_cli *cli, const struct ts_response *r, void *ud)
{
    long long id = *(const long long *)ud;
    const json_t *j = r->json;
    char b1[4096], b2[256];
    ts_out_kv("Job", "%lld (%s)", id, ts_out_member(j, "name", b1, sizeof(b1)));
    ts_out_kv("Project", "%s", ts_out_member(j, "project", b1, sizeof(b1)));
    ts_out_kv("Kind", "%s", ts_out_member(j, "kind", b1, sizeof(b1)));
    ts_out_kv("State", "%s", ts_out_member(j, "state", b1, sizeof(b1)));
    long long pos;
    const json_t *reason = ts_cmd_jobs_reason(j, &pos);
    if (reason) {
        ts_out_kv("Reason", "%s: %s", ts_out_member(reason, "code", b1, sizeof(b1)),
                  ts_out_member(reason, "message", b2, sizeof(b2)));
        if (pos > 0)
            ts_out_kv("Queue position", "%lld", pos);
    }
    ts_out_kv("Priority", "%s (%s)", ts_out_member(j, "priority", b1, sizeof(b1)),
              json_is_true(json_object_get(j, "preemptible")) ? "preemptible" : "not preemptible");
    ts_out_kv("GPU", "%s", ts_out_gpu(json_object_get(j, "gpu"), b1, sizeof(b1)));
    const json_t *cpu = json_object_get(j, "cpu");
    ts_out_kv("CPU", "%s", json_number_value(cpu) > 0 ? ts_out_num(cpu, b1, sizeof(b1)) : "-");
    ts_out_kv("Memory", "%s", ts_out_member(j, "memory", b1, sizeof(b1)));
    ts_out_kv("Command", "%s", words_text(json_object_get(j, "command"), b1, sizeof(b1)));
    ts_out_kv("Environment", "%s", pairs_text(json_object_get(j, "env"), b1, sizeof(b1)));
    ts_out_kv("Working dir", "%s", ts_out_member(j, "working_dir", b1, sizeof(b1)));
    ts_out_kv("GPU model", "%s", words_text(json_object_get(j, "gpu_model"), b1, sizeof(b1)));
    ts_out_kv("Node selector", "%s",
              pairs_text(json_object_get(j, "node_selector"), b1, sizeof(b1)));
    ts_out_kv("Max runtime", "%s", ts_out_member(j, "max_runtime", b1, sizeof(b1)));
    const json_t *idle = json_object_get(j, "idle_swap_after_seconds");
    if (json_is_integer(idle))
        ts_out_kv("Idle swap after", "%s",
                  json_integer_value(idle) > 0
                      ? ts_out_member(j, "idle_swap_after", b1, sizeof(b1))
                      : "never (its GPU memory stays on its GPUs while it is idle)");
    ts_out_kv("Node", "%s", ts_out_member(j, "node", b1, sizeof(b1)));
    if (json_is_integer(json_object_get(j, "attempt")))
        ts_out_kv("Attempt", "%s", ts_out_member(j, "attempt", b1, sizeof(b1)));
    const json_t *alloc = json_object_get(j, "allocation");
    if (json_is_object(alloc))
        ts_out_kv("Allocation", "%s GPUs on GPU %s", ts_out_member(alloc, "gpus", b2, sizeof(b2)),
                  devices_text(json_object_get(alloc, "devices"), b1, sizeof(b1)));
    const json_t *usage = json_object_get(j, "usage");
    if (json_is_object(usage) && json_is_object(alloc)) {
        char b3[64];
        ts_out_kv("Utilization", "%.0f%% busy, %s of GPU memory in use",
                  100 * json_number_value(json_object_get(usage, "gpu_utilization")),
                  ts_out_bytes(json_object_get(usage, "gpu_memory_used_bytes"), b3, sizeof(b3)));
    }
    const json_t *swapped = json_object_get(j, "swapped_bytes");
    if (json_is_integer(swapped) && json_integer_value(swapped) > 0)
        ts_out_kv("Swapped", "%s of its GPU memory in its node's host memory",
                  ts_out_bytes(swapped, b1, sizeof(b1)));
    const json_t *share = json_object_get(j, "fair_share");
    if (json_is_object(share)) {
        char b3[64];
        ts_out_kv("Project share", "deserves %s GPUs, fair share %s GPUs",
                  ts_out_member(share, "project_deserved_gpus", b2, sizeof(b2)),
                  ts_out_member(share, "project_fair_share_gpus", b3, sizeof(b3)));
    }
    ts_out_kv("Exit code", "%s", ts_out_member(j, "exit_code", b1, sizeof(b1)));
    ts_out_kv("Resumes", "%s", ts_out_member(j, "resume_count", b1, sizeof(b1)));
    ts_out_kv("Created", "%s", ts_out_time(json_object_get(j, "created_at"), b1, sizeof(b1)));
    ts_out_kv("Started", "%s", ts_out_time(json_object_get(j, "started_at"), b1, sizeof(b1)));
    ts_out_kv("Finished", "%s", ts_out_time(json_object_get(j, "finished_at"), b1, sizeof(b1)));
    struct ts_response ev;
    int rc = ts_cmd_jobs_get(cli, id, "/events", &ev);
    if (rc != TS_EXIT_OK)
        return rc;
    printf("Events:\n");
    ts_cmd_jobs_events_table(cli, json_object_get(ev.json, "events"), false);
    ts_response_free(&ev);
    return TS_EXIT_OK;
}

int ts_cmd_jobs_show(struct ts_cli *cli, const struct ts_args *a, const char *suffix,
                     ts_show_fn show)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    long long id;
    int rc = ts_cmd_jobs_resolve(cli, a, a->pos[0], &id);
    if (rc != TS_EXIT_OK)
        return rc;
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld%s", id, suffix);
    return ts_show_get(cli, fmt, path, show, &id);
}

static int cmd_describe_job(struct ts_cli *cli, const struct ts_args *a)
{
    return ts_cmd_jobs_show(cli, a, "", show_job);
}

/* What would make a job pending for reason code run. */
static const struct {
    const char *code, *advice;
} advice[] = {
    {"not_yet_scheduled", "the scheduler has not looked at it yet: wait a moment (if it stays, "
                          "ask an admin whether the scheduler runs)"},
    {"quota_exhausted", "non-preemptible jobs may only use the project's quota: wait for the "
                        "project's running jobs to end, ask an admin to raise the quota (tessera "
                        "project set-quota), or submit it --preemptible"},
    {"over_limit", "the project (or its department) is at its limit: wait for its running jobs "
                   "to end, or ask an admin to raise the limit (tessera project set-quota "
                   "--limit)"},
    {"no_fit", "no node has room for it now: ask for less (fewer GPUs, a smaller portion or "
               "less GPU memory, CPU or host memory), or wait for jobs to end"},
    {"fragmented", "enough is free in total but not on one GPU or node: ask for a smaller "
                   "portion or fewer devices, or wait for jobs to end"},
    {"too_large", "no node could ever hold the request: ask for less"},
    {"waiting_for_reclaim", "GPUs will be taken back for it: within its quota from projects "
                            "above their quotas, beyond it from projects above their fair "
                            "shares, once their jobs can be stopped (their minimum runtime and "
                            "grace period): wait; the reason above says which and why not yet"},
    {"lower_priority", "jobs of higher priority come first: wait, or submit with a higher "
                       "--priority"},
    {"node_unavailable", "no ready node matches its --gpu-model and --selector: check them, or "
                         "ask an admin whether the nodes are drained or down"},
    {"invalid_request", "the request cannot be placed as written: cancel it and submit a valid "
                        "one"},
    {"waiting_for_memory", "it is resuming on its node, which brings its GPU memory back from host "
                           "memory once other jobs give back what they hold above their requests: "
                           "wait (the message says for what)"},
};

/* Why a job waits and what would make it run (ud: the job's id). */
static int show_why(struct ts_cli *cli, const struct ts_response *r, void *ud)
{
    (void)cli;
    long long id = *(const long long *)ud;
    const json_t *j = r->json;
    char name[128], state[32], project[128], b[512];
    ts_out_member(j, "name", name, sizeof(name));
    ts_out_member(j, "state", state, sizeof(state));
    ts_out_member(j, "project", project, sizeof(project));
    printf("job %lld (%s) in project %s is %s", id, name, project, state);
    const char *node = json_string_value(json_object_get(j, "node"));
    if (node)
        printf(" on node %s", node);
    printf("\n");
    long long pos;
    const json_t *reason = ts_cmd_jobs_reason(j, &pos);
    const char *code = json_string_value(json_object_get(reason, "code"));
    if (reason) {
        printf("reason:   %s\n", code ? code : "-");
        printf("message:  %s\n", ts_out_member(reason, "message", b, sizeof(b)));
        if (pos > 0)
            printf("position: %lld in the queue\n", pos);
        const json_t *share = json_object_get(j, "fair_share");
        if (json_is_object(share)) {
            char d[32], f[32];
            printf("share:    project %s deserves %s GPUs; its fair share is %s GPUs\n", project,
                   ts_out_member(share, "project_deserved_gpus", d, sizeof(d)),
                   ts_out_member(share, "project_fair_share_gpus", f, sizeof(f)));
        }
    }
    if (strcmp(state, "pending") == 0 || (strcmp(state, "resuming") == 0 && reason)) {
        const char *what = NULL;
        for (size_t i = 0; code && i < TS_ARRAY_LEN(advice); i++)
            if (strcmp(advice[i].code, code) == 0)
                what = advice[i].advice;
        if (reason == NULL)
            what = advice[0].advice;
        printf("to run:   %s\n", what ? what : "wait; 'tessera describe job' shows its events");
    } else if (strcmp(state, "failed") == 0 || strcmp(state, "succeeded") == 0) {
        printf("exit code: %s\n", ts_out_member(j, "exit_code", b, sizeof(b)));
    }
    return TS_EXIT_OK;
}

static int cmd_why(struct ts_cli *cli, const struct ts_args *a)
{
    return ts_cmd_jobs_show(cli, a, "", show_why);
}

/* ---- logs -------------------------------------------------------------------------- */

static int write_out(const char *data, size_t len, void *ud)
{
    if (fwrite(data, 1, len, stdout) != len)
        return -1;
    fflush(stdout);
    return 0;
}

static const struct ts_opt logs_opts[] = {
    TS_OPT_PROJECT,
    {"follow", 'f', NULL, "keep printing the log as it grows, until the job ends", false},
    {"tail", 0, "N", "only the last N lines", false},
    TS_OPT_END,
};

static int cmd_logs(struct ts_cli *cli, const struct ts_args *a)
{
    long long tail = -1;
    struct ts_error err;
    ts_error_clear(&err);
    if (ts_args_int(a, "tail", 0, 100000000, &tail, &err) != 0)
        return ts_cli_usage_error(cli, "%s", err.message);
    long long id;
    int rc = ts_cmd_jobs_resolve(cli, a, a->pos[0], &id);
    if (rc != TS_EXIT_OK)
        return rc;
    char path[160], t[40] = "";
    if (tail >= 0)
        snprintf(t, sizeof(t), "&tail=%lld", tail);
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/logs?follow=%s%s", id,
             ts_args_has(a, "follow") ? "true" : "false", t);
    return ts_req_stream(cli, path, write_out, NULL);
}

/* ---- cancel, suspend, resume ----------------------------------------------------------- */

static const struct ts_opt project_opts[] = {TS_OPT_PROJECT, TS_OPT_END};

/* POST or DELETE on a job; print "job ID (NAME): STATE". */
static int act(struct ts_cli *cli, const struct ts_args *a, const char *job, const char *method,
               const char *suffix, const char *verb)
{
    long long id;
    int rc = ts_cmd_jobs_resolve(cli, a, job, &id);
    if (rc != TS_EXIT_OK)
        return rc;
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld%s", id, suffix);
    struct ts_response r;
    if ((rc = ts_req(cli, method, path, NULL, NULL, TS_REQ_RETRY, &r)) != TS_EXIT_OK)
        return rc;
    char name[128], state[32];
    printf("job %lld (%s) %s: %s\n", id, ts_out_member(r.json, "name", name, sizeof(name)), verb,
           ts_out_member(r.json, "state", state, sizeof(state)));
    ts_response_free(&r);
    return TS_EXIT_OK;
}

static int cmd_cancel(struct ts_cli *cli, const struct ts_args *a)
{
    int worst = TS_EXIT_OK;
    for (int i = 0; i < a->npos; i++) {
        int rc = act(cli, a, a->pos[i], "DELETE", "", "cancel");
        if (worst == TS_EXIT_OK)
            worst = rc;
    }
    return worst;
}

static int cmd_suspend(struct ts_cli *cli, const struct ts_args *a)
{
    return act(cli, a, a->pos[0], "POST", "/suspend", "suspend");
}

static int cmd_resume(struct ts_cli *cli, const struct ts_args *a)
{
    return act(cli, a, a->pos[0], "POST", "/resume", "resume");
}

const struct ts_cmd ts_cmds_jobs[] = {
    {"list",
     "[-A | -p PROJECT] [--all | --state STATE] [--kind KIND] [--node NODE] "
     "[-o table|wide|json|columns=A,B] [--no-headers]",
     "list unfinished jobs (of the default project, or -p, or -A for all)",
     "Without --all or --state only jobs not yet finished (not succeeded, failed or\ncancelled). "
     "Follows the API's pages; -o json prints the API's JSON (one object\nwith every job).",
     ts_cmd_jobs_list_opts, 0, 0, false, false, ts_cmd_jobs_list},
    {"describe job", "JOB [-p PROJECT] [-o table|json]", "show a job and its events",
     "JOB is an id, or a name in the project of -p or the default one.", job_opts, 1, 1, false,
     false, cmd_describe_job},
    {"why", "JOB [-p PROJECT] [-o table|json]",
     "say why a job waits, its place in the queue, and what would make it run", NULL, job_opts, 1,
     1, false, false, cmd_why},
    {"logs", "JOB [-p PROJECT] [-f] [--tail N]", "print a job's output", NULL, logs_opts, 1, 1,
     false, false, cmd_logs},
    {"cancel", "JOB... [-p PROJECT]", "cancel jobs (a running one stops first)", NULL, project_opts,
     1, -1, false, false, cmd_cancel},
    {"suspend", "JOB [-p PROJECT]", "suspend a running job, freeing its GPUs", NULL, project_opts,
     1, 1, false, false, cmd_suspend},
    {"resume", "JOB [-p PROJECT]", "resume a suspended job", NULL, project_opts, 1, 1, false, false,
     cmd_resume},
    {"events", "[JOB] [-A | -p PROJECT] [-o table|json] [--no-headers]",
     "what happened to a job, or to the newest 50 jobs of a project", NULL, ts_cmd_jobs_events_opts,
     0, 1, false, false, ts_cmd_jobs_events},
    {"queue", "[-A | -p PROJECT] [-o table|json] [--no-headers]",
     "pending jobs in queue order with their reasons", NULL, ts_cmd_jobs_queue_opts, 0, 0, false,
     false, ts_cmd_jobs_queue},
};
const size_t ts_cmds_jobs_count = TS_ARRAY_LEN(ts_cmds_jobs);
