/*
 * test_requested.c - what projects and departments request, as
 * GET /projects/{name} and /departments show it, with the test playing the
 * agents over HTTP against a real server and PostgreSQL: every request
 * counts (whole GPUs, portions, memory on one device or several), a placed
 * memory request as what it is allocated on its GPUs, a pending one as its
 * share of the largest usable GPU (memory less its node's reserve), as the
 * scheduler counts its demand. Requested is never below allocated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/agentplay.h"

#define GIB 1073741824LL

static struct ts_it_server srv;
static long long placed[4]; /* whole, half, mem-two, mem-small */

/* Register node name as its agent: gpus GPUs of mem_gib GiB each, a reserve
 * of reserve_gib GiB per GPU, labelled pool=<pool>. */
static void register_node(const char *name, int gpus, long long mem_gib, long long reserve_gib,
                          const char *pool)
{
    char body[2048], path[128];
    int len = snprintf(body, sizeof(body),
                       "{\"cpu\": 32, \"memory_bytes\": 274877906944, \"gpu_reserve_bytes\": %lld,"
                       " \"labels\": {\"pool\": \"%s\"}, \"gpus\": [",
                       reserve_gib * GIB, pool);
    for (int i = 0; i < gpus; i++)
        len += snprintf(body + len, sizeof(body) - (size_t)len,
                        "%s{\"index\": %d, \"uuid\": \"GPU-%s-%d\", \"model\": \"Sim H100\","
                        " \"memory_bytes\": %lld}",
                        i ? "," : "", i, name, i, mem_gib * GIB);
    snprintf(body + len, sizeof(body) - (size_t)len, "]}");
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
    ts_ap_call_ok(ts_ap_agent(), "PUT", path, body, 200);
    ts_ap_heartbeat(name, true);
}

/* A status figure of /projects/{name} or /departments/{name}. */
static double figure(const char *what, const char *name, const char *key)
{
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/%s/%s", what, name);
    json_t *o = ts_ap_get_json(srv.admin, path, 200);
    double v = json_number_value(json_object_get(json_object_get(o, "status"), key));
    json_decref(o);
    return v;
}

static void assert_requested(const char *what, const char *name, double want)
{
    double got = figure(what, name, "requested_gpus");
    if (got != want)
        fail_msg("%s %s requests %.17g GPUs, not %.17g", what, name, got, want);
}

/* Every project and department of the cluster: requested >= allocated. */
static void assert_requested_covers_allocated(void)
{
    static const char *const lists[] = {"projects", "departments"};
    for (size_t l = 0; l < 2; l++) {
        char path[64];
        snprintf(path, sizeof(path), "/api/v1/%s", lists[l]);
        json_t *all = ts_ap_get_json(srv.admin, path, 200), *o;
        size_t i;
        json_array_foreach(json_object_get(all, lists[l]), i, o) {
            const json_t *s = json_object_get(o, "status");
            double req = json_number_value(json_object_get(s, "requested_gpus"));
            double alloc = json_number_value(json_object_get(s, "allocated_gpus"));
            if (req < alloc)
                fail_msg("%s %s requests %.17g GPUs, less than its %.17g allocated", lists[l],
                         ts_it_str(o, "name"), req, alloc);
        }
        json_decref(all);
    }
}

/* Wait until the last scheduler cycle's deserved share of project name is
 * want (its quota covers its demand, so deserved is the demand). */
static void wait_deserved(const char *name, double want)
{
    double end = ts_ap_now_s() + 10, got;
    while ((got = figure("projects", name, "deserved_gpus")) != want) {
        if (ts_ap_now_s() > end)
            fail_msg("project %s deserves %.17g GPUs, not %.17g", name, got, want);
        usleep(100 * 1000);
    }
}

static int setup(void **state)
{
    (void)state;
    if (ts_ap_start(&srv, NULL) != 0)
        return -1;
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/departments",
                  "{\"name\": \"lab\", \"quota\": {\"gpus\": 8}}", 201);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"vision\", \"department\": \"lab\", \"quota\": {\"gpus\": 8}}", 201);
    ts_ap_call_ok(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"audio\", \"department\": \"lab\", \"quota\": {\"gpus\": 4}}", 201);
    return 0;
}

static void without_any_gpu_a_memory_request_counts_one_gpu_per_device(void **state)
{
    (void)state;
    /* no node matches pool=none: these stay pending all along */
    ts_ap_submit("audio", "fits-some",
                 "\"gpu\": {\"memory\": \"32GiB\"}, \"node_selector\": {\"pool\": \"none\"}");
    ts_ap_submit("audio", "too-big",
                 "\"gpu\": {\"memory\": \"100GiB\"}, \"node_selector\": {\"pool\": \"none\"}");
    assert_requested("projects", "audio", 2);
    assert_requested("departments", "lab", 2);
    assert_requested_covers_allocated();
}

static void every_request_counts_and_a_placed_memory_request_as_its_allocation(void **state)
{
    (void)state;
    /* usable: big 4 x 64 GiB, whole 1 x 64 GiB, small 1 x 32 GiB */
    register_node("big", 4, 80, 16, "big");
    register_node("whole", 1, 80, 16, "whole");
    register_node("small", 1, 32, 0, "small");
    placed[0] = ts_ap_submit("vision", "whole",
                             "\"gpu\": {\"count\": 1}, \"node_selector\": {\"pool\": \"whole\"}");
    placed[1] = ts_ap_submit("vision", "half",
                             "\"gpu\": {\"portion\": 0.5}, \"node_selector\": {\"pool\": \"big\"}");
    placed[2] = ts_ap_submit(
        "vision", "mem-two",
        "\"gpu\": {\"memory\": \"16GiB\", \"devices\": 2}, \"node_selector\": {\"pool\": \"big\"}");
    placed[3] =
        ts_ap_submit("vision", "mem-small",
                     "\"gpu\": {\"memory\": \"16GiB\"}, \"node_selector\": {\"pool\": \"small\"}");
    ts_ap_submit("vision", "mem-wait",
                 "\"gpu\": {\"memory\": \"48GiB\", \"devices\": 2}, \"node_selector\": {\"pool\": "
                 "\"none\"}");

    for (size_t i = 0; i < 4; i++) {
        json_t *j = ts_ap_wait_state(placed[i], "scheduled", 10);
        char rep[128];
        snprintf(rep, sizeof(rep), "{\"id\": %lld, \"attempt\": 1, \"state\": \"running\"}",
                 placed[i]);
        json_decref(ts_ap_report(ts_it_str(j, "node"), rep, "", 200));
        json_decref(j);
        json_decref(ts_ap_wait_state(placed[i], "running", 2));
    }
    /* allocated: whole 1, half 32/64, mem-two 2 x 16/64, mem-small 16/32 */
    assert_true(figure("projects", "vision", "allocated_gpus") == 2.5);
    /* requested: the same, plus mem-wait pending: 2 x 48/64 of the largest
     * GPU (64 GiB usable; mem-small counts 16/32 where it runs, not 16/64) */
    assert_requested("projects", "vision", 4);
    /* audio, pending: 32/64 and 100 GiB, more than any GPU: 1 */
    assert_requested("projects", "audio", 1.5);
    assert_requested("departments", "lab", 5.5);
    assert_true(figure("departments", "lab", "allocated_gpus") == 2.5);
    assert_requested_covers_allocated();
    /* the scheduler counts the same demand: with quotas and GPUs to spare
     * (6 GPUs), what each project deserves is what it requests */
    wait_deserved("vision", 4);
    wait_deserved("audio", 1.5);
}

static void a_larger_gpu_lowers_what_pending_memory_requests_count(void **state)
{
    (void)state;
    register_node("huge", 1, 144, 16, "huge"); /* 128 GiB usable */
    /* pending ones are shares of 128 GiB now; placed ones keep their GPUs */
    assert_requested("projects", "vision", 2.5 + 2 * 48.0 / 128);
    assert_requested("projects", "audio", 32.0 / 128 + 100.0 / 128);
    assert_requested("departments", "lab", 2.5 + 2 * 48.0 / 128 + 32.0 / 128 + 100.0 / 128);
    assert_requested_covers_allocated();
    wait_deserved("vision", 2.5 + 2 * 48.0 / 128);
    wait_deserved("audio", 32.0 / 128 + 100.0 / 128);
}

static void a_finished_job_requests_nothing_more(void **state)
{
    (void)state;
    char rep[128];
    snprintf(rep, sizeof(rep),
             "{\"id\": %lld, \"attempt\": 1, \"state\": \"exited\", \"exit_code\": 0}", placed[3]);
    json_decref(ts_ap_report("small", rep, "", 200));
    json_decref(ts_ap_wait_state(placed[3], "succeeded", 2));
    assert_requested("projects", "vision", 2 + 2 * 48.0 / 128);
    assert_true(figure("projects", "vision", "allocated_gpus") == 2);
    assert_requested_covers_allocated();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(without_any_gpu_a_memory_request_counts_one_gpu_per_device),
        cmocka_unit_test(every_request_counts_and_a_placed_memory_request_as_its_allocation),
        cmocka_unit_test(a_larger_gpu_lowers_what_pending_memory_requests_count),
        cmocka_unit_test(a_finished_job_requests_nothing_more),
    };
    return cmocka_run_group_tests(tests, setup, ts_ap_teardown);
}
