/*
 * wire_gpu.c - a job's GPU request on the wire: whole GPUs (count), a portion
 * of each device, or an amount of memory on each device, with their limits.
 */
#include "api/wire.h"

#include <stdio.h>

#include "api/array.h"
#include "api/units.h"
#include "api/wire_dec.h"
#include "api/wire_enc.h"

static const char *const gpu_fields[] = {
    "count", "portion", "portion_limit", "memory", "memory_limit", "devices", NULL};
static const char *const gpu_readonly[] = {"memory_bytes", "memory_limit_bytes", NULL};

double ts_gpu_request_gpus(const struct ts_gpu_request *g)
{
    switch (g->kind) {
    case TS_GPU_COUNT:
        return g->count;
    case TS_GPU_PORTION:
        return g->portion * g->devices;
    case TS_GPU_NONE:
    case TS_GPU_MEMORY:
        break;
    }
    return 0;
}

/* A member that may not be given beside the GPU request's kind. */
static enum ts_err refuse_beside(const json_t *gpu, const char *key, const char *kind,
                                 struct ts_error *err)
{
    if (ts_wire_dec_member(gpu, key) == NULL)
        return TS_OK;
    char field[TS_WIRE_PATH_MAX];
    snprintf(field, sizeof(field), "gpu.%s", key);
    return ts_error_field(err, TS_ERR_INVALID_VALUE, field, "%s cannot be given with gpu.%s", field,
                          kind);
}

static enum ts_err decode_devices(const json_t *gpu, struct ts_gpu_request *g, struct ts_error *err)
{
    int64_t devices = 1;
    enum ts_err e =
        ts_wire_dec_integer(gpu, "gpu", "devices", 1, TS_GPU_DEVICES_MAX, NULL, &devices, err);
    g->devices = (int)devices;
    return e;
}

static enum ts_err decode_portion(const json_t *gpu, struct ts_gpu_request *g, struct ts_error *err)
{
    char a[32], b[32];
    g->kind = TS_GPU_PORTION;
    enum ts_err e = ts_wire_dec_number(gpu, "gpu", "portion", 0, 1, NULL, &g->portion, err);
    if (e != TS_OK)
        return e;
    if (g->portion < TS_GPU_PORTION_MIN)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "gpu.portion",
                              "gpu.portion must be between %g and 1 (a thousandth of a GPU at "
                              "least): %s",
                              TS_GPU_PORTION_MIN,
                              ts_wire_dec_number_text(g->portion, a, sizeof(a)));
    g->portion_limit = g->portion;
    e = ts_wire_dec_number(gpu, "gpu", "portion_limit", 0, 1, NULL, &g->portion_limit, err);
    if (e != TS_OK)
        return e;
    if (g->portion_limit < g->portion)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "gpu.portion_limit",
                              "gpu.portion_limit must not be below gpu.portion: %s < %s",
                              ts_wire_dec_number_text(g->portion_limit, a, sizeof(a)),
                              ts_wire_dec_number_text(g->portion, b, sizeof(b)));
    e = refuse_beside(gpu, "memory_limit", "portion", err);
    if (e != TS_OK)
        return e;
    return decode_devices(gpu, g, err);
}

static enum ts_err decode_gpu_memory(const json_t *gpu, struct ts_gpu_request *g,
                                     struct ts_error *err)
{
    g->kind = TS_GPU_MEMORY;
    enum ts_err e =
        ts_wire_dec_bytes(gpu, "gpu", "memory", TS_GPU_MEMORY_MIN, NULL, &g->memory_bytes, err);
    if (e != TS_OK)
        return e;
    g->memory_limit_bytes = g->memory_bytes;
    e = ts_wire_dec_bytes(gpu, "gpu", "memory_limit", TS_GPU_MEMORY_MIN, NULL,
                          &g->memory_limit_bytes, err);
    if (e != TS_OK)
        return e;
    if (g->memory_limit_bytes < g->memory_bytes) {
        char a[32], b[32];
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "gpu.memory_limit",
                              "gpu.memory_limit must not be below gpu.memory: %s < %s",
                              ts_bytesize_format(g->memory_limit_bytes, a, sizeof(a)),
                              ts_bytesize_format(g->memory_bytes, b, sizeof(b)));
    }
    e = refuse_beside(gpu, "portion_limit", "memory", err);
    if (e != TS_OK)
        return e;
    return decode_devices(gpu, g, err);
}

enum ts_err ts_wire_gpu_decode(const json_t *gpu, struct ts_gpu_request *g, struct ts_error *err)
{
    *g = (struct ts_gpu_request){.kind = TS_GPU_NONE};
    if (gpu == NULL || json_is_null(gpu))
        return TS_OK;
    enum ts_err e = ts_wire_dec_object(gpu, "gpu", "gpu", gpu_fields, gpu_readonly, err);
    if (e != TS_OK)
        return e;
    bool count = ts_wire_dec_member(gpu, "count") != NULL;
    bool portion = ts_wire_dec_member(gpu, "portion") != NULL;
    bool memory = ts_wire_dec_member(gpu, "memory") != NULL;
    if (count + portion + memory != 1)
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "gpu",
                              "gpu must have exactly one of count, portion, memory");
    if (portion)
        return decode_portion(gpu, g, err);
    if (memory)
        return decode_gpu_memory(gpu, g, err);
    int64_t n = 0;
    g->kind = TS_GPU_COUNT;
    e = ts_wire_dec_integer(gpu, "gpu", "count", 1, TS_GPU_DEVICES_MAX, NULL, &n, err);
    g->count = (int)n;
    static const char *const others[] = {"portion_limit", "memory_limit", "devices"};
    for (size_t i = 0; e == TS_OK && i < TS_ARRAY_LEN(others); i++)
        e = refuse_beside(gpu, others[i], "count", err);
    return e;
}

json_t *ts_wire_gpu_encode(const struct ts_gpu_request *g)
{
    bool ok = true;
    if (g->kind == TS_GPU_NONE)
        return json_null();
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    switch (g->kind) {
    case TS_GPU_COUNT:
        ts_wire_enc_set(o, "count", json_integer(g->count), &ok);
        break;
    case TS_GPU_PORTION:
        ts_wire_enc_set(o, "portion", json_real(g->portion), &ok);
        ts_wire_enc_set(o, "portion_limit", json_real(g->portion_limit), &ok);
        ts_wire_enc_set(o, "devices", json_integer(g->devices), &ok);
        break;
    case TS_GPU_MEMORY:
        ts_wire_enc_set(o, "memory", ts_wire_enc_bytes(g->memory_bytes), &ok);
        ts_wire_enc_set(o, "memory_bytes", json_integer(g->memory_bytes), &ok);
        ts_wire_enc_set(o, "memory_limit", ts_wire_enc_bytes(g->memory_limit_bytes), &ok);
        ts_wire_enc_set(o, "memory_limit_bytes", json_integer(g->memory_limit_bytes), &ok);
        ts_wire_enc_set(o, "devices", json_integer(g->devices), &ok);
        break;
    case TS_GPU_NONE:
        break;
    }
    return ts_wire_enc_finish(o, ok);
}
