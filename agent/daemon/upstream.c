/*
 * upstream.c - the agent's two threads that face the server.
 *
 * poll: registers the node (PUT /api/v1/nodes/NAME) until it succeeds, then
 * long-polls GET /nodes/NAME/desired?generation=G&wait=30s and hands each
 * answer to the main loop; a 404 (the server forgot the node) registers it
 * again. With --desired-file it reads that file instead, again whenever it
 * changes.
 *
 * ship: sends new job output (logship.c: POST /nodes/NAME/logs); then,
 * every --report-interval and at once when a job changes state, posts a
 * NodeReport (POST /nodes/NAME/report). Output goes first: a job's whole
 * output is on the server before its final state, after which the server
 * may take the job off this node. With --desired-file reports
 * go to DATA/report.json and output stays in the job folders.
 *
 * Both retry with exponential backoff (0.5 s to 30 s) while the server is
 * unreachable; jobs are not affected.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/daemon/upstream.h"
#include "agent/daemon/conn.h"
#include "api/clock.h"
#include "api/files.h"
#include "agent/daemon/logship.h"
#include "api/log.h"
#include "api/sdnotify.h"
#include "api/version.h"
#include "api/wire.h"

#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000
#define EVENTS_PER_REPORT 256

/* Sleep up to ms, returning early when the agent stops or (ship thread)
 * when kicked. Caller does not hold mu. */
static void nap(struct ts_agent *a, int64_t ms, bool wake_on_report)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&a->mu);
    while (!atomic_load(&a->stop) && !(wake_on_report && a->report_now)) {
        if (pthread_cond_timedwait(&a->cond, &a->mu, &until) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&a->mu);
}

static int64_t backoff_next(int64_t cur)
{
    int64_t next = cur == 0 ? BACKOFF_MIN_MS : cur * 2;
    return next > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : next;
}

/* cur plus or minus a quarter, so that many agents do not retry in step */
static int64_t jitter(int64_t cur)
{
    return cur - cur / 4 + (int64_t)(random() % (cur / 2 + 1));
}

/* ---- registration ---------------------------------------------------------- */

static long long mem_total(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    long long kb = 0;
    char line[256];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "MemTotal: %lld kB", &kb) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kb * 1024;
}

/* --labels "k=v,k2=v2" as the JSON text of an object of strings, in ar. */
static const char *labels_text(const char *spec, struct ts_arena *ar)
{
    json_t *o = json_object();
    char *copy = spec != NULL ? strdup(spec) : NULL, *save = NULL, *text = NULL;
    for (char *kv = copy != NULL ? strtok_r(copy, ",", &save) : NULL; o != NULL && kv != NULL;
         kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        json_object_set_new(o, kv, json_string(eq + 1));
    }
    free(copy);
    if (o != NULL)
        text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    const char *out = text != NULL ? ts_arena_strdup(ar, text) : "{}";
    free(text);
    return out;
}

/* The protocol the agent speaks (api/version.h). TS_TEST_AGENT_PROTOCOL
 * makes it claim another, for the tests of the server's refusal only. */
static const char *protocol_claimed(void)
{
    const char *t = getenv("TS_TEST_AGENT_PROTOCOL");
    return t != NULL && t[0] != '\0' ? t : TS_PROTOCOL_STR;
}

json_t *ts_upstream_registration(struct ts_agent *a)
{
    struct ts_arena *ar = ts_arena_new();
    struct ts_node_reg *r = ar != NULL ? ts_arena_alloc(ar, sizeof(*r)) : NULL;
    if (r == NULL) {
        ts_arena_free(ar);
        return NULL;
    }
    for (unsigned i = 0; i < a->gpus->count && i < TS_NODE_GPUS_MAX; i++) {
        const struct ts_gpu_info *g = &a->gpus->info[i];
        r->gpus[r->ngpus++] = (struct ts_gpu){.index = (int)g->index,
                                              .uuid = g->uuid,
                                              .model = g->model,
                                              .memory_bytes = (int64_t)g->memory_bytes};
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    r->labels = labels_text(a->cfg.labels, ar);
    r->cpu = (double)(a->cfg.cpu > 0 ? a->cfg.cpu : cpus);
    r->memory_bytes = a->cfg.memory > 0 ? a->cfg.memory : mem_total();
    r->swap_bytes = (int64_t)a->ledgers.swap_bytes;
    r->gpu_reserve_bytes = a->cfg.gpu_reserve;
    r->collision = ts_ledgers_collision_name(a->ledgers.collision);
    r->agent_version = TS_VERSION;
    if (!ts_protocol_parse(protocol_claimed(), &r->protocol))
        r->protocol = (struct ts_protocol){TS_PROTOCOL_MAJOR, TS_PROTOCOL_MINOR};
    json_t *v = ts_wire_node_reg_encode(r);
    ts_arena_free(ar);
    return v;
}

/* ---- reports ------------------------------------------------------------- */

/* Where its GPUs run: each logical GPU and its physical one. */
static void job_places(const struct ts_ajob *j, struct ts_arena *ar, struct ts_report_job *o)
{
    struct ts_report_gpu_place *p = ts_arena_alloc(ar, sizeof(*p) * (j->ngpus + 1));
    for (unsigned k = 0; p != NULL && k < j->ngpus; k++)
        p[k] = (struct ts_report_gpu_place){(int)j->logical[k], (int)j->gpus[k]};
    o->places = p;
    o->nplaces = p != NULL ? j->ngpus : 0;
}

static enum ts_report_state report_state(const struct ts_ajob *j)
{
    if (j->suspended && j->phase == TS_AJOB_RUNNING)
        return TS_REPORT_SUSPENDED;
    if (j->phase == TS_AJOB_RUNNING)
        return TS_REPORT_RUNNING;
    return j->phase == TS_AJOB_FAILED ? TS_REPORT_FAILED_TO_START : TS_REPORT_EXITED;
}

static void report_job(struct ts_agent *a, struct ts_ajob *j, struct ts_arena *ar,
                       struct ts_report_job *o)
{
    *o = (struct ts_report_job){.id = j->id, .attempt = j->attempt, .state = report_state(j)};
    if (j->pid > 0)
        o->pid = j->pid;
    if (j->phase == TS_AJOB_EXITED && j->has_exit_code) {
        o->has_exit_code = true;
        o->exit_code = j->exit_code;
    }
    if (j->phase == TS_AJOB_EXITED && j->signal > 0)
        o->signal = j->signal;
    if (j->evicted && ts_ajob_final(j)) {
        o->evicted = true;
        o->message = ts_arena_strdup(ar, j->evict_msg);
    } else if (j->resuming && j->wait_msg[0] != '\0') {
        o->message = ts_arena_strdup(ar, j->wait_msg);
    } else if (j->message[0] != '\0') {
        o->message = ts_arena_strdup(ar, j->message);
    }
    if (j->phase == TS_AJOB_RUNNING && j->util_n > 0) {
        double u = j->util_sum / j->util_n;
        o->has_gpu_utilization = true;
        o->gpu_utilization = u > 1 ? 1 : u;
    }
    if (j->suspended && j->phase == TS_AJOB_RUNNING) {
        o->has_swapped_bytes = true;
        o->swapped_bytes = (int64_t)j->swapped_bytes;
    } else if (j->shim && j->phase == TS_AJOB_RUNNING) {
        o->has_swapped_bytes = true;
        o->swapped_bytes = (int64_t)ts_ledgers_job_swapped(&a->ledgers, j->id, j->attempt);
    }
    if (j->phase == TS_AJOB_RUNNING && j->has_usage) {
        o->has_gpu_memory_used = true;
        o->gpu_memory_used_bytes = (int64_t)j->mem_used;
    }
    o->has_usage = o->has_gpu_utilization || o->has_gpu_memory_used;
    if (j->phase == TS_AJOB_RUNNING && j->ngpus > 0)
        job_places(j, ar, o);
}

enum ts_err ts_upstream_report(struct ts_agent *a, struct ts_arena *ar, struct ts_node_report *out)
{
    *out = (struct ts_node_report){0};
    size_t njobs = 0;
    for (struct ts_ajob *j = a->jobtab.jobs; j != NULL; j = j->next)
        njobs++;
    out->jobs = ts_arena_alloc(ar, sizeof(*out->jobs) * (njobs + 1));
    out->gpus = ts_arena_alloc(ar, sizeof(*out->gpus) * (a->gpus->count + 1));
    if (out->jobs == NULL || out->gpus == NULL)
        return TS_ERR_NOMEM;
    for (struct ts_ajob *j = a->jobtab.jobs; j != NULL; j = j->next) {
        if (ts_ajob_state_name(j) == NULL)
            continue; /* starting */
        report_job(a, j, ar, &out->jobs[out->njobs++]);
        j->util_sum = 0;
        j->util_n = 0;
    }
    for (unsigned i = 0; i < a->gpus->count; i++) {
        if (!a->gpu_sampled[i])
            continue;
        double u = a->gpu_util_n[i] > 0 ? a->gpu_util_sum[i] / a->gpu_util_n[i] : 0;
        out->gpus[out->ngpus++] = (struct ts_report_gpu){(int)a->gpus->info[i].index,
                                                         u > 1 ? 1.0 : u, (int64_t)a->gpu_mem[i]};
        a->gpu_util_sum[i] = 0;
        a->gpu_util_n[i] = 0;
    }
    if (a->events != NULL)
        out->nevents = ts_events_pending(a->events, ar, EVENTS_PER_REPORT, &out->events);
    return TS_OK;
}

/* Mark the final jobs of a report accepted: the server has their state.
 * res: the server's answer, or NULL (file mode). */
static void reported(struct ts_agent *a, const struct ts_node_report *rep,
                     const struct ts_report_result *res)
{
    if (rep->nevents > 0)
        ts_events_acked(a->events, rep->events, rep->nevents);
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < rep->njobs; i++) {
        const struct ts_report_job *o = &rep->jobs[i];
        if (o->state == TS_REPORT_RUNNING)
            continue;
        struct ts_ajob *j = ts_jobtab_find(&a->jobtab, o->id, o->attempt);
        if (j == NULL)
            continue;
        j->final_reported = true;
        for (size_t k = 0; res != NULL && k < res->nignored; k++)
            if (res->ignored[k] == o->id)
                j->log_done = true; /* not this node's any more: nor its output */
    }
    pthread_mutex_unlock(&a->mu);
}

/* The report as written in file mode: the NodeReport and when. */
static bool write_report(struct ts_agent *a, const struct ts_node_report *rep, json_t *body)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/report.json", a->cfg.data_dir);
    bool ok = json_object_set_new(body, "reported_at", json_integer(ts_ajob_now_ms())) == 0 &&
              ts_files_write_json(path, body, 0600) == 0;
    ts_log_debug("report written jobs=%zu", rep->njobs);
    if (ok)
        reported(a, rep, NULL);
    return ok;
}

static bool send_report(struct ts_agent *a, struct ts_conn *c, const char *base)
{
    struct ts_arena *ar = ts_arena_new();
    if (ar == NULL)
        return false;
    struct ts_node_report rep;
    pthread_mutex_lock(&a->mu);
    a->report_now = false;
    enum ts_err e = ts_upstream_report(a, ar, &rep);
    pthread_mutex_unlock(&a->mu);
    json_t *report = e == TS_OK ? ts_wire_node_report_encode(&rep) : NULL;
    bool ok = false;
    if (report == NULL) {
        ts_log_error("could not build the report: out of memory");
    } else if (a->file_mode) {
        ok = write_report(a, &rep, report);
    } else {
        char path[512];
        snprintf(path, sizeof(path), "%s/report", base);
        long status;
        json_t *resp = NULL;
        struct ts_error err = {0};
        struct ts_report_result res;
        if (ts_conn_json(c, "POST", path, report, 60, &status, &resp, &err) != TS_OK) {
            ts_log_warn("could not send report: %s", err.message);
        } else if (status == 200 && ts_wire_report_result_decode(resp, ar, &res, &err) != TS_OK) {
            ts_log_warn("could not read the answer to a report: %s", err.message);
        } else if (status == 200) {
            reported(a, &rep, &res);
            ok = true;
        } else {
            ts_log_warn("report refused: status=%ld %s", status, ts_problem_text(resp));
            if (status == 404)
                atomic_store(&a->registered, false);
        }
        json_decref(resp);
    }
    json_decref(report);
    ts_arena_free(ar);
    return ok;
}

/* ---- threads --------------------------------------------------------------- */

static void node_path(struct ts_agent *a, char *buf, size_t len)
{
    snprintf(buf, len, "/api/v1/nodes/%s", a->cfg.node);
}

/* STATE for the service manager (api/sdnotify.h); nothing without one */
static void notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void notify_status(const char *fmt, ...)
{
    char state[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(state, sizeof(state), fmt, ap);
    va_end(ap);
    ts_sdnotify(state);
}

/* The problem resp (borrowed) when its code is code; else NULL. */
static const struct ts_problem *problem_is(const json_t *resp, const char *code,
                                           struct ts_problem *p)
{
    struct ts_error err;
    if (ts_wire_problem_decode(resp, p, &err) != TS_OK || p->code == NULL ||
        strcmp(p->code, code) != 0)
        return NULL;
    return p;
}

static bool do_register(struct ts_agent *a, struct ts_conn *c)
{
    char path[512];
    node_path(a, path, sizeof(path));
    json_t *body = ts_upstream_registration(a);
    long status;
    json_t *resp = NULL;
    struct ts_error err = {0};
    bool ok = false;
    struct ts_problem problem;
    const struct ts_problem *refused = NULL;
    if (body == NULL) {
        ts_log_error("could not build the registration: out of memory");
    } else if (ts_conn_json(c, "PUT", path, body, 60, &status, &resp, &err) != TS_OK) {
        ts_log_warn("could not register: %s", err.message);
        notify_status("STATUS=could not register: %s", err.message);
    } else if (status == 409 &&
               (refused = problem_is(resp, "incompatible_protocol", &problem)) != NULL) {
        /* retrying cannot help: say why and stop, for the service manager */
        const char *hint = refused->hint;
        ts_log_error("registration refused: %s%s%s", ts_problem_text(resp), hint ? "; " : "",
                     hint ? hint : "");
        notify_status("STATUS=registration refused: %s", ts_problem_text(resp));
        atomic_store(&a->failed, true);
        atomic_store(&a->stop, true);
        ts_jobtab_wake(&a->jobtab);
    } else if (status != 200) {
        ts_log_warn("registration refused: status=%ld %s", status, ts_problem_text(resp));
        notify_status("STATUS=registration refused: status=%ld %s", status, ts_problem_text(resp));
    } else {
        ts_log_info("registered node=%s gpus=%u", a->cfg.node, a->gpus->count);
        /* systemd's Type=notify: the agent is up once the server knows the node */
        notify_status("READY=1\nSTATUS=registered node=%s gpus=%u", a->cfg.node, a->gpus->count);
        ok = true;
    }
    json_decref(resp);
    json_decref(body);
    return ok;
}

struct ts_agent_desired *ts_agent_desired_decode(const json_t *in, struct ts_error *err)
{
    struct ts_agent_desired *d = calloc(1, sizeof(*d));
    if (d == NULL || (d->arena = ts_arena_new()) == NULL) {
        free(d);
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (ts_wire_desired_decode(in, d->arena, &d->d, err) != TS_OK) {
        ts_agent_desired_free(d);
        return NULL;
    }
    return d;
}

void ts_agent_desired_free(struct ts_agent_desired *d)
{
    if (d == NULL)
        return;
    ts_arena_free(d->arena);
    free(d);
}

static void hand_over(struct ts_agent *a, struct ts_agent_desired *desired)
{
    pthread_mutex_lock(&a->mu);
    ts_agent_desired_free(a->desired_new);
    a->desired_new = desired;
    pthread_mutex_unlock(&a->mu);
    ts_jobtab_wake(&a->jobtab);
}

static void poll_file(struct ts_agent *a)
{
    struct stat last = {0};
    while (!atomic_load(&a->stop)) {
        struct stat st;
        if (stat(a->cfg.desired_file, &st) == 0 &&
            (st.st_mtim.tv_sec != last.st_mtim.tv_sec ||
             st.st_mtim.tv_nsec != last.st_mtim.tv_nsec || st.st_ino != last.st_ino ||
             st.st_size != last.st_size)) {
            json_t *v = ts_files_read_json(a->cfg.desired_file);
            struct ts_error err = {0};
            if (v != NULL && json_is_object(v)) {
                last = st;
                struct ts_agent_desired *d = ts_agent_desired_decode(v, &err);
                if (d != NULL)
                    hand_over(a, d);
                else
                    ts_log_error("desired state refused: %s", err.message);
            } /* else half written: read it again next time */
            json_decref(v);
        }
        nap(a, 100, false);
    }
}

static void *poll_main(void *arg)
{
    struct ts_agent *a = arg;
    if (a->file_mode) {
        poll_file(a);
        return NULL;
    }
    const struct ts_conn_tls tls = {a->cfg.ca, a->cfg.cert, a->cfg.key};
    struct ts_conn *c = ts_conn_new(a->cfg.server, a->cfg.token_file, &tls, &a->stop);
    if (c == NULL)
        return NULL;
    char base[512], path[640];
    node_path(a, base, sizeof(base));
    int64_t generation = -1, backoff = 0;
    while (!atomic_load(&a->stop)) {
        if (!atomic_load(&a->registered)) {
            if (!do_register(a, c)) {
                backoff = backoff_next(backoff);
                nap(a, jitter(backoff), false);
                continue;
            }
            atomic_store(&a->registered, true);
            generation = -1;
            pthread_mutex_lock(&a->mu);
            a->report_now = true; /* tell the new server what runs here */
            pthread_cond_broadcast(&a->cond);
            pthread_mutex_unlock(&a->mu);
        }
        if (generation < 0)
            snprintf(path, sizeof(path), "%s/desired", base);
        else
            snprintf(path, sizeof(path), "%s/desired?generation=%lld&wait=%llds", base,
                     (long long)generation, (long long)a->cfg.poll_wait);
        long status;
        json_t *resp = NULL;
        struct ts_error err = {0};
        enum ts_err e =
            ts_conn_json(c, "GET", path, NULL, a->cfg.poll_wait + 30, &status, &resp, &err);
        if (atomic_load(&a->stop)) {
            json_decref(resp);
            break;
        }
        struct ts_agent_desired *d =
            e == TS_OK && status == 200 ? ts_agent_desired_decode(resp, &err) : NULL;
        if (d != NULL) {
            generation = d->d.generation;
            hand_over(a, d);
            json_decref(resp);
            backoff = 0;
            continue;
        }
        if (e == TS_OK && status == 200)
            ts_log_error("desired state refused: %s", err.message);
        else if (e != TS_OK)
            ts_log_warn("could not fetch the desired state: %s", err.message);
        else
            ts_log_warn("desired state refused: status=%ld %s", status, ts_problem_text(resp));
        if (e == TS_OK && status == 404)
            atomic_store(&a->registered, false);
        json_decref(resp);
        backoff = backoff_next(backoff);
        nap(a, jitter(backoff), false);
    }
    ts_conn_free(c);
    return NULL;
}

static void *ship_main(void *arg)
{
    struct ts_agent *a = arg;
    struct ts_conn *c = NULL;
    const struct ts_conn_tls tls = {a->cfg.ca, a->cfg.cert, a->cfg.key};
    if (!a->file_mode &&
        (c = ts_conn_new(a->cfg.server, a->cfg.token_file, &tls, &a->stop)) == NULL)
        return NULL;
    char base[512];
    node_path(a, base, sizeof(base));
    int64_t next_report = 0, backoff = 0;
    while (!atomic_load(&a->stop)) {
        pthread_mutex_lock(&a->mu);
        bool now = a->report_now;
        pthread_mutex_unlock(&a->mu);
        if (a->file_mode || atomic_load(&a->registered)) {
            /* output first: once the server has a job's final state it may
             * take the job off this node and refuse the rest of its output */
            if (!a->file_mode && backoff == 0 &&
                !ts_logship_send(&a->mu, &a->jobtab, &a->stop, c, base))
                backoff = backoff_next(backoff);
            if ((now && backoff == 0) || ts_now_ms() >= next_report) {
                if (send_report(a, c, base)) {
                    backoff = 0;
                    next_report = ts_now_ms() + a->cfg.report_interval * 1000;
                } else {
                    backoff = backoff_next(backoff);
                    int64_t wait = jitter(backoff);
                    if (wait > a->cfg.report_interval * 1000)
                        wait = a->cfg.report_interval * 1000;
                    next_report = ts_now_ms() + wait;
                }
            }
        }
        int64_t left = next_report - ts_now_ms();
        nap(a, left < 1000 ? (left > 0 ? left : 1) : 1000, backoff == 0);
    }
    ts_conn_free(c);
    return NULL;
}

int ts_upstream_start(struct ts_agent *a)
{
    if (pthread_create(&a->poll_thread, NULL, poll_main, a) != 0)
        return -1;
    if (pthread_create(&a->ship_thread, NULL, ship_main, a) != 0) {
        atomic_store(&a->stop, true);
        pthread_join(a->poll_thread, NULL);
        return -1;
    }
    a->threads = true;
    return 0;
}

void ts_upstream_join(struct ts_agent *a)
{
    if (!a->threads)
        return;
    pthread_mutex_lock(&a->mu);
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->poll_thread, NULL);
    pthread_join(a->ship_thread, NULL);
    a->threads = false;
}
