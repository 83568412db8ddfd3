/*
 * dispatch.h - the dispatcher handed to the HTTP front end.
 */
#ifndef TS_SERVER_DISPATCH_H
#define TS_SERVER_DISPATCH_H

#include "server/http/http.h"

/* cls is the struct ts_server *. */
void ts_dispatch(void *cls, struct ts_request *r);
void ts_dispatch_complete(void *cls, struct ts_request *r);

#endif /* TS_SERVER_DISPATCH_H */
