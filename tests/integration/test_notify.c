/*
 * test_notify.c - the server's LISTEN thread (server/notify.c) on a real
 * PostgreSQL: a waiter wakes when its own (channel, key) is notified, times
 * out when nothing for it comes, and is not woken by the notifications of
 * other keys (issue 15: with 1,000 nodes' long-polls waiting, every
 * notification for the scheduler or for one node woke all 1,000 threads).
 *
 * One private cluster for the file, in a temporary folder removed at the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "api/clock.h"
#include "server/notify.h"
#include "server/store/pgembed.h"
#include "tests/integration/pgtest.h"

#define WAITERS 32   /* long-polls of nodes 1..WAITERS */
#define NOTIFIES 100 /* scheduler notifications sent while they wait */

static char *dir;             /* owned: the temporary folder */
static struct ts_pgembed *pg; /* owned */
static struct ts_notify *nt;  /* owned */
static PGconn *conn;          /* owned: the connection that notifies */

static const char *const channels[] = {"tessera_node", "tessera_sched"};

static int group_setup(void **state)
{
    (void)state;
    struct ts_error err;
    if ((dir = ts_pgtest_tmpdir()) == NULL)
        return -1;
    if (ts_pgembed_start(dir, NULL, &pg, &err) != TS_OK) {
        fprintf(stderr, "could not start PostgreSQL: %s: %s\n", err.message, err.detail);
        return -1;
    }
    if (ts_notify_start(ts_pgembed_conninfo(pg), channels, 2, &nt, &err) != TS_OK) {
        fprintf(stderr, "could not listen: %s\n", err.message);
        return -1;
    }
    conn = ts_pgtest_connect(ts_pgembed_conninfo(pg));
    return conn != NULL ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    PQfinish(conn);
    ts_notify_stop(nt);
    ts_pgembed_stop(pg);
    int left = ts_pgtest_leftovers(dir);
    ts_pgtest_rmtree(dir);
    free(dir);
    return left == 0 ? 0 : -1;
}

static void notify(const char *channel, const char *payload)
{
    char sql[128], buf[8];
    snprintf(sql, sizeof(sql), "SELECT pg_notify('%s', '%s')", channel, payload);
    assert_true(ts_pgtest_value(conn, sql, buf, sizeof(buf)));
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Wait until (channel, key)'s count differs from seq, or 10 s pass. */
static bool moved_within(const char *channel, int64_t key, uint64_t seq)
{
    for (int i = 0; i < 1000 && ts_notify_seq(nt, channel, key) == seq; i++)
        sleep_ms(10);
    return ts_notify_seq(nt, channel, key) != seq;
}

struct waiter {
    int64_t key;
    int timeout_ms;
    uint64_t seen;
    bool moved;
    atomic_bool done;
    pthread_t thread;
};

static void *wait_one(void *arg)
{
    struct waiter *w = arg;
    w->moved = ts_notify_wait(nt, "tessera_node", w->key, w->seen, w->timeout_ms);
    atomic_store(&w->done, true);
    return NULL;
}

static void start_waiter(struct waiter *w, int64_t key, int timeout_ms)
{
    w->key = key;
    w->timeout_ms = timeout_ms;
    w->seen = ts_notify_seq(nt, "tessera_node", key);
    atomic_store(&w->done, false);
    assert_int_equal(pthread_create(&w->thread, NULL, wait_one, w), 0);
}

static void a_waiter_wakes_for_its_key_and_times_out_without_it(void **state)
{
    (void)state;
    struct waiter mine, other;
    start_waiter(&mine, 7, 10000);
    start_waiter(&other, 8, 500);
    sleep_ms(100);
    uint64_t seq = ts_notify_seq(nt, "tessera_node", 7);
    notify("tessera_node", "7");
    assert_true(moved_within("tessera_node", 7, seq));
    pthread_join(mine.thread, NULL);
    assert_true(mine.moved);
    pthread_join(other.thread, NULL);
    assert_false(other.moved); /* node 8 heard nothing in its 500 ms */
}

static void other_keys_notifications_do_not_wake_a_waiter(void **state)
{
    (void)state;
    static struct waiter w[WAITERS];
    for (int i = 0; i < WAITERS; i++)
        start_waiter(&w[i], 100 + i, 30000);
    sleep_ms(300); /* all of them asleep in the wait */
    uint64_t before = ts_notify_spurious(nt);
    uint64_t seq = ts_notify_seq(nt, "tessera_sched", 0);
    for (int i = 0; i < NOTIFIES; i++) {
        notify("tessera_sched", "");
        sleep_ms(2); /* one drain each, as a busy cluster sends them */
    }
    assert_true(moved_within("tessera_sched", 0, seq));
    uint64_t spurious = ts_notify_spurious(nt) - before;
    /* one condition variable for every waiter gave about WAITERS x NOTIFIES
     * (thousands); a wake-up per key leaves none, or a few where a waiter's
     * slot happens to share the scheduler's */
    printf("spurious wake-ups of %d waiters over %d notifications: %llu\n", WAITERS, NOTIFIES,
           (unsigned long long)spurious);
    assert_true(spurious < WAITERS);
    for (int i = 0; i < WAITERS; i++)
        assert_false(atomic_load(&w[i].done)); /* still waiting */
    for (int i = 0; i < WAITERS; i++) {
        char key[16];
        snprintf(key, sizeof(key), "%d", 100 + i);
        notify("tessera_node", key);
    }
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(w[i].thread, NULL);
        assert_true(w[i].moved);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_waiter_wakes_for_its_key_and_times_out_without_it),
        cmocka_unit_test(other_keys_notifications_do_not_wake_a_waiter),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
