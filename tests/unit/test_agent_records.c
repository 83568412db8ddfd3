/*
 * test_agent_records.c - the agent's own files as typed records
 * (agent/daemon/records.c: status.json, job.json, stop.json, launch.json
 * with its cgroup and sandbox; events.c: events.log, a report's event a line): what is written
 * reads back the same, in the text the agent always wrote; a damaged file
 * is refused with a message naming the file and the member; the agent
 * adopting a job folder does with a damaged file what it always did (takes
 * it as absent, and for events.log skips the damaged line); and the
 * supervisor refuses to start a job whose cgroup or sandbox it cannot
 * read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/daemon/ajob.h"
#include "agent/daemon/events.h"
#include "agent/daemon/proc.h"
#include "agent/daemon/records.h"
#include "api/array.h"
#include "api/files.h"

struct fixture {
    char dir[64];
    char path[PATH_MAX];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/ts-records-XXXXXX");
    if (mkdtemp(f->dir) == NULL) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    ts_files_remove_tree(f->dir);
    free(f);
    return 0;
}

static const char *file(struct fixture *f, const char *name)
{
    snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, name);
    return f->path;
}

static void put(struct fixture *f, const char *name, const char *text)
{
    assert_int_equal(ts_files_write_atomic(file(f, name), text, strlen(text), 0600), 0);
}

static void assert_text(struct fixture *f, const char *name, const char *want)
{
    char *got = ts_files_read(file(f, name), 1 << 16, NULL);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

/* ---- round trips -------------------------------------------------------- */

static void records_read_back_what_was_written_in_the_text_always_written(void **state)
{
    struct fixture *f = *state;
    struct ts_error err = {0};

    struct ts_rec_status st = {.state = "exited",
                               .has_exit_code = true,
                               .exit_code = 3,
                               .finished_at = 1700000000},
                         st2;
    assert_int_equal(ts_rec_status_write(file(f, "status.json"), &st), 0);
    assert_text(f, "status.json",
                "{\"state\":\"exited\",\"exit_code\":3,\"finished_at\":1700000000}");
    assert_int_equal(ts_rec_status_read(file(f, "status.json"), &st2, &err), TS_OK);
    assert_string_equal(st2.state, "exited");
    assert_true(st2.has_exit_code);
    assert_int_equal(st2.exit_code, 3);
    assert_int_equal(st2.signal, 0);
    assert_int_equal(st2.finished_at, 1700000000);

    struct ts_rec_status sig = {.state = "exited", .signal = 9, .finished_at = 5};
    assert_int_equal(ts_rec_status_write(file(f, "status.json"), &sig), 0);
    assert_text(f, "status.json", "{\"state\":\"exited\",\"signal\":9,\"finished_at\":5}");
    assert_int_equal(ts_rec_status_read(file(f, "status.json"), &st2, &err), TS_OK);
    assert_false(st2.has_exit_code);
    assert_int_equal(st2.signal, 9);

    struct ts_rec_status failed = {
        .state = "failed_to_start", .message = "no such user \"ml\"", .finished_at = 6};
    assert_int_equal(ts_rec_status_write(file(f, "status.json"), &failed), 0);
    assert_text(f, "status.json",
                "{\"state\":\"failed_to_start\",\"message\":\"no such user \\\"ml\\\"\","
                "\"finished_at\":6}");
    assert_int_equal(ts_rec_status_read(file(f, "status.json"), &st2, &err), TS_OK);
    assert_string_equal(st2.message, "no such user \"ml\"");

    struct ts_rec_pids p = {.pid = 4242,
                            .start_ticks = 99,
                            .supervisor_pid = 4241,
                            .supervisor_start_ticks = 98,
                            .started_at = 7},
                       p2;
    assert_int_equal(ts_rec_pids_write(file(f, "job.json"), &p), 0);
    assert_text(f, "job.json",
                "{\"pid\":4242,\"start_ticks\":99,\"supervisor_pid\":4241,"
                "\"supervisor_start_ticks\":98,\"started_at\":7}");
    p.init_pid = 4243;
    p.init_start_ticks = 100;
    assert_int_equal(ts_rec_pids_write(file(f, "job.json"), &p), 0);
    assert_int_equal(ts_rec_pids_read(file(f, "job.json"), &p2, &err), TS_OK);
    assert_memory_equal(&p, &p2, sizeof(p));

    struct ts_rec_stop s = {.deadline_ms = 1700000000123, .killed = true}, s2;
    assert_int_equal(ts_rec_stop_write(file(f, "stop.json"), &s), 0);
    assert_text(f, "stop.json", "{\"deadline_ms\":1700000000123,\"killed\":true}");
    assert_int_equal(ts_rec_stop_read(file(f, "stop.json"), &s2, &err), TS_OK);
    assert_int_equal(s2.deadline_ms, s.deadline_ms);
    assert_true(s2.killed);

    /* a member a newer agent wrote is skipped */
    put(f, "stop.json", "{\"deadline_ms\": 5, \"killed\": false, \"signal_sent\": 15}");
    assert_int_equal(ts_rec_stop_read(file(f, "stop.json"), &s2, &err), TS_OK);
    assert_int_equal(s2.deadline_ms, 5);
}

/* ---- damaged files ------------------------------------------------------ */

struct bad {
    const char *file, *text;
    enum ts_err code;
    const char *says; /* in the message */
};

static enum ts_err read_any(const char *name, const char *path, struct ts_error *err)
{
    struct ts_rec_status st;
    struct ts_rec_pids p;
    struct ts_rec_stop s;
    if (strcmp(name, "status.json") == 0)
        return ts_rec_status_read(path, &st, err);
    if (strcmp(name, "job.json") == 0)
        return ts_rec_pids_read(path, &p, err);
    return ts_rec_stop_read(path, &s, err);
}

static void a_damaged_record_is_refused_naming_the_file_and_member(void **state)
{
    struct fixture *f = *state;
    static const struct bad cases[] = {
        {"status.json", "{\"state\": \"exi", TS_ERR_MALFORMED_JSON, "status.json is damaged"},
        {"status.json", "", TS_ERR_MALFORMED_JSON, "status.json is damaged"},
        {"status.json", "[1]", TS_ERR_WRONG_TYPE, "status.json is damaged: not a JSON object"},
        {"status.json", "{\"exit_code\": 1}", TS_ERR_MISSING_FIELD,
         "status.json: state is required"},
        {"status.json", "{\"state\": \"gone\"}", TS_ERR_INVALID_VALUE,
         "status.json: state must be exited or failed_to_start: \"gone\""},
        {"status.json", "{\"state\": \"exited\", \"exit_code\": \"1\"}", TS_ERR_WRONG_TYPE,
         "status.json: exit_code must be an integer"},
        {"status.json", "{\"state\": \"exited\", \"exit_code\": 300}", TS_ERR_INVALID_VALUE,
         "status.json: exit_code must be between -255 and 255: 300"},
        {"status.json", "{\"state\": \"exited\", \"state\": \"failed_to_start\"}",
         TS_ERR_MALFORMED_JSON, "status.json is damaged: duplicate object key"},
        {"job.json", "{\"start_ticks\": 5}", TS_ERR_MISSING_FIELD, "job.json: pid is required"},
        {"job.json", "{\"pid\": 0}", TS_ERR_INVALID_VALUE, "job.json: pid must be between 1"},
        {"job.json", "{\"pid\": 12, \"init_pid\": 1.5}", TS_ERR_WRONG_TYPE,
         "job.json: init_pid must be an integer"},
        {"stop.json", "{\"deadline_ms\": 5, \"killed\": 1}", TS_ERR_WRONG_TYPE,
         "stop.json: killed must be true or false"},
        {"stop.json", "{\"killed\": true}", TS_ERR_MISSING_FIELD,
         "stop.json: deadline_ms is required"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(cases); i++) {
        struct ts_error err = {0};
        put(f, cases[i].file, cases[i].text);
        enum ts_err e = read_any(cases[i].file, file(f, cases[i].file), &err);
        if (e != cases[i].code || strstr(err.message, cases[i].says) == NULL)
            fail_msg("%s %s: expected %s saying \"%s\", got %s: %s", cases[i].file, cases[i].text,
                     ts_err_code(cases[i].code), cases[i].says, ts_err_code(e), err.message);
    }
    struct ts_error err = {0};
    struct ts_rec_stop s;
    assert_int_equal(ts_rec_stop_read(file(f, "none.json"), &s, &err), TS_ERR_NOT_FOUND);
}

/* A launch with a command and an environment, as the agent writes it. */
static struct ts_rec_launch *launch_new(void)
{
    static char *argv[] = {"x", NULL}, *env[] = {NULL};
    struct ts_rec_launch *l = calloc(1, sizeof(*l));
    assert_non_null(l);
    l->argv = argv;
    l->env = env;
    return l;
}

/* Member key of the launch.json that l is written as (new). */
static json_t *encode_part(struct fixture *f, const char *key, const struct ts_rec_launch *l)
{
    assert_int_equal(ts_rec_launch_write(file(f, "launch.json"), l), 0);
    json_t *all = ts_files_read_json(file(f, "launch.json"));
    assert_non_null(all);
    json_t *part = json_incref(json_object_get(all, key));
    json_decref(all);
    assert_non_null(part);
    return part;
}

/* A launch.json with a command, an environment and part (borrowed) as its
 * key, read into out (whose strings from an earlier read are freed). */
static enum ts_err decode_part(struct fixture *f, const char *key, const json_t *part,
                               struct ts_rec_launch *out, struct ts_error *err)
{
    ts_rec_launch_free(out);
    json_t *all = json_pack("{s:[s], s:[], s:O}", "argv", "x", "env", key, part);
    assert_non_null(all);
    assert_int_equal(ts_files_write_json(file(f, "launch.json"), all, 0600), 0);
    json_decref(all);
    return ts_rec_launch_read(file(f, "launch.json"), out, err);
}

/* ---- launch.json's cgroup ----------------------------------------------- */

static void a_cgroup_reads_back_as_launch_json_always_held_it(void **state)
{
    struct fixture *f = *state;
    struct ts_rec_launch *lin = launch_new(), *lout = calloc(1, sizeof(*lout));
    assert_non_null(lout);
    lin->has_cgroup = true;
    struct ts_cgroup_spec *in = &lin->cgroup, *out = &lout->cgroup;
    in->version = 2;
    snprintf(in->path, sizeof(in->path), "tessera-0123456789abcdef/12-1");
    in->cpu = 1.5;
    in->memory_bytes = (int64_t)20 << 30;
    in->pids_max = 4096;
    snprintf(in->devices[0], TS_CGROUP_RULE_MAX, "c 1:3 rwm");
    snprintf(in->devices[1], TS_CGROUP_RULE_MAX, "c 136:* rwm");
    in->ndevices = 2;
    json_t *v = encode_part(f, "cgroup", lin);
    assert_non_null(v);
    char *text = json_dumps(v, JSON_COMPACT);
    assert_string_equal(text, "{\"version\":2,\"path\":\"tessera-0123456789abcdef/12-1\","
                              "\"cpu\":1.5,\"memory_bytes\":21474836480,\"pids_max\":4096,"
                              "\"devices\":[\"c 1:3 rwm\",\"c 136:* rwm\"]}");
    free(text);
    struct ts_error err = {0};
    assert_int_equal(decode_part(f, "cgroup", v, lout, &err), TS_OK);
    assert_int_equal(out->version, 2);
    assert_string_equal(out->path, in->path);
    assert_true(out->cpu == 1.5);
    assert_int_equal(out->memory_bytes, in->memory_bytes);
    assert_int_equal(out->pids_max, 4096);
    assert_int_equal(out->ndevices, 2);
    assert_string_equal(out->devices[1], "c 136:* rwm");
    json_decref(v);

    /* an integer cpu, as jansson may read a whole number back */
    v = json_loads("{\"version\": 1, \"path\": \"b/1-0\", \"cpu\": 2}", 0, NULL);
    assert_int_equal(decode_part(f, "cgroup", v, lout, &err), TS_OK);
    assert_true(out->cpu == 2.0);
    assert_int_equal(out->ndevices, 0);
    json_decref(v);

    static const struct {
        const char *text, *says;
    } bad[] = {
        {"[]", "launch.json.cgroup is damaged: not a JSON object"},
        {"{\"path\": \"b/1-0\"}", "launch.json.cgroup: version is required"},
        {"{\"version\": 3, \"path\": \"b/1-0\"}",
         "launch.json.cgroup: version must be between 0 and 2: 3"},
        {"{\"version\": 1, \"path\": \"b/1-0\", \"cpu\": \"2\"}",
         "launch.json.cgroup: cpu must be a number"},
        {"{\"version\": 1, \"path\": \"b/1-0\", \"devices\": \"c 1:3 rwm\"}",
         "launch.json.cgroup: devices must be an array"},
        {"{\"version\": 1, \"path\": \"b/1-0\", \"devices\": [\"c 1:3 rwm\", 5]}",
         "launch.json.cgroup: devices[1] must be a text of at most 31 bytes"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        v = json_loads(bad[i].text, 0, NULL);
        assert_non_null(v);
        enum ts_err e = decode_part(f, "cgroup", v, lout, &err);
        if (e == TS_OK || strstr(err.message, bad[i].says) == NULL)
            fail_msg("%s: expected \"%s\", got %s: %s", bad[i].text, bad[i].says, ts_err_code(e),
                     err.message);
        json_decref(v);
    }
    ts_rec_launch_free(lout);
    free(lin);
    free(lout);
}

/* ---- launch.json -------------------------------------------------------- */

static void launch_json_reads_back_what_the_agent_wrote(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"python", "train.py", "--lr=0.1", NULL}, *env[] = {"PATH=/bin", "A=1", NULL};
    struct ts_rec_launch *l = calloc(1, sizeof(*l)), *back = calloc(1, sizeof(*back));
    assert_non_null(l);
    assert_non_null(back);
    l->argv = argv;
    l->env = env;
    snprintf(l->working_dir, sizeof(l->working_dir), "/home/ml");
    assert_int_equal(ts_rec_launch_write(file(f, "launch.json"), l), 0);
    assert_text(f, "launch.json",
                "{\"argv\":[\"python\",\"train.py\",\"--lr=0.1\"],\"env\":[\"PATH=/bin\",\"A=1\"],"
                "\"working_dir\":\"/home/ml\"}");
    struct ts_error err = {0};
    assert_int_equal(ts_rec_launch_read(file(f, "launch.json"), back, &err), TS_OK);
    assert_string_equal(back->argv[2], "--lr=0.1");
    assert_null(back->argv[3]);
    assert_string_equal(back->env[1], "A=1");
    assert_null(back->env[2]);
    assert_string_equal(back->working_dir, "/home/ml");
    assert_false(back->has_sandbox);
    assert_false(back->has_cgroup);
    ts_rec_launch_free(back);

    /* a bad argv entry: refused naming it, nothing kept */
    put(f, "launch.json", "{\"argv\": [\"ls\", 5], \"env\": []}");
    assert_int_equal(ts_rec_launch_read(file(f, "launch.json"), back, &err), TS_ERR_INVALID_VALUE);
    assert_non_null(strstr(err.message, "launch.json: argv[1] must be a string"));
    assert_null(back->argv);
    put(f, "launch.json", "{\"argv\": [\"ls\"]}");
    assert_int_equal(ts_rec_launch_read(file(f, "launch.json"), back, &err), TS_ERR_MISSING_FIELD);
    assert_non_null(strstr(err.message, "launch.json: env is required"));
    free(l);
    free(back);
}

/* ---- launch.json's sandbox ---------------------------------------------- */

static void a_sandbox_reads_back_as_launch_json_always_held_it(void **state)
{
    struct fixture *f = *state;
    struct ts_rec_launch *lin = launch_new(), *lout = calloc(1, sizeof(*lout));
    assert_non_null(lout);
    lin->has_sandbox = true;
    struct ts_sandbox_spec *in = &lin->sandbox, *out = &lout->sandbox;
    in->uid = 65534;
    in->gid = 65534;
    snprintf(in->user, sizeof(in->user), "nobody");
    snprintf(in->data_dir, sizeof(in->data_dir), "/var/lib/tessera");
    snprintf(in->job_dir, sizeof(in->job_dir), "/var/lib/tessera/jobs/12-1");
    snprintf(in->checkpoint_dir, sizeof(in->checkpoint_dir), "/ckpt/vision/12");
    snprintf(in->token_file, sizeof(in->token_file), "/etc/tessera/agent.token");
    in->has_driver = true;
    snprintf(in->driver.real, TS_SANDBOX_PATH_MAX, "/usr/lib/libcuda.so.1");
    snprintf(in->driver.shim, TS_SANDBOX_PATH_MAX, "/usr/lib/tessera/libtessera-cuda.so");
    snprintf(in->driver.overlay_lib, TS_SANDBOX_PATH_MAX, "/usr/lib/tessera/ov.so");
    snprintf(in->driver.overlay[0], TS_SANDBOX_PATH_MAX, "/usr/lib/libcuda.so");
    in->driver.noverlay = 1;
    in->gpus[0] = 1;
    in->gpus[1] = 3;
    in->ngpus = 2;
    snprintf(in->mounts[0].path, sizeof(in->mounts[0].path), "/datasets");
    in->mounts[0].rw = false;
    in->nmounts = 1;
    snprintf(in->network, sizeof(in->network), "none");
    json_t *v = encode_part(f, "sandbox", lin);
    assert_non_null(v);
    char *text = json_dumps(v, JSON_COMPACT);
    assert_string_equal(
        text, "{\"uid\":65534,\"gid\":65534,\"user\":\"nobody\",\"data_dir\":\"/var/lib/tessera\","
              "\"job_dir\":\"/var/lib/tessera/jobs/12-1\",\"checkpoint_dir\":\"/ckpt/vision/12\","
              "\"token_file\":\"/etc/tessera/agent.token\",\"driver\":{\"real\":"
              "\"/usr/lib/libcuda.so.1\",\"shim\":\"/usr/lib/tessera/libtessera-cuda.so\","
              "\"overlay_lib\":\"/usr/lib/tessera/ov.so\",\"overlay\":[\"/usr/lib/libcuda.so\"]},"
              "\"gpus\":[1,3],\"mounts\":[{\"path\":\"/datasets\",\"rw\":false}],"
              "\"network\":\"none\"}");
    free(text);
    struct ts_error err = {0};
    assert_int_equal(decode_part(f, "sandbox", v, lout, &err), TS_OK);
    assert_memory_equal(in, out, sizeof(*in));
    json_decref(v);

    static const struct {
        const char *text, *says;
    } bad[] = {
        {"{\"gid\": 1}", "launch.json.sandbox: uid is required"},
        {"{\"uid\": -1, \"gid\": 1}", "launch.json.sandbox: uid must be between 0 and"},
        {"{\"uid\": 1, \"gid\": 1, \"gpus\": [0, 64]}",
         "launch.json.sandbox: gpus[1] must be an integer between 0 and 63"},
        {"{\"uid\": 1, \"gid\": 1, \"mounts\": [{\"rw\": true}]}",
         "launch.json.sandbox.mounts[0]: path is required"},
        {"{\"uid\": 1, \"gid\": 1, \"mounts\": [{\"path\": \"/d\", \"rw\": \"yes\"}]}",
         "launch.json.sandbox.mounts[0]: rw must be true or false"},
        {"{\"uid\": 1, \"gid\": 1, \"driver\": {\"real\": \"/a\", \"shim\": \"/b\"}}",
         "launch.json.sandbox.driver: overlay_lib is required"},
        {"{\"uid\": 1, \"gid\": 1, \"driver\": 5}",
         "launch.json.sandbox.driver is damaged: not a JSON object"},
        {"{\"uid\": 1, \"gid\": 1, \"network\": \"bridge\"}",
         "launch.json.sandbox: network must be host or none: \"bridge\""},
        {"{\"uid\": 1, \"gid\": 1, \"job_dir\": 7}",
         "launch.json.sandbox: job_dir must be a string"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        v = json_loads(bad[i].text, 0, NULL);
        assert_non_null(v);
        enum ts_err e = decode_part(f, "sandbox", v, lout, &err);
        if (e == TS_OK || strstr(err.message, bad[i].says) == NULL)
            fail_msg("%s: expected \"%s\", got %s: %s", bad[i].text, bad[i].says, ts_err_code(e),
                     err.message);
        json_decref(v);
    }
    ts_rec_launch_free(lout);
    free(lin);
    free(lout);
}

/* The supervisor (in a child: it sets its signals) on DIR/job. */
static int supervise(struct fixture *f)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/job", f->dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(ts_supervisor_main(dir));
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void a_damaged_cgroup_or_sandbox_keeps_the_job_from_starting(void **state)
{
    struct fixture *f = *state;
    char dir[PATH_MAX], launch[PATH_MAX + 256];
    snprintf(dir, sizeof(dir), "%s/job", f->dir);
    assert_int_equal(ts_files_mkdirs(dir, 0700), 0);
    /* what the old supervisor ran: no sandbox, so no init to put in it */
    snprintf(launch, sizeof(launch),
             "{\"argv\": [\"/bin/sh\", \"-c\", \"echo ran > ran\"], \"env\": [], "
             "\"working_dir\": \"%s\", \"cgroup\": {\"version\": \"2\", \"path\": \"x/1-0\"}}",
             dir);
    put(f, "job/launch.json", launch);
    assert_int_equal(supervise(f), 0);
    struct ts_rec_status st;
    struct ts_error err = {0};
    assert_int_equal(ts_rec_status_read(file(f, "job/status.json"), &st, &err), TS_OK);
    assert_string_equal(st.state, "failed_to_start");
    assert_non_null(strstr(st.message, "/job/launch.json.cgroup: version must be an integer"));
    assert_false(ts_files_exists(file(f, "job/ran")));
    assert_false(ts_files_exists(file(f, "job/job.json")));

    /* a sandbox whose uid is not a number: the old supervisor read it as
     * 0 and ran the job as root */
    unlink(file(f, "job/status.json"));
    snprintf(launch, sizeof(launch),
             "{\"argv\": [\"/bin/sh\", \"-c\", \"echo ran > ran\"], \"env\": [], "
             "\"working_dir\": \"%s\", \"sandbox\": {\"uid\": \"65534\", \"gid\": 65534}}",
             dir);
    put(f, "job/launch.json", launch);
    assert_int_equal(supervise(f), 0);
    assert_int_equal(ts_rec_status_read(file(f, "job/status.json"), &st, &err), TS_OK);
    assert_string_equal(st.state, "failed_to_start");
    assert_non_null(strstr(st.message, "/job/launch.json.sandbox: uid must be an integer"));
    assert_false(ts_files_exists(file(f, "job/ran")));
}

/* ---- what the agent does with them --------------------------------------- */

/* DIR/job: a job folder as the agent leaves it, running as this process. */
static const char *job_folder(struct fixture *f)
{
    static char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/job", f->dir);
    assert_int_equal(ts_files_mkdirs(dir, 0700), 0);
    struct ts_desired_job spec = {.id = 12, .attempt = 1, .grace_seconds = -1};
    json_t *v = ts_wire_desired_job_encode(&spec);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/spec.json", dir);
    assert_int_equal(ts_files_write_json(path, v, 0600), 0);
    json_decref(v);
    struct ts_proc_stat me = {0};
    assert_int_equal(ts_proc_stat(getpid(), &me), 0);
    struct ts_rec_pids p = {.pid = getpid(),
                            .start_ticks = (int64_t)me.start_ticks,
                            .supervisor_pid = getpid(),
                            .supervisor_start_ticks = (int64_t)me.start_ticks};
    snprintf(path, sizeof(path), "%s/job.json", dir);
    assert_int_equal(ts_rec_pids_write(path, &p), 0);
    return dir;
}

static void adoption_takes_a_damaged_record_as_absent_as_it_always_did(void **state)
{
    struct fixture *f = *state;
    const char *dir = job_folder(f);

    /* job.json and no status: running */
    struct ts_ajob *j = ts_ajob_load(dir);
    assert_non_null(j);
    assert_int_equal(j->phase, TS_AJOB_RUNNING);
    assert_int_equal(j->pid, getpid());
    assert_false(j->stopping);
    ts_ajob_free(j);

    /* a status.json cut short (and a damaged stop.json): still running, not
     * stopping, the pids as job.json says */
    put(f, "job/status.json", "{\"state\":\"exited\",\"exit_co");
    put(f, "job/stop.json", "{\"deadline_ms\": \"soon\"}");
    j = ts_ajob_load(dir);
    assert_non_null(j);
    assert_int_equal(j->phase, TS_AJOB_RUNNING);
    assert_false(j->stopping);
    assert_int_equal(j->damage_said, 1 | 4); /* status.json and stop.json, said */
    ts_ajob_free(j);

    /* a whole one: over, with its exit code; a whole stop.json: stopping */
    put(f, "job/status.json", "{\"state\":\"exited\",\"exit_code\":7,\"finished_at\":1}");
    put(f, "job/stop.json", "{\"deadline_ms\": 42, \"killed\": true}");
    j = ts_ajob_load(dir);
    assert_non_null(j);
    assert_int_equal(j->phase, TS_AJOB_EXITED);
    assert_true(j->has_exit_code);
    assert_int_equal(j->exit_code, 7);
    assert_true(j->stopping);
    assert_true(j->killed);
    assert_int_equal(j->stop_deadline_ms, 42);
    ts_ajob_free(j);

    /* launch.json's cgroup: the group it kills on a stop; a damaged one
     * is taken as none */
    put(f, "job/launch.json",
        "{\"argv\": [\"true\"], \"env\": [], \"cgroup\": {\"version\": 1, \"path\": \"b/12-1\", "
        "\"devices\": [\"c 1:3 rwm\"]}}");
    j = ts_ajob_load(dir);
    assert_non_null(j);
    assert_non_null(j->cgroup);
    assert_string_equal(j->cgroup->path, "b/12-1");
    assert_int_equal(j->cgroup->ndevices, 1);
    ts_ajob_free(j);
    put(f, "job/launch.json",
        "{\"argv\": [\"true\"], \"env\": [], \"cgroup\": {\"version\": \"1\"}}");
    j = ts_ajob_load(dir);
    assert_non_null(j);
    assert_null(j->cgroup);
    ts_ajob_free(j);

    /* a damaged job.json: not known to have started, as before */
    unlink(file(f, "job/status.json"));
    put(f, "job/job.json", "{\"pid\": -3}");
    j = ts_ajob_load(dir);
    assert_non_null(j);
    assert_int_equal(j->phase, TS_AJOB_STARTING);
    assert_int_equal(j->pid, 0);
    ts_ajob_free(j);
}

static void events_log_lines_are_report_events_and_a_damaged_one_is_skipped(void **state)
{
    struct fixture *f = *state;
    char jobs[PATH_MAX];
    snprintf(jobs, sizeof(jobs), "%s/jobs/5-0", f->dir);
    assert_int_equal(ts_files_mkdirs(jobs, 0700), 0);
    struct ts_events *ev = ts_events_new(f->dir);
    assert_non_null(ev);
    ts_events_add(ev, 5, 0, "suspended", "suspended: %d GiB to host swap", 3);
    ts_events_add(ev, 5, 0, "resumed", "resumed");
    ts_events_free(ev);
    assert_text(
        f, "jobs/5-0/events.log",
        "{\"id\":5,\"attempt\":0,\"seq\":1,\"type\":\"suspended\","
        "\"message\":\"suspended: 3 GiB to host swap\"}\n"
        "{\"id\":5,\"attempt\":0,\"seq\":2,\"type\":\"resumed\",\"message\":\"resumed\"}\n");

    /* a torn line and one of a bad type between two good ones */
    char *text = ts_files_read(file(f, "jobs/5-0/events.log"), 1 << 16, NULL);
    assert_non_null(text);
    char *second = strchr(text, '\n') + 1;
    char damaged[2048];
    snprintf(damaged, sizeof(damaged),
             "%.*s{\"id\":5,\"attempt\":0,\"se\n"
             "{\"id\":5,\"attempt\":0,\"seq\":7,\"type\":\"Bad Type\",\"message\":\"x\"}\n%s",
             (int)(second - text), text, second);
    free(text);
    put(f, "jobs/5-0/events.log", damaged);

    ev = ts_events_new(f->dir);
    ts_events_load(ev, 5, 0);
    struct ts_arena *a = ts_arena_new();
    struct ts_report_event *out = NULL;
    assert_int_equal(ts_events_pending(ev, a, 100, &out), 2);
    assert_int_equal(out[0].seq, 1);
    assert_string_equal(out[0].message, "suspended: 3 GiB to host swap");
    assert_int_equal(out[1].seq, 2);
    assert_string_equal(out[1].type, "resumed");
    /* numbering goes on after the highest good seq */
    ts_events_add(ev, 5, 0, "resumed", "again");
    assert_int_equal(ts_events_pending(ev, a, 100, &out), 3);
    assert_int_equal(out[2].seq, 3);
    ts_events_acked(ev, out, 2);
    assert_int_equal(ts_events_pending(ev, a, 100, &out), 1);
    assert_int_equal(out[0].seq, 3);
    ts_arena_free(a);
    ts_events_free(ev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            records_read_back_what_was_written_in_the_text_always_written, setup, teardown),
        cmocka_unit_test_setup_teardown(a_damaged_record_is_refused_naming_the_file_and_member,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(launch_json_reads_back_what_the_agent_wrote, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_cgroup_reads_back_as_launch_json_always_held_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_sandbox_reads_back_as_launch_json_always_held_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_damaged_cgroup_or_sandbox_keeps_the_job_from_starting,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(adoption_takes_a_damaged_record_as_absent_as_it_always_did,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            events_log_lines_are_report_events_and_a_damaged_one_is_skipped, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
