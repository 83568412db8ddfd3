/*
 * soname.c - empty libraries whose only use is their SONAME (an absolute
 * path in the sandbox): linking libtessera-cuda-overlay.so against them
 * records those paths as its DT_NEEDED.
 */
int ts_shim_soname_marker;
