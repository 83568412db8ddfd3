/*
 * notify.c - one LISTEN connection per server and the counts waiters watch.
 *
 * Counts live in a fixed table per channel indexed by a hash of the key: two
 * keys sharing a slot only cost a waiter a spurious wake-up (it re-reads and
 * waits again), never a missed one. Waiters sleep on one of WAKES condition
 * variables chosen by channel and slot, and a notification wakes only its
 * own: with 1,000 nodes' long-polls waiting, a notification for one node (or
 * for the scheduler) no longer wakes the other 999 threads (issue 15).
 */
#include "server/notify.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/log.h"
#include "server/store/listen.h"

#define MAX_CHANNELS 8
#define SLOTS 1024
#define WAKES SLOTS

struct ts_notify {
    char *conninfo;
    char channels[MAX_CHANNELS][64];
    int nchannels;
    uint64_t counts[MAX_CHANNELS][SLOTS]; /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t wake[WAKES]; /* waiters on (c, s) sleep on wake[wake_of(c, s)] */
    atomic_uint_fast64_t spurious;
    pthread_t thread;
    atomic_bool stop;
    struct ts_store_listen *pg;
};

static size_t slot_of(int64_t key)
{
    uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> 54) % SLOTS;
}

/* Channels share the table shifted apart, so the scheduler's one key
 * (payload '') sits beside no node's slot of the same number. */
static size_t wake_of(int c, size_t s)
{
    return (s + (size_t)c * 397) % WAKES;
}

static int channel_index(const struct ts_notify *nt, const char *channel)
{
    for (int i = 0; i < nt->nchannels; i++)
        if (strcmp(nt->channels[i], channel) == 0)
            return i;
    return -1;
}

static struct ts_store_listen *connect_and_listen(struct ts_notify *nt)
{
    const char *names[MAX_CHANNELS];
    for (int i = 0; i < nt->nchannels; i++)
        names[i] = nt->channels[i];
    return ts_store_listen_open(nt->conninfo, names, nt->nchannels);
}

/* Everything may have changed while we were not listening. */
static void bump_all(struct ts_notify *nt)
{
    pthread_mutex_lock(&nt->mu);
    for (int c = 0; c < nt->nchannels; c++)
        for (size_t s = 0; s < SLOTS; s++)
            nt->counts[c][s]++;
    for (size_t w = 0; w < WAKES; w++)
        pthread_cond_broadcast(&nt->wake[w]);
    pthread_mutex_unlock(&nt->mu);
}

/* One notification: its channel's count for the key in its payload. */
static void count(const char *channel, const char *payload, void *ud)
{
    struct ts_notify *nt = ud;
    int c = channel_index(nt, channel);
    if (c >= 0) {
        size_t s = slot_of(strtoll(payload, NULL, 10));
        nt->counts[c][s]++;
        pthread_cond_broadcast(&nt->wake[wake_of(c, s)]);
    }
}

static void drain(struct ts_notify *nt)
{
    pthread_mutex_lock(&nt->mu);
    ts_store_listen_drain(nt->pg, count, nt);
    pthread_mutex_unlock(&nt->mu);
}

static void *run(void *arg)
{
    struct ts_notify *nt = arg;
    while (!atomic_load(&nt->stop)) {
        if (nt->pg == NULL) {
            nt->pg = connect_and_listen(nt);
            if (nt->pg == NULL) {
                struct timespec ts = {0, 500 * 1000 * 1000};
                nanosleep(&ts, NULL);
                continue;
            }
            bump_all(nt);
        }
        struct pollfd p = {.fd = ts_store_listen_fd(nt->pg), .events = POLLIN};
        int rc = poll(&p, 1, 200);
        if (rc < 0 && errno != EINTR)
            break;
        if (rc > 0 && ts_store_listen_read(nt->pg) != 0) {
            ts_store_listen_close(nt->pg);
            nt->pg = NULL;
            continue;
        }
        drain(nt);
    }
    return NULL;
}

enum ts_err ts_notify_start(const char *conninfo, const char *const *channels, int n,
                            struct ts_notify **out, struct ts_error *err)
{
    if (n > MAX_CHANNELS)
        return ts_error_set(err, TS_ERR_INTERNAL, "too many notification channels: %d", n);
    struct ts_notify *nt = calloc(1, sizeof(*nt));
    if (nt == NULL || (nt->conninfo = strdup(conninfo)) == NULL) {
        free(nt);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++)
        snprintf(nt->channels[i], sizeof(nt->channels[i]), "%s", channels[i]);
    nt->nchannels = n;
    pthread_mutex_init(&nt->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    for (size_t w = 0; w < WAKES; w++)
        pthread_cond_init(&nt->wake[w], &ca);
    pthread_condattr_destroy(&ca);
    nt->pg = connect_and_listen(nt);
    if (nt->pg == NULL) {
        ts_notify_stop(nt);
        return ts_error_set(err, TS_ERR_DATABASE, "cannot LISTEN for notifications");
    }
    if (pthread_create(&nt->thread, NULL, run, nt) != 0) {
        ts_store_listen_close(nt->pg);
        nt->pg = NULL;
        ts_notify_stop(nt);
        return ts_error_set(err, TS_ERR_INTERNAL, "cannot start the notification thread");
    }
    *out = nt;
    return TS_OK;
}

void ts_notify_stop(struct ts_notify *nt)
{
    if (nt == NULL)
        return;
    if (nt->thread) {
        atomic_store(&nt->stop, true);
        pthread_join(nt->thread, NULL);
    }
    ts_store_listen_close(nt->pg);
    for (size_t w = 0; w < WAKES; w++)
        pthread_cond_destroy(&nt->wake[w]);
    pthread_mutex_destroy(&nt->mu);
    free(nt->conninfo);
    free(nt);
}

uint64_t ts_notify_seq(struct ts_notify *nt, const char *channel, int64_t key)
{
    int c = channel_index(nt, channel);
    if (c < 0)
        return 0;
    pthread_mutex_lock(&nt->mu);
    uint64_t v = nt->counts[c][slot_of(key)];
    pthread_mutex_unlock(&nt->mu);
    return v;
}

bool ts_notify_wait(struct ts_notify *nt, const char *channel, int64_t key, uint64_t seen,
                    int timeout_ms)
{
    int c = channel_index(nt, channel);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    size_t s = slot_of(key);
    bool moved = false;
    pthread_mutex_lock(&nt->mu);
    while (c >= 0 && !(moved = nt->counts[c][s] != seen)) {
        if (pthread_cond_timedwait(&nt->wake[wake_of(c, s)], &nt->mu, &deadline) == ETIMEDOUT)
            break;
        if (nt->counts[c][s] == seen)
            atomic_fetch_add(&nt->spurious, 1);
    }
    if (c >= 0)
        moved = nt->counts[c][s] != seen;
    pthread_mutex_unlock(&nt->mu);
    if (c < 0) { /* an unknown channel never moves: just wait out the time */
        struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return moved;
}

uint64_t ts_notify_spurious(struct ts_notify *nt)
{
    return atomic_load(&nt->spurious);
}
