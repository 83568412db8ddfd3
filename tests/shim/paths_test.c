/*
 * paths_test.c - the shim's cases about entry paths: every way a program
 * finds a driver function (exported symbols, dlsym on every kind of
 * handle, cuGetProcAddress and _v2 at CUDA 11.3, 12.0, 12.8 and 13.0 with
 * each flag) ends in the hook; and README.md's table agrees with
 * hooks.def. Run by shim_test.c.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/shim/harness.h"

#define LINE_MS 20000
#define A(...)                                                                                     \
    (const char *const[])                                                                          \
    {                                                                                              \
        __VA_ARGS__, NULL                                                                          \
    }
#define SHIM_FILE "libtessera-cuda.so"

static const struct hook {
    const char *name;
    bool gated;
    const char *fail;
} hooks[] = {
#define GATED true
#define UNGATED false
#define TS_HOOK(name, kind, gate, fail, params, args) {#name, gate, #fail},
#define TS_NVML_HOOK(name, fail) {#name, false, #fail},
#include "agent/shim/hooks.def"
#include "api/array.h"
#undef TS_HOOK
#undef TS_NVML_HOOK
};
#define NHOOKS (TS_ARRAY_LEN(hooks))

static bool is_hook(const char *name)
{
    for (size_t i = 0; i < NHOOKS; i++)
        if (strcmp(hooks[i].name, name) == 0)
            return true;
    return false;
}

static const char *const vias[] = {"handle",       "default",       "next",
                                   "proc:11030:0", "proc:12000:0",  "proc:12080:2",
                                   "proc:13000:1", "proc1:11030:0", "proc1:12000:2"};

int every_entry_path_routes_through_the_hooks(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    int j = world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    for (size_t v = 0; v < TS_ARRAY_LEN(vias); v++) {
        char via[64], l[512];
        snprintf(via, sizeof(via), "--via=%s", vias[v]);
        struct probe p;
        probe_start(&p, &w, 7, false, NULL,
                    A(via, "init", "alloc:1M", "where:cuMemAlloc_v2", "where:cuMemcpyHtoD_v2",
                      "where:cuDriverGetVersion", "where:nvmlDeviceGetMemoryInfo", "wait",
                      "freeall", "wait"));
        if (!probe_line(&p, "alloc rc=0", l, sizeof l, LINE_MS)) {
            fprintf(stderr, "via %s: no allocation\n", vias[v]);
            return 1;
        }
        CHECK(probe_line(&p, "where", l, sizeof l, LINE_MS));
        CHECK(strstr(l, " cuMemAlloc_v2 " SHIM_FILE) != NULL);
        CHECK(probe_line(&p, "where", l, sizeof l, LINE_MS));
        CHECK(strstr(l, " " SHIM_FILE) != NULL);
        CHECK(probe_line(&p, "where", l, sizeof l, LINE_MS)); /* not a hook: the driver's */
        CHECK(strstr(l, " cuDriverGetVersion libcuda.so") != NULL);
        CHECK(probe_line(&p, "where", l, sizeof l, LINE_MS));
        CHECK(strstr(l, " nvmlDeviceGetMemoryInfo " SHIM_FILE) != NULL);
        CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
        if (job_used(w.l[0], j) != 1 * MiB) {
            fprintf(stderr, "via %s: charged %llu\n", vias[v],
                    (unsigned long long)job_used(w.l[0], j));
            return 1;
        }
        probe_go(&p);
        CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
        CHECK_EQ(job_used(w.l[0], j), 0);
        CHECK_EQ(probe_end(&p, LINE_MS), 0);
    }
    world_free(&w);
    return 0;
}

/* What the driver hands out for each name, version and flag, then the
 * same under the shim: a hook's name must come back as that hook, any
 * other name as the driver's own function. */
int get_proc_address_hands_out_hooks_for_every_version_and_flag(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    world_job(w.l[0], 7, 4 * GiB, 4 * GiB);
    static const int versions[] = {11030, 12000, 12080, 13000};
    static const int flags[] = {0, 1, 2};
    static char names[NHOOKS + 4][128];
    size_t nnames = 0;
    for (size_t i = 0; i < NHOOKS; i++) {
        const char *n = hooks[i].name;
        if (strncmp(n, "cu", 2) != 0 || strstr(n, "_ptds") || strstr(n, "_ptsz"))
            continue;
        snprintf(names[nnames], sizeof(names[0]), "%s", n);
        char *v2 = strstr(names[nnames], "_v2");
        if (v2 != NULL && v2[3] == '\0')
            *v2 = '\0'; /* the base name, as the runtime asks */
        nnames++;
    }
    snprintf(names[nnames++], sizeof(names[0]), "cuDriverGetVersion");
    snprintf(names[nnames++], sizeof(names[0]), "cuGetErrorName");
    enum { LOOKUPS_MAX = 4096 };
    static char argbuf[LOOKUPS_MAX][160];
    static const char *args[LOOKUPS_MAX + 1];
    size_t na = 0;
    args[na++] = "init";
    /* every name at every version and flag: none may be left out */
    CHECK(1 + 4 * 3 * nnames < LOOKUPS_MAX);
    for (size_t v = 0; v < 4; v++)
        for (size_t f = 0; f < 3; f++)
            for (size_t n = 0; n < nnames && na < LOOKUPS_MAX; n++) {
                snprintf(argbuf[na], sizeof(argbuf[0]), "lookup:%d:%d:%s", versions[v], flags[f],
                         names[n]);
                args[na] = argbuf[na];
                na++;
            }
    args[na] = NULL;
    struct probe plain, shim;
    probe_start(&plain, &w, 7, true, NULL, args);
    probe_start(&shim, &w, 7, false, NULL, args);
    char a[512], b[512];
    int hooked = 0, ptds = 0;
    CHECK(probe_line(&plain, "init rc=0", a, sizeof a, LINE_MS));
    CHECK(probe_line(&shim, "init rc=0", b, sizeof b, LINE_MS));
    for (size_t i = 1; i < na; i++) {
        for (int k = 0; k < 2; k++) { /* _v2, then the CUDA 11 cuGetProcAddress */
            CHECK(probe_line(&plain, "lookup", a, sizeof a, LINE_MS));
            CHECK(probe_line(&shim, "lookup", b, sizeof b, LINE_MS));
            char la[4][128] = {{0}}, lb[4][128] = {{0}}, sym[128] = "", file[128] = "";
            int fa = sscanf(a, "%127s %127s %127s %127s %127s %127s", la[0], la[1], la[2], la[3],
                            sym, file);
            char ssym[128] = "", sfile[128] = "";
            int fb = sscanf(b, "%127s %127s %127s %127s %127s %127s", lb[0], lb[1], lb[2], lb[3],
                            ssym, sfile);
            if (fa == 5 && fb == 5 && strcmp(sym, "none") == 0 && strcmp(ssym, "none") == 0)
                continue; /* the driver has none at that version: neither has the shim */
            bool ok = fa == 6 && fb == 6 && strcmp(sym, ssym) == 0;
            if (ok && is_hook(sym)) {
                ok = strcmp(sfile, SHIM_FILE) == 0;
                hooked++;
                ptds += strstr(sym, "_pt") != NULL;
            } else if (ok) {
                ok = strcmp(sfile, file) == 0;
            }
            if (!ok) {
                fprintf(stderr, "driver: %s\nshim:   %s\n", a, b);
                return 1;
            }
        }
    }
    CHECK(hooked > 100);
    CHECK(ptds > 10);
    CHECK_EQ(probe_end(&plain, LINE_MS), 0);
    CHECK_EQ(probe_end(&shim, LINE_MS), 0);
    world_free(&w);
    return 0;
}

int a_program_linked_against_libcuda_is_interposed(void)
{
    struct world w;
    world_make(&w, 16 * GiB, 0, 5000, false);
    int j = world_job(w.l[0], 7, 2 * GiB, 4 * GiB);
    struct probe p;
    char l[512];
    probe_start_bin(&p, getenv("TS_SHIM_PROBE_LINKED"), &w, 7, false, NULL, A("1048576"));
    CHECK(probe_line(&p, "linked alloc rc=0", l, sizeof l, LINE_MS));
    CHECK(probe_line(&p, "linked meminfo", l, sizeof l, LINE_MS));
    CHECK_EQ(field(l, "total"), 4 * GiB);
    CHECK_EQ(field(l, "free"), 4 * GiB - 1 * MiB);
    CHECK(probe_line(&p, "waiting", l, sizeof l, LINE_MS));
    CHECK_EQ(job_used(w.l[0], j), 1 * MiB);
    probe_go(&p);
    CHECK(probe_line(&p, "linked free rc=0", l, sizeof l, LINE_MS));
    CHECK_EQ(probe_end(&p, LINE_MS), 0);
    CHECK_EQ(job_used(w.l[0], j), 0);
    world_free(&w);
    return 0;
}

/* Every row `| `name` | gated | failure |` of README.md's hooks table
 * against hooks.def, both ways. */
int the_readme_hooks_table_matches_hooks_def(void)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/agent/shim/README.md", getenv("TS_SOURCE_DIR"));
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    static bool seen[NHOOKS];
    char line[512];
    int rows = 0, bad = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        char name[128], gate[32], fail[128];
        if (sscanf(line, "| `%127[^`]` | %31s | %127s |", name, gate, fail) != 3)
            continue;
        char *tick = strchr(fail, '`');
        if (tick != NULL) { /* `CUDA_ERROR_...` */
            memmove(fail, tick + 1, strlen(tick));
            fail[strcspn(fail, "`")] = '\0';
        }
        rows++;
        size_t i = 0;
        while (i < NHOOKS && strcmp(hooks[i].name, name) != 0)
            i++;
        const char *want = i < NHOOKS && strcmp(hooks[i].fail, "OPEN") == 0 ? "open"
                           : i < NHOOKS                                     ? hooks[i].fail
                                                                            : "";
        if (i == NHOOKS || seen[i] || strcmp(gate, hooks[i].gated ? "yes" : "no") != 0 ||
            strcmp(fail, want) != 0) {
            fprintf(stderr, "README row does not match hooks.def: %s", line);
            bad++;
            continue;
        }
        seen[i] = true;
    }
    fclose(f);
    for (size_t i = 0; i < NHOOKS; i++)
        if (!seen[i]) {
            fprintf(stderr, "README has no row for %s\n", hooks[i].name);
            bad++;
        }
    CHECK_EQ(bad, 0);
    CHECK_EQ(rows, NHOOKS);
    return 0;
}

/* Every per-thread flavour (_ptds, _ptsz) the driver exports of a hooked
 * call is hooked too: otherwise a program built with per-thread default
 * streams would reach the driver around the gate or the charge. */
int every_per_thread_flavour_of_a_hooked_call_is_hooked(void)
{
    char lib[1024];
    snprintf(lib, sizeof(lib), "%s/libcuda.so.1", getenv("TS_SIMGPU_LIBDIR"));
    void *drv = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    CHECK(drv != NULL);
    int flavours = 0, missing = 0;
    for (size_t i = 0; i < NHOOKS; i++) {
        const char *n = hooks[i].name;
        if (strncmp(n, "cu", 2) != 0 || strstr(n, "_ptds") || strstr(n, "_ptsz"))
            continue;
        static const char *const suffix[] = {"_ptds", "_ptsz"};
        for (int k = 0; k < 2; k++) {
            char flavour[160];
            snprintf(flavour, sizeof(flavour), "%s%s", n, suffix[k]);
            if (dlsym(drv, flavour) == NULL)
                continue;
            flavours++;
            if (!is_hook(flavour)) {
                fprintf(stderr, "the driver exports %s but hooks.def lacks it\n", flavour);
                missing++;
            }
        }
    }
    dlclose(drv);
    CHECK(flavours > 20); /* the driver's list was read */
    CHECK_EQ(missing, 0);
    return 0;
}
