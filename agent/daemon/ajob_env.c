/*
 * ajob_env.c - the environment a job runs with: a few variables of the
 * agent's own environment, the desired env, then Tessera's variables.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/daemon/ajob.h"

/* Taken from the agent's environment when set; everything else the agent
 * has (its token, TESSERA_* options, sanitizer settings) stays out. */
static const char *const inherited[] = {"PATH", "HOME",   "USER", "LOGNAME", "SHELL",
                                        "LANG", "LC_ALL", "TZ",   "TMPDIR",  NULL};

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

struct envlist {
    char **v;
    size_t n, cap;
    bool failed;
};

/* Set name=value, replacing an earlier value of name. */
static void env_set(struct envlist *l, const char *name, const char *value)
{
    if (l->failed)
        return;
    size_t nl = strlen(name);
    char *s = malloc(nl + strlen(value) + 2);
    if (s == NULL) {
        l->failed = true;
        return;
    }
    sprintf(s, "%s=%s", name, value);
    for (size_t i = 0; i < l->n; i++) {
        if (strncmp(l->v[i], name, nl) == 0 && l->v[i][nl] == '=') {
            free(l->v[i]);
            l->v[i] = s;
            return;
        }
    }
    if (l->n + 1 >= l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        char **nv = realloc(l->v, cap * sizeof(*nv));
        if (nv == NULL) {
            free(s);
            l->failed = true;
            return;
        }
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    l->v[l->n] = NULL;
}

static const char *env_get(const struct envlist *l, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < l->n; i++)
        if (strncmp(l->v[i], name, nl) == 0 && l->v[i][nl] == '=')
            return l->v[i] + nl + 1;
    return NULL;
}

void ts_ajob_env_free(char **env)
{
    if (env == NULL)
        return;
    for (size_t i = 0; env[i] != NULL; i++)
        free(env[i]);
    free(env);
}

static void env_set_int(struct envlist *l, const char *name, long long v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", v);
    env_set(l, name, buf);
}

#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
void __asan_init(void);

/* A sanitizer build's shim is instrumented too, and the AddressSanitizer
 * runtime must be the first object of any process it is loaded into: the
 * runtime this agent runs with goes first in the jobs' preload list. */
static const char *sanitizer_runtime(void)
{
    Dl_info info;
    return dladdr((void *)__asan_init, &info) != 0 ? info.dli_fname : NULL;
}
#else
static const char *sanitizer_runtime(void)
{
    return NULL;
}
#endif

/* A job with a GPU fraction runs under the shim: preloaded (before any
 * LD_PRELOAD of its own), told its folder of ledgers and who it is. */
static void shim_env(struct envlist *l, const struct ts_ajob_ctx *ctx,
                     const struct ts_desired_job *desired)
{
    long long id = desired->id;
    long long attempt = desired->attempt;
    const char *lib = ctx->shim_lib != NULL ? ctx->shim_lib : "libtessera-cuda.so";
    const char *old = env_get(l, "LD_PRELOAD");
    const char *rt = sanitizer_runtime();
    if (rt != NULL && strstr(lib, rt) != NULL)
        rt = NULL; /* --shim-lib already names it */
    size_t n = strlen(lib) + (old != NULL ? strlen(old) : 0) + (rt != NULL ? strlen(rt) : 0) + 3;
    char *pre = malloc(n), dir[PATH_MAX + 64], who[64];
    if (pre == NULL) {
        l->failed = true;
        return;
    }
    snprintf(pre, n, "%s%s%s%s%s", rt != NULL ? rt : "", rt != NULL ? ":" : "", lib,
             old != NULL && *old ? ":" : "", old != NULL ? old : "");
    env_set(l, "LD_PRELOAD", pre);
    free(pre);
    snprintf(dir, sizeof(dir), "%s/jobs/%lld-%lld/shim", ctx->data_dir, id, attempt);
    env_set(l, "TESSERA_SHIM_DIR", dir);
    snprintf(who, sizeof(who), "%lld:%lld", id, attempt);
    env_set(l, "TESSERA_SHIM_JOB", who);
}

char **ts_ajob_env_build(const struct ts_ajob_ctx *ctx, const struct ts_desired_job *desired,
                         const char *checkpoint_dir, char *msg, size_t msglen)
{
    struct envlist l = {0};
    for (size_t i = 0; inherited[i] != NULL; i++) {
        const char *v = getenv(inherited[i]);
        if (v != NULL)
            env_set(&l, inherited[i], v);
    }
    if (env_get(&l, "PATH") == NULL)
        env_set(&l, "PATH", DEFAULT_PATH);
    if (ctx->sandbox != NULL && ctx->sandbox->on) {
        /* the job's user, its folder as home, its private /tmp */
        char home[PATH_MAX + 64];
        snprintf(home, sizeof(home), "%s/jobs/%lld-%lld", ctx->data_dir, (long long)desired->id,
                 (long long)desired->attempt);
        env_set(&l, "HOME", home);
        /* its project's job_user, else the agent's (sandbox.c checked it) */
        const char *ju = desired->job_user;
        const char *user = ju != NULL && ju[0] != '\0' ? ju : ctx->sandbox->user;
        env_set(&l, "USER", user);
        env_set(&l, "LOGNAME", user);
        env_set(&l, "TMPDIR", "/tmp");
    }

    /* the decoder checked the names: not empty, no '=' */
    for (size_t i = 0; i < desired->nenv; i++)
        env_set(&l, desired->env[i].name, desired->env[i].value);

    const char *name = desired->name;
    const char *project = desired->project;
    env_set_int(&l, "TESSERA_JOB_ID", desired->id);
    env_set(&l, "TESSERA_JOB_NAME", name != NULL ? name : "");
    env_set(&l, "TESSERA_PROJECT", project != NULL ? project : "");
    env_set_int(&l, "TESSERA_ATTEMPT", desired->attempt);
    env_set(&l, "TESSERA_CHECKPOINT_DIR", checkpoint_dir);
    env_set_int(&l, "TESSERA_RESUME_COUNT", desired->resume_count);
    env_set(&l, "TESSERA_NODE", ctx->node != NULL ? ctx->node : "");

    char devices[TS_GPUS_MAX * 4 + 1] = "";
    size_t off = 0;
    for (size_t i = 0; i < desired->ngpus && i < TS_GPUS_MAX; i++)
        off += (size_t)snprintf(devices + off, sizeof(devices) - off, "%s%d", i ? "," : "",
                                desired->gpus[i].index);
    /* a job the node-level scheduler spread: its logical GPUs after its
     * own, the GPUs re-packing may move it back to; the shim hides them
     * (shim/README.md, "Moving a job to another GPU") */
    for (size_t i = 0; i < desired->ngpus && i < TS_GPUS_MAX; i++) {
        int lg = desired->gpus[i].logical_index;
        bool listed = lg < 0;
        for (size_t k = 0; k < desired->ngpus && !listed; k++)
            listed = desired->gpus[k].index == lg;
        if (!listed && off < sizeof(devices))
            off += (size_t)snprintf(devices + off, sizeof(devices) - off, ",%d", lg);
    }
    env_set(&l, "CUDA_VISIBLE_DEVICES", devices);

    if (ctx->gpus != NULL && ctx->gpus->lib_dir[0] != '\0') {
        /* simulated GPUs: the job finds simgpu's libcuda.so.1 and
         * libnvidia-ml.so.1 before anything else */
        env_set(&l, "TESSERA_SIMGPU_DIR", ctx->gpus->simgpu_dir);
        const char *old = env_get(&l, "LD_LIBRARY_PATH");
        size_t n = strlen(ctx->gpus->lib_dir) + (old != NULL ? strlen(old) : 0) + 2;
        char *lp = malloc(n);
        if (lp == NULL) {
            l.failed = true;
        } else {
            snprintf(lp, n, "%s%s%s", ctx->gpus->lib_dir, old != NULL && *old ? ":" : "",
                     old != NULL ? old : "");
            env_set(&l, "LD_LIBRARY_PATH", lp);
            free(lp);
        }
    } else if (ctx->gpus != NULL && ctx->gpus->count > 0) {
        /* CUDA numbers devices fastest first unless told; NVML's indices,
         * which the server hands out, follow the PCI bus order */
        env_set(&l, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    }
    if (ctx->ledgers != NULL && ts_ledgers_fractional(ctx->ledgers, desired))
        shim_env(&l, ctx, desired);
    if (l.failed) {
        snprintf(msg, msglen, "out of memory");
        goto fail;
    }
    if (l.v == NULL) {
        snprintf(msg, msglen, "out of memory");
        goto fail;
    }
    return l.v;
fail:
    ts_ajob_env_free(l.v);
    return NULL;
}
