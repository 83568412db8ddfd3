/*
 * reconcile.c - make the node's jobs match the desired state.
 *
 * Jobs are told apart by (id, attempt). A desired job with action run that
 * the node does not have is started, unless an earlier attempt of the same
 * job still runs here (it is being stopped; the new attempt waits for it, so
 * two attempts never share the checkpoint folder). Action stop, or a job
 * running here that the desired state does not name in that attempt, stops
 * it: SIGTERM, the grace period, SIGKILL. A job this node already ran in
 * that attempt is never started again; its final state is reported again.
 *
 * Action suspend keeps a running job on the node, swapped out and stopped
 * (the broker does it); listed with run again in the same attempt it is
 * resumed; stopped (or left out) while suspended it is continued first so
 * that SIGTERM reaches it. A job the node does not have is never started
 * for a suspend.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent/daemon/reconcile.h"
#include "agent/daemon/events.h"
#include "agent/daemon/nodesched.h"
#include "agent/daemon/repack.h"
#include "api/log.h"
#include "api/units.h"
#include "api/wire.h"

/* The desired job (id, attempt) in d, or NULL. */
static const struct ts_desired_job *find_desired(const struct ts_desired *d, int64_t id,
                                                 int attempt)
{
    for (size_t i = 0; i < d->njobs; i++)
        if (d->jobs[i].id == id && d->jobs[i].attempt == attempt)
            return &d->jobs[i];
    return NULL;
}

static bool earlier_attempt_runs(struct ts_agent *a, int64_t id, int attempt)
{
    for (struct ts_ajob *j = a->jobtab.jobs; j != NULL; j = j->next)
        if (j->id == id && j->attempt != attempt && !ts_ajob_final(j))
            return true;
    return false;
}

static void add_job(struct ts_agent *a, struct ts_ajob *j)
{
    pthread_mutex_lock(&a->mu);
    j->next = a->jobtab.jobs;
    a->jobtab.jobs = j;
    a->report_now = true;
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->mu);
}

/* A job starting where the server put it, on a GPU whose room jobs the
 * node spread there still use (found before it starts, into b): re-packing
 * (repack.h) could not move them back to their logical GPUs (b[].why), so
 * the GPU is overcommitted until one of them ends. Said as an event on
 * each job, once the new one has its folder, so that their owners see why
 * (tessera describe job). */
static void note_in_the_way(struct ts_agent *a, const struct ts_nodesched_block *b, size_t n,
                            int64_t id, int attempt)
{
    for (size_t i = 0; i < n && a->events != NULL; i++) {
        char req[32];
        const char *why = b[i].why[0] != '\0' ? b[i].why : "it was not moved";
        ts_bytesize_format((int64_t)b[i].request_bytes, req, sizeof(req));
        ts_events_add(a->events, b[i].id, b[i].attempt, "not_moved",
                      "job %lld needs the room of gpu %u, where this job runs (allocated on gpu "
                      "%u, request %s): it could not be moved back (%s), gpu %u is "
                      "overcommitted until one of them ends",
                      (long long)id, b[i].physical, b[i].logical, req, why, b[i].physical);
        ts_events_add(a->events, id, attempt, "not_moved",
                      "job %lld runs on gpu %u, which this job needs (it is allocated on gpu "
                      "%u): it could not be moved back (%s), gpu %u is overcommitted until "
                      "one of them ends",
                      (long long)b[i].id, b[i].physical, b[i].logical, why, b[i].physical);
    }
}

static void start(struct ts_agent *a, const struct ts_desired_job *d)
{
    int64_t id = d->id;
    int attempt = d->attempt;
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/jobs/%lld-%d", a->cfg.data_dir, (long long)id, attempt);
    struct ts_ajob *j = ts_ajob_load(dir);
    if (j != NULL) {
        /* ran here before (its folder was marked reported, or is left from
         * a start that did not finish): report it again, never rerun it */
        ts_log_info("job already ran on this node, reporting it again job=%lld attempt=%d",
                    (long long)id, attempt);
        add_job(a, j);
        return;
    }
    struct ts_error err = {0};
    struct ts_arena *ar = ts_arena_new();
    /* the node-level scheduler: a fractional job on the physical GPU where
     * it has most room to burst (the copy names the logical one too) */
    const struct ts_desired_job *moved =
        a->spread && ar != NULL ? ts_nodesched_place(&a->ledgers, d, ar) : NULL;
    if (moved != NULL)
        ts_log_info("spread job=%lld attempt=%d logical_gpu=%d physical_gpu=%d", (long long)id,
                    attempt, moved->gpus[0].logical_index, moved->gpus[0].index);
    struct ts_nodesched_block in_way[8];
    size_t nway = moved == NULL && a->spread
                      ? ts_nodesched_in_the_way(&a->ledgers, a->jobtab.jobs, d, in_way, 8)
                      : 0;
    if (nway > 0 && ts_repack_ask(a, in_way, nway, id, attempt)) {
        /* re-pack on demand: it starts once they are moved back */
        a->repack_pending = true;
        ts_arena_free(ar);
        return;
    }
    j = ts_ajob_start(&a->ctx, moved != NULL ? moved : d, &err);
    ts_arena_free(ar);
    if (j == NULL) {
        ts_log_error("could not start job: %s job=%lld attempt=%d", err.message, (long long)id,
                     attempt);
        return;
    }
    note_in_the_way(a, in_way, nway, id, attempt);
    add_job(a, j);
}

void ts_reconcile_stop(struct ts_agent *a, struct ts_ajob *j, int grace_seconds, const char *reason)
{
    pthread_mutex_lock(&a->mu);
    j->want_suspend = false;
    ts_ajob_stop(j, grace_seconds, reason);
    if (j->suspended && j->pid > 0 && !ts_ajob_final(j)) {
        kill(-j->pid, SIGCONT);
        j->suspended = false;
        j->swapped_bytes = 0;
    }
    pthread_mutex_unlock(&a->mu);
}

static void set_suspend(struct ts_agent *a, struct ts_ajob *j, bool want)
{
    pthread_mutex_lock(&a->mu);
    if (j->want_suspend != want)
        ts_log_info("%s job job=%lld attempt=%d", want ? "suspending" : "resuming",
                    (long long)j->id, j->attempt);
    j->want_suspend = want;
    pthread_mutex_unlock(&a->mu);
}

void ts_reconcile(struct ts_agent *a)
{
    if (a->desired == NULL)
        return;                /* never heard from the server: leave every job as it is */
    a->repack_pending = false; /* a start still waiting for moves sets it again */
    const struct ts_desired *desired = &a->desired->d;
    for (struct ts_ajob *j = a->jobtab.jobs; j != NULL; j = j->next) {
        if (ts_ajob_final(j))
            continue;
        const struct ts_desired_job *d = find_desired(desired, j->id, j->attempt);
        if (d == NULL) {
            ts_reconcile_stop(a, j, j->grace_seconds, "not in the desired state");
        } else if (d->action == TS_DESIRED_STOP) {
            ts_reconcile_stop(a, j, d->grace_seconds >= 0 ? d->grace_seconds : j->grace_seconds,
                              d->stop_reason != NULL ? d->stop_reason : "stop");
        } else if (d->action == TS_DESIRED_SUSPEND) {
            set_suspend(a, j, true);
        } else {
            set_suspend(a, j, false);
        }
    }
    for (size_t i = 0; i < desired->njobs; i++) {
        const struct ts_desired_job *d = &desired->jobs[i];
        if (d->action != TS_DESIRED_RUN)
            continue;
        if (ts_jobtab_find(&a->jobtab, d->id, d->attempt) != NULL ||
            earlier_attempt_runs(a, d->id, d->attempt))
            continue;
        start(a, d);
    }
}
