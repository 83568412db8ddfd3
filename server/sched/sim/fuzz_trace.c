/*
 * fuzz_trace.c - libFuzzer target for the CSV trace parsers (trace.h):
 * every input either parses or is refused with a message naming its line.
 * Build: cmake -B build-fuzz -DCMAKE_C_COMPILER=clang -DTS_FUZZ=ON; run
 * build-fuzz/bin/fuzz_sched_trace -max_total_time=60 tests/data/traces
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/sched/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ts_arena *a = ts_arena_new();
    struct ts_error err = {0};
    size_t n;
    struct ts_sched_trace_pod *p;
    struct ts_sched_trace_node *nd;
    struct ts_sched_trace_job *j;
    struct ts_sched_trace_project *pr;
    const char *buf = (const char *)data;
    if (ts_sched_trace_pods_parse(buf, size, a, &p, &n, &err) != TS_OK &&
        strncmp(err.message, "line ", 5) != 0 && strstr(err.message, "empty") == NULL &&
        strstr(err.message, "memory") == NULL && strstr(err.message, "rows") == NULL)
        abort();
    (void)ts_sched_trace_nodes_parse(buf, size, a, &nd, &n, &err);
    (void)ts_sched_trace_jobs_parse(buf, size, a, &j, &n, &err);
    (void)ts_sched_trace_projects_parse(buf, size, a, &pr, &n, &err);
    ts_arena_free(a);
    return 0;
}
