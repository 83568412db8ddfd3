/*
 * bench_fleet.c - a fleet of simulated agents against one real server.
 *
 * Starts a real tessera-server (embedded PostgreSQL; tests/integration/
 * harness.h) and plays N agents in this process, without simgpu processes:
 * a few threads, each driving its share of the nodes over one libcurl multi
 * handle. Each node does what agent/daemon/upstream.c does with its
 * defaults: registers with 8 GPUs of 80 GiB (PUT /nodes/NAME, a 2 GiB
 * reserve), keeps one long-poll of its desired state open
 * (GET /nodes/NAME/desired?generation=G&wait=30s, --poll-wait), and reports
 * every 5 s (--report-interval) and at once when one of its jobs changes
 * state: per-GPU samples (utilization, memory used) and every job it was told
 * to run, running 0.2 s after it first saw it, then exited 0 when its
 * duration ("sleep D", the job's command) is over, or killed by SIGTERM when
 * the desired state says stop.
 *
 * The load, at 1,000 nodes (it scales with the node count): 10,000 jobs, of
 * which 5,000 run and churn at 20 jobs/s. The running population is in
 * project "churn" (no quota, no limit: a new job binds at once); durations
 * are exponential with mean running/churn so that jobs end at the churn
 * rate from the start, and a submitter keeps the population at its target.
 * The other 5,000 wait in project "backlog", whose limit is 0 GPUs: pending
 * jobs every scheduler cycle reads and gives a reason.
 *
 * After registration, the fill and --warmup, a window of --seconds measures:
 * report latency (p50/p99/max), submit -> bound (from sending POST /jobs to
 * the job in its node's desired state, as the agent sees it), 503s and other
 * errors, the CPU of the server and all its PostgreSQL processes (/proc,
 * utime + stime, children reaped included), and the scheduler's cycles
 * (/metrics). --sweep 100,1000,2000 runs each size on a new server and prints
 * one row each. --pgss prints the window's statements by database time
 * (pg_stat_statements), --waits what the busy backends waited on
 * (pg_stat_activity, every 20 ms: pgwaits.h).
 *
 * --replicas 2: a second server on the first one's PostgreSQL (--database),
 * started once the first leads the scheduler loop; half the nodes talk to
 * each, and a node whose server does not answer goes to the other (what a
 * load balancer in front of the replicas does). --kill-leader-at S kills the
 * leader (SIGKILL; its PostgreSQL lives on) S seconds into the window and
 * prints the take-over: how long until the survivor leads and binds again,
 * ends the fleet had accepted that the database does not have (lost
 * reports), jobs started on two nodes at once or bound a second time
 * (duplicate binds). The row's CPU is then the survivor's and PostgreSQL's.
 *
 *   bench_fleet [--nodes N] [--gpus 8] [--jobs 10000] [--running 5000]
 *               [--churn 20] [--seconds S] [--warmup S] [--threads T]
 *               [--sweep N1,N2,...] [--pgss] [--waits]
 *               [--replicas 2 [--kill-leader-at S]]
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/bench/benchcpu.h"
#include "tests/bench/pgwaits.h"
#include "tests/integration/harness.h"

#define NODE_JOBS_MAX 64
#define GPUS_MAX 16
#define GPU_MEMORY (80LL << 30)
#define GPU_RESERVE (2LL << 30)
#define REPORT_INTERVAL_S 5.0 /* agent --report-interval default */
#define POLL_WAIT_S 30        /* agent --poll-wait default */
#define START_DELAY_S 0.2
#define RETRY_S 0.5 /* the agent's first backoff */
#define IDS_MAX (1 << 22)
#define SWEEP_MAX 16

/* ---- options ------------------------------------------------------------- */

static struct {
    int nodes, gpus, threads;
    double jobs, running, churn; /* at 1,000 nodes */
    double seconds, warmup;
    bool pgss;  /* profile the window's statements with pg_stat_statements */
    bool waits; /* sample the window's wait events (pgwaits.h) */
    int sweep[SWEEP_MAX];
    int nsweep;
    int replicas;
    double kill_at; /* seconds into the window; < 0: never */
} opt = {.replicas = 1,
         .kill_at = -1,
         .nodes = 100,
         .gpus = 8,
         .threads = 2,
         .jobs = 10000,
         .running = 5000,
         .churn = 20,
         .seconds = 30,
         .warmup = 15};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* xorshift: each thread its own state */
static double rnd(unsigned *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return (double)(*s % 1000000u) / 1e6;
}

/* ---- what one size's run shares ----------------------------------------- */

static struct ts_it_server srv;
static struct ts_it_server srv2;             /* --replicas 2: the second replica */
static struct ts_it_server *survivor = &srv; /* where submissions and metrics go */
static char agent_token[128];
static atomic_bool stopping;
static atomic_bool measuring;
static atomic_int registered;
static atomic_llong finished; /* churn jobs whose end the server accepted */

/* per job id: when its submission was sent, when an agent first saw it */
static double *submitted_at, *bound_at;
/* per job id: the node running it + 1 (0: none); its end accepted by a
 * server; for the take-over's checks */
static int *running_on;
static bool *end_accepted;
static atomic_long dup_runs, rebinds;
static pthread_mutex_t ids_mu = PTHREAD_MUTEX_INITIALIZER;

struct lat {
    double *v;
    size_t n, cap;
};

static void lat_add(struct lat *l, double x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        double *v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL)
            return;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const struct lat *l, double p)
{
    if (l->n == 0)
        return NAN;
    size_t i = (size_t)((double)l->n * p);
    return l->v[i < l->n ? i : l->n - 1];
}

/* ---- a simulated node ---------------------------------------------------- */

enum jphase { J_STARTING, J_RUNNING, J_EXITED };
enum slot_kind { S_REGISTER, S_POLL, S_REPORT };

struct sjob {
    int64_t id;
    int attempt;
    enum jphase phase;
    double start_at, end_at;
    double util;
    int64_t mem[GPUS_MAX]; /* used on each GPU index */
    int signal;            /* exited by SIGTERM (stop) */
    bool churn;            /* counts in the running population */
    unsigned final_seq;    /* the report that carried its end */
};

struct buf {
    char *data;
    size_t len, cap;
};

struct node;

struct slot {
    CURL *h;
    struct node *node;
    enum slot_kind kind;
    bool busy;
    double t0, next_at; /* started; earliest next start */
    struct buf in;
    unsigned seq; /* the report it carries */
};

struct node {
    char name[32];
    int replica; /* the server it talks to: 0 srv, 1 srv2 */
    int pid_base;
    int64_t generation; /* -1: none yet */
    bool registered;
    struct slot poll, rep;
    double next_report;
    bool report_now;
    unsigned report_seq;
    struct sjob jobs[NODE_JOBS_MAX];
    int njobs;
};

struct fthread {
    pthread_t t;
    int first, count; /* nodes[first .. first + count) */
    struct node *nodes;
    CURLM *m;
    struct curl_slist *hdr;
    unsigned rng;
    char *body;
    size_t body_cap;
    /* in the window */
    struct lat report_lat;
    long reports_ok, polls_ok, n503, nerr, nerr_curl;
    char last_err[160];
};

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
    struct buf *b = ud;
    size_t len = sz * n;
    if (b->len + len + 1 > b->cap) {
        size_t cap = (b->len + len + 1) * 2;
        char *d = realloc(b->data, cap);
        if (d == NULL)
            return 0;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, len);
    b->len += len;
    b->data[b->len] = '\0';
    return len;
}

static void slot_init(struct fthread *t, struct slot *s, struct node *n)
{
    s->h = curl_easy_init();
    s->node = n;
    curl_easy_setopt(s->h, CURLOPT_PRIVATE, s);
    curl_easy_setopt(s->h, CURLOPT_HTTPHEADER, t->hdr);
    curl_easy_setopt(s->h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(s->h, CURLOPT_WRITEDATA, &s->in);
    curl_easy_setopt(s->h, CURLOPT_NOSIGNAL, 1L);
}

static void slot_start(struct fthread *t, struct slot *s, enum slot_kind kind, const char *method,
                       const char *path, const char *body, long timeout_s)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/api/v1/nodes/%s%s", s->node->replica ? srv2.url : srv.url,
             s->node->name, path);
    curl_easy_setopt(s->h, CURLOPT_URL, url);
    if (body) {
        curl_easy_setopt(s->h, CURLOPT_COPYPOSTFIELDS, body);
        curl_easy_setopt(s->h, CURLOPT_CUSTOMREQUEST, method);
    } else {
        curl_easy_setopt(s->h, CURLOPT_CUSTOMREQUEST, NULL);
        curl_easy_setopt(s->h, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(s->h, CURLOPT_TIMEOUT, timeout_s);
    s->kind = kind;
    s->in.len = 0;
    s->busy = true;
    s->t0 = now_s();
    curl_multi_add_handle(t->m, s->h);
}

static void node_register(struct fthread *t, struct node *n)
{
    int len = snprintf(t->body, t->body_cap,
                       "{\"cpu\": 128, \"memory_bytes\": 2199023255552, \"swap_bytes\": 0,"
                       " \"gpu_reserve_bytes\": %lld, \"agent_version\": \"bench-fleet\","
                       " \"collision\": \"wait\", \"labels\": {}, \"gpus\": [",
                       GPU_RESERVE);
    for (int i = 0; i < opt.gpus; i++)
        len += snprintf(t->body + len, t->body_cap - (size_t)len,
                        "%s{\"index\": %d, \"uuid\": \"GPU-%s-%d\", \"model\": \"Sim H100 80GB\","
                        " \"memory_bytes\": %lld}",
                        i ? ", " : "", i, n->name, i, GPU_MEMORY);
    snprintf(t->body + len, t->body_cap - (size_t)len, "]}");
    slot_start(t, &n->poll, S_REGISTER, "PUT", "", t->body, 60);
}

static void node_poll(struct fthread *t, struct node *n)
{
    char path[96];
    if (n->generation < 0)
        snprintf(path, sizeof(path), "/desired");
    else
        snprintf(path, sizeof(path), "/desired?generation=%lld&wait=%ds", (long long)n->generation,
                 POLL_WAIT_S);
    slot_start(t, &n->poll, S_POLL, "GET", path, NULL, POLL_WAIT_S + 30);
}

/* The report the real agent sends (ts_upstream_report): every job it
 * knows that has not had its end accepted, then every GPU's sample. */
static void node_report(struct fthread *t, struct node *n)
{
    unsigned seq = ++n->report_seq;
    int64_t gmem[GPUS_MAX] = {0};
    double gutil[GPUS_MAX] = {0};
    size_t cap = t->body_cap, len = 0;
    len += (size_t)snprintf(t->body + len, cap - len, "{\"jobs\": [");
    int listed = 0;
    for (int i = 0; i < n->njobs; i++) {
        struct sjob *j = &n->jobs[i];
        if (j->phase == J_STARTING)
            continue;
        int pid = n->pid_base + (int)(j->id % 30000);
        if (j->phase == J_RUNNING) {
            int64_t used = 0;
            for (int g = 0; g < opt.gpus; g++) {
                gmem[g] += j->mem[g];
                used += j->mem[g];
                if (j->mem[g] > 0)
                    gutil[g] += j->util;
            }
            len += (size_t)snprintf(
                t->body + len, cap - len,
                "%s{\"id\": %lld, \"attempt\": %d, \"state\": \"running\", \"pid\": %d,"
                " \"gpu_utilization\": %.3f, \"gpu_memory_used_bytes\": %lld}",
                listed ? ", " : "", (long long)j->id, j->attempt, pid, j->util, (long long)used);
        } else {
            j->final_seq = seq;
            if (j->signal)
                len += (size_t)snprintf(t->body + len, cap - len,
                                        "%s{\"id\": %lld, \"attempt\": %d, \"state\": \"exited\","
                                        " \"pid\": %d, \"signal\": %d}",
                                        listed ? ", " : "", (long long)j->id, j->attempt, pid,
                                        j->signal);
            else
                len += (size_t)snprintf(t->body + len, cap - len,
                                        "%s{\"id\": %lld, \"attempt\": %d, \"state\": \"exited\","
                                        " \"pid\": %d, \"exit_code\": 0}",
                                        listed ? ", " : "", (long long)j->id, j->attempt, pid);
        }
        listed++;
    }
    len += (size_t)snprintf(t->body + len, cap - len, "], \"gpus\": [");
    for (int g = 0; g < opt.gpus; g++) {
        double u = gutil[g] > 1 ? 1 : gutil[g];
        len +=
            (size_t)snprintf(t->body + len, cap - len,
                             "%s{\"index\": %d, \"utilization\": %.3f,"
                             " \"memory_used_bytes\": %lld}",
                             g ? ", " : "", g, u, (long long)(gmem[g] + (gmem[g] ? 600 << 20 : 0)));
    }
    snprintf(t->body + len, cap - len, "]}");
    n->report_now = false;
    n->rep.seq = seq;
    slot_start(t, &n->rep, S_REPORT, "POST", "/report", t->body, 60);
}

static struct sjob *find_job(struct node *n, int64_t id, int attempt)
{
    for (int i = 0; i < n->njobs; i++)
        if (n->jobs[i].id == id && n->jobs[i].attempt == attempt)
            return &n->jobs[i];
    return NULL;
}

static void drop_job(struct node *n, int i)
{
    int64_t id = n->jobs[i].id;
    if (id > 0 && id < IDS_MAX) {
        pthread_mutex_lock(&ids_mu);
        running_on[id] = 0;
        pthread_mutex_unlock(&ids_mu);
    }
    n->jobs[i] = n->jobs[--n->njobs];
}

/* The desired state: start what is new, stop what is asked to stop, forget
 * what is no longer listed (the real agent kills it). */
static void apply_desired(struct fthread *t, struct node *n, json_t *d, double now)
{
    json_t *jobs = json_object_get(d, "jobs"), *o;
    size_t k;
    n->generation = json_integer_value(json_object_get(d, "generation"));
    bool listed[NODE_JOBS_MAX] = {false};
    json_array_foreach(jobs, k, o) {
        int64_t id = json_integer_value(json_object_get(o, "id"));
        int attempt = (int)json_integer_value(json_object_get(o, "attempt"));
        const char *action = json_string_value(json_object_get(o, "action"));
        if (action == NULL)
            continue;
        if (id > 0 && id < IDS_MAX && bound_at[id] == 0) {
            pthread_mutex_lock(&ids_mu);
            if (bound_at[id] == 0)
                bound_at[id] = now;
            pthread_mutex_unlock(&ids_mu);
        }
        struct sjob *j = find_job(n, id, attempt);
        if (j == NULL && strcmp(action, "run") == 0 && id > 0 && id < IDS_MAX) {
            int here = (int)(n - t->nodes) + 1;
            pthread_mutex_lock(&ids_mu);
            if (running_on[id] != 0 && running_on[id] != here)
                atomic_fetch_add(&dup_runs, 1);
            running_on[id] = here;
            pthread_mutex_unlock(&ids_mu);
            if (attempt > 1)
                atomic_fetch_add(&rebinds, 1);
        }
        if (j == NULL && strcmp(action, "run") == 0 && n->njobs < NODE_JOBS_MAX) {
            j = &n->jobs[n->njobs++];
            memset(j, 0, sizeof(*j));
            j->id = id;
            j->attempt = attempt;
            j->phase = J_STARTING;
            j->start_at = now + START_DELAY_S;
            const char *dur = json_string_value(json_array_get(json_object_get(o, "command"), 1));
            j->end_at = j->start_at + (dur ? atof(dur) : 60);
            j->util = 0.3 + 0.7 * rnd(&t->rng);
            const char *project = json_string_value(json_object_get(o, "project"));
            j->churn = project != NULL && strcmp(project, "churn") == 0;
            json_t *g;
            size_t gi;
            json_array_foreach(json_object_get(o, "gpus"), gi, g) {
                int idx = (int)json_integer_value(json_object_get(g, "index"));
                int64_t lim = json_integer_value(json_object_get(g, "memory_limit_bytes"));
                if (idx >= 0 && idx < GPUS_MAX)
                    j->mem[idx] = (int64_t)((double)lim * (0.4 + 0.5 * rnd(&t->rng)));
            }
        } else if (j != NULL && strcmp(action, "stop") == 0 && j->phase != J_EXITED) {
            j->phase = J_EXITED;
            j->signal = 15;
            n->report_now = true;
        }
        if (j != NULL)
            listed[j - n->jobs] = true;
    }
    for (int i = n->njobs - 1; i >= 0; i--)
        if (!listed[i] && n->jobs[i].phase != J_EXITED)
            drop_job(n, i);
}

static void count_error(struct fthread *t, const char *what, long status, CURLcode cc,
                        const struct buf *in)
{
    if (!atomic_load(&measuring))
        return;
    if (status == 503)
        t->n503++;
    else if (cc != CURLE_OK)
        t->nerr_curl++;
    else
        t->nerr++;
    snprintf(t->last_err, sizeof(t->last_err), "%s: %ld %s %.80s", what, status,
             cc != CURLE_OK ? curl_easy_strerror(cc) : "", in->data ? in->data : "");
}

static void slot_done(struct fthread *t, struct slot *s, CURLcode cc)
{
    double now = now_s();
    struct node *n = s->node;
    long status = 0;
    curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle(t->m, s->h);
    s->busy = false;
    bool ok = cc == CURLE_OK && status == 200;
    if (cc != CURLE_OK && opt.replicas > 1)
        n->replica = !n->replica; /* its server is gone: the balancer sends it on */
    switch (s->kind) {
    case S_REGISTER:
        if (ok) {
            if (!n->registered)
                atomic_fetch_add(&registered, 1);
            n->registered = true;
            n->generation = -1;
            n->report_now = true;
        } else {
            count_error(t, "register", status, cc, &s->in);
            s->next_at = now + RETRY_S;
        }
        break;
    case S_POLL:
        if (ok) {
            json_t *d = json_loadb(s->in.data, s->in.len, 0, NULL);
            if (d != NULL) {
                apply_desired(t, n, d, now);
                json_decref(d);
            }
            if (atomic_load(&measuring))
                t->polls_ok++;
        } else {
            if (status == 404)
                n->registered = false;
            count_error(t, "desired", status, cc, &s->in);
            s->next_at = now + RETRY_S;
        }
        break;
    case S_REPORT:
        if (atomic_load(&measuring))
            lat_add(&t->report_lat, now - s->t0);
        if (ok) {
            if (atomic_load(&measuring))
                t->reports_ok++;
            for (int i = n->njobs - 1; i >= 0; i--) {
                struct sjob *j = &n->jobs[i];
                if (j->phase == J_EXITED && j->final_seq != 0 && j->final_seq <= s->seq) {
                    if (j->churn)
                        atomic_fetch_add(&finished, 1);
                    if (!j->signal && j->id > 0 && j->id < IDS_MAX)
                        end_accepted[j->id] = true;
                    drop_job(n, i);
                }
            }
            n->next_report = now + REPORT_INTERVAL_S;
        } else {
            if (status == 404)
                n->registered = false;
            count_error(t, "report", status, cc, &s->in);
            n->next_report = now + RETRY_S;
        }
        break;
    }
}

/* Jobs' clocks, then whatever request is due. */
static void node_tick(struct fthread *t, struct node *n, double now)
{
    for (int i = 0; i < n->njobs; i++) {
        struct sjob *j = &n->jobs[i];
        if (j->phase == J_STARTING && now >= j->start_at) {
            j->phase = J_RUNNING;
            n->report_now = true;
        }
        if (j->phase == J_RUNNING && now >= j->end_at) {
            j->phase = J_EXITED;
            n->report_now = true;
        }
    }
    if (!n->poll.busy && now >= n->poll.next_at) {
        if (!n->registered)
            node_register(t, n);
        else
            node_poll(t, n);
    }
    if (n->registered && !n->rep.busy && (n->report_now || now >= n->next_report))
        node_report(t, n);
}

static void *agents_run(void *arg)
{
    struct fthread *t = arg;
    double last_tick = 0;
    while (!atomic_load(&stopping)) {
        double now = now_s();
        if (now - last_tick >= 0.02) {
            last_tick = now;
            for (int i = 0; i < t->count; i++)
                node_tick(t, &t->nodes[t->first + i], now);
        }
        int running;
        curl_multi_perform(t->m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(t->m, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            char *priv = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
            slot_done(t, (struct slot *)(void *)priv, msg->data.result);
        }
        curl_multi_poll(t->m, NULL, 0, 20, NULL);
    }
    return NULL;
}

/* ---- submitting ----------------------------------------------------------- */

static atomic_llong seq_name;
static atomic_llong churn_submitted;
static atomic_long submit_err, submit_503;

/* One job: a churn job runs an exponential time of mean mean_s; its GPU
 * request is one device (60 %), half of one (20 %) or two (20 %). */
static int submit_one(struct ts_client *c, const char *project, double mean_s, unsigned *rng)
{
    long long k = atomic_fetch_add(&seq_name, 1);
    double dur = -mean_s * log(1 - rnd(rng) * 0.9999);
    double r = rnd(rng);
    const char *gpu = r < 0.6   ? "{\"count\": 1}"
                      : r < 0.8 ? "{\"portion\": 0.5}"
                                : "{\"count\": 2}";
    char body[512];
    snprintf(body, sizeof(body),
             "{\"name\": \"f%lld\", \"project\": \"%s\", \"command\": [\"sleep\", \"%.1f\"],"
             " \"gpu\": %s}",
             k, project, dur < 1 ? 1.0 : dur, gpu);
    struct ts_response resp;
    double t0 = now_s();
    long st = ts_it_req(c, "POST", "/api/v1/jobs", body, NULL, &resp);
    if (st == 201) {
        long long id = ts_it_int(resp.json, "id");
        if (id > 0 && id < IDS_MAX) {
            pthread_mutex_lock(&ids_mu);
            submitted_at[id] = t0;
            pthread_mutex_unlock(&ids_mu);
        }
    } else if (atomic_load(&measuring)) {
        if (st == 503)
            atomic_fetch_add(&submit_503, 1);
        else
            atomic_fetch_add(&submit_err, 1);
    }
    if (st > 0)
        ts_response_free(&resp);
    return st == 201 ? 0 : -1;
}

struct filler {
    pthread_t t;
    const char *project;
    long count;
    double mean_s;
    unsigned rng;
};

static void *fill_run(void *arg)
{
    struct filler *f = arg;
    struct ts_client *c = ts_it_client(&srv, TS_IT_ADMIN_TOKEN);
    for (long i = 0; i < f->count && !atomic_load(&stopping); i++)
        if (submit_one(c, f->project, f->mean_s, &f->rng) == 0 && strcmp(f->project, "churn") == 0)
            atomic_fetch_add(&churn_submitted, 1);
    ts_client_free(c);
    return NULL;
}

/* Submit count jobs to project from 4 threads. */
static void fill(const char *project, long count, double mean_s)
{
    struct filler f[4];
    for (int i = 0; i < 4; i++) {
        f[i] = (struct filler){.project = project,
                               .count = count / 4 + (i < count % 4),
                               .mean_s = mean_s,
                               .rng = 2463534242u + (unsigned)i * 7919u};
        pthread_create(&f[i].t, NULL, fill_run, &f[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(f[i].t, NULL);
}

/* Keeps the churn population (submitted, not finished) at its target,
 * submitting at most rate per second. */
static struct {
    pthread_t t;
    long target;
    double rate, mean_s;
} sub;

static void *submitter_run(void *arg)
{
    (void)arg;
    struct ts_client *c = ts_it_client(survivor, TS_IT_ADMIN_TOKEN);
    unsigned rng = 88172645u;
    double credit = 0, last = now_s();
    while (!atomic_load(&stopping)) {
        double now = now_s();
        credit += (now - last) * sub.rate; /* at most rate a second, a second's worth banked */
        if (credit > (sub.rate > 1 ? sub.rate : 1))
            credit = sub.rate > 1 ? sub.rate : 1;
        last = now;
        long deficit = sub.target - (long)(atomic_load(&churn_submitted) - atomic_load(&finished));
        if (deficit > 0 && credit >= 1) {
            credit -= 1;
            if (submit_one(c, "churn", sub.mean_s, &rng) == 0)
                atomic_fetch_add(&churn_submitted, 1);
            continue;
        }
        sleep_s(0.01);
    }
    ts_client_free(c);
    return NULL;
}

/* ---- measuring ------------------------------------------------------------ */

/* Killed (ctest's timeout, ^C): the server and its PostgreSQL go too. */
static volatile sig_atomic_t pm_pid, server_pid;

static void on_signal(int sig)
{
    if (server_pid > 0)
        kill((pid_t)server_pid, SIGKILL);
    if (pm_pid > 0)
        kill((pid_t)pm_pid, SIGINT);
    _exit(128 + sig);
}

static double server_cpu(double *pg_out)
{
    return ts_bench_server_cpu(survivor->pid, srv.dir, pg_out);
}

struct sched_metrics {
    double cycles, cycle_seconds, last_cycle, sweeps;
};

static double metric(const char *text, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, name, len) == 0 && p[len] == ' ')
            return atof(p + len + 1);
    return NAN;
}

static void read_metrics(struct sched_metrics *m)
{
    struct ts_it_server *s = survivor;
    *m = (struct sched_metrics){NAN, NAN, NAN, NAN};
    /* a saturated server answers 503 when no pooled connection frees up */
    for (int tries = 0; tries < 10 && isnan(m->cycles); tries++) {
        struct ts_response r;
        long st = ts_it_req(s->admin, "GET", "/metrics", NULL, NULL, &r);
        if (st == 200) {
            m->cycles = metric(r.body.data, "tessera_scheduler_cycles_total");
            m->cycle_seconds = metric(r.body.data, "tessera_scheduler_cycle_seconds_total");
            m->last_cycle = metric(r.body.data, "tessera_scheduler_last_cycle_seconds");
            m->sweeps = metric(r.body.data, "tessera_scheduler_sweeps_total");
        }
        if (st > 0)
            ts_response_free(&r);
        if (isnan(m->cycles))
            sleep_s(0.2);
    }
}

/* The window's statements by the database time they took. */
static void print_statements(int nodes, double window)
{
    char *out = malloc(1 << 16);
    if (out == NULL)
        return;
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "SELECT string_agg(format('%%9s %%9s %%8s %%7s  %%s', round(calls / %.3f, 2),"
             " round((total_exec_time / %.3f)::numeric, 1), round(mean_exec_time::numeric, 3),"
             " round(rows::numeric / greatest(calls, 1), 1),"
             /* the head and the tail: statements that start alike end apart */
             " CASE WHEN length(q) <= 150 THEN q"
             "  ELSE left(q, 95) || ' ... ' || right(q, 50) END), E'\\n'"
             " ORDER BY total_exec_time DESC)"
             " FROM (SELECT *, regexp_replace(query, '\\s+', ' ', 'g') AS q FROM pg_stat_statements"
             "  ORDER BY total_exec_time DESC LIMIT 25) s",
             window, window);
    if (ts_it_sql(&srv, sql, out, 1 << 16) == 0)
        printf("pg_stat_statements at %d nodes, the %.0f s window, by time:\n"
               "%9s %9s %8s %7s  %s\n%s\n",
               nodes, window, "calls/s", "ms/s", "mean ms", "rows", "statement", out);
    free(out);
}

struct takeover {
    bool done;
    double leader_s, bind_s; /* from the kill until the survivor leads; binds again */
    long accepted, lost;     /* ends the fleet had accepted; of them not in the database */
    long dup_runs, rebinds, db_rebinds;
};

struct row {
    int nodes;
    long jobs, running_target;
    double churn;
    long running, pending; /* at the window's end, from the database */
    double window;
    long reports, polls;
    double rep_p50, rep_p99, rep_max;
    long bound_n, unbound;
    double bound_p50, bound_p99, bound_max;
    double cpu, pg_cpu;      /* cores */
    double cycles, cycle_ms; /* per second; mean */
    double last_cycle_ms;
    long n503, nerr;
    char last_err[160];
    bool ok;
    struct takeover tk;
};

static long sql_count(const char *sql)
{
    char buf[32] = "";
    return ts_it_sql(&srv, sql, buf, sizeof(buf)) == 0 ? atol(buf) : -1;
}

/* ---- two replicas and a take-over ---------------------------------------- */

/* tessera_scheduler_leader of s: 1 leads, 0 not, -1 no answer */
static int leads(struct ts_it_server *s)
{
    struct ts_response r;
    long st = ts_it_req(s->admin, "GET", "/metrics", NULL, NULL, &r);
    double v = st == 200 ? metric(r.body.data, "tessera_scheduler_leader") : NAN;
    if (st > 0)
        ts_response_free(&r);
    return isnan(v) ? -1 : v == 1;
}

/* The second replica on srv's PostgreSQL, once srv leads. */
static int start_replica(const char *maxconn)
{
    double t0 = now_s();
    while (leads(&srv) != 1)
        if (now_s() - t0 > 30)
            return -1;
        else
            sleep_s(0.1);
    const char *args[] = {"--database", srv.conninfo, "--max-connections", maxconn, NULL};
    if (ts_it_start(&srv2, NULL, args) != 0)
        return -1;
    snprintf(srv2.conninfo, sizeof(srv2.conninfo), "%s", srv.conninfo); /* for ts_it_sql */
    survivor = &srv2;
    return 0;
}

/* Kills the leader (srv) and waits until the survivor leads. */
static double kill_leader(struct takeover *tk)
{
    double t_kill = now_s();
    ts_it_crash(&srv);
    server_pid = 0;
    while (leads(&srv2) != 1 && now_s() - t_kill < 60)
        sleep_s(0.02);
    tk->leader_s = now_s() - t_kill;
    tk->done = true;
    return t_kill;
}

/* After the run: the first bind after the kill, and what was lost or done
 * twice. */
static void takeover_check(struct takeover *tk, double t_kill)
{
    double first = 0;
    for (long id = 1; id < IDS_MAX; id++)
        if (bound_at[id] > t_kill && (first == 0 || bound_at[id] < first))
            first = bound_at[id];
    tk->bind_s = first > 0 ? first - t_kill : NAN;
    size_t cap = 64u << 20;
    char *ids = malloc(cap);
    bool *done = calloc(IDS_MAX, sizeof(bool));
    if (ids && done &&
        ts_it_sql(&srv2, "SELECT string_agg(id::text, ',') FROM job WHERE state = 'succeeded'", ids,
                  cap) == 0)
        for (char *p = ids; *p;) {
            long id = strtol(p, &p, 10);
            if (id > 0 && id < IDS_MAX)
                done[id] = true;
            if (*p == ',')
                p++;
            else
                break;
        }
    for (long id = 1; id < IDS_MAX; id++)
        if (end_accepted[id]) {
            tk->accepted++;
            tk->lost += !done[id];
        }
    free(ids);
    free(done);
    tk->dup_runs = atomic_load(&dup_runs);
    tk->rebinds = atomic_load(&rebinds);
    tk->db_rebinds = sql_count("SELECT count(*) FROM job WHERE attempt > 1");
}

static int run_size(int nodes, struct row *row)
{
    memset(row, 0, sizeof(*row));
    row->nodes = nodes;
    double scale = nodes / 1000.0;
    row->jobs = lround(opt.jobs * scale);
    row->running_target = lround(opt.running * scale);
    row->churn = opt.churn * scale;
    if (row->jobs < row->running_target)
        row->jobs = row->running_target;
    atomic_store(&stopping, false);
    atomic_store(&measuring, false);
    atomic_store(&registered, 0);
    atomic_store(&finished, 0);
    atomic_store(&churn_submitted, 0);
    atomic_store(&submit_err, 0);
    atomic_store(&submit_503, 0);
    memset(submitted_at, 0, IDS_MAX * sizeof(double));
    memset(bound_at, 0, IDS_MAX * sizeof(double));
    memset(running_on, 0, IDS_MAX * sizeof(int));
    memset(end_accepted, 0, IDS_MAX * sizeof(bool));
    atomic_store(&dup_runs, 0);
    atomic_store(&rebinds, 0);

    char maxconn[32];
    snprintf(maxconn, sizeof(maxconn), "%d", 2 * nodes + 256);
    const char *args[] = {"--max-connections", maxconn, NULL};
    if (ts_it_start(&srv, NULL, args) != 0)
        return -1;
    if (opt.pgss) {
        /* ALTER SYSTEM outlasts the embedded PostgreSQL's own settings */
        char dir[256], out[64];
        snprintf(dir, sizeof(dir), "%s", srv.dir);
        ts_it_sql(&srv, "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'", out,
                  sizeof(out));
        ts_it_stop(&srv);
        if (ts_it_start(&srv, dir, args) != 0 ||
            ts_it_sql(&srv, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements", out,
                      sizeof(out)) != 0)
            return -1;
    }
    server_pid = srv.pid;
    pm_pid = ts_bench_postmaster_pid(srv.dir);
    snprintf(agent_token, sizeof(agent_token), "%s", ts_it_token(&srv, "fleet", "agent", NULL));
    ts_it_req(srv.admin, "POST", "/api/v1/departments", "{\"name\": \"fleet\"}", NULL, NULL);
    ts_it_req(srv.admin, "POST", "/api/v1/projects",
              "{\"name\": \"churn\", \"department\": \"fleet\"}", NULL, NULL);
    if (ts_it_req(srv.admin, "POST", "/api/v1/projects",
                  "{\"name\": \"backlog\", \"department\": \"fleet\","
                  " \"quota\": {\"gpus\": 0, \"limit\": 0}}",
                  NULL, NULL) != 201) {
        fprintf(stderr, "bench_fleet: could not create the projects\n");
        return -1;
    }

    if (opt.replicas > 1 && start_replica(maxconn) != 0) {
        fprintf(stderr, "bench_fleet: could not start the second replica\n");
        return -1;
    }

    /* the jobs first: submitted while no node is there to bind them, the
     * fill takes seconds; with the fleet reporting, minutes */
    double mean_s = row->churn > 0 ? (double)row->running_target / row->churn : 1e6;
    double t0 = now_s();
    fill("backlog", row->jobs - row->running_target, mean_s);
    fill("churn", row->running_target, mean_s);
    double t_fill = now_s() - t0;

    int nt = opt.threads < nodes ? opt.threads : nodes;
    struct node *all = calloc((size_t)nodes, sizeof(*all));
    struct fthread *th = calloc((size_t)nt, sizeof(*th));
    char auth[200];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", agent_token);
    for (int i = 0; i < nodes; i++) {
        snprintf(all[i].name, sizeof(all[i].name), "fleet-%05d", i);
        all[i].generation = -1;
        all[i].pid_base = 1000 + i;
        all[i].replica = opt.replicas > 1 ? i % 2 : 0;
    }
    for (int k = 0; k < nt; k++) {
        struct fthread *t = &th[k];
        t->nodes = all;
        t->first = nodes * k / nt;
        t->count = nodes * (k + 1) / nt - t->first;
        t->m = curl_multi_init();
        curl_multi_setopt(t->m, CURLMOPT_MAXCONNECTS, (long)(2 * t->count + 16));
        t->hdr = curl_slist_append(NULL, auth);
        t->hdr = curl_slist_append(t->hdr, "Content-Type: application/json");
        t->hdr = curl_slist_append(t->hdr, "Expect:");
        t->rng = 2166136261u ^ (unsigned)k;
        t->body_cap = 64 * 1024;
        t->body = malloc(t->body_cap);
        double now = now_s();
        for (int i = 0; i < t->count; i++) {
            struct node *n = &all[t->first + i];
            slot_init(t, &n->poll, n);
            slot_init(t, &n->rep, n);
            /* agents start at different times: spread the 5 s reports */
            n->next_report = now + REPORT_INTERVAL_S * rnd(&t->rng);
        }
        pthread_create(&t->t, NULL, agents_run, t);
    }
    t0 = now_s();
    while (atomic_load(&registered) < nodes && now_s() - t0 < 300)
        sleep_s(0.1);
    double t_reg = now_s() - t0;
    sub.target = row->running_target;
    sub.rate = row->churn > 0 ? row->churn * 2 : 1;
    sub.mean_s = mean_s;
    pthread_create(&sub.t, NULL, submitter_run, NULL);
    fprintf(stderr,
            "bench_fleet: %ld jobs submitted in %.1f s, then %d nodes registered in %.1f s;"
            " warming up %.0f s\n",
            row->jobs, t_fill, nodes, t_reg, opt.warmup);
    sleep_s(opt.warmup);

    struct sched_metrics m0, m1;
    read_metrics(&m0);
    double pg0, pg1;
    double cpu0 = server_cpu(&pg0);
    double w0 = now_s();
    if (opt.pgss) {
        char out[64];
        ts_it_sql(&srv, "SELECT pg_stat_statements_reset()", out, sizeof(out));
    }
    struct ts_bench_waits *waits = opt.waits ? ts_bench_waits_start(srv.conninfo) : NULL;
    atomic_store(&measuring, true);
    double t_kill = 0;
    if (opt.replicas > 1 && opt.kill_at >= 0 && opt.kill_at < opt.seconds) {
        sleep_s(opt.kill_at);
        t_kill = kill_leader(&row->tk);
        double left = opt.seconds - (now_s() - w0);
        if (left > 0)
            sleep_s(left);
    } else {
        sleep_s(opt.seconds);
    }
    atomic_store(&measuring, false);
    ts_bench_waits_stop_print(waits, nodes);
    double w1 = now_s();
    double cpu1 = server_cpu(&pg1);
    read_metrics(&m1);
    row->window = w1 - w0;
    row->running = sql_count("SELECT count(*) FROM job WHERE state = 'running'");
    row->pending = sql_count("SELECT count(*) FROM job WHERE state = 'pending'");
    if (opt.pgss)
        print_statements(nodes, row->window);
    sleep_s(3); /* the window's last submissions may still bind */

    atomic_store(&stopping, true);
    pthread_join(sub.t, NULL);
    struct lat rep = {0}, bound = {0};
    for (int k = 0; k < nt; k++) {
        struct fthread *t = &th[k];
        pthread_join(t->t, NULL);
        for (size_t i = 0; i < t->report_lat.n; i++)
            lat_add(&rep, t->report_lat.v[i]);
        row->reports += t->reports_ok;
        row->polls += t->polls_ok;
        row->n503 += t->n503;
        row->nerr += t->nerr + t->nerr_curl;
        if (t->last_err[0])
            snprintf(row->last_err, sizeof(row->last_err), "%s", t->last_err);
    }
    if (row->tk.done)
        takeover_check(&row->tk, t_kill);
    row->n503 += atomic_load(&submit_503);
    row->nerr += atomic_load(&submit_err);
    for (long id = 1; id < IDS_MAX; id++) {
        if (submitted_at[id] < w0 || submitted_at[id] >= w1)
            continue;
        if (bound_at[id] > 0)
            lat_add(&bound, bound_at[id] - submitted_at[id]);
        else
            row->unbound++;
    }
    qsort(rep.v, rep.n, sizeof(double), cmp_double);
    qsort(bound.v, bound.n, sizeof(double), cmp_double);
    row->rep_p50 = pct(&rep, 0.5) * 1e3;
    row->rep_p99 = pct(&rep, 0.99) * 1e3;
    row->rep_max = rep.n ? rep.v[rep.n - 1] * 1e3 : NAN;
    row->bound_n = (long)bound.n;
    row->bound_p50 = pct(&bound, 0.5) * 1e3;
    row->bound_p99 = pct(&bound, 0.99) * 1e3;
    row->bound_max = bound.n ? bound.v[bound.n - 1] * 1e3 : NAN;
    row->cpu = (cpu1 - cpu0) / row->window;
    row->pg_cpu = (pg1 - pg0) / row->window;
    row->cycles = (m1.cycles - m0.cycles) / row->window;
    row->cycle_ms = (m1.cycle_seconds - m0.cycle_seconds) / (m1.cycles - m0.cycles) * 1e3;
    row->last_cycle_ms = m1.last_cycle * 1e3;
    row->ok = bound.n > 0 && rep.n > 0;
    free(rep.v);
    free(bound.v);

    for (int k = 0; k < nt; k++) {
        struct fthread *t = &th[k];
        for (int i = 0; i < t->count; i++) {
            struct node *n = &all[t->first + i];
            struct slot *s[] = {&n->poll, &n->rep};
            for (int q = 0; q < 2; q++) {
                if (s[q]->busy)
                    curl_multi_remove_handle(t->m, s[q]->h);
                curl_easy_cleanup(s[q]->h);
                free(s[q]->in.data);
            }
        }
        curl_multi_cleanup(t->m);
        curl_slist_free_all(t->hdr);
        free(t->body);
        free(t->report_lat.v);
    }
    free(th);
    free(all);
    int rc = 0;
    if (opt.replicas > 1) {
        rc = ts_it_stop(&srv2);
        ts_it_cleanup(&srv2);
        survivor = &srv;
    }
    if (row->tk.done) { /* start the first again (adopting its PostgreSQL) to stop it */
        char dir[256];
        snprintf(dir, sizeof(dir), "%s", srv.dir);
        if (ts_it_start(&srv, dir, NULL) != 0)
            rc = -1;
    }
    if (ts_it_stop(&srv) != 0)
        rc = -1;
    server_pid = 0;
    pm_pid = 0;
    if (getenv("TS_FLEET_KEEP") == NULL)
        ts_it_cleanup(&srv);
    else
        fprintf(stderr, "bench_fleet: kept %s\n", srv.dir);
    return rc;
}

static void print_header(void)
{
    printf("%6s %6s %6s %6s %5s | %7s %6s %6s %7s | %6s %6s %7s %5s | %6s %5s %5s %9s |"
           " %6s %6s %6s | %4s %4s\n",
           "nodes", "jobs", "run", "pend", "churn", "rep/s", "p50ms", "p99ms", "maxms", "b50ms",
           "b99ms", "bmaxms", "unb", "cpu%", "pg%", "srv%", "us/node/s", "cyc/s", "cycms", "lastms",
           "503", "err");
}

static void print_row(const struct row *r)
{
    printf("%6d %6ld %6ld %6ld %5.1f | %7.1f %6.1f %6.1f %7.1f | %6.0f %6.0f %7.0f %5ld |"
           " %6.1f %5.1f %5.1f %9.1f | %6.2f %6.1f %6.1f | %4ld %4ld\n",
           r->nodes, r->jobs, r->running, r->pending, r->churn, (double)r->reports / r->window,
           r->rep_p50, r->rep_p99, r->rep_max, r->bound_p50, r->bound_p99, r->bound_max, r->unbound,
           r->cpu * 100, r->pg_cpu * 100, (r->cpu - r->pg_cpu) * 100, r->cpu / r->nodes * 1e6,
           r->cycles, r->cycle_ms, r->last_cycle_ms, r->n503, r->nerr);
    fflush(stdout);
}

static int parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(a, "--nodes") == 0)
            opt.nodes = atoi(v);
        else if (strcmp(a, "--gpus") == 0)
            opt.gpus = atoi(v);
        else if (strcmp(a, "--jobs") == 0)
            opt.jobs = atof(v);
        else if (strcmp(a, "--running") == 0)
            opt.running = atof(v);
        else if (strcmp(a, "--churn") == 0)
            opt.churn = atof(v);
        else if (strcmp(a, "--seconds") == 0)
            opt.seconds = atof(v);
        else if (strcmp(a, "--warmup") == 0)
            opt.warmup = atof(v);
        else if (strcmp(a, "--threads") == 0)
            opt.threads = atoi(v);
        else if (strcmp(a, "--replicas") == 0)
            opt.replicas = atoi(v);
        else if (strcmp(a, "--kill-leader-at") == 0)
            opt.kill_at = atof(v);
        else if (strcmp(a, "--pgss") == 0) {
            opt.pgss = true;
            continue;
        } else if (strcmp(a, "--waits") == 0) {
            opt.waits = true;
            continue;
        } else if (strcmp(a, "--sweep") == 0) {
            char *s = strdup(v), *save = NULL;
            for (char *p = strtok_r(s, ",", &save); p && opt.nsweep < SWEEP_MAX;
                 p = strtok_r(NULL, ",", &save))
                opt.sweep[opt.nsweep++] = atoi(p);
            free(s);
        } else
            return -1;
        i++;
    }
    if (opt.nsweep == 0)
        opt.sweep[opt.nsweep++] = opt.nodes;
    for (int i = 0; i < opt.nsweep; i++)
        if (opt.sweep[i] < 1 || opt.sweep[i] > 100000)
            return -1;
    if (opt.gpus < 1 || opt.gpus > GPUS_MAX || opt.threads < 1 || opt.threads > 64 ||
        opt.seconds <= 0 || opt.warmup < 0 || opt.running < 0 || opt.churn < 0 ||
        opt.replicas < 1 || opt.replicas > 2 || (opt.kill_at >= 0 && opt.replicas < 2))
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    if (parse_args(argc, argv) != 0) {
        fprintf(stderr,
                "usage: bench_fleet [--nodes N] [--gpus 8] [--jobs 10000] [--running 5000]"
                " [--churn 20] [--seconds S] [--warmup S] [--threads T]"
                " [--sweep N1,N2,...] [--pgss] [--waits] [--replicas 2 [--kill-leader-at S]]\n"
                "  --jobs, --running and --churn are at 1,000 nodes; each size scales"
                " them\n");
        return 2;
    }
    ts_client_global_init();
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    submitted_at = calloc(IDS_MAX, sizeof(double));
    bound_at = calloc(IDS_MAX, sizeof(double));
    running_on = calloc(IDS_MAX, sizeof(int));
    end_accepted = calloc(IDS_MAX, sizeof(bool));
    if (submitted_at == NULL || bound_at == NULL || running_on == NULL || end_accepted == NULL)
        return 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("bench_fleet: %d GPUs of 80 GiB a node; at 1,000 nodes %.0f jobs, %.0f running,"
           " churn %.0f/s; reports every %.0f s, long-polls of %d s; %.0f s windows after %.0f s"
           " of warm-up; %d agent threads; %ld CPUs here (this process shares them)\n",
           opt.gpus, opt.jobs, opt.running, opt.churn, REPORT_INTERVAL_S, POLL_WAIT_S, opt.seconds,
           opt.warmup, opt.threads, cores);
    printf("targets: server+PostgreSQL < 100 %% of a core, report p99 <= 50 ms,"
           " submit->bound p99 <= 1000 ms, no 503\n");
    struct row rows[SWEEP_MAX];
    int failed = 0;
    for (int i = 0; i < opt.nsweep; i++) {
        if (run_size(opt.sweep[i], &rows[i]) != 0 || !rows[i].ok) {
            fprintf(stderr, "bench_fleet: the run at %d nodes failed\n", opt.sweep[i]);
            failed = 1;
        }
        if (rows[i].last_err[0])
            fprintf(stderr, "bench_fleet: %d nodes: last error: %s\n", opt.sweep[i],
                    rows[i].last_err);
        print_header();
        for (int k = 0; k <= i; k++)
            print_row(&rows[k]);
        const struct takeover *tk = &rows[i].tk;
        if (tk->done) {
            printf("take-over at %d nodes: the survivor led %.2f s after the kill and bound"
                   " again after %.2f s; %ld ends accepted, %ld lost; %ld jobs run on two nodes"
                   " at once, %ld bound again (%ld in the database)\n",
                   opt.sweep[i], tk->leader_s, tk->bind_s, tk->accepted, tk->lost, tk->dup_runs,
                   tk->rebinds, tk->db_rebinds);
            if (tk->lost || tk->dup_runs || tk->db_rebinds || !(tk->leader_s <= 2))
                failed = 1;
        }
    }
    free(submitted_at);
    free(bound_at);
    free(running_on);
    free(end_accepted);
    return failed;
}
