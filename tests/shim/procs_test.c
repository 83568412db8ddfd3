/*
 * procs_test.c - the shim's cases about processes: a lock holder killed,
 * fork, many processes at once, and collisions (waiting for room, giving
 * up, bursts in first come first served order, stream capture). Run by shim_test.c.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/shim/harness.h"

#define LINE_MS 20000
#define A(...)                                                                                     \
    (const char *const[])                                                                          \
    {                                                                                              \
        __VA_ARGS__, NULL                                                                          \
    }

int a_killed_lock_holder_is_reaped_and_the_lock_recovered(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    int j = world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    struct probe a, b;
    char l[512];
    probe_start(&a, &w, 7, false, NULL, A("init", "alloc:1G", "holdlock"));
    CHECK(probe_line(&a, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&a, "holdlock rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], j), 1 * GiB);
    pid_t dead = a.pid;
    kill(a.pid, SIGKILL);
    CHECK_EQ(probe_end(&a, LINE_MS), 128 + SIGKILL);
    /* the next process to register takes the lock the dead one held */
    probe_start(&b, &w, 7, false, NULL, A("init", "alloc:1M", "wait"));
    CHECK(probe_line(&b, "init rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&b, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&b, "waiting", l, sizeof l, LINE_MS));
    CHECK(slot_of(w.l[0], dead) == NULL);
    CHECK(slot_of(w.l[0], b.pid) != NULL);
    CHECK_EQ(job_used(w.l[0], j), 1 * MiB); /* the dead process's 1 GiB is gone */
    CHECK_EQ(ts_ledger_lock(w.l[0]), 0);
    ts_ledger_unlock(w.l[0]);
    CHECK_EQ(probe_end(&b, LINE_MS), 0);
    world_free(&w);
    return 0;
}

int fork_after_init_registers_the_child_in_its_own_slot(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    int j = world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    struct probe p;
    char l[512];
    probe_start(&p, &w, 7, false, NULL, A("init", "alloc:1G", "fork:256M", "wait"));
    CHECK(probe_line(&p, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "child pid=", l, sizeof l, LINE_MS));
    pid_t child = (pid_t)atoi(l + strlen("child pid="));
    CHECK(probe_line(&p, "init rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    struct ts_ledger_proc *ps = slot_of(w.l[0], p.pid), *cs = slot_of(w.l[0], child);
    CHECK(ps != NULL && cs != NULL && ps != cs);
    CHECK_EQ(atomic_load(&ps->used_bytes), 1 * GiB);
    CHECK_EQ(atomic_load(&cs->used_bytes), 256 * MiB);
    CHECK_EQ(job_used(w.l[0], j), 1 * GiB + 256 * MiB);
    probe_go(&p); /* the child frees and exits */
    CHECK(probe_line(&p, "fork child_status=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], j), 1 * GiB); /* the parent's charges stay the parent's */
    CHECK_EQ(atomic_load(&ps->used_bytes), 1 * GiB);
    ts_ledger_lock(w.l[0]);
    ts_ledger_reap_locked(w.l[0]); /* the agent reaps the child's slot */
    ts_ledger_unlock(w.l[0]);
    CHECK(slot_of(w.l[0], child) == NULL);
    CHECK_EQ(job_used(w.l[0], j), 1 * GiB);
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    world_free(&w);
    return 0;
}

#define MANY 128

int many_processes_initialize_at_once(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    int j = world_job(w.l[0], 7, 8 * GiB, 8 * GiB);
    static struct probe p[MANY];
    char l[512];
    for (int i = 0; i < MANY; i++)
        probe_start(&p[i], &w, 7, false, NULL, A("init", "alloc:1M", "meminfo", "wait"));
    for (int i = 0; i < MANY; i++) {
        CHECK(probe_line(&p[i], "init rc=0", l, sizeof l, 60000));
        CHECK(probe_line(&p[i], "alloc rc=0", l, sizeof l, LINE_MS));
        CHECK(probe_line(&p[i], "meminfo rc=0", l, sizeof l, LINE_MS));
        CHECK_EQ(field(l, "total"), 8 * GiB);
        CHECK(probe_line(&p[i], "waiting", l, sizeof l, LINE_MS));
    }
    int slots = 0;
    for (int i = 0; i < MANY; i++) {
        struct ts_ledger_proc *s = slot_of(w.l[0], p[i].pid);
        CHECK(s != NULL);
        CHECK_EQ(s->job, j);
        CHECK_EQ(atomic_load(&s->used_bytes), 1 * MiB);
        slots++;
    }
    CHECK_EQ(slots, MANY);
    CHECK_EQ(job_used(w.l[0], j), MANY * MiB);
    for (int i = 0; i < MANY; i++)
        probe_go(&p[i]);
    for (int i = 0; i < MANY; i++)
        CHECK_EQ(probe_end(&p[i], LINE_MS), 0);
    world_free(&w);
    return 0;
}

/* Job 7 borrows: 12 GiB held on a 16 GiB GPU with a 4 GiB request. Job 8
 * (request = limit = 8 GiB) then asks for 6 GiB within its request. */
static void collide(struct world *w, uint32_t wait_ms, int *ja, int *jb)
{
    world_make(w, 16 * GiB, 0, wait_ms, false);
    *ja = world_job(w->l[0], 7, 4 * GiB, 14 * GiB);
    *jb = world_job(w->l[0], 8, 8 * GiB, 8 * GiB);
}

int a_within_request_allocation_waits_for_room_and_gets_it(void)
{
    struct world w;
    int ja, jb;
    collide(&w, 30000, &ja, &jb);
    struct probe a, b;
    char l[512];
    probe_start(&a, &w, 7, false, NULL, A("init", "alloc:12G", "wait", "free", "wait"));
    CHECK(probe_line(&a, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&a, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(atomic_load(&w.l[0]->burst_bytes), 8 * GiB);
    uint32_t wake0 = atomic_load(&w.l[0]->agent_wake);
    probe_start(&b, &w, 8, false, NULL, A("init", "alloc:6G", "wait"));
    CHECK(probe_line(&b, "init rc=0", l, sizeof l, LINE_MS));
    /* it asks the agent for room and waits */
    struct ts_ledger_proc *bs = NULL;
    uint64_t t0 = now_ms();
    while (now_ms() - t0 < LINE_MS &&
           ((bs = slot_of(w.l[0], b.pid)) == NULL || atomic_load(&bs->need_bytes) != 6 * GiB))
        usleep(10000);
    CHECK(bs != NULL && atomic_load(&bs->need_bytes) == 6 * GiB);
    CHECK(atomic_load(&w.l[0]->agent_wake) != wake0);
    CHECK(!probe_line(&b, "alloc", l, sizeof l, 200));
    CHECK_EQ(job_used(w.l[0], jb), 0);
    probe_go(&a); /* the borrower frees: room */
    CHECK(probe_line(&b, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&b, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], jb), 6 * GiB);
    CHECK_EQ(atomic_load(&bs->need_bytes), 0);
    probe_go(&b);
    probe_go(&a);
    CHECK_EQ(probe_end(&a, LINE_MS), 0);
    CHECK_EQ(probe_end(&b, LINE_MS), 0);
    world_free(&w);
    return 0;
}

int a_within_request_allocation_gives_up_after_wait_ms(void)
{
    struct world w;
    int ja, jb;
    collide(&w, 700, &ja, &jb);
    struct probe a, b;
    char l[512];
    probe_start(&a, &w, 7, false, NULL, A("init", "alloc:12G", "wait"));
    CHECK(probe_line(&a, "waiting", l, sizeof l, LINE_MS));
    probe_start(&b, &w, 8, false, NULL, A("init", "alloc:6G", "wait"));
    CHECK(probe_line(&b, "init rc=0", l, sizeof l, LINE_MS));
    uint64_t t0 = now_ms();
    CHECK(probe_line(&b, "alloc rc=2", l, sizeof l, LINE_MS));
    uint64_t waited = now_ms() - t0;
    CHECK(waited >= 600); /* it did wait, about wait_ms */
    CHECK(probe_line(&b, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], jb), 0);
    CHECK_EQ(atomic_load(&slot_of(w.l[0], b.pid)->need_bytes), 0);
    CHECK_EQ(job_used(w.l[0], ja), 12 * GiB);
    probe_go(&a);
    probe_go(&b);
    CHECK_EQ(probe_end(&a, LINE_MS), 0);
    CHECK_EQ(probe_end(&b, LINE_MS), 0);
    world_free(&w);
    return 0;
}

/* Bursts that do not fit wait in the ledger's queue, first come first
 * served: a later burst that would fit waits behind an earlier one, an
 * allocation within a job's request never does; a burst that gets no room
 * within wait_ms fails with out-of-memory and says so in gaveup_seq. */
int a_burst_waits_first_come_first_served_and_gives_up_after_wait_ms(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 3000, false);
    int ja = world_job(w.l[0], 7, 2 * GiB, 12 * GiB);
    int jb = world_job(w.l[0], 8, 2 * GiB, 12 * GiB);
    int jc = world_job(w.l[0], 9, 2 * GiB, 4 * GiB);
    int jd = world_job(w.l[0], 10, 1 * GiB, 4 * GiB);
    int je = world_job(w.l[0], 11, 1 * GiB, 8 * GiB);
    struct probe a, b, c, d, e;
    char l[512];
    probe_start(&a, &w, 7, false, NULL, A("init", "alloc:10G", "wait", "free", "wait"));
    CHECK(probe_line(&a, "alloc rc=0", l, sizeof l, LINE_MS)); /* a burst with room: at once */
    CHECK(probe_line(&a, "waiting", l, sizeof l, LINE_MS));
    probe_start(&b, &w, 8, false, NULL, A("init", "alloc:8G", "wait"));
    CHECK(probe_line(&b, "init rc=0", l, sizeof l, LINE_MS));
    uint64_t t0 = now_ms();
    while (atomic_load(&slot_of(w.l[0], b.pid)->need_bytes) == 0 && now_ms() - t0 < LINE_MS)
        usleep(10000);
    struct ts_ledger_proc *bs = slot_of(w.l[0], b.pid);
    CHECK_EQ(atomic_load(&bs->need_bytes), 8 * GiB); /* 10 + 8 > 16: it waits */
    CHECK_EQ(atomic_load(&bs->need_kind), TS_NEED_BURST);
    CHECK(atomic_load(&bs->need_since_ns) != 0);
    /* within its request: granted at once, ahead of the waiting burst */
    probe_start(&c, &w, 9, false, NULL, A("init", "alloc:1G", "wait"));
    t0 = now_ms();
    CHECK(probe_line(&c, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(now_ms() - t0 < 2000);
    CHECK(probe_line(&c, "waiting", l, sizeof l, LINE_MS));
    /* a later burst that would fit (11 + 3 <= 16) waits behind b's */
    probe_start(&d, &w, 10, false, NULL, A("init", "alloc:3G", "wait"));
    CHECK(probe_line(&d, "init rc=0", l, sizeof l, LINE_MS));
    CHECK(!probe_line(&d, "alloc", l, sizeof l, 700));
    CHECK_EQ(job_used(w.l[0], jd), 0);
    CHECK_EQ(atomic_load(&slot_of(w.l[0], d.pid)->need_bytes), 3 * GiB);
    CHECK(!probe_line(&b, "alloc", l, sizeof l, 100));
    probe_go(&a); /* 10 GiB freed: b first, then d */
    CHECK(probe_line(&b, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&d, "alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&a, "free rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], ja), 0);
    CHECK_EQ(job_used(w.l[0], jb), 8 * GiB);
    CHECK_EQ(job_used(w.l[0], jc), 1 * GiB);
    CHECK_EQ(job_used(w.l[0], jd), 3 * GiB);
    /* 12 of 16 GiB used: a burst of 6 GiB waits wait_ms, then out-of-memory */
    probe_start(&e, &w, 11, false, NULL, A("init", "alloc:6G", "wait"));
    CHECK(probe_line(&e, "init rc=0", l, sizeof l, LINE_MS));
    t0 = now_ms();
    CHECK(probe_line(&e, "alloc rc=2", l, sizeof l, LINE_MS));
    CHECK(now_ms() - t0 >= 2500);
    struct ts_ledger_proc *es = slot_of(w.l[0], e.pid);
    CHECK_EQ(atomic_load(&es->need_bytes), 0);
    CHECK_EQ(atomic_load(&es->gaveup_seq), 1);
    CHECK_EQ(atomic_load(&es->gaveup_bytes), 6 * GiB);
    CHECK_EQ(job_used(w.l[0], je), 0);
    CHECK_EQ(atomic_load(&bs->gaveup_seq), 0);
    struct probe *all[] = {&a, &b, &c, &d, &e};
    for (int i = 0; i < 5; i++)
        probe_go(all[i]);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(probe_end(all[i], LINE_MS), 0);
    world_free(&w);
    return 0;
}

int an_allocation_during_stream_capture_never_waits(void)
{
    struct world w;
    int ja, jb;
    collide(&w, 30000, &ja, &jb);
    struct probe a, b;
    char l[512];
    probe_start(&a, &w, 7, false, NULL, A("init", "alloc:12G", "wait"));
    CHECK(probe_line(&a, "waiting", l, sizeof l, LINE_MS));
    probe_start(&b, &w, 8, false, NULL, A("init", "capture_async:6G"));
    CHECK(probe_line(&b, "init rc=0", l, sizeof l, LINE_MS));
    uint64_t t0 = now_ms();
    CHECK(probe_line(&b, "capture_async rc=2", l, sizeof l, LINE_MS));
    CHECK(now_ms() - t0 < 10000); /* failed fast, far less than wait_ms */
    CHECK_EQ(job_used(w.l[0], jb), 0);
    probe_go(&a);
    CHECK_EQ(probe_end(&a, LINE_MS), 0);
    CHECK_EQ(probe_end(&b, LINE_MS), 0);
    world_free(&w);
    return 0;
}
