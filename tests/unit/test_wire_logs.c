/*
 * test_wire_logs.c - the codecs of job output (api/wire_logs.c) and of
 * GET /whoami (api/wire_token.c), which the server and the agent both use:
 * what one side encodes the other decodes to the same struct, the server
 * refuses every bad chunk naming its path, and the agent's decoders of the
 * server's answers skip members a newer server adds.
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

/* ---- the chunks (agent -> server) ------------------------------------------ */

static void chunks_decode_to_the_bytes_the_agent_encoded(void **state)
{
    (void)state;
    /* every length modulo 3 (padding "==", "=", none), a NUL and high bytes */
    static const unsigned char bytes[] = {'h', 'i', '\n', 0, 0xff, 0x80, 'x'};
    struct ts_log_chunk in[] = {
        {.job_id = 7, .attempt = 0, .offset = 0, .data = bytes, .len = 7},
        {.job_id = 7, .attempt = 1, .offset = 100, .data = bytes, .len = 5},
        {.job_id = 9, .attempt = 2, .offset = ((int64_t)1 << 40), .data = bytes + 1, .len = 6},
        {.job_id = 9, .attempt = 3, .offset = 5, .data = bytes, .len = 0},
    };
    size_t n = TS_ARRAY_LEN(in);
    json_t *v = ts_wire_log_chunks_encode(in, n);
    assert_non_null(v);
    /* the wire as the server always read it */
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(v, "chunks"), 0), "data")),
        "aGkKAP+AeA==");
    struct ts_arena *a = ts_arena_new();
    struct ts_log_chunk *out = NULL;
    size_t nout = 0;
    struct ts_error err = {0};
    assert_int_equal(ts_wire_log_chunks_decode(v, a, &out, &nout, &err), TS_OK);
    assert_int_equal(nout, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(out[i].job_id, in[i].job_id);
        assert_int_equal(out[i].attempt, in[i].attempt);
        assert_int_equal(out[i].offset, in[i].offset);
        assert_int_equal(out[i].len, in[i].len);
        assert_memory_equal(out[i].data, in[i].data, in[i].len);
    }
    json_decref(v);
    v = parse("{\"chunks\": []}");
    assert_int_equal(ts_wire_log_chunks_decode(v, a, &out, &nout, &err), TS_OK);
    assert_int_equal(nout, 0);
    json_decref(v);
    ts_arena_free(a);
}

struct bad {
    const char *text;
    enum ts_err code;
    const char *field;
};

#define CHUNK "\"id\": 1, \"attempt\": 0, \"offset\": 0"

static void every_bad_chunk_is_refused_naming_its_path(void **state)
{
    (void)state;
    static const struct bad cases[] = {
        {"[]", TS_ERR_WRONG_TYPE, ""},
        {"{}", TS_ERR_MISSING_FIELD, "chunks"},
        {"{\"chunks\": [], \"node\": \"n1\"}", TS_ERR_UNKNOWN_FIELD, "node"},
        {"{\"chunks\": {}}", TS_ERR_WRONG_TYPE, "chunks"},
        {"{\"chunks\": [3]}", TS_ERR_WRONG_TYPE, "chunks[0]"},
        {"{\"chunks\": [{" CHUNK "}]}", TS_ERR_MISSING_FIELD, "chunks[0].data"},
        {"{\"chunks\": [{\"attempt\": 0, \"offset\": 0, \"data\": \"\"}]}", TS_ERR_MISSING_FIELD,
         "chunks[0].id"},
        {"{\"chunks\": [{" CHUNK ", \"data\": \"\", \"len\": 0}]}", TS_ERR_UNKNOWN_FIELD,
         "chunks[0].len"},
        {"{\"chunks\": [{\"id\": 0, \"attempt\": 0, \"offset\": 0, \"data\": \"\"}]}",
         TS_ERR_INVALID_VALUE, "chunks[0].id"},
        {"{\"chunks\": [{\"id\": \"1\", \"attempt\": 0, \"offset\": 0, \"data\": \"\"}]}",
         TS_ERR_WRONG_TYPE, "chunks[0].id"},
        {"{\"chunks\": [{\"id\": 1, \"attempt\": -1, \"offset\": 0, \"data\": \"\"}]}",
         TS_ERR_INVALID_VALUE, "chunks[0].attempt"},
        {"{\"chunks\": [{\"id\": 1, \"attempt\": 0, \"offset\": 1.5, \"data\": \"\"}]}",
         TS_ERR_INVALID_VALUE, "chunks[0].offset"},
        {"{\"chunks\": [{\"id\": 1, \"attempt\": 0, \"offset\": -1, \"data\": \"\"}]}",
         TS_ERR_INVALID_VALUE, "chunks[0].offset"},
        {"{\"chunks\": [{" CHUNK ", \"data\": 5}]}", TS_ERR_WRONG_TYPE, "chunks[0].data"},
        {"{\"chunks\": [{" CHUNK ", \"data\": \"aGk\"}]}", TS_ERR_INVALID_VALUE, "chunks[0].data"},
        {"{\"chunks\": [{" CHUNK ", \"data\": \"aG k\"}]}", TS_ERR_INVALID_VALUE, "chunks[0].data"},
        {"{\"chunks\": [{" CHUNK ", \"data\": \"aGl=\"}]}", TS_ERR_INVALID_VALUE, "chunks[0].data"},
        {"{\"chunks\": [{" CHUNK ", \"data\": \"a-_=\"}]}", TS_ERR_INVALID_VALUE, "chunks[0].data"},
        {"{\"chunks\": [{\"id\": 1, \"attempt\": 0, \"offset\": 4611686018427387903, "
         "\"data\": \"aGk=\"}]}",
         TS_ERR_INVALID_VALUE, "chunks[0].offset"},
        {"{\"chunks\": [{" CHUNK ", \"data\": \"\"}, {" CHUNK ", \"data\": null}]}",
         TS_ERR_MISSING_FIELD, "chunks[1].data"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        struct ts_arena *a = ts_arena_new();
        struct ts_log_chunk *out = NULL;
        size_t n = 0;
        struct ts_error err = {0};
        json_t *v = parse(cases[i].text);
        enum ts_err e = ts_wire_log_chunks_decode(v, a, &out, &n, &err);
        if (e != cases[i].code || strcmp(err.field, cases[i].field) != 0)
            fail_msg("%s: expected %s at \"%s\", got %s at \"%s\" (%s)", cases[i].text,
                     ts_err_code(cases[i].code), cases[i].field, ts_err_code(e), err.field,
                     err.message);
        /* an unknown member's message names it as the member of its object */
        if (e != TS_ERR_UNKNOWN_FIELD && strstr(err.message, cases[i].field) == NULL)
            fail_msg("%s: the message does not name %s: %s", cases[i].text, cases[i].field,
                     err.message);
        assert_null(out);
        assert_int_equal(n, 0);
        json_decref(v);
        ts_arena_free(a);
    }
}

static void more_chunks_than_a_request_holds_are_refused(void **state)
{
    (void)state;
    json_t *arr = json_array();
    for (int i = 0; i <= TS_LOG_CHUNKS_MAX; i++)
        json_array_append_new(
            arr, json_pack("{s:i, s:i, s:i, s:s}", "id", 1, "attempt", 0, "offset", i, "data", ""));
    json_t *v = json_pack("{s:o}", "chunks", arr);
    struct ts_arena *a = ts_arena_new();
    struct ts_log_chunk *out;
    size_t n;
    struct ts_error err = {0};
    assert_int_equal(ts_wire_log_chunks_decode(v, a, &out, &n, &err), TS_ERR_INVALID_VALUE);
    assert_string_equal(err.field, "chunks");
    json_decref(v);
    ts_arena_free(a);
}

/* ---- the answer (server -> agent) ------------------------------------------ */

static void the_answer_decodes_to_what_the_server_encoded(void **state)
{
    (void)state;
    struct ts_log_mark marks[] = {{7, 0, 12}, {9, 2, ((int64_t)1 << 41)}};
    int64_t ignored[] = {4};
    struct ts_log_ack ack = {marks, 2, ignored, 1}, back;
    json_t *v = ts_wire_log_ack_encode(&ack);
    assert_non_null(v);
    char *text = json_dumps(v, JSON_COMPACT);
    assert_string_equal(text, "{\"chunks\":[{\"id\":7,\"attempt\":0,\"next_offset\":12},"
                              "{\"id\":9,\"attempt\":2,\"next_offset\":2199023255552}],"
                              "\"ignored\":[4]}");
    free(text);
    struct ts_arena *a = ts_arena_new();
    struct ts_error err = {0};
    /* a newer server may say more */
    assert_int_equal(json_object_set_new(v, "stored_bytes", json_integer(5)), 0);
    assert_int_equal(json_object_set_new(json_array_get(json_object_get(v, "chunks"), 0),
                                         "truncated", json_true()),
                     0);
    assert_int_equal(ts_wire_log_ack_decode(v, a, &back, &err), TS_OK);
    assert_int_equal(back.nmarks, 2);
    assert_int_equal(back.marks[1].job_id, 9);
    assert_int_equal(back.marks[1].attempt, 2);
    assert_int_equal(back.marks[1].next_offset, (int64_t)1 << 41);
    assert_int_equal(back.nignored, 1);
    assert_int_equal(back.ignored[0], 4);
    json_decref(v);
    ts_arena_free(a);
}

static void a_bad_answer_is_refused_naming_its_path(void **state)
{
    (void)state;
    static const struct bad cases[] = {
        {"[]", TS_ERR_WRONG_TYPE, ""},
        {"{\"chunks\": 5}", TS_ERR_WRONG_TYPE, "chunks"},
        {"{\"chunks\": [7]}", TS_ERR_WRONG_TYPE, "chunks[0]"},
        {"{\"chunks\": [{\"id\": 1, \"attempt\": 0}]}", TS_ERR_MISSING_FIELD,
         "chunks[0].next_offset"},
        {"{\"chunks\": [{\"id\": 1, \"attempt\": 0, \"next_offset\": \"5\"}]}", TS_ERR_WRONG_TYPE,
         "chunks[0].next_offset"},
        {"{\"chunks\": [{\"id\": 1, \"attempt\": 0, \"next_offset\": -5}]}", TS_ERR_INVALID_VALUE,
         "chunks[0].next_offset"},
        {"{\"chunks\": [{\"id\": 0, \"attempt\": 0, \"next_offset\": 5}]}", TS_ERR_INVALID_VALUE,
         "chunks[0].id"},
        {"{\"ignored\": {}}", TS_ERR_WRONG_TYPE, "ignored"},
        {"{\"ignored\": [1, \"2\"]}", TS_ERR_INVALID_VALUE, "ignored[1]"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        struct ts_arena *a = ts_arena_new();
        struct ts_log_ack ack;
        struct ts_error err = {0};
        json_t *v = parse(cases[i].text);
        enum ts_err e = ts_wire_log_ack_decode(v, a, &ack, &err);
        if (e != cases[i].code || strcmp(err.field, cases[i].field) != 0)
            fail_msg("%s: expected %s at \"%s\", got %s at \"%s\" (%s)", cases[i].text,
                     ts_err_code(cases[i].code), cases[i].field, ts_err_code(e), err.field,
                     err.message);
        json_decref(v);
        ts_arena_free(a);
    }
}

/* ---- GET /whoami (server -> agent --join) ----------------------------------- */

static void whoami_decodes_to_what_the_server_encoded(void **state)
{
    (void)state;
    const char *nodes[] = {"n1", "gpu-*"}, *projects[] = {"vision"};
    struct ts_whoami w = {.id = 3,
                          .name = "agent-n1",
                          .role = "agent",
                          .projects = projects,
                          .nprojects = 1,
                          .restricted = true,
                          .has_nodes = true,
                          .nodes = nodes,
                          .nnodes = 2},
                     back;
    json_t *v = ts_wire_whoami_encode(&w);
    assert_non_null(v);
    char *text = json_dumps(v, JSON_COMPACT);
    /* the members, in the order the server always wrote them */
    assert_string_equal(text, "{\"id\":3,\"name\":\"agent-n1\",\"role\":\"agent\",\"projects\":"
                              "[\"vision\"],\"restricted\":true,\"nodes\":[\"n1\",\"gpu-*\"]}");
    free(text);
    assert_int_equal(json_object_set_new(v, "expires_at", json_string("2030-01-01T00:00:00Z")), 0);
    struct ts_arena *a = ts_arena_new();
    struct ts_error err = {0};
    assert_int_equal(ts_wire_whoami_decode(v, a, &back, &err), TS_OK);
    assert_int_equal(back.id, 3);
    assert_string_equal(back.name, "agent-n1");
    assert_string_equal(back.role, "agent");
    assert_true(back.restricted);
    assert_int_equal(back.nprojects, 1);
    assert_string_equal(back.projects[0], "vision");
    assert_true(back.has_nodes);
    assert_int_equal(back.nnodes, 2);
    assert_string_equal(back.nodes[1], "gpu-*");
    json_decref(v);

    /* an admin's: no nodes member; a role this agent does not know is kept */
    struct ts_whoami admin = {.id = 1, .name = "root", .role = "auditor"};
    v = ts_wire_whoami_encode(&admin);
    assert_null(json_object_get(v, "nodes"));
    assert_int_equal(ts_wire_whoami_decode(v, a, &back, &err), TS_OK);
    assert_string_equal(back.role, "auditor");
    assert_false(back.has_nodes);
    assert_int_equal(back.nnodes, 0);
    assert_false(back.restricted);
    json_decref(v);
    ts_arena_free(a);
}

static void a_bad_whoami_is_refused_naming_its_path(void **state)
{
    (void)state;
    static const struct bad cases[] = {
        {"[]", TS_ERR_WRONG_TYPE, ""},
        {"{}", TS_ERR_MISSING_FIELD, "role"},
        {"{\"role\": 3}", TS_ERR_WRONG_TYPE, "role"},
        {"{\"role\": \"agent\", \"id\": \"3\"}", TS_ERR_WRONG_TYPE, "id"},
        {"{\"role\": \"agent\", \"name\": []}", TS_ERR_WRONG_TYPE, "name"},
        {"{\"role\": \"agent\", \"restricted\": 1}", TS_ERR_WRONG_TYPE, "restricted"},
        {"{\"role\": \"agent\", \"nodes\": \"n1\"}", TS_ERR_WRONG_TYPE, "nodes"},
        {"{\"role\": \"agent\", \"nodes\": [\"n1\", 2]}", TS_ERR_WRONG_TYPE, "nodes[1]"},
        {"{\"role\": \"agent\", \"nodes\": [\"N 1\"]}", TS_ERR_INVALID_VALUE, "nodes[0]"},
        {"{\"role\": \"agent\", \"nodes\": [\"n1\", \"n1\"]}", TS_ERR_INVALID_VALUE, "nodes[1]"},
        {"{\"role\": \"member\", \"projects\": [\"Vision\"]}", TS_ERR_INVALID_VALUE, "projects[0]"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        struct ts_arena *a = ts_arena_new();
        struct ts_whoami w;
        struct ts_error err = {0};
        json_t *v = parse(cases[i].text);
        enum ts_err e = ts_wire_whoami_decode(v, a, &w, &err);
        if (e != cases[i].code || strcmp(err.field, cases[i].field) != 0)
            fail_msg("%s: expected %s at \"%s\", got %s at \"%s\" (%s)", cases[i].text,
                     ts_err_code(cases[i].code), cases[i].field, ts_err_code(e), err.field,
                     err.message);
        json_decref(v);
        ts_arena_free(a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chunks_decode_to_the_bytes_the_agent_encoded),
        cmocka_unit_test(every_bad_chunk_is_refused_naming_its_path),
        cmocka_unit_test(more_chunks_than_a_request_holds_are_refused),
        cmocka_unit_test(the_answer_decodes_to_what_the_server_encoded),
        cmocka_unit_test(a_bad_answer_is_refused_naming_its_path),
        cmocka_unit_test(whoami_decodes_to_what_the_server_encoded),
        cmocka_unit_test(a_bad_whoami_is_refused_naming_its_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
