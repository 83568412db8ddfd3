/*
 * wire_node.c - nodes and their GPUs on the wire (encoding only: agents
 * register through their own protocol).
 */
#include "api/wire.h"

#include "api/wire_enc.h"

static json_t *gpu_encode(const struct ts_gpu *g)
{
    bool ok = true;
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    ts_wire_enc_set(o, "index", json_integer(g->index), &ok);
    ts_wire_enc_set(o, "uuid", ts_wire_enc_string(g->uuid), &ok);
    ts_wire_enc_set(o, "model", ts_wire_enc_string(g->model), &ok);
    ts_wire_enc_set(o, "memory_bytes", json_integer(g->memory_bytes), &ok);
    return ts_wire_enc_finish(o, ok);
}

json_t *ts_wire_node_encode(const struct ts_node *n)
{
    bool ok = true;
    json_t *o = json_object();
    json_t *gpus = json_array();
    if (o == NULL || gpus == NULL) {
        json_decref(o);
        json_decref(gpus);
        return NULL;
    }
    for (size_t i = 0; i < n->ngpus; i++)
        ts_wire_enc_append(gpus, gpu_encode(&n->gpus[i]), &ok);
    ts_wire_enc_set(o, "id", json_integer(n->id), &ok);
    ts_wire_enc_set(o, "name", ts_wire_enc_string(n->name), &ok);
    ts_wire_enc_set(o, "state", ts_wire_enc_string(n->state), &ok);
    ts_wire_enc_set(o, "labels", ts_wire_enc_text(n->labels, "{}"), &ok);
    ts_wire_enc_set(o, "cpu", json_real(n->cpu), &ok);
    ts_wire_enc_set(o, "memory_bytes", json_integer(n->memory_bytes), &ok);
    ts_wire_enc_set(o, "gpus", gpus, &ok);
    ts_wire_enc_set(o, "last_seen_at", ts_wire_time(n->last_seen_at_us), &ok);
    ts_wire_enc_set(o, "created_at", ts_wire_time(n->created_at_us), &ok);
    return ts_wire_enc_finish(o, ok);
}
