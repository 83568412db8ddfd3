/*
 * test_wire_job.c - job specs in and jobs out (api/wire.h): every rule of
 * the job decoder, the GPU request, kinds and states, and round trips.
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

struct fixture {
    struct ts_arena *arena;
    struct ts_job_spec spec;
    struct ts_error err;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return -1;
    f->arena = ts_arena_new();
    *state = f;
    return f->arena != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    ts_arena_free(f->arena);
    free(f);
    return 0;
}

/* Decode a job whose members are `members` plus name, project and command
 * when those are not among them. */
static enum ts_err decode(struct fixture *f, const char *members)
{
    char text[200000];
    snprintf(text, sizeof(text), "{%s%s%s%s%s}", members, members[0] ? "," : "",
             strstr(members, "\"name\"") ? "" : "\"name\": \"train-1\",",
             strstr(members, "\"project\"") ? "" : "\"project\": \"vision\",",
             strstr(members, "\"command\"") ? "\"x\":null" : "\"command\": [\"python\", \"t.py\"]");
    json_t *v = NULL;
    enum ts_err e = ts_wire_parse(text, strlen(text), &v, &f->err);
    if (e != TS_OK)
        fail_msg("%s: %s", text, f->err.message);
    /* "x": null fills the place of the command when the test gives one */
    json_object_del(v, "x");
    e = ts_wire_job_decode(v, f->arena, &f->spec, &f->err);
    json_decref(v);
    return e;
}

static void assert_ok(struct fixture *f, const char *members)
{
    enum ts_err e = decode(f, members);
    if (e != TS_OK)
        fail_msg("{%s}: %s (%s)", members, f->err.message, f->err.field);
}

static void assert_refused(struct fixture *f, const char *members, enum ts_err code,
                           const char *field, const char *message)
{
    enum ts_err e = decode(f, members);
    if (e != code)
        fail_msg("{%s}: expected %s, got %s (%s)", members, ts_err_code(code), ts_err_code(e),
                 f->err.message);
    assert_int_equal(f->err.code, code);
    assert_string_equal(f->err.field, field);
    if (message != NULL)
        assert_string_equal(f->err.message, message);
}

/* ---- the whole spec --------------------------------------------------------- */

static void a_minimal_job_takes_the_defaults_of_a_training_job(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "");
    const struct ts_job_spec *s = &f->spec;
    assert_string_equal(s->name, "train-1");
    assert_string_equal(s->project, "vision");
    assert_int_equal(s->kind, TS_JOB_TRAIN);
    assert_int_equal(s->priority, 50);
    assert_true(s->preemptible);
    assert_string_equal(s->command, "[\"python\",\"t.py\"]");
    assert_string_equal(s->env, "{}");
    assert_null(s->working_dir);
    assert_int_equal(s->gpu.kind, TS_GPU_NONE);
    assert_true(s->cpu == 0);
    assert_int_equal(s->memory_bytes, 0);
    assert_string_equal(s->gpu_model, "[]");
    assert_string_equal(s->node_selector, "{}");
    assert_int_equal(s->max_runtime_seconds, 0);
}

static void a_full_job_decodes_every_member(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"kind\": \"interactive\", \"priority\": 70, \"preemptible\": true,"
                 "\"env\": {\"PATH\": \"/bin\", \"A_1\": \"\"}, \"working_dir\": \"/work\","
                 "\"gpu\": {\"portion\": 0.25, \"portion_limit\": 0.5, \"devices\": 2},"
                 "\"cpu\": 3.5, \"memory\": \"32GiB\", \"gpu_model\": [\"H100\", \"A100\"],"
                 "\"node_selector\": {\"zone\": \"b\", \"rack\": \"1\"}, \"max_runtime\": \"8h\"");
    const struct ts_job_spec *s = &f->spec;
    assert_int_equal(s->kind, TS_JOB_INTERACTIVE);
    assert_int_equal(s->priority, 70);
    assert_true(s->preemptible);
    assert_string_equal(s->env, "{\"A_1\":\"\",\"PATH\":\"/bin\"}");
    assert_string_equal(s->working_dir, "/work");
    assert_int_equal(s->gpu.kind, TS_GPU_PORTION);
    assert_true(s->gpu.portion == 0.25);
    assert_true(s->gpu.portion_limit == 0.5);
    assert_int_equal(s->gpu.devices, 2);
    assert_true(s->cpu == 3.5);
    assert_int_equal(s->memory_bytes, 32LL << 30);
    assert_string_equal(s->gpu_model, "[\"H100\",\"A100\"]");
    assert_string_equal(s->node_selector, "{\"rack\":\"1\",\"zone\":\"b\"}");
    assert_int_equal(s->max_runtime_seconds, 28800);
}

static void optional_members_given_as_null_are_absent(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"kind\": null, \"priority\": null, \"preemptible\": null, \"env\": null,"
                 "\"working_dir\": null, \"gpu\": null, \"cpu\": null, \"memory\": null,"
                 "\"gpu_model\": null, \"node_selector\": null, \"max_runtime\": null");
    assert_int_equal(f->spec.kind, TS_JOB_TRAIN);
    assert_int_equal(f->spec.gpu.kind, TS_GPU_NONE);
    assert_string_equal(f->spec.env, "{}");
}

static void unknown_and_read_only_members_are_refused(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"gpus\": 2", TS_ERR_UNKNOWN_FIELD, "gpus", "unknown field \"gpus\" in job");
    assert_refused(f, "\"state\": \"running\"", TS_ERR_UNKNOWN_FIELD, "state",
                   "unknown field \"state\" in job");
    assert_string_equal(f->err.hint, "state is set by the server and cannot be written");
}

static void a_body_that_is_an_array_is_the_wrong_type(void **state)
{
    struct fixture *f = *state;
    json_t *v = json_pack("[{s:s}]", "name", "a");
    enum ts_err e = ts_wire_job_decode(v, f->arena, &f->spec, &f->err);
    json_decref(v);
    assert_int_equal(e, TS_ERR_WRONG_TYPE);
    assert_string_equal(f->err.field, "");
    assert_string_equal(f->err.message, "request body must be a JSON object");
}

/* ---- names, kind, priority --------------------------------------------------- */

static void name_and_project_are_required_names(void **state)
{
    struct fixture *f = *state;
    json_t *v = json_pack("{s:[s]}", "command", "x");
    assert_int_equal(ts_wire_job_decode(v, f->arena, &f->spec, &f->err), TS_ERR_MISSING_FIELD);
    assert_string_equal(f->err.field, "name");
    assert_string_equal(f->err.message, "name is required");
    json_object_set_new(v, "name", json_string("a"));
    assert_int_equal(ts_wire_job_decode(v, f->arena, &f->spec, &f->err), TS_ERR_MISSING_FIELD);
    assert_string_equal(f->err.field, "project");
    json_decref(v);
    assert_refused(f, "\"name\": \"Train_1\"", TS_ERR_INVALID_VALUE, "name",
                   "name must match [a-z0-9][a-z0-9-]{0,62}: \"Train_1\"");
    assert_refused(f, "\"project\": \"-x\"", TS_ERR_INVALID_VALUE, "project",
                   "project must match [a-z0-9][a-z0-9-]{0,62}: \"-x\"");
    assert_refused(f, "\"project\": [\"vision\"]", TS_ERR_WRONG_TYPE, "project",
                   "project must be a string");
}

static void each_kind_gives_its_default_priority_and_preemptibility(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"kind\": \"interactive\"");
    assert_int_equal(f->spec.priority, 100);
    assert_false(f->spec.preemptible);
    assert_ok(f, "\"kind\": \"inference\"");
    assert_int_equal(f->spec.priority, 150);
    assert_false(f->spec.preemptible);
    assert_ok(f, "\"kind\": \"train\"");
    assert_int_equal(f->spec.priority, 50);
    assert_true(f->spec.preemptible);
    assert_ok(f, "\"kind\": \"inference\", \"priority\": 0, \"preemptible\": true");
    assert_int_equal(f->spec.priority, 0);
    assert_true(f->spec.preemptible);
    assert_ok(f, "\"preemptible\": false, \"priority\": 1000");
    assert_false(f->spec.preemptible);
    assert_int_equal(f->spec.priority, 1000);
}

static void an_unknown_kind_is_refused_listing_the_kinds(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"kind\": \"batch\"", TS_ERR_INVALID_VALUE, "kind",
                   "kind must be one of train, interactive, inference: \"batch\"");
    assert_refused(f, "\"kind\": 1", TS_ERR_WRONG_TYPE, "kind", "kind must be a string");
}

static void priority_must_be_an_integer_from_0_to_1000(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"priority\": 1001", TS_ERR_INVALID_VALUE, "priority",
                   "priority must be between 0 and 1000: 1001");
    assert_refused(f, "\"priority\": -1", TS_ERR_INVALID_VALUE, "priority",
                   "priority must be between 0 and 1000: -1");
    assert_refused(f, "\"priority\": 2.5", TS_ERR_INVALID_VALUE, "priority",
                   "priority must be an integer: 2.5");
    assert_refused(f, "\"priority\": 9223372036854775807", TS_ERR_INVALID_VALUE, "priority",
                   "priority must be between 0 and 1000: 9223372036854775807");
    assert_refused(f, "\"priority\": 1e30", TS_ERR_INVALID_VALUE, "priority",
                   "priority must be between 0 and 1000: 1e+30");
    assert_refused(f, "\"priority\": \"high\"", TS_ERR_WRONG_TYPE, "priority",
                   "priority must be an integer");
    assert_ok(f, "\"priority\": 20.0");
    assert_int_equal(f->spec.priority, 20);
}

static void preemptible_must_be_a_boolean(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"preemptible\": \"yes\"", TS_ERR_WRONG_TYPE, "preemptible",
                   "preemptible must be a boolean");
    assert_refused(f, "\"preemptible\": 1", TS_ERR_WRONG_TYPE, "preemptible", NULL);
}

/* ---- command, env, working_dir -------------------------------------------------- */

static void command_is_a_required_non_empty_array_of_non_empty_strings(void **state)
{
    struct fixture *f = *state;
    json_t *v = json_pack("{s:s,s:s}", "name", "a", "project", "p");
    assert_int_equal(ts_wire_job_decode(v, f->arena, &f->spec, &f->err), TS_ERR_MISSING_FIELD);
    assert_string_equal(f->err.field, "command");
    assert_string_equal(f->err.message, "command is required");
    json_decref(v);
    assert_refused(f, "\"command\": []", TS_ERR_INVALID_VALUE, "command",
                   "command must not be empty");
    assert_refused(f, "\"command\": \"python t.py\"", TS_ERR_WRONG_TYPE, "command",
                   "command must be an array");
    assert_refused(f, "\"command\": [\"python\", 3]", TS_ERR_WRONG_TYPE, "command[1]",
                   "command[1] must be a string");
    assert_refused(f, "\"command\": [\"python\", \"\"]", TS_ERR_INVALID_VALUE, "command[1]",
                   "command[1] must not be empty");
    assert_refused(f, "\"command\": [[\"sh\"]]", TS_ERR_WRONG_TYPE, "command[0]", NULL);
}

static void command_is_kept_as_compact_json_text(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"command\": [ \"sh\" , \"-c\", \"echo \\\"hi\\\" \\u00e9\" ]");
    assert_string_equal(f->spec.command, "[\"sh\",\"-c\",\"echo \\\"hi\\\" \xc3\xa9\"]");
}

static void command_holds_at_most_1024_entries(void **state)
{
    struct fixture *f = *state;
    char *members = malloc(16 + 1025 * 4);
    assert_non_null(members);
    strcpy(members, "\"command\": [");
    size_t n = strlen(members);
    for (int i = 0; i < 1025; i++)
        n += (size_t)sprintf(members + n, "%s\"a\"", i ? "," : "");
    strcpy(members + n, "]");
    assert_refused(f, members, TS_ERR_INVALID_VALUE, "command",
                   "command must have at most 1024 entries: 1025");
    /* 1024 is fine */
    char *last = strrchr(members, ',');
    strcpy(last, "]");
    assert_ok(f, members);
    free(members);
}

static void env_names_must_be_shell_names_and_values_strings(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"env\": {\"1X\": \"a\"}", TS_ERR_INVALID_VALUE, "env.1X",
                   "env name must match [A-Za-z_][A-Za-z0-9_]*: \"1X\"");
    assert_refused(f, "\"env\": {\"A-B\": \"a\"}", TS_ERR_INVALID_VALUE, "env.A-B", NULL);
    assert_refused(f, "\"env\": {\"\": \"a\"}", TS_ERR_INVALID_VALUE, "env.", NULL);
    assert_refused(f, "\"env\": {\"A\": 1}", TS_ERR_WRONG_TYPE, "env.A", "env.A must be a string");
    assert_refused(f, "\"env\": {\"A\": null}", TS_ERR_WRONG_TYPE, "env.A", NULL);
    assert_refused(f, "\"env\": [\"A=1\"]", TS_ERR_WRONG_TYPE, "env", "env must be an object");
    assert_ok(f, "\"env\": {\"_x\": \"1\", \"Ab9\": \"2\"}");
}

static void env_holds_at_most_1024_entries(void **state)
{
    struct fixture *f = *state;
    char *members = malloc(32 + 1025 * 16);
    assert_non_null(members);
    strcpy(members, "\"env\": {");
    size_t n = strlen(members);
    for (int i = 0; i < 1025; i++)
        n += (size_t)sprintf(members + n, "%s\"V%d\":\"\"", i ? "," : "", i);
    strcpy(members + n, "}");
    assert_refused(f, members, TS_ERR_INVALID_VALUE, "env",
                   "env must have at most 1024 entries: 1025");
    free(members);
}

static void working_dir_must_be_an_absolute_path(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"working_dir\": \"work\"", TS_ERR_INVALID_VALUE, "working_dir",
                   "working_dir must be an absolute path: \"work\"");
    assert_refused(f, "\"working_dir\": \"\"", TS_ERR_INVALID_VALUE, "working_dir", NULL);
    assert_refused(f, "\"working_dir\": 1", TS_ERR_WRONG_TYPE, "working_dir",
                   "working_dir must be a string");
    char members[5000];
    snprintf(members, sizeof(members), "\"working_dir\": \"/%04095d\"", 0);
    assert_refused(f, members, TS_ERR_INVALID_VALUE, "working_dir",
                   "working_dir must be at most 4095 bytes long: 4096");
}

/* ---- gpu ---------------------------------------------------------------------- */

static void whole_gpus_are_a_count_from_1_to_64(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"gpu\": {\"count\": 2}");
    assert_int_equal(f->spec.gpu.kind, TS_GPU_COUNT);
    assert_int_equal(f->spec.gpu.count, 2);
    assert_true(ts_gpu_request_gpus(&f->spec.gpu) == 2);
    assert_refused(f, "\"gpu\": {\"count\": 0}", TS_ERR_INVALID_VALUE, "gpu.count",
                   "gpu.count must be between 1 and 64: 0");
    assert_refused(f, "\"gpu\": {\"count\": 65}", TS_ERR_INVALID_VALUE, "gpu.count", NULL);
    assert_refused(f, "\"gpu\": {\"count\": 1.5}", TS_ERR_INVALID_VALUE, "gpu.count",
                   "gpu.count must be an integer: 1.5");
    assert_refused(f, "\"gpu\": {\"count\": \"2\"}", TS_ERR_WRONG_TYPE, "gpu.count",
                   "gpu.count must be an integer");
}

static void a_count_allows_no_other_member(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"gpu\": {\"count\": 2, \"devices\": 2}", TS_ERR_INVALID_VALUE,
                   "gpu.devices", "gpu.devices cannot be given with gpu.count");
    assert_refused(f, "\"gpu\": {\"count\": 2, \"portion_limit\": 0.5}", TS_ERR_INVALID_VALUE,
                   "gpu.portion_limit", "gpu.portion_limit cannot be given with gpu.count");
    assert_refused(f, "\"gpu\": {\"count\": 2, \"memory_limit\": \"1GiB\"}", TS_ERR_INVALID_VALUE,
                   "gpu.memory_limit", NULL);
}

static void a_gpu_request_has_exactly_one_of_count_portion_memory(void **state)
{
    struct fixture *f = *state;
    const char *msg = "gpu must have exactly one of count, portion, memory";
    assert_refused(f, "\"gpu\": {\"count\": 1, \"portion\": 0.5}", TS_ERR_INVALID_VALUE, "gpu",
                   msg);
    assert_refused(f, "\"gpu\": {\"portion\": 0.5, \"memory\": \"1GiB\"}", TS_ERR_INVALID_VALUE,
                   "gpu", msg);
    assert_refused(f, "\"gpu\": {}", TS_ERR_INVALID_VALUE, "gpu", msg);
    assert_refused(f, "\"gpu\": {\"devices\": 2}", TS_ERR_INVALID_VALUE, "gpu", msg);
    assert_refused(f, "\"gpu\": 2", TS_ERR_WRONG_TYPE, "gpu", "gpu must be an object");
    assert_refused(f, "\"gpu\": [{\"count\": 1}]", TS_ERR_WRONG_TYPE, "gpu", NULL);
    assert_refused(f, "\"gpu\": {\"count\": 1, \"mig\": true}", TS_ERR_UNKNOWN_FIELD, "gpu.mig",
                   "unknown field \"mig\" in gpu");
}

static void a_portion_defaults_its_limit_and_devices(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"gpu\": {\"portion\": 0.5}");
    assert_int_equal(f->spec.gpu.kind, TS_GPU_PORTION);
    assert_true(f->spec.gpu.portion == 0.5);
    assert_true(f->spec.gpu.portion_limit == 0.5);
    assert_int_equal(f->spec.gpu.devices, 1);
    assert_ok(f, "\"gpu\": {\"portion\": 1, \"devices\": 4}");
    assert_true(ts_gpu_request_gpus(&f->spec.gpu) == 4);
    assert_ok(f, "\"gpu\": {\"portion\": 0.25, \"devices\": 3}");
    assert_true(ts_gpu_request_gpus(&f->spec.gpu) == 0.75);
}

static void portion_above_one_is_refused_naming_the_field(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"gpu\": {\"portion\": 1.5}", TS_ERR_INVALID_VALUE, "gpu.portion",
                   "gpu.portion must be between 0 and 1: 1.5");
}

static void portion_of_zero_or_less_is_refused(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"gpu\": {\"portion\": 0}", TS_ERR_INVALID_VALUE, "gpu.portion",
                   "gpu.portion must be between 0.001 and 1 (a thousandth of a GPU at least): 0");
    /* charged next to nothing, a job would use a GPU for free */
    assert_refused(f, "\"gpu\": {\"portion\": 1e-300}", TS_ERR_INVALID_VALUE, "gpu.portion",
                   "gpu.portion must be between 0.001 and 1 (a thousandth of a GPU at least): "
                   "1e-300");
    assert_refused(f, "\"gpu\": {\"portion\": 0.000999}", TS_ERR_INVALID_VALUE, "gpu.portion",
                   NULL);
    assert_ok(f, "\"gpu\": {\"portion\": 0.001}");
    assert_refused(f, "\"gpu\": {\"portion\": -0.0}", TS_ERR_INVALID_VALUE, "gpu.portion", NULL);
    assert_refused(f, "\"gpu\": {\"portion\": -0.5}", TS_ERR_INVALID_VALUE, "gpu.portion",
                   "gpu.portion must be between 0 and 1: -0.5");
    assert_refused(f, "\"gpu\": {\"portion\": \"half\"}", TS_ERR_WRONG_TYPE, "gpu.portion",
                   "gpu.portion must be a number");
}

static void a_portion_limit_lies_between_the_portion_and_one(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"gpu\": {\"portion\": 0.5, \"portion_limit\": 0.25}", TS_ERR_INVALID_VALUE,
                   "gpu.portion_limit",
                   "gpu.portion_limit must not be below gpu.portion: 0.25 < 0.5");
    assert_refused(f, "\"gpu\": {\"portion\": 0.5, \"portion_limit\": 1.01}", TS_ERR_INVALID_VALUE,
                   "gpu.portion_limit", "gpu.portion_limit must be between 0 and 1: 1.01");
    assert_refused(f, "\"gpu\": {\"portion\": 0.5, \"memory_limit\": \"1GiB\"}",
                   TS_ERR_INVALID_VALUE, "gpu.memory_limit",
                   "gpu.memory_limit cannot be given with gpu.portion");
    assert_ok(f, "\"gpu\": {\"portion\": 0.5, \"portion_limit\": 1}");
    assert_true(f->spec.gpu.portion_limit == 1);
}

static void devices_are_an_integer_from_1_to_64(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"gpu\": {\"portion\": 0.5, \"devices\": 0}", TS_ERR_INVALID_VALUE,
                   "gpu.devices", "gpu.devices must be between 1 and 64: 0");
    assert_refused(f, "\"gpu\": {\"memory\": \"1GiB\", \"devices\": 65}", TS_ERR_INVALID_VALUE,
                   "gpu.devices", NULL);
    assert_ok(f, "\"gpu\": {\"memory\": \"1GiB\", \"devices\": 64}");
    assert_int_equal(f->spec.gpu.devices, 64);
}

static void gpu_memory_is_a_size_string_or_integer_bytes(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"gpu\": {\"memory\": \"20GiB\"}");
    assert_int_equal(f->spec.gpu.kind, TS_GPU_MEMORY);
    assert_int_equal(f->spec.gpu.memory_bytes, 20LL << 30);
    assert_int_equal(f->spec.gpu.memory_limit_bytes, 20LL << 30);
    assert_int_equal(f->spec.gpu.devices, 1);
    assert_true(ts_gpu_request_gpus(&f->spec.gpu) == 0);
    assert_ok(f, "\"gpu\": {\"memory\": 1073741824, \"memory_limit\": \"1.5GiB\"}");
    assert_int_equal(f->spec.gpu.memory_bytes, 1LL << 30);
    assert_int_equal(f->spec.gpu.memory_limit_bytes, 1610612736LL);
}

static void bad_gpu_memory_sizes_are_refused(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"gpu\": {\"memory\": \"20XB\"}", TS_ERR_INVALID_VALUE, "gpu.memory",
                   "gpu.memory is not a size: \"20XB\"");
    assert_refused(f, "\"gpu\": {\"memory\": \"-1GiB\"}", TS_ERR_INVALID_VALUE, "gpu.memory",
                   "gpu.memory is not a size: \"-1GiB\"");
    assert_refused(f, "\"gpu\": {\"memory\": \"\"}", TS_ERR_INVALID_VALUE, "gpu.memory", NULL);
    assert_refused(f, "\"gpu\": {\"memory\": 0}", TS_ERR_INVALID_VALUE, "gpu.memory",
                   "gpu.memory must be at least 1048576 bytes: 0");
    assert_refused(f, "\"gpu\": {\"memory\": \"0GiB\"}", TS_ERR_INVALID_VALUE, "gpu.memory",
                   "gpu.memory must be at least 1048576 bytes: \"0GiB\"");
    assert_refused(f, "\"gpu\": {\"memory\": -5}", TS_ERR_INVALID_VALUE, "gpu.memory",
                   "gpu.memory must be at least 1048576 bytes: -5");
    assert_refused(f, "\"gpu\": {\"memory\": \"1023KiB\"}", TS_ERR_INVALID_VALUE, "gpu.memory",
                   "gpu.memory must be at least 1048576 bytes: \"1023KiB\"");
    assert_ok(f, "\"gpu\": {\"memory\": \"1MiB\"}");
    assert_refused(f, "\"gpu\": {\"memory\": 1.5}", TS_ERR_INVALID_VALUE, "gpu.memory",
                   "gpu.memory must be a whole number of bytes: 1.5");
    assert_refused(f, "\"gpu\": {\"memory\": 4611686018427387905}", TS_ERR_INVALID_VALUE,
                   "gpu.memory",
                   "gpu.memory must be at most 4611686018427387904 bytes: 4611686018427387905");
    assert_refused(f, "\"gpu\": {\"memory\": 1e300}", TS_ERR_INVALID_VALUE, "gpu.memory", NULL);
    assert_refused(f, "\"gpu\": {\"memory\": -1e300}", TS_ERR_INVALID_VALUE, "gpu.memory", NULL);
    assert_refused(f, "\"gpu\": {\"memory\": true}", TS_ERR_WRONG_TYPE, "gpu.memory",
                   "gpu.memory must be a size string or an integer of bytes");
}

static void a_memory_limit_below_the_request_is_refused(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"gpu\": {\"memory\": \"20GiB\", \"memory_limit\": \"10GiB\"}",
                   TS_ERR_INVALID_VALUE, "gpu.memory_limit",
                   "gpu.memory_limit must not be below gpu.memory: 10GiB < 20GiB");
    assert_refused(f, "\"gpu\": {\"memory\": \"20GiB\", \"portion_limit\": 0.5}",
                   TS_ERR_INVALID_VALUE, "gpu.portion_limit",
                   "gpu.portion_limit cannot be given with gpu.memory");
    assert_refused(f, "\"gpu\": {\"memory\": \"20GiB\", \"memory_limit\": \"20XB\"}",
                   TS_ERR_INVALID_VALUE, "gpu.memory_limit", NULL);
}

static void the_gpu_decoder_stands_alone(void **state)
{
    struct ts_gpu_request g;
    struct ts_error err;
    assert_int_equal(ts_wire_gpu_decode(NULL, &g, &err), TS_OK);
    assert_int_equal(g.kind, TS_GPU_NONE);
    assert_true(ts_gpu_request_gpus(&g) == 0);
    json_t *v = json_pack("{s:f}", "portion", 2.0);
    assert_int_equal(ts_wire_gpu_decode(v, &g, &err), TS_ERR_INVALID_VALUE);
    assert_string_equal(err.field, "gpu.portion");
    json_decref(v);
}

/* ---- cpu, memory, gpu_model, node_selector, max_runtime ------------------------- */

static void cpu_is_a_number_from_0_to_4096(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"cpu\": 0.5");
    assert_true(f->spec.cpu == 0.5);
    assert_refused(f, "\"cpu\": -1", TS_ERR_INVALID_VALUE, "cpu",
                   "cpu must be between 0 and 4096: -1");
    assert_refused(f, "\"cpu\": 4097", TS_ERR_INVALID_VALUE, "cpu", NULL);
    assert_refused(f, "\"cpu\": \"2\"", TS_ERR_WRONG_TYPE, "cpu", "cpu must be a number");
}

static void host_memory_is_a_size(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"memory\": \"32G\"");
    assert_int_equal(f->spec.memory_bytes, 32LL << 30);
    assert_ok(f, "\"memory\": 1000");
    assert_int_equal(f->spec.memory_bytes, 1000);
    assert_ok(f, "\"memory\": \"1KB\"");
    assert_int_equal(f->spec.memory_bytes, 1000);
    assert_refused(f, "\"memory\": \"lots\"", TS_ERR_INVALID_VALUE, "memory",
                   "memory is not a size: \"lots\"");
    assert_refused(f, "\"memory\": -1", TS_ERR_INVALID_VALUE, "memory", NULL);
    assert_refused(f, "\"memory\": [1]", TS_ERR_WRONG_TYPE, "memory", NULL);
}

static void gpu_model_is_an_array_of_strings(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"gpu_model\": \"H100\"", TS_ERR_WRONG_TYPE, "gpu_model",
                   "gpu_model must be an array");
    assert_refused(f, "\"gpu_model\": [\"H100\", 1]", TS_ERR_WRONG_TYPE, "gpu_model[1]",
                   "gpu_model[1] must be a string");
    assert_refused(f, "\"gpu_model\": [\"\"]", TS_ERR_INVALID_VALUE, "gpu_model[0]", NULL);
    assert_ok(f, "\"gpu_model\": []");
    assert_string_equal(f->spec.gpu_model, "[]");
}

static void node_selector_is_an_object_of_strings(void **state)
{
    struct fixture *f = *state;
    assert_refused(f, "\"node_selector\": [\"zone=a\"]", TS_ERR_WRONG_TYPE, "node_selector",
                   "node_selector must be an object");
    assert_refused(f, "\"node_selector\": {\"zone\": 1}", TS_ERR_WRONG_TYPE, "node_selector.zone",
                   "node_selector.zone must be a string");
    assert_refused(f, "\"node_selector\": {\"\": \"a\"}", TS_ERR_INVALID_VALUE, "node_selector.",
                   "node_selector keys must not be empty");
    assert_ok(f, "\"node_selector\": {\"gpu.vendor/x\": \"nvidia\"}");
    assert_string_equal(f->spec.node_selector, "{\"gpu.vendor/x\":\"nvidia\"}");
}

static void max_runtime_is_a_duration_or_seconds(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"max_runtime\": \"1h30m\"");
    assert_int_equal(f->spec.max_runtime_seconds, 5400);
    assert_ok(f, "\"max_runtime\": 3600");
    assert_int_equal(f->spec.max_runtime_seconds, 3600);
    assert_refused(f, "\"max_runtime\": \"8x\"", TS_ERR_INVALID_VALUE, "max_runtime",
                   "max_runtime is not a duration: \"8x\"");
    assert_refused(f, "\"max_runtime\": \"3653d\"", TS_ERR_INVALID_VALUE, "max_runtime", NULL);
    assert_refused(f, "\"max_runtime\": -1", TS_ERR_INVALID_VALUE, "max_runtime",
                   "max_runtime must be between 0 and 315576000: -1");
    assert_refused(f, "\"max_runtime\": 1.5", TS_ERR_INVALID_VALUE, "max_runtime", NULL);
    assert_refused(f, "\"max_runtime\": true", TS_ERR_WRONG_TYPE, "max_runtime",
                   "max_runtime must be a duration string or an integer of seconds");
}

static void idle_swap_after_is_a_duration_of_at_most_7_days(void **state)
{
    struct fixture *f = *state;
    /* absent: not given, the server resolves the kind's default */
    assert_ok(f, "\"kind\": \"interactive\"");
    assert_false(f->spec.has_idle_swap_after);
    assert_int_equal(f->spec.idle_swap_after_seconds, 0);
    assert_ok(f, "\"idle_swap_after\": null");
    assert_false(f->spec.has_idle_swap_after);
    assert_ok(f, "\"idle_swap_after\": \"10m\"");
    assert_true(f->spec.has_idle_swap_after);
    assert_int_equal(f->spec.idle_swap_after_seconds, 600);
    assert_ok(f, "\"idle_swap_after\": 90");
    assert_int_equal(f->spec.idle_swap_after_seconds, 90);
    /* 0 and "0s" turn it off, and are given (not the kind's default) */
    assert_ok(f, "\"kind\": \"interactive\", \"idle_swap_after\": 0");
    assert_true(f->spec.has_idle_swap_after);
    assert_int_equal(f->spec.idle_swap_after_seconds, 0);
    assert_ok(f, "\"kind\": \"interactive\", \"idle_swap_after\": \"0s\"");
    assert_true(f->spec.has_idle_swap_after);
    assert_int_equal(f->spec.idle_swap_after_seconds, 0);
    assert_ok(f, "\"idle_swap_after\": \"7d\"");
    assert_int_equal(f->spec.idle_swap_after_seconds, 604800);
    assert_refused(f, "\"idle_swap_after\": \"7d1s\"", TS_ERR_INVALID_VALUE, "idle_swap_after",
                   "idle_swap_after must be at most 7d (604800 seconds): 604801");
    assert_refused(f, "\"idle_swap_after\": 604801", TS_ERR_INVALID_VALUE, "idle_swap_after", NULL);
    assert_refused(f, "\"idle_swap_after\": -1", TS_ERR_INVALID_VALUE, "idle_swap_after",
                   "idle_swap_after must be between 0 and 315576000: -1");
    assert_refused(f, "\"idle_swap_after\": \"-5m\"", TS_ERR_INVALID_VALUE, "idle_swap_after",
                   "idle_swap_after is not a duration: \"-5m\"");
    assert_refused(f, "\"idle_swap_after\": \"soon\"", TS_ERR_INVALID_VALUE, "idle_swap_after",
                   NULL);
    assert_refused(f, "\"idle_swap_after\": 1.5", TS_ERR_INVALID_VALUE, "idle_swap_after", NULL);
    assert_refused(f, "\"idle_swap_after\": true", TS_ERR_WRONG_TYPE, "idle_swap_after",
                   "idle_swap_after must be a duration string or an integer of seconds");
    assert_refused(f, "\"idle_swap_after\": [\"5m\"]", TS_ERR_WRONG_TYPE, "idle_swap_after", NULL);
    assert_refused(f, "\"idle_swap_after_seconds\": 60", TS_ERR_UNKNOWN_FIELD,
                   "idle_swap_after_seconds", NULL);
    assert_refused(f, "\"idle_swap_afterr\": \"5m\"", TS_ERR_UNKNOWN_FIELD, "idle_swap_afterr",
                   NULL);
    assert_refused(f, "\"swapped_bytes\": 0", TS_ERR_UNKNOWN_FIELD, "swapped_bytes", NULL);
}

static void idle_swap_after_and_swapped_bytes_encode(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"kind\": \"interactive\", \"idle_swap_after\": \"1h30m\"");
    struct ts_job j = {.id = 4, .spec = f->spec, .state = TS_JOB_RUNNING};
    j.swapped_bytes = 3LL << 30;
    json_t *v = ts_wire_job_encode(&j);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "idle_swap_after")), "1h30m");
    assert_int_equal(json_integer_value(json_object_get(v, "idle_swap_after_seconds")), 5400);
    assert_int_equal(json_integer_value(json_object_get(v, "swapped_bytes")), 3LL << 30);
    json_decref(v);
    j.spec.idle_swap_after_seconds = 0;
    j.swapped_bytes = 0;
    v = ts_wire_job_encode(&j);
    assert_string_equal(json_string_value(json_object_get(v, "idle_swap_after")), "0s");
    assert_int_equal(json_integer_value(json_object_get(v, "idle_swap_after_seconds")), 0);
    assert_int_equal(json_integer_value(json_object_get(v, "swapped_bytes")), 0);
    json_decref(v);
}

/* ---- kinds and states ----------------------------------------------------------- */

static void kinds_and_states_have_one_name_each_and_parse_back(void **state)
{
    const char *kinds[] = {"train", "interactive", "inference"};
    for (int i = 0; i < 3; i++) {
        enum ts_job_kind k;
        assert_string_equal(ts_job_kind_name((enum ts_job_kind)i), kinds[i]);
        assert_int_equal(ts_job_kind_parse(kinds[i], &k), 0);
        assert_int_equal(k, i);
    }
    const char *states[] = {"pending",    "scheduled",  "running",   "evicting",
                            "cancelling", "suspending", "suspended", "resuming",
                            "succeeded",  "failed",     "cancelled"};
    for (int i = 0; i < 11; i++) {
        enum ts_job_state s;
        assert_string_equal(ts_job_state_name((enum ts_job_state)i), states[i]);
        assert_int_equal(ts_job_state_parse(states[i], &s), 0);
        assert_int_equal(s, i);
        assert_int_equal(ts_job_state_finished(s), i >= TS_JOB_SUCCEEDED);
    }
    enum ts_job_state s;
    enum ts_job_kind k;
    assert_int_equal(ts_job_state_parse("done", &s), -1);
    assert_int_equal(ts_job_kind_parse("Train", &k), -1);
    assert_string_equal(ts_job_state_name((enum ts_job_state)42), "unknown");
}

/* ---- encoding and round trips ---------------------------------------------------- */

static char *encode_text(const struct ts_job *j)
{
    json_t *v = ts_wire_job_encode(j);
    assert_non_null(v);
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(v);
    return s;
}

static void assert_json_equal(char *got, const char *expected)
{
    json_t *want = json_loads(expected, 0, NULL);
    assert_non_null(want);
    char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(want);
    if (strcmp(got, w) != 0)
        fail_msg("encoded\n  %s\nexpected\n  %s", got, w);
    free(w);
    free(got);
}

static void a_decoded_job_encodes_back_with_its_defaults_filled_in(void **state)
{
    struct fixture *f = *state;
    assert_ok(
        f, "\"gpu\": {\"memory\": \"20GiB\", \"memory_limit\": \"60GiB\"},"
           "\"memory\": \"32GiB\", \"max_runtime\": \"8h\", \"env\": {\"B\": \"2\", \"A\": \"1\"}");
    struct ts_job j = {.id = 12,
                       .spec = f->spec,
                       .state = TS_JOB_PENDING,
                       .reason_code = "quota_exhausted",
                       .reason_message = "project \"vision\" is at its limit: 8 of 8 GPUs in use",
                       .queue_position = 3,
                       .created_at_us = 1795255200000000LL,
                       .updated_at_us = 1795255200500000LL};
    assert_json_equal(
        encode_text(&j),
        "{\"id\":12,\"name\":\"train-1\",\"project\":\"vision\",\"kind\":\"train\","
        "\"priority\":50,\"preemptible\":true,\"command\":[\"python\",\"t.py\"],"
        "\"env\":{\"A\":\"1\",\"B\":\"2\"},\"working_dir\":null,"
        "\"gpu\":{\"memory\":\"20GiB\",\"memory_bytes\":21474836480,\"memory_limit\":\"60GiB\","
        "\"memory_limit_bytes\":64424509440,\"devices\":1},"
        "\"cpu\":0.0,\"memory\":\"32GiB\",\"memory_bytes\":34359738368,\"gpu_model\":[],"
        "\"node_selector\":{},\"max_runtime\":\"8h\",\"max_runtime_seconds\":28800,"
        "\"state\":\"pending\",\"node\":null,\"exit_code\":null,"
        "\"pending_reason\":{\"code\":\"quota_exhausted\","
        "\"message\":\"project \\\"vision\\\" is at its limit: 8 of 8 GPUs in use\","
        "\"queue_position\":3},\"resume_count\":0,"
        "\"created_at\":\"2026-11-21T10:00:00.000000Z\","
        "\"updated_at\":\"2026-11-21T10:00:00.500000Z\",\"started_at\":null,\"finished_at\":null,"
        "\"attempt\":0,\"grace_period\":\"30s\",\"grace_seconds\":30,\"checkpoint_dir\":null,"
        "\"stop_reason\":null,\"allocation\":null,"
        "\"usage\":{\"gpu_utilization\":0.0,\"gpu_memory_used_bytes\":0,\"last_active_at\":null},"
        "\"fair_share\":{\"project_deserved_gpus\":0.0,\"project_fair_share_gpus\":0.0},"
        "\"swap\":true,\"suspended_bytes\":0,\"suspend_held\":false,\"swapped_bytes\":0,"
        "\"idle_swap_after\":\"0s\",\"idle_swap_after_seconds\":0}");
}

static void swap_is_a_boolean_that_defaults_to_true(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"gpu\": {\"portion\": 0.25}");
    assert_true(f->spec.swap);
    assert_ok(f, "\"swap\": false");
    assert_false(f->spec.swap);
    assert_ok(f, "\"swap\": null");
    assert_true(f->spec.swap);
    assert_refused(f, "\"swap\": \"no\"", TS_ERR_WRONG_TYPE, "swap", NULL);
    assert_refused(f, "\"swap\": 0", TS_ERR_WRONG_TYPE, "swap", NULL);
    assert_refused(f, "\"suspend_held\": true", TS_ERR_UNKNOWN_FIELD, "suspend_held", NULL);
    struct ts_job j = {.id = 3, .spec = f->spec, .state = TS_JOB_SUSPENDED};
    j.spec.swap = false;
    j.suspended_bytes = 1 << 20;
    j.suspend_held = true;
    json_t *v = ts_wire_job_encode(&j);
    assert_non_null(v);
    assert_true(json_is_false(json_object_get(v, "swap")));
    assert_string_equal(json_string_value(json_object_get(v, "state")), "suspended");
    assert_int_equal(json_integer_value(json_object_get(v, "suspended_bytes")), 1 << 20);
    assert_true(json_is_true(json_object_get(v, "suspend_held")));
    json_decref(v);
}

static void a_finished_job_encodes_its_node_exit_code_and_times(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"gpu\": {\"count\": 4}, \"kind\": \"inference\", \"working_dir\": \"/srv\"");
    struct ts_job j = {.id = 1,
                       .spec = f->spec,
                       .state = TS_JOB_FAILED,
                       .node = "node-a",
                       .has_exit_code = true,
                       .exit_code = 137,
                       .resume_count = 2,
                       .created_at_us = 1,
                       .updated_at_us = 2,
                       .started_at_us = 3,
                       .finished_at_us = 4};
    json_t *v = ts_wire_job_encode(&j);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "state")), "failed");
    assert_string_equal(json_string_value(json_object_get(v, "node")), "node-a");
    assert_int_equal(json_integer_value(json_object_get(v, "exit_code")), 137);
    assert_int_equal(json_integer_value(json_object_get(v, "resume_count")), 2);
    assert_true(json_is_null(json_object_get(v, "pending_reason")));
    assert_string_equal(json_string_value(json_object_get(v, "finished_at")),
                        "1970-01-01T00:00:00.000004Z");
    assert_string_equal(json_string_value(json_object_get(v, "working_dir")), "/srv");
    char *gpu = json_dumps(json_object_get(v, "gpu"), JSON_COMPACT);
    assert_string_equal(gpu, "{\"count\":4}");
    free(gpu);
    assert_false(json_is_true(json_object_get(v, "preemptible")));
    json_decref(v);
}

static void a_portion_request_encodes_portion_limit_and_devices(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"gpu\": {\"portion\": 0.7}");
    struct ts_job j = {.spec = f->spec};
    json_t *v = ts_wire_job_encode(&j);
    char *gpu = ts_wire_dumps(json_object_get(v, "gpu"));
    assert_string_equal(gpu, "{\"portion\":0.7,\"portion_limit\":0.7,\"devices\":1}");
    free(gpu);
    json_decref(v);
}

static void a_job_without_gpus_encodes_gpu_as_null(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "");
    struct ts_job j = {.spec = f->spec};
    json_t *v = ts_wire_job_encode(&j);
    assert_true(json_is_null(json_object_get(v, "gpu")));
    assert_true(json_is_null(json_object_get(v, "memory")));
    assert_true(json_is_null(json_object_get(v, "max_runtime")));
    json_decref(v);
}

static void the_encoded_spec_members_decode_to_the_same_spec(void **state)
{
    struct fixture *f = *state;
    assert_ok(f, "\"kind\": \"interactive\", \"priority\": 7, \"env\": {\"X\": \"y\"},"
                 "\"working_dir\": \"/w\", \"gpu\": {\"portion\": 0.3, \"portion_limit\": 0.9,"
                 "\"devices\": 2}, \"cpu\": 1.25, \"memory\": \"1536MiB\","
                 "\"gpu_model\": [\"A100\"], \"node_selector\": {\"z\": \"1\"},"
                 "\"max_runtime\": \"1d1s\", \"idle_swap_after\": \"15m\"");
    struct ts_job_spec first = f->spec;
    struct ts_job j = {.spec = first};
    json_t *v = ts_wire_job_encode(&j);
    const char *out_only[] = {"id",          "state",           "node",
                              "exit_code",   "pending_reason",  "resume_count",
                              "created_at",  "updated_at",      "started_at",
                              "finished_at", "memory_bytes",    "max_runtime_seconds",
                              "attempt",     "grace_seconds",   "checkpoint_dir",
                              "stop_reason", "allocation",      "usage",
                              "fair_share",  "suspended_bytes", "suspend_held"};
    for (size_t i = 0; i < TS_ARRAY_LEN(out_only); i++)
        json_object_del(v, out_only[i]);
    json_object_del(v, "swapped_bytes");
    json_object_del(v, "idle_swap_after_seconds");
    char *text = ts_wire_dumps(v);
    json_decref(v);
    json_t *again = NULL;
    assert_int_equal(ts_wire_parse(text, strlen(text), &again, &f->err), TS_OK);
    free(text);
    struct ts_job_spec second;
    assert_int_equal(ts_wire_job_decode(again, f->arena, &second, &f->err), TS_OK);
    json_decref(again);
    assert_string_equal(second.name, first.name);
    assert_int_equal(second.kind, first.kind);
    assert_int_equal(second.priority, first.priority);
    assert_int_equal(second.preemptible, first.preemptible);
    assert_string_equal(second.command, first.command);
    assert_string_equal(second.env, first.env);
    assert_string_equal(second.working_dir, first.working_dir);
    assert_memory_equal(&second.gpu, &first.gpu, sizeof(first.gpu));
    assert_true(second.cpu == first.cpu);
    assert_int_equal(second.memory_bytes, first.memory_bytes);
    assert_string_equal(second.gpu_model, first.gpu_model);
    assert_string_equal(second.node_selector, first.node_selector);
    assert_int_equal(second.max_runtime_seconds, first.max_runtime_seconds);
    assert_int_equal(second.swap, first.swap);
    assert_true(second.has_idle_swap_after);
    assert_int_equal(second.idle_swap_after_seconds, 900);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(a_minimal_job_takes_the_defaults_of_a_training_job),
        T(a_full_job_decodes_every_member),
        T(optional_members_given_as_null_are_absent),
        T(unknown_and_read_only_members_are_refused),
        T(a_body_that_is_an_array_is_the_wrong_type),
        T(name_and_project_are_required_names),
        T(each_kind_gives_its_default_priority_and_preemptibility),
        T(an_unknown_kind_is_refused_listing_the_kinds),
        T(priority_must_be_an_integer_from_0_to_1000),
        T(preemptible_must_be_a_boolean),
        T(command_is_a_required_non_empty_array_of_non_empty_strings),
        T(command_is_kept_as_compact_json_text),
        T(command_holds_at_most_1024_entries),
        T(env_names_must_be_shell_names_and_values_strings),
        T(env_holds_at_most_1024_entries),
        T(working_dir_must_be_an_absolute_path),
        T(whole_gpus_are_a_count_from_1_to_64),
        T(a_count_allows_no_other_member),
        T(a_gpu_request_has_exactly_one_of_count_portion_memory),
        T(a_portion_defaults_its_limit_and_devices),
        T(portion_above_one_is_refused_naming_the_field),
        T(portion_of_zero_or_less_is_refused),
        T(a_portion_limit_lies_between_the_portion_and_one),
        T(devices_are_an_integer_from_1_to_64),
        T(gpu_memory_is_a_size_string_or_integer_bytes),
        T(bad_gpu_memory_sizes_are_refused),
        T(a_memory_limit_below_the_request_is_refused),
        T(the_gpu_decoder_stands_alone),
        T(cpu_is_a_number_from_0_to_4096),
        T(host_memory_is_a_size),
        T(gpu_model_is_an_array_of_strings),
        T(node_selector_is_an_object_of_strings),
        T(max_runtime_is_a_duration_or_seconds),
        T(idle_swap_after_is_a_duration_of_at_most_7_days),
        T(idle_swap_after_and_swapped_bytes_encode),
        T(kinds_and_states_have_one_name_each_and_parse_back),
        T(a_decoded_job_encodes_back_with_its_defaults_filled_in),
        T(swap_is_a_boolean_that_defaults_to_true),
        T(a_finished_job_encodes_its_node_exit_code_and_times),
        T(a_portion_request_encodes_portion_limit_and_devices),
        T(a_job_without_gpus_encodes_gpu_as_null),
        T(the_encoded_spec_members_decode_to_the_same_spec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
