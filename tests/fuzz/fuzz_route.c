/*
 * fuzz_route.c - route matching over the server's real route table: any
 * method and path either matches a route whose template it fits, or is 404,
 * or is 405 naming only methods the path really has. Parameters are never
 * empty, never contain '/', never longer than 255 bytes.
 */
#include "tests/fuzz/fuzz.h"

#include "api/array.h"
#include "server/http/route.h"

/* The templates of server/routes.c, without handlers (the table itself links
 * the whole server). test_routes.c checks the real table. */
static const struct ts_route table[] = {
    {"GET", "/healthz", NULL, TS_ACCESS_PUBLIC, false},
    {"GET", "/api/v1/tokens", NULL, TS_ACCESS_ADMIN, false},
    {"POST", "/api/v1/tokens", NULL, TS_ACCESS_ADMIN, false},
    {"DELETE", "/api/v1/tokens/{id}", NULL, TS_ACCESS_ADMIN, false},
    {"GET", "/api/v1/projects/{name}", NULL, TS_ACCESS_READ, false},
    {"DELETE", "/api/v1/projects/{name}", NULL, TS_ACCESS_ADMIN, false},
    {"PUT", "/api/v1/projects/{name}/quota", NULL, TS_ACCESS_ADMIN, false},
    {"GET", "/api/v1/jobs/{id}", NULL, TS_ACCESS_READ, false},
    {"GET", "/api/v1/jobs/{id}/events", NULL, TS_ACCESS_READ, false},
    {"GET", "/api/v1/nodes/{name}", NULL, TS_ACCESS_NODE, false},
};
#define N (TS_ARRAY_LEN(table))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "DELETE", "PATCH"};
    if (size < 1 || size > 2048)
        return 0;
    char path[2049];
    memcpy(path, data + 1, size - 1);
    path[size - 1] = '\0';
    const char *method = methods[data[0] % 5];
    struct ts_route_match m;
    enum ts_err e = ts_route_find(table, N, method, path, &m);
    if (e == TS_OK) {
        FUZZ_CHECK(m.index >= 0 && (size_t)m.index < N);
        FUZZ_CHECK(strcmp(table[m.index].method, method) == 0);
        for (int i = 0; i < m.nvalues; i++) {
            size_t len = strlen(m.values[i]);
            FUZZ_CHECK(len > 0 && len <= 255 && strchr(m.values[i], '/') == NULL);
        }
    } else if (e == TS_ERR_METHOD_NOT_ALLOWED) {
        FUZZ_CHECK(m.allow[0] != '\0' && strstr(m.allow, method) == NULL);
    } else {
        FUZZ_CHECK(e == TS_ERR_ROUTE_NOT_FOUND && m.index == -1);
    }
    return 0;
}
