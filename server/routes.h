/*
 * routes.h - the route table: every method and path the server answers,
 * its handler and who may call it. tests/unit/test_routes.c checks it against
 * api/openapi.yaml both ways.
 */
#ifndef TS_SERVER_ROUTES_H
#define TS_SERVER_ROUTES_H

#include <stddef.h>

#include "server/http/route.h"

extern const struct ts_route ts_routes[];
extern const size_t ts_routes_count;

#endif /* TS_SERVER_ROUTES_H */
