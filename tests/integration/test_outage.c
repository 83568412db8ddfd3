/*
 * test_outage.c - the embedded PostgreSQL dies under a running cluster (the
 * test plays the agent over HTTP): the server starts it again, and the time
 * nobody could record a report does not count as the nodes' silence. With
 * --node-lost-timeout shorter than the outage, the first sweeps after it
 * found the node lost and requeued its healthy running job, before its agent
 * (backing off, as a real one does) reported again.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/agentplay.h"

static struct ts_it_server srv;

static int setup(void **state)
{
    (void)state;
    static const char *const args[] = {"--node-timeout", "3s", "--node-lost-timeout", "5s", NULL};
    return ts_ap_start(&srv, args);
}

static pid_t postmaster(void)
{
    char path[400], line[32] = "";
    snprintf(path, sizeof(path), "%s/pg/data/postmaster.pid", srv.dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    if (fgets(line, sizeof(line), f) == NULL)
        line[0] = '\0';
    fclose(f);
    return (pid_t)atol(line);
}

/* method path body by client c: the answer's JSON once it is not 503,
 * within 10 s; its status must be want. Right after an outage a request may
 * meet a pooled connection the outage broke: it fails its next statement
 * once (statements are never retried, as one may have run) and is then
 * reset. */
static json_t *call_past_503(struct ts_client *c, const char *method, const char *path,
                             const char *body, long want)
{
    for (int i = 0; i < 100; i++) {
        struct ts_response r;
        long st = ts_it_req(c, method, path, body, NULL, &r);
        if (st != 503) {
            assert_int_equal(st, want);
            json_t *v = r.json;
            r.json = NULL;
            ts_response_free(&r);
            return v;
        }
        ts_response_free(&r);
        usleep(100 * 1000);
    }
    fail_msg("%s %s answered 503 for 10 s", method, path);
    return NULL;
}

static void an_outage_longer_than_the_node_lost_timeout_requeues_nothing(void **state)
{
    (void)state;
    ts_ap_register_node("o1", 1, "");
    long long id = ts_ap_submit("owner", "steady", "\"gpu\": {\"count\": 1}");
    json_decref(ts_ap_wait_state(id, "scheduled", 10));
    char rep[128];
    snprintf(rep, sizeof(rep), "{\"id\": %lld, \"attempt\": 1, \"state\": \"running\"}", id);
    json_decref(ts_ap_report("o1", rep, "", 200));
    json_decref(ts_ap_wait_state(id, "running", 5));

    pid_t pm = postmaster();
    assert_true(pm > 1);
    ts_ap_heartbeat("o1", false); /* its agent backs off while the server is away */
    double t0 = ts_ap_now_s();
    assert_int_equal(kill(pm, SIGKILL), 0);
    /* kept away 7 s at least: longer than --node-lost-timeout (5 s) */
    while (ts_ap_now_s() < t0 + 7) {
        pid_t now = postmaster();
        if (now > 1 && now != pm)
            kill(now, SIGKILL);
        usleep(50 * 1000);
    }
    /* back: the server started it again */
    long st = 0;
    for (int i = 0; i < 600 && st != 200; i++) {
        st = ts_it_req(srv.admin, "GET", "/api/v1/nodes/o1", NULL, NULL, NULL);
        if (st != 200)
            usleep(100 * 1000);
    }
    assert_int_equal(st, 200);
    fprintf(stderr, "the database was back %.1f s after the kill\n", ts_ap_now_s() - t0);
    /* the agent reports again 4 s later (less than --node-lost-timeout);
     * then several sweeps: the job runs on, the node was never lost */
    usleep(4000 * 1000);
    ts_ap_heartbeat("o1", true);
    char body[160];
    snprintf(body, sizeof(body), "{\"jobs\": [%s]}", rep);
    json_decref(call_past_503(ts_ap_agent(), "POST", "/api/v1/nodes/o1/report", body, 200));
    usleep(3000 * 1000);
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    json_t *j = call_past_503(srv.admin, "GET", path, NULL, 200);
    assert_string_equal(ts_it_str(j, "state"), "running");
    assert_int_equal(ts_it_int(j, "resume_count"), 0);
    json_decref(j);
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/events", id);
    json_t *ev = call_past_503(srv.admin, "GET", path, NULL, 200);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(ev, "events"), i, e)
        assert_string_not_equal(ts_it_str(e, "type"), "node_lost");
    json_decref(ev);
    json_t *n = call_past_503(srv.admin, "GET", "/api/v1/nodes/o1", NULL, 200);
    assert_string_equal(ts_it_str(n, "state"), "ready");
    json_decref(n);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_outage_longer_than_the_node_lost_timeout_requeues_nothing),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
