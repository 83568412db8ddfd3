/*
 * bench_repack.c - re-pack on demand (issue 17, agent/README.md "The
 * node-level scheduler"): the time from the bind of a whole-GPU job to its
 * start when the node must first move a notebook it spread back to the
 * notebook's logical GPU, for notebooks holding B MiB.
 *
 * Per size: a real server and one agent (--node-scheduler spread) on two
 * simulated GPUs of 2 B + 1 GiB (512 MiB per-GPU reserve) with a host
 * reserve of B + 256 MiB; notebook A (portion 0.5, limit 1, 16 MiB) runs on
 * its logical GPU, notebook B (the same request, B MiB written by
 * cuda_job) is spread to the other GPU; then a whole-GPU job is submitted
 * and bound to that GPU. Printed: submit -> bound and bound -> running as
 * the API shows them (polled every 20 ms), and the move as the notebook's
 * `moved` event says it (bytes, seconds). Both notebooks then read their
 * memory back; a lost byte fails the bench.
 *
 *   TS_BIN_DIR=build/bin TS_CUDA_JOB=build/tests/cuda_job bench_repack MIB...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/e2e/e2e.h"

static int fail(struct ts_e2e *c, const char *why)
{
    fprintf(stderr, "bench_repack: %s\n", why);
    ts_e2e_stop(c);
    return 1;
}

/* allocation.devices[0]'s member key of job id (-1 when absent). */
static long long device0(struct ts_it_server *s, long long id, const char *key)
{
    json_t *j = ts_e2e_job(s, id);
    json_t *d = json_array_get(json_object_get(json_object_get(j, "allocation"), "devices"), 0);
    json_t *v = json_object_get(d, key);
    long long r = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(j);
    return r;
}

static long long wait_physical(struct ts_it_server *s, long long id)
{
    double end = ts_e2e_now() + 30;
    long long p;
    while ((p = device0(s, id, "physical_index")) < 0 && ts_e2e_now() < end)
        ts_e2e_sleep(0.1);
    return p;
}

static long long notebook(struct ts_e2e *c, const char *name, int mib)
{
    char steps[256], script[2048];
    snprintf(steps, sizeof(steps), "alloc 0 %d mark @%s await @stop check", mib, name);
    ts_e2e_cuda_script(c, script, sizeof(script), steps);
    return ts_e2e_submit(&c->srv, "lab", name, "{\"portion\": 0.5, \"portion_limit\": 1}", "2s",
                         NULL, script);
}

/* The message of job id's first event of type into buf ("" when none). */
static void event_message(struct ts_it_server *s, long long id, const char *type, char *buf,
                          size_t len)
{
    json_t *ev = ts_e2e_get(s, "/api/v1/jobs/%lld/events", id);
    size_t i;
    json_t *e;
    buf[0] = '\0';
    json_array_foreach(json_object_get(ev, "events"), i, e) {
        const char *t = json_string_value(json_object_get(e, "type"));
        const char *m = json_string_value(json_object_get(e, "message"));
        if (t != NULL && m != NULL && strcmp(t, type) == 0 && buf[0] == '\0')
            snprintf(buf, len, "%s", m);
    }
    json_decref(ev);
}

static int one(int mib)
{
    struct ts_e2e c;
    memset(&c, 0, sizeof(c));
    char gpus[64], args[256];
    snprintf(gpus, sizeof(gpus), "sim:2x%dMiB", 2 * mib + 1024);
    snprintf(args, sizeof(args),
             "--node-scheduler spread --gpu-reserve 512MiB --swap-reserve %dMiB", mib + 256);
    if (ts_e2e_start(&c, NULL) != 0 || ts_e2e_project(&c.srv, "lab", 2) != 0 ||
        ts_e2e_agent_add_args(&c, c.srv.url, "n1", gpus, NULL, args) < 0 ||
        ts_e2e_wait_node(&c.srv, "n1", "ready", 30) != 0)
        return fail(&c, "could not start the cluster");
    struct ts_it_server *s = &c.srv;
    long long a = notebook(&c, "nb-a", 16);
    if (a < 0 || !ts_e2e_flag_wait(&c, "nb-a", 60))
        return fail(&c, "notebook A did not start");
    double t_alloc = ts_e2e_now();
    long long b = notebook(&c, "nb-b", mib);
    if (b < 0 || !ts_e2e_flag_wait(&c, "nb-b", 600))
        return fail(&c, "notebook B did not write its memory");
    double wrote = ts_e2e_now() - t_alloc;
    long long la = device0(s, b, "index"), pb = wait_physical(s, b);
    if (la < 0 || pb < 0 || pb == la || device0(s, a, "index") != la)
        return fail(&c, "notebook B was not spread off notebook A's logical GPU");

    char script[2048];
    ts_e2e_cuda_script(&c, script, sizeof(script), "alloc 0 16 check");
    double t0 = ts_e2e_now(), bound = -1, ran = -1;
    long long w = ts_e2e_submit(s, "lab", "whole", "{\"count\": 1}", "2s", NULL, script);
    while (w > 0 && ran < 0 && ts_e2e_now() - t0 < 900) {
        json_t *j = ts_e2e_job(s, w);
        const char *st = json_string_value(json_object_get(j, "state"));
        double now = ts_e2e_now();
        if (st != NULL && bound < 0 && strcmp(st, "pending") != 0)
            bound = now;
        if (st != NULL && strcmp(st, "pending") != 0 && strcmp(st, "scheduled") != 0)
            ran = now;
        json_decref(j);
        if (ran < 0)
            ts_e2e_sleep(0.02);
    }
    if (ran < 0)
        return fail(&c, "the whole-GPU job did not start");
    char moved[512];
    ts_e2e_wait_event(s, b, "moved", NULL, 10);
    event_message(s, b, "moved", moved, sizeof(moved));
    ts_e2e_flag_set(&c, "stop");
    bool intact = true;
    long long nbs[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        intact = intact &&
                 ts_e2e_wait_output(ts_e2e_agent_named(&c, "n1"), nbs[i], 1, "data intact", 600);
        json_decref(ts_e2e_wait_state(s, nbs[i], "succeeded", 60));
    }
    printf("notebook %5d MiB (written in %6.2f s): submit -> bound %5.2f s, bound -> running "
           "%6.2f s; %s; memory %s\n",
           mib, wrote, bound - t0, ran - bound, moved[0] ? moved : "no moved event",
           intact ? "intact" : "LOST");
    fflush(stdout);
    c.passed = intact && moved[0] != '\0'; /* else ts_e2e_stop shows the logs */
    int rc = ts_e2e_stop(&c) == 0 && c.passed ? 0 : 1;
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_repack MIB...\n");
        return 2;
    }
    printf("command: TS_BIN_DIR=%s bench_repack", ts_e2e_bin_dir());
    for (int i = 1; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n");
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        int mib = atoi(argv[i]);
        if (mib < 1 || mib > 65536) {
            fprintf(stderr, "bench_repack: a size in MiB between 1 and 65536: %s\n", argv[i]);
            return 2;
        }
        rc |= one(mib);
    }
    return rc;
}
