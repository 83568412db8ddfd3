/*
 * handlers.h - the REST handlers, thin: decode -> domain/store -> encode.
 * Each takes the request context (struct ts_ctx *, passed as void *) and
 * returns TS_OK with a response set, or an error with err filled.
 */
#ifndef TS_SERVER_HANDLERS_HANDLERS_H
#define TS_SERVER_HANDLERS_HANDLERS_H

#include <jansson.h>

#include "api/query.h"

#include "server/http/http.h"
#include "server/http/route.h"
#include "server/server.h"

struct ts_revisions;
struct ts_quota;
struct ts_dbconn;

/* Every handler is a ts_route_handler (server/http/route.h), its signature
 * written out so that ctags and cscope see each name. */

/* system.c */
enum ts_err ts_h_healthz(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_readyz(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_version(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_metrics(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_openapi(void *ctx, struct ts_request *r, struct ts_error *err);
/* tokens.c */
enum ts_err ts_h_whoami(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_token_create(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_token_list(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_token_delete(void *ctx, struct ts_request *r, struct ts_error *err);
/* departments.c */
enum ts_err ts_h_department_create(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_department_list(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_department_get(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_department_delete(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_department_quota(void *ctx, struct ts_request *r, struct ts_error *err);
/* projects.c */
enum ts_err ts_h_project_create(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_project_list(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_project_get(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_project_delete(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_project_quota(void *ctx, struct ts_request *r, struct ts_error *err);
/* jobs.c */
enum ts_err ts_h_job_submit(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_job_list(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_job_get(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_job_cancel(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_job_suspend(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_job_resume(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_job_events(void *ctx, struct ts_request *r, struct ts_error *err);
/* logs.c */
enum ts_err ts_h_job_logs(void *ctx, struct ts_request *r, struct ts_error *err);
/* queue.c */
enum ts_err ts_h_queue(void *ctx, struct ts_request *r, struct ts_error *err);
/* series.c */
enum ts_err ts_h_metrics_query(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_metrics_idle(void *ctx, struct ts_request *r, struct ts_error *err);
/* nodes.c */
enum ts_err ts_h_node_list(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_node_get(void *ctx, struct ts_request *r, struct ts_error *err);
/* agent.c: the agent protocol */
enum ts_err ts_h_node_register(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_node_drain(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_node_undrain(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_node_desired(void *ctx, struct ts_request *r, struct ts_error *err);
enum ts_err ts_h_node_report(void *ctx, struct ts_request *r, struct ts_error *err);
/* logs.c */
enum ts_err ts_h_node_logs(void *ctx, struct ts_request *r, struct ts_error *err);
/* audit.c */
enum ts_err ts_h_audit_list(void *ctx, struct ts_request *r, struct ts_error *err);

/* ---- helpers shared by handlers (common.c) ---- */

/* The request body as a JSON object (new reference in *out). An empty body
 * is TS_ERR_MISSING_FIELD. */
enum ts_err ts_h_body(struct ts_request *r, json_t **out, struct ts_error *err);
/* Path parameter i as an id > 0; TS_ERR_NOT_FOUND otherwise (an id that
 * cannot exist). */
enum ts_err ts_h_param_id(struct ts_request *r, int i, const char *what, int64_t *out,
                          struct ts_error *err);
/* Set an ETag header "\"<revision>\"". */
void ts_h_etag(struct ts_request *r, int64_t revision);
/* The revisions If-Match names (its tags that are ours; others match
 * nothing), *any for "*": TS_ERR_PRECONDITION_REQUIRED when absent. */
enum ts_err ts_h_if_match(struct ts_request *r, struct ts_revisions *revs, bool *any,
                          struct ts_error *err);
/* On a GET or HEAD whose If-None-Match names "\"<revision>\"" (or "*"): a
 * 304 with no body is set and true returned (RFC 9110 §13.1.2). */
bool ts_h_not_modified(struct ts_request *r, int64_t revision);
/* The job as JSON (new), its env values replaced by null and
 * "env_redacted": true when the caller may not read them
 * (ts_auth_env_visible): env often carries secrets; its pending reason
 * through ts_h_redact_projects. */
json_t *ts_h_job_json(struct ts_ctx *ctx, const struct ts_job *job);
/* A scheduler message (a pending reason, an event) as a project-limited
 * caller may read it: every quoted name of a project it may not see becomes
 * "another project" (arena); text itself for other callers. NULL stays
 * NULL; "(hidden)" when the names cannot be read. */
const char *ts_h_redact_projects(struct ts_ctx *ctx, const char *text);
/* The query string decoded by the route's table (api/query.h) into out,
 * times given as a duration before now counted from the clock; unknown
 * parameters, repeats and bad values are TS_ERR_BAD_PARAMETER naming the
 * parameter. *given (may be NULL): bit i for each params[i] present. */
enum ts_err ts_h_query(struct ts_request *r, const struct ts_query_param *params, size_t n,
                       void *out, uint64_t *given, struct ts_error *err);
/* A JSON array from a list encoded with enc(item) (steals each result). */
json_t *ts_h_list(json_t *items, const char *key);
/* Decode the request body (ts_h_body) with decode(body, spec, err). */
typedef enum ts_err (*ts_h_decode_fn)(const json_t *in, void *spec, struct ts_error *err);
enum ts_err ts_h_body_decode(struct ts_request *r, ts_h_decode_fn decode, void *spec,
                             struct ts_error *err);
/* A 201 with body (stolen), Location /api/v1/<kind>/<name> and the ETag. */
void ts_h_created(struct ts_request *r, const char *kind, const char *name, int64_t revision,
                  json_t *body);
/* PUT .../{name}/quota: If-Match, a quota body decoded by decode, set(),
 * then the answer of get(). */
typedef enum ts_err (*ts_h_set_quota_fn)(struct ts_dbconn *c, const char *name,
                                         const struct ts_quota *q, const struct ts_revisions *revs,
                                         struct ts_error *err);
enum ts_err ts_h_put_quota(void *ctx, struct ts_request *r, const char *what, ts_h_decode_fn decode,
                           ts_h_set_quota_fn set, ts_route_handler get, struct ts_error *err);
/* DELETE .../{name}: 204 when del() removed it. */
enum ts_err ts_h_delete_named(void *ctx, struct ts_request *r, const char *what,
                              enum ts_err (*del)(struct ts_dbconn *, const char *,
                                                 struct ts_error *),
                              struct ts_error *err);

#endif /* TS_SERVER_HANDLERS_HANDLERS_H */
