/*
 * overlay.c - libtessera-cuda-overlay.so, what a job's sandbox binds over
 * every libcuda file the loader could find (agent/daemon/sandbox.c). It
 * holds nothing itself: its two dependencies, by absolute path, are the
 * shim and the real driver as the sandbox binds them, in that order. A
 * lookup in it (dlsym on the handle of dlopen("libcuda.so.1"), or a program
 * linked against libcuda.so.1) finds the shim's hooks first and every
 * other driver function in the driver, so neither unsetting LD_PRELOAD nor
 * opening the driver by path gets round the shim.
 *
 * Its soname is libcuda.so.1, the driver's own: once a process has loaded
 * it (by any path), a later dlopen("libcuda.so.1") finds it first among the
 * loaded objects, not the real driver it brought in (whose soname is also
 * libcuda.so.1). With a soname of its own, a program that opened the
 * driver by its file and then by name (PyTorch after ctypes, on an H200)
 * got the real driver and no limit.
 */
int ts_shim_overlay_marker; /* a translation unit must declare something */
