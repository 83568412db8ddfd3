/*
 * jobswap.c - the broker's work on whole jobs (broker.h): suspend in place,
 * resume, and idle detach.
 *
 * Suspend: every process of the job (the live slots of its home ledger,
 * the one of its CUDA device 0) gets TS_CMD_SUSPEND: a swap-out that also
 * holds its GPU calls until TS_CMD_SWAP_IN, so a call made between the
 * acknowledgement and the stop cannot take the memory back. When all are
 * out the job's process group is stopped (SIGSTOP) and reported suspended.
 * A process that cannot go out makes the suspend fail: the job is stopped
 * instead (the main thread) and requeued by the server.
 *
 * Resume: SIGCONT, then TS_CMD_SWAP_IN to every process that is out. The
 * processes' swap-ins wait for room as long as it takes (the resolver makes
 * it, like for any waiter), so the job stays reported suspended, with what
 * it waits for, until every process is back; only then is it running.
 *
 * Idle detach: a running job under the shim with idle_swap_after has each
 * process that made no GPU call for that long swapped out while it keeps
 * running; its next GPU call brings the memory back. The scheduler still
 * counts its request.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent/daemon/broker.h"
#include "api/clock.h"
#include "api/log.h"

#define JOBS_MAX 1024         /* jobs looked at in one pass (a node runs fewer) */
#define DETACH_RETRY_MS 60000 /* after a detach that failed */
#define SWAPIN_RETRY_MS 5000  /* a resume's swap-in that failed is asked again */

enum todo { NONE, SUSPEND, SUSPEND_CHECK, RESUME, RESUME_CHECK, DETACH };

struct look {
    int64_t id;
    int attempt;
    enum todo todo;
    bool shim;
    unsigned gpu0;
    int idle_after;
};

/* The live process slots of job (id, attempt) in its home ledger. */
static size_t job_procs(struct ts_broker *b, const struct look *k, struct ts_ledger **home,
                        int *slots, size_t max)
{
    *home = ts_ledgers_get(b->s, k->gpu0);
    int j = *home != NULL ? ts_ledger_find_job(*home, ts_ledger_key(k->id, k->attempt)) : -1;
    size_t n = 0;
    for (int i = 0; j >= 0 && i < TS_LEDGER_PROCS && n < max; i++)
        if (atomic_load(&(*home)->procs[i].pid) != 0 && (*home)->procs[i].job == j)
            slots[n++] = i;
    return n;
}

/* What to do for each job, from one short look at the list. */
static size_t look(struct ts_broker *b, struct look *out)
{
    size_t n = 0;
    bool reserve = b->s->swap_bytes > 0;
    int64_t now = ts_now_ms();
    pthread_mutex_lock(&b->a->mu);
    for (struct ts_ajob *j = b->jobtab->jobs; j != NULL && n < JOBS_MAX; j = j->next) {
        if (j->phase != TS_AJOB_RUNNING || j->stopping || j->suspend_failed || j->evict_req ||
            j->move == TS_AJOB_MOVE_MOVING || ts_broker_moving(b, j->id, j->attempt))
            continue; /* a move holds the process at its gate: no other command meanwhile */
        enum todo t = NONE;
        if (j->suspending)
            t = SUSPEND_CHECK;
        else if (j->want_suspend && !j->suspended)
            t = SUSPEND;
        else if (!j->want_suspend && j->suspended)
            t = j->resuming ? RESUME_CHECK : RESUME;
        else if (j->want_suspend && j->resuming)
            t = SUSPEND; /* suspended again before it was back */
        else if (!j->suspended && j->shim && reserve && j->idle_swap_after > 0 &&
                 now >= j->retry_ms)
            t = DETACH;
        if (t != NONE)
            out[n++] = (struct look){
                j->id, j->attempt, t, j->shim, j->ngpus ? j->gpus[0] : 0, j->idle_swap_after};
    }
    pthread_mutex_unlock(&b->a->mu);
    return n;
}

/* ---- suspend ---------------------------------------------------------------- */

static void fail_suspend(struct ts_broker *b, const struct look *k, const char *why)
{
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_jobtab_find(b->jobtab, k->id, k->attempt);
    if (j != NULL) {
        j->suspend_failed = true;
        j->suspending = false;
    }
    pthread_mutex_unlock(&b->a->mu);
    ts_events_add(b->ev, k->id, k->attempt, "swap_failed",
                  "could not suspend the job: %s; it is stopped instead", why);
    ts_jobtab_wake(b->jobtab);
}

static void start_suspend(struct ts_broker *b, const struct look *k)
{
    char why[256] = "";
    if (!k->shim) {
        snprintf(why, sizeof(why), "the job runs without the shim (whole GPUs): cannot swap it");
    } else if (b->s->swap_bytes == 0) {
        snprintf(why, sizeof(why), "this node has no host swap reserve (--swap-reserve)");
    } else {
        struct ts_ledger *home;
        int slots[TS_LEDGER_PROCS];
        size_t n = job_procs(b, k, &home, slots, TS_LEDGER_PROCS);
        for (size_t i = 0; i < n && why[0] == '\0'; i++) {
            bool no_room, nothing;
            pid_t pid = atomic_load(&home->procs[slots[i]].pid);
            if (ts_broker_swap_out(b, k->id, k->attempt, pid, TS_WHY_SUSPEND, &no_room, &nothing,
                                   why, sizeof(why)) == NULL &&
                nothing)
                why[0] = '\0'; /* holds no GPU memory: nothing to do for it */
        }
    }
    if (why[0] != '\0') {
        fail_suspend(b, k, why);
        return;
    }
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_jobtab_find(b->jobtab, k->id, k->attempt);
    if (j != NULL) {
        j->suspending = true;
        j->resuming = false;
    }
    pthread_mutex_unlock(&b->a->mu);
}

/* Every swap-out of the suspend is over: stop the job. */
static void finish_suspend(struct ts_broker *b, const struct look *k)
{
    if (ts_broker_busy_job(b, k->id, k->attempt))
        return;
    char x[32];
    bool stopped = false, rerun = false;
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_jobtab_find(b->jobtab, k->id, k->attempt);
    if (j != NULL && j->suspending) {
        j->suspending = false;
        if (j->want_suspend && !j->stopping && !ts_ajob_final(j)) {
            kill(-j->pid, SIGSTOP);
            j->suspended = stopped = true;
            j->resuming = false;
            j->wait_msg[0] = '\0';
            j->swapped_bytes = ts_ledgers_job_swapped(b->s, k->id, k->attempt);
            b->a->report_now = true;
            pthread_cond_broadcast(&b->a->cond);
        } else if (!j->stopping) {
            rerun = true; /* listed with run again before it was stopped */
        }
    }
    pthread_mutex_unlock(&b->a->mu);
    if (stopped)
        ts_events_add(
            b->ev, k->id, k->attempt, "suspended",
            "suspended: %s of GPU memory moved to the host swap reserve, processes "
            "stopped",
            ts_broker_bytes(ts_ledgers_job_swapped(b->s, k->id, k->attempt), x, sizeof(x)));
    if (rerun) {
        struct ts_ledger *home;
        int slots[TS_LEDGER_PROCS];
        size_t n = job_procs(b, k, &home, slots, TS_LEDGER_PROCS);
        for (size_t i = 0; i < n; i++) {
            struct ts_ledger_proc *p = &home->procs[slots[i]];
            atomic_store(&p->cmd, TS_CMD_SWAP_IN);
            atomic_fetch_add(&p->cmd_seq, 1);
            ts_futex_wake(&p->cmd_seq);
        }
    }
}

/* ---- resume --------------------------------------------------------------- */

static void ask_swap_in(struct ts_ledger_proc *p)
{
    atomic_store(&p->cmd, TS_CMD_SWAP_IN);
    atomic_fetch_add(&p->cmd_seq, 1);
    ts_futex_wake(&p->cmd_seq);
}

static void start_resume(struct ts_broker *b, const struct look *k)
{
    bool go = false;
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_jobtab_find(b->jobtab, k->id, k->attempt);
    if (j != NULL && j->suspended && !j->want_suspend) {
        kill(-j->pid, SIGCONT);
        j->resuming = go = true;
        j->resume_started_ms = ts_now_ms();
    }
    pthread_mutex_unlock(&b->a->mu);
    if (!go)
        return;
    struct ts_ledger *home;
    int slots[TS_LEDGER_PROCS];
    size_t n = job_procs(b, k, &home, slots, TS_LEDGER_PROCS);
    for (size_t i = 0; i < n; i++)
        if (atomic_load(&home->procs[slots[i]].swap_state) != TS_SWAP_RESIDENT)
            ask_swap_in(&home->procs[slots[i]]);
}

/* Whether every process of the job is back; else what one waits for.
 * retry: ask the processes whose swap-in failed (a driver error) again. */
static bool all_back(struct ts_broker *b, const struct look *k, bool retry, char *msg, size_t len)
{
    struct ts_ledger *home;
    int slots[TS_LEDGER_PROCS];
    size_t n = job_procs(b, k, &home, slots, TS_LEDGER_PROCS);
    msg[0] = '\0';
    bool back = true;
    for (size_t i = 0; i < n; i++) {
        struct ts_ledger_proc *p = &home->procs[slots[i]];
        uint32_t state = atomic_load(&p->swap_state);
        bool acked = atomic_load(&p->ack_seq) == atomic_load(&p->cmd_seq);
        if (state == TS_SWAP_RESIDENT && acked)
            continue;
        back = false;
        if (state == TS_SWAP_OUT && acked && atomic_load(&p->swap_error) != 0 && retry)
            ask_swap_in(p); /* its swap-in failed (a driver error): again */
    }
    if (back)
        return true;
    /* what a process of the job waits for, on any of its GPUs */
    for (unsigned g = 0; g < b->s->count && msg[0] == '\0'; g++) {
        struct ts_ledger *l = b->s->l[g];
        int j = ts_ledger_find_job(l, ts_ledger_key(k->id, k->attempt));
        for (int i = 0; j >= 0 && i < TS_LEDGER_PROCS && msg[0] == '\0'; i++) {
            struct ts_ledger_proc *p = &l->procs[i];
            uint64_t need = atomic_load(&p->need_bytes);
            if (atomic_load(&p->pid) == 0 || p->job != j || need == 0)
                continue;
            char a1[32], f[32], h[160];
            ts_broker_holders(b, g, k->id, h, sizeof(h));
            snprintf(msg, len, "waiting for %s on GPU %u to come back: %s free; %s",
                     ts_broker_bytes(need, a1, sizeof(a1)), b->s->index[g],
                     ts_broker_bytes(ts_broker_free(b, g), f, sizeof(f)), h);
        }
    }
    if (msg[0] == '\0')
        snprintf(msg, len, "its GPU memory is coming back from the host swap reserve");
    return false;
}

static void check_resume(struct ts_broker *b, const struct look *k)
{
    char msg[256];
    int64_t now = ts_now_ms();
    bool retry = false;
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *r = ts_jobtab_find(b->jobtab, k->id, k->attempt);
    if (r != NULL && now >= r->retry_ms) {
        r->retry_ms = now + SWAPIN_RETRY_MS;
        retry = true;
    }
    pthread_mutex_unlock(&b->a->mu);
    bool back = all_back(b, k, retry, msg, sizeof(msg));
    double took = 0;
    uint64_t swapped = 0;
    bool done = false;
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_jobtab_find(b->jobtab, k->id, k->attempt);
    if (j != NULL && j->resuming) {
        if (back) {
            swapped = j->swapped_bytes;
            took = (double)(ts_now_ms() - j->resume_started_ms) / 1000.0;
            j->suspended = j->resuming = false;
            j->swapped_bytes = 0;
            j->wait_msg[0] = '\0';
            b->a->report_now = done = true;
            pthread_cond_broadcast(&b->a->cond);
        } else if (strcmp(j->wait_msg, msg) != 0) {
            if (j->wait_msg[0] == '\0') {
                b->a->report_now = true;
                pthread_cond_broadcast(&b->a->cond);
            }
            snprintf(j->wait_msg, sizeof(j->wait_msg), "%s", msg);
        }
    }
    pthread_mutex_unlock(&b->a->mu);
    char x[32];
    if (done)
        ts_events_add(b->ev, k->id, k->attempt, "resumed",
                      "resumed: processes continued and %s of GPU memory back from the host swap "
                      "reserve in %.2f s",
                      ts_broker_bytes(swapped, x, sizeof(x)), took);
}

/* ---- idle detach ---------------------------------------------------------- */

static void detach(struct ts_broker *b, const struct look *k)
{
    struct ts_ledger *home;
    int slots[TS_LEDGER_PROCS];
    size_t n = job_procs(b, k, &home, slots, TS_LEDGER_PROCS);
    uint64_t now = ts_ledger_now_ns(), after = (uint64_t)k->idle_after * 1000000000ull;
    for (size_t i = 0; i < n; i++) {
        struct ts_ledger_proc *p = &home->procs[slots[i]];
        pid_t pid = atomic_load(&p->pid);
        uint64_t last = atomic_load(&p->last_call_ns);
        if (atomic_load(&p->swap_state) != TS_SWAP_RESIDENT || atomic_load(&p->need_bytes) != 0 ||
            last > now || now - last < after || ts_broker_busy_pid(b, pid))
            continue;
        bool no_room, nothing;
        char why[256];
        struct ts_action *x = ts_broker_swap_out(b, k->id, k->attempt, pid, TS_WHY_DETACH, &no_room,
                                                 &nothing, why, sizeof(why));
        if (x != NULL) {
            snprintf(x->note, sizeof(x->note), "%.0f s without a GPU call",
                     (double)(now - last) / 1e9);
        } else if (!nothing) {
            struct ts_action fake = {
                .why = TS_WHY_DETACH, .id = k->id, .attempt = k->attempt, .pid = pid};
            ts_jobswap_done(b, &fake, false, why);
        }
    }
}

void ts_jobswap_done(struct ts_broker *b, struct ts_action *x, bool ok, const char *why)
{
    char m[32];
    if (x->why == TS_WHY_SUSPEND) {
        if (!ok) {
            struct look k = {.id = x->id, .attempt = x->attempt};
            fail_suspend(b, &k, why);
        }
        return;
    }
    if (ok) {
        ts_events_add(b->ev, x->id, x->attempt, "detached",
                      "detached pid %d after %s: %s of GPU memory moved to the host swap "
                      "reserve; it keeps running and its next GPU call brings the memory back",
                      (int)x->pid, x->note, ts_broker_bytes(x->bytes, m, sizeof(m)));
        return;
    }
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_jobtab_find(b->jobtab, x->id, x->attempt);
    if (j != NULL)
        j->retry_ms = ts_now_ms() + DETACH_RETRY_MS;
    pthread_mutex_unlock(&b->a->mu);
    ts_events_add(b->ev, x->id, x->attempt, "swap_failed",
                  "could not detach idle pid %d: %s; tried again in %d s", (int)x->pid, why,
                  DETACH_RETRY_MS / 1000);
}

void ts_jobswap_pass(struct ts_broker *b)
{
    struct look k[JOBS_MAX];
    size_t n = look(b, k);
    for (size_t i = 0; i < n; i++) {
        switch (k[i].todo) {
        case SUSPEND:
            start_suspend(b, &k[i]);
            break;
        case SUSPEND_CHECK:
            finish_suspend(b, &k[i]);
            break;
        case RESUME:
            start_resume(b, &k[i]);
            break;
        case RESUME_CHECK:
            check_resume(b, &k[i]);
            break;
        case DETACH:
            detach(b, &k[i]);
            break;
        case NONE:
            break;
        }
    }
}
