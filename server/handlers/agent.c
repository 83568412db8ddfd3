/*
 * agent.c - the agent protocol: register (PUT /nodes/{name}), desired state
 * (long-polled GET /nodes/{name}/desired), report (POST /nodes/{name}/report),
 * and the admin's drain and undrain. See api/openapi.yaml for the contract.
 *
 * The long-poll holds no database connection while it waits: it reads the
 * node's generation, gives the connection back, and waits on the
 * tessera_node notification for that node (server/notify.h) until the
 * generation moves or the wait is over.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/array.h"
#include "api/log.h"
#include "api/units.h"
#include "server/handlers/handlers.h"
#include "server/notify.h"
#include "server/store/store.h"

#define WAIT_DEFAULT_S 30
#define WAIT_MAX_S 60

static enum ts_err node_name(struct ts_request *r, const char **out, struct ts_error *err)
{
    *out = r->params[0];
    if (!ts_name_valid(*out))
        return ts_error_set(err, TS_ERR_NOT_FOUND, "node \"%s\" does not exist", *out);
    return TS_OK;
}

static enum ts_err reply_node(struct ts_request *r, const struct ts_node *n, struct ts_error *err)
{
    json_t *v = ts_wire_node_encode(n);
    if (v == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    ts_http_reply_json(r, 200, v);
    return TS_OK;
}

/* An agent whose protocol this server does not speak is refused before
 * anything is written (api/version.h has the rule). */
static enum ts_err check_protocol(const char *name, struct ts_protocol agent, struct ts_error *err)
{
    struct ts_protocol self = {TS_PROTOCOL_MAJOR, TS_PROTOCOL_MINOR};
    if (ts_protocol_accepts(self, agent))
        return TS_OK;
    struct ts_protocol oldest = ts_protocol_oldest(self);
    ts_log_warn("node refused name=%s protocol=%d.%d accepted=%d.%d-%d.%d", name, agent.major,
                agent.minor, oldest.major, oldest.minor, self.major, self.minor);
    ts_error_field(err, TS_ERR_INCOMPATIBLE_PROTOCOL, "protocol_version",
                   "agent protocol %d.%d is not supported by this server (tessera-server %s), "
                   "which accepts %d.%d to %d.%d",
                   agent.major, agent.minor, TS_VERSION, oldest.major, oldest.minor, self.major,
                   self.minor);
    ts_error_hint(err, "%s",
                  agent.major > self.major ||
                          (agent.major == self.major && agent.minor > self.minor)
                      ? "upgrade the server before its agents"
                      : "upgrade this node's tessera-agent to the server's release");
    return err->code;
}

enum ts_err ts_h_node_register(void *ctx, struct ts_request *r, struct ts_error *err)
{
    const char *name;
    enum ts_err e = node_name(r, &name, err);
    if (e != TS_OK) /* a name that cannot be a node is a bad value here */
        return ts_error_field(err, TS_ERR_INVALID_VALUE, "name",
                              "node names must match [a-z0-9][a-z0-9-]{0,62}: \"%s\"", name);
    json_t *body = NULL;
    if ((e = ts_h_body(r, &body, err)) != TS_OK)
        return e;
    struct ts_node_reg *reg = ts_arena_alloc(r->arena, sizeof(*reg));
    if (reg == NULL) {
        json_decref(body);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    e = ts_wire_node_reg_decode(body, r->arena, reg, err);
    json_decref(body);
    if (e != TS_OK)
        return e;
    if ((e = check_protocol(name, reg->protocol, err)) != TS_OK)
        return e;
    struct ts_dbconn *conn = ts_ctx_db(ctx, err);
    if (conn == NULL)
        return err->code;
    struct ts_node node;
    e = ts_store_node_register(conn, name, reg, r->arena, &node, err);
    if (e != TS_OK)
        return e;
    ts_log_info("node registered name=%s gpus=%zu", name, reg->ngpus);
    return reply_node(r, &node, err);
}

static enum ts_err drain(void *ctx, struct ts_request *r, bool on, struct ts_error *err)
{
    const char *name;
    enum ts_err e = node_name(r, &name, err);
    if (e != TS_OK)
        return e;
    struct ts_dbconn *conn = ts_ctx_db(ctx, err);
    if (conn == NULL)
        return err->code;
    struct ts_node node;
    e = ts_store_node_drain(conn, name, on, r->arena, &node, err);
    if (e != TS_OK)
        return e;
    return reply_node(r, &node, err);
}

enum ts_err ts_h_node_drain(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return drain(ctx, r, true, err);
}

enum ts_err ts_h_node_undrain(void *ctx, struct ts_request *r, struct ts_error *err)
{
    return drain(ctx, r, false, err);
}

/* ---- desired state ------------------------------------------------------- */

/* GET /nodes/{name}/desired: what the query string may hold (the agent
 * sends generation and wait). */
struct desired_query {
    long long generation; /* -1: answer at once */
    int64_t wait_s;
};

static const struct ts_query_param desired_params[] = {
    {.name = "generation",
     .type = TS_QUERY_INT,
     .offset = offsetof(struct desired_query, generation),
     .min = 0,
     .max = INT64_MAX},
    {.name = "wait",
     .type = TS_QUERY_DURATION,
     .offset = offsetof(struct desired_query, wait_s),
     .min = 0,
     .max = WAIT_MAX_S},
};

static enum ts_err parse_wait(struct ts_request *r, int64_t *generation, int64_t *wait_s,
                              struct ts_error *err)
{
    struct desired_query q = {.generation = -1, .wait_s = WAIT_DEFAULT_S};
    enum ts_err e = ts_h_query(r, desired_params, TS_ARRAY_LEN(desired_params), &q, NULL, err);
    *generation = q.generation;
    *wait_s = q.wait_s;
    return e;
}

enum ts_err ts_h_node_desired(void *ctx, struct ts_request *r, struct ts_error *err)
{
    struct ts_ctx *c = ctx;
    const char *name;
    int64_t want, wait_s;
    enum ts_err e = node_name(r, &name, err);
    if (e == TS_OK)
        e = parse_wait(r, &want, &wait_s, err);
    if (e != TS_OK)
        return e;
    struct ts_dbconn *conn = ts_ctx_db(c, err);
    if (conn == NULL)
        return err->code;
    int64_t node_id, generation;
    if ((e = ts_store_node_generation(conn, name, &node_id, &generation, err)) != TS_OK)
        return e;
    if (generation == want && wait_s > 0) {
        /* read the count first, then the generation again: a change in
         * between moves the count, so the wait below cannot miss it */
        struct ts_notify *nt = c->srv->notify;
        uint64_t seen = ts_notify_seq(nt, "tessera_node", node_id);
        if ((e = ts_store_node_generation(conn, name, &node_id, &generation, err)) != TS_OK)
            return e;
        ts_ctx_db_release(c);
        r->held = true;
        int64_t left_ms = wait_s * 1000;
        while (generation == want && left_ms > 0 && !atomic_load(&c->srv->stopping)) {
            int step = left_ms > 1000 ? 1000 : (int)left_ms;
            left_ms -= step;
            if (!ts_notify_wait(nt, "tessera_node", node_id, seen, step))
                continue;
            seen = ts_notify_seq(nt, "tessera_node", node_id);
            if ((conn = ts_ctx_db(c, err)) == NULL)
                return err->code;
            e = ts_store_node_generation(conn, name, &node_id, &generation, err);
            ts_ctx_db_release(c);
            if (e != TS_OK)
                return e;
        }
        if ((conn = ts_ctx_db(c, err)) == NULL)
            return err->code;
    }
    struct ts_desired d;
    if ((e = ts_store_node_desired(conn, name, r->arena, &d, err)) != TS_OK)
        return e;
    json_t *o = ts_wire_desired_encode(&d);
    if (o == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    ts_http_reply_json(r, 200, o);
    return TS_OK;
}

/* ---- reports -------------------------------------------------------------- */

enum ts_err ts_h_node_report(void *ctx, struct ts_request *r, struct ts_error *err)
{
    const char *name;
    enum ts_err e = node_name(r, &name, err);
    if (e != TS_OK)
        return e;
    json_t *body = NULL;
    if ((e = ts_h_body(r, &body, err)) != TS_OK)
        return e;
    struct ts_node_report rep;
    e = ts_wire_node_report_decode(body, r->arena, &rep, err);
    json_decref(body);
    if (e != TS_OK)
        return e;
    struct ts_dbconn *conn = ts_ctx_db(ctx, err);
    if (conn == NULL)
        return err->code;
    struct ts_report_result res;
    if ((e = ts_store_node_report(conn, name, &rep, r->arena, &res, err)) != TS_OK)
        return e;
    json_t *o = ts_wire_report_result_encode(&res);
    if (o == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    ts_http_reply_json(r, 200, o);
    return TS_OK;
}
