/*
 * schedloop.c - leader election and the scheduler cycle (schedloop.h).
 *
 * The loop has a pool of one connection of its own: the session that holds
 * the leader lock. A reset of that connection (ts_db_acquire reconnects a
 * broken one) ends the session and with it the lock, so the loop notices the
 * new backend pid and competes again.
 */
#include "server/schedloop.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/arena.h"
#include "api/clock.h"
#include "api/log.h"
#include "server/notify.h"
#include "server/sched/sched.h"
#include "server/server.h"
#include "server/store/store.h"

#define LEADER_LOCK "7594198210366497282" /* 0x6965737365726102: 'tessera' + 2 */
#define TICK_MS 1000 /* the sweep's period, and how often a follower tries the lock */

struct ts_schedloop {
    struct ts_server *srv;
    struct ts_db *db; /* one connection: the leader's session */
    pthread_t thread;
    atomic_bool stop;
    atomic_bool leader;
    atomic_int_fast64_t cycles; /* full cycles: snapshot, decide, write */
    atomic_int_fast64_t sweeps; /* ticks that only swept */
    atomic_int_fast64_t binds;  /* decisions written, by kind */
    atomic_int_fast64_t stops;
    atomic_int_fast64_t cycle_us; /* time in full cycles, microseconds */
    atomic_int_fast64_t last_cycle_us;
    atomic_int_fast64_t job_rows;   /* job rows the snapshots read */
    struct ts_sched_jobcache *jobs; /* the leader's, between cycles; NULL until it leads */
    int backend_pid;                /* of the session holding the lock */
    int64_t db_down_ms; /* when this replica, leading, found the database unreachable; 0: not */
    char checkpoint_root[4096];
};

/* A set of job ids (open addressing; 0 is never a job id). */
struct idset {
    int64_t *v;
    size_t mask;
};

static void idset_add(struct idset *set, int64_t id)
{
    size_t h = (size_t)((uint64_t)id * 0x9e3779b97f4a7c15ULL) & set->mask;
    while (set->v[h] != 0 && set->v[h] != id)
        h = (h + 1) & set->mask;
    set->v[h] = id;
}

static bool idset_has(const struct idset *set, int64_t id)
{
    size_t h = (size_t)((uint64_t)id * 0x9e3779b97f4a7c15ULL) & set->mask;
    while (set->v[h] != 0) {
        if (set->v[h] == id)
            return true;
        h = (h + 1) & set->mask;
    }
    return false;
}

/* Which decisions to write now. A bind that needs room made by stopping
 * jobs waits until they have stopped (they hold the GPUs through their grace
 * period): it is written by a later cycle, when it simply fits. So are binds
 * onto a node where a job is being stopped, and the binds of jobs this cycle
 * stops. Stops are written only while no job is stopping already: one made
 * now could stop more than needed, since the room of those is about to free.
 * One pass: it keeps the nodes stopped on so far, the jobs stopped (and
 * those the stops serve) so far, and the GPUs jobs already stopping hold. */
static size_t safe_decisions(const struct ts_sched_snapshot *s, const struct ts_sched_rows *rows,
                             const struct ts_sched_result *r, struct ts_arena *a,
                             const struct ts_sched_decision **out, int64_t *held, size_t *nheld)
{
    size_t cap = 16;
    while (cap < 2 * r->ndecisions + 2)
        cap *= 2;
    struct idset waits = {ts_arena_alloc(a, cap * sizeof(int64_t)), cap - 1};
    bool *stop_node = ts_arena_alloc(a, s->nnodes + 1);
    bool *stopping_gpu = ts_arena_alloc(a, s->ngpus + 1);
    *nheld = 0;
    if (waits.v == NULL || stop_node == NULL || stopping_gpu == NULL)
        return 0; /* out of memory: write nothing this cycle */
    bool stopping = false;
    for (size_t i = 0; i < s->nrunning; i++) {
        if (!rows->running_stopping[i])
            continue;
        stopping = true;
        for (size_t k = 0; k < s->running[i].nslots; k++)
            stopping_gpu[s->running[i].slots[k].gpu] = true;
    }
    size_t n = 0;
    for (size_t i = 0; i < r->ndecisions; i++) {
        const struct ts_sched_decision *d = &r->decisions[i];
        if (d->action != TS_SCHED_BIND) {
            stop_node[d->node] = true;
            idset_add(&waits, d->job_id);
            if (d->for_job_id > 0)
                idset_add(&waits, d->for_job_id);
            if (!stopping)
                out[n++] = d;
            continue;
        }
        bool wait = stop_node[d->node] || idset_has(&waits, d->job_id);
        for (size_t k = 0; k < d->nslots && !wait; k++)
            wait = stopping_gpu[d->slots[k].gpu];
        if (wait)
            held[(*nheld)++] = d->job_id;
        else
            out[n++] = d;
    }
    return n;
}

/*
 * The clock's part in the decisions: while jobs wait, a running job's
 * minimum runtime ending may let one take its GPUs. Seconds from the
 * snapshot's `now` to the first such end, or -1 when nothing waits for the
 * clock.
 */
static int64_t clock_due_s(const struct ts_sched_snapshot *s)
{
    if (s->npending == 0)
        return -1;
    int64_t due = -1;
    for (size_t i = 0; i < s->nrunning; i++) {
        const struct ts_sched_running *r = &s->running[i];
        int64_t m = s->projects[r->project].min_runtime_s;
        if (m < 0)
            m = s->config.min_runtime_s;
        int64_t left = r->started_at + m - s->now;
        if (r->preemptible && left > 0 && (due < 0 || left < due))
            due = left;
    }
    return due;
}

/* A full cycle: sweep, snapshot, decide, write. *due_s: as clock_due_s. */
static enum ts_err cycle(struct ts_schedloop *l, struct ts_dbconn *c, int64_t *due_s,
                         struct ts_error *err)
{
    const struct ts_server_config *cfg = &l->srv->cfg;
    *due_s = -1;
    struct ts_sweep_result sw;
    enum ts_err e = ts_store_sched_sweep(c, cfg->node_timeout, cfg->node_lost_timeout, &sw, err);
    if (e != TS_OK)
        return e;
    if (sw.nodes_not_ready || sw.jobs_requeued || sw.jobs_timed_out)
        ts_log_info("scheduler sweep nodes_not_ready=%d jobs_requeued=%d jobs_timed_out=%d",
                    sw.nodes_not_ready, sw.jobs_requeued, sw.jobs_timed_out);
    struct ts_arena *a = ts_arena_new();
    if (a == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    int64_t t0 = ts_now_ms();
    struct ts_sched_snapshot snap = {
        .config = {.strategy = cfg->strategy, .min_runtime_s = cfg->min_runtime}};
    struct ts_sched_rows rows = {0};
    struct ts_sched_result *res = NULL;
    size_t job_rows = 0;
    e = ts_store_sched_snapshot(c, a, l->jobs, &snap, &rows, &job_rows, err);
    atomic_fetch_add(&l->job_rows, (int_fast64_t)job_rows);
    if (e == TS_OK) {
        *due_s = clock_due_s(&snap);
        e = ts_sched_decide(&snap, &res, err);
    }
    if (e != TS_OK) {
        ts_arena_free(a);
        return e;
    }
    int64_t t1 = ts_now_ms();
    const struct ts_sched_decision **ds = ts_arena_alloc(a, sizeof(*ds) * (res->ndecisions + 1));
    int64_t *held = ts_arena_alloc(a, sizeof(*held) * (res->ndecisions + 1));
    struct ts_sched_pending_reason *reasons =
        ts_arena_alloc(a, sizeof(*reasons) * (res->npending + res->ndecisions + 1));
    if (ds == NULL || held == NULL || reasons == NULL) {
        ts_sched_result_free(res);
        ts_arena_free(a);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    size_t nheld = 0, nds = safe_decisions(&snap, &rows, res, a, ds, held, &nheld);
    size_t nreasons = 0;
    for (size_t i = 0; i < res->npending; i++)
        reasons[nreasons++] = res->pending[i];
    for (size_t i = 0; i < nheld; i++)
        reasons[nreasons++] = (struct ts_sched_pending_reason){
            .job_id = held[i],
            .job = -1,
            .code = "waiting_for_reclaim",
            .message = "waiting for jobs that are stopping to free their GPUs",
            .queue_position = (int64_t)(res->npending + i + 1),
        };
    struct ts_sched_apply ap = {
        .decisions = ds,
        .ndecisions = nds,
        .reasons = reasons,
        .nreasons = nreasons,
        .result = res,
        .checkpoint_root = l->checkpoint_root,
    };
    struct ts_sched_refused refused = {0};
    e = ts_store_sched_apply(c, &snap, &rows, &ap, a, &refused, err);
    if (e == TS_OK && nds > 0) {
        size_t binds = 0;
        for (size_t i = 0; i < nds; i++)
            binds += ds[i]->action == TS_SCHED_BIND;
        /* their jobs moved since the snapshot: not written */
        size_t stops = nds - binds - refused.stops;
        binds -= refused.binds;
        atomic_fetch_add(&l->binds, (int_fast64_t)binds);
        atomic_fetch_add(&l->stops, (int_fast64_t)stops);
        ts_log_info("scheduler cycle binds=%zu stops=%zu held=%zu refused=%zu pending=%zu "
                    "decide_ms=%lld total_ms=%lld",
                    binds, stops, nheld, refused.binds + refused.stops, snap.npending,
                    (long long)(t1 - t0), (long long)(ts_now_ms() - t0));
    }
    ts_sched_result_free(res);
    ts_arena_free(a);
    return e;
}

/* Try to lead; true while this session holds the lock. */
static bool lead(struct ts_schedloop *l, struct ts_dbconn *c)
{
    int pid = ts_dbconn_backend_pid(c);
    if (atomic_load(&l->leader) && pid == l->backend_pid)
        return true;
    if (atomic_load(&l->leader))
        ts_log_warn("scheduler: lost the leader session; competing again");
    atomic_store(&l->leader, false);
    struct ts_error err;
    bool got = false;
    if (ts_db_lock_try(c, LEADER_LOCK, &got, &err) != TS_OK)
        return false; /* the database is away: an outage the leader notes */
    if (!got)
        l->db_down_ms = 0; /* another replica leads: its outage to discount, not ours */
    if (got) {
        l->backend_pid = pid;
        atomic_store(&l->leader, true);
        ts_log_info("scheduler: this replica leads (strategy=%s)", l->srv->cfg.strategy);
    }
    return got;
}

/*
 * The database is back after being unreachable: no agent's report could be
 * recorded meanwhile, so that time must not count as the nodes' silence
 * (else the first sweep would find every node not ready, or lost, and
 * requeue healthy jobs). Retried at the next tick when it fails.
 */
static void forgive(struct ts_schedloop *l, struct ts_dbconn *c)
{
    double secs = (double)(ts_now_ms() - l->db_down_ms) / 1000.0 + 1.0; /* a tick's worth more */
    struct ts_error err;
    ts_error_clear(&err);
    int n = 0;
    if (ts_store_sched_forgive(c, secs, &n, &err) != TS_OK) {
        ts_log_warn("could not discount the database outage from the nodes' silence: %s",
                    err.message);
        return;
    }
    ts_log_warn("the database was unreachable for %.1f s; that time does not count as the "
                "silence of %d nodes",
                secs - 1.0, n);
    l->db_down_ms = 0;
}

/* The sweep alone (one statement): what a tick costs when nothing changed. */
static void sweep(struct ts_schedloop *l, struct ts_dbconn *c)
{
    const struct ts_server_config *cfg = &l->srv->cfg;
    struct ts_sweep_result sw;
    struct ts_error err;
    ts_error_clear(&err);
    enum ts_err e = ts_store_sched_sweep(c, cfg->node_timeout, cfg->node_lost_timeout, &sw, &err);
    if (e != TS_OK) {
        ts_log_warn("scheduler sweep failed: %s", err.message);
        if (e == TS_ERR_DATABASE && l->db_down_ms == 0)
            l->db_down_ms = ts_now_ms();
        return;
    }
    atomic_fetch_add(&l->sweeps, 1);
    if (sw.nodes_not_ready || sw.jobs_requeued || sw.jobs_timed_out)
        ts_log_info("scheduler sweep nodes_not_ready=%d jobs_requeued=%d jobs_timed_out=%d",
                    sw.nodes_not_ready, sw.jobs_requeued, sw.jobs_timed_out);
    /* what it changed fires the triggers: the next wait wakes a full cycle */
}

/* Sleep until the monotonic time `until` or a stop, whichever comes first. */
static void pause_until(struct ts_schedloop *l, int64_t until)
{
    for (int64_t now = ts_now_ms(); now < until && !atomic_load(&l->stop); now = ts_now_ms())
        ts_sleep_ms(until - now < 50 ? (long)(until - now) : 50);
}

/*
 * A full cycle runs when something the scheduler reads changed since the
 * last one began (NOTIFY tessera_sched: a submission, a cancel, a report
 * that moved a job, a quota, a node's state), when this replica has just
 * become the leader, or when the clock is due (a minimum runtime ending
 * while jobs wait). Otherwise a tick of TICK_MS only sweeps: an idle
 * cluster costs the database one statement a second.
 *
 * Two cycles start at least --cycle-interval apart: what changed meanwhile
 * waits for the next one, so that under churn many changes share a cycle
 * (each reads every unfinished job) instead of one running per change.
 * A change after a quiet spell is decided at once.
 */
static void *run(void *arg)
{
    struct ts_schedloop *l = arg;
    struct ts_notify *nt = l->srv->notify;
    const int64_t interval = l->srv->cfg.cycle_interval;
    bool need = true;    /* a full cycle is due whatever the notifications say */
    bool failed = false; /* the last cycle failed: the next one waits a tick */
    uint64_t cycled = 0; /* the notification count when the last full cycle began */
    int64_t due_ms = -1; /* monotonic time the clock asks for a cycle; -1: never */
    int64_t tick_ms = 0; /* monotonic time of the next sweep */
    int64_t next_ms = 0; /* monotonic time before which no cycle starts */
    while (!atomic_load(&l->stop)) {
        uint64_t seen = ts_notify_seq(nt, "tessera_sched", 0);
        struct ts_error err;
        ts_error_clear(&err);
        struct ts_dbconn *c = ts_db_acquire(l->db, 1000, &err);
        bool was = atomic_load(&l->leader);
        if (c == NULL && was && l->db_down_ms == 0)
            l->db_down_ms = ts_now_ms(); /* the leader lost the database */
        bool leader = c != NULL && lead(l, c);
        if (leader && !was) {
            need = true;
            next_ms = 0;
            /* what it kept when it led before is read again in full */
            ts_store_sched_jobcache_free(l->jobs);
            l->jobs = ts_store_sched_jobcache_new(); /* NULL: every cycle reads every job */
        }
        if (leader && l->db_down_ms != 0)
            forgive(l, c);
        int64_t now = ts_now_ms();
        bool want = need || seen != cycled || (due_ms >= 0 && now >= due_ms);
        if (leader && want && now >= next_ms) {
            int64_t due_s;
            cycled = seen;
            need = failed = false;
            next_ms = now + interval;
            enum ts_err e = cycle(l, c, &due_s, &err);
            int64_t took = ts_now_ms() - now;
            atomic_fetch_add(&l->cycles, 1);
            atomic_fetch_add(&l->cycle_us, took * 1000);
            atomic_store(&l->last_cycle_us, took * 1000);
            tick_ms = now + TICK_MS; /* the cycle swept */
            due_ms = due_s < 0 ? -1 : ts_now_ms() + due_s * 1000;
            if (e == TS_ERR_CONFLICT) {
                ts_log_debug("scheduler: %s; deciding again", err.message);
                need = true; /* as soon as the interval allows */
            } else if (e != TS_OK) {
                ts_log_warn("scheduler cycle failed: %s", err.message);
                need = failed = true; /* again at the next tick */
                if (e == TS_ERR_DATABASE && l->db_down_ms == 0)
                    l->db_down_ms = now;
            }
        } else if (leader && !want && now >= tick_ms) {
            sweep(l, c);
            tick_ms = now + TICK_MS;
        }
        ts_db_release(l->db, c);
        now = ts_now_ms();
        if (leader && !failed &&
            (need || ts_notify_seq(nt, "tessera_sched", 0) != cycled ||
             (due_ms >= 0 && now >= due_ms))) {
            pause_until(l, next_ms); /* a cycle is wanted: when the interval allows */
            continue;
        }
        /* a leader waits for a change, its next sweep or the clock; others
         * try the lock again a tick later */
        int64_t wait = leader ? tick_ms - now : TICK_MS;
        if (leader && failed)
            wait = TICK_MS;
        if (leader && due_ms >= 0 && due_ms - now < wait)
            wait = due_ms - now;
        if (wait > 0)
            ts_notify_wait(nt, "tessera_sched", 0, seen, (int)wait);
    }
    return NULL;
}

enum ts_err ts_schedloop_start(struct ts_server *srv, struct ts_error *err)
{
    if (!srv->cfg.scheduler)
        return TS_OK;
    struct ts_schedloop *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    l->srv = srv;
    if (srv->cfg.checkpoint_root != NULL)
        snprintf(l->checkpoint_root, sizeof(l->checkpoint_root), "%s", srv->cfg.checkpoint_root);
    else
        snprintf(l->checkpoint_root, sizeof(l->checkpoint_root), "%s/checkpoints",
                 srv->cfg.data_dir);
    enum ts_err e = ts_db_open(srv->conninfo, 1, &l->db, err);
    if (e != TS_OK) {
        free(l);
        return e;
    }
    if (pthread_create(&l->thread, NULL, run, l) != 0) {
        ts_db_close(l->db);
        free(l);
        return ts_error_set(err, TS_ERR_INTERNAL, "cannot start the scheduler thread");
    }
    srv->loop = l;
    return TS_OK;
}

void ts_schedloop_stop(struct ts_server *srv)
{
    struct ts_schedloop *l = srv->loop;
    if (l == NULL)
        return;
    atomic_store(&l->stop, true);
    pthread_join(l->thread, NULL);
    ts_db_close(l->db); /* ends the session: the lock is free for another replica */
    ts_store_sched_jobcache_free(l->jobs);
    free(l);
    srv->loop = NULL;
}

bool ts_schedloop_leader(const struct ts_server *srv)
{
    return srv->loop != NULL && atomic_load(&srv->loop->leader);
}

void ts_schedloop_stats(const struct ts_server *srv, struct ts_schedloop_stats *out)
{
    memset(out, 0, sizeof(*out));
    const struct ts_schedloop *l = srv->loop;
    if (l == NULL)
        return;
    out->leader = atomic_load(&l->leader);
    out->cycles = (int64_t)atomic_load(&l->cycles);
    out->sweeps = (int64_t)atomic_load(&l->sweeps);
    out->binds = (int64_t)atomic_load(&l->binds);
    out->stops = (int64_t)atomic_load(&l->stops);
    out->cycle_seconds = (double)atomic_load(&l->cycle_us) / 1e6;
    out->last_cycle_seconds = (double)atomic_load(&l->last_cycle_us) / 1e6;
    out->job_rows = (int64_t)atomic_load(&l->job_rows);
}
