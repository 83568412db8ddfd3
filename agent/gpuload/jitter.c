/*
 * jitter.c - the intervals tessera-gpuload draws: notebook idle time, time
 * between bursts and the hold of a burst, each uniform within --jitter of
 * its mean.
 *
 * Draw k of a stream comes from (seed, stream, k) alone, through the same
 * splitmix64 hash as the buffer patterns (data.c), so it does not depend on
 * how many draws other streams made before it or on the clock: a run is
 * repeated by repeating its --seed.
 */
#include "agent/gpuload/gpuload.h"

#define JITTER_SALT 0x6a09e667f3bcc909ull /* keeps draws apart from pattern keys */

uint64_t ts_gpuload_jitter(uint64_t seed, enum ts_gpuload_jitter_stream stream, uint64_t k,
                           uint64_t mean, double share)
{
    if (!(share > 0) || mean == 0)
        return mean;
    if (share > 1)
        share = 1;
    uint64_t h = ts_gpuload_data_key(seed ^ JITTER_SALT, (unsigned)stream, k);
    double u = (double)(h >> 11) * 0x1p-53; /* uniform in [0, 1) */
    double lo = (double)mean * (1 - share), span = (double)mean * 2 * share;
    double v = lo + span * u;
    return v <= 0 ? 0 : (uint64_t)(v + 0.5);
}
