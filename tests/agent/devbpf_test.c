/*
 * devbpf_test.c - the cgroup v2 device program (agent/daemon/devbpf.c).
 *
 * These machines have cgroup v1, so the program is first run here by a
 * small interpreter of the instructions it may contain, against a table of
 * requests (type, major, minor, access) and the answer each must get; then,
 * as root, the kernel's verifier must accept it; then, where a cgroup v2
 * hierarchy is writable (the unified one of a hybrid machine counts), a
 * process in a group with the program opens /dev/null and is refused
 * /dev/full. The last two are skipped cleanly where they cannot run.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/daemon/devbpf.h"
#include "api/array.h"

#define C BPF_DEVCG_DEV_CHAR
#define B BPF_DEVCG_DEV_BLOCK
#define R BPF_DEVCG_ACC_READ
#define W BPF_DEVCG_ACC_WRITE
#define M BPF_DEVCG_ACC_MKNOD

/* Run prog on one request as the kernel would: 1 allow, 0 deny; fails the
 * test on an instruction the program should not have, a jump out of it or
 * a run that does not end. */
static int run(const struct bpf_insn *prog, size_t n, uint32_t type, uint32_t major, uint32_t minor,
               uint32_t access)
{
    struct bpf_cgroup_dev_ctx ctx = {(access << 16) | type, major, minor};
    uint64_t reg[11] = {0};
    for (size_t pc = 0, steps = 0; steps < 10000; steps++) {
        if (pc >= n)
            fail_msg("pc %zu ran out of the program (%zu instructions)", pc, n);
        const struct bpf_insn *i = &prog[pc++];
        uint64_t *d = &reg[i->dst_reg];
        switch (i->code) {
        case BPF_LDX | BPF_MEM | BPF_W: {
            assert_int_equal(i->src_reg, 1);
            assert_true(i->off >= 0 && (size_t)i->off + 4 <= sizeof(ctx) && i->off % 4 == 0);
            uint32_t v;
            memcpy(&v, (const char *)&ctx + i->off, 4);
            *d = v;
            break;
        }
        case BPF_ALU | BPF_AND | BPF_K:
            *d = (uint32_t)*d & (uint32_t)i->imm;
            break;
        case BPF_ALU | BPF_RSH | BPF_K:
            *d = (uint32_t)*d >> i->imm;
            break;
        case BPF_ALU | BPF_MOV | BPF_X:
            *d = (uint32_t)reg[i->src_reg];
            break;
        case BPF_ALU64 | BPF_MOV | BPF_K:
            *d = (uint64_t)(int64_t)i->imm;
            break;
        case BPF_JMP | BPF_JNE | BPF_K:
            assert_true(i->off >= 0); /* forward only: the program ends */
            if (*d != (uint64_t)(int64_t)i->imm)
                pc += (size_t)i->off;
            break;
        case BPF_JMP | BPF_EXIT:
            return (int)reg[0];
        default:
            fail_msg("instruction %zu has an unexpected code 0x%02x", pc - 1, i->code);
        }
    }
    fail_msg("the program did not end");
    return -1;
}

/* The program of rule texts (NULL-terminated) into prog; its length. */
static size_t build(const char *const *texts, struct bpf_insn *prog, size_t max)
{
    struct ts_devbpf_rule rules[32];
    size_t n = 0;
    char msg[256];
    for (; texts[n] != NULL; n++) {
        assert_true(n < 32);
        if (ts_devbpf_parse(texts[n], &rules[n], msg, sizeof(msg)) != 0)
            fail_msg("%s", msg);
    }
    size_t k = ts_devbpf_build(rules, n, prog, max);
    assert_true(k > 0);
    return k;
}

/* A job's rules as cgroup.c gives them on a node with /dev/nvidia0 and 1
 * (195:N, nvidiactl 195:255), the job holding GPU 1; and two rules of
 * narrower access to check how access is matched. */
static const char *const job_rules[] = {
    "c 1:3 rwm",  "c 1:5 rwm", "c 1:7 rwm",   "c 1:8 rwm",     "c 1:9 rwm",
    "c 5:0 rwm",  "c 5:2 rwm", "c 136:* rwm", "c 195:255 rwm", "c 195:1 rwm",
    "c 10:200 r", "b 7:* rw",  NULL};

static const struct {
    uint32_t type, major, minor, access;
    int allow;
    const char *what;
} table[] = {
    {C, 1, 3, R | W, 1, "/dev/null"},
    {C, 1, 3, M, 1, "mknod of /dev/null"},
    {C, 1, 5, R, 1, "/dev/zero"},
    {C, 1, 7, W, 1, "/dev/full"},
    {C, 1, 9, R, 1, "/dev/urandom"},
    {C, 5, 0, R | W, 1, "/dev/tty"},
    {C, 136, 42, R | W, 1, "a pseudo-terminal"},
    {C, 195, 1, R | W, 1, "its GPU"},
    {C, 195, 255, R | W, 1, "nvidiactl"},
    {C, 195, 0, R | W, 0, "another job's GPU"},
    {C, 195, 2, R, 0, "a GPU that is nobody's"},
    {B, 1, 3, R, 0, "a block device 1:3"},
    {C, 1, 1, R, 0, "/dev/mem"},
    {C, 1, 4, R | W, 0, "/dev/port"},
    {C, 1, 11, W, 0, "/dev/kmsg"},
    {C, 10, 200, R, 1, "read of a read-only rule"},
    {C, 10, 200, W, 0, "write of a read-only rule"},
    {C, 10, 200, R | W, 0, "read and write of a read-only rule"},
    {C, 10, 200, M, 0, "mknod of a read-only rule"},
    {B, 7, 3, R | W, 1, "a loop device, any minor"},
    {B, 7, 3, M, 0, "mknod of a loop device"},
    {C, 7, 3, R, 0, "a character device of the loop major"},
    {B, 8, 0, R | W, 0, "a disk"},
    {C, 0xfff, 0xfffff, R, 0, "the largest device numbers"},
};

static void the_program_allows_exactly_what_a_rule_allows(void **state)
{
    (void)state;
    struct bpf_insn prog[256];
    size_t n = build(job_rules, prog, 256);
    for (size_t i = 0; i < TS_ARRAY_LEN(table); i++) {
        int got = run(prog, n, table[i].type, table[i].major, table[i].minor, table[i].access);
        if (got != table[i].allow)
            fail_msg("%s (%c %u:%u access %u): %s, want %s", table[i].what,
                     table[i].type == C ? 'c' : 'b', table[i].major, table[i].minor,
                     table[i].access, got ? "allowed" : "denied",
                     table[i].allow ? "allowed" : "denied");
    }
    /* "a" allows everything, no rule denies everything */
    static const char *const all[] = {"a", NULL}, *const none[] = {NULL};
    size_t na = build(all, prog, 256);
    for (size_t i = 0; i < TS_ARRAY_LEN(table); i++)
        assert_int_equal(
            run(prog, na, table[i].type, table[i].major, table[i].minor, table[i].access), 1);
    size_t nn = build(none, prog, 256);
    for (size_t i = 0; i < TS_ARRAY_LEN(table); i++)
        assert_int_equal(
            run(prog, nn, table[i].type, table[i].major, table[i].minor, table[i].access), 0);
    /* a program that would not fit is refused, not cut short */
    struct ts_devbpf_rule r[4];
    char msg[128];
    for (int i = 0; i < 4; i++)
        assert_int_equal(ts_devbpf_parse("c 1:3 r", &r[i], msg, sizeof(msg)), 0);
    assert_int_equal(ts_devbpf_build(r, 4, prog, TS_DEVBPF_FIXED_INSNS + 3), 0);
}

static void rules_are_parsed_as_devices_allow_writes_them(void **state)
{
    (void)state;
    struct ts_devbpf_rule r;
    char msg[256];
    assert_int_equal(ts_devbpf_parse("c 195:0 rwm", &r, msg, sizeof(msg)), 0);
    assert_int_equal(r.type, C);
    assert_int_equal(r.major, 195);
    assert_int_equal(r.minor, 0);
    assert_int_equal(r.access, R | W | M);
    assert_int_equal(ts_devbpf_parse("b *:* w", &r, msg, sizeof(msg)), 0);
    assert_int_equal(r.type, B);
    assert_int_equal(r.major, -1);
    assert_int_equal(r.minor, -1);
    assert_int_equal(r.access, W);
    static const char *const bad[] = {
        "",         "x 1:3 r",  "c 1:3",  "c 1 r",    "c 1:3 q",          "c 1:3 rr",
        "c -1:3 r", "c 1:3  r", "c1:3 r", "c 1:3 r ", "c 4294967296:0 r", "c 1:2147483648 r",
        "aa",       NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        msg[0] = '\0';
        if (ts_devbpf_parse(bad[i], &r, msg, sizeof(msg)) == 0)
            fail_msg("\"%s\" was accepted", bad[i]);
        assert_non_null(strstr(msg, "invalid device rule"));
    }
}

static void the_kernel_verifier_accepts_the_program(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    struct bpf_insn prog[256];
    size_t n = build(job_rules, prog, 256);
    char msg[600];
    int fd = ts_devbpf_load(prog, n, msg, sizeof(msg));
    if (fd < 0 && (errno == EPERM || errno == ENOSYS)) {
        fprintf(stderr, "skipped: %s\n", msg);
        skip();
    }
    if (fd < 0)
        fail_msg("%s", msg);
    close(fd);
}

/* A writable cgroup v2 hierarchy, into dir; false when there is none. */
static bool cgroup2(char *dir, size_t len)
{
    static const char *const roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified", NULL};
    for (int i = 0; roots[i] != NULL; i++) {
        char probe[256];
        snprintf(probe, sizeof(probe), "%s/cgroup.procs", roots[i]);
        struct stat st;
        snprintf(dir, len, "%s/tessera-devbpf-test-%d", roots[i], (int)getpid());
        if (stat(probe, &st) == 0 && access(probe, W_OK) == 0 &&
            (strcmp(roots[i], "/sys/fs/cgroup") != 0 ||
             access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) &&
            mkdir(dir, 0755) == 0)
            return true;
    }
    return false;
}

static void a_process_in_the_group_opens_only_the_devices_of_its_rules(void **state)
{
    (void)state;
    char dir[300];
    if (geteuid() != 0 || !cgroup2(dir, sizeof(dir))) {
        fprintf(stderr, "skipped: no writable cgroup v2 hierarchy here\n");
        skip();
    }
    const char *rules[] = {"c 1:3 rwm", "c 1:5 rwm"};
    char msg[600];
    int rc = ts_devbpf_attach(dir, rules, 2, msg, sizeof(msg));
    if (rc != 0) {
        rmdir(dir);
        fail_msg("%s", msg);
    }
    pid_t pid = fork();
    if (pid == 0) {
        char procs[400], me[32];
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
        snprintf(me, sizeof(me), "%d", (int)getpid());
        int fd = open(procs, O_WRONLY);
        if (fd < 0 || write(fd, me, strlen(me)) < 0)
            _exit(2);
        close(fd);
        if (open("/dev/null", O_RDWR) < 0)
            _exit(3);
        if (open("/dev/zero", O_RDONLY) < 0)
            _exit(4);
        errno = 0;
        if (open("/dev/full", O_WRONLY) >= 0 || errno != EPERM)
            _exit(5);
        _exit(0);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    rmdir(dir);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rules_are_parsed_as_devices_allow_writes_them),
        cmocka_unit_test(the_program_allows_exactly_what_a_rule_allows),
        cmocka_unit_test(the_kernel_verifier_accepts_the_program),
        cmocka_unit_test(a_process_in_the_group_opens_only_the_devices_of_its_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
