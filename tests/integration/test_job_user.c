/*
 * test_job_user.c - a project's job user (issue 14) against a real server:
 *
 * - an admin sets quota.job_user; GET shows it, the audit log records it,
 *   and the desired state of a node running the project's job carries it
 *   (the agent enforces it: tests/agent/sandbox_test.c);
 * - "root" is refused (422, nothing written) unless allow_root comes with
 *   it; a malformed name is refused likewise;
 * - a member of the project cannot set it (403, nothing written);
 * - a PUT without job_user gives the project back the agent's user.
 *
 * One server for the program (agentplay.c), node n1 with 2 GPUs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/array.h"
#include "tests/integration/agentplay.h"
#include "tests/integration/harness.h"

static struct ts_it_server srv;
static const char *const if_any[] = {"If-Match: *", NULL};

static int setup(void **state)
{
    (void)state;
    if (ts_ap_start(&srv, NULL) != 0)
        return -1;
    ts_ap_register_node("n1", 2, "");
    return 0;
}

static json_t *project_quota(const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/projects/%s", name);
    json_t *p = ts_ap_get_json(srv.admin, path, 200);
    json_t *q = json_incref(json_object_get(p, "quota"));
    json_decref(p);
    return q;
}

static long put_quota(struct ts_client *c, const char *project, const char *body,
                      struct ts_response *out)
{
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/projects/%s/quota", project);
    return ts_it_req(c, "PUT", path, body, if_any, out);
}

static void an_admin_sets_the_job_user_and_the_node_is_told(void **state)
{
    (void)state;
    json_t *q = project_quota("owner");
    assert_true(json_is_null(json_object_get(q, "job_user"))); /* default: the agent's */
    assert_true(json_is_false(json_object_get(q, "allow_root")));
    json_decref(q);

    assert_int_equal(put_quota(srv.admin, "owner", "{\"gpus\": 2, \"job_user\": \"daemon\"}", NULL),
                     200);
    q = project_quota("owner");
    assert_string_equal(ts_it_str(q, "job_user"), "daemon");
    json_decref(q);

    json_t *l = ts_ap_get_json(srv.admin, "/api/v1/audit?limit=1", 200);
    const json_t *e = json_array_get(json_object_get(l, "events"), 0);
    assert_string_equal(ts_it_str(e, "path"), "/api/v1/projects/owner/quota");
    assert_string_equal(ts_it_str(json_object_get(e, "changes"), "job_user"), "daemon");
    json_decref(l);

    long long id = ts_ap_submit("owner", "as-daemon", "");
    json_decref(ts_ap_wait_state(id, "scheduled", 20));
    json_t *d = ts_ap_desired_job("n1", id);
    assert_non_null(d);
    assert_string_equal(ts_it_str(d, "job_user"), "daemon");
    assert_true(json_is_false(json_object_get(d, "allow_root")));
    json_decref(d);
    /* a job of a project without one: null, the agent's --job-user */
    long long other = ts_ap_submit("borrower", "as-agent-user", "");
    json_decref(ts_ap_wait_state(other, "scheduled", 20));
    d = ts_ap_desired_job("n1", other);
    assert_non_null(d);
    assert_true(json_is_null(json_object_get(d, "job_user")));
    json_decref(d);
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    ts_it_req(srv.admin, "DELETE", path, NULL, NULL, NULL);
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", other);
    ts_it_req(srv.admin, "DELETE", path, NULL, NULL, NULL);
}

static void root_needs_allow_root_and_bad_names_are_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{\"job_user\": \"root\"}",                        /* root, not allowed */
        "{\"job_user\": \"root\", \"allow_root\": false}", /* likewise */
        "{\"job_user\": \"Root\"}",                        /* not a user name */
        "{\"job_user\": \"a b\"}",
        "{\"job_user\": \"../etc\"}",
        "{\"job_user\": \"\"}",
        "{\"job_user\": \"abcdefghijklmnopqrstuvwxyz0123456\"}", /* 33 characters */
        "{\"job_user\": 0}",
        "{\"allow_root\": \"yes\"}",
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        json_t *was = project_quota("borrower");
        struct ts_response r;
        long st = put_quota(srv.admin, "borrower", bad[i], &r);
        if (st != 422 && st != 400)
            fail_msg("%s: status %ld", bad[i], st);
        if (strstr(r.body.data, "job_user") == NULL && strstr(r.body.data, "allow_root") == NULL)
            fail_msg("%s: %s", bad[i], r.body.data);
        ts_response_free(&r);
        /* nothing written (the heartbeats write the node's row meanwhile) */
        json_t *is = project_quota("borrower");
        assert_true(json_equal(was, is));
        json_decref(was);
        json_decref(is);
    }
    struct ts_response r;
    assert_int_equal(put_quota(srv.admin, "borrower", "{\"job_user\": \"root\"}", &r), 422);
    assert_non_null(strstr(r.body.data, "allow_root"));
    ts_response_free(&r);

    /* with allow_root, root is an admin's explicit choice for this project */
    assert_int_equal(
        put_quota(srv.admin, "borrower", "{\"job_user\": \"root\", \"allow_root\": true}", NULL),
        200);
    json_t *q = project_quota("borrower");
    assert_string_equal(ts_it_str(q, "job_user"), "root");
    assert_true(json_is_true(json_object_get(q, "allow_root")));
    json_decref(q);
    /* a PUT without them: the agent's user again, root withdrawn */
    assert_int_equal(put_quota(srv.admin, "borrower", "{}", NULL), 200);
    q = project_quota("borrower");
    assert_true(json_is_null(json_object_get(q, "job_user")));
    assert_true(json_is_false(json_object_get(q, "allow_root")));
    json_decref(q);
    /* the database refuses root without allow_root too */
    char buf[64];
    assert_int_not_equal(ts_it_sql(&srv,
                                   "UPDATE project SET job_user = 'root' WHERE name = 'borrower'",
                                   buf, sizeof(buf)),
                         0);
}

static void a_member_cannot_set_the_job_user(void **state)
{
    (void)state;
    const char *tok = ts_it_token(&srv, "member-of-owner", "member", "[\"owner\"]");
    struct ts_client *m = ts_it_client(&srv, tok);
    assert_int_equal(put_quota(m, "owner", "{\"job_user\": \"root\", \"allow_root\": true}", NULL),
                     403);
    assert_int_equal(ts_it_req(m, "POST", "/api/v1/projects",
                               "{\"name\": \"mine\", \"department\": \"research\","
                               " \"quota\": {\"job_user\": \"root\", \"allow_root\": true}}",
                               NULL, NULL),
                     403);
    /* nothing written (the token's own last use aside) */
    json_t *q = project_quota("owner");
    assert_string_equal(ts_it_str(q, "job_user"), "daemon"); /* as the first case set it */
    assert_true(json_is_false(json_object_get(q, "allow_root")));
    json_decref(q);
    assert_int_equal(ts_it_req(srv.admin, "GET", "/api/v1/projects/mine", NULL, NULL, NULL), 404);
    ts_client_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_admin_sets_the_job_user_and_the_node_is_told),
        cmocka_unit_test(root_needs_allow_root_and_bad_names_are_refused),
        cmocka_unit_test(a_member_cannot_set_the_job_user),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
