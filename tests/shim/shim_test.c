/*
 * shim_test.c - libtessera-cuda.so in real processes: shim_probe (and
 * shim_probe_linked) run under LD_PRELOAD on simulated GPUs, with the
 * job's ledgers made here; each case checks what the job sees and what
 * the ledger says. One case per CTest test: shim_test CASE.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/array.h"
#include "tests/shim/harness.h"

#define LINE_MS 20000 /* a step's answer: generous for a loaded machine */
#define A(...)                                                                                     \
    (const char *const[])                                                                          \
    {                                                                                              \
        __VA_ARGS__, NULL                                                                          \
    }

/* ---- memory as the job sees it ---- */

static int limits_and_memory_queries_show_the_job_its_limit(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 1 * GiB, 5000, false);
    world_job(w.l[0], 7, 2 * GiB, 4 * GiB);
    struct probe p;
    char l[512];
    probe_start(&p, &w, 7, false, NULL,
                A("init", "meminfo", "totalmem:0", "totalmem:1", "nvml:0", "nvml2:0", "nvml:1",
                  "alloc:1G", "meminfo", "nvml:0", "nvml2:0", "freeall", "meminfo"));
    CHECK(probe_line(&p, "init rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "meminfo", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "total"), 4 * GiB);
    CHECK_EQ(field(l, "free"), 4 * GiB);
    CHECK(probe_line(&p, "totalmem", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "total"), 4 * GiB);
    /* GPU 1 is not the job's: it sees one device (the devices beyond its
     * ledgers are those a move may take it to) */
    CHECK(probe_line(&p, "totalmem rc=101", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "nvml rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "total"), 4 * GiB);
    CHECK_EQ(field(l, "free"), 4 * GiB);
    CHECK_EQ(field(l, "used"), 0);
    CHECK(probe_line(&p, "nvml2 rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "total"), 4 * GiB);
    CHECK_EQ(field(l, "free") + field(l, "used") + field(l, "reserved"), 4 * GiB);
    CHECK(probe_line(&p, "nvml rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "total"), 16 * GiB);
    CHECK(probe_line(&p, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "meminfo", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "free"), 3 * GiB);
    CHECK_EQ(field(l, "total"), 4 * GiB);
    CHECK(probe_line(&p, "nvml rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "used"), 1 * GiB);
    CHECK_EQ(field(l, "free"), 3 * GiB);
    CHECK(probe_line(&p, "nvml2 rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "used"), 1 * GiB);
    CHECK_EQ(field(l, "free"), 3 * GiB);
    CHECK(probe_line(&p, "freeall failed=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "meminfo", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "free"), 4 * GiB);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

static int free_figure_is_never_more_than_the_driver_has(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    struct probe other, p;
    char l[512];
    /* another tenant, not shimmed, takes 14 GiB of the GPU */
    probe_start(&other, &w, 0, true, NULL, A("init", "alloc:14G", "wait"));
    CHECK(probe_line(&other, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&other, "waiting", l, sizeof l, LINE_MS));
    probe_start(&p, &w, 7, false, NULL, A("init", "meminfo"));
    CHECK(probe_line(&p, "meminfo", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "total"), 4 * GiB);
    CHECK(field(l, "free") <= 2 * GiB);
    CHECK(field(l, "free") > 1 * GiB);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    probe_go(&other);
    CHECK_EQ(probe_end(&other, LINE_MS), 0);
    world_free(&w);
    return 0;
}

static int usage_over_the_limit_never_underflows_the_free_figure(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    int j = world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    struct probe p;
    char l[512];
    probe_start(&p, &w, 7, false, NULL,
                A("init", "alloc:3G", "wait", "meminfo", "nvml:0", "nvml2:0", "alloc:1M"));
    CHECK(probe_line(&p, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    /* the agent lowers the job's limit below what it holds */
    ts_ledger_lock(w.l[0]);
    w.l[0]->jobs[j].request_bytes = 1 * GiB;
    w.l[0]->jobs[j].limit_bytes = 1 * GiB;
    ts_ledger_unlock(w.l[0]);
    probe_go(&p);
    CHECK(probe_line(&p, "meminfo rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "total"), 1 * GiB);
    CHECK_EQ(field(l, "free"), 0);
    CHECK(probe_line(&p, "nvml rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "total"), 1 * GiB);
    CHECK_EQ(field(l, "free"), 0);
    CHECK(field(l, "used") <= 1 * GiB);
    CHECK(probe_line(&p, "nvml2 rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "free"), 0);
    CHECK(field(l, "used") + field(l, "free") + field(l, "reserved") <= field(l, "total"));
    CHECK(probe_line(&p, "alloc rc=2", l, sizeof l, LINE_MS)); /* over the limit */
    CHECK_EQ(job_used(w.l[0], j), 3 * GiB);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

/* ---- charging ---- */

static int allocation_over_the_limit_is_out_of_memory_and_charges_nothing(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    int j = world_job(w.l[0], 7, 1 * GiB, 2 * GiB);
    struct probe p;
    char l[512];
    probe_start(
        &p, &w, 7, false, NULL,
        A("init", "alloc:3G", "wait", "alloc:1500M", "alloc:600M", "wait", "freeall", "wait"));
    CHECK(probe_line(&p, "alloc rc=2", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], j), 0);
    CHECK_EQ(atomic_load(&slot_of(w.l[0], p.pid)->used_bytes), 0);
    probe_go(&p);
    CHECK(probe_line(&p, "alloc rc=0", l, sizeof l, LINE_MS)); /* a burst, with room */
    CHECK(probe_line(&p, "alloc rc=2", l, sizeof l, LINE_MS)); /* past the limit */
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], j), 1500 * MiB);
    CHECK_EQ(atomic_load(&slot_of(w.l[0], p.pid)->used_bytes), 1500 * MiB);
    CHECK_EQ(atomic_load(&w.l[0]->burst_bytes), 1500 * MiB - 1 * GiB);
    probe_go(&p);
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], j), 0);
    CHECK_EQ(atomic_load(&w.l[0]->burst_bytes), 0);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

/* Run `step` then free it; the ledger must show exactly `bytes` (0: take
 * it from the step's pitch=) in between and 0 after. */
static int charged_once(struct world *w, int j, const char *step, uint64_t bytes, const char *env)
{
    struct probe p;
    char l[512], want[64];
    snprintf(want, sizeof(want), "%.*s rc=", (int)strcspn(step, ":"), step);
    probe_start(&p, w, 7, false, env, A("init", step, "wait", "free", "wait"));
    CHECK(probe_line(&p, want, l, sizeof l, LINE_MS));
    if (strstr(l, "rc=0") == NULL) {
        fprintf(stderr, "%s: %s\n", step, l);
        return 1;
    }
    if (bytes == 0)
        bytes = field(l, "pitch") * 100;
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    struct ts_ledger_proc *s = slot_of(w->l[0], p.pid);
    CHECK(s != NULL);
    if (job_used(w->l[0], j) != bytes || atomic_load(&s->used_bytes) != bytes) {
        fprintf(stderr, "%s: charged %llu, expected %llu\n", step,
                (unsigned long long)job_used(w->l[0], j), (unsigned long long)bytes);
        return 1;
    }
    probe_go(&p);
    CHECK(probe_line(&p, "free rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    if (job_used(w->l[0], j) != 0 || atomic_load(&s->used_bytes) != 0) {
        fprintf(stderr, "%s: %llu left after the free\n", step,
                (unsigned long long)job_used(w->l[0], j));
        return 1;
    }
    return probe_end(p.pid ? &p : &p, LINE_MS);
}

static int each_allocation_path_is_charged_once_and_uncharged_once(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    int j = world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    CHECK_EQ(charged_once(&w, j, "alloc:1M", 1 * MiB, NULL), 0);
    CHECK_EQ(charged_once(&w, j, "pitch:1000:100", 0, NULL), 0);
    CHECK_EQ(charged_once(&w, j, "managed:3M", 3 * MiB, NULL), 0);
    CHECK_EQ(charged_once(&w, j, "create:4M", 4 * MiB, NULL), 0);
    CHECK_EQ(charged_once(&w, j, "async:5M", 5 * MiB, NULL), 0);
    CHECK_EQ(charged_once(&w, j, "pool:6M", 6 * MiB, NULL), 0);
    CHECK_EQ(charged_once(&w, j, "array:64:32", 64 * 32 * 4, NULL), 0);
    CHECK_EQ(charged_once(&w, j, "array3d:16:8:4", 16 * 8 * 4 * 2 * 2, NULL), 0);
    world_free(&w);
    return 0;
}

static int failed_allocations_and_unknown_frees_leave_the_charges_alone(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    int j = world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    struct probe p;
    char l[512];
    /* the driver refuses the first cuMemAlloc_v2 */
    probe_start(&p, &w, 7, false, "TESSERA_SIMGPU_FAIL=cuMemAlloc_v2:1",
                A("init", "alloc:1G", "alloc:1M", "badfree", "wait"));
    CHECK(probe_line(&p, "alloc rc=2", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "badfree", l, sizeof l, LINE_MS));
    CHECK(strstr(l, "rc=0") == NULL);
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], j), 1 * MiB);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

static int gpu_calls_mark_the_process_recently_active(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    struct probe p;
    char l[512];
    probe_start(&p, &w, 7, false, NULL, A("init", "wait", "launch:100", "wait"));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    struct ts_ledger_proc *s = slot_of(w.l[0], p.pid);
    CHECK(s != NULL);
    usleep(100000);
    /* the stamp is coarse (a tick of the coarse clock, at most every 10 ms) */
    uint64_t before = ts_ledger_now_ns() - 30000000u;
    CHECK(atomic_load(&s->last_call_ns) < before);
    probe_go(&p);
    CHECK(probe_line(&p, "launch rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK(atomic_load(&s->last_call_ns) >= before);
    probe_go(&p);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

/* ---- registration ---- */

static int no_ledger_passes_through_and_an_unusable_one_fails_closed(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    struct probe p;
    char l[512];
    /* no TESSERA_SHIM_DIR: the driver's own figures */
    probe_start(&p, &w, 7, false, "TESSERA_SHIM_DIR=", A("init", "meminfo", "alloc:6G"));
    CHECK(probe_line(&p, "init rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "meminfo", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "total"), 16 * GiB);
    CHECK(probe_line(&p, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    /* a job with no slot in the ledger: CUDA does not start */
    probe_start(&p, &w, 99, false, NULL, A("init", "alloc:1M"));
    CHECK(probe_line(&p, "init rc=3", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "alloc rc=", l, sizeof l, LINE_MS));
    CHECK(strstr(l, "rc=0") == NULL);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    /* a ledger of another size (another ABI) */
    char bad[400], cmd[900];
    snprintf(bad, sizeof(bad), "%s/bad", w.root);
    snprintf(cmd, sizeof(cmd), "TESSERA_SHIM_DIR=%s", bad);
    CHECK_EQ(mkdir(bad, 0700), 0);
    char file[500];
    snprintf(file, sizeof(file), "%s/dev0.ledger", bad);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    fputs("not a ledger", f);
    fclose(f);
    probe_start(&p, &w, 7, false, cmd, A("init", "alloc:1M"));
    CHECK(probe_line(&p, "init rc=3", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "alloc rc=", l, sizeof l, LINE_MS));
    CHECK(strstr(l, "rc=0") == NULL);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    /* a folder without a ledger */
    probe_start(&p, &w, 7, false, "TESSERA_SHIM_DIR=/nonexistent", A("init"));
    CHECK(probe_line(&p, "init rc=3", l, sizeof l, LINE_MS));
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(void);
} cases[] = {
#define CASE(f) {#f, f},
    CASE(limits_and_memory_queries_show_the_job_its_limit)
        CASE(free_figure_is_never_more_than_the_driver_has)
            CASE(usage_over_the_limit_never_underflows_the_free_figure)
                CASE(allocation_over_the_limit_is_out_of_memory_and_charges_nothing)
                    CASE(each_allocation_path_is_charged_once_and_uncharged_once)
                        CASE(failed_allocations_and_unknown_frees_leave_the_charges_alone)
                            CASE(no_ledger_passes_through_and_an_unusable_one_fails_closed)
                                CASE(gpu_calls_mark_the_process_recently_active)
                                    TS_SHIM_MORE_CASES(CASE)
#undef CASE
};

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        if (argc < 2 || strcmp(argv[1], cases[i].name) == 0) {
            int r = cases[i].fn();
            fprintf(stderr, "%s %s\n", r == 0 ? "ok" : "FAILED", cases[i].name);
            if (r != 0 || argc >= 2)
                return r;
        }
    }
    return argc < 2 ? 0 : 2;
}
