/*
 * route.c - segment-by-segment matching of paths against route templates.
 */
#include "server/http/route.h"

#include <stdbool.h>
#include <string.h>

/* Compare one template against path; on a match copy parameters into m. */
static bool match_one(const char *tpl, const char *path, struct ts_route_match *m)
{
    int nvalues = 0;
    const char *t = tpl, *p = path;
    while (*t == '/' && *p == '/') {
        t++;
        p++;
        size_t tl = strcspn(t, "/");
        size_t pl = strcspn(p, "/");
        if (tl >= 2 && t[0] == '{' && t[tl - 1] == '}') {
            if (pl == 0 || pl > 255 || nvalues >= TS_HTTP_MAX_PARAMS)
                return false;
            memcpy(m->values[nvalues], p, pl);
            m->values[nvalues][pl] = '\0';
            nvalues++;
        } else if (tl != pl || memcmp(t, p, tl) != 0) {
            return false;
        }
        t += tl;
        p += pl;
    }
    if (*t != '\0' || *p != '\0')
        return false;
    m->nvalues = nvalues;
    return true;
}

/* Add method to m->allow once. */
static void allow(struct ts_route_match *m, const char *method)
{
    if (strstr(m->allow, method) != NULL)
        return;
    size_t len = strlen(m->allow);
    size_t need = strlen(method) + (len ? 2 : 0);
    if (len + need < sizeof(m->allow)) {
        if (len)
            strcat(m->allow, ", ");
        strcat(m->allow, method);
    }
}

enum ts_err ts_route_find(const struct ts_route *table, size_t n, const char *method,
                          const char *path, struct ts_route_match *m)
{
    struct ts_route_match scratch;
    m->index = -1;
    m->nvalues = 0;
    m->allow[0] = '\0';
    if (path == NULL || path[0] != '/')
        return TS_ERR_ROUTE_NOT_FOUND;
    bool path_known = false;
    for (size_t i = 0; i < n; i++) {
        if (!match_one(table[i].path, path, &scratch))
            continue;
        /* RFC 9110 §9.3.2: HEAD is answered wherever GET is, the same
         * headers without the content (libmicrohttpd leaves the body out) */
        bool head = strcmp(method, "HEAD") == 0 && strcmp(table[i].method, "GET") == 0;
        if (strcmp(table[i].method, method) == 0 || head) {
            memcpy(m->values, scratch.values, sizeof(m->values));
            m->nvalues = scratch.nvalues;
            m->index = (int)i;
            return TS_OK;
        }
        path_known = true;
        allow(m, table[i].method);
        if (strcmp(table[i].method, "GET") == 0)
            allow(m, "HEAD");
    }
    return path_known ? TS_ERR_METHOD_NOT_ALLOWED : TS_ERR_ROUTE_NOT_FOUND;
}
