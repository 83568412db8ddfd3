/*
 * listen.c - a session that LISTENs to channels (listen.h).
 */
#include "server/store/listen.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/log.h"

struct ts_store_listen {
    PGconn *pg;
};

struct ts_store_listen *ts_store_listen_open(const char *conninfo, const char *const *channels,
                                             int n)
{
    PGconn *pg = PQconnectdb(conninfo);
    if (PQstatus(pg) != CONNECTION_OK) {
        ts_log_warn("notify: cannot connect: %s", PQerrorMessage(pg));
        PQfinish(pg);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        char sql[96];
        snprintf(sql, sizeof(sql), "LISTEN %s", channels[i]);
        PGresult *res = PQexec(pg, sql);
        bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        PQclear(res);
        if (!ok) {
            ts_log_warn("notify: %s failed: %s", sql, PQerrorMessage(pg));
            PQfinish(pg);
            return NULL;
        }
    }
    struct ts_store_listen *l = malloc(sizeof(*l));
    if (l == NULL) {
        ts_log_warn("notify: out of memory");
        PQfinish(pg);
        return NULL;
    }
    l->pg = pg;
    return l;
}

int ts_store_listen_fd(const struct ts_store_listen *l)
{
    return PQsocket(l->pg);
}

int ts_store_listen_read(struct ts_store_listen *l)
{
    if (PQconsumeInput(l->pg))
        return 0;
    ts_log_warn("notify: connection lost: %s", PQerrorMessage(l->pg));
    return -1;
}

void ts_store_listen_drain(struct ts_store_listen *l,
                           void (*on)(const char *channel, const char *payload, void *ud), void *ud)
{
    PGnotify *n;
    while ((n = PQnotifies(l->pg)) != NULL) {
        on(n->relname, n->extra, ud);
        PQfreemem(n);
    }
}

void ts_store_listen_close(struct ts_store_listen *l)
{
    if (l == NULL)
        return;
    PQfinish(l->pg);
    free(l);
}
