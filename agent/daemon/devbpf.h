/*
 * devbpf.h - device control on cgroup v2 (README.md "The job sandbox"):
 * cgroup v2 has no devices.allow file; a BPF_PROG_TYPE_CGROUP_DEVICE
 * program attached to the job's group answers each open or mknod of a
 * device node. It is generated from the same rules the v1 devices
 * controller is given ("c 195:0 rwm", cgroup.c), loaded and attached with
 * the raw bpf system call (no libbpf: a dozen instructions per rule).
 */
#ifndef TS_AGENT_DAEMON_DEVBPF_H
#define TS_AGENT_DAEMON_DEVBPF_H

#include <jansson.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <stdint.h>

/* One rule, as devices.allow writes it: "TYPE MAJOR:MINOR ACCESS" with
 * TYPE c, b or a (any: the whole rule is "a"), MAJOR and MINOR a number or
 * "*", ACCESS of r, w, m. */
struct ts_devbpf_rule {
    uint32_t type;   /* BPF_DEVCG_DEV_CHAR or _BLOCK; 0: any */
    int64_t major;   /* -1: any */
    int64_t minor;   /* -1: any */
    uint32_t access; /* BPF_DEVCG_ACC_READ | _WRITE | _MKNOD */
};

/* Parse one rule; 0, or -1 with msg. */
int ts_devbpf_parse(const char *text, struct ts_devbpf_rule *out, char *msg, size_t len);

/* The program allowing what one of the rules allows and denying the rest,
 * into out (at most max instructions). Its length, or 0 when it does not
 * fit. */
size_t ts_devbpf_build(const struct ts_devbpf_rule *rules, size_t n, struct bpf_insn *out,
                       size_t max);
/* Instructions per rule at most, and around them. */
#define TS_DEVBPF_RULE_INSNS 8
#define TS_DEVBPF_FIXED_INSNS 8

/* Load a program of n instructions; its fd, or -1 with msg (the kernel
 * verifier's log when it refused it). */
int ts_devbpf_load(const struct bpf_insn *insns, size_t n, char *msg, size_t len);

/* Build, load and attach to the cgroup v2 folder dir the program of the n
 * rule texts of rules (borrowed). 0, or -1 with msg. */
int ts_devbpf_attach(const char *dir, const char *const *rules, size_t n, char *msg, size_t len);

#endif /* TS_AGENT_DAEMON_DEVBPF_H */
