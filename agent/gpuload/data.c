/*
 * data.c - the byte patterns tessera-gpuload writes to device memory and
 * checks when it reads it back.
 *
 * Byte i of a pattern is byte i % 8 of splitmix64(key + i / 8): any window
 * can be made again from its offset alone, fast (one multiply-xorshift per
 * 8 bytes), and a pattern never repeats within a buffer or across steps.
 */
#include <string.h>

#include "agent/gpuload/gpuload.h"
#include "api/array.h"

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t ts_gpuload_data_key(uint64_t seed, unsigned buffer, uint64_t step)
{
    return splitmix64(seed ^ splitmix64(((uint64_t)buffer << 48) ^ step));
}

void ts_gpuload_data_fill(void *out, size_t n, uint64_t key, uint64_t offset)
{
    unsigned char *p = out;
    uint64_t word = offset / 8;
    size_t skip = (size_t)(offset % 8);
    uint64_t words[512]; /* made a block at a time, copied out in one go */
    while (n > 0) {
        size_t nw = (skip + n + 7) / 8;
        if (nw > TS_ARRAY_LEN(words))
            nw = TS_ARRAY_LEN(words);
        for (size_t i = 0; i < nw; i++)
            words[i] = splitmix64(key + word + i);
        size_t take = nw * 8 - skip < n ? nw * 8 - skip : n;
        memcpy(p, (const unsigned char *)words + skip, take);
        p += take;
        n -= take;
        word += nw;
        skip = 0;
    }
}

bool ts_gpuload_data_same(const void *got, const void *want, size_t n, size_t *first, size_t *count)
{
    if (memcmp(got, want, n) == 0)
        return true;
    const unsigned char *a = got, *b = want;
    size_t c = 0, f = n;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            if (f == n)
                f = i;
            c++;
        }
    *first = f;
    *count = c;
    return false;
}
