/*
 * cmd_submit.c - tessera submit: build a JobRequest from the command line,
 * send it with an Idempotency-Key (one random key per invocation, the same
 * on every retry, so a retried submit never makes two jobs), and optionally
 * wait for the job to end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "api/array.h"
#include "api/cli/cli.h"
#include "api/cli/out.h"
#include "api/cli/req.h"
#include "api/clock.h"
#include "api/units.h"
#include "api/wire.h"

#define MAX_PAIRS 1024

static const struct ts_opt submit_opts[] = {
    TS_OPT_PROJECT,
    {"kind", 0, "KIND", "train (default), interactive or inference", false},
    {"gpus", 'g', "N", "whole GPUs", false},
    {"gpu-portion-request", 0, "F", "a fraction of a GPU, 0.001 <= F <= 1", false},
    {"gpu-portion-limit", 0, "F", "burst up to this fraction (not below the request)", false},
    {"gpu-memory-request", 0, "SIZE", "GPU memory with its unit, such as 20GiB or 20G", false},
    {"gpu-memory-limit", 0, "SIZE", "burst up to this much GPU memory, such as 40GiB", false},
    {"gpu-devices", 0, "N", "fractional requests: that much of each of N GPUs of one node", false},
    {"cpu", 0, "N", "CPU cores", false},
    {"memory", 0, "SIZE", "host memory with its unit, such as 32GiB or 32G", false},
    {"priority", 0, "N", "0 to 1000 (default: the kind's)", false},
    {"preemptible", 0, NULL, "may be preempted (default for train)", false},
    {"non-preemptible", 0, NULL, "may not be preempted (default for interactive, inference)",
     false},
    {"env", 'e', "K=V", "an environment variable of the job", true},
    {"gpu-model", 0, "MODEL", "run only on this GPU model", true},
    {"selector", 0, "K=V", "run only on nodes with this label", true},
    {"working-dir", 0, "DIR", "the job's working folder (absolute)", false},
    {"max-runtime", 0, "DURATION", "end the job after this long, such as 8h", false},
    {"idle-swap-after", 0, "DURATION",
     "idle this long on its GPUs, its GPU memory moves to host memory while it runs, such as "
     "10m; 0 = never (default: the server's, 5m, for interactive jobs; never for others)",
     false},
    {"grace-period", 0, "DURATION",
     "time between SIGTERM and SIGKILL when the job is stopped or preempted, up to 24h, such "
     "as 2m (default: the server's, 30s)",
     false},
    {"no-swap", 0, NULL,
     "never move this job's GPU memory to host memory: never suspended, and never placed where "
     "it can burst on a node whose collisions swap",
     false},
    {"parsable", 0, NULL, "print only the job's id", false},
    {"wait", 0, NULL, "wait until the job ends; exit 6 unless it succeeded", false},
    {"idempotency-key", 0, "KEY", "the Idempotency-Key (default: a new random one)", false},
    TS_OPT_END,
};

/* A new random key: 32 hex digits. */
static int random_key(char *buf, size_t len)
{
    unsigned char raw[16];
    size_t got = 0;
    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof(raw) && 2 * i + 2 < len; i++)
        snprintf(buf + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

/* --env/--selector K=V... into a new object at o[member]; -1 after a usage
 * error. */
static int pairs(struct ts_cli *cli, const struct ts_args *a, const char *opt, json_t *o,
                 const char *member)
{
    const char *v[MAX_PAIRS];
    size_t n = ts_args_all(a, opt, v, MAX_PAIRS);
    if (n == 0)
        return 0;
    if (n > MAX_PAIRS) {
        ts_cli_usage_error(cli, "too many --%s: %zu (at most %d)", opt, n, MAX_PAIRS);
        return -1;
    }
    json_t *m = json_object();
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(v[i], '=');
        if (eq == NULL || eq == v[i]) {
            json_decref(m);
            ts_cli_usage_error(cli, "--%s must be KEY=VALUE: \"%s\"", opt, v[i]);
            return -1;
        }
        char key[512];
        snprintf(key, sizeof(key), "%.*s", (int)(eq - v[i]), v[i]);
        json_object_set_new(m, key, json_string(eq + 1));
    }
    json_object_set_new(o, member, m);
    return 0;
}

/* The "gpu" member; -1 after a usage error. */
static int gpu_request(struct ts_cli *cli, const struct ts_args *a, json_t *body)
{
    struct ts_error err;
    ts_error_clear(&err);
    bool count = ts_args_has(a, "gpus"), portion = ts_args_has(a, "gpu-portion-request"),
         memory = ts_args_has(a, "gpu-memory-request");
    if (count + portion + memory > 1) {
        ts_cli_usage_error(cli, "give one of -g, --gpu-portion-request and --gpu-memory-request");
        return -1;
    }
    if (ts_args_has(a, "gpu-portion-limit") && !portion) {
        ts_cli_usage_error(cli, "--gpu-portion-limit needs --gpu-portion-request");
        return -1;
    }
    if (ts_args_has(a, "gpu-memory-limit") && !memory) {
        ts_cli_usage_error(cli, "--gpu-memory-limit needs --gpu-memory-request");
        return -1;
    }
    if (ts_args_has(a, "gpu-devices") && !portion && !memory) {
        ts_cli_usage_error(cli, "--gpu-devices needs --gpu-portion-request or "
                                "--gpu-memory-request (-g asks for whole GPUs)");
        return -1;
    }
    if (!count && !portion && !memory)
        return 0;
    long long n = 0, devices = 0;
    double f = 0, flim = 0;
    int64_t bytes = 0;
    if (ts_args_int(a, "gpus", 1, TS_GPU_DEVICES_MAX, &n, &err) != 0 ||
        ts_args_int(a, "gpu-devices", 1, TS_GPU_DEVICES_MAX, &devices, &err) != 0 ||
        ts_args_double(a, "gpu-portion-request", TS_GPU_PORTION_MIN, 1, &f, &err) != 0 ||
        ts_args_double(a, "gpu-portion-limit", TS_GPU_PORTION_MIN, 1, &flim, &err) != 0 ||
        ts_args_bytes(a, "gpu-memory-request", &bytes, &err) != 0 ||
        ts_args_bytes(a, "gpu-memory-limit", &bytes, &err) != 0) {
        ts_cli_usage_error(cli, "%s", err.message);
        return -1;
    }
    json_t *g = json_object();
    if (count)
        json_object_set_new(g, "count", json_integer(n));
    if (portion) {
        json_object_set_new(g, "portion", json_real(f));
        if (ts_args_has(a, "gpu-portion-limit"))
            json_object_set_new(g, "portion_limit", json_real(flim));
    }
    if (memory) {
        json_object_set_new(g, "memory", json_string(ts_args_get(a, "gpu-memory-request")));
        if (ts_args_has(a, "gpu-memory-limit"))
            json_object_set_new(g, "memory_limit", json_string(ts_args_get(a, "gpu-memory-limit")));
    }
    if (devices)
        json_object_set_new(g, "devices", json_integer(devices));
    json_object_set_new(body, "gpu", g);
    return 0;
}

/* What submit's options say, checked. */
struct job_opts {
    const char *name, *project, *kind, *runtime, *idle, *grace;
    long long priority; /* -1: not given */
    double cpu;         /* -1: not given */
};

/* The job's name, project, kind and preemptibility; 0, or -1 after a usage
 * error. */
static int check_identity(struct ts_cli *cli, const struct ts_args *a, struct job_opts *o)
{
    o->name = a->pos[0];
    o->project = ts_cli_project(cli, a);
    if (!ts_name_valid(o->name)) {
        ts_cli_usage_error(cli, "job name must be lower-case letters, digits and '-': \"%s\"",
                           o->name);
        return -1;
    }
    if (o->project == NULL) {
        ts_cli_usage_error(cli, "no project: give -p PROJECT or set a default "
                                "(tessera config set project NAME)");
        return -1;
    }
    o->kind = ts_args_get(a, "kind");
    enum ts_job_kind k;
    if (o->kind && ts_job_kind_parse(o->kind, &k) != 0) {
        ts_cli_usage_error(cli, "--kind must be train, interactive or inference: \"%s\"", o->kind);
        return -1;
    }
    if (ts_args_has(a, "preemptible") && ts_args_has(a, "non-preemptible")) {
        ts_cli_usage_error(cli, "give --preemptible or --non-preemptible, not both");
        return -1;
    }
    return 0;
}

/* Priority, CPU, memory and the durations; 0, or -1 after a usage error. */
static int check_amounts(struct ts_cli *cli, const struct ts_args *a, struct job_opts *o)
{
    struct ts_error err;
    ts_error_clear(&err);
    o->priority = -1;
    o->cpu = -1;
    int64_t bytes = 0, seconds = 0;
    o->runtime = ts_args_get(a, "max-runtime");
    if (ts_args_int(a, "priority", 0, 1000, &o->priority, &err) != 0 ||
        ts_args_double(a, "cpu", 0, TS_JOB_CPU_MAX, &o->cpu, &err) != 0 ||
        ts_args_bytes(a, "memory", &bytes, &err) != 0) {
        ts_cli_usage_error(cli, "%s", err.message);
        return -1;
    }
    if (o->runtime && ts_duration_parse(o->runtime, &seconds) != 0) {
        ts_cli_usage_error(cli, "--max-runtime must be a duration such as 90s, 8h or 1h30m: \"%s\"",
                           o->runtime);
        return -1;
    }
    o->idle = ts_args_get(a, "idle-swap-after");
    int64_t idle_s = 0;
    if (o->idle && (ts_duration_parse(o->idle, &idle_s) != 0 || idle_s > TS_JOB_IDLE_SWAP_MAX)) {
        ts_cli_usage_error(cli,
                           "--idle-swap-after must be a duration up to 7d such as 30s, 10m "
                           "or 1h, or 0 for never: \"%s\"",
                           o->idle);
        return -1;
    }
    o->grace = ts_args_get(a, "grace-period");
    int64_t grace_s = 0;
    if (o->grace && (ts_duration_parse(o->grace, &grace_s) != 0 || grace_s > TS_JOB_GRACE_MAX)) {
        ts_cli_usage_error(
            cli, "--grace-period must be a duration up to 24h such as 30s or 2m: \"%s\"", o->grace);
        return -1;
    }
    return 0;
}

/* The request's members of o and of the flags without a value (new). */
static json_t *body_of(const struct ts_args *a, const struct job_opts *o)
{
    json_t *body = json_object(), *cmd = json_array();
    json_object_set_new(body, "name", json_string(o->name));
    json_object_set_new(body, "project", json_string(o->project));
    for (int i = 0; i < a->nrest; i++)
        json_array_append_new(cmd, json_string(a->rest[i]));
    json_object_set_new(body, "command", cmd);
    if (o->kind)
        json_object_set_new(body, "kind", json_string(o->kind));
    if (o->priority >= 0)
        json_object_set_new(body, "priority", json_integer(o->priority));
    if (ts_args_has(a, "preemptible") || ts_args_has(a, "non-preemptible"))
        json_object_set_new(body, "preemptible", json_boolean(ts_args_has(a, "preemptible")));
    if (o->cpu >= 0)
        json_object_set_new(body, "cpu", json_real(o->cpu));
    if (ts_args_has(a, "memory"))
        json_object_set_new(body, "memory", json_string(ts_args_get(a, "memory")));
    if (ts_args_has(a, "working-dir"))
        json_object_set_new(body, "working_dir", json_string(ts_args_get(a, "working-dir")));
    if (o->runtime)
        json_object_set_new(body, "max_runtime", json_string(o->runtime));
    if (o->idle)
        json_object_set_new(body, "idle_swap_after", json_string(o->idle));
    if (o->grace)
        json_object_set_new(body, "grace_period", json_string(o->grace));
    if (ts_args_has(a, "no-swap"))
        json_object_set_new(body, "swap", json_false());
    return body;
}

/* --gpu-model into body's "gpu_model"; 0, or -1 after a usage error. */
static int gpu_models(struct ts_cli *cli, const struct ts_args *a, json_t *body)
{
    const char *models[TS_JOB_GPU_MODELS_MAX + 1];
    size_t nmodels = ts_args_all(a, "gpu-model", models, TS_JOB_GPU_MODELS_MAX + 1);
    if (nmodels > TS_JOB_GPU_MODELS_MAX) {
        ts_cli_usage_error(cli, "too many --gpu-model (at most %d)", TS_JOB_GPU_MODELS_MAX);
        return -1;
    }
    if (nmodels > 0) {
        json_t *m = json_array();
        for (size_t i = 0; i < nmodels; i++)
            json_array_append_new(m, json_string(models[i]));
        json_object_set_new(body, "gpu_model", m);
    }
    return 0;
}

/* The JobRequest of the command line (new), or NULL after a usage error. */
static json_t *job_request(struct ts_cli *cli, const struct ts_args *a)
{
    struct job_opts o;
    if (check_identity(cli, a, &o) != 0 || check_amounts(cli, a, &o) != 0)
        return NULL;
    json_t *body = body_of(a, &o);
    if (gpu_models(cli, a, body) != 0 || gpu_request(cli, a, body) != 0 ||
        pairs(cli, a, "env", body, "env") != 0 ||
        pairs(cli, a, "selector", body, "node_selector") != 0) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* Poll the job until it ends; report its state changes on stderr. */
static int wait_for(struct ts_cli *cli, long long id)
{
    char path[64], last[32] = "";
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld", id);
    long delay = 250;
    for (;;) {
        struct ts_response r;
        int rc = ts_req(cli, "GET", path, NULL, NULL, 0, &r);
        if (rc != TS_EXIT_OK)
            return rc;
        const char *state = json_string_value(json_object_get(r.json, "state"));
        enum ts_job_state s;
        if (state == NULL || ts_job_state_parse(state, &s) != 0) {
            fprintf(stderr, "error: the server sent a job without a known state\n");
            ts_response_free(&r);
            return TS_EXIT_SERVER;
        }
        if (strcmp(state, last) != 0) {
            char buf[256];
            const char *node = json_string_value(json_object_get(r.json, "node"));
            const json_t *reason = json_object_get(r.json, "pending_reason");
            if (node)
                fprintf(stderr, "job %lld: %s on %s\n", id, state, node);
            else if (json_is_object(reason))
                fprintf(stderr, "job %lld: %s (%s)\n", id, state,
                        ts_out_member(reason, "code", buf, sizeof(buf)));
            else
                fprintf(stderr, "job %lld: %s\n", id, state);
            snprintf(last, sizeof(last), "%s", state);
        }
        if (ts_job_state_finished(s)) {
            const json_t *code = json_object_get(r.json, "exit_code");
            if (json_is_integer(code))
                fprintf(stderr, "job %lld %s with exit code %" JSON_INTEGER_FORMAT "\n", id, state,
                        json_integer_value(code));
            ts_response_free(&r);
            return s == TS_JOB_SUCCEEDED ? TS_EXIT_OK : TS_EXIT_JOB_FAILED;
        }
        ts_response_free(&r);
        ts_sleep_ms(delay);
        if (delay < 2000)
            delay *= 2;
    }
}

static int cmd_submit(struct ts_cli *cli, const struct ts_args *a)
{
    json_t *body = job_request(cli, a);
    if (body == NULL)
        return TS_EXIT_USAGE;
    char key[300], header[320];
    const char *given = ts_args_get(a, "idempotency-key");
    if (given) {
        if (given[0] == '\0' || strlen(given) > 255 || strpbrk(given, "\r\n")) {
            json_decref(body);
            return ts_cli_usage_error(cli, "--idempotency-key must be 1 to 255 characters");
        }
        snprintf(key, sizeof(key), "%s", given);
    } else if (random_key(key, sizeof(key)) != 0) {
        json_decref(body);
        fprintf(stderr, "error: could not make an idempotency key: %s\n", strerror(errno));
        return TS_EXIT_SERVER;
    }
    snprintf(header, sizeof(header), "Idempotency-Key: %s", key);
    const char *headers[] = {header, NULL};
    struct ts_response r;
    int rc = ts_req(cli, "POST", "/api/v1/jobs", body, headers, TS_REQ_RETRY, &r);
    json_decref(body);
    if (rc != TS_EXIT_OK)
        return rc;
    long long id = json_integer_value(json_object_get(r.json, "id"));
    char state[32], name[80], project[80];
    ts_out_member(r.json, "state", state, sizeof(state));
    ts_out_member(r.json, "name", name, sizeof(name));
    ts_out_member(r.json, "project", project, sizeof(project));
    if (ts_args_has(a, "parsable"))
        printf("%lld\n", id);
    else if (r.status == 200 && given) /* without --idempotency-key a replay is our own retry */
        printf("job %lld (%s) in project %s was already submitted with this idempotency key: "
               "%s\n",
               id, name, project, state);
    else
        printf("job %lld (%s) submitted to project %s: %s\n", id, name, project, state);
    ts_response_free(&r);
    fflush(stdout);
    if (ts_args_has(a, "wait"))
        return wait_for(cli, id);
    return TS_EXIT_OK;
}

const struct ts_cmd ts_cmds_submit[] = {
    {"submit",
     "NAME [-p PROJECT] [--kind KIND] [-g N | --gpu-portion-request F [--gpu-portion-limit F] | "
     "--gpu-memory-request SIZE [--gpu-memory-limit SIZE]] [--gpu-devices N] [--cpu N] "
     "[--memory SIZE] [--priority N] [--preemptible | --non-preemptible] [--env K=V]... "
     "[--gpu-model M]... [--selector K=V]... [--working-dir DIR] [--max-runtime D] "
     "[--idle-swap-after D] [--grace-period D] [--no-swap] [--parsable] [--wait] -- CMD "
     "[ARGS...]",
     "submit a job",
     "Each invocation sends one random Idempotency-Key and reuses it when it retries\n"
     "(no answer or 5xx, up to 4 tries), so a retried submit never makes two jobs.\n"
     "Example: tessera submit train-1 -p vision --gpu-portion-request 0.5 -- python train.py",
     submit_opts, 1, 1, true, false, cmd_submit},
};
const size_t ts_cmds_submit_count = TS_ARRAY_LEN(ts_cmds_submit);
