/*
 * fuzz_duration.c - durations as people write them (api/units.h): what
 * parses is within [0, 10 years] and formats to text that parses back to
 * the same number; eight-byte inputs are also formatted as a number.
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
    char buf[48];
    if (ts_duration_parse(s, &v) == 0) {
        FUZZ_CHECK(v >= 0 && v <= TS_DURATION_MAX_SECONDS);
        int64_t again = -1;
        FUZZ_CHECK(ts_duration_parse(ts_duration_format(v, buf, sizeof(buf)), &again) == 0);
        FUZZ_CHECK(again == v);
    }
    if (size == sizeof(int64_t)) {
        int64_t n;
        memcpy(&n, data, sizeof(n));
        ts_duration_format(n, buf, sizeof(buf));
        FUZZ_CHECK(strlen(buf) < sizeof(buf) - 1);
        int64_t again = -1;
        int r = ts_duration_parse(buf, &again);
        FUZZ_CHECK((n >= 0 && n <= TS_DURATION_MAX_SECONDS) == (r == 0));
        FUZZ_CHECK(r != 0 || again == n);
    }
    return 0;
}
