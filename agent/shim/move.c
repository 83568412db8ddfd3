/*
 * move.c - moving the process to other GPUs (TS_CMD_MOVE, ledger.h;
 * README.md, "Moving a job to another GPU"), run by the swap engine's
 * watcher thread.
 *
 * The agent has given the job a slot in each target GPU's ledger and
 * pointed the job's folder's dev<K>.ledger at them. Here, with the process
 * held at its gate (ts_swap_move): every allocation goes out to the
 * granted range of the host reserve (uncharged on the old GPU), the
 * process claims a slot in each new ledger, finds each new GPU among the
 * devices the driver shows (by UUID), makes its contexts, modules,
 * functions, streams and events again there (objects.c), points the
 * engine's allocations at the new contexts, and comes back in at the same
 * addresses (charged on the new GPU). What fails before the objects are
 * published leaves the process where it was, memory back in place.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/shim/objects.h"
#include "agent/shim/shim.h"
#include "agent/shim/swap.h"

struct target {
    struct ts_ledger *l[TS_SHIM_MAX_DEVS]; /* NULL: device k stays */
    int job[TS_SHIM_MAX_DEVS];
    struct ts_ledger_proc *proc[TS_SHIM_MAX_DEVS];
    int real[TS_SHIM_MAX_DEVS];
    const char *why;
};

static void uuid_string(const CUuuid *u, char *out, size_t n)
{
    const unsigned char *b = (const unsigned char *)u->bytes;
    snprintf(out, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

/* The driver ordinal of the GPU named uuid, or -1. */
static int ordinal_of(const char *uuid)
{
    typedef CUresult (*count_fn)(int *);
    typedef CUresult (*uuid_fn)(CUuuid *, CUdevice);
    int n = 0;
    if (!ts_real[TS_H_cuDeviceGetCount] || !ts_real[TS_H_cuDeviceGetUuid] ||
        ((count_fn)ts_real[TS_H_cuDeviceGetCount])(&n) != CUDA_SUCCESS)
        return -1;
    for (int d = 0; d < n; d++) {
        CUuuid u;
        char s[64];
        if (((uuid_fn)ts_real[TS_H_cuDeviceGetUuid])(&u, d) != CUDA_SUCCESS)
            continue;
        uuid_string(&u, s, sizeof s);
        if (strncmp(s, uuid, 48) == 0)
            return d;
    }
    return -1;
}

static void drop(struct target *t)
{
    for (int k = 0; k < ts_shim.ndevs; k++) {
        if (!t->l[k])
            continue;
        if (t->proc[k] && ts_ledger_lock(t->l[k]) == 0) {
            atomic_store(&t->proc[k]->pid, 0);
            ts_ledger_unlock(t->l[k]);
        }
        ts_ledger_close(t->l[k]);
        t->l[k] = NULL;
    }
}

/* Open the job's ledgers again: those that name another GPU now are the
 * targets. */
static CUresult open_targets(struct target *t)
{
    pid_t pid = ts_ledger_host_pid();
    uint64_t ticks = ts_ledger_start_ticks(getpid());
    for (int k = 0; k < ts_shim.ndevs; k++) {
        t->real[k] = ts_obj_real(k);
        char path[512];
        snprintf(path, sizeof path, "%s/dev%d.ledger", ts_shim.dir, k);
        struct ts_ledger *l = ts_ledger_open(path);
        if (!l) {
            t->why = "a ledger of the job's folder could not be opened";
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (strncmp(l->h.uuid, ts_shim.dev[k].l->h.uuid, sizeof l->h.uuid) == 0) {
            ts_ledger_close(l); /* this device stays */
            continue;
        }
        t->l[k] = l;
        t->job[k] = ts_ledger_find_job(l, ts_shim.key);
        if (t->job[k] < 0) {
            t->why = "the job has no slot in the new GPU's ledger";
            return CUDA_ERROR_INVALID_VALUE;
        }
        t->real[k] = ordinal_of(l->h.uuid);
        if (t->real[k] < 0) {
            t->why = "the driver does not show the new GPU (CUDA_VISIBLE_DEVICES)";
            return CUDA_ERROR_INVALID_DEVICE;
        }
        if (ts_ledger_lock(l) != 0) {
            t->why = "the new GPU's ledger lock is not recoverable";
            return CUDA_ERROR_INVALID_VALUE;
        }
        t->proc[k] = ts_shim_claim_slot(l, t->job[k], pid, ticks);
        ts_ledger_unlock(l);
        if (!t->proc[k]) {
            t->why = "the new GPU's ledger has no free process slot";
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    return CUDA_SUCCESS;
}

static CUcontext xl_ctx(CUcontext c)
{
    return ts_obj_moved_ctx(c);
}

/* swapped_bytes of device k's memory in the reserve follow it to the new
 * slot (the old one shows nothing out any more). */
static void carry_swapped(int k, struct ts_ledger_proc *to, struct ts_ledger *tl, int tj)
{
    uint64_t out = ts_swap_out_bytes(k);
    struct ts_shim_dev *d = &ts_shim.dev[k];
    if (!out)
        return;
    atomic_fetch_sub(&d->proc->swapped_bytes, out);
    atomic_fetch_sub(&d->job->swapped_bytes, out);
    atomic_fetch_add(&to->swapped_bytes, out);
    atomic_fetch_add(&tl->jobs[tj].swapped_bytes, out);
}

static CUresult between(void *arg)
{
    struct target *t = arg;
    ts_obj_sync_all();
    CUresult rc = open_targets(t);
    if (rc == CUDA_SUCCESS) {
        rc = ts_obj_move(t->real, ts_shim.ndevs);
        if (rc != CUDA_SUCCESS)
            t->why = rc == CUDA_ERROR_NOT_SUPPORTED ? "a module's image was not kept"
                                                    : "the driver refused an object";
    }
    if (rc != CUDA_SUCCESS) {
        drop(t);
        return rc;
    }
    for (int k = 0; k < ts_shim.ndevs; k++) {
        if (!t->l[k])
            continue;
        ts_swap_retarget(k, t->real[k], xl_ctx);
        carry_swapped(k, t->proc[k], t->l[k], t->job[k]);
        atomic_store(&t->proc[k]->last_call_ns, ts_ledger_now_ns());
        /* the old GPU's slot stays, charged nothing, until the agent drops
         * the job from that ledger (its pid is still this process) */
        ts_shim.dev[k].l = t->l[k];
        ts_shim.dev[k].job = &t->l[k]->jobs[t->job[k]];
        ts_shim.dev[k].proc = t->proc[k];
        ts_swap_set_slot(k, t->l[k], t->proc[k]);
    }
    ts_swap_set_home(ts_shim.dev[0].proc);
    return CUDA_SUCCESS;
}

CUresult ts_shim_move(struct ts_ledger_proc *home)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct target t = {.why = NULL};
    CUresult rc = CUDA_SUCCESS;
    uint64_t moved = 0;
    if (!ts_obj_tracking()) {
        t.why = "the node does not swap, or a device has no virtual memory management";
        rc = CUDA_ERROR_NOT_SUPPORTED;
    }
    for (int k = 0; k < ts_shim.ndevs && rc == CUDA_SUCCESS; k++)
        if (atomic_load(&ts_shim.dev[k].proc->used_bytes) != ts_swap_resident_bytes(k)) {
            t.why = "memory the swap engine does not hold (managed, pools, arrays, the job's "
                    "own cuMemCreate)";
            rc = CUDA_ERROR_NOT_SUPPORTED;
        }
    if (rc == CUDA_SUCCESS && !ts_obj_movable()) {
        t.why = "a module's image was not kept";
        rc = CUDA_ERROR_NOT_SUPPORTED;
    }
    if (rc == CUDA_SUCCESS)
        rc = ts_swap_move(home->swap_offset, home->swap_len, between, &t, &moved);
    atomic_store(&home->moved_bytes, moved);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t ms = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000u + (uint64_t)(t1.tv_nsec / 1000000) -
                  (uint64_t)(t0.tv_nsec / 1000000);
    if (rc == CUDA_SUCCESS)
        ts_shim_log("moved to GPU %s (driver ordinal %d): %" PRIu64 " bytes in %" PRIu64 " ms",
                    ts_shim.dev[0].l->h.uuid, ts_obj_real(0), moved, ms);
    else
        ts_shim_log("could not move: %s (CUresult %d)", t.why ? t.why : "a driver error", (int)rc);
    return rc;
}
