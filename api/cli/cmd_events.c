/*
 * cmd_events.c - events: what happened to a job, or to the newest jobs of
 * a project, oldest first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cli/cli.h"
#include "api/cli/cmd_jobs.h"
#include "api/cli/out.h"
#include "api/cli/req.h"
#include "api/cli/show.h"
#include "api/cli/table.h"
#include "api/wire.h"

#define EVENTS_JOBS 50 /* events without a job: of the newest this many jobs */

/* ---- events ------------------------------------------------------------------------------ */

static int by_time(const void *x, const void *y)
{
    const json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
    const char *ta = json_string_value(json_object_get(a, "at"));
    const char *tb = json_string_value(json_object_get(b, "at"));
    int c = strcmp(ta ? ta : "", tb ? tb : "");
    if (c != 0)
        return c;
    json_int_t ia = json_integer_value(json_object_get(a, "id"));
    json_int_t ib = json_integer_value(json_object_get(b, "id"));
    return (ia > ib) - (ia < ib);
}

/* The events of the newest jobs in scope, oldest first (new array). */
static int recent_events(struct ts_cli *cli, const struct ts_args *a, json_t **events)
{
    *events = NULL;
    const char *project = ts_args_has(a, "all-projects") ? NULL : ts_cli_project(cli, a);
    json_t *jobs;
    int rc = ts_cmd_jobs_of(cli, project, &jobs);
    if (rc != TS_EXIT_OK)
        return rc;
    size_t n = json_array_size(jobs), from = n > EVENTS_JOBS ? n - EVENTS_JOBS : 0;
    json_t *all = json_array();
    for (size_t i = from; i < n && rc == TS_EXIT_OK; i++) {
        struct ts_response r;
        long long id = json_integer_value(json_object_get(json_array_get(jobs, i), "id"));
        rc = ts_cmd_jobs_get(cli, id, "/events", &r);
        if (rc == TS_EXIT_NOT_FOUND) /* deleted meanwhile */
            rc = TS_EXIT_OK;
        else if (rc == TS_EXIT_OK)
            json_array_extend(all, json_object_get(r.json, "events"));
        ts_response_free(&r);
    }
    json_decref(jobs);
    if (rc != TS_EXIT_OK) {
        json_decref(all);
        return rc;
    }
    size_t m = json_array_size(all);
    json_t **v = calloc(m ? m : 1, sizeof(*v));
    *events = json_array();
    if (v == NULL || *events == NULL) {
        free(v);
        json_decref(all);
        return TS_EXIT_SERVER;
    }
    for (size_t i = 0; i < m; i++)
        v[i] = json_array_get(all, i);
    qsort(v, m, sizeof(*v), by_time);
    for (size_t i = 0; i < m; i++)
        json_array_append(*events, v[i]);
    free(v);
    json_decref(all);
    return TS_EXIT_OK;
}

const struct ts_opt ts_cmd_jobs_events_opts[] = {
    {"all-projects", 'A', NULL, "without JOB: jobs of every project the token sees", false},
    TS_OPT_PROJECT,
    TS_OPT_OUTPUT,
    TS_OPT_NO_HEADERS,
    TS_OPT_END,
};

static int show_events(struct ts_cli *cli, const struct ts_response *r, void *ud)
{
    (void)ud;
    ts_cmd_jobs_events_table(cli, json_object_get(r->json, "events"), false);
    return TS_EXIT_OK;
}

int ts_cmd_jobs_events(struct ts_cli *cli, const struct ts_args *a)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    if (a->npos == 1)
        return ts_cmd_jobs_show(cli, a, "/events", show_events);
    json_t *events;
    int rc = recent_events(cli, a, &events);
    if (rc != TS_EXIT_OK)
        return rc;
    if (fmt == TS_OUT_JSON) {
        json_t *o = json_pack("{s:O}", "events", events);
        ts_out_json(o);
        json_decref(o);
    } else {
        ts_cmd_jobs_events_table(cli, events, true);
    }
    json_decref(events);
    return TS_EXIT_OK;
}
