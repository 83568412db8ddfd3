/*
 * wire_agent_enc.c - what an agent sends, encoded: its registration (PUT
 * /nodes/{name}) and its reports (POST /nodes/{name}/report). The server
 * decodes both with wire_agent.c; a member is written only when the struct
 * says it is given, so decoding what is encoded gives the struct back.
 */
#include "api/wire.h"

#include <math.h>
#include <stdio.h>

#include "api/wire_enc.h"

static const char *const report_states[] = {"running", "exited", "failed_to_start", "suspended"};

json_t *ts_wire_node_reg_encode(const struct ts_node_reg *r)
{
    json_t *o = json_object(), *gpus = json_array();
    bool ok = gpus != NULL;
    for (size_t i = 0; i < r->ngpus; i++) {
        const struct ts_gpu *g = &r->gpus[i];
        json_t *v = json_object();
        ts_wire_enc_set(v, "index", json_integer(g->index), &ok);
        ts_wire_enc_set(v, "uuid", json_string(g->uuid != NULL ? g->uuid : ""), &ok);
        ts_wire_enc_set(v, "model", json_string(g->model != NULL ? g->model : ""), &ok);
        ts_wire_enc_set(v, "memory_bytes", json_integer(g->memory_bytes), &ok);
        ts_wire_enc_append(gpus, ts_wire_enc_finish(v, ok), &ok);
    }
    char protocol[32];
    snprintf(protocol, sizeof(protocol), "%d.%d", r->protocol.major, r->protocol.minor);
    ts_wire_enc_set(o, "labels", ts_wire_enc_text(r->labels, "{}"), &ok);
    /* whole CPUs as an integer, as agents have always sent them */
    ts_wire_enc_set(o, "cpu",
                    r->cpu == floor(r->cpu) && r->cpu < 1e15 ? json_integer((json_int_t)r->cpu)
                                                             : json_real(r->cpu),
                    &ok);
    ts_wire_enc_set(o, "memory_bytes", json_integer(r->memory_bytes), &ok);
    ts_wire_enc_set(o, "swap_bytes", json_integer(r->swap_bytes), &ok);
    ts_wire_enc_set(o, "gpu_reserve_bytes", json_integer(r->gpu_reserve_bytes), &ok);
    if (r->collision != NULL)
        ts_wire_enc_set(o, "collision", json_string(r->collision), &ok);
    if (r->agent_version != NULL)
        ts_wire_enc_set(o, "agent_version", json_string(r->agent_version), &ok);
    ts_wire_enc_set(o, "protocol_version", json_string(protocol), &ok);
    ts_wire_enc_set(o, "gpus", gpus, &ok);
    return ts_wire_enc_finish(o, ok);
}

static json_t *places_encode(const struct ts_report_job *j)
{
    json_t *arr = json_array();
    bool ok = true;
    for (size_t k = 0; k < j->nplaces; k++) {
        json_t *p = json_object();
        ts_wire_enc_set(p, "index", json_integer(j->places[k].index), &ok);
        ts_wire_enc_set(p, "physical_index", json_integer(j->places[k].physical_index), &ok);
        ts_wire_enc_append(arr, ts_wire_enc_finish(p, ok), &ok);
    }
    return ts_wire_enc_finish(arr, ok);
}

static json_t *report_job_encode(const struct ts_report_job *j)
{
    json_t *o = json_object();
    bool ok = true;
    ts_wire_enc_set(o, "id", json_integer(j->id), &ok);
    ts_wire_enc_set(o, "attempt", json_integer(j->attempt), &ok);
    ts_wire_enc_set(o, "state", json_string(report_states[j->state]), &ok);
    if (j->pid > 0)
        ts_wire_enc_set(o, "pid", json_integer(j->pid), &ok);
    if (j->has_exit_code)
        ts_wire_enc_set(o, "exit_code", json_integer(j->exit_code), &ok);
    if (j->signal > 0)
        ts_wire_enc_set(o, "signal", json_integer(j->signal), &ok);
    if (j->evicted)
        ts_wire_enc_set(o, "evicted", json_true(), &ok);
    if (j->message != NULL)
        ts_wire_enc_set(o, "message", json_string(j->message), &ok);
    if (j->has_gpu_utilization)
        ts_wire_enc_set(o, "gpu_utilization", json_real(j->gpu_utilization), &ok);
    if (j->has_swapped_bytes)
        ts_wire_enc_set(o, "swapped_bytes", json_integer(j->swapped_bytes), &ok);
    if (j->has_gpu_memory_used)
        ts_wire_enc_set(o, "gpu_memory_used_bytes", json_integer(j->gpu_memory_used_bytes), &ok);
    if (j->nplaces > 0)
        ts_wire_enc_set(o, "gpus", places_encode(j), &ok);
    return ts_wire_enc_finish(o, ok);
}

json_t *ts_wire_report_event_encode(const struct ts_report_event *e)
{
    json_t *o = json_object();
    bool ok = true;
    ts_wire_enc_set(o, "id", json_integer(e->id), &ok);
    ts_wire_enc_set(o, "attempt", json_integer(e->attempt), &ok);
    ts_wire_enc_set(o, "seq", json_integer(e->seq), &ok);
    ts_wire_enc_set(o, "type", json_string(e->type), &ok);
    ts_wire_enc_set(o, "message", json_string(e->message), &ok);
    return ts_wire_enc_finish(o, ok);
}

static json_t *report_gpu_encode(const struct ts_report_gpu *g)
{
    json_t *o = json_object();
    bool ok = true;
    ts_wire_enc_set(o, "index", json_integer(g->index), &ok);
    ts_wire_enc_set(o, "utilization", json_real(g->utilization), &ok);
    ts_wire_enc_set(o, "memory_used_bytes", json_integer(g->memory_used_bytes), &ok);
    return ts_wire_enc_finish(o, ok);
}

json_t *ts_wire_node_report_encode(const struct ts_node_report *r)
{
    json_t *o = json_object(), *jobs = json_array(), *gpus = json_array();
    bool ok = jobs != NULL && gpus != NULL;
    for (size_t i = 0; i < r->njobs; i++)
        ts_wire_enc_append(jobs, report_job_encode(&r->jobs[i]), &ok);
    for (size_t i = 0; i < r->ngpus; i++)
        ts_wire_enc_append(gpus, report_gpu_encode(&r->gpus[i]), &ok);
    ts_wire_enc_set(o, "jobs", jobs, &ok);
    ts_wire_enc_set(o, "gpus", gpus, &ok);
    if (r->nevents > 0) {
        json_t *events = json_array();
        for (size_t i = 0; events != NULL && i < r->nevents; i++)
            ts_wire_enc_append(events, ts_wire_report_event_encode(&r->events[i]), &ok);
        ts_wire_enc_set(o, "events", events, &ok);
    }
    return ts_wire_enc_finish(o, ok);
}
