/*
 * test_pending_limit.c - a project's max_pending (issue 14) against a real
 * server, and the count it is checked against:
 *
 * - 8 clients submit 80 jobs at once to a project with max_pending 20:
 *   exactly 20 are taken, every other answer is 429 with Retry-After, and
 *   20 jobs are pending: two submissions never take the last place both;
 * - under mixed load (submissions to two projects, cancels, the scheduler
 *   binding, an agent reporting jobs running, ended, or ended by eviction
 *   and so back in the queue) the kept count (project.pending_jobs plus its
 *   unfolded deltas) equals count(*) of each project's pending jobs, and
 *   once the scheduler has folded the deltas pending_jobs alone does.
 *
 * One server for the program (agentplay.c), node n1 with 2 GPUs.
 */
#include <pthread.h>
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

static int setup(void **state)
{
    (void)state;
    if (ts_ap_start(&srv, NULL) != 0)
        return -1;
    ts_ap_register_node("n1", 2, "");
    return 0;
}

/* ---- exactly max_pending taken by concurrent submissions ---------------------- */

struct burst {
    int id, taken, refused, other, retry_after;
};

static void *burst_run(void *arg)
{
    struct burst *b = arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    for (int i = 0; i < 10; i++) {
        char body[256];
        /* 4 GPUs: never placed on a node of 2, so every job stays pending */
        snprintf(body, sizeof(body),
                 "{\"name\": \"b%d-%d\", \"project\": \"capped\", \"command\": [\"true\"],"
                 " \"gpu\": {\"count\": 4}}",
                 b->id, i);
        struct ts_response r;
        long st = ts_it_req(c, "POST", "/api/v1/jobs", body, NULL, &r);
        if (st == 201)
            b->taken++;
        else if (st == 429)
            b->refused++;
        else
            b->other++;
        if (st == 429 && r.headers.data && strstr(r.headers.data, "Retry-After: 30"))
            b->retry_after++;
        ts_response_free(&r);
    }
    ts_client_free(c);
    return NULL;
}

static void concurrent_submissions_never_take_a_project_past_max_pending(void **state)
{
    (void)state;
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"capped\", \"department\": \"research\","
                  " \"quota\": {\"max_pending\": 20}}",
                  201);
    pthread_t t[8];
    struct burst b[8];
    for (int i = 0; i < 8; i++) {
        b[i] = (struct burst){.id = i};
        pthread_create(&t[i], NULL, burst_run, &b[i]);
    }
    int taken = 0, refused = 0, other = 0, retry = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        taken += b[i].taken, refused += b[i].refused, other += b[i].other;
        retry += b[i].retry_after;
    }
    assert_int_equal(other, 0);
    assert_int_equal(taken, 20);
    assert_int_equal(refused, 60);
    assert_int_equal(retry, 60);
    assert_int_equal(
        ts_ap_sql_int("SELECT count(*) FROM job j JOIN project p ON p.id = j.project_id"
                      " WHERE p.name = 'capped'"),
        20);
    json_t *p = ts_ap_get_json(srv.admin, "/api/v1/projects/capped", 200);
    assert_int_equal(ts_it_int(json_object_get(p, "status"), "pending_jobs"), 20);
    assert_int_equal(ts_it_int(json_object_get(p, "quota"), "max_pending"), 20);
    json_decref(p);
}

/* ---- the kept count under mixed load ------------------------------------------- */

static volatile int stop_load;

struct submitter {
    int id, taken;
};

static void *submit_run(void *arg)
{
    struct submitter *s = arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    for (int i = 0; !stop_load; i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"name\": \"m%d-%d\", \"project\": \"%s\", \"command\": [\"true\"],"
                 " \"gpu\": {\"portion\": 0.25}}",
                 s->id, i, i % 2 ? "owner" : "borrower");
        s->taken += ts_it_req(c, "POST", "/api/v1/jobs", body, NULL, NULL) == 201;
    }
    ts_client_free(c);
    return NULL;
}

/* Cancels a job now and then: pending ones (-1) and placed ones. */
static void *cancel_run(void *arg)
{
    (void)arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    unsigned seed = 7;
    while (!stop_load) {
        char path[64], buf[32];
        ts_it_sql(&srv, "SELECT coalesce(max(id), 0) FROM job", buf, sizeof(buf));
        long long max = atoll(buf);
        if (max > 0) {
            snprintf(path, sizeof(path), "/api/v1/jobs/%lld", 1 + (long long)(rand_r(&seed) % max));
            ts_it_req(c, "DELETE", path, NULL, NULL, NULL);
        }
        usleep(20 * 1000);
    }
    ts_client_free(c);
    return NULL;
}

/* Plays n1's agent: a job to run is reported running, then ended (0), or
 * ended by eviction (back to the queue); one to stop is reported ended. */
static void *agent_run(void *arg)
{
    (void)arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    unsigned seed = 11;
    while (!stop_load) {
        struct ts_response r;
        if (ts_it_req(c, "GET", "/api/v1/nodes/n1/desired", NULL, NULL, &r) != 200) {
            ts_response_free(&r);
            continue;
        }
        char *rep = malloc(65536);
        size_t len = (size_t)snprintf(rep, 65536, "{\"jobs\": [");
        size_t i;
        json_t *j;
        json_array_foreach(json_object_get(r.json, "jobs"), i, j) {
            if (len > 65000)
                break;
            long long id = ts_it_int(j, "id"), attempt = ts_it_int(j, "attempt");
            const char *action = ts_it_str(j, "action");
            const char *what;
            int dice = (int)(rand_r(&seed) % 3);
            if (strcmp(action, "run") != 0)
                what = "\"state\": \"exited\", \"exit_code\": 0";
            else if (dice == 0)
                what = "\"state\": \"running\", \"pid\": 4242";
            else if (dice == 1)
                what = "\"state\": \"exited\", \"exit_code\": 0";
            else
                what = "\"state\": \"exited\", \"signal\": 9, \"evicted\": true";
            len +=
                (size_t)snprintf(rep + len, 65536 - len, "%s{\"id\": %lld, \"attempt\": %lld, %s}",
                                 len > 10 ? ", " : "", id, attempt, what);
        }
        snprintf(rep + len, 65536 - len, "]}");
        ts_response_free(&r);
        ts_it_req(c, "POST", "/api/v1/nodes/n1/report", rep, NULL, NULL);
        free(rep);
        usleep(30 * 1000);
    }
    ts_client_free(c);
    return NULL;
}

static void the_kept_pending_count_equals_count_star_after_mixed_load(void **state)
{
    (void)state;
    long long before_requeues =
        ts_ap_sql_int("SELECT count(*) FROM job_event WHERE type = 'requeued'");
    stop_load = 0;
    pthread_t subs[3], canceller, agent;
    struct submitter s[3];
    for (int i = 0; i < 3; i++) {
        s[i] = (struct submitter){.id = i};
        pthread_create(&subs[i], NULL, submit_run, &s[i]);
    }
    pthread_create(&canceller, NULL, cancel_run, NULL);
    pthread_create(&agent, NULL, agent_run, NULL);
    sleep(8);
    stop_load = 1;
    int taken = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(subs[i], NULL);
        taken += s[i].taken;
    }
    pthread_join(canceller, NULL);
    pthread_join(agent, NULL);
    /* the load did what it was meant to: submissions, binds, requeues, cancels */
    assert_true(taken > 20);
    assert_true(ts_ap_sql_int("SELECT count(*) FROM job_event WHERE type = 'requeued'") >
                before_requeues);
    assert_true(ts_ap_sql_int("SELECT count(*) FROM job WHERE state = 'cancelled'") > 0);
    assert_true(ts_ap_sql_int("SELECT count(*) FROM job WHERE attempt > 0") > 0);
    const char *projects[] = {"owner", "borrower"};
    char kept[256], counted[256];
    for (int i = 0; i < 2; i++) {
        snprintf(kept, sizeof(kept),
                 "SELECT p.pending_jobs + coalesce((SELECT sum(delta) FROM project_pending_delta d"
                 " WHERE d.project_id = p.id), 0) FROM project p WHERE p.name = '%s'",
                 projects[i]);
        snprintf(counted, sizeof(counted),
                 "SELECT count(*) FROM job j JOIN project p ON p.id = j.project_id"
                 " WHERE p.name = '%s' AND j.state = 'pending'",
                 projects[i]);
        long long k = ts_ap_sql_int(kept), n = ts_ap_sql_int(counted);
        fprintf(stderr, "project %s: kept %lld, count(*) %lld\n", projects[i], k, n);
        assert_int_equal(k, n);
    }
    /* a change wakes a cycle, whose write folds every delta */
    ts_ap_submit("owner", "wake", "\"gpu\": {\"count\": 4}");
    double end = ts_ap_now_s() + 10;
    while (ts_ap_sql_int("SELECT count(*) FROM project_pending_delta") > 0 && ts_ap_now_s() < end)
        usleep(100 * 1000);
    assert_int_equal(ts_ap_sql_int("SELECT count(*) FROM project_pending_delta"), 0);
    for (int i = 0; i < 2; i++) {
        snprintf(kept, sizeof(kept), "SELECT pending_jobs FROM project WHERE name = '%s'",
                 projects[i]);
        snprintf(counted, sizeof(counted),
                 "SELECT count(*) FROM job j JOIN project p ON p.id = j.project_id"
                 " WHERE p.name = '%s' AND j.state = 'pending'",
                 projects[i]);
        assert_int_equal(ts_ap_sql_int(kept), ts_ap_sql_int(counted));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(concurrent_submissions_never_take_a_project_past_max_pending),
        cmocka_unit_test(the_kept_pending_count_equals_count_star_after_mixed_load),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
