/*
 * cmd_jobs.h - what the job commands of cmd_jobs.c, cmd_list.c and
 * cmd_events.c share: a job's GET, its pending reason, the events table,
 * and the commands the one table of cmd_jobs.c lists from the other files.
 * Internal to the CLI.
 */
#ifndef TS_API_CLI_CMD_JOBS_H
#define TS_API_CLI_CMD_JOBS_H

#include <jansson.h>
#include <stdbool.h>

#include "api/cli/cli.h"
#include "api/cli/show.h"
#include "api/client/client.h"

/* Jobs per request while following the pages of GET /jobs. */
#define TS_CMD_JOBS_PAGE_SIZE 500

/* Every job of project (NULL: of every project the token sees), page
 * after page: *jobs a new array, NULL on failure. Returns an exit status. */
int ts_cmd_jobs_of(struct ts_cli *cli, const char *project, json_t **jobs);

/* GET /api/v1/jobs/{id}[suffix] into *r; returns an exit status. */
int ts_cmd_jobs_get(struct ts_cli *cli, long long id, const char *suffix, struct ts_response *r);

/* GET /api/v1/jobs/{id of JOB, the first positional argument}[suffix]:
 * -o json its body, else show (whose ud points to the id). */
int ts_cmd_jobs_show(struct ts_cli *cli, const struct ts_args *a, const char *suffix,
                     ts_show_fn show);

/* The pending reason of a job or a queue item: "pending_reason" (jobs) or
 * "reason" and "queue_position" (GET /queue). Borrowed; NULL when none;
 * *position 0 when it has none. */
const json_t *ts_cmd_jobs_reason(const json_t *j, long long *position);

/* The table of events (an array, borrowed), with a JOB column when
 * with_job. */
void ts_cmd_jobs_events_table(const struct ts_cli *cli, const json_t *events, bool with_job);

/* list and queue (cmd_list.c), events (cmd_events.c). */
int ts_cmd_jobs_list(struct ts_cli *cli, const struct ts_args *a);
int ts_cmd_jobs_queue(struct ts_cli *cli, const struct ts_args *a);
int ts_cmd_jobs_events(struct ts_cli *cli, const struct ts_args *a);
extern const struct ts_opt ts_cmd_jobs_list_opts[];
extern const struct ts_opt ts_cmd_jobs_queue_opts[];
extern const struct ts_opt ts_cmd_jobs_events_opts[];

#endif /* TS_API_CLI_CMD_JOBS_H */
