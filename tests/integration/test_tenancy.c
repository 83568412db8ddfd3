/*
 * test_tenancy.c - tenants cannot reach each other (issue 14), played by a
 * hostile agent and a hostile member against a real server:
 *
 * - an agent token bound to node n2 cannot read n1's desired state (the
 *   env secrets of n1's jobs), forge n1's report, write into n1's jobs'
 *   output or register as n1: 403 and nothing changes;
 * - a member limited to the project "borrower" reads /metrics, /nodes,
 *   /queue and /metrics/query and finds nothing of "owner" but counts;
 * - a viewer without projects sees the names of a job's env, not its values;
 * - a scheduler message (a reclaim's event) names no project the reader
 *   may not see.
 *
 * One server for the whole program (agentplay.c): nodes n1 and n2, each
 * registered by its own node-bound token; the job "secret" of "owner"
 * running on n1 and "waiting" of "owner" pending (it asks for more GPUs
 * than a node has).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/agentplay.h"
#include "tests/integration/harness.h"

static struct ts_it_server srv;
static char tok_n1[128], tok_n2[128], tok_fleet[128], tok_member[128], tok_viewer[128],
    tok_owner_viewer[128];
static long long running_id, pending_id;

#define SECRET "s3cr3t-value-of-owner"
#define GPUS_2                                                                                     \
    "{\"cpu\": 32, \"memory_bytes\": 274877906944, \"gpus\": ["                                    \
    "{\"index\": 0, \"uuid\": \"GPU-%s-0\", \"model\": \"Sim H100\", \"memory_bytes\": "           \
    "85899345920},"                                                                                \
    "{\"index\": 1, \"uuid\": \"GPU-%s-1\", \"model\": \"Sim H100\", \"memory_bytes\": "           \
    "85899345920}]}"

/* A new token's secret into out: name, role and the rest of its body. */
static void make_token(char *out, size_t len, const char *name, const char *role, const char *rest)
{
    char body[512];
    snprintf(body, sizeof(body), "{\"name\": \"%s\", \"role\": \"%s\"%s%s}", name, role,
             rest[0] ? ", " : "", rest);
    json_t *t = ts_ap_call(srv.admin, "POST", "/api/v1/tokens", body, 201);
    snprintf(out, len, "%s", ts_it_str(t, "token"));
    json_decref(t);
}

/* The request with token; its status, the response in *r (free it). */
static long call(const char *token, const char *method, const char *path, const char *body,
                 struct ts_response *r)
{
    struct ts_client *c = ts_it_client(&srv, token);
    long st = ts_it_req(c, method, path, body, NULL, r);
    ts_client_free(c);
    return st;
}

/* The request with token must be refused with a 403 problem. */
static void refused(const char *token, const char *method, const char *path, const char *body)
{
    struct ts_response r;
    long st = call(token, method, path, body, &r);
    if (st != 403)
        fail_msg("%s %s: %ld, not 403: %s", method, path, st, r.body.data ? r.body.data : "");
    assert_non_null(strstr(r.headers.data, "application/problem+json"));
    assert_int_equal(ts_it_int(r.json, "status"), 403);
    assert_null(strstr(r.body.data, SECRET));
    ts_response_free(&r);
}

/* The body of a GET with token, which must answer 200 (malloc'd). */
static char *get_body(const char *token, const char *path)
{
    struct ts_response r;
    long st = call(token, "GET", path, NULL, &r);
    if (st != 200)
        fail_msg("GET %s: %ld: %s", path, st, r.body.data ? r.body.data : "");
    char *s = strdup(r.body.data ? r.body.data : "");
    ts_response_free(&r);
    return s;
}

/* get_body once it holds want, or after 10 s (the caller asserts) */
static char *get_body_with(const char *token, const char *path, const char *want)
{
    char *s = NULL;
    for (int i = 0; i < 100; i++) {
        free(s);
        s = get_body(token, path);
        if (strstr(s, want) != NULL)
            break;
        usleep(100 * 1000);
    }
    return s;
}

static const char *sql1(const char *q)
{
    static char out[256];
    if (ts_it_sql(&srv, q, out, sizeof(out)) != 0)
        snprintf(out, sizeof(out), "(error)");
    return out;
}

static int setup(void **state)
{
    static const char *const args[] = {"--series-interval", "1s", NULL};
    if (ts_ap_start(&srv, args) != 0)
        return -1;
    make_token(tok_n1, sizeof(tok_n1), "agent-n1", "agent", "\"nodes\": [\"n1\"]");
    make_token(tok_n2, sizeof(tok_n2), "agent-n2", "agent", "\"nodes\": [\"n2\"]");
    make_token(tok_fleet, sizeof(tok_fleet), "agent-fleet", "agent", "\"nodes\": [\"gpu-*\"]");
    make_token(tok_member, sizeof(tok_member), "member-b", "member",
               "\"projects\": [\"borrower\"]");
    make_token(tok_viewer, sizeof(tok_viewer), "viewer", "viewer", "");
    make_token(tok_owner_viewer, sizeof(tok_owner_viewer), "viewer-owner", "viewer",
               "\"projects\": [\"owner\"]");

    /* n1 first, so that the job lands there; each node by its own token */
    char body[1024];
    struct ts_response r;
    snprintf(body, sizeof(body), GPUS_2, "n1", "n1");
    assert_int_equal(call(tok_n1, "PUT", "/api/v1/nodes/n1", body, &r), 200);
    ts_response_free(&r);
    ts_ap_heartbeat("n1", true);
    running_id = ts_ap_submit("owner", "secret",
                              "\"gpu\": {\"count\": 1}, \"env\": {\"API_KEY\": \"" SECRET "\"}");
    json_decref(ts_ap_wait_state(running_id, "scheduled", 10));
    snprintf(body, sizeof(body),
             "{\"jobs\": [{\"id\": %lld, \"attempt\": 1, \"state\": \"running\", \"pid\": 4242}]}",
             running_id);
    assert_int_equal(call(tok_n1, "POST", "/api/v1/nodes/n1/report", body, &r), 200);
    ts_response_free(&r);
    json_decref(ts_ap_wait_state(running_id, "running", 5));
    snprintf(body, sizeof(body), GPUS_2, "n2", "n2");
    assert_int_equal(call(tok_n2, "PUT", "/api/v1/nodes/n2", body, &r), 200);
    ts_response_free(&r);
    ts_ap_heartbeat("n2", true);
    pending_id = ts_ap_submit("owner", "waiting",
                              "\"gpu\": {\"count\": 4}, \"env\": {\"API_KEY\": \"" SECRET "\"}");
    return running_id == 1 ? 0 : -1;
}

static int teardown(void **state)
{
    return ts_ap_stop();
}

/* ---- the hostile agent ------------------------------------------------------------------- */

static void an_agent_token_reads_only_its_own_nodes_desired_state(void **state)
{
    refused(tok_n2, "GET", "/api/v1/nodes/n1/desired", NULL);
    refused(tok_n2, "GET", "/api/v1/nodes/n1/desired?generation=0&wait=1s", NULL);
    refused(tok_n2, "GET", "/api/v1/nodes/n1", NULL);
    char *mine = get_body(tok_n1, "/api/v1/nodes/n1/desired");
    assert_non_null(strstr(mine, SECRET)); /* its own node's agent needs the env */
    free(mine);
}

static void an_agent_token_cannot_forge_another_nodes_report(void **state)
{
    refused(tok_n2, "POST", "/api/v1/nodes/n1/report",
            "{\"jobs\": [{\"id\": 1, \"attempt\": 1, \"state\": \"exited\", \"exit_code\": 0}]}");
    usleep(300 * 1000);
    json_t *j = ts_ap_job(running_id);
    assert_string_equal(ts_it_str(j, "state"), "running");
    json_decref(j);
    json_t *d = ts_ap_desired_job("n1", running_id);
    assert_non_null(d); /* n1's agent is still told to run it */
    assert_string_equal(ts_it_str(d, "action"), "run");
    json_decref(d);
}

static void an_agent_token_cannot_write_another_nodes_job_output(void **state)
{
    /* "Zm9yZ2Vk" is "forged" */
    refused(tok_n2, "POST", "/api/v1/nodes/n1/logs",
            "{\"chunks\": [{\"id\": 1, \"attempt\": 1, \"offset\": 0, \"data\": \"Zm9yZ2Vk\"}]}");
    assert_string_equal(sql1("SELECT count(*) FROM job_log"), "0");
    assert_string_equal(sql1("SELECT log_bytes FROM job WHERE id = 1"), "0");
}

static void an_agent_token_cannot_register_as_another_node(void **state)
{
    char body[1024];
    snprintf(body, sizeof(body), GPUS_2, "n1", "n1-forged");
    refused(tok_n2, "PUT", "/api/v1/nodes/n1", body);
    refused(tok_n2, "PUT", "/api/v1/nodes/n3", body);
    assert_string_equal(sql1("SELECT count(*) FROM gpu g JOIN node n ON n.id = g.node_id"
                             " WHERE n.name = 'n1' AND g.uuid LIKE '%forged%'"),
                        "0");
    assert_string_equal(sql1("SELECT count(*) FROM node WHERE name = 'n3'"), "0");
}

static void a_pattern_token_acts_for_matching_nodes_only(void **state)
{
    char body[1024];
    struct ts_response r;
    snprintf(body, sizeof(body), GPUS_2, "gpu-7", "gpu-7");
    assert_int_equal(call(tok_fleet, "PUT", "/api/v1/nodes/gpu-7", body, &r), 200);
    ts_response_free(&r);
    assert_int_equal(call(tok_fleet, "POST", "/api/v1/nodes/gpu-7/drain", NULL, &r), 403);
    ts_response_free(&r);
    assert_int_equal(call(TS_IT_ADMIN_TOKEN, "POST", "/api/v1/nodes/gpu-7/drain", NULL, &r), 200);
    ts_response_free(&r);
    snprintf(body, sizeof(body), GPUS_2, "cpu-1", "cpu-1");
    refused(tok_fleet, "PUT", "/api/v1/nodes/cpu-1", body);
    refused(tok_fleet, "PUT", "/api/v1/nodes/gpu", body); /* the prefix is "gpu-" */
    /* a bound agent lists only its nodes */
    struct ts_client *c = ts_it_client(&srv, tok_n1);
    json_t *v = ts_ap_get_json(c, "/api/v1/nodes", 200);
    ts_client_free(c);
    json_t *nodes = json_object_get(v, "nodes");
    assert_int_equal(json_array_size(nodes), 1);
    assert_string_equal(ts_it_str(json_array_get(nodes, 0), "name"), "n1");
    json_decref(v);
}

static void tokens_name_nodes_only_for_agents_and_say_which(void **state)
{
    struct ts_response r;
    assert_int_equal(call(TS_IT_ADMIN_TOKEN, "POST", "/api/v1/tokens",
                          "{\"name\": \"m\", \"role\": \"member\", \"nodes\": [\"n1\"]}", &r),
                     422);
    assert_string_equal(ts_it_str(r.json, "field"), "nodes");
    ts_response_free(&r);
    assert_int_equal(call(TS_IT_ADMIN_TOKEN, "POST", "/api/v1/tokens",
                          "{\"name\": \"a\", \"role\": \"agent\", \"nodes\": [\"g*u\"]}", &r),
                     422);
    ts_response_free(&r);
    json_t *v = ts_ap_get_json(srv.admin, "/api/v1/tokens", 200);
    json_t *t;
    size_t i;
    int seen = 0;
    json_array_foreach(json_object_get(v, "tokens"), i, t) {
        if (strcmp(ts_it_str(t, "name"), "agent-fleet") == 0) {
            assert_string_equal(json_string_value(json_array_get(json_object_get(t, "nodes"), 0)),
                                "gpu-*");
            seen++;
        }
        if (strcmp(ts_it_str(t, "name"), "agent-1") == 0) { /* any node */
            assert_int_equal(json_array_size(json_object_get(t, "nodes")), 0);
            seen++;
        }
    }
    assert_int_equal(seen, 2);
    json_decref(v);
}

/* ---- the hostile member ------------------------------------------------------------------ */

static void a_project_limited_member_sees_no_other_project_in_metrics(void **state)
{
    /* wait for the sampler to have the projects' gauges */
    char *all = get_body_with(TS_IT_ADMIN_TOKEN, "/metrics",
                              "tessera_project_quota_gpus{project=\"owner\"}");
    assert_non_null(strstr(all, "tessera_project_quota_gpus{project=\"owner\"}"));
    assert_non_null(strstr(all, "tessera_jobs{project=\"owner\""));
    free(all);
    char *mine = get_body(tok_member, "/metrics");
    assert_null(strstr(mine, "project=\"owner\""));
    assert_non_null(strstr(mine, "tessera_project_quota_gpus{project=\"borrower\"}"));
    assert_non_null(strstr(mine, "tessera_cluster_running_jobs ")); /* counts stay */
    free(mine);
}

static void a_project_limited_member_sees_other_projects_jobs_on_nodes_as_counts(void **state)
{
    char id[32];
    snprintf(id, sizeof(id), "[%lld]", running_id);
    json_t *n = ts_ap_get_json(srv.admin, "/api/v1/nodes/n1", 200);
    char *s = json_dumps(n, JSON_COMPACT);
    assert_non_null(strstr(s, id));
    free(s);
    json_decref(n);

    struct ts_client *c = ts_it_client(&srv, tok_member);
    const char *paths[] = {"/api/v1/nodes", "/api/v1/nodes/n1"};
    for (size_t p = 0; p < 2; p++) {
        json_t *v = ts_ap_get_json(c, paths[p], 200);
        json_t *list = json_object_get(v, "nodes");
        json_t *one = list == NULL ? json_pack("[O]", v) : NULL; /* GET of one node */
        size_t i;
        long long hidden = 0, ids = 0;
        json_t *it, *g;
        size_t k;
        json_array_foreach(list ? list : one, i, it) {
            json_array_foreach(json_object_get(it, "gpus"), k, g) {
                hidden += ts_it_int(g, "hidden_jobs");
                ids += (long long)json_array_size(json_object_get(g, "jobs"));
            }
        }
        assert_int_equal(ids, 0);
        assert_int_equal(hidden, 1);
        json_decref(one);
        json_decref(v);
    }
    ts_client_free(c);
}

static void a_project_limited_member_sees_only_its_projects_in_the_queue(void **state)
{
    char id[32];
    snprintf(id, sizeof(id), "\"id\":%lld", pending_id);
    char *all = get_body(TS_IT_ADMIN_TOKEN, "/api/v1/queue");
    assert_non_null(strstr(all, id));
    free(all);
    char *mine = get_body(tok_member, "/api/v1/queue");
    assert_null(strstr(mine, "owner"));
    assert_null(strstr(mine, id));
    free(mine);
    refused(tok_member, "GET", "/api/v1/queue?project=owner", NULL);
}

static void a_project_limited_member_sees_only_its_projects_series(void **state)
{
    /* wait for the series sampler to have stored the projects' points (the
     * gauges the test above waits for are in memory; the points are
     * written at the sampler's next tick, which a loaded machine delays) */
    char *all = get_body_with(TS_IT_ADMIN_TOKEN, "/api/v1/metrics/query?metric=capacity&by=project",
                              "\"owner\"");
    assert_non_null(strstr(all, "\"owner\""));
    free(all);
    char *mine = get_body(tok_member, "/api/v1/metrics/query?metric=capacity&by=project");
    assert_null(strstr(mine, "owner"));
    assert_non_null(strstr(mine, "\"borrower\""));
    free(mine);
    refused(tok_member, "GET", "/api/v1/metrics/query?metric=capacity&by=project&key=owner", NULL);
}

/* ---- env values ---------------------------------------------------------------------------- */

static void a_viewer_sees_env_names_without_values(void **state)
{
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", running_id);
    const char *readers[] = {path, "/api/v1/jobs", "/api/v1/queue"};
    for (size_t i = 0; i < 3; i++) {
        char *s = get_body(tok_viewer, readers[i]);
        if (strstr(s, SECRET) != NULL)
            fail_msg("a viewer reads the env values in %s: %s", readers[i], s);
        assert_non_null(strstr(s, "\"API_KEY\":null"));
        assert_non_null(strstr(s, "\"env_redacted\":true"));
        free(s);
    }
    /* admins and the project's own readers see the values */
    char *s = get_body(TS_IT_ADMIN_TOKEN, path);
    assert_non_null(strstr(s, SECRET));
    assert_null(strstr(s, "env_redacted"));
    free(s);
    s = get_body(tok_owner_viewer, path);
    assert_non_null(strstr(s, SECRET));
    free(s);
}

/* ---- scheduler messages ---------------------------------------------------------------- */

static void another_projects_name_in_a_scheduler_message_is_hidden(void **state)
{
    /* owner fills the free GPUs beyond its quota of 2; "third", within its
     * quota, reclaims one: the victim's event names both projects */
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"third\", \"department\": \"research\", \"quota\": {\"gpus\": 2}}",
                  201);
    long long fill[3];
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof(name), "fill-%d", i);
        fill[i] = ts_ap_submit("owner", name, "\"gpu\": {\"count\": 1}");
        json_decref(ts_ap_wait_state(fill[i], "scheduled", 10));
    }
    ts_ap_submit("third", "reclaimer", "\"gpu\": {\"count\": 1}");
    long long victim = 0;
    char path[96], *all = NULL;
    for (int t = 0; t < 100 && victim == 0; t++) {
        long long ids[] = {running_id, fill[0], fill[1], fill[2]};
        for (int i = 0; i < 4 && victim == 0; i++) {
            snprintf(path, sizeof(path), "/api/v1/jobs/%lld/events", ids[i]);
            free(all);
            all = get_body(TS_IT_ADMIN_TOKEN, path);
            if (strstr(all, "project \\\"third\\\"") != NULL)
                victim = ids[i];
        }
        if (victim == 0)
            usleep(100 * 1000);
    }
    if (victim == 0)
        fail_msg("no job of owner was reclaimed by third: %s", all);
    free(all);
    char *mine = get_body(tok_owner_viewer, path);
    assert_null(strstr(mine, "third"));
    assert_non_null(strstr(mine, "another project"));
    assert_non_null(strstr(mine, "project \\\"owner\\\"")); /* its own project keeps its name */
    free(mine);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_agent_token_reads_only_its_own_nodes_desired_state),
        cmocka_unit_test(an_agent_token_cannot_forge_another_nodes_report),
        cmocka_unit_test(an_agent_token_cannot_write_another_nodes_job_output),
        cmocka_unit_test(an_agent_token_cannot_register_as_another_node),
        cmocka_unit_test(a_pattern_token_acts_for_matching_nodes_only),
        cmocka_unit_test(tokens_name_nodes_only_for_agents_and_say_which),
        cmocka_unit_test(a_project_limited_member_sees_no_other_project_in_metrics),
        cmocka_unit_test(a_project_limited_member_sees_other_projects_jobs_on_nodes_as_counts),
        cmocka_unit_test(a_project_limited_member_sees_only_its_projects_in_the_queue),
        cmocka_unit_test(a_project_limited_member_sees_only_its_projects_series),
        cmocka_unit_test(a_viewer_sees_env_names_without_values),
        cmocka_unit_test(another_projects_name_in_a_scheduler_message_is_hidden),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
