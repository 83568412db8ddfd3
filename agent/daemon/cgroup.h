/*
 * cgroup.h - each sandboxed job in a control group of its own (README.md
 * "The job sandbox"): cgroup v2 where /sys/fs/cgroup is the unified
 * hierarchy (devices through a BPF program, devbpf.h), else the v1
 * controllers cpu, memory, pids and devices. The
 * agent detects which at start and makes its base group
 * (tessera-<hash of the data folder>), below its systemd unit's own group
 * on v1 when the unit delegates it (Delegate=yes), else below each
 * hierarchy's root; a job's launch.json carries its
 * group and limits ("cgroup"); the supervisor makes the group, writes the
 * limits and puts the job's init in it before the init goes on, and
 * removes it when the job is over; a stop's SIGKILL kills the group whole.
 */
#ifndef TS_AGENT_DAEMON_CGROUP_H
#define TS_AGENT_DAEMON_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TS_CGROUP_ROOT "/sys/fs/cgroup"

#define TS_CGROUP_PATH_MAX 256 /* bytes of a group's path below a root, with its NUL */

struct ts_cgroup_node {
    int version;                   /* 0: none usable, 1 or 2 */
    char base[TS_CGROUP_PATH_MAX]; /* below the root (v2) or each controller's root (v1) */
    char why[768];                 /* version 0: why not */
    char note[512];                /* a systemd service's group not used: why ("" else) */
};

/* Detect the hierarchy and make the agent's base group: on cgroup v1,
 * below the group of the agent's systemd service (INVOCATION_ID set, the
 * name=systemd line of /proc/self/cgroup) when pids, memory, cpu and
 * devices have the agent there too (Delegate=yes); else, and on v2, below
 * each hierarchy's root, as outside systemd (note says why, for a
 * service). */
void ts_cgroup_detect(struct ts_cgroup_node *cg, const char *data_dir);
#define TS_CGROUP_DEVICES_MAX 512 /* device rules of a job's group */
#define TS_CGROUP_RULE_MAX 32     /* bytes of a rule ("c 195:255 rwm") with its NUL */

/* A job's group and its limits, as launch.json's "cgroup" carries them
 * (records.h encodes and decodes it). */
struct ts_cgroup_spec {
    int64_t version;                    /* 1 or 2 (0: none) */
    char path[TS_CGROUP_PATH_MAX + 32]; /* below the root (v2) or each controller's root (v1) */
    double cpu;                         /* cores, a share under contention; 0: none */
    int64_t memory_bytes;               /* 0: none */
    int64_t pids_max;
    char devices[TS_CGROUP_DEVICES_MAX][TS_CGROUP_RULE_MAX]; /* "c MAJOR:MINOR rwm" */
    size_t ndevices;
};

/* A job's group into *out: its path, cpu (cores, 0: none), memory_bytes
 * (0: none), pids_max, and the devices it may use (v1: the devices
 * controller's rules; v2: the same rules as a device program, devbpf.h):
 * /dev/nvidiaN of its GPUs, the driver's control nodes, the usual character
 * devices. */
void ts_cgroup_spec(const struct ts_cgroup_node *cg, int64_t id, int attempt, double cpu,
                    uint64_t memory_bytes, int64_t pids_max, const unsigned *gpus, unsigned ngpus,
                    struct ts_cgroup_spec *out);
/* Supervisor: make the group, set its limits, move pid into it. 0, or -1
 * with msg. */
int ts_cgroup_enter(const struct ts_cgroup_spec *spec, pid_t pid, char *msg, size_t len);
/* SIGKILL every process of the group (v2: cgroup.kill). */
void ts_cgroup_kill(const struct ts_cgroup_spec *spec);
/* Remove the group once its processes are gone (retries briefly). */
void ts_cgroup_remove(const struct ts_cgroup_spec *spec);
/* The agent exits: its base group goes when no job's group is left in it. */
void ts_cgroup_release(const struct ts_cgroup_node *cg);

#endif /* TS_AGENT_DAEMON_CGROUP_H */
