/*
 * route.h - a declarative route table and its matcher.
 *
 * A route's path template has literal segments and {name} parameters:
 * "/api/v1/projects/{name}/quota". Matching is exact, segment by segment;
 * a parameter matches one non-empty segment of at most 255 bytes.
 * The table itself lives in server/routes.c; a test checks it against
 * api/openapi.yaml.
 */
#ifndef TS_SERVER_HTTP_ROUTE_H
#define TS_SERVER_HTTP_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "api/err.h"
#include "server/http/http.h"

/* Who may call a route. */
enum ts_access {
    TS_ACCESS_PUBLIC, /* no token */
    TS_ACCESS_READ,   /* viewer, member, admin */
    TS_ACCESS_SUBMIT, /* member, admin (further limited to the member's projects) */
    TS_ACCESS_NODE,   /* agent, admin; reads also viewer and member */
    TS_ACCESS_ADMIN,  /* admin */
    TS_ACCESS_AGENT,  /* agent, admin: the agent protocol (commands, env) */
    TS_ACCESS_ANY,    /* any valid token */
};

/* ctx is the server (struct ts_server *). Fill r's response, or return an
 * error with err filled: the dispatcher turns it into problem+json. */
typedef enum ts_err (*ts_route_handler)(void *ctx, struct ts_request *r, struct ts_error *err);

struct ts_route {
    const char *method;
    const char *path;
    ts_route_handler handler;
    enum ts_access access;
    bool query; /* its handler decodes a query string by its table; the
                 * dispatcher answers 400 to any on the other routes */
};

struct ts_route_match {
    int index;                            /* into the table, -1 when none */
    char values[TS_HTTP_MAX_PARAMS][256]; /* path parameter values */
    int nvalues;
    char allow[128]; /* "GET, DELETE" for a 405 */
};

/*
 * Find the route for method + path in table[0..n). TS_OK: m->index and
 * m->values set. TS_ERR_METHOD_NOT_ALLOWED: the path exists with other
 * methods, listed in m->allow. TS_ERR_ROUTE_NOT_FOUND otherwise.
 */
enum ts_err ts_route_find(const struct ts_route *table, size_t n, const char *method,
                          const char *path, struct ts_route_match *m);

#endif /* TS_SERVER_HTTP_ROUTE_H */
