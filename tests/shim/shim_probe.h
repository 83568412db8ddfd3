/*
 * shim_probe.h - what the files of the shim tests' probe share
 * (shim_probe.c, shim_probe_gated.c).
 */
#ifndef TS_TESTS_SHIM_SHIM_PROBE_H
#define TS_TESTS_SHIM_SHIM_PROBE_H

#include <stddef.h>

#include "agent/abi/cuda.h"

/* The driver function `name` (a versioned export, cuMemAlloc_v2), found
 * through the entry path under test (--via); NULL if none. */
void *probe_find(const char *name);

/* Byte i of what fill:B writes and check:B expects. */
static inline unsigned char probe_pattern(size_t i)
{
    return (unsigned char)(i * 131 + 7);
}

/* gated:NAME:B (shim_probe_gated.c): the driver function NAME as the
 * first GPU call of the step, on the first B bytes of dev (which hold
 * probe_pattern; B a multiple of 4 KiB), then ordinary calls to check
 * what it did, counted in *bad, and to put the pattern back. peer: an
 * allocation of at least 2 x B bytes on device 1, for the peer copies.
 * The call's CUresult, or the first failing check's. */
CUresult probe_gated(const char *name, CUdeviceptr dev, CUdeviceptr peer, size_t n, size_t *bad);

#endif /* TS_TESTS_SHIM_SHIM_PROBE_H */
