/*
 * series.c - the sampler thread behind the metric time series.
 *
 * Every --series-interval, just after a bucket starts, the thread borrows a
 * pooled connection for one transaction (ts_store_series_tick): the replica
 * that gets the series' advisory lock writes the points, rolls them up and
 * expires old ones; every replica reads the current figures and hands them
 * to /metrics. A tick that fails is logged (once a minute while it keeps
 * failing) and the next one tries again.
 */
#include "server/series.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "api/clock.h"
#include "api/log.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/store/store.h"

/* One sampler per process (the server is one per process). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; signalled to stop */
    bool stop;
    bool running;
    pthread_t thread;
    struct ts_server *srv;
    struct ts_series_levels levels;
    int64_t failing_since; /* monotonic seconds of the first failed tick; 0: none */
    int64_t last_warned;
} sampler = {.mu = PTHREAD_MUTEX_INITIALIZER};

void ts_series_levels_of(const struct ts_server_config *cfg, struct ts_series_levels *out)
{
    memset(out, 0, sizeof(*out));
    int64_t i = cfg->series_interval;
    if (i < 60) {
        out->resolution[out->n] = i;
        out->retention[out->n++] = cfg->series_retention;
    }
    out->resolution[out->n] = 60;
    out->retention[out->n++] = cfg->series_retention_1m;
    out->resolution[out->n] = 3600;
    out->retention[out->n++] = cfg->series_retention_1h;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void tick(void)
{
    struct ts_server *srv = sampler.srv;
    struct ts_error err;
    ts_error_clear(&err);
    struct ts_arena *a = ts_arena_new();
    struct ts_series_figure *figs = NULL;
    size_t n = 0;
    int64_t at = 0;
    bool leader = false;
    enum ts_err e = TS_ERR_NOMEM;
    if (a != NULL) {
        struct ts_dbconn *c = ts_db_acquire(srv->db, 5000, &err);
        e = c ? ts_store_series_tick(c, &sampler.levels, a, &figs, &n, &at, &leader, &err)
              : err.code;
        if (c)
            ts_db_release(srv->db, c);
    }
    int64_t now = ts_now_ms() / 1000;
    if (e == TS_OK) {
        /* figures older than three intervals are not shown as current */
        ts_metrics_set_figures(srv->metrics, figs, n, at, 3 * srv->cfg.series_interval + 5);
        if (sampler.failing_since != 0)
            ts_log_info("metric series recovered after_s=%lld",
                        (long long)(now - sampler.failing_since));
        sampler.failing_since = 0;
        ts_log_debug("metric series tick at=%lld figures=%zu wrote=%d", (long long)at, n,
                     (int)leader);
    } else {
        if (sampler.failing_since == 0 || now - sampler.last_warned >= 60) {
            ts_log_warn("could not sample the metric series: %s%s%s", err.message,
                        err.detail[0] ? ": " : "", err.detail);
            sampler.last_warned = now;
        }
        if (sampler.failing_since == 0)
            sampler.failing_since = now;
    }
    ts_arena_free(a);
}

static void *run(void *arg)
{
    (void)arg;
    int64_t interval_ms = sampler.srv->cfg.series_interval * 1000;
    /* wake a little after the bucket starts, so the database's clock is in it */
    int64_t lag_ms = interval_ms / 10 < 500 ? interval_ms / 10 : 500;
    pthread_mutex_lock(&sampler.mu);
    while (!sampler.stop) {
        pthread_mutex_unlock(&sampler.mu);
        tick();
        pthread_mutex_lock(&sampler.mu);
        int64_t wall = wall_ms();
        int64_t wait_ms = (wall / interval_ms + 1) * interval_ms + lag_ms - wall;
        int64_t deadline = ts_now_ms() + wait_ms;
        struct timespec ts = {(time_t)(deadline / 1000), (long)(deadline % 1000) * 1000000L};
        while (!sampler.stop && ts_now_ms() < deadline)
            pthread_cond_timedwait(&sampler.cv, &sampler.mu, &ts);
    }
    pthread_mutex_unlock(&sampler.mu);
    return NULL;
}

enum ts_err ts_series_start(struct ts_server *srv, struct ts_error *err)
{
    int64_t i = srv->cfg.series_interval;
    if (i <= 0 || 60 % i != 0)
        return ts_error_field(err, TS_ERR_CONFIG, "series-interval",
                              "series-interval must divide 60s: %llds", (long long)i);
    if (sampler.running)
        return ts_error_set(err, TS_ERR_INTERNAL, "the metric series sampler already runs");
    sampler.srv = srv;
    sampler.stop = false;
    sampler.failing_since = 0;
    ts_series_levels_of(&srv->cfg, &sampler.levels);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sampler.cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&sampler.thread, NULL, run, NULL) != 0) {
        pthread_cond_destroy(&sampler.cv);
        return ts_error_set(err, TS_ERR_INTERNAL, "could not start the metric series thread");
    }
    sampler.running = true;
    return TS_OK;
}

void ts_series_stop(struct ts_server *srv)
{
    if (!sampler.running || sampler.srv != srv)
        return;
    pthread_mutex_lock(&sampler.mu);
    sampler.stop = true;
    pthread_cond_signal(&sampler.cv);
    pthread_mutex_unlock(&sampler.mu);
    pthread_join(sampler.thread, NULL);
    pthread_cond_destroy(&sampler.cv);
    sampler.running = false;
    sampler.srv = NULL;
}
