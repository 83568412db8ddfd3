/*
 * fuzz.h - what the fuzz targets share: a check that aborts (so libFuzzer
 * and the driver report it with the input), the checks every error must
 * pass, and parsing a request body.
 */
#ifndef TS_TESTS_FUZZ_FUZZ_H
#define TS_TESTS_FUZZ_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* An error a decoder reported: a client error with a message, and a field
 * that fits. */
static inline void fuzz_check_error(enum ts_err e, const struct ts_error *err)
{
    FUZZ_CHECK(e != TS_OK && err->code == e);
    FUZZ_CHECK(ts_err_http_status(e) >= 400 && ts_err_http_status(e) < 500);
    FUZZ_CHECK(err->message[0] != '\0');
    FUZZ_CHECK(strlen(err->message) < sizeof(err->message));
    FUZZ_CHECK(strlen(err->field) < sizeof(err->field));
}

/* The body parsed as ts_wire_parse does for a request; NULL when it is
 * refused (and the refusal checked). New reference. */
static inline json_t *fuzz_parse(const uint8_t *data, size_t size)
{
    json_t *v = NULL;
    struct ts_error err;
    enum ts_err e = ts_wire_parse((const char *)data, size, &v, &err);
    if (e != TS_OK) {
        FUZZ_CHECK(e == TS_ERR_MALFORMED_JSON || e == TS_ERR_WRONG_TYPE);
        FUZZ_CHECK(v == NULL);
        fuzz_check_error(e, &err);
        return NULL;
    }
    FUZZ_CHECK(json_is_object(v));
    return v;
}

/* Encoded JSON must serialise. Steals v. */
static inline void fuzz_check_encoded(json_t *v)
{
    FUZZ_CHECK(v != NULL);
    char *text = ts_wire_dumps(v);
    FUZZ_CHECK(text != NULL);
    free(text);
    json_decref(v);
}

#endif /* TS_TESTS_FUZZ_FUZZ_H */
