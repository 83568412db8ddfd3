/*
 * test_wire_agent.c - the agent protocol's codecs (api/wire_desired.c,
 * api/wire_agent.c, api/wire_agent_enc.c), which the server and the agent
 * both use: what one side encodes the other decodes to the same struct, and
 * every bad input is refused naming its path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/array.h"
#include "api/wire.h"

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    if (v == NULL)
        fail_msg("%s: %s", text, je.text);
    return v;
}

static void assert_str(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

static char *dump_sorted(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(s);
    return s;
}

/* ---- the desired state ------------------------------------------------------ */

static void assert_same_job(const struct ts_desired_job *a, const struct ts_desired_job *b)
{
    assert_int_equal(a->id, b->id);
    assert_int_equal(a->attempt, b->attempt);
    assert_int_equal(a->action, b->action);
    assert_str(a->name, b->name);
    assert_str(a->project, b->project);
    assert_str(a->kind, b->kind);
    assert_int_equal(a->priority, b->priority);
    assert_int_equal(a->swap, b->swap);
    assert_str(a->stop_reason, b->stop_reason);
    assert_int_equal(a->ncommand, b->ncommand);
    for (size_t i = 0; i < a->ncommand; i++)
        assert_string_equal(a->command[i], b->command[i]);
    assert_int_equal(a->nenv, b->nenv);
    for (size_t i = 0; i < a->nenv; i++) {
        assert_string_equal(a->env[i].name, b->env[i].name);
        assert_string_equal(a->env[i].value, b->env[i].value);
    }
    assert_str(a->working_dir, b->working_dir);
    assert_int_equal(a->ngpus, b->ngpus);
    for (size_t i = 0; i < a->ngpus; i++) {
        assert_int_equal(a->gpus[i].index, b->gpus[i].index);
        assert_int_equal(a->gpus[i].logical_index, b->gpus[i].logical_index);
        assert_str(a->gpus[i].uuid, b->gpus[i].uuid);
        assert_int_equal(a->gpus[i].memory_bytes, b->gpus[i].memory_bytes);
        assert_int_equal(a->gpus[i].memory_limit_bytes, b->gpus[i].memory_limit_bytes);
    }
    assert_true(a->cpu == b->cpu);
    assert_int_equal(a->memory_bytes, b->memory_bytes);
    assert_int_equal(a->grace_seconds, b->grace_seconds);
    assert_int_equal(a->max_runtime_seconds, b->max_runtime_seconds);
    assert_str(a->checkpoint_dir, b->checkpoint_dir);
    assert_int_equal(a->resume_count, b->resume_count);
    assert_int_equal(a->idle_swap_after_seconds, b->idle_swap_after_seconds);
    assert_str(a->job_user, b->job_user);
    assert_int_equal(a->allow_root, b->allow_root);
}

/* Two jobs as the server's store fills them: every member set. */
static void server_state(struct ts_desired *d, struct ts_arena *a)
{
    static const char *argv[] = {"python", "train.py", "--epochs=3", ""};
    static struct ts_desired_env env[] = {{"B", "2"}, {"A", "x=y"}};
    static struct ts_desired_gpu gpus[] = {
        {1, -1, "GPU-1", 20LL << 30, 40LL << 30},
        {0, -1, "GPU-0", 20LL << 30, 20LL << 30},
    };
    struct ts_desired_job *jobs = ts_arena_alloc(a, sizeof(*jobs) * 2);
    jobs[0] = (struct ts_desired_job){.id = 42,
                                      .attempt = 3,
                                      .action = TS_DESIRED_RUN,
                                      .name = "train-1",
                                      .project = "vision",
                                      .kind = "train",
                                      .priority = 50,
                                      .swap = false,
                                      .command = argv,
                                      .ncommand = 4,
                                      .env = env,
                                      .nenv = 2,
                                      .working_dir = "/work",
                                      .gpus = gpus,
                                      .ngpus = 2,
                                      .cpu = 2.5,
                                      .memory_bytes = 32LL << 30,
                                      .grace_seconds = 30,
                                      .max_runtime_seconds = 28800,
                                      .checkpoint_dir = "/ckpt/42",
                                      .resume_count = 2,
                                      .idle_swap_after_seconds = 600,
                                      .job_user = "alice",
                                      .allow_root = true};
    jobs[1] = (struct ts_desired_job){.id = 43,
                                      .attempt = 0,
                                      .action = TS_DESIRED_STOP,
                                      .name = "nb",
                                      .project = "nlp",
                                      .kind = "interactive",
                                      .priority = 100,
                                      .swap = true,
                                      .stop_reason = "evicted",
                                      .grace_seconds = 0};
    *d = (struct ts_desired){
        .node = "n1", .state = "ready", .generation = 17, .jobs = jobs, .njobs = 2};
}

static void the_desired_state_decodes_to_what_the_server_encoded(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_desired d, back;
    struct ts_error err = {0};
    server_state(&d, a);
    json_t *v = ts_wire_desired_encode(&d);
    assert_non_null(v);
    assert_int_equal(ts_wire_desired_decode(v, a, &back, &err), TS_OK);
    assert_str(back.node, "n1");
    assert_str(back.state, "ready");
    assert_int_equal(back.generation, 17);
    assert_int_equal(back.njobs, 2);
    for (size_t i = 0; i < 2; i++)
        assert_same_job(&d.jobs[i], &back.jobs[i]);
    /* and encodes again to the same text */
    json_t *again = ts_wire_desired_encode(&back);
    char *s1 = dump_sorted(v), *s2 = dump_sorted(again);
    assert_string_equal(s1, s2);
    free(s1);
    free(s2);
    json_decref(again);
    json_decref(v);
    ts_arena_free(a);
}

/* What the server has always sent: these members, nulls included, so an
 * agent of the minor version before reads it as before. */
static void the_server_sends_the_desired_job_it_always_sent(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_desired d;
    server_state(&d, a);
    json_t *v = ts_wire_desired_job_encode(&d.jobs[1]);
    char *s = json_dumps(v, JSON_COMPACT);
    assert_string_equal(
        s, "{\"id\":43,\"attempt\":0,\"name\":\"nb\",\"project\":\"nlp\",\"kind\":\"interactive\","
           "\"priority\":100,\"action\":\"stop\",\"swap\":true,\"stop_reason\":\"evicted\","
           "\"command\":[],\"env\":{},\"working_dir\":null,\"gpus\":[],\"cpu\":0.0,"
           "\"memory_bytes\":0,\"grace_seconds\":0,\"max_runtime_seconds\":0,"
           "\"checkpoint_dir\":null,\"resume_count\":0,\"idle_swap_after_seconds\":0,"
           "\"job_user\":null,\"allow_root\":false}");
    free(s);
    json_decref(v);
    v = ts_wire_desired_job_encode(&d.jobs[0]);
    s = json_dumps(json_object_get(v, "gpus"), JSON_COMPACT);
    assert_string_equal(s, "[{\"index\":1,\"uuid\":\"GPU-1\",\"memory_bytes\":21474836480,"
                           "\"memory_limit_bytes\":42949672960},{\"index\":0,\"uuid\":\"GPU-0\","
                           "\"memory_bytes\":21474836480,\"memory_limit_bytes\":21474836480}]");
    free(s);
    s = json_dumps(json_object_get(v, "env"), JSON_COMPACT);
    assert_string_equal(s, "{\"B\":\"2\",\"A\":\"x=y\"}"); /* in the order stored */
    free(s);
    json_decref(v);
    ts_arena_free(a);
}

static void a_hand_written_desired_job_takes_the_defaults(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_desired_job j;
    struct ts_error err = {0};
    json_t *v = parse("{\"id\": 7, \"attempt\": 0, \"action\": \"run\", \"command\": [\"true\"],"
                      " \"gpus\": [{\"index\": 1}]}");
    assert_int_equal(ts_wire_desired_job_decode(v, "", a, &j, &err), TS_OK);
    assert_true(j.swap);
    assert_int_equal(j.grace_seconds, -1);
    assert_null(j.name);
    assert_int_equal(j.ngpus, 1);
    assert_int_equal(j.gpus[0].logical_index, -1);
    assert_int_equal(j.gpus[0].memory_bytes, -1);
    assert_int_equal(j.gpus[0].memory_limit_bytes, -1);
    assert_null(j.gpus[0].uuid);
    /* encoded back (the agent's spec.json): nothing invented */
    json_t *e = ts_wire_desired_job_encode(&j);
    json_t *g = json_array_get(json_object_get(e, "gpus"), 0);
    assert_null(json_object_get(e, "grace_seconds"));
    assert_null(json_object_get(g, "memory_bytes"));
    assert_null(json_object_get(g, "logical_index"));
    struct ts_desired_job back;
    assert_int_equal(ts_wire_desired_job_decode(e, "", a, &back, &err), TS_OK);
    assert_same_job(&j, &back);
    json_decref(e);
    json_decref(v);
    ts_arena_free(a);
}

static void a_moved_job_keeps_its_logical_gpu_in_its_spec(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_desired_job j, back;
    struct ts_error err = {0};
    json_t *v = parse("{\"id\": 7, \"attempt\": 1, \"action\": \"run\", \"gpus\": [{\"index\": 0,"
                      " \"logical_index\": 1, \"memory_bytes\": 1024, \"memory_limit_bytes\": "
                      "2048}]}");
    assert_int_equal(ts_wire_desired_job_decode(v, "", a, &j, &err), TS_OK);
    assert_int_equal(j.gpus[0].index, 0);
    assert_int_equal(j.gpus[0].logical_index, 1);
    json_t *e = ts_wire_desired_job_encode(&j);
    assert_int_equal(ts_wire_desired_job_decode(e, "", a, &back, &err), TS_OK);
    assert_same_job(&j, &back);
    json_decref(e);
    json_decref(v);
    ts_arena_free(a);
}

/* A server one minor version newer may say more: skipped, not refused. */
static void unknown_members_of_a_newer_server_are_skipped(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_desired d;
    struct ts_error err = {0};
    json_t *v = parse("{\"generation\": 2, \"cluster\": \"x\", \"jobs\": [{\"id\": 1, \"attempt\": "
                      "0, \"action\": \"suspend\", \"future\": {\"a\": 1}, \"gpus\": [{\"index\": "
                      "0, \"mig\": \"1g.10gb\"}]}]}");
    assert_int_equal(ts_wire_desired_decode(v, a, &d, &err), TS_OK);
    assert_int_equal(d.njobs, 1);
    assert_int_equal(d.jobs[0].action, TS_DESIRED_SUSPEND);
    json_decref(v);
    ts_arena_free(a);
}

struct bad {
    const char *text;
    enum ts_err code;
    const char *field;
};

#define JOB "\"id\": 1, \"attempt\": 0, \"action\": \"run\""

static void every_bad_desired_state_is_refused_naming_its_path(void **state)
{
    (void)state;
    static const struct bad cases[] = {
        {"[]", TS_ERR_WRONG_TYPE, ""},
        {"{\"generation\": \"1\"}", TS_ERR_WRONG_TYPE, "generation"},
        {"{\"generation\": -1}", TS_ERR_INVALID_VALUE, "generation"},
        {"{\"node\": 5}", TS_ERR_WRONG_TYPE, "node"},
        {"{\"jobs\": {}}", TS_ERR_WRONG_TYPE, "jobs"},
        {"{\"jobs\": [7]}", TS_ERR_WRONG_TYPE, "jobs[0]"},
        {"{\"jobs\": [{\"attempt\": 0, \"action\": \"run\"}]}", TS_ERR_MISSING_FIELD, "jobs[0].id"},
        {"{\"jobs\": [{\"id\": 1, \"action\": \"run\"}]}", TS_ERR_MISSING_FIELD, "jobs[0].attempt"},
        {"{\"jobs\": [{\"id\": 1, \"attempt\": 0}]}", TS_ERR_MISSING_FIELD, "jobs[0].action"},
        {"{\"jobs\": [{\"id\": 0, \"attempt\": 0, \"action\": \"run\"}]}", TS_ERR_INVALID_VALUE,
         "jobs[0].id"},
        {"{\"jobs\": [{\"id\": 1, \"attempt\": -1, \"action\": \"run\"}]}", TS_ERR_INVALID_VALUE,
         "jobs[0].attempt"},
        {"{\"jobs\": [{\"id\": 1, \"attempt\": 0.5, \"action\": \"run\"}]}", TS_ERR_INVALID_VALUE,
         "jobs[0].attempt"},
        {"{\"jobs\": [{\"id\": 1, \"attempt\": 0, \"action\": \"pause\"}]}", TS_ERR_INVALID_VALUE,
         "jobs[0].action"},
        {"{\"jobs\": [{" JOB "}, {" JOB "}]}", TS_ERR_INVALID_VALUE, "jobs[1]"},
        {"{\"jobs\": [{" JOB ", \"name\": 3}]}", TS_ERR_WRONG_TYPE, "jobs[0].name"},
        {"{\"jobs\": [{" JOB ", \"command\": \"ls\"}]}", TS_ERR_WRONG_TYPE, "jobs[0].command"},
        {"{\"jobs\": [{" JOB ", \"command\": [\"ls\", 1]}]}", TS_ERR_WRONG_TYPE,
         "jobs[0].command[1]"},
        {"{\"jobs\": [{" JOB ", \"env\": [\"A=1\"]}]}", TS_ERR_WRONG_TYPE, "jobs[0].env"},
        {"{\"jobs\": [{" JOB ", \"env\": {\"A\": 1}}]}", TS_ERR_WRONG_TYPE, "jobs[0].env.A"},
        {"{\"jobs\": [{" JOB ", \"env\": {\"A=B\": \"1\"}}]}", TS_ERR_INVALID_VALUE,
         "jobs[0].env.A=B"},
        {"{\"jobs\": [{" JOB ", \"env\": {\"\": \"1\"}}]}", TS_ERR_INVALID_VALUE, "jobs[0].env."},
        {"{\"jobs\": [{" JOB ", \"gpus\": {}}]}", TS_ERR_WRONG_TYPE, "jobs[0].gpus"},
        {"{\"jobs\": [{" JOB ", \"gpus\": [1]}]}", TS_ERR_WRONG_TYPE, "jobs[0].gpus[0]"},
        {"{\"jobs\": [{" JOB ", \"gpus\": [{}]}]}", TS_ERR_MISSING_FIELD, "jobs[0].gpus[0].index"},
        {"{\"jobs\": [{" JOB ", \"gpus\": [{\"index\": 64}]}]}", TS_ERR_INVALID_VALUE,
         "jobs[0].gpus[0].index"},
        {"{\"jobs\": [{" JOB ", \"gpus\": [{\"index\": 0}, {\"index\": 0}]}]}",
         TS_ERR_INVALID_VALUE, "jobs[0].gpus[1]"},
        {"{\"jobs\": [{" JOB ", \"gpus\": [{\"index\": 0, \"logical_index\": -1}]}]}",
         TS_ERR_INVALID_VALUE, "jobs[0].gpus[0].logical_index"},
        {"{\"jobs\": [{" JOB ", \"gpus\": [{\"index\": 0, \"uuid\": 1}]}]}", TS_ERR_WRONG_TYPE,
         "jobs[0].gpus[0].uuid"},
        {"{\"jobs\": [{" JOB ", \"gpus\": [{\"index\": 0, \"memory_bytes\": -5}]}]}",
         TS_ERR_INVALID_VALUE, "jobs[0].gpus[0].memory_bytes"},
        {"{\"jobs\": [{" JOB ", \"gpus\": [{\"index\": 0, \"memory_limit_bytes\": \"1G\"}]}]}",
         TS_ERR_WRONG_TYPE, "jobs[0].gpus[0].memory_limit_bytes"},
        {"{\"jobs\": [{" JOB ", \"swap\": \"yes\"}]}", TS_ERR_WRONG_TYPE, "jobs[0].swap"},
        {"{\"jobs\": [{" JOB ", \"cpu\": -1}]}", TS_ERR_INVALID_VALUE, "jobs[0].cpu"},
        {"{\"jobs\": [{" JOB ", \"memory_bytes\": 1.5}]}", TS_ERR_INVALID_VALUE,
         "jobs[0].memory_bytes"},
        {"{\"jobs\": [{" JOB ", \"grace_seconds\": -1}]}", TS_ERR_INVALID_VALUE,
         "jobs[0].grace_seconds"},
        {"{\"jobs\": [{" JOB ", \"max_runtime_seconds\": \"8h\"}]}", TS_ERR_WRONG_TYPE,
         "jobs[0].max_runtime_seconds"},
        {"{\"jobs\": [{" JOB ", \"resume_count\": -2}]}", TS_ERR_INVALID_VALUE,
         "jobs[0].resume_count"},
        {"{\"jobs\": [{" JOB ", \"idle_swap_after_seconds\": true}]}", TS_ERR_WRONG_TYPE,
         "jobs[0].idle_swap_after_seconds"},
        {"{\"jobs\": [{" JOB ", \"priority\": 1e12}]}", TS_ERR_INVALID_VALUE, "jobs[0].priority"},
        {"{\"jobs\": [{" JOB ", \"working_dir\": []}]}", TS_ERR_WRONG_TYPE, "jobs[0].working_dir"},
        {"{\"jobs\": [{" JOB ", \"checkpoint_dir\": 1}]}", TS_ERR_WRONG_TYPE,
         "jobs[0].checkpoint_dir"},
        {"{\"jobs\": [{" JOB ", \"job_user\": {}}]}", TS_ERR_WRONG_TYPE, "jobs[0].job_user"},
        {"{\"jobs\": [{" JOB ", \"allow_root\": 1}]}", TS_ERR_WRONG_TYPE, "jobs[0].allow_root"},
        {"{\"jobs\": [{" JOB ", \"stop_reason\": 1}]}", TS_ERR_WRONG_TYPE, "jobs[0].stop_reason"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        struct ts_arena *a = ts_arena_new();
        struct ts_desired d;
        struct ts_error err = {0};
        json_t *v = parse(cases[i].text);
        enum ts_err e = ts_wire_desired_decode(v, a, &d, &err);
        if (e != cases[i].code || strcmp(err.field, cases[i].field) != 0)
            fail_msg("%s: expected %s at \"%s\", got %s at \"%s\" (%s)", cases[i].text,
                     ts_err_code(cases[i].code), cases[i].field, ts_err_code(e), err.field,
                     err.message);
        assert_true(strstr(err.message, cases[i].field) != NULL);
        json_decref(v);
        ts_arena_free(a);
    }
}

static void the_store_s_command_and_env_text_decode_as_on_the_wire(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_desired_job j = {0};
    struct ts_error err = {0};
    assert_int_equal(ts_wire_desired_job_set_text(&j, "[\"sh\", \"-c\", \"exit 3\"]",
                                                  "{\"A\": \"1\", \"B\": \"\"}", a, &err),
                     TS_OK);
    assert_int_equal(j.ncommand, 3);
    assert_string_equal(j.command[2], "exit 3");
    assert_int_equal(j.nenv, 2);
    assert_string_equal(j.env[1].name, "B");
    assert_int_equal(ts_wire_desired_job_set_text(&j, "[1]", "{}", a, &err), TS_ERR_WRONG_TYPE);
    assert_string_equal(err.field, "command[0]");
    assert_int_equal(ts_wire_desired_job_set_text(&j, NULL, NULL, a, &err), TS_OK);
    assert_int_equal(j.ncommand, 0);
    assert_int_equal(j.nenv, 0);
    ts_arena_free(a);
}

/* ---- what the agent sends ----------------------------------------------------- */

static void a_report_decodes_to_what_the_agent_encoded(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    static const struct ts_report_gpu_place places[] = {{0, 1}, {1, 0}};
    struct ts_report_job jobs[] = {
        {.id = 42,
         .attempt = 3,
         .state = TS_REPORT_RUNNING,
         .pid = 1234,
         .has_usage = true,
         .has_gpu_utilization = true,
         .gpu_utilization = 0.75,
         .has_gpu_memory_used = true,
         .gpu_memory_used_bytes = 5LL << 30,
         .has_swapped_bytes = true,
         .swapped_bytes = 1 << 20,
         .places = places,
         .nplaces = 2},
        {.id = 43,
         .attempt = 0,
         .state = TS_REPORT_EXITED,
         .has_exit_code = true,
         .exit_code = 3,
         .message = "out of memory",
         .evicted = true},
        {.id = 44, .attempt = 1, .state = TS_REPORT_EXITED, .signal = 9},
        {.id = 45,
         .attempt = 0,
         .state = TS_REPORT_FAILED_TO_START,
         .message = "could not execute \"x\""},
        {.id = 46,
         .attempt = 2,
         .state = TS_REPORT_SUSPENDED,
         .has_usage = true,
         .has_gpu_memory_used = true,
         .gpu_memory_used_bytes = 0,
         .has_swapped_bytes = true,
         .swapped_bytes = 8LL << 30},
    };
    struct ts_report_gpu gpus[] = {{0, 0.5, 1 << 30}, {1, 0, 0}};
    struct ts_report_event events[] = {{42, 3, 1, "swapped_out", "2 GiB to host memory"},
                                       {43, 0, 7, "memory_ended", "ended: \"é\" ✓"}};
    struct ts_node_report r = {jobs, 5, gpus, 2, events, 2}, back;
    struct ts_error err = {0};
    json_t *v = ts_wire_node_report_encode(&r);
    assert_non_null(v);
    assert_int_equal(ts_wire_node_report_decode(v, a, &back, &err), TS_OK);
    assert_int_equal(back.njobs, 5);
    for (size_t i = 0; i < 5; i++) {
        const struct ts_report_job *x = &jobs[i], *y = &back.jobs[i];
        assert_int_equal(x->id, y->id);
        assert_int_equal(x->attempt, y->attempt);
        assert_int_equal(x->state, y->state);
        assert_int_equal(x->pid, y->pid);
        assert_int_equal(x->has_exit_code, y->has_exit_code);
        assert_int_equal(x->exit_code, y->exit_code);
        assert_int_equal(x->signal, y->signal);
        assert_str(x->message, y->message);
        assert_int_equal(x->has_usage, y->has_usage);
        assert_int_equal(x->has_gpu_utilization, y->has_gpu_utilization);
        assert_true(x->gpu_utilization == y->gpu_utilization);
        assert_int_equal(x->has_gpu_memory_used, y->has_gpu_memory_used);
        assert_int_equal(x->gpu_memory_used_bytes, y->gpu_memory_used_bytes);
        assert_int_equal(x->has_swapped_bytes, y->has_swapped_bytes);
        assert_int_equal(x->swapped_bytes, y->swapped_bytes);
        assert_int_equal(x->evicted, y->evicted);
        assert_int_equal(x->nplaces, y->nplaces);
        for (size_t k = 0; k < x->nplaces; k++) {
            assert_int_equal(x->places[k].index, y->places[k].index);
            assert_int_equal(x->places[k].physical_index, y->places[k].physical_index);
        }
    }
    assert_int_equal(back.ngpus, 2);
    assert_int_equal(back.gpus[0].index, 0);
    assert_true(back.gpus[0].utilization == 0.5);
    assert_int_equal(back.gpus[0].memory_used_bytes, 1 << 30);
    assert_int_equal(back.nevents, 2);
    assert_int_equal(back.events[1].seq, 7);
    assert_string_equal(back.events[1].type, "memory_ended");
    assert_string_equal(back.events[1].message, events[1].message);
    /* members not given are not sent: an older server reads the same */
    json_t *j3 = json_array_get(json_object_get(v, "jobs"), 2);
    assert_null(json_object_get(j3, "exit_code"));
    assert_null(json_object_get(j3, "pid"));
    assert_null(json_object_get(j3, "gpus"));
    assert_null(json_object_get(j3, "evicted"));
    json_decref(v);
    /* no events: no member */
    r.nevents = 0;
    v = ts_wire_node_report_encode(&r);
    assert_null(json_object_get(v, "events"));
    json_decref(v);
    ts_arena_free(a);
}

static void a_registration_decodes_to_what_the_agent_encoded(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_node_reg r = {.labels = "{\"rack\":\"r7\",\"zone\":\"a\"}",
                            .cpu = 64,
                            .memory_bytes = 512LL << 30,
                            .swap_bytes = 64LL << 30,
                            .gpu_reserve_bytes = 2LL << 30,
                            .agent_version = "0.9.0",
                            .protocol = {1, 1},
                            .collision = "swap",
                            .ngpus = 2},
                       back;
    r.gpus[0] =
        (struct ts_gpu){.index = 0, .uuid = "GPU-a", .model = "H100", .memory_bytes = 80LL << 30};
    r.gpus[1] =
        (struct ts_gpu){.index = 1, .uuid = "GPU-b", .model = "H100", .memory_bytes = 80LL << 30};
    struct ts_error err = {0};
    json_t *v = ts_wire_node_reg_encode(&r);
    assert_non_null(v);
    assert_true(json_is_integer(json_object_get(v, "cpu"))); /* whole CPUs, as always sent */
    assert_int_equal(ts_wire_node_reg_decode(v, a, &back, &err), TS_OK);
    assert_string_equal(back.labels, r.labels);
    assert_true(back.cpu == 64);
    assert_int_equal(back.memory_bytes, r.memory_bytes);
    assert_int_equal(back.swap_bytes, r.swap_bytes);
    assert_int_equal(back.gpu_reserve_bytes, r.gpu_reserve_bytes);
    assert_string_equal(back.agent_version, "0.9.0");
    assert_int_equal(back.protocol.major, 1);
    assert_int_equal(back.protocol.minor, 1);
    assert_string_equal(back.collision, "swap");
    assert_int_equal(back.ngpus, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(back.gpus[i].index, r.gpus[i].index);
        assert_string_equal(back.gpus[i].uuid, r.gpus[i].uuid);
        assert_string_equal(back.gpus[i].model, r.gpus[i].model);
        assert_int_equal(back.gpus[i].memory_bytes, r.gpus[i].memory_bytes);
    }
    json_decref(v);
    r.cpu = 1.5;
    v = ts_wire_node_reg_encode(&r);
    assert_int_equal(ts_wire_node_reg_decode(v, a, &back, &err), TS_OK);
    assert_true(back.cpu == 1.5);
    json_decref(v);
    ts_arena_free(a);
}

static void the_answer_to_a_report_decodes_and_refuses_what_is_not_one(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    int64_t ignored[] = {5, 9};
    struct ts_report_result r = {12, ignored, 2}, back;
    struct ts_error err = {0};
    json_t *v = ts_wire_report_result_encode(&r);
    assert_int_equal(ts_wire_report_result_decode(v, a, &back, &err), TS_OK);
    assert_int_equal(back.generation, 12);
    assert_int_equal(back.nignored, 2);
    assert_int_equal(back.ignored[1], 9);
    json_decref(v);
    v = parse("{\"generation\": 1, \"ignored\": [3, \"x\"]}");
    assert_int_equal(ts_wire_report_result_decode(v, a, &back, &err), TS_ERR_INVALID_VALUE);
    assert_string_equal(err.field, "ignored[1]");
    json_decref(v);
    v = parse("{\"generation\": true}");
    assert_int_equal(ts_wire_report_result_decode(v, a, &back, &err), TS_ERR_WRONG_TYPE);
    assert_string_equal(err.field, "generation");
    json_decref(v);
    ts_arena_free(a);
}

static void a_problem_decodes_what_the_server_encodes_and_skips_extensions(void **state)
{
    (void)state;
    struct ts_problem p = {.type = "urn:tessera:error:incompatible_protocol",
                           .title = "Incompatible protocol",
                           .status = 409,
                           .code = "incompatible_protocol",
                           .detail = "agent protocol 2.0 is not supported",
                           .field = "protocol_version",
                           .hint = "upgrade the server before its agents",
                           .instance = "/api/v1/nodes/n1",
                           .request_id = "r-1"},
                      back;
    struct ts_error err = {0};
    json_t *v = ts_wire_problem_encode(&p);
    assert_null(json_object_get(v, "cause")); /* absent, not null */
    assert_int_equal(json_object_set_new(v, "retry_after", json_integer(5)), 0);
    assert_int_equal(ts_wire_problem_decode(v, &back, &err), TS_OK);
    assert_int_equal(back.status, 409);
    assert_string_equal(back.code, p.code);
    assert_string_equal(back.detail, p.detail);
    assert_string_equal(back.hint, p.hint);
    assert_string_equal(back.field, p.field);
    assert_string_equal(back.request_id, "r-1");
    assert_null(back.cause);
    json_decref(v);
    v = parse("{\"code\": 5}");
    assert_int_equal(ts_wire_problem_decode(v, &back, &err), TS_ERR_WRONG_TYPE);
    assert_string_equal(err.field, "code");
    json_decref(v);
    v = parse("{\"status\": 700}");
    assert_int_equal(ts_wire_problem_decode(v, &back, &err), TS_ERR_INVALID_VALUE);
    assert_string_equal(err.field, "status");
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_desired_state_decodes_to_what_the_server_encoded),
        cmocka_unit_test(the_server_sends_the_desired_job_it_always_sent),
        cmocka_unit_test(a_hand_written_desired_job_takes_the_defaults),
        cmocka_unit_test(a_moved_job_keeps_its_logical_gpu_in_its_spec),
        cmocka_unit_test(unknown_members_of_a_newer_server_are_skipped),
        cmocka_unit_test(every_bad_desired_state_is_refused_naming_its_path),
        cmocka_unit_test(the_store_s_command_and_env_text_decode_as_on_the_wire),
        cmocka_unit_test(a_report_decodes_to_what_the_agent_encoded),
        cmocka_unit_test(a_registration_decodes_to_what_the_agent_encoded),
        cmocka_unit_test(the_answer_to_a_report_decodes_and_refuses_what_is_not_one),
        cmocka_unit_test(a_problem_decodes_what_the_server_encodes_and_skips_extensions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
