/*
 * routes.c - the route table. Operational endpoints answer both at the root
 * (where load balancers and Prometheus look) and under /api/v1. The
 * dashboard (web/) is served at / and /ui/. A route marked true decodes a
 * query string by its table (handlers/common.c); the others refuse one (400).
 */
#include "server/routes.h"

#include "api/array.h"
#include "server/handlers/handlers.h"
#include "server/handlers/web.h"

#define V1 "/api/v1"

const struct ts_route ts_routes[] = {
    {"GET", "/healthz", ts_h_healthz, TS_ACCESS_PUBLIC, false},
    {"GET", "/readyz", ts_h_readyz, TS_ACCESS_PUBLIC, false},
    {"GET", "/metrics", ts_h_metrics, TS_ACCESS_READ, false},
    {"GET", "/version", ts_h_version, TS_ACCESS_PUBLIC, false},
    {"GET", V1 "/healthz", ts_h_healthz, TS_ACCESS_PUBLIC, false},
    {"GET", V1 "/readyz", ts_h_readyz, TS_ACCESS_PUBLIC, false},
    {"GET", V1 "/metrics", ts_h_metrics, TS_ACCESS_READ, false},
    {"GET", V1 "/version", ts_h_version, TS_ACCESS_PUBLIC, false},
    {"GET", V1 "/openapi.yaml", ts_h_openapi, TS_ACCESS_PUBLIC, false},

    {"GET", "/", ts_h_web_index, TS_ACCESS_PUBLIC, false},
    {"GET", "/ui/{file}", ts_h_web_file, TS_ACCESS_PUBLIC, false},
    {"GET", "/ui/vendor/{file}", ts_h_web_vendor_file, TS_ACCESS_PUBLIC, false},

    {"GET", V1 "/whoami", ts_h_whoami, TS_ACCESS_ANY, false},
    {"POST", V1 "/tokens", ts_h_token_create, TS_ACCESS_ADMIN, false},
    {"GET", V1 "/tokens", ts_h_token_list, TS_ACCESS_ADMIN, false},
    {"DELETE", V1 "/tokens/{id}", ts_h_token_delete, TS_ACCESS_ADMIN, false},

    {"POST", V1 "/departments", ts_h_department_create, TS_ACCESS_ADMIN, false},
    {"GET", V1 "/departments", ts_h_department_list, TS_ACCESS_READ, false},
    {"GET", V1 "/departments/{name}", ts_h_department_get, TS_ACCESS_READ, false},
    {"DELETE", V1 "/departments/{name}", ts_h_department_delete, TS_ACCESS_ADMIN, false},
    {"PUT", V1 "/departments/{name}/quota", ts_h_department_quota, TS_ACCESS_ADMIN, false},

    {"POST", V1 "/projects", ts_h_project_create, TS_ACCESS_ADMIN, false},
    {"GET", V1 "/projects", ts_h_project_list, TS_ACCESS_READ, false},
    {"GET", V1 "/projects/{name}", ts_h_project_get, TS_ACCESS_READ, false},
    {"DELETE", V1 "/projects/{name}", ts_h_project_delete, TS_ACCESS_ADMIN, false},
    {"PUT", V1 "/projects/{name}/quota", ts_h_project_quota, TS_ACCESS_ADMIN, false},

    {"POST", V1 "/jobs", ts_h_job_submit, TS_ACCESS_SUBMIT, false},
    {"GET", V1 "/jobs", ts_h_job_list, TS_ACCESS_READ, true},
    {"GET", V1 "/jobs/{id}", ts_h_job_get, TS_ACCESS_READ, false},
    {"DELETE", V1 "/jobs/{id}", ts_h_job_cancel, TS_ACCESS_SUBMIT, false},
    {"POST", V1 "/jobs/{id}/suspend", ts_h_job_suspend, TS_ACCESS_SUBMIT, false},
    {"POST", V1 "/jobs/{id}/resume", ts_h_job_resume, TS_ACCESS_SUBMIT, false},
    {"GET", V1 "/jobs/{id}/events", ts_h_job_events, TS_ACCESS_READ, false},
    {"GET", V1 "/jobs/{id}/logs", ts_h_job_logs, TS_ACCESS_READ, true},
    {"GET", V1 "/queue", ts_h_queue, TS_ACCESS_READ, true},
    {"GET", V1 "/metrics/query", ts_h_metrics_query, TS_ACCESS_READ, true},
    {"GET", V1 "/metrics/idle", ts_h_metrics_idle, TS_ACCESS_READ, true},

    {"GET", V1 "/nodes", ts_h_node_list, TS_ACCESS_NODE, false},
    {"GET", V1 "/nodes/{name}", ts_h_node_get, TS_ACCESS_NODE, false},
    {"PUT", V1 "/nodes/{name}", ts_h_node_register, TS_ACCESS_AGENT, false},
    {"POST", V1 "/nodes/{name}/drain", ts_h_node_drain, TS_ACCESS_ADMIN, false},
    {"POST", V1 "/nodes/{name}/undrain", ts_h_node_undrain, TS_ACCESS_ADMIN, false},
    {"GET", V1 "/nodes/{name}/desired", ts_h_node_desired, TS_ACCESS_AGENT, true},
    {"POST", V1 "/nodes/{name}/report", ts_h_node_report, TS_ACCESS_AGENT, false},
    {"POST", V1 "/nodes/{name}/logs", ts_h_node_logs, TS_ACCESS_AGENT, false},

    {"GET", V1 "/audit", ts_h_audit_list, TS_ACCESS_ADMIN, true},
};

const size_t ts_routes_count = TS_ARRAY_LEN(ts_routes);
