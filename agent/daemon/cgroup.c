/*
 * cgroup.c - a control group per sandboxed job (cgroup.h), v1 or v2.
 */
#include "agent/daemon/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent/daemon/devbpf.h"

/* v1 controllers a job's group has; pids is the membership of record */
static const char *const v1_controllers[] = {"pids", "memory", "cpu", "devices", NULL};

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    int e = errno;
    close(fd);
    errno = e;
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* A control group's folder, 0755 whatever the umask; one that exists is
 * fine. 0 or -1 (errno set). */
static int make_dir(const char *path)
{
    if (mkdir(path, 0755) == 0)
        return chmod(path, 0755);
    return errno == EEXIST ? 0 : -1;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Whether the comma-separated list names controller ("" names the v2
 * line's empty list). */
static bool names(const char *list, const char *controller)
{
    size_t n = strlen(controller);
    if (n == 0)
        return list[0] == '\0';
    for (const char *p = list;; p++) {
        if (strncmp(p, controller, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return true;
        if ((p = strchr(p, ',')) == NULL)
            return false;
    }
}

/* The agent's own group in the hierarchy of controller ("" for cgroup v2),
 * from /proc/self/cgroup, into out without its leading '/' ("" for the
 * root). 0, or -1 when no line names it or it does not fit. */
static int own_group(const char *controller, char *out, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL)
        return -1;
    char line[1024];
    int rc = -1;
    while (rc != 0 && fgets(line, sizeof(line), f) != NULL) {
        char *list = strchr(line, ':');
        char *path = list != NULL ? strchr(list + 1, ':') : NULL;
        if (path == NULL)
            continue;
        *path++ = '\0';
        path[strcspn(path, "\n")] = '\0';
        while (*path == '/')
            path++;
        if (names(list + 1, controller) && (size_t)snprintf(out, len, "%s", path) < len)
            rc = 0;
    }
    fclose(f);
    return rc;
}

/* v1: the unit's group (name=systemd) when pids, memory, cpu and devices
 * have the agent there too, which systemd does for them all with
 * Delegate=yes; into parent, else parent "" and note says why. */
static void parent_v1(const char *unit, char *parent, char *note, size_t nlen)
{
    char own[TS_CGROUP_PATH_MAX], dir[TS_CGROUP_PATH_MAX + 32];
    if (strlen(unit) + sizeof("/tessera-0123456789abcdef") > TS_CGROUP_PATH_MAX) {
        snprintf(note, nlen, "the service's group /%s is too long a path", unit);
        return;
    }
    for (int i = 0; v1_controllers[i] != NULL; i++) {
        const char *c = v1_controllers[i];
        snprintf(dir, sizeof(dir), TS_CGROUP_ROOT "/%s/%s", c, unit);
        if (own_group(c, own, sizeof(own)) != 0 || strcmp(own, unit) != 0 || !exists(dir)) {
            snprintf(
                note, nlen,
                "the service's group /%s is not the agent's in the %s hierarchy (Delegate=yes?)",
                unit, c);
            return;
        }
    }
    snprintf(parent, TS_CGROUP_PATH_MAX, "%s", unit);
}

/* Where the agent's base group goes: below its systemd service's group
 * on v1 when that is delegated (cgroup.h), else "" (each hierarchy's root). */
static void pick_parent(struct ts_cgroup_node *cg, bool v2, char *parent)
{
    char unit[TS_CGROUP_PATH_MAX];
    parent[0] = '\0';
    /* v2: below the root still. Controllers enabled below the service's
     * group keep processes out of it, so systemd before 254 (no
     * DelegateSubgroup=) could not start the agent again there while its
     * jobs outlive it (agent/README.md "Cgroups") */
    if (getenv("INVOCATION_ID") == NULL || v2) /* not a systemd service, or v2 */
        return;
    if (own_group("name=systemd", unit, sizeof(unit)) == 0 && unit[0] != '\0')
        parent_v1(unit, parent, cg->note, sizeof(cg->note));
}

void ts_cgroup_detect(struct ts_cgroup_node *cg, const char *data_dir)
{
    memset(cg, 0, sizeof(*cg));
    uint64_t h = 1469598103934665603ull; /* FNV-1a, as the swap reserve's name */
    for (const char *p = data_dir; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    bool v2 = exists(TS_CGROUP_ROOT "/cgroup.controllers");
    char parent[TS_CGROUP_PATH_MAX], path[TS_CGROUP_PATH_MAX + 64];
    pick_parent(cg, v2, parent);
    snprintf(cg->base, sizeof(cg->base), "%s%stessera-%016llx", parent, parent[0] ? "/" : "",
             (unsigned long long)h);
    if (v2) {
        /* below the root only (pick_parent) */
        snprintf(path, sizeof(path), TS_CGROUP_ROOT "/%s", cg->base);
        if (make_dir(path) != 0 ||
            write_file(TS_CGROUP_ROOT "/cgroup.subtree_control", "+cpu +memory +pids") != 0) {
            snprintf(cg->why, sizeof(cg->why), "cgroup v2: could not make %s: %s", path,
                     strerror(errno));
            return;
        }
        snprintf(path, sizeof(path), TS_CGROUP_ROOT "/%s/cgroup.subtree_control", cg->base);
        if (write_file(path, "+cpu +memory +pids") != 0) {
            snprintf(cg->why, sizeof(cg->why), "cgroup v2: could not enable controllers in %s: %s",
                     path, strerror(errno));
            return;
        }
        cg->version = 2;
        return;
    }
    for (int i = 0; v1_controllers[i] != NULL; i++) {
        snprintf(path, sizeof(path), TS_CGROUP_ROOT "/%s/%s", v1_controllers[i], cg->base);
        if (make_dir(path) != 0) {
            snprintf(cg->why, sizeof(cg->why), "cgroup v1: could not make %s: %s", path,
                     strerror(errno));
            return;
        }
    }
    cg->version = 1;
}

static void allow(struct ts_cgroup_spec *spec, const char *rule)
{
    if (spec->ndevices < TS_CGROUP_DEVICES_MAX)
        snprintf(spec->devices[spec->ndevices++], TS_CGROUP_RULE_MAX, "%s", rule);
}

/* "c MAJOR:MINOR rwm" of a character device node, when it exists. */
static void allow_node(struct ts_cgroup_spec *spec, const char *node)
{
    struct stat st;
    char rule[TS_CGROUP_RULE_MAX];
    if (stat(node, &st) != 0 || !S_ISCHR(st.st_mode))
        return;
    snprintf(rule, sizeof(rule), "c %u:%u rwm", major(st.st_rdev), minor(st.st_rdev));
    allow(spec, rule);
}

void ts_cgroup_spec(const struct ts_cgroup_node *cg, int64_t id, int attempt, double cpu,
                    uint64_t memory_bytes, int64_t pids_max, const unsigned *gpus, unsigned ngpus,
                    struct ts_cgroup_spec *out)
{
    memset(out, 0, sizeof(*out));
    out->version = cg->version;
    snprintf(out->path, sizeof(out->path), "%s/%lld-%d", cg->base, (long long)id, attempt);
    out->cpu = cpu;
    out->memory_bytes = (int64_t)memory_bytes;
    out->pids_max = pids_max;
    if (cg->version == 0)
        return;
    struct ts_cgroup_spec *dev = out;
    static const char *const usual[] = {"/dev/null",           "/dev/zero",
                                        "/dev/full",           "/dev/random",
                                        "/dev/urandom",        "/dev/tty",
                                        "/dev/ptmx",           "/dev/nvidiactl",
                                        "/dev/nvidia-uvm",     "/dev/nvidia-uvm-tools",
                                        "/dev/nvidia-modeset", NULL};
    for (int i = 0; usual[i] != NULL; i++)
        allow_node(dev, usual[i]);
    allow(dev, "c 136:* rwm"); /* pseudo-terminals */
    /* MIG's capability files (their own modes keep the configuring ones to
     * root); a GPU with MIG instances needs them to open one */
    DIR *caps = opendir("/dev/nvidia-caps");
    for (struct dirent *e; caps != NULL && (e = readdir(caps)) != NULL;) {
        char node[300];
        if (e->d_name[0] == '.')
            continue;
        snprintf(node, sizeof(node), "/dev/nvidia-caps/%s", e->d_name);
        allow_node(dev, node);
    }
    if (caps != NULL)
        closedir(caps);
    for (unsigned g = 0; g < ngpus; g++) {
        char node[32];
        snprintf(node, sizeof(node), "/dev/nvidia%u", gpus[g]);
        allow_node(dev, node);
    }
}

static void dir_of(const struct ts_cgroup_spec *spec, const char *controller, char *out, size_t len)
{
    const char *path = spec->path;
    if (spec->version == 2)
        snprintf(out, len, TS_CGROUP_ROOT "/%s", path);
    else
        snprintf(out, len, TS_CGROUP_ROOT "/%s/%s", controller, path);
}

static int set(const struct ts_cgroup_spec *spec, const char *controller, const char *file,
               const char *value, char *msg, size_t len)
{
    char dir[400], path[480];
    dir_of(spec, controller, dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (write_file(path, value) != 0) {
        snprintf(msg, len, "could not write %s to %s: %s", value, path, strerror(errno));
        return -1;
    }
    return 0;
}

int ts_cgroup_enter(const struct ts_cgroup_spec *spec, pid_t pid, char *msg, size_t len)
{
    int version = (int)spec->version;
    double cpu = spec->cpu;
    int64_t mem = spec->memory_bytes, pids = spec->pids_max;
    char dir[400], v[64];
    for (int i = 0; i < (version == 2 ? 1 : 4); i++) {
        dir_of(spec, v1_controllers[i], dir, sizeof(dir));
        if (make_dir(dir) != 0) {
            snprintf(msg, len, "could not make %s: %s", dir, strerror(errno));
            return -1;
        }
    }
    if (pids > 0) {
        snprintf(v, sizeof(v), "%lld", (long long)pids);
        if (set(spec, "pids", "pids.max", v, msg, len) != 0)
            return -1;
    }
    if (mem > 0) {
        snprintf(v, sizeof(v), "%lld", (long long)mem);
        if (set(spec, "memory", version == 2 ? "memory.max" : "memory.limit_in_bytes", v, msg,
                len) != 0)
            return -1;
        if (version == 2)
            set(spec, "memory", "memory.swap.max", "0", msg, len); /* absent without swap */
    }
    if (cpu > 0) {
        /* the request is a share of the node's CPUs under contention, not a cap */
        if (version == 2) {
            long w = (long)(cpu * 100);
            snprintf(v, sizeof(v), "%ld", w < 1 ? 1 : w > 10000 ? 10000 : w);
            if (set(spec, "cpu", "cpu.weight", v, msg, len) != 0)
                return -1;
        } else {
            long s = (long)(cpu * 1024);
            snprintf(v, sizeof(v), "%ld", s < 2 ? 2 : s);
            if (set(spec, "cpu", "cpu.shares", v, msg, len) != 0)
                return -1;
        }
    }
    if (version == 2) {
        /* no devices file: a program answers for the group (devbpf.c) */
        dir_of(spec, "devices", dir, sizeof(dir));
        const char *rules[TS_CGROUP_DEVICES_MAX];
        for (size_t i = 0; i < spec->ndevices; i++)
            rules[i] = spec->devices[i];
        if (ts_devbpf_attach(dir, rules, spec->ndevices, msg, len) != 0)
            return -1;
    }
    if (version == 1) {
        if (set(spec, "devices", "devices.deny", "a", msg, len) != 0)
            return -1;
        for (size_t i = 0; i < spec->ndevices; i++)
            if (set(spec, "devices", "devices.allow", spec->devices[i], msg, len) != 0)
                return -1;
    }
    snprintf(v, sizeof(v), "%d", (int)pid);
    for (int i = 0; i < (version == 2 ? 1 : 4); i++)
        if (set(spec, v1_controllers[i], "cgroup.procs", v, msg, len) != 0)
            return -1;
    return 0;
}

void ts_cgroup_kill(const struct ts_cgroup_spec *spec)
{
    char dir[400], path[480];
    dir_of(spec, "pids", dir, sizeof(dir));
    if (spec->version == 2) {
        snprintf(path, sizeof(path), "%s/cgroup.kill", dir);
        if (write_file(path, "1") == 0)
            return;
    }
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    for (int round = 0; round < 10; round++) {
        FILE *f = fopen(path, "re");
        if (f == NULL)
            return;
        int pid, n = 0;
        while (fscanf(f, "%d", &pid) == 1) {
            kill(pid, SIGKILL);
            n++;
        }
        fclose(f);
        if (n == 0)
            return;
        usleep(10000);
    }
}

void ts_cgroup_release(const struct ts_cgroup_node *cg)
{
    char path[512];
    for (int i = 0; cg->version > 0 && i < (cg->version == 2 ? 1 : 4); i++) {
        if (cg->version == 2)
            snprintf(path, sizeof(path), TS_CGROUP_ROOT "/%s", cg->base);
        else
            snprintf(path, sizeof(path), TS_CGROUP_ROOT "/%s/%s", v1_controllers[i], cg->base);
        rmdir(path); /* EBUSY while jobs run: they keep it */
    }
}

void ts_cgroup_remove(const struct ts_cgroup_spec *spec)
{
    int version = (int)spec->version;
    for (int i = 0; i < (version == 2 ? 1 : 4); i++) {
        char dir[400];
        dir_of(spec, v1_controllers[i], dir, sizeof(dir));
        for (int tries = 0; tries < 50 && rmdir(dir) != 0 && errno == EBUSY; tries++)
            usleep(20000);
    }
}
