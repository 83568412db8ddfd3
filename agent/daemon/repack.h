/*
 * repack.h - re-pack on demand (issue 17, README.md "The node-level
 * scheduler"): before a job starts where the server put it, on a GPU whose
 * room jobs the node spread there use, those jobs are moved back to their
 * logical GPUs (TS_CMD_MOVE, agent/ledger/ledger.h), then it starts.
 *
 * The main thread asks (ts_repack_ask, from reconcile.c) and does not
 * block: the new job's start waits while a move it asked for is under way,
 * at most TS_REPACK_WAIT_MS, and the main loop reconciles again meanwhile.
 * The broker thread, the only writer of commands and reserve ranges in the
 * processes' slots, carries the moves out (ts_repack_pass): the job gets a
 * slot in its logical GPU's ledger (request, limit, priority and flags as
 * on the GPU it leaves), its folder's dev0.ledger is pointed there, and
 * each of its processes gets a range of the host reserve and TS_CMD_MOVE in
 * its home slot. When every process acknowledged with its new slot there,
 * the job's slots on the old GPU are dropped, its record and spec.json say
 * it runs on its logical GPU, and it gets the event `moved`. A refusal (the
 * shim cannot move it: managed memory, ...) or a process that acknowledged
 * without moving (a shim before ABI 1.3) leaves it where it ran, as before
 * re-packing (`not_moved` on both jobs). No answer within 30 s plus 10 s a
 * GiB: the new job starts (`not_moved`), and the move is followed until
 * every process answered or ended, then finished either way.
 */
#ifndef TS_AGENT_DAEMON_REPACK_H
#define TS_AGENT_DAEMON_REPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/daemon/ajob.h"
#include "agent/daemon/nodesched.h"

/* Longest a new job's start waits for the moves it asked for. */
#define TS_REPACK_WAIT_MS 30000
/* Moves the broker carries out at once. */
#define TS_REPACK_MOVES 8
/* Processes of one job a move takes (a job with more is refused). */
#define TS_REPACK_PROCS 16

struct ts_agent;
struct ts_broker;

/* The broker's record of one move in flight. */
struct ts_repack_move {
    bool used;
    int64_t id; /* the job moved */
    int attempt;
    int64_t for_id;    /* the job that needs the room */
    unsigned from, to; /* ledger positions: where it runs, its logical GPU */
    size_t n;
    pid_t pid[TS_REPACK_PROCS];
    int slot[TS_REPACK_PROCS];     /* its home slot in the ledger of `from` */
    uint32_t seq[TS_REPACK_PROCS]; /* the cmd_seq written there */
    uint64_t bytes;
    int64_t started_ms, deadline_ms;
    bool late; /* past its deadline: the waiting start was told, the move is followed on */
    /* Some processes moved, some did not: those moved are going back to
     * `from` (all or nothing), each from its slot in `to` (-1: not sent). */
    bool undoing;
    int back[TS_REPACK_PROCS];
    uint32_t back_seq[TS_REPACK_PROCS];
    size_t failed;
    char why[256]; /* why the others did not move */
    char dir[TS_AJOB_DIR_MAX];
};

/*
 * Main thread, before job (id, attempt) starts: ask the n jobs of b
 * (ts_nodesched_in_the_way) that are not moving yet to move back to their
 * logical GPUs. True while one of them is still asked or moving and its ask
 * is younger than TS_REPACK_WAIT_MS: the start waits (the main loop
 * reconciles again; the broker wakes it when a move ends). Fills b[i].why
 * with why a job is not moved (refused, still moving) for the events.
 */
bool ts_repack_ask(struct ts_agent *a, struct ts_nodesched_block *b, size_t n, int64_t id,
                   int attempt);

/* Broker thread, every pass: start the moves asked for, finish those whose
 * processes all answered (or ended); one overdue is followed on. */
void ts_repack_pass(struct ts_broker *b);

#endif /* TS_AGENT_DAEMON_REPACK_H */
