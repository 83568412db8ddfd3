/*
 * fuzz_wire_department.c - department bodies (POST /departments): parse,
 * decode, encode.
 */
#include "tests/fuzz/fuzz.h"

#include "api/units.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v = fuzz_parse(data, size);
    if (v == NULL)
        return 0;
    struct ts_department d = {.id = 1, .project_count = 2};
    struct ts_error err;
    enum ts_err e = ts_wire_department_decode(v, &d.spec, &err);
    if (e == TS_OK) {
        FUZZ_CHECK(ts_name_valid(d.spec.name));
        FUZZ_CHECK(!d.spec.quota.has_limit || d.spec.quota.limit >= d.spec.quota.gpus);
        fuzz_check_encoded(ts_wire_department_encode(&d));
    } else {
        fuzz_check_error(e, &err);
    }
    json_decref(v);
    return 0;
}
