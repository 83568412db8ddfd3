/*
 * gate.c - the gate every GPU call of the process passes (swap.h).
 *
 * Fast path (swap.h, inline): ++depth; compiler barrier; relaxed load of
 * ts_gate_word. Correctness across threads is the asymmetric pattern: the
 * swapper stores the closed state, then membarrier(PRIVATE_EXPEDITED)
 * runs a full barrier on every thread of the process, then it reads the
 * registered depths. Either a thread's load saw the closed gate (it backs
 * out and waits), or its depth store is visible to the swapper (which
 * waits for it to leave). Without membarrier the fenced bit keeps
 * ts_gate_word non-zero, so every enter comes here and fences.
 */
#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/shim/engine.h"

_Atomic uint32_t ts_gate_word;
_Thread_local int ts_gate_inside = TS_GATE_UNREGISTERED;

/* Registered threads' depth counters. */
static pthread_mutex_t threads_mu = PTHREAD_MUTEX_INITIALIZER;
static volatile int **threads;
static size_t nthreads, cap_threads;
static pthread_key_t thread_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static _Atomic int barrier_state; /* 0: not tried, 1: membarrier registered, -1: fenced */

uint64_t ts_swap_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint32_t ts_gate_wait_ms(void)
{
    return ts_eng.wait_ms ? ts_eng.wait_ms : TS_SWAP_DEFAULT_WAIT_MS;
}

static void unregister_thread(void *arg)
{
    pthread_mutex_lock(&threads_mu);
    for (size_t i = 0; i < nthreads; i++)
        if (threads[i] == arg) {
            threads[i] = threads[--nthreads];
            break;
        }
    pthread_mutex_unlock(&threads_mu);
}

static void make_key(void)
{
    if (pthread_key_create(&thread_key, unregister_thread) != 0)
        thread_key = (pthread_key_t)-1;
}

void ts_gate_thread_register(void)
{
    if (ts_gate_inside >= 0)
        return;
    pthread_once(&key_once, make_key);
    pthread_mutex_lock(&threads_mu);
    bool ok = true;
    if (nthreads == cap_threads) {
        size_t cap = cap_threads ? cap_threads * 2 : 64;
        volatile int **grown = calloc(cap, sizeof *grown);
        if (grown) {
            if (nthreads)
                memcpy(grown, threads, nthreads * sizeof *grown);
            free(threads);
            threads = grown;
            cap_threads = cap;
        } else {
            ok = false;
        }
    }
    if (ok) {
        ts_gate_inside = 0;
        threads[nthreads++] = &ts_gate_inside;
    }
    pthread_mutex_unlock(&threads_mu);
    if (ok && thread_key != (pthread_key_t)-1)
        pthread_setspecific(thread_key, (void *)&ts_gate_inside);
}

static void futex_wait(_Atomic uint32_t *w, uint32_t expect, uint32_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000u, .tv_nsec = (long)(ms % 1000u) * 1000000L};
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, expect, &ts, NULL, 0);
}

void ts_gate_wait_change(uint32_t seen, uint32_t ms)
{
    futex_wait(&ts_gate_word, seen, ms);
}

void ts_gate_set(uint32_t state)
{
    uint32_t w = atomic_load(&ts_gate_word);
    while (!atomic_compare_exchange_weak(&ts_gate_word, &w, (w & ~TS_GATE_STATE) | state))
        ;
    syscall(SYS_futex, (uint32_t *)&ts_gate_word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

bool ts_swap_held(void)
{
    return (atomic_load(&ts_gate_word) & TS_GATE_HELD) != 0;
}

void ts_gate_release_hold(void)
{
    atomic_fetch_and(&ts_gate_word, ~TS_GATE_HELD);
    syscall(SYS_futex, (uint32_t *)&ts_gate_word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

void ts_gate_barrier_init(void)
{
    if (atomic_load(&barrier_state) != 0)
        return;
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
    bool ok = cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
              syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
    if (!ok)
        atomic_fetch_or(&ts_gate_word, TS_GATE_FENCED);
    atomic_store(&barrier_state, ok ? 1 : -1);
}

CUresult ts_gate_enter_slow(void)
{
    if (ts_gate_inside < 0)
        ts_gate_thread_register();
    if (ts_gate_inside < 0)
        return CUDA_ERROR_OUT_OF_MEMORY; /* could not register: no memory for the list */
    if (ts_gate_inside > 0) {
        /* Nested: the swapper waits for our outer bracket, never the reverse. */
        ts_gate_inside++;
        return CUDA_SUCCESS;
    }
    /* A held gate (a suspend) counts its bound in 100 ms waits of this
     * thread, not in wall time: a process stopped for hours and continued
     * still waits for the agent's swap-in command, a process the agent
     * never stopped takes its memory back after wait_ms. */
    uint32_t held_waits = ts_gate_wait_ms() / 100u + 1u;
    for (;;) {
        ts_gate_inside++;
        atomic_thread_fence(memory_order_seq_cst);
        uint32_t w = atomic_load(&ts_gate_word);
        uint32_t state = w & TS_GATE_STATE;
        if (state == TS_GATE_OPEN)
            return CUDA_SUCCESS;
        ts_gate_inside--;
        if (state == TS_GATE_OUT && (w & TS_GATE_HELD)) {
            if (held_waits-- == 0)
                ts_gate_release_hold();
            else
                futex_wait(&ts_gate_word, w, 100u);
            continue;
        }
        if (state == TS_GATE_OUT) {
            uint32_t in = (w & ~TS_GATE_STATE) | TS_GATE_COMING_IN;
            if (atomic_compare_exchange_strong(&ts_gate_word, &w, in)) {
                CUresult rc = ts_swap_in_claimed();
                if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_NOT_READY)
                    return rc; /* NOT_READY: held by a suspend, waited for above */
            }
            continue;
        }
        /* A swap-out (bounded) or a swap-in (waiting for room as long as
         * it takes) under way: this thread's memory is in it, so it waits
         * with it rather than fail for memory it held. */
        futex_wait(&ts_gate_word, w, 100u);
    }
}

static void process_barrier(void)
{
    if (atomic_load(&barrier_state) == 1 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0)
        return;
    /* Fenced mode: every enter fences in the slow path; this fence pairs
     * with theirs. */
    atomic_thread_fence(memory_order_seq_cst);
}

int ts_gate_quiesce(uint32_t wait_ms)
{
    ts_gate_barrier_init();
    process_barrier();
    uint64_t deadline = ts_swap_now_ms() + wait_ms;
    long pause_us = 20;
    for (;;) {
        bool busy = false;
        pthread_mutex_lock(&threads_mu);
        for (size_t i = 0; i < nthreads && !busy; i++)
            if (threads[i] != &ts_gate_inside && *threads[i] > 0)
                busy = true;
        pthread_mutex_unlock(&threads_mu);
        if (!busy)
            return 0;
        if (ts_swap_now_ms() >= deadline)
            return -1;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = pause_us * 1000L};
        nanosleep(&ts, NULL);
        if (pause_us < 1000)
            pause_us *= 2;
    }
}

void ts_gate_fork_child(void)
{
    /* Only the forking thread lives on in the child. */
    pthread_mutex_init(&threads_mu, NULL);
    nthreads = 0;
    if (ts_gate_inside >= 0 && cap_threads > 0)
        threads[nthreads++] = &ts_gate_inside;
    /* membarrier registration belongs to the parent's address space. */
    atomic_store(&barrier_state, 0);
    atomic_store(&ts_gate_word, TS_GATE_OPEN);
}
