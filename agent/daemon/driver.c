/*
 * driver.c - the CUDA driver check at start (driver.h). A node whose driver
 * is missing, broken or too old would start every job only for it to fail
 * inside the shim; the agent says so once, at start, and does not register.
 */
#include "agent/daemon/driver.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/abi/cuda.h"

/* Where drivers are installed (sandbox.c overlays the same folders). */
static const char *const driver_dirs[] = {
    "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64",
    "/usr/local/cuda/compat",    NULL};

/* The symbols the shim and its swap engine cannot do without. */
static const char *const needed[] = {"cuInit",
                                     "cuDriverGetVersion",
                                     "cuMemAlloc_v2",
                                     "cuMemCreate",
                                     "cuMemAddressReserve",
                                     "cuMemMap",
                                     "cuMemSetAccess",
                                     NULL};

/* "libcuda.so.535.104.05 in /usr/lib/x86_64-linux-gnu, ..." into buf: the
 * driver files a human would look at; "none" without any. */
static void found_files(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; driver_dirs[i] != NULL; i++) {
        DIR *d = opendir(driver_dirs[i]);
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL) {
            if (strncmp(e->d_name, "libcuda.so.", 11) != 0 || used + 2 >= len)
                continue;
            int n = snprintf(buf + used, len - used, "%s%s in %s", used ? ", " : "", e->d_name,
                             driver_dirs[i]);
            used = n > 0 && (size_t)n < len - used ? used + (size_t)n : len - 1;
        }
        if (d != NULL)
            closedir(d);
    }
    if (used == 0)
        snprintf(buf, len, "none");
}

/* The versions found, for a refusal's hint. */
static void found_versions(const struct ts_gpus *g, char *buf, size_t len)
{
    char files[1024];
    found_files(files, sizeof(files));
    snprintf(buf, len, "versions found: NVML driver %s; libcuda files: %s",
             g->driver_version[0] ? g->driver_version : "unknown", files);
}

enum ts_err ts_driver_check(const struct ts_gpus *g, struct ts_driver *out, struct ts_error *err)
{
    char lib[PATH_MAX], where[PATH_MAX + 64], found[1400];
    memset(out, 0, sizeof(*out));
    if (g->lib_dir[0] != '\0') {
        if (snprintf(lib, sizeof(lib), "%s/libcuda.so.1", g->lib_dir) >= (int)sizeof(lib))
            return ts_error_set(err, TS_ERR_CONFIG, "simgpu's folder is too long: %.64s...",
                                g->lib_dir);
        snprintf(where, sizeof(where), "simgpu's driver %s", lib);
    } else {
        snprintf(lib, sizeof(lib), "libcuda.so.1");
        snprintf(where, sizeof(where),
                 "libcuda.so.1 in the loader's path (LD_LIBRARY_PATH, ld.so.cache)");
    }
    found_versions(g, found, sizeof(found));
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        ts_error_set(err, TS_ERR_CONFIG, "could not load the CUDA driver: looked for %s: %s", where,
                     dlerror());
        ts_error_hint(err, "%s; install the NVIDIA driver (its libcuda.so.1)", found);
        return err->code;
    }
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL || lm->l_name == NULL ||
        realpath(lm->l_name, out->path) == NULL)
        snprintf(out->path, sizeof(out->path), "%s", lib);
    for (int i = 0; needed[i] != NULL; i++) {
        if (dlsym(h, needed[i]) == NULL) {
            ts_error_set(err, TS_ERR_CONFIG,
                         "the CUDA driver %s is not usable: it has no %s (looked for %s)",
                         out->path, needed[i], where);
            ts_error_hint(err, "%s; the shim needs CUDA %d.%d or later", found,
                          TS_DRIVER_CUDA_MIN / 1000, TS_DRIVER_CUDA_MIN % 1000 / 10);
            return err->code;
        }
    }
    __typeof__(cuDriverGetVersion) *version =
        (__typeof__(cuDriverGetVersion) *)dlsym(h, "cuDriverGetVersion");
    CUresult rc = version(&out->cuda_version);
    if (rc != CUDA_SUCCESS || out->cuda_version < TS_DRIVER_CUDA_MIN) {
        ts_error_set(err, TS_ERR_CONFIG,
                     "the CUDA driver %s is too old: CUDA %d.%d, the shim needs %d.%d or later",
                     out->path, out->cuda_version / 1000, out->cuda_version % 1000 / 10,
                     TS_DRIVER_CUDA_MIN / 1000, TS_DRIVER_CUDA_MIN % 1000 / 10);
        ts_error_hint(err, "%s; upgrade the NVIDIA driver", found);
        return err->code;
    }
    return TS_OK;
}
