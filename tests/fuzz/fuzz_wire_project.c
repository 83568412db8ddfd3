/*
 * fuzz_wire_project.c - project bodies (POST /projects): parse, decode,
 * check the quota's invariants, encode.
 */
#include "tests/fuzz/fuzz.h"

#include "api/units.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v = fuzz_parse(data, size);
    if (v == NULL)
        return 0;
    struct ts_project p = {.id = 1};
    struct ts_error err;
    enum ts_err e = ts_wire_project_decode(v, &p.spec, &err);
    if (e == TS_OK) {
        FUZZ_CHECK(ts_name_valid(p.spec.name) && ts_name_valid(p.spec.department));
        const struct ts_quota *q = &p.spec.quota;
        FUZZ_CHECK(q->gpus >= 0 && q->gpus <= TS_QUOTA_GPUS_MAX);
        FUZZ_CHECK(q->over_quota_weight >= 0 && q->over_quota_weight <= TS_QUOTA_WEIGHT_MAX);
        FUZZ_CHECK(!q->has_limit || (q->limit >= q->gpus && q->limit <= TS_QUOTA_GPUS_MAX));
        FUZZ_CHECK(q->priority >= -1000 && q->priority <= 1000);
        fuzz_check_encoded(ts_wire_project_encode(&p));
    } else {
        fuzz_check_error(e, &err);
    }
    /* the same body as a quota of its own (PUT .../quota) */
    struct ts_quota q;
    e = ts_wire_quota_decode(v, "", &q, &err);
    if (e == TS_OK)
        fuzz_check_encoded(ts_wire_quota_encode(&q));
    else
        fuzz_check_error(e, &err);
    json_decref(v);
    return 0;
}
