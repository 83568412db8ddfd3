/*
 * wire_node.c - nodes and their GPUs on the wire (encoding only: agents
 * register with wire_agent.c's decoder).
 */
#include "api/wire.h"

#include "api/wire_enc.h"

/* The share of the GPU jobs hold, as the scheduler counts it: packed bytes
 * over the memory less the node's reserve (a whole-GPU job packs all of it). */
static double gpu_allocated(const struct ts_gpu *g, int64_t reserve)
{
    int64_t usable = g->memory_bytes - reserve;
    if (usable <= 0)
        return 0;
    double v = (double)g->allocated_bytes / (double)usable;
    return v > 1 ? 1 : v;
}

static json_t *gpu_encode(const struct ts_gpu *g, int64_t reserve)
{
    bool ok = true;
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    ts_wire_enc_set(o, "index", json_integer(g->index), &ok);
    ts_wire_enc_set(o, "uuid", ts_wire_enc_string(g->uuid), &ok);
    ts_wire_enc_set(o, "model", ts_wire_enc_string(g->model), &ok);
    ts_wire_enc_set(o, "memory_bytes", json_integer(g->memory_bytes), &ok);
    ts_wire_enc_set(o, "allocated", json_real(gpu_allocated(g, reserve)), &ok);
    ts_wire_enc_set(o, "allocated_bytes", json_integer(g->allocated_bytes), &ok);
    ts_wire_enc_set(o, "utilization", json_real(g->utilization), &ok);
    ts_wire_enc_set(o, "memory_used_bytes", json_integer(g->memory_used_bytes), &ok);
    ts_wire_enc_set(o, "sampled_at", ts_wire_time(g->sampled_at_us), &ok);
    json_t *jobs = json_array();
    for (size_t i = 0; jobs != NULL && i < g->njobs; i++)
        ts_wire_enc_append(jobs, json_integer(g->jobs[i]), &ok);
    ts_wire_enc_set(o, "jobs", jobs, &ok);
    /* the jobs placed here that the node runs on another GPU (issue 17) */
    json_t *moved = json_array();
    for (size_t i = 0; moved != NULL && g->job_physical != NULL && i < g->njobs; i++)
        if (g->job_physical[i] >= 0 && g->job_physical[i] != g->index)
            ts_wire_enc_append(moved,
                               json_pack("{s:I, s:i}", "id", (json_int_t)g->jobs[i],
                                         "physical_index", g->job_physical[i]),
                               &ok);
    ts_wire_enc_set(o, "moved_jobs", moved, &ok);
    ts_wire_enc_set(o, "hidden_jobs", json_integer((json_int_t)g->hidden_jobs), &ok);
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
    double allocated = 0, utilized = 0;
    for (size_t i = 0; i < n->ngpus; i++) {
        ts_wire_enc_append(gpus, gpu_encode(&n->gpus[i], n->gpu_reserve_bytes), &ok);
        allocated += gpu_allocated(&n->gpus[i], n->gpu_reserve_bytes);
        utilized += n->gpus[i].utilization;
    }
    ts_wire_enc_set(o, "id", json_integer(n->id), &ok);
    ts_wire_enc_set(o, "name", ts_wire_enc_string(n->name), &ok);
    ts_wire_enc_set(o, "state", ts_wire_enc_string(n->state), &ok);
    ts_wire_enc_set(o, "labels", ts_wire_enc_text(n->labels, "{}"), &ok);
    ts_wire_enc_set(o, "cpu", json_real(n->cpu), &ok);
    ts_wire_enc_set(o, "memory_bytes", json_integer(n->memory_bytes), &ok);
    ts_wire_enc_set(o, "swap_bytes", json_integer(n->swap_bytes), &ok);
    ts_wire_enc_set(o, "swap_used_bytes", json_integer(n->swap_used_bytes), &ok);
    ts_wire_enc_set(o, "collision", ts_wire_enc_string(n->collision ? n->collision : "wait"), &ok);
    ts_wire_enc_set(o, "gpu_reserve_bytes", json_integer(n->gpu_reserve_bytes), &ok);
    ts_wire_enc_set(o, "agent_version", ts_wire_enc_string(n->agent_version), &ok);
    ts_wire_enc_set(o, "generation", json_integer(n->generation), &ok);
    ts_wire_enc_set(o, "gpus", gpus, &ok);
    ts_wire_enc_set(o, "allocated_gpus", json_real(allocated), &ok);
    ts_wire_enc_set(o, "utilized_gpus", json_real(utilized), &ok);
    ts_wire_enc_set(o, "running_jobs", json_integer(n->running_jobs), &ok);
    ts_wire_enc_set(o, "registered_at", ts_wire_time(n->registered_at_us), &ok);
    ts_wire_enc_set(o, "last_seen_at", ts_wire_time(n->last_seen_at_us), &ok);
    ts_wire_enc_set(o, "created_at", ts_wire_time(n->created_at_us), &ok);
    return ts_wire_enc_finish(o, ok);
}
