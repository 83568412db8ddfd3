/*
 * devbpf.c - the cgroup v2 device program (devbpf.h).
 *
 * The program reads the request (struct bpf_cgroup_dev_ctx) into r2 (the
 * device type), r3 (the access asked), r4 (major) and r5 (minor), then
 * tries each rule in turn: a rule is a block that jumps to the next block
 * on the first field that does not match, and returns 1 (allow) when all
 * do; after the last block it returns 0 (deny). No helper is called and no
 * map is used, so the verifier sees straight-line code with forward jumps.
 */
#include "agent/daemon/devbpf.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- rules ---------------------------------------------------------------- */

static int number(const char *s, const char **end, int64_t *out)
{
    if (*s == '*') {
        *out = -1;
        *end = s + 1;
        return 0;
    }
    if (*s < '0' || *s > '9')
        return -1;
    char *e;
    errno = 0;
    unsigned long long v = strtoull(s, &e, 10);
    if (errno != 0 || v > 0x7fffffffULL) /* a jump's immediate is signed */
        return -1;
    *out = (int64_t)v;
    *end = e;
    return 0;
}

int ts_devbpf_parse(const char *text, struct ts_devbpf_rule *out, char *msg, size_t len)
{
    memset(out, 0, sizeof(*out));
    const char *p = text;
    if (strcmp(text, "a") == 0) {
        *out = (struct ts_devbpf_rule){0, -1, -1, 7};
        return 0;
    }
    if ((p[0] != 'c' && p[0] != 'b') || p[1] != ' ')
        goto bad;
    out->type = p[0] == 'c' ? BPF_DEVCG_DEV_CHAR : BPF_DEVCG_DEV_BLOCK;
    p += 2;
    if (number(p, &p, &out->major) != 0 || *p++ != ':' || number(p, &p, &out->minor) != 0 ||
        *p++ != ' ' || *p == '\0')
        goto bad;
    for (; *p != '\0'; p++) {
        uint32_t bit = *p == 'r'   ? BPF_DEVCG_ACC_READ
                       : *p == 'w' ? BPF_DEVCG_ACC_WRITE
                       : *p == 'm' ? BPF_DEVCG_ACC_MKNOD
                                   : 0;
        if (bit == 0 || (out->access & bit) != 0)
            goto bad;
        out->access |= bit;
    }
    return 0;
bad:
    snprintf(msg, len, "invalid device rule: \"%.64s\" (TYPE MAJOR:MINOR ACCESS, e.g. c 195:0 rwm)",
             text);
    return -1;
}

/* ---- the program ----------------------------------------------------------- */

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
    return (struct bpf_insn){.code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm};
}

#define LDX_W(dst, off) insn(BPF_LDX | BPF_MEM | BPF_W, dst, 1, off, 0)
#define ALU32_K(op, dst, imm) insn(BPF_ALU | (op) | BPF_K, dst, 0, 0, imm)
#define MOV32_X(dst, src) insn(BPF_ALU | BPF_MOV | BPF_X, dst, src, 0, 0)
#define MOV64_K(dst, imm) insn(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm)
#define JNE_K(dst, imm, off) insn(BPF_JMP | BPF_JNE | BPF_K, dst, 0, off, imm)
#define EXIT() insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

size_t ts_devbpf_build(const struct ts_devbpf_rule *rules, size_t n, struct bpf_insn *out,
                       size_t max)
{
    if (max < TS_DEVBPF_FIXED_INSNS + n * TS_DEVBPF_RULE_INSNS)
        return 0;
    size_t k = 0;
    out[k++] = LDX_W(2, offsetof(struct bpf_cgroup_dev_ctx, access_type));
    out[k++] = ALU32_K(BPF_AND, 2, 0xffff);
    out[k++] = LDX_W(3, offsetof(struct bpf_cgroup_dev_ctx, access_type));
    out[k++] = ALU32_K(BPF_RSH, 3, 16);
    out[k++] = LDX_W(4, offsetof(struct bpf_cgroup_dev_ctx, major));
    out[k++] = LDX_W(5, offsetof(struct bpf_cgroup_dev_ctx, minor));
    for (size_t i = 0; i < n; i++) {
        const struct ts_devbpf_rule *r = &rules[i];
        struct bpf_insn block[TS_DEVBPF_RULE_INSNS];
        size_t b = 0;
        /* the jump offsets are filled once the block's length is known */
        if (r->type != 0)
            block[b++] = JNE_K(2, (int32_t)r->type, 0);
        if (r->major >= 0)
            block[b++] = JNE_K(4, (int32_t)r->major, 0);
        if (r->minor >= 0)
            block[b++] = JNE_K(5, (int32_t)r->minor, 0);
        if ((r->access & 7) != 7) {
            /* every bit asked must be one the rule allows */
            block[b++] = MOV32_X(1, 3);
            block[b++] = ALU32_K(BPF_AND, 1, (int32_t)(~r->access & 0xffff));
            block[b++] = JNE_K(1, 0, 0);
        }
        block[b++] = MOV64_K(0, 1);
        block[b++] = EXIT();
        for (size_t j = 0; j < b; j++) {
            if (block[j].code == (BPF_JMP | BPF_JNE | BPF_K))
                block[j].off = (int16_t)(b - j - 1); /* to the next block */
            out[k++] = block[j];
        }
    }
    out[k++] = MOV64_K(0, 0);
    out[k++] = EXIT();
    return k;
}

/* ---- the kernel ------------------------------------------------------------ */

static long bpf(int cmd, union bpf_attr *attr)
{
    return syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

int ts_devbpf_load(const struct bpf_insn *insns, size_t n, char *msg, size_t len)
{
    static char log[16384];
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    attr.insns = (uint64_t)(uintptr_t)insns;
    attr.insn_cnt = (uint32_t)n;
    /* no helper is called: the kernel asks no GPL-compatible license */
    attr.license = (uint64_t)(uintptr_t) "tessera";
    int fd = (int)bpf(BPF_PROG_LOAD, &attr);
    if (fd >= 0)
        return fd;
    int e = errno;
    /* again with the verifier's log, for the message (a log too small for
     * what it would say fails a good program: hence not the first time) */
    log[0] = '\0';
    attr.log_buf = (uint64_t)(uintptr_t)log;
    attr.log_size = sizeof(log);
    attr.log_level = 1;
    fd = (int)bpf(BPF_PROG_LOAD, &attr);
    if (fd >= 0) /* it loaded after all */
        return fd;
    size_t l = strlen(log);
    const char *tail = l > 300 ? log + l - 300 : log; /* the verifier's last words */
    snprintf(msg, len, "could not load the device program: %s%s%s", strerror(e),
             tail[0] ? ": " : "", tail);
    errno = e;
    return -1;
}

int ts_devbpf_attach(const char *dir, const char *const *rules, size_t n, char *msg, size_t len)
{
    struct ts_devbpf_rule *r = calloc(n + 1, sizeof(*r));
    size_t max = TS_DEVBPF_FIXED_INSNS + n * TS_DEVBPF_RULE_INSNS;
    struct bpf_insn *prog = calloc(max, sizeof(*prog));
    int rc = -1, pfd = -1, cfd = -1;
    if (r == NULL || prog == NULL) {
        snprintf(msg, len, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (ts_devbpf_parse(rules[i] != NULL ? rules[i] : "", &r[i], msg, len) != 0)
            goto out;
    }
    size_t k = ts_devbpf_build(r, n, prog, max);
    if ((pfd = ts_devbpf_load(prog, k, msg, len)) < 0)
        goto out;
    if ((cfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        snprintf(msg, len, "could not open %s: %s", dir, strerror(errno));
        goto out;
    }
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.target_fd = (uint32_t)cfd;
    attr.attach_bpf_fd = (uint32_t)pfd;
    attr.attach_type = BPF_CGROUP_DEVICE;
    /* no BPF_F_ALLOW_OVERRIDE: no group below may replace it */
    if (bpf(BPF_PROG_ATTACH, &attr) != 0) {
        snprintf(msg, len, "could not attach the device program to %s: %s", dir, strerror(errno));
        goto out;
    }
    rc = 0; /* the group holds the program now */
out:
    if (pfd >= 0)
        close(pfd);
    if (cfd >= 0)
        close(cfd);
    free(r);
    free(prog);
    return rc;
}
