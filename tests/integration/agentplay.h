/*
 * agentplay.h - what the integration tests that play the agents over HTTP
 * share (test_lifecycle.c, test_suspend.c): a server started with an agent
 * token, a heartbeat thread that reports for every node the test registered
 * (so that only a node the test silences is lost), and the requests such a
 * test makes about nodes and jobs. Every request fails the running cmocka
 * test when its answer's status is not the one wanted.
 *
 * One server per program: ts_ap_start in the group setup, ts_ap_stop in the
 * group teardown; the other functions work on that server.
 */
#ifndef TS_TESTS_INTEGRATION_AGENTPLAY_H
#define TS_TESTS_INTEGRATION_AGENTPLAY_H

#include <jansson.h>
#include <stdbool.h>

#include "tests/integration/harness.h"

/* Start a server in s (ts_it_start with extra_args), an agent's token and
 * client, the heartbeat thread, and the department "research" with the
 * projects "owner" (quota 2 GPUs) and "borrower" (quota 0). s is borrowed
 * until ts_ap_stop. 0, or -1 when the server did not start. */
int ts_ap_start(struct ts_it_server *s, const char *const *extra_args);
/* Stop the heartbeat thread, free the agent's client, stop the server and
 * remove its folder. ts_it_stop's result. */
int ts_ap_stop(void);
/* A cmocka group teardown: ts_ap_stop. */
int ts_ap_teardown(void **state);
/* The first value of SQL's first row on the started server's database as an
 * integer; a failed statement fails the test. */
long long ts_ap_sql_int(const char *sql);
/* ts_ap_sql_int of the statement fmt makes. */
long long ts_ap_sql_count(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A session of its own on the started server's database that holds job
 * id's row (BEGIN; SELECT ... FOR UPDATE): what a race test commits or
 * closes (PQfinish) once the write it holds back waits for it. */
struct pg_conn *ts_ap_hold_row(long long id);
/* Run q on c; any status but a command's or a query's fails the test. */
void ts_ap_pg_exec(struct pg_conn *c, const char *q);
/* The agents' client (borrowed until ts_ap_stop). */
struct ts_client *ts_ap_agent(void);
/* The agents' token (borrowed until ts_ap_stop): for a client of a thread's
 * own. */
const char *ts_ap_agent_token(void);
/* Send the heartbeats to s from now on (another replica); s is borrowed
 * until the next call. */
void ts_ap_heartbeat_to(const struct ts_it_server *s);
/* Send node's heartbeat or stop sending it (registering turns it on). */
void ts_ap_heartbeat(const char *node, bool on);

/* Seconds on the monotonic clock. */
double ts_ap_now_s(void);

/* GET path; the answer (new) when its status is want. */
json_t *ts_ap_get_json(struct ts_client *c, const char *path, long want);
/* The request's answer (new) when its status is want; body is JSON text or
 * NULL. */
json_t *ts_ap_call(struct ts_client *c, const char *method, const char *path, const char *body,
                   long want);
/* ts_ap_call, the answer dropped. */
void ts_ap_call_ok(struct ts_client *c, const char *method, const char *path, const char *body,
                   long want);

/* Register node name as its agent does: 32 CPUs, 256 GiB, gpus GPUs of
 * 80 GiB ("GPU-<name>-<index>"); extra: more top-level members ("" for
 * none). Turns its heartbeat on. */
void ts_ap_register_node(const char *name, int gpus, const char *extra);
/* Submit a job as the admin: sleep 100, grace period 5 s; extra: more
 * members of the job ("" for none). Its id. */
long long ts_ap_submit(const char *project, const char *name, const char *extra);
/* The job (new). */
json_t *ts_ap_job(long long id);
/* Wait up to secs for the job to reach state; the job (new). */
json_t *ts_ap_wait_state(long long id, const char *state, double secs);

/* POST a report for node as its agent: jobs (the members of its "jobs"
 * array) and extra top-level members ("" for none); the answer (new) when
 * its status is want. */
json_t *ts_ap_report(const char *node, const char *jobs_json, const char *extra, long want);
/* The node's desired state (new): at once when generation < 0, else
 * long-polled with generation and wait (e.g. "20s"). */
json_t *ts_ap_desired(const char *node, long long generation, const char *wait);
/* Job id in the desired state d (borrowed from d), or NULL. */
json_t *ts_ap_desired_find(json_t *d, long long id);
/* Job id in the node's desired state now (new), or NULL. */
json_t *ts_ap_desired_job(const char *node, long long id);

/* The value of the metric line "name value" (name with its labels, if any)
 * on s's /metrics; fails the test when there is none. */
double ts_ap_metric_of(struct ts_it_server *s, const char *name);
/* The same on the server ts_ap_start started. */
double ts_ap_metric(const char *name);
/* Wait (up to 30 s) until the scheduler loop ran no cycle for quiet_s
 * seconds: what the test did last has been decided, however loaded the
 * machine; fails the test otherwise. */
void ts_ap_settle(double quiet_s);
/* The same on server s. */
void ts_ap_settle_of(struct ts_it_server *s, double quiet_s);

#endif /* TS_TESTS_INTEGRATION_AGENTPLAY_H */
