/*
 * watch.c - the engine's watcher thread: carries out the agent's commands
 * in the process's home slot (ledger.h, "Agent <-> shim").
 *
 * It waits on home->cmd_seq in bounded futex waits (1 s each, forever: it
 * is a background thread with every signal blocked), and for each new
 * sequence number runs the command, writes swap_error and moved_bytes, then
 * ack_seq = cmd_seq with a FUTEX_WAKE. A forked child has no watcher
 * until ts_swap_init runs in it again.
 */
#include <signal.h>

#include "agent/shim/engine.h"

static void run_command(struct ts_ledger_proc *home, uint32_t seq)
{
    uint32_t cmd = atomic_load(&home->cmd);
    CUresult rc = CUDA_SUCCESS;
    uint64_t moved = 0, t0 = ts_swap_now_ms();
    if (cmd == TS_CMD_SWAP_OUT || cmd == TS_CMD_SUSPEND) {
        if (cmd == TS_CMD_SUSPEND) /* before the memory is out: no call may take it back */
            atomic_fetch_or(&ts_gate_word, TS_GATE_HELD);
        rc = ts_swap_out(home->swap_offset, home->swap_len, &moved);
        if (rc != CUDA_SUCCESS)
            ts_gate_release_hold();
    } else if (cmd == TS_CMD_SWAP_IN) {
        ts_gate_release_hold();
        rc = ts_swap_in();
    } else if (cmd == TS_CMD_MOVE) {
        rc = ts_eng.move ? ts_eng.move(home) : CUDA_ERROR_NOT_SUPPORTED;
        moved = atomic_load(&home->moved_bytes); /* the move's figure */
    }
    if (ts_eng.log)
        ts_eng.log("command %u (seq %u) done in %llu ms: CUresult %d, %llu bytes out", cmd, seq,
                   (unsigned long long)(ts_swap_now_ms() - t0), (int)rc, (unsigned long long)moved);
    /* the engine keeps swap_state as the memory moves; this is the outcome */
    atomic_store(&home->moved_bytes, moved);
    atomic_store(&home->swap_error, (int32_t)rc);
    atomic_store(&home->ack_seq, seq);
    ts_futex_wake(&home->ack_seq);
}

static void *watch(void *arg)
{
    struct ts_ledger_proc *home = arg;
    uint32_t done = atomic_load(&home->ack_seq);
    for (;;) {
        uint32_t seq = atomic_load(&home->cmd_seq);
        if (seq != done) {
            run_command(home, seq);
            done = seq;
            if (ts_eng.home && ts_eng.home != home) {
                /* moved: the agent's commands come to the new GPU's slot */
                home = ts_eng.home;
                done = atomic_load(&home->ack_seq);
            }
            continue;
        }
        ts_futex_wait(&home->cmd_seq, seq, 1000);
    }
    return NULL;
}

int ts_watch_start(void)
{
    if (ts_eng.watcher || !ts_eng.home)
        return 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 1024 * 1024);
    pthread_t t;
    int err = pthread_create(&t, &attr, watch, ts_eng.home);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0)
        return -1;
    ts_eng.watcher = true;
    return 0;
}

void ts_watch_fork_child(void)
{
    ts_eng.watcher = false;
}
