/*
 * hostpid.h - this process's pid as the node's host sees it, from inside a
 * job's sandbox too.
 *
 * A sandboxed job has a PID namespace of its own, and a /proc of that
 * namespace: getpid() and NSpid name only its inner pid. The ledgers and
 * simgpu's state files are read by the agent in the host's namespace, so
 * processes record their host pid there. The job's supervisor, in the
 * host's namespace, answers on a Unix socket mounted at TS_HOSTPID_SOCK in
 * the job's mount namespace: the kernel translates the connecting process's
 * pid (SO_PEERCRED) into the supervisor's namespace, and the supervisor
 * writes it back (4 bytes). Without that socket (no sandbox) the first
 * NSpid figure is the answer, as before.
 *
 * Compiled into the ledger client (agent and shim) and simgpu's libraries.
 */
#ifndef TS_AGENT_LEDGER_HOSTPID_H
#define TS_AGENT_LEDGER_HOSTPID_H

#include <stdbool.h>
#include <sys/types.h>

#define TS_HOSTPID_SOCK "/run/tessera/pid.sock"

/* This process's host pid (cached per process; a forked child asks again).
 * -1 when the sandbox's socket exists but does not answer: the caller fails
 * closed rather than record a pid the agent would take for another. */
pid_t ts_hostpid(void);
/* Whether this process is in a PID namespace below the host's (its host pid
 * differs from getpid()): pids it reads in its ledgers are not its to judge
 * dead or alive; the agent reaps them. */
bool ts_hostpid_foreign(void);

#endif /* TS_AGENT_LEDGER_HOSTPID_H */
