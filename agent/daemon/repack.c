/*
 * repack.c - re-pack on demand (repack.h): the main thread asks a spread
 * job to move back to its logical GPU for a job that needs the room; the
 * broker moves each of its processes there with TS_CMD_MOVE and, once all
 * acknowledged from their new slots, drops the job from the old GPU's
 * ledger and records where it runs now.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/abi/cuda.h"
#include "agent/daemon/broker.h"
#include "agent/daemon/repack.h"
#include "api/arena.h"
#include "api/clock.h"
#include "api/files.h"
#include "api/log.h"

/* ---- the main thread: asking -------------------------------------------- */

bool ts_repack_ask(struct ts_agent *a, struct ts_nodesched_block *b, size_t n, int64_t id,
                   int attempt)
{
    bool wait = false;
    int64_t now = ts_now_ms();
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < n; i++) {
        struct ts_ajob *j = ts_jobtab_find(&a->jobtab, b[i].id, b[i].attempt);
        b[i].why[0] = '\0';
        if (j == NULL)
            continue;
        bool busy = j->move == TS_AJOB_MOVE_ASKED || j->move == TS_AJOB_MOVE_MOVING;
        bool mine = j->move_for == id && j->move_for_attempt == attempt;
        if (!busy && !mine) {
            j->move = TS_AJOB_MOVE_ASKED;
            j->move_for = id;
            j->move_for_attempt = attempt;
            j->move_asked_ms = now;
            j->move_msg[0] = '\0';
            busy = true;
            ts_log_info("re-pack: moving job=%lld attempt=%d from gpu %u back to gpu %u for "
                        "job=%lld",
                        (long long)j->id, j->attempt, b[i].physical, b[i].logical, (long long)id);
        }
        if (busy && now - j->move_asked_ms < TS_REPACK_WAIT_MS)
            wait = true;
        else if (busy)
            snprintf(b[i].why, sizeof(b[i].why), "its move did not end within %d s",
                     TS_REPACK_WAIT_MS / 1000);
        else
            snprintf(b[i].why, sizeof(b[i].why), "%s",
                     j->move_msg[0] != '\0' ? j->move_msg : "it was not moved");
    }
    pthread_mutex_unlock(&a->mu);
    return wait;
}

/* ---- the broker: ledgers and the job's folder ----------------------------- */

/* Point the job folder's dev0.ledger at GPU index gpu's ledger. 0 or -1. */
static int link_dev0(const struct ts_ledgers *s, const char *jobdir, unsigned gpu)
{
    char from[PATH_MAX + 32], tmp[PATH_MAX + 32], to[PATH_MAX + 32];
    snprintf(from, sizeof(from), "%s/gpu%u.ledger", s->dir, gpu);
    snprintf(tmp, sizeof(tmp), "%s/shim/dev0.ledger.new", jobdir);
    snprintf(to, sizeof(to), "%s/shim/dev0.ledger", jobdir);
    unlink(tmp);
    if (link(from, tmp) != 0 || rename(tmp, to) != 0) {
        ts_log_error("could not point %s at %s: %s", to, from, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* A slot for the job of slot jf of `from` in `to`, with its figures
 * (request, limit, priority, flags). -1 when `to` is full or unusable. */
static int slot_copy(struct ts_ledger *from, int jf, struct ts_ledger *to)
{
    if (ts_ledger_lock(to) != 0)
        return -1;
    const struct ts_ledger_job *o = &from->jobs[jf];
    int j = ts_ledgers_slot_take_locked(to, atomic_load(&o->key), o);
    ts_ledger_unlock(to);
    return j;
}

/* Drop job key from ledger l with the slots of its processes, which run
 * elsewhere now (a move: they no longer write here). */
static void slot_drop(struct ts_ledger *l, uint64_t key)
{
    if (ts_ledger_lock(l) != 0)
        return;
    int j = ts_ledger_find_job(l, key);
    for (int i = 0; j >= 0 && i < TS_LEDGER_PROCS; i++) {
        struct ts_ledger_proc *p = &l->procs[i];
        if (atomic_load(&p->pid) == 0 || p->job != j)
            continue;
        atomic_store(&p->used_bytes, 0);
        atomic_store(&p->swapped_bytes, 0);
        atomic_store(&p->need_bytes, 0);
        p->swap_len = 0;
        atomic_store(&p->pid, 0); /* last: the slot is free */
    }
    if (j >= 0) {
        atomic_store(&l->jobs[j].key, 0);
        atomic_store(&l->jobs[j].used_bytes, 0);
        atomic_store(&l->jobs[j].swapped_bytes, 0);
        atomic_store(&l->burst_bytes, ts_ledger_burst_locked(l));
    }
    ts_ledger_unlock(l);
}

/* spec.json of the job in dir: GPU 0 is gpu now, where the server put it. */
static void spec_moved(const char *dir, unsigned gpu)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/spec.json", dir);
    json_t *v = ts_files_read_json(path), *out = NULL;
    struct ts_arena *ar = v != NULL ? ts_arena_new() : NULL;
    struct ts_desired_job d;
    struct ts_error err = {0};
    if (ar != NULL && ts_wire_desired_job_decode(v, "", ar, &d, &err) == TS_OK && d.ngpus == 1) {
        d.gpus[0].index = (int)gpu;
        d.gpus[0].logical_index = -1;
        out = ts_wire_desired_job_encode(&d);
    }
    if (out == NULL || ts_files_write_json(path, out, 0600) != 0)
        ts_log_error("could not record the move in %s: %s", path,
                     err.message[0] ? err.message : "out of memory or a write error");
    json_decref(out);
    json_decref(v);
    ts_arena_free(ar);
}

/* ---- the broker: the move ------------------------------------------------- */

/* The move ended: the job's record says how, and the main loop looks. */
static void finish(struct ts_broker *b, struct ts_repack_move *m, bool moved, const char *why)
{
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_jobtab_find(b->jobtab, m->id, m->attempt);
    if (j != NULL) {
        j->move = moved ? TS_AJOB_MOVE_DONE : TS_AJOB_MOVE_REFUSED;
        snprintf(j->move_msg, sizeof(j->move_msg), "%s", moved ? "" : why);
        if (moved) {
            j->gpus[0] = b->s->index[m->to];
            j->logical[0] = b->s->index[m->to];
            b->a->report_now = true;
            pthread_cond_broadcast(&b->a->cond);
        }
    }
    pthread_mutex_unlock(&b->a->mu);
    if (!moved)
        ts_log_info("re-pack: job=%lld not moved: %s", (long long)m->id, why);
    m->used = false;
    ts_jobtab_wake(b->jobtab);
}

/* Grant each process a range of the reserve for what it holds on the GPU
 * (one already out keeps its own); false (ranges given back) when the
 * reserve has no room. */
static bool grant_ranges(struct ts_broker *b, struct ts_repack_move *m, bool *granted, char *why,
                         size_t len)
{
    struct ts_ledger *from = b->s->l[m->from];
    for (size_t i = 0; i < m->n; i++) {
        struct ts_ledger_proc *p = &from->procs[m->slot[i]];
        uint64_t used = atomic_load(&p->used_bytes), off = 0;
        granted[i] = false;
        if (atomic_load(&p->swap_state) == TS_SWAP_OUT && p->swap_len > 0)
            continue; /* idle-detached: its memory is in its own range */
        if (used > 0 && !ts_ledgers_swap_alloc(b->s, used, &off)) {
            char x[32];
            snprintf(why, len, "the host swap reserve has no room for the %s of pid %d",
                     ts_broker_bytes(used, x, sizeof(x)), (int)m->pid[i]);
            for (size_t k = 0; k < i; k++)
                if (granted[k])
                    from->procs[m->slot[k]].swap_len = 0;
            return false;
        }
        p->swap_offset = off; /* before the next range is handed out */
        p->swap_len = used;
        granted[i] = used > 0;
        m->bytes += used;
    }
    return true;
}

/* Start moving the job of m: false with why when it cannot start. */
static bool start_move(struct ts_broker *b, struct ts_repack_move *m, char *why, size_t len)
{
    struct ts_ledger *from = b->s->l[m->from], *to = b->s->l[m->to];
    uint64_t key = ts_ledger_key(m->id, m->attempt);
    int jf = ts_ledger_find_job(from, key);
    if (jf < 0 || ts_ledger_lock(from) != 0) {
        snprintf(why, len, "it has no slot in the ledger of gpu %u", b->s->index[m->from]);
        return false;
    }
    ts_ledger_reap_locked(from);
    m->n = 0;
    bool many = false;
    for (int i = 0; i < TS_LEDGER_PROCS; i++) {
        pid_t pid = atomic_load(&from->procs[i].pid);
        if (pid == 0 || from->procs[i].job != jf)
            continue;
        many = many || m->n == TS_REPACK_PROCS;
        if (m->n < TS_REPACK_PROCS) {
            m->pid[m->n] = pid;
            m->slot[m->n++] = i;
        }
    }
    ts_ledger_unlock(from);
    if (m->n == 0 || many) {
        snprintf(why, len,
                 m->n == 0 ? "no process of it runs under the shim yet"
                           : "it has more than %d processes under the shim",
                 TS_REPACK_PROCS);
        return false;
    }
    if (slot_copy(from, jf, to) < 0) {
        snprintf(why, len, "the ledger of gpu %u has no free job slot", b->s->index[m->to]);
        return false;
    }
    bool granted[TS_REPACK_PROCS];
    if (link_dev0(b->s, m->dir, b->s->index[m->to]) != 0 ||
        !grant_ranges(b, m, granted, why, len)) {
        if (why[0] == '\0')
            snprintf(why, len, "its folder's ledger link could not be changed");
        link_dev0(b->s, m->dir, b->s->index[m->from]);
        ts_ledgers_job_remove(b->s, m->id, m->attempt, &b->s->index[m->to], 1);
        return false;
    }
    m->started_ms = ts_now_ms();
    m->deadline_ms = m->started_ms + TS_BROKER_ACK_MS + (int64_t)(m->bytes >> 30) * 10000;
    for (size_t i = 0; i < m->n; i++) {
        struct ts_ledger_proc *p = &from->procs[m->slot[i]];
        atomic_store(&p->cmd, TS_CMD_MOVE);
        m->seq[i] = atomic_fetch_add(&p->cmd_seq, 1) + 1;
        ts_futex_wake(&p->cmd_seq);
    }
    return true;
}

/* What one process's answer says: 1 moved, 0 gone, -1 not moved (why). */
static int outcome(struct ts_broker *b, struct ts_repack_move *m, size_t i, char *why, size_t len)
{
    struct ts_ledger_proc *p = &b->s->l[m->from]->procs[m->slot[i]];
    pid_t pid = m->pid[i];
    bool gone = atomic_load(&p->pid) != pid || !ts_broker_alive(pid);
    bool acked = !gone && atomic_load(&p->ack_seq) == m->seq[i];
    int32_t err = acked ? atomic_load(&p->swap_error) : 0;
    if (gone)
        return 0;
    if (!acked) { /* not reached: poll_move waits for every answer */
        snprintf(why, len, "pid %d did not answer the move", (int)pid);
        return -1;
    }
    if (err == CUDA_ERROR_NOT_SUPPORTED)
        snprintf(why, len,
                 "the shim cannot move pid %d: memory outside its swap engine such as managed "
                 "memory, or objects it did not keep",
                 (int)pid);
    else if (err != CUDA_SUCCESS)
        snprintf(why, len, "pid %d could not move (CUDA error %d)", (int)pid, (int)err);
    else if (ts_ledger_find_proc(b->s->l[m->to], pid) < 0)
        snprintf(why, len,
                 "pid %d acknowledged the move without moving: a shim before ledger ABI 1.3",
                 (int)pid);
    else
        return 1;
    return -1;
}

/* Past its deadline, a process still moving: the job that needs the room
 * is told (its start waits no more) but the move is followed to its end,
 * since the shim may still finish it: only its answer says on which GPU
 * the process is. */
static void late(struct ts_broker *b, struct ts_repack_move *m)
{
    m->late = true;
    pthread_mutex_lock(&b->a->mu);
    struct ts_ajob *j = ts_jobtab_find(b->jobtab, m->id, m->attempt);
    if (j != NULL) {
        j->move = TS_AJOB_MOVE_REFUSED;
        snprintf(j->move_msg, sizeof(j->move_msg),
                 "it did not answer the move within %.0f s; it may still end",
                 (double)(m->deadline_ms - m->started_ms) / 1000.0);
    }
    pthread_mutex_unlock(&b->a->mu);
    ts_log_warn("re-pack: job=%lld has not answered the move in time; still followed",
                (long long)m->id);
    ts_jobtab_wake(b->jobtab);
}

/* Some processes moved, some did not: the moved ones go back to `from`
 * with TS_CMD_MOVE in their home slots of now (in `to`), the job's folder
 * pointing at `from` again, so that the job ends whole on one GPU. Each
 * takes its range of the reserve along; its old slot in `from` is freed
 * (it claims one when it comes back). False when none could be sent. */
static bool start_undo(struct ts_broker *b, struct ts_repack_move *m, const bool *moved)
{
    struct ts_ledger *from = b->s->l[m->from], *to = b->s->l[m->to];
    if (link_dev0(b->s, m->dir, b->s->index[m->from]) != 0)
        return false;
    size_t sent = 0;
    for (size_t i = 0; i < m->n; i++) {
        int k = moved[i] ? ts_ledger_find_proc(to, m->pid[i]) : -1;
        m->back[i] = k;
        if (k < 0)
            continue;
        struct ts_ledger_proc *old = &from->procs[m->slot[i]], *p = &to->procs[k];
        p->swap_offset = old->swap_offset;
        p->swap_len = old->swap_len;
        if (ts_ledger_lock(from) == 0) {
            old->swap_len = 0;
            atomic_store(&old->used_bytes, 0);
            atomic_store(&old->pid, 0);
            ts_ledger_unlock(from);
        }
        atomic_store(&p->cmd, TS_CMD_MOVE);
        m->back_seq[i] = atomic_fetch_add(&p->cmd_seq, 1) + 1;
        ts_futex_wake(&p->cmd_seq);
        sent++;
    }
    m->undoing = sent > 0;
    if (m->undoing)
        ts_log_info("re-pack: job=%lld partly moved (%s): %zu processes sent back to gpu %u",
                    (long long)m->id, m->why, sent, b->s->index[m->from]);
    return m->undoing;
}

/* Once every process sent back answered or ended: the job is whole on
 * `from` (its slot in `to` dropped), or, when one could not come back,
 * runs on both GPUs as before. */
static void poll_undo(struct ts_broker *b, struct ts_repack_move *m)
{
    struct ts_ledger *from = b->s->l[m->from], *to = b->s->l[m->to];
    size_t stuck = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (m->back[i] < 0)
            continue;
        struct ts_ledger_proc *p = &to->procs[m->back[i]];
        bool gone = atomic_load(&p->pid) != m->pid[i] || !ts_broker_alive(m->pid[i]);
        if (!gone && atomic_load(&p->ack_seq) != m->back_seq[i])
            return; /* still coming back */
        if (!gone && (atomic_load(&p->swap_error) != CUDA_SUCCESS ||
                      ts_ledger_find_proc(from, m->pid[i]) < 0))
            stuck++;
    }
    unsigned pi = b->s->index[m->from], li = b->s->index[m->to];
    char msg[320];
    m->undoing = false;
    if (stuck == 0) {
        slot_drop(to, ts_ledger_key(m->id, m->attempt)); /* its processes left it */
        ts_broker_room(b, m->to);
        snprintf(msg, sizeof(msg),
                 "%zu of its %zu processes could not move (%s); those that had moved went back "
                 "to gpu %u, where it runs whole",
                 m->failed, m->n, m->why, pi);
    } else {
        snprintf(msg, sizeof(msg),
                 "%zu of its %zu processes could not move (%s) and %zu of those moved to gpu %u "
                 "could not go back: it runs on both",
                 m->failed, m->n, m->why, stuck, li);
    }
    finish(b, m, false, msg);
}

/* Once every process answered or ended: how it went. */
static void poll_move(struct ts_broker *b, struct ts_repack_move *m)
{
    struct ts_ledger *from = b->s->l[m->from];
    int64_t now = ts_now_ms();
    if (m->undoing) {
        poll_undo(b, m);
        return;
    }
    for (size_t i = 0; i < m->n; i++) {
        struct ts_ledger_proc *p = &from->procs[m->slot[i]];
        if (atomic_load(&p->pid) == m->pid[i] && ts_broker_alive(m->pid[i]) &&
            atomic_load(&p->ack_seq) != m->seq[i]) {
            if (!m->late && now >= m->deadline_ms)
                late(b, m);
            return; /* still moving */
        }
    }
    char why[256] = "", one[256];
    size_t moved = 0, failed = 0;
    uint64_t bytes = 0;
    bool went[TS_REPACK_PROCS];
    for (size_t i = 0; i < m->n; i++) {
        int o = outcome(b, m, i, one, sizeof(one));
        went[i] = o > 0;
        if (o > 0) {
            moved++;
            bytes += atomic_load(&from->procs[m->slot[i]].moved_bytes);
        } else if (o < 0) {
            failed++;
            if (why[0] == '\0')
                snprintf(why, sizeof(why), "%s", one);
            if (atomic_load(&from->procs[m->slot[i]].ack_seq) == m->seq[i])
                from->procs[m->slot[i]].swap_len = 0; /* answered: its range is free */
        }
    }
    unsigned pi = b->s->index[m->from], li = b->s->index[m->to];
    if (failed == 0 && moved > 0) {
        slot_drop(from, ts_ledger_key(m->id, m->attempt));
        spec_moved(m->dir, li);
        ts_broker_room(b, m->from);
        char x[32];
        if (m->for_id != 0)
            ts_events_add(b->ev, m->id, m->attempt, "moved",
                          "moved gpu %u \u2192 gpu %u for job %lld (%s of GPU memory, %.2f s)", pi,
                          li, (long long)m->for_id, ts_broker_bytes(bytes, x, sizeof(x)),
                          (double)(ts_now_ms() - m->started_ms) / 1000.0);
        else /* taken up after a restart: whom it was for is not known */
            ts_events_add(b->ev, m->id, m->attempt, "moved",
                          "moved gpu %u \u2192 gpu %u (%s of GPU memory; a move the agent "
                          "took up after a restart)",
                          pi, li, ts_broker_bytes(bytes, x, sizeof(x)));
        finish(b, m, true, "");
        return;
    }
    if (moved == 0) {
        /* nothing moved: it stays where it runs, with its slot there only */
        link_dev0(b->s, m->dir, pi);
        ts_ledgers_job_remove(b->s, m->id, m->attempt, &b->s->index[m->to], 1);
        finish(b, m, false, failed > 0 ? why : "its processes ended");
        return;
    }
    /* some processes moved, some did not: all or nothing, those moved go
     * back; if none can be sent the job runs on both GPUs and keeps its
     * slot in both ledgers (both count its request) */
    m->failed = failed;
    snprintf(m->why, sizeof(m->why), "%s", why);
    if (start_undo(b, m, went))
        return;
    char msg[320];
    snprintf(msg, sizeof(msg), "%zu of its %zu processes moved to gpu %u, the others stay: %s",
             moved, moved + failed, li, why);
    finish(b, m, false, msg);
}

/* The jobs the main thread asked to move: refused at once, taken into a
 * free move record (MOVING), or left asked for a later pass (starting, a
 * swap of it in flight, every record in use). Returns how many it took. */
static size_t take_asks(struct ts_broker *b, struct ts_repack_move **out)
{
    size_t n = 0;
    pthread_mutex_lock(&b->a->mu);
    for (struct ts_ajob *j = b->jobtab->jobs; j != NULL; j = j->next) {
        if (j->move != TS_AJOB_MOVE_ASKED)
            continue;
        const char *no = NULL;
        if (ts_ajob_final(j) || j->stopping)
            no = "it is ending";
        else if (j->ngpus != 1)
            no = "a job on several GPUs is not moved";
        else if (!j->shim)
            no = "it runs without the shim";
        else if (b->s->swap_bytes == 0)
            no = "this node has no host swap reserve (--swap-reserve)";
        else if (j->want_suspend || j->suspending || j->suspended)
            no = "it is suspended";
        if (no != NULL) {
            j->move = TS_AJOB_MOVE_REFUSED;
            snprintf(j->move_msg, sizeof(j->move_msg), "%s", no);
            continue;
        }
        int from = ts_ledgers_pos(b->s, j->gpus[0]), to = ts_ledgers_pos(b->s, j->logical[0]);
        struct ts_repack_move *m = NULL;
        for (int k = 0; k < TS_REPACK_MOVES && m == NULL; k++)
            if (!b->mv[k].used)
                m = &b->mv[k];
        if (j->phase != TS_AJOB_RUNNING || from < 0 || to < 0 || from == to || m == NULL ||
            ts_broker_busy_job(b, j->id, j->attempt))
            continue;
        *m = (struct ts_repack_move){.used = true,
                                     .id = j->id,
                                     .attempt = j->attempt,
                                     .for_id = j->move_for,
                                     .from = (unsigned)from,
                                     .to = (unsigned)to};
        snprintf(m->dir, sizeof(m->dir), "%s", j->dir);
        j->move = TS_AJOB_MOVE_MOVING;
        out[n++] = m;
    }
    pthread_mutex_unlock(&b->a->mu);
    return n;
}

/* ---- the broker: a move a stopped agent left under way ------------------- */

/* Whether the job folder's dev0.ledger is GPU index gpu's ledger. */
static bool linked_to(const struct ts_ledgers *s, const char *jobdir, unsigned gpu)
{
    char a[PATH_MAX + 32], l[PATH_MAX + 32];
    struct stat sa, sl;
    snprintf(a, sizeof(a), "%s/shim/dev0.ledger", jobdir);
    snprintf(l, sizeof(l), "%s/gpu%u.ledger", s->dir, gpu);
    return stat(a, &sa) == 0 && stat(l, &sl) == 0 && sa.st_dev == sl.st_dev &&
           sa.st_ino == sl.st_ino;
}

/* The processes of m's job in the ledger of `from`, and the command each
 * was sent there: a TS_CMD_MOVE's sequence is awaited; one that was never
 * sent the move counts as answered (it did not move). */
static void resume_procs(struct ts_broker *b, struct ts_repack_move *m)
{
    struct ts_ledger *from = b->s->l[m->from];
    int jf = ts_ledger_find_job(from, ts_ledger_key(m->id, m->attempt));
    if (jf < 0 || ts_ledger_lock(from) != 0)
        return;
    for (int i = 0; i < TS_LEDGER_PROCS && m->n < TS_REPACK_PROCS; i++) {
        struct ts_ledger_proc *p = &from->procs[i];
        pid_t pid = atomic_load(&p->pid);
        if (pid == 0 || p->job != jf || !ts_broker_alive(pid))
            continue;
        m->pid[m->n] = pid;
        m->slot[m->n] = i;
        m->seq[m->n++] = atomic_load(&p->cmd) == TS_CMD_MOVE ? atomic_load(&p->cmd_seq)
                                                             : atomic_load(&p->ack_seq);
        m->bytes += p->swap_len;
    }
    ts_ledger_unlock(from);
}

/* After a restart: a job whose record says it runs on one GPU while its
 * folder points at its logical GPU was being moved when the agent before
 * this one stopped. Its move is taken up: its processes' answers (the shim
 * carried the move out meanwhile, or still does) are awaited as if this
 * agent had sent it, and it ends as any move: moved, or undone. */
static void resume_moves(struct ts_broker *b)
{
    int64_t now = ts_now_ms();
    struct ts_repack_move *found[TS_REPACK_MOVES];
    size_t n = 0;
    pthread_mutex_lock(&b->a->mu);
    for (struct ts_ajob *j = b->jobtab->jobs; j != NULL && n < TS_REPACK_MOVES; j = j->next) {
        int from = ts_ledgers_pos(b->s, j->gpus[0]), to = ts_ledgers_pos(b->s, j->logical[0]);
        if (j->ngpus != 1 || !j->shim || ts_ajob_final(j) || from < 0 || to < 0 || from == to ||
            (j->move != TS_AJOB_MOVE_NONE && j->move != TS_AJOB_MOVE_ASKED) ||
            !linked_to(b->s, j->dir, j->logical[0]))
            continue;
        /* asked again already (the bind is in the desired state): taken up
         * rather than sent a second time */
        bool asked = j->move == TS_AJOB_MOVE_ASKED;
        struct ts_repack_move *m = &b->mv[n];
        *m = (struct ts_repack_move){.used = true,
                                     .id = j->id,
                                     .attempt = j->attempt,
                                     .for_id = asked ? j->move_for : 0,
                                     .from = from,
                                     .to = to};
        snprintf(m->dir, sizeof(m->dir), "%s", j->dir);
        j->move = TS_AJOB_MOVE_MOVING;
        if (!asked) {
            j->move_for = 0;
            j->move_asked_ms = now;
        }
        found[n++] = m;
    }
    pthread_mutex_unlock(&b->a->mu);
    for (size_t i = 0; i < n; i++) {
        struct ts_repack_move *m = found[i];
        resume_procs(b, m);
        m->started_ms = now;
        m->deadline_ms = now + TS_BROKER_ACK_MS + (int64_t)(m->bytes >> 30) * 10000;
        ts_log_info("re-pack: taking up the move of job=%lld from gpu %u to gpu %u left by the "
                    "agent before (%zu processes)",
                    (long long)m->id, b->s->index[m->from], b->s->index[m->to], m->n);
        if (m->n == 0) { /* no process left to ask: it stays where it was */
            link_dev0(b->s, m->dir, b->s->index[m->from]);
            ts_ledgers_job_remove(b->s, m->id, m->attempt, &b->s->index[m->to], 1);
            finish(b, m, false, "its processes ended");
        }
    }
}

void ts_repack_pass(struct ts_broker *b)
{
    static bool resumed; /* the broker thread's first pass: after adoption */
    if (!resumed) {
        resumed = true;
        resume_moves(b);
    }
    for (int k = 0; k < TS_REPACK_MOVES; k++)
        if (b->mv[k].used && b->mv[k].n > 0)
            poll_move(b, &b->mv[k]);
    struct ts_repack_move *started[TS_REPACK_MOVES];
    size_t n = take_asks(b, started);
    for (size_t i = 0; i < n; i++) {
        char why[256] = "";
        if (!start_move(b, started[i], why, sizeof(why)))
            finish(b, started[i], false, why);
        else
            ts_log_info("re-pack: TS_CMD_MOVE sent job=%lld gpu=%u to_gpu=%u processes=%zu",
                        (long long)started[i]->id, b->s->index[started[i]->from],
                        b->s->index[started[i]->to], started[i]->n);
    }
}
