/*
 * test_audit.c - admin writes are recorded with who, when and what, in the
 * transaction of the write (issue 14), against a real server:
 *
 * - a project create, a token create (its secret nowhere in /audit), a
 *   revoke, a drain: each one event naming the token, its role, the
 *   method, path, target, body members and status;
 * - a write refused (422, 412) leaves no event; a write whose event cannot
 *   be written is not kept (500, the department does not exist);
 * - members and viewers get 403; since, actor, limit and the cursor.
 *
 * One server for the program (agentplay.c, for node n1).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/audit.h"
#include "tests/integration/agentplay.h"
#include "tests/integration/harness.h"

static struct ts_it_server srv;
static char admin_name[128];

static int setup(void **state)
{
    (void)state;
    if (ts_ap_start(&srv, NULL) != 0)
        return -1;
    json_t *me = ts_ap_get_json(srv.admin, "/api/v1/whoami", 200);
    snprintf(admin_name, sizeof(admin_name), "%s", ts_it_str(me, "name"));
    json_decref(me);
    return 0;
}

/* The newest event (new). */
static json_t *newest(void)
{
    json_t *l = ts_ap_get_json(srv.admin, "/api/v1/audit?limit=1", 200);
    json_t *e = json_incref(json_array_get(json_object_get(l, "events"), 0));
    json_decref(l);
    assert_non_null(e);
    return e;
}

static void assert_event(const json_t *e, const char *actor, const char *method, const char *path,
                         const char *target, long long status)
{
    const json_t *who = json_object_get(e, "actor");
    assert_string_equal(ts_it_str(who, "name"), actor);
    assert_true(ts_it_int(who, "token_id") > 0);
    assert_string_equal(ts_it_str(e, "method"), method);
    assert_string_equal(ts_it_str(e, "path"), path);
    assert_string_equal(ts_it_str(e, "target"), target);
    assert_int_equal(ts_it_int(e, "status"), status);
    assert_true(strlen(ts_it_str(e, "at")) >= 20);
    assert_true(strlen(ts_it_str(e, "request_id")) > 0);
}

static void admin_writes_are_recorded_with_actor_target_and_fields(void **state)
{
    (void)state;
    json_t *p = ts_ap_call(srv.admin, "POST", "/api/v1/projects",
                           "{\"name\": \"audited\", \"department\": \"research\","
                           " \"quota\": {\"gpus\": 1.5, \"max_pending\": 7}}",
                           201);
    char id[32];
    snprintf(id, sizeof(id), "%lld", ts_it_int(p, "id"));
    json_decref(p);
    json_t *e = newest();
    assert_event(e, admin_name, "POST", "/api/v1/projects", id, 201);
    assert_string_equal(ts_it_str(json_object_get(e, "actor"), "role"), "admin");
    const json_t *ch = json_object_get(e, "changes");
    assert_string_equal(ts_it_str(ch, "name"), "audited");
    assert_string_equal(ts_it_str(ch, "department"), "research");
    assert_int_equal(ts_it_int(json_object_get(ch, "quota"), "max_pending"), 7);
    json_decref(e);

    /* a quota change names the project */
    ts_ap_call_ok(srv.admin, "PUT", "/api/v1/projects/audited/quota", "{\"gpus\": 2}", 428);
    const char *ifm[] = {"If-Match: *", NULL};
    assert_int_equal(
        ts_it_req(srv.admin, "PUT", "/api/v1/projects/audited/quota", "{\"gpus\": 2}", ifm, NULL),
        200);
    e = newest();
    assert_event(e, admin_name, "PUT", "/api/v1/projects/audited/quota", "audited", 200);
    assert_true(json_number_value(json_object_get(json_object_get(e, "changes"), "gpus")) == 2);
    json_decref(e);
}

static void a_token_create_is_recorded_without_its_secret(void **state)
{
    (void)state;
    json_t *t = ts_ap_call(srv.admin, "POST", "/api/v1/tokens",
                           "{\"name\": \"aud-member\", \"role\": \"member\","
                           " \"projects\": [\"audited\"]}",
                           201);
    char secret[128], id[32];
    snprintf(secret, sizeof(secret), "%s", ts_it_str(t, "token"));
    snprintf(id, sizeof(id), "%lld", ts_it_int(t, "id"));
    json_decref(t);
    assert_true(strlen(secret) > 20);
    json_t *e = newest();
    assert_event(e, admin_name, "POST", "/api/v1/tokens", id, 201);
    const json_t *ch = json_object_get(e, "changes");
    assert_string_equal(ts_it_str(ch, "role"), "member");
    assert_string_equal(ts_it_str(ch, "name"), "aud-member");
    assert_null(json_object_get(ch, "token"));
    json_decref(e);
    struct ts_response r;
    assert_int_equal(ts_it_req(srv.admin, "GET", "/api/v1/audit?limit=1000", NULL, NULL, &r), 200);
    assert_null(strstr(r.body.data, secret));
    assert_null(strstr(r.body.data, secret + 4)); /* not even without its prefix */
    ts_response_free(&r);
    char buf[512];
    ts_it_sql(&srv, "SELECT count(*) FROM audit_event WHERE changes::text LIKE '%tsk_%'", buf,
              sizeof(buf));
    assert_string_equal(buf, "0");

    /* the member may not read the log, nor may a viewer */
    struct ts_client *m = ts_it_client(&srv, secret);
    assert_int_equal(ts_it_req(m, "GET", "/api/v1/audit", NULL, NULL, NULL), 403);
    ts_client_free(m);
    char viewer[128];
    snprintf(viewer, sizeof(viewer), "%s", ts_it_token(&srv, "aud-viewer", "viewer", NULL));
    struct ts_client *v = ts_it_client(&srv, viewer);
    assert_int_equal(ts_it_req(v, "GET", "/api/v1/audit", NULL, NULL, NULL), 403);
    ts_client_free(v);

    /* a revoke names the token it revoked */
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/tokens/%s", id);
    assert_int_equal(ts_it_req(srv.admin, "DELETE", path, NULL, NULL, NULL), 204);
    e = newest();
    assert_event(e, admin_name, "DELETE", path, id, 204);
    assert_true(json_is_null(json_object_get(e, "changes")));
    json_decref(e);
}

static void a_drain_and_undrain_are_recorded(void **state)
{
    (void)state;
    ts_ap_register_node("n1", 1, "");
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/nodes/n1/drain", NULL, 200);
    json_t *e = newest();
    assert_event(e, admin_name, "POST", "/api/v1/nodes/n1/drain", "n1", 200);
    json_decref(e);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/nodes/n1/undrain", NULL, 200);
    e = newest();
    assert_event(e, admin_name, "POST", "/api/v1/nodes/n1/undrain", "n1", 200);
    json_decref(e);
}

static void a_refused_write_leaves_no_event(void **state)
{
    (void)state;
    long long before = ts_ap_sql_int("SELECT count(*) FROM audit_event");
    long long last = ts_ap_sql_int("SELECT max(id) FROM audit_event");
    /* 422: no such department; 409: taken; 412: stale ETag; 404 */
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"ghost\", \"department\": \"nowhere\"}", 422);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"audited\", \"department\": \"research\"}", 409);
    const char *stale[] = {"If-Match: \"99\"", NULL};
    assert_int_equal(
        ts_it_req(srv.admin, "PUT", "/api/v1/projects/audited/quota", "{\"gpus\": 3}", stale, NULL),
        412);
    ts_ap_call_ok(srv.admin, "DELETE", "/api/v1/departments/nowhere", NULL, 404);
    assert_int_equal(ts_ap_sql_int("SELECT count(*) FROM audit_event"), before);
    json_t *e = newest();
    assert_int_equal(ts_it_int(e, "id"), last);
    json_decref(e);
}

static void a_write_whose_event_cannot_be_written_is_not_kept(void **state)
{
    (void)state;
    /* every insert into audit_event now fails: the write must go with it */
    char buf[64];
    assert_int_equal(ts_it_sql(&srv,
                               "ALTER TABLE audit_event ADD CONSTRAINT audit_event_refuse_check"
                               " CHECK (false) NOT VALID",
                               buf, sizeof(buf)),
                     0);
    struct ts_response r;
    long st =
        ts_it_req(srv.admin, "POST", "/api/v1/departments", "{\"name\": \"unrecorded\"}", NULL, &r);
    assert_int_equal(st, 500);
    assert_null(strstr(r.headers.data, "Location:"));
    ts_response_free(&r);
    assert_int_equal(ts_ap_sql_int("SELECT count(*) FROM department WHERE name = 'unrecorded'"), 0);
    assert_int_equal(ts_it_sql(&srv,
                               "ALTER TABLE audit_event DROP CONSTRAINT audit_event_refuse_check",
                               buf, sizeof(buf)),
                     0);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/departments", "{\"name\": \"unrecorded\"}", 201);
    json_t *e = newest();
    assert_string_equal(ts_it_str(json_object_get(e, "changes"), "name"), "unrecorded");
    json_decref(e);
}

static void audit_pages_and_filters(void **state)
{
    (void)state;
    char other[128];
    snprintf(other, sizeof(other), "%s", ts_it_token(&srv, "aud-admin2", "admin", NULL));
    struct ts_client *o = ts_it_client(&srv, other);
    assert_int_equal(
        ts_it_req(o, "POST", "/api/v1/departments", "{\"name\": \"by-other\"}", NULL, NULL), 201);
    ts_client_free(o);
    json_t *l = ts_ap_get_json(srv.admin, "/api/v1/audit?actor=aud-admin2", 200);
    assert_int_equal(json_array_size(json_object_get(l, "events")), 1);
    assert_string_equal(
        ts_it_str(json_object_get(json_array_get(json_object_get(l, "events"), 0), "actor"),
                  "name"),
        "aud-admin2");
    json_decref(l);
    l = ts_ap_get_json(srv.admin, "/api/v1/audit?since=2999-01-01T00:00:00Z", 200);
    assert_int_equal(json_array_size(json_object_get(l, "events")), 0);
    json_decref(l);
    l = ts_ap_get_json(srv.admin, "/api/v1/audit?since=1h", 200);
    long long total = (long long)json_array_size(json_object_get(l, "events"));
    json_decref(l);
    assert_int_equal(total, ts_ap_sql_int("SELECT count(*) FROM audit_event"));
    /* two at a time, newest first, every event once */
    char path[128] = "/api/v1/audit?limit=2";
    long long seen = 0, prev = 1LL << 62;
    for (;;) {
        l = ts_ap_get_json(srv.admin, path, 200);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(l, "events"), i, e) {
            assert_true(ts_it_int(e, "id") < prev);
            prev = ts_it_int(e, "id");
            seen++;
        }
        const char *next = json_string_value(json_object_get(l, "next_cursor"));
        if (next == NULL) {
            json_decref(l);
            break;
        }
        snprintf(path, sizeof(path), "/api/v1/audit?limit=2&cursor=%s", next);
        json_decref(l);
    }
    assert_int_equal(seen, total);
    ts_ap_call_ok(srv.admin, "GET", "/api/v1/audit?cursor=zz", NULL, 400);
    ts_ap_call_ok(srv.admin, "GET", "/api/v1/audit?limit=0", NULL, 400);
    ts_ap_call_ok(srv.admin, "GET", "/api/v1/audit?since=yesterday", NULL, 400);
}

static void changes_never_hold_secrets(void **state)
{
    (void)state;
    const char *body =
        "{\"name\": \"x\", \"token\": \"tsk_abc\", \"nested\": {\"secret\": \"s\","
        " \"password\": \"p\", \"env\": {\"KEY\": \"v4lue\"}}, \"list\": [{\"token\":"
        " \"t\"}]}";
    char *s = ts_audit_changes(body, strlen(body));
    assert_non_null(s);
    assert_null(strstr(s, "tsk_abc"));
    assert_null(strstr(s, "v4lue"));
    assert_null(strstr(s, "\"s\""));
    assert_null(strstr(s, "\"p\""));
    assert_null(strstr(s, "\"t\""));
    assert_non_null(strstr(s, "\"KEY\":null"));
    assert_non_null(strstr(s, "\"name\":\"x\""));
    free(s);
    assert_null(ts_audit_changes("not json", 8));
    assert_null(ts_audit_changes(NULL, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(admin_writes_are_recorded_with_actor_target_and_fields),
        cmocka_unit_test(a_token_create_is_recorded_without_its_secret),
        cmocka_unit_test(a_drain_and_undrain_are_recorded),
        cmocka_unit_test(a_refused_write_leaves_no_event),
        cmocka_unit_test(a_write_whose_event_cannot_be_written_is_not_kept),
        cmocka_unit_test(audit_pages_and_filters),
        cmocka_unit_test(changes_never_hold_secrets),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
