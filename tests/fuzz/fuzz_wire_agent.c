/*
 * fuzz_wire_agent.c - the agent protocol's bodies (PUT /nodes/{name},
 * POST /nodes/{name}/report, POST /nodes/{name}/logs, and the desired state
 * an agent reads): parse,
 * decode each way, check what a decoder that accepted promises, and that
 * what it accepted encodes to something it accepts again, unchanged.
 */
#include "tests/fuzz/fuzz.h"

/* The desired state: what decodes encodes to the same text after a second
 * round. */
static void check_desired(const json_t *v, struct ts_arena *a)
{
    struct ts_desired d, back;
    struct ts_error err;
    enum ts_err e = ts_wire_desired_decode(v, a, &d, &err);
    if (e != TS_OK) {
        fuzz_check_error(e, &err);
        return;
    }
    for (size_t i = 0; i < d.njobs; i++) {
        FUZZ_CHECK(d.jobs[i].id > 0 && d.jobs[i].attempt >= 0);
        for (size_t k = 0; k < d.jobs[i].ngpus; k++)
            FUZZ_CHECK(d.jobs[i].gpus[k].index >= 0 && d.jobs[i].gpus[k].index < TS_NODE_GPUS_MAX);
    }
    json_t *once = ts_wire_desired_encode(&d);
    FUZZ_CHECK(once != NULL && ts_wire_desired_decode(once, a, &back, &err) == TS_OK);
    json_t *twice = ts_wire_desired_encode(&back);
    char *s1 = json_dumps(once, JSON_COMPACT), *s2 = json_dumps(twice, JSON_COMPACT);
    FUZZ_CHECK(s1 != NULL && s2 != NULL && strcmp(s1, s2) == 0);
    free(s1);
    free(s2);
    json_decref(once);
    json_decref(twice);
}

/* Job output: accepted chunks are in range and encode to the same chunks. */
static void check_log_chunks(const json_t *v, struct ts_arena *a)
{
    struct ts_log_chunk *c, *back;
    size_t n, nback;
    struct ts_error err;
    enum ts_err e = ts_wire_log_chunks_decode(v, a, &c, &n, &err);
    if (e != TS_OK) {
        fuzz_check_error(e, &err);
        return;
    }
    FUZZ_CHECK(n <= TS_LOG_CHUNKS_MAX);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(c[i].job_id > 0 && c[i].attempt >= 0 && c[i].offset >= 0 &&
                   c[i].offset + (int64_t)c[i].len <= ((int64_t)1 << 62));
    json_t *again = ts_wire_log_chunks_encode(c, n);
    FUZZ_CHECK(again != NULL && ts_wire_log_chunks_decode(again, a, &back, &nback, &err) == TS_OK);
    FUZZ_CHECK(nback == n);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(back[i].len == c[i].len && memcmp(back[i].data, c[i].data, c[i].len) == 0);
    json_decref(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v = fuzz_parse(data, size);
    if (v == NULL)
        return 0;
    struct ts_arena *a = ts_arena_new();
    FUZZ_CHECK(a != NULL);
    struct ts_node_reg *reg = ts_arena_alloc(a, sizeof(*reg));
    FUZZ_CHECK(reg != NULL);
    struct ts_error err;
    enum ts_err e = ts_wire_node_reg_decode(v, a, reg, &err);
    if (e == TS_OK) {
        FUZZ_CHECK(reg->ngpus <= TS_NODE_GPUS_MAX);
        FUZZ_CHECK(strcmp(reg->collision, "wait") == 0 || strcmp(reg->collision, "priority") == 0 ||
                   strcmp(reg->collision, "swap") == 0);
        for (size_t i = 0; i < reg->ngpus; i++) {
            FUZZ_CHECK(reg->gpus[i].index >= 0 && reg->gpus[i].index < TS_NODE_GPUS_MAX);
            FUZZ_CHECK(reg->gpus[i].memory_bytes > reg->gpu_reserve_bytes);
            FUZZ_CHECK(reg->gpus[i].uuid[0] != '\0');
            for (size_t j = 0; j < i; j++)
                FUZZ_CHECK(reg->gpus[i].index != reg->gpus[j].index &&
                           strcmp(reg->gpus[i].uuid, reg->gpus[j].uuid) != 0);
        }
    } else {
        fuzz_check_error(e, &err);
    }
    struct ts_node_report rep;
    e = ts_wire_node_report_decode(v, a, &rep, &err);
    if (e == TS_OK) {
        FUZZ_CHECK(rep.njobs <= TS_REPORT_JOBS_MAX && rep.ngpus <= TS_NODE_GPUS_MAX);
        for (size_t i = 0; i < rep.njobs; i++) {
            FUZZ_CHECK(rep.jobs[i].id > 0 && rep.jobs[i].attempt >= 0);
            FUZZ_CHECK(rep.jobs[i].gpu_utilization >= 0 && rep.jobs[i].gpu_utilization <= 1);
            FUZZ_CHECK(rep.jobs[i].message == NULL || strlen(rep.jobs[i].message) <= 1024);
        }
        for (size_t i = 0; i < rep.ngpus; i++)
            FUZZ_CHECK(rep.gpus[i].utilization >= 0 && rep.gpus[i].utilization <= 1);
        FUZZ_CHECK(rep.nevents <= TS_REPORT_EVENTS_MAX);
        for (size_t i = 0; i < rep.nevents; i++) {
            const struct ts_report_event *ev = &rep.events[i];
            FUZZ_CHECK(ev->id > 0 && ev->attempt >= 0 && ev->seq >= 1);
            size_t n = strlen(ev->type);
            FUZZ_CHECK(n >= 1 && n <= TS_EVENT_TYPE_MAX);
            for (size_t k = 0; k < n; k++)
                FUZZ_CHECK((ev->type[k] >= 'a' && ev->type[k] <= 'z') || ev->type[k] == '_');
            FUZZ_CHECK(strlen(ev->message) <= 4 * TS_EVENT_MESSAGE_MAX);
        }
        json_t *again = ts_wire_node_report_encode(&rep);
        struct ts_node_report back;
        FUZZ_CHECK(again != NULL && ts_wire_node_report_decode(again, a, &back, &err) == TS_OK);
        FUZZ_CHECK(back.njobs == rep.njobs && back.ngpus == rep.ngpus &&
                   back.nevents == rep.nevents);
        json_decref(again);
    } else {
        fuzz_check_error(e, &err);
    }
    check_desired(v, a);
    check_log_chunks(v, a);
    ts_arena_free(a);
    json_decref(v);
    return 0;
}
