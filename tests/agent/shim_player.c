/*
 * shim_player.c - a job that plays a shimmed process against the real
 * agent's broker, through the ledger protocol alone (agent/ledger/ledger.h):
 * it claims its home slot in JOBDIR/shim/dev0.ledger, charges its job slot
 * as the shim would (within request while it fits, bursts under the lock
 * while the GPU has room and nobody waits ahead of them, a charge that does
 * not fit waits for room_seq in the ledger's queue), and answers TS_CMD_SWAP_OUT / TS_CMD_SUSPEND /
 * TS_CMD_SWAP_IN from a watcher thread by copying its "device memory" (a host buffer standing in
 * for it) to and from the agent's host swap reserve.
 *
 * Usage: shim_player STEP...
 *   alloc MiB      charge MiB on device 0 and fill it; prints "alloc ok N" or "alloc oom N"
 *   free           uncharge everything
 *   touch          a GPU call: back in when swapped out; prints "data intact" or "data lost"
 *   idle SECONDS   no GPU call
 *   busy SECONDS   a GPU call every 100 ms
 *   mark FILE      create FILE
 *   await FILE     wait (at most 30 s) until FILE exists
 *   slowmove SECONDS  from now on, answer TS_CMD_MOVE that much later (it
 *                  never moves: it acknowledges as a shim before ABI 1.3)
 * Exit 0, or 3 when data was lost, 2 on a usage or ledger error.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "agent/ledger/ledger.h"

#define DATA_MAX (1u << 20) /* bytes of the "device memory" really kept */

static struct ts_ledger *l;
static struct ts_ledger_proc *me;
static struct ts_ledger_job *job;
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *data;
static size_t data_len;
static uint64_t charged;
static _Atomic int move_delay_ms; /* slowmove */
static int lost;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void called(void)
{
    atomic_store(&me->last_call_ns, ts_ledger_now_ns());
}

/* Charge n bytes as the shim does (ledger.h, "Waiting for room"): a
 * burst only when no waiter is ahead of it; a charge that does not fit
 * waits in the queue, a new one for at most wait_ms (then gaveup_seq), one
 * bringing swapped memory back until it fits. */
static bool charge(uint64_t n, bool swapin)
{
    uint64_t usable = l->h.total_bytes - l->h.reserve_bytes;
    uint64_t until = ts_ledger_now_ns() + (uint64_t)l->h.wait_ms * 1000000ull;
    uint64_t since = UINT64_MAX;
    int self = (int)(me - l->procs);
    for (;;) {
        uint32_t seq = atomic_load(&l->room_seq);
        if (ts_ledger_lock(l) != 0)
            return false;
        uint64_t ju = atomic_load(&job->used_bytes);
        bool burst = ju + n > job->request_bytes;
        uint32_t kind = (burst ? TS_NEED_BURST : 0u) | (swapin ? TS_NEED_SWAPIN : 0u);
        bool over = ju + n > job->limit_bytes;
        bool ok = !over && ts_ledger_used(l) + n <= usable &&
                  (!burst || !ts_ledger_ahead_locked(l, self, kind, since));
        if (ok) {
            atomic_fetch_add(&job->used_bytes, n);
            atomic_fetch_add(&me->used_bytes, n);
            atomic_store(&l->burst_bytes, ts_ledger_burst_locked(l));
            if (burst && ju <= job->request_bytes)
                atomic_store(&me->turn_ns, ts_ledger_now_ns());
        }
        ts_ledger_unlock(l);
        bool give_up = over || (!swapin && ts_ledger_now_ns() >= until);
        if (ok || give_up) {
            if (!ok && since != UINT64_MAX) {
                atomic_store(&me->gaveup_bytes, n);
                atomic_fetch_add(&me->gaveup_seq, 1);
            }
            atomic_store(&me->need_bytes, 0);
            atomic_store(&me->need_since_ns, 0);
            atomic_store(&me->need_kind, 0);
            return ok;
        }
        if (since == UINT64_MAX) {
            since = ts_ledger_now_ns();
            atomic_store(&me->need_since_ns, since);
        }
        atomic_store(&me->need_kind, kind);
        atomic_store(&me->need_bytes, n);
        atomic_fetch_add(&l->agent_wake, 1);
        ts_futex_wake(&l->agent_wake);
        ts_futex_wait(&l->room_seq, seq, 100);
    }
}

static void uncharge(uint64_t n)
{
    if (ts_ledger_lock(l) != 0)
        return;
    atomic_fetch_sub(&job->used_bytes, n);
    atomic_fetch_sub(&me->used_bytes, n);
    atomic_store(&l->burst_bytes, ts_ledger_burst_locked(l));
    ts_ledger_unlock(l);
}

static unsigned char *reserve(void)
{
    static unsigned char *m;
    if (m == NULL && l->h.swap_bytes > 0) {
        int fd = open(l->h.swap_path, O_RDWR | O_CLOEXEC);
        void *p = fd >= 0 ? mmap(NULL, l->h.swap_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                          : MAP_FAILED;
        if (fd >= 0)
            close(fd);
        m = p == MAP_FAILED ? NULL : p;
    }
    return m;
}

/* Under gate. */
static int swap_out(void)
{
    unsigned char *r = reserve();
    if (r == NULL || me->swap_len < data_len || me->swap_offset + data_len > l->h.swap_bytes)
        return 1;
    if (getenv("PLAYER_SWAP_FAIL") != NULL)
        return 2;
    memcpy(r + me->swap_offset, data, data_len);
    memset(data, 0, data_len); /* the physical memory is released */
    uint64_t n = charged;
    uncharge(n);
    atomic_store(&me->swapped_bytes, n);
    atomic_fetch_add(&job->swapped_bytes, n);
    atomic_store(&me->swap_state, TS_SWAP_OUT);
    return 0;
}

/* Under gate. */
static int swap_in(void)
{
    if (atomic_load(&me->swap_state) != TS_SWAP_OUT)
        return 0;
    uint64_t n = atomic_load(&me->swapped_bytes);
    if (!charge(n, true))
        return 1;
    memcpy(data, reserve() + me->swap_offset, data_len);
    atomic_store(&me->swapped_bytes, 0);
    atomic_fetch_sub(&job->swapped_bytes, n);
    atomic_store(&me->turn_ns, ts_ledger_now_ns());
    atomic_store(&me->swap_state, TS_SWAP_RESIDENT);
    return 0;
}

static void *watcher(void *arg)
{
    (void)arg;
    uint32_t done = atomic_load(&me->cmd_seq);
    for (;;) {
        uint32_t seq = atomic_load(&me->cmd_seq);
        if (seq == done) {
            ts_futex_wait(&me->cmd_seq, seq, 500);
            continue;
        }
        done = seq;
        if (atomic_load(&me->cmd) == TS_CMD_MOVE && atomic_load(&move_delay_ms) > 0) {
            say("move: answering in %d ms", atomic_load(&move_delay_ms));
            nap_ms(atomic_load(&move_delay_ms));
        }
        pthread_mutex_lock(&gate);
        uint32_t cmd = atomic_load(&me->cmd);
        /* a suspend is a swap-out whose memory stays out until TS_CMD_SWAP_IN:
         * this player only swaps in on command anyway */
        bool out = cmd == TS_CMD_SWAP_OUT || cmd == TS_CMD_SUSPEND;
        bool was_out = atomic_load(&me->swap_state) == TS_SWAP_OUT;
        int rc = out ? (was_out ? 0 : swap_out()) : cmd == TS_CMD_SWAP_IN ? swap_in() : 0;
        /* the outcome; swap_state is where the memory is */
        atomic_store(&me->moved_bytes, out && rc == 0 ? atomic_load(&me->swapped_bytes) : 0);
        atomic_store(&me->swap_error, rc);
        say("command %u done rc=%d", cmd, rc);
        pthread_mutex_unlock(&gate);
        atomic_store(&me->ack_seq, seq);
        ts_futex_wake(&me->ack_seq);
    }
    return NULL;
}

static int attach(void)
{
    const char *dir = getenv("TESSERA_SHIM_DIR"), *who = getenv("TESSERA_SHIM_JOB");
    long long id;
    int attempt;
    if (dir == NULL || who == NULL || sscanf(who, "%lld:%d", &id, &attempt) != 2)
        return -1;
    char path[4096];
    snprintf(path, sizeof(path), "%s/dev0.ledger", dir);
    if ((l = ts_ledger_open(path)) == NULL)
        return -1;
    int j = ts_ledger_find_job(l, ts_ledger_key(id, attempt));
    if (j < 0 || ts_ledger_lock(l) != 0)
        return -1;
    job = &l->jobs[j];
    for (int i = 0; i < TS_LEDGER_PROCS && me == NULL; i++) {
        if (atomic_load(&l->procs[i].pid) != 0)
            continue;
        me = &l->procs[i];
        me->job = j;
        me->start_ticks = ts_ledger_start_ticks(getpid());
        atomic_store(&me->pid, ts_ledger_host_pid());
    }
    ts_ledger_unlock(l);
    if (me == NULL)
        return -1;
    called();
    pthread_t t;
    return pthread_create(&t, NULL, watcher, NULL) == 0 ? 0 : -1;
}

static void touch(void)
{
    pthread_mutex_lock(&gate);
    called();
    if (swap_in() != 0) {
        say("swap in failed");
        pthread_mutex_unlock(&gate);
        return;
    }
    called();
    for (size_t i = 0; i < data_len; i++) {
        if (data[i] != (unsigned char)(i * 7 + 13)) {
            say("data lost at byte %zu", i);
            lost = 1;
            pthread_mutex_unlock(&gate);
            return;
        }
    }
    say("data intact");
    pthread_mutex_unlock(&gate);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (attach() != 0) {
        say("no ledger to attach to");
        return 2;
    }
    data = calloc(1, DATA_MAX);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";
        if (strcmp(a, "alloc") == 0) {
            uint64_t n = strtoull(v, NULL, 10) << 20;
            pthread_mutex_lock(&gate);
            called();
            bool ok = swap_in() == 0 && charge(n, false);
            called();
            if (ok) {
                charged += n;
                data_len = charged < DATA_MAX ? charged : DATA_MAX;
                for (size_t k = 0; k < data_len; k++)
                    data[k] = (unsigned char)(k * 7 + 13);
            }
            pthread_mutex_unlock(&gate);
            say("alloc %s %s", ok ? "ok" : "oom", v);
            i++;
        } else if (strcmp(a, "free") == 0) {
            pthread_mutex_lock(&gate);
            uncharge(charged);
            charged = 0;
            data_len = 0;
            called();
            pthread_mutex_unlock(&gate);
            say("freed");
        } else if (strcmp(a, "touch") == 0) {
            touch();
        } else if (strcmp(a, "idle") == 0 || strcmp(a, "busy") == 0) {
            int ms = (int)(atof(v) * 1000);
            for (int t = 0; t < ms; t += 100) {
                if (a[0] == 'b') {
                    pthread_mutex_lock(&gate);
                    called();
                    pthread_mutex_unlock(&gate);
                }
                nap_ms(100);
            }
            i++;
        } else if (strcmp(a, "mark") == 0) {
            int fd = open(v, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (fd >= 0)
                close(fd);
            i++;
        } else if (strcmp(a, "slowmove") == 0) {
            atomic_store(&move_delay_ms, (int)(atof(v) * 1000));
            i++;
        } else if (strcmp(a, "await") == 0) {
            for (int t = 0; t < 3000 && access(v, F_OK) != 0; t++)
                nap_ms(10);
            i++;
        } else {
            say("unknown step %s", a);
            return 2;
        }
    }
    say("done");
    return lost ? 3 : 0;
}
