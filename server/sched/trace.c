/*
 * trace.c - the CSV trace parsers of trace.h.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/sched/trace.h"

#define MAX_COLS 32
#define MAX_FIELD 256
#define MAX_ROWS 10000000

struct csv {
    const char *p, *end;
    int line;
    int ncols;
    char head[MAX_COLS][MAX_FIELD];
    char cell[MAX_COLS][MAX_FIELD];
    int ncell;
    struct ts_error *err;
};

/* Next non-blank, non-comment line split at commas into c->cell; 1 when a
 * row was read, 0 at the end, -1 on error. */
static int next_row(struct csv *c)
{
    while (c->p < c->end) {
        const char *s = c->p;
        const char *e = memchr(s, '\n', (size_t)(c->end - s));
        if (e == NULL)
            e = c->end;
        c->p = e < c->end ? e + 1 : e;
        c->line++;
        const char *le = e;
        if (le > s && le[-1] == '\r')
            le--;
        const char *t = s;
        while (t < le && (*t == ' ' || *t == '\t'))
            t++;
        if (t == le || *t == '#')
            continue;
        c->ncell = 0;
        const char *f = s;
        for (;;) {
            const char *q = f;
            while (q < le && *q != ',')
                q++;
            if (c->ncell >= MAX_COLS) {
                ts_error_set(c->err, TS_ERR_INVALID_VALUE, "line %d: more than %d columns", c->line,
                             MAX_COLS);
                return -1;
            }
            size_t n = (size_t)(q - f);
            if (n >= MAX_FIELD) {
                ts_error_set(c->err, TS_ERR_INVALID_VALUE,
                             "line %d: column %d is longer than %d characters", c->line,
                             c->ncell + 1, MAX_FIELD - 1);
                return -1;
            }
            memcpy(c->cell[c->ncell], f, n);
            c->cell[c->ncell][n] = '\0';
            for (size_t k = 0; k < n; k++) {
                unsigned char ch = (unsigned char)c->cell[c->ncell][k];
                if (ch == '"' || ch == '\0' || (ch < 0x20 && ch != '\t')) {
                    ts_error_set(c->err, TS_ERR_INVALID_VALUE,
                                 "line %d: column %d has a quote or control character", c->line,
                                 c->ncell + 1);
                    return -1;
                }
            }
            c->ncell++;
            if (q >= le)
                break;
            f = q + 1;
        }
        return 1;
    }
    return 0;
}

static enum ts_err open_csv(struct csv *c, const char *buf, size_t len, struct ts_error *err)
{
    memset(c, 0, sizeof(*c));
    c->p = buf;
    c->end = buf + len;
    c->err = err;
    int r = next_row(c);
    if (r < 0)
        return err ? err->code : TS_ERR_INVALID_VALUE;
    if (r == 0)
        return ts_error_set(err, TS_ERR_INVALID_VALUE, "the file is empty: a header row is needed");
    c->ncols = c->ncell;
    for (int i = 0; i < c->ncell; i++)
        memcpy(c->head[i], c->cell[i], MAX_FIELD);
    return TS_OK;
}

static int col(const struct csv *c, const char *name)
{
    for (int i = 0; i < c->ncols; i++)
        if (strcmp(c->head[i], name) == 0)
            return i;
    return -1;
}

static enum ts_err need_cols(const struct csv *c, const char *const *names, int *idx)
{
    for (int i = 0; names[i]; i++) {
        idx[i] = col(c, names[i]);
        if (idx[i] < 0)
            return ts_error_set(c->err, TS_ERR_INVALID_VALUE,
                                "line %d: the header has no column \"%s\"", 1, names[i]);
    }
    return TS_OK;
}

static enum ts_err row_width(const struct csv *c)
{
    if (c->ncell != c->ncols)
        return ts_error_set(c->err, TS_ERR_INVALID_VALUE, "line %d: %d columns, the header has %d",
                            c->line, c->ncell, c->ncols);
    return TS_OK;
}

static const char *field(const struct csv *c, int i)
{
    return i >= 0 ? c->cell[i] : "";
}

static enum ts_err get_int(const struct csv *c, int i, const char *name, int64_t lo, int64_t hi,
                           bool optional, int64_t def, int64_t *out)
{
    const char *s = field(c, i);
    if (*s == '\0') {
        if (optional) {
            *out = def;
            return TS_OK;
        }
        return ts_error_set(c->err, TS_ERR_INVALID_VALUE, "line %d: column %s is empty", c->line,
                            name);
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || !(isdigit((unsigned char)s[0]) || s[0] == '-'))
        return ts_error_set(c->err, TS_ERR_INVALID_VALUE,
                            "line %d: column %s is not an integer: \"%s\"", c->line, name, s);
    if (v < lo || v > hi)
        return ts_error_set(c->err, TS_ERR_INVALID_VALUE,
                            "line %d: column %s must be between %lld and %lld: %lld", c->line, name,
                            (long long)lo, (long long)hi, v);
    *out = v;
    return TS_OK;
}

static enum ts_err get_num(const struct csv *c, int i, const char *name, double lo, double hi,
                           bool optional, double def, double *out)
{
    const char *s = field(c, i);
    if (*s == '\0') {
        if (optional) {
            *out = def;
            return TS_OK;
        }
        return ts_error_set(c->err, TS_ERR_INVALID_VALUE, "line %d: column %s is empty", c->line,
                            name);
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v) ||
        !(isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == '.'))
        return ts_error_set(c->err, TS_ERR_INVALID_VALUE,
                            "line %d: column %s is not a number: \"%s\"", c->line, name, s);
    if (v < lo || v > hi)
        return ts_error_set(c->err, TS_ERR_INVALID_VALUE,
                            "line %d: column %s must be between %g and %g: %g", c->line, name, lo,
                            hi, v);
    *out = v;
    return TS_OK;
}

static const char *dup(struct ts_arena *a, const struct csv *c, int i)
{
    return ts_arena_strdup(a, field(c, i));
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        rc = (x);                                                                                  \
        if (rc != TS_OK)                                                                           \
            goto out;                                                                              \
    } while (0)

/* Rows grow by doubling inside the arena (old blocks are left to it). */
static void *grow(struct ts_arena *a, void *old, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return old;
    size_t ncap = *cap ? *cap * 2 : 1024;
    void *nv = ts_arena_alloc(a, ncap * size);
    if (nv == NULL)
        return NULL;
    if (old)
        memcpy(nv, old, n * size);
    *cap = ncap;
    return nv;
}

enum ts_err ts_sched_trace_nodes_parse(const char *buf, size_t len, struct ts_arena *a,
                                       struct ts_sched_trace_node **out, size_t *n,
                                       struct ts_error *err)
{
    struct csv *c = malloc(sizeof(*c));
    enum ts_err rc = TS_OK;
    struct ts_sched_trace_node *v = NULL;
    size_t cap = 0;
    *n = 0;
    if (c == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    static const char *const names[] = {"sn", "cpu_milli", "memory_mib", "gpu", NULL};
    int ix[4];
    TRY(open_csv(c, buf, len, err));
    TRY(need_cols(c, names, ix));
    int im = col(c, "model");
    int r;
    while ((r = next_row(c)) > 0) {
        TRY(row_width(c));
        if (*n >= MAX_ROWS) {
            rc = ts_error_set(err, TS_ERR_INVALID_VALUE, "more than %d rows", MAX_ROWS);
            goto out;
        }
        if ((v = grow(a, v, *n, &cap, sizeof(*v))) == NULL) {
            rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            goto out;
        }
        struct ts_sched_trace_node *x = &v[*n];
        int64_t g;
        if (field(c, ix[0])[0] == '\0') {
            rc = ts_error_set(err, TS_ERR_INVALID_VALUE, "line %d: column sn is empty", c->line);
            goto out;
        }
        x->name = dup(a, c, ix[0]);
        TRY(get_int(c, ix[1], "cpu_milli", 0, INT64_C(1) << 40, false, 0, &x->cpu_milli));
        TRY(get_int(c, ix[2], "memory_mib", 0, INT64_C(1) << 40, false, 0, &x->memory_mib));
        TRY(get_int(c, ix[3], "gpu", 0, 64, false, 0, &g));
        x->gpus = (int)g;
        x->model = dup(a, c, im);
        (*n)++;
    }
    if (r < 0)
        rc = err ? err->code : TS_ERR_INVALID_VALUE;
out:
    free(c);
    *out = v;
    return rc;
}

enum ts_err ts_sched_trace_pods_parse(const char *buf, size_t len, struct ts_arena *a,
                                      struct ts_sched_trace_pod **out, size_t *n,
                                      struct ts_error *err)
{
    struct csv *c = malloc(sizeof(*c));
    enum ts_err rc = TS_OK;
    struct ts_sched_trace_pod *v = NULL;
    size_t cap = 0;
    *n = 0;
    if (c == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    static const char *const names[] = {"name",    "cpu_milli", "memory_mib",
                                        "num_gpu", "gpu_milli", NULL};
    int ix[5];
    TRY(open_csv(c, buf, len, err));
    TRY(need_cols(c, names, ix));
    int ispec = col(c, "gpu_spec"), ict = col(c, "creation_time");
    int r;
    while ((r = next_row(c)) > 0) {
        TRY(row_width(c));
        if (*n >= MAX_ROWS) {
            rc = ts_error_set(err, TS_ERR_INVALID_VALUE, "more than %d rows", MAX_ROWS);
            goto out;
        }
        if ((v = grow(a, v, *n, &cap, sizeof(*v))) == NULL) {
            rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            goto out;
        }
        struct ts_sched_trace_pod *x = &v[*n];
        int64_t g, m;
        x->name = dup(a, c, ix[0]);
        TRY(get_int(c, ix[1], "cpu_milli", 0, INT64_C(1) << 40, false, 0, &x->cpu_milli));
        TRY(get_int(c, ix[2], "memory_mib", 0, INT64_C(1) << 40, false, 0, &x->memory_mib));
        TRY(get_int(c, ix[3], "num_gpu", 0, 64, false, 0, &g));
        TRY(get_int(c, ix[4], "gpu_milli", 0, 1000, false, 0, &m));
        x->num_gpu = (int)g;
        x->gpu_milli = (int)m;
        if (g > 1 && m != 1000) {
            rc = ts_error_set(err, TS_ERR_INVALID_VALUE,
                              "line %d: a pod with num_gpu %lld must have gpu_milli 1000, not %lld",
                              c->line, (long long)g, (long long)m);
            goto out;
        }
        if (g >= 1 && m == 0) {
            rc = ts_error_set(err, TS_ERR_INVALID_VALUE,
                              "line %d: a pod with num_gpu %lld must have gpu_milli above 0",
                              c->line, (long long)g);
            goto out;
        }
        x->gpu_spec = dup(a, c, ispec);
        TRY(get_int(c, ict, "creation_time", 0, INT64_C(1) << 50, true, -1, &x->creation_time));
        (*n)++;
    }
    if (r < 0)
        rc = err ? err->code : TS_ERR_INVALID_VALUE;
out:
    free(c);
    *out = v;
    return rc;
}

enum ts_err ts_sched_trace_projects_parse(const char *buf, size_t len, struct ts_arena *a,
                                          struct ts_sched_trace_project **out, size_t *n,
                                          struct ts_error *err)
{
    struct csv *c = malloc(sizeof(*c));
    enum ts_err rc = TS_OK;
    struct ts_sched_trace_project *v = NULL;
    size_t cap = 0;
    *n = 0;
    if (c == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    static const char *const names[] = {"name", "quota_gpus", NULL};
    int ix[2];
    TRY(open_csv(c, buf, len, err));
    TRY(need_cols(c, names, ix));
    int idep = col(c, "department"), iw = col(c, "over_quota_weight"), il = col(c, "limit_gpus"),
        ip = col(c, "priority");
    int r;
    while ((r = next_row(c)) > 0) {
        TRY(row_width(c));
        if ((v = grow(a, v, *n, &cap, sizeof(*v))) == NULL) {
            rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            goto out;
        }
        struct ts_sched_trace_project *x = &v[*n];
        int64_t pr;
        if (field(c, ix[0])[0] == '\0') {
            rc = ts_error_set(err, TS_ERR_INVALID_VALUE, "line %d: column name is empty", c->line);
            goto out;
        }
        x->name = dup(a, c, ix[0]);
        x->department = dup(a, c, idep);
        TRY(get_num(c, ix[1], "quota_gpus", 0, 1e7, false, 0, &x->quota_gpus));
        TRY(get_num(c, iw, "over_quota_weight", 0, 1e7, true, 1, &x->over_quota_weight));
        x->has_limit = field(c, il)[0] != '\0';
        TRY(get_num(c, il, "limit_gpus", x->quota_gpus, 1e7, true, 0, &x->limit_gpus));
        TRY(get_int(c, ip, "priority", -1000, 1000, true, 0, &pr));
        x->priority = (int)pr;
        (*n)++;
    }
    if (r < 0)
        rc = err ? err->code : TS_ERR_INVALID_VALUE;
out:
    free(c);
    *out = v;
    return rc;
}

enum ts_err ts_sched_trace_jobs_parse(const char *buf, size_t len, struct ts_arena *a,
                                      struct ts_sched_trace_job **out, size_t *n,
                                      struct ts_error *err)
{
    struct csv *c = malloc(sizeof(*c));
    enum ts_err rc = TS_OK;
    struct ts_sched_trace_job *v = NULL;
    size_t cap = 0;
    *n = 0;
    if (c == NULL)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    static const char *const names[] = {"name",    "project",   "submit_s", "duration_s",
                                        "num_gpu", "gpu_milli", NULL};
    int ix[6];
    TRY(open_csv(c, buf, len, err));
    TRY(need_cols(c, names, ix));
    int icpu = col(c, "cpu_milli"), imem = col(c, "memory_mib"), ipr = col(c, "priority"),
        ipre = col(c, "preemptible"), iu = col(c, "utilization");
    int r;
    while ((r = next_row(c)) > 0) {
        TRY(row_width(c));
        if (*n >= MAX_ROWS) {
            rc = ts_error_set(err, TS_ERR_INVALID_VALUE, "more than %d rows", MAX_ROWS);
            goto out;
        }
        if ((v = grow(a, v, *n, &cap, sizeof(*v))) == NULL) {
            rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            goto out;
        }
        struct ts_sched_trace_job *x = &v[*n];
        int64_t g, m, pr, pre;
        x->name = dup(a, c, ix[0]);
        x->project = dup(a, c, ix[1]);
        if (x->project[0] == '\0') {
            rc = ts_error_set(err, TS_ERR_INVALID_VALUE, "line %d: column project is empty",
                              c->line);
            goto out;
        }
        TRY(get_int(c, ix[2], "submit_s", 0, INT64_C(1) << 40, false, 0, &x->submit_s));
        TRY(get_int(c, ix[3], "duration_s", 1, INT64_C(1) << 40, false, 0, &x->duration_s));
        TRY(get_int(c, ix[4], "num_gpu", 0, 64, false, 0, &g));
        TRY(get_int(c, ix[5], "gpu_milli", 0, 1000, false, 0, &m));
        if ((g > 1 && m != 1000) || (g >= 1 && m == 0)) {
            rc = ts_error_set(err, TS_ERR_INVALID_VALUE,
                              "line %d: num_gpu %lld and gpu_milli %lld do not go together",
                              c->line, (long long)g, (long long)m);
            goto out;
        }
        x->num_gpu = (int)g;
        x->gpu_milli = (int)m;
        TRY(get_int(c, icpu, "cpu_milli", 0, INT64_C(1) << 40, true, 0, &x->cpu_milli));
        TRY(get_int(c, imem, "memory_mib", 0, INT64_C(1) << 40, true, 0, &x->memory_mib));
        TRY(get_int(c, ipr, "priority", 0, 1000, true, 50, &pr));
        TRY(get_int(c, ipre, "preemptible", 0, 1, true, 1, &pre));
        TRY(get_num(c, iu, "utilization", 0, 1, true, 1, &x->utilization));
        x->priority = (int)pr;
        x->preemptible = pre != 0;
        (*n)++;
    }
    if (r < 0)
        rc = err ? err->code : TS_ERR_INVALID_VALUE;
out:
    free(c);
    *out = v;
    return rc;
}
