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

#include "agent/daemon/agent.h"
#include "agent/daemon/conn.h"
#include "api/clock.h"
#include "api/files.h"
#include "agent/daemon/logship.h"
#include "api/log.h"
#include "api/sdnotify.h"
#include "api/version.h"

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

static json_t *labels_json(const char *spec)
{
    json_t *o = json_object();
    if (spec == NULL || o == NULL)
        return o;
    char *copy = strdup(spec), *save = NULL;
    if (copy == NULL) {
        json_decref(o);
        return NULL;
    }
    for (char *kv = strtok_r(copy, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        json_object_set_new(o, kv, json_string(eq + 1));
    }
    free(copy);
    return o;
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
    json_t *gpus = json_array();
    for (unsigned i = 0; gpus != NULL && i < a->gpus->count; i++) {
        const struct ts_gpu_info *g = &a->gpus->info[i];
        json_array_append_new(gpus, json_pack("{s:i, s:s, s:s, s:I}", "index", (int)g->index,
                                              "uuid", g->uuid, "model", g->model, "memory_bytes",
                                              (json_int_t)g->memory_bytes));
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return json_pack(
        "{s:o, s:I, s:I, s:I, s:I, s:s, s:s, s:s, s:o}", "labels", labels_json(a->cfg.labels),
        "cpu", (json_int_t)(a->cfg.cpu > 0 ? a->cfg.cpu : cpus), "memory_bytes",
        (json_int_t)(a->cfg.memory > 0 ? a->cfg.memory : mem_total()), "swap_bytes",
        (json_int_t)a->ledgers.swap_bytes, "gpu_reserve_bytes", (json_int_t)a->cfg.gpu_reserve,
        "collision", ts_ledgers_collision_name(a->ledgers.collision), "agent_version", TS_VERSION,
        "protocol_version", protocol_claimed(), "gpus", gpus);
}

/* ---- reports ------------------------------------------------------------- */

/* Where its GPUs run: [{"index": logical, "physical_index": physical}]. */
static json_t *job_places(const struct ts_ajob *j)
{
    json_t *v = json_array();
    for (unsigned k = 0; v != NULL && k < j->ngpus; k++)
        json_array_append_new(v, json_pack("{s:i, s:i}", "index", (int)j->logical[k],
                                           "physical_index", (int)j->gpus[k]));
    return v;
}

json_t *ts_upstream_report(struct ts_agent *a)
{
    json_t *jobs = json_array(), *gpus = json_array();
    for (struct ts_ajob *j = a->jobs; j != NULL && jobs != NULL; j = j->next) {
        const char *state = ts_ajob_state_name(j);
        if (state == NULL)
            continue;
        if (j->suspended && j->phase == TS_AJOB_RUNNING)
            state = "suspended";
        json_t *o = json_pack("{s:I, s:i, s:s}", "id", (json_int_t)j->id, "attempt", j->attempt,
                              "state", state);
        if (o == NULL)
            continue;
        if (j->pid > 0)
            json_object_set_new(o, "pid", json_integer(j->pid));
        if (j->phase == TS_AJOB_EXITED && j->has_exit_code)
            json_object_set_new(o, "exit_code", json_integer(j->exit_code));
        if (j->phase == TS_AJOB_EXITED && j->signal > 0)
            json_object_set_new(o, "signal", json_integer(j->signal));
        if (j->evicted && ts_ajob_final(j)) {
            json_object_set_new(o, "evicted", json_true());
            json_object_set_new(o, "message", json_string(j->evict_msg));
        } else if (j->resuming && j->wait_msg[0] != '\0') {
            json_object_set_new(o, "message", json_string(j->wait_msg));
        } else if (j->message[0] != '\0') {
            json_object_set_new(o, "message", json_string(j->message));
        }
        if (j->phase == TS_AJOB_RUNNING && j->util_n > 0) {
            double u = j->util_sum / j->util_n;
            json_object_set_new(o, "gpu_utilization", json_real(u > 1 ? 1 : u));
        }
        if (j->suspended && j->phase == TS_AJOB_RUNNING)
            json_object_set_new(o, "swapped_bytes", json_integer((json_int_t)j->swapped_bytes));
        else if (j->shim && j->phase == TS_AJOB_RUNNING)
            json_object_set_new(
                o, "swapped_bytes",
                json_integer((json_int_t)ts_ledgers_job_swapped(&a->ledgers, j->id, j->attempt)));
        if (j->phase == TS_AJOB_RUNNING && j->has_usage)
            json_object_set_new(o, "gpu_memory_used_bytes", json_integer((json_int_t)j->mem_used));
        if (j->phase == TS_AJOB_RUNNING && j->ngpus > 0)
            json_object_set_new(o, "gpus", job_places(j));
        j->util_sum = 0;
        j->util_n = 0;
        json_array_append_new(jobs, o);
    }
    for (unsigned i = 0; gpus != NULL && i < a->gpus->count; i++) {
        if (!a->gpu_sampled[i])
            continue;
        double u = a->gpu_util_n[i] > 0 ? a->gpu_util_sum[i] / a->gpu_util_n[i] : 0;
        json_array_append_new(
            gpus, json_pack("{s:i, s:f, s:I}", "index", (int)a->gpus->info[i].index, "utilization",
                            u > 1 ? 1.0 : u, "memory_used_bytes", (json_int_t)a->gpu_mem[i]));
        a->gpu_util_sum[i] = 0;
        a->gpu_util_n[i] = 0;
    }
    json_t *r = json_pack("{s:o, s:o}", "jobs", jobs, "gpus", gpus);
    json_t *events = a->events != NULL ? ts_events_pending(a->events, EVENTS_PER_REPORT) : NULL;
    if (r != NULL && json_array_size(events) > 0)
        json_object_set(r, "events", events);
    json_decref(events);
    return r;
}

/* Mark the final jobs of a report accepted: the server has their state. */
static void reported(struct ts_agent *a, const json_t *report, const json_t *ignored)
{
    size_t i, k;
    const json_t *o, *ig;
    if (json_object_get(report, "events") != NULL)
        ts_events_acked(a->events, json_object_get(report, "events"));
    pthread_mutex_lock(&a->mu);
    json_array_foreach(json_object_get(report, "jobs"), i, o) {
        const char *state = json_string_value(json_object_get(o, "state"));
        if (state == NULL || strcmp(state, "running") == 0)
            continue;
        int64_t id = json_integer_value(json_object_get(o, "id"));
        struct ts_ajob *j =
            ts_agent_find(a, id, (int)json_integer_value(json_object_get(o, "attempt")));
        if (j == NULL)
            continue;
        j->final_reported = true;
        json_array_foreach((json_t *)ignored, k, ig) {
            if (json_integer_value(ig) == id && !a->file_mode)
                j->log_done = true; /* not this node's any more: nor its output */
        }
    }
    pthread_mutex_unlock(&a->mu);
}

static bool send_report(struct ts_agent *a, struct ts_conn *c, const char *base)
{
    pthread_mutex_lock(&a->mu);
    a->report_now = false;
    json_t *report = ts_upstream_report(a);
    pthread_mutex_unlock(&a->mu);
    if (report == NULL)
        return false;
    bool ok = false;
    if (a->file_mode) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/report.json", a->cfg.data_dir);
        json_object_set_new(report, "reported_at", json_integer((json_int_t)ts_ajob_now_ms()));
        ok = ts_files_write_json(path, report, 0600) == 0;
        ts_log_debug("report written jobs=%zu", json_array_size(json_object_get(report, "jobs")));
        if (ok)
            reported(a, report, NULL);
        json_decref(report);
        return ok;
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/report", base);
    long status;
    json_t *resp = NULL;
    struct ts_error err = {0};
    if (ts_conn_json(c, "POST", path, report, 60, &status, &resp, &err) != TS_OK) {
        ts_log_warn("could not send report: %s", err.message);
    } else if (status == 200) {
        reported(a, report, json_object_get(resp, "ignored"));
        ok = true;
    } else {
        ts_log_warn("report refused: status=%ld %s", status, ts_conn_problem(resp));
        if (status == 404)
            atomic_store(&a->registered, false);
    }
    json_decref(resp);
    json_decref(report);
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

static bool problem_is(const json_t *resp, const char *code)
{
    const char *c = json_string_value(json_object_get(resp, "code"));
    return c != NULL && strcmp(c, code) == 0;
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
    if (body == NULL) {
        ts_log_error("could not build the registration: out of memory");
    } else if (ts_conn_json(c, "PUT", path, body, 60, &status, &resp, &err) != TS_OK) {
        ts_log_warn("could not register: %s", err.message);
        notify_status("STATUS=could not register: %s", err.message);
    } else if (status == 409 && problem_is(resp, "incompatible_protocol")) {
        /* retrying cannot help: say why and stop, for the service manager */
        const char *hint = json_string_value(json_object_get(resp, "hint"));
        ts_log_error("registration refused: %s%s%s", ts_conn_problem(resp), hint ? "; " : "",
                     hint ? hint : "");
        notify_status("STATUS=registration refused: %s", ts_conn_problem(resp));
        atomic_store(&a->failed, true);
        atomic_store(&a->stop, true);
        ts_agent_wake(a);
    } else if (status != 200) {
        ts_log_warn("registration refused: status=%ld %s", status, ts_conn_problem(resp));
        notify_status("STATUS=registration refused: status=%ld %s", status, ts_conn_problem(resp));
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

static void hand_over(struct ts_agent *a, json_t *desired)
{
    pthread_mutex_lock(&a->mu);
    json_decref(a->desired_new);
    a->desired_new = desired;
    pthread_mutex_unlock(&a->mu);
    ts_agent_wake(a);
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
            json_t *d = ts_files_read_json(a->cfg.desired_file);
            if (d != NULL && json_is_object(d)) {
                last = st;
                hand_over(a, d);
            } else {
                json_decref(d); /* half written: read it again next time */
            }
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
        if (e == TS_OK && status == 200 && json_is_object(resp)) {
            json_t *g = json_object_get(resp, "generation");
            generation = json_is_integer(g) ? json_integer_value(g) : 0;
            hand_over(a, resp);
            backoff = 0;
            continue;
        }
        if (e != TS_OK)
            ts_log_warn("could not fetch the desired state: %s", err.message);
        else
            ts_log_warn("desired state refused: status=%ld %s", status, ts_conn_problem(resp));
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
            if (!a->file_mode && backoff == 0 && !ts_logship_send(a, c, base))
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
