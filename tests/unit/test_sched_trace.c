/*
 * test_sched_trace.c - the CSV trace parsers of tessera-sim: the shipped
 * formats parse, malformed rows are refused with their line number, and
 * thousands of seeded mutations of valid files never crash a parser (the
 * same inputs the libFuzzer target server/sched/sim/fuzz_trace.c explores).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/sched/trace.h"

static const char pods[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
    "openb-pod-0001,6000,12288,1,460,V100M16|V100M32,LS,Running,427061,12902960,427061\n"
    "openb-pod-0002,8000,30517,0,0,,BE,Pending,10,,\n"
    "openb-pod-0003,64000,65536,8,1000,,LS,Running,20,30,20\r\n";

static void the_alibaba_pod_list_parses_with_every_column(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    struct ts_sched_trace_pod *p;
    size_t n;
    struct ts_error err = {0};
    assert_int_equal(ts_sched_trace_pods_parse(pods, sizeof(pods) - 1, a, &p, &n, &err), TS_OK);
    assert_int_equal(n, 4);
    assert_int_equal(p[1].gpu_milli, 460);
    assert_string_equal(p[1].gpu_spec, "V100M16|V100M32");
    assert_int_equal(p[3].num_gpu, 8);
    assert_int_equal(p[2].creation_time, 10);
    ts_arena_free(a);
}

static void a_five_column_pod_list_parses_too(void **state)
{
    (void)state;
    static const char five[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                               "openb-pod-0000,12000,16384,1,1000\n"
                               "openb-pod-0001,6000,12288,2,1000\n";
    struct ts_arena *a = ts_arena_new();
    struct ts_sched_trace_pod *p;
    size_t n;
    struct ts_error err = {0};
    assert_int_equal(ts_sched_trace_pods_parse(five, sizeof(five) - 1, a, &p, &n, &err), TS_OK);
    assert_int_equal(n, 2);
    assert_string_equal(p[0].gpu_spec, "");
    ts_arena_free(a);
}

static void expect_error(const char *csv, const char *needle)
{
    struct ts_arena *a = ts_arena_new();
    struct ts_sched_trace_pod *p;
    size_t n;
    struct ts_error err = {0};
    assert_int_not_equal(ts_sched_trace_pods_parse(csv, strlen(csv), a, &p, &n, &err), TS_OK);
    if (strstr(err.message, needle) == NULL)
        fail_msg("error \"%s\" does not say \"%s\"", err.message, needle);
    ts_arena_free(a);
}

static void malformed_rows_are_refused_with_their_line_number(void **state)
{
    (void)state;
    const char *h = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
    char buf[512];
    snprintf(buf, sizeof(buf), "%sa,1,1,1,500\nb,1,1,x,500\n", h);
    expect_error(buf, "line 3: column num_gpu is not an integer: \"x\"");
    snprintf(buf, sizeof(buf), "%sa,1,1,1,1500\n", h);
    expect_error(buf, "line 2: column gpu_milli must be between 0 and 1000: 1500");
    snprintf(buf, sizeof(buf), "%sa,1,1,2,500\n", h);
    expect_error(buf, "line 2: a pod with num_gpu 2 must have gpu_milli 1000, not 500");
    snprintf(buf, sizeof(buf), "%sa,1,1\n", h);
    expect_error(buf, "line 2: 3 columns, the header has 5");
    snprintf(buf, sizeof(buf), "%s\n# a comment\na,-5,1,1,500\n", h);
    expect_error(buf, "line 4: column cpu_milli must be between 0");
    expect_error("name,cpu_milli\n", "the header has no column \"memory_mib\"");
    expect_error("", "the file is empty");
    snprintf(buf, sizeof(buf), "%s\"a\",1,1,1,500\n", h);
    expect_error(buf, "line 2: column 1 has a quote");
}

static void the_time_replay_formats_parse_with_defaults(void **state)
{
    (void)state;
    static const char projects[] = "name,quota_gpus,limit_gpus\nvision,2.5,\nnlp,1,4\n";
    static const char jobs[] = "name,project,submit_s,duration_s,num_gpu,gpu_milli\n"
                               "j1,vision,0,3600,1,500\n";
    struct ts_arena *a = ts_arena_new();
    struct ts_sched_trace_project *p;
    struct ts_sched_trace_job *j;
    size_t n;
    struct ts_error err = {0};
    assert_int_equal(ts_sched_trace_projects_parse(projects, sizeof(projects) - 1, a, &p, &n, &err),
                     TS_OK);
    assert_int_equal(n, 2);
    assert_false(p[0].has_limit);
    assert_true(p[1].has_limit);
    assert_true(p[0].quota_gpus == 2.5);
    assert_int_equal(ts_sched_trace_jobs_parse(jobs, sizeof(jobs) - 1, a, &j, &n, &err), TS_OK);
    assert_int_equal(j[0].priority, 50);
    assert_true(j[0].preemptible);
    assert_true(j[0].utilization == 1.0);
    static const char bad[] =
        "name,project,submit_s,duration_s,num_gpu,gpu_milli\nj1,vision,0,0,1,500\n";
    assert_int_not_equal(ts_sched_trace_jobs_parse(bad, sizeof(bad) - 1, a, &j, &n, &err), TS_OK);
    assert_non_null(strstr(err.message, "line 2: column duration_s"));
    ts_arena_free(a);
}

static void seeded_mutations_never_crash_a_parser(void **state)
{
    (void)state;
    uint64_t s = 7;
    char buf[sizeof(pods) + 64];
    for (int k = 0; k < 20000; k++) {
        memcpy(buf, pods, sizeof(pods));
        size_t len = sizeof(pods) - 1;
        int edits = 1 + (int)(s % 4);
        for (int e = 0; e < edits; e++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            size_t at = (size_t)(s % len);
            static const char alphabet[] = ",\n\r0123456789-|\"#x \t\0";
            buf[at] = alphabet[(s >> 20) % (sizeof(alphabet) - 1)];
            if ((s >> 40) % 7 == 0)
                len = at + 1;
        }
        struct ts_arena *a = ts_arena_new();
        struct ts_error err = {0};
        size_t n;
        struct ts_sched_trace_pod *p;
        struct ts_sched_trace_node *nd;
        struct ts_sched_trace_job *j;
        struct ts_sched_trace_project *pr;
        if (ts_sched_trace_pods_parse(buf, len, a, &p, &n, &err) != TS_OK)
            assert_true(strncmp(err.message, "line ", 5) == 0 ||
                        strstr(err.message, "empty") != NULL);
        (void)ts_sched_trace_nodes_parse(buf, len, a, &nd, &n, &err);
        (void)ts_sched_trace_jobs_parse(buf, len, a, &j, &n, &err);
        (void)ts_sched_trace_projects_parse(buf, len, a, &pr, &n, &err);
        ts_arena_free(a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_alibaba_pod_list_parses_with_every_column),
        cmocka_unit_test(a_five_column_pod_list_parses_too),
        cmocka_unit_test(malformed_rows_are_refused_with_their_line_number),
        cmocka_unit_test(the_time_replay_formats_parse_with_defaults),
        cmocka_unit_test(seeded_mutations_never_crash_a_parser),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
