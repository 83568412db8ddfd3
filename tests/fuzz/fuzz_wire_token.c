/*
 * fuzz_wire_token.c - token bodies (POST /tokens): parse, decode into an
 * arena, check the project list, encode with a secret.
 */
#include "tests/fuzz/fuzz.h"

#include "api/units.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v = fuzz_parse(data, size);
    if (v == NULL)
        return 0;
    struct ts_arena *a = ts_arena_new();
    FUZZ_CHECK(a != NULL);
    struct ts_token t = {.id = 1, .secret = "ts_fuzz"};
    struct ts_error err;
    enum ts_err e = ts_wire_token_decode(v, a, &t.spec, &err);
    if (e == TS_OK) {
        FUZZ_CHECK(ts_name_valid(t.spec.name));
        FUZZ_CHECK(strcmp(ts_role_name(t.spec.role), "unknown") != 0);
        FUZZ_CHECK(t.spec.nprojects <= TS_TOKEN_PROJECTS_MAX);
        for (size_t i = 0; i < t.spec.nprojects; i++) {
            FUZZ_CHECK(ts_name_valid(t.spec.projects[i]));
            for (size_t j = 0; j < i; j++)
                FUZZ_CHECK(strcmp(t.spec.projects[i], t.spec.projects[j]) != 0);
        }
        fuzz_check_encoded(ts_wire_token_encode(&t));
    } else {
        fuzz_check_error(e, &err);
    }
    ts_arena_free(a);
    json_decref(v);
    return 0;
}
