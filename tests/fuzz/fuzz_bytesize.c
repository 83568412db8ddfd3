/*
 * fuzz_bytesize.c - byte sizes as people write them (api/units.h): what
 * parses is within [0, 2^62] and formats to text that parses back to the
 * same number; eight-byte inputs are also formatted as a number.
 */
#include "tests/fuzz/fuzz.h"

#include "api/units.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256)
        return 0;
    char s[257];
    memcpy(s, data, size);
    s[size] = '\0'; /* C sees the text up to the first NUL byte, as callers pass it */
    int64_t v = -1;
    char buf[32];
    if (ts_bytesize_parse(s, &v) == 0) {
        FUZZ_CHECK(v >= 0 && v <= TS_BYTESIZE_MAX);
        int64_t again = -1;
        FUZZ_CHECK(ts_bytesize_parse(ts_bytesize_format(v, buf, sizeof(buf)), &again) == 0);
        FUZZ_CHECK(again == v);
    }
    if (size == sizeof(int64_t)) {
        int64_t n;
        memcpy(&n, data, sizeof(n));
        ts_bytesize_format(n, buf, sizeof(buf));
        FUZZ_CHECK(strlen(buf) < sizeof(buf) - 1);
        int64_t again = -1;
        int r = ts_bytesize_parse(buf, &again);
        FUZZ_CHECK((n >= 0 && n <= TS_BYTESIZE_MAX) == (r == 0));
        FUZZ_CHECK(r != 0 || again == n);
    }
    return 0;
}
