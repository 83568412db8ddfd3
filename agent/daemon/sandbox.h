/*
 * sandbox.h - the job sandbox (README.md "The job sandbox").
 *
 * The agent decides at start whether it can sandbox jobs (root, namespaces
 * available, --sandbox on) and with which user (--job-user). Each job's
 * launch.json then carries a "sandbox" object; the supervisor reads it,
 * makes the job's PID namespace, and the namespace's first process (the
 * job's init, pid 1 inside) calls ts_sandbox_enter: its own mount and IPC
 * namespaces, a read-only view of the host with private /tmp, /var/tmp,
 * /dev/shm and /run, the data folder replaced by the job's own folder (and
 * its checkpoints, simulated GPUs and swap reserve), the folders an admin
 * granted (--job-mount), a /proc of its PID namespace, the agent's token
 * file hidden, with --job-network none a network namespace of its own with
 * only loopback up; then the job's user, no capabilities, no_new_privs.
 */
#ifndef TS_AGENT_DAEMON_SANDBOX_H
#define TS_AGENT_DAEMON_SANDBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "agent/daemon/cgroup.h"

/* A host folder an admin lets every job see (--job-mount), at its real path. */
#define TS_SANDBOX_MOUNTS_MAX 16
struct ts_sandbox_mount {
    char path[1024];
    bool rw;
};

/* What the agent found at start. */
struct ts_sandbox {
    bool on;       /* jobs are sandboxed */
    char user[64]; /* the job user's name */
    uid_t uid;
    gid_t gid;
    char why_off[256];        /* when !on: what is not enforced and why */
    struct ts_cgroup_node cg; /* each job's control group (cgroup.h) */
    char driver[4096];        /* the real libcuda.so.1 ("": none found) */
    json_t *overlay;          /* every libcuda file the loader could find: the shim there */
    int64_t pids_max;         /* per job */
    struct ts_sandbox_mount mounts[TS_SANDBOX_MOUNTS_MAX];
    int nmounts;
    bool net_none; /* --job-network none: each job its own network namespace */
};

/* The agent's sandbox options (borrowed strings; NULL: the default). */
struct ts_sandbox_opts {
    const char *mode;       /* --sandbox on|off */
    const char *user;       /* --job-user */
    const char *mounts;     /* --job-mount PATH[:ro|:rw],... */
    const char *network;    /* --job-network host|none */
    const char *data_dir;   /* what a job mount may not show: the data folder, */
    const char *secrets[3]; /* and files (token, key): NULL-terminated */
};

/* Decide for this agent from its options. Returns 0, or -1 with msg (an
 * unknown user, a --job-mount that is not an existing absolute folder or
 * that would show the data folder, the token or the key, --job-network none
 * where no network namespace can be made: the agent refuses to start). A
 * machine that cannot sandbox (not root, no namespaces) is not an error:
 * sb->on is false and why_off says what is not enforced. */
int ts_sandbox_setup(struct ts_sandbox *sb, const struct ts_sandbox_opts *o, char *msg,
                     size_t msglen);

/* Parse and check --job-mount's text into sb->mounts (sandbox_opts.c);
 * 0, or -1 with msg. */
int ts_sandbox_mounts_parse(struct ts_sandbox *sb, const struct ts_sandbox_opts *o, char *msg,
                            size_t msglen);

/* In the job's init, in its new network namespace: loopback up
 * (sandbox_opts.c). 0, or -1 with msg. */
int ts_sandbox_loopback_up(char *msg, size_t msglen);

/* The Unix user one job runs as. */
struct ts_job_user {
    char name[64];
    uid_t uid;
    gid_t gid;
};

/* Resolve a job's user: its project's job_user (NULL or "": the agent's
 * --job-user), which must exist on this node; uid 0 only when its project
 * has allow_root. Returns 0, or -1 with msg (the job fails with it). */
int ts_sandbox_job_user(const struct ts_sandbox *sb, const char *project_user, bool allow_root,
                        struct ts_job_user *out, char *msg, size_t msglen);

/* Find the real CUDA driver (simgpu's in sim_lib_dir when not NULL, else
 * what dlopen("libcuda.so.1") loads) and every libcuda.so* file of the
 * loader's directories: in a job under the shim they are all the shim. */
void ts_sandbox_drivers(struct ts_sandbox *sb, const char *sim_lib_dir);

#define TS_SANDBOX_OVERLAY_MAX 64 /* libcuda files the shim stands in for */
#define TS_SANDBOX_PATH_MAX 4096

/* Under the shim: the real driver where only the shim looks, the shim,
 * and the overlay library bound over every libcuda file in overlay. */
struct ts_sandbox_driver {
    char real[TS_SANDBOX_PATH_MAX];
    char shim[TS_SANDBOX_PATH_MAX];
    char overlay_lib[TS_SANDBOX_PATH_MAX];
    char overlay[TS_SANDBOX_OVERLAY_MAX][TS_SANDBOX_PATH_MAX];
    size_t noverlay;
};

/* One job's sandbox, as launch.json's "sandbox" carries it from the agent
 * to the job's init (records.h encodes and decodes it). Paths are used
 * only when absolute; "": none. */
struct ts_sandbox_spec {
    int64_t uid, gid;
    char user[64]; /* "": set the groups to gid alone */
    char data_dir[TS_SANDBOX_PATH_MAX], job_dir[TS_SANDBOX_PATH_MAX];
    char checkpoint_dir[TS_SANDBOX_PATH_MAX], simgpu_dir[TS_SANDBOX_PATH_MAX];
    char swap_path[TS_SANDBOX_PATH_MAX], token_file[TS_SANDBOX_PATH_MAX];
    bool has_driver;
    struct ts_sandbox_driver driver;
    int64_t gpus[64]; /* physical indexes of its GPUs */
    size_t ngpus;
    struct ts_sandbox_mount mounts[TS_SANDBOX_MOUNTS_MAX];
    size_t nmounts;
    char network[8]; /* "host" or "none" */
};

/* In the job's init, pid 1 of its new PID namespace, still root: enter the
 * sandbox sb (borrowed). Returns 0, or -1 with msg. */
int ts_sandbox_enter(const struct ts_sandbox_spec *sb, char *msg, size_t msglen);

/* The job's work folder inside its folder: what the job sees at the job
 * folder's path. */
#define TS_SANDBOX_WORK "work"
/* The supervisor's host-pid socket in the job folder (hostpid.h). */
#define TS_SANDBOX_PIDSOCK "pid.sock"

#endif /* TS_AGENT_DAEMON_SANDBOX_H */
