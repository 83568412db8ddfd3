/*
 * test_sched_fixtures.c - every scheduler fixture in tests/data/sched/: a
 * snapshot and the decisions and pending reasons expected (for the
 * fixture's own strategy), then the invariants for every strategy:
 * ts_sched_check passes, the same snapshot gives the same decisions, and a
 * cycle on the state the decisions produce stops nothing.
 */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "api/array.h"
#include "server/sched/sched.h"
#include "server/sched/sched_json.h"

static const char *strategies[] = {"binpack", "spread", "fgd"};
static int failures; /* fixtures that did not decide what they expect */

#define MISMATCH(...)                                                                              \
    do {                                                                                           \
        fprintf(stderr, "MISMATCH: " __VA_ARGS__);                                                 \
        fprintf(stderr, "\n");                                                                     \
        failures++;                                                                                \
        return;                                                                                    \
    } while (0)

static char *fixture_dir(void)
{
    const char *src = getenv("TS_SOURCE_DIR");
    static char path[4096];
    snprintf(path, sizeof(path), "%s/tests/data/sched", src ? src : ".");
    return path;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted .json names in the fixture folder; *n set. New array of new strings. */
static char **list_fixtures(size_t *n)
{
    DIR *d = opendir(fixture_dir());
    assert_non_null(d);
    char **v = NULL;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        char **grown = realloc(v, (*n + 1) * sizeof(char *));
        assert_non_null(grown);
        v = grown;
        v[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(v, *n, sizeof(char *), cmp_str);
    return v;
}

static json_t *load(const char *name)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", fixture_dir(), name);
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL)
        fail_msg("%s:%d: %s", name, je.line, je.text);
    return j;
}

static const char *job_name_of(const struct ts_sched_snapshot *s, const struct ts_sched_decision *d)
{
    return d->job_was_running ? s->running[d->job].name : s->pending[d->job].name;
}

static const char *pending_name(const struct ts_sched_snapshot *s,
                                const struct ts_sched_pending_reason *p)
{
    if (p->job >= 0)
        return s->pending[p->job].name;
    for (size_t k = 0; k < s->nrunning; k++)
        if (s->running[k].id == p->job_id)
            return s->running[k].name;
    return "";
}

static void dump(const char *name, const struct ts_sched_snapshot *s,
                 const struct ts_sched_result *r)
{
    json_t *j = ts_sched_result_to_json(s, r);
    char *txt = json_dumps(j, JSON_INDENT(2));
    fprintf(stderr, "%s: decided:\n%s\n", name, txt);
    free(txt);
    json_decref(j);
}

static void expect_decisions(const char *name, const struct ts_sched_snapshot *s,
                             const struct ts_sched_result *r, const json_t *exp)
{
    size_t n = json_array_size(exp);
    if (n != r->ndecisions) {
        dump(name, s, r);
        MISMATCH("%s: %zu decisions, expected %zu", name, r->ndecisions, n);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(exp, i);
        const struct ts_sched_decision *d = &r->decisions[i];
        const char *action = json_string_value(json_object_get(e, "action"));
        const char *job = json_string_value(json_object_get(e, "job"));
        const char *node = json_string_value(json_object_get(e, "node"));
        const char *code = json_string_value(json_object_get(e, "code"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        const json_t *gpus = json_object_get(e, "gpus");
        bool ok = action && strcmp(action, ts_sched_action_name(d->action)) == 0 && job &&
                  strcmp(job, job_name_of(s, d)) == 0;
        if (ok && node)
            ok = strcmp(node, s->nodes[d->node].name) == 0;
        if (ok && code)
            ok = strcmp(code, d->code) == 0;
        if (ok && msg)
            ok = strcmp(msg, d->message) == 0;
        if (ok && gpus) {
            ok = json_array_size(gpus) == d->nslots;
            for (size_t k = 0; ok && k < d->nslots; k++)
                ok = json_integer_value(json_array_get(gpus, k)) == s->gpus[d->slots[k].gpu].index;
        }
        if (!ok) {
            dump(name, s, r);
            char *want = json_dumps(e, 0);
            fprintf(stderr, "MISMATCH: %s: decision %zu is not %s\n", name, i, want);
            free(want);
            failures++;
            return;
        }
    }
}

static void expect_pending(const char *name, const struct ts_sched_snapshot *s,
                           const struct ts_sched_result *r, const json_t *exp)
{
    size_t n = json_array_size(exp);
    if (n != r->npending) {
        dump(name, s, r);
        MISMATCH("%s: %zu pending, expected %zu", name, r->npending, n);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(exp, i);
        const char *job = json_string_value(json_object_get(e, "job"));
        const char *code = json_string_value(json_object_get(e, "code"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        const json_t *pos = json_object_get(e, "position");
        const struct ts_sched_pending_reason *p = NULL;
        for (size_t k = 0; k < r->npending && p == NULL; k++)
            if (job && strcmp(job, pending_name(s, &r->pending[k])) == 0)
                p = &r->pending[k];
        bool ok = p != NULL && (!code || strcmp(code, p->code) == 0) &&
                  (!msg || strcmp(msg, p->message) == 0) &&
                  (!pos || json_integer_value(pos) == p->queue_position);
        if (!ok) {
            dump(name, s, r);
            char *want = json_dumps(e, 0);
            fprintf(stderr, "MISMATCH: %s: pending job is not %s\n", name, want);
            free(want);
            failures++;
            return;
        }
    }
}

static void expect_shares(const char *name, const struct ts_sched_snapshot *s,
                          const struct ts_sched_result *r, const json_t *exp)
{
    const char *proj;
    json_t *e;
    json_object_foreach((json_t *)exp, proj, e) {
        size_t p = 0;
        while (p < s->nprojects && strcmp(s->projects[p].name, proj) != 0)
            p++;
        assert_true(p < s->nprojects);
        const json_t *f = json_object_get(e, "fair_share"), *d = json_object_get(e, "deserved");
        if ((f && fabs(json_number_value(f) - r->shares[p].fair_share) > 1e-6) ||
            (d && fabs(json_number_value(d) - r->shares[p].deserved) > 1e-6)) {
            dump(name, s, r);
            MISMATCH("%s: project %s has fair share %g (deserved %g)", name, proj,
                     r->shares[p].fair_share, r->shares[p].deserved);
        }
    }
}

/* The invariants of one cycle, for any snapshot (also used on random ones). */
static void check_cycle(const char *name, const struct ts_sched_snapshot *s)
{
    struct ts_error err = {0};
    struct ts_sched_result *r = NULL, *r2 = NULL, *r3 = NULL;
    if (ts_sched_decide(s, &r, &err) != TS_OK)
        fail_msg("%s: %s", name, err.message);
    if (ts_sched_check(s, r, &err) != TS_OK) {
        dump(name, s, r);
        fail_msg("%s (%s): %s", name, s->config.strategy, err.message);
    }
    assert_int_equal(ts_sched_decide(s, &r2, &err), TS_OK);
    json_t *a = ts_sched_result_to_json(s, r), *b = ts_sched_result_to_json(s, r2);
    if (!json_equal(a, b))
        fail_msg("%s (%s): two cycles on one snapshot decided differently", name,
                 s->config.strategy);
    json_decref(a);
    json_decref(b);
    struct ts_arena *ar = ts_arena_new();
    struct ts_sched_snapshot next;
    assert_int_equal(ts_sched_apply(s, r, ar, &next, &err), TS_OK);
    assert_int_equal(ts_sched_decide(&next, &r3, &err), TS_OK);
    for (size_t i = 0; i < r3->ndecisions; i++)
        if (r3->decisions[i].action != TS_SCHED_BIND) {
            dump(name, s, r);
            dump("the next cycle", &next, r3);
            fail_msg("%s (%s): the next cycle stops job %lld: %s", name, s->config.strategy,
                     (long long)r3->decisions[i].job_id, r3->decisions[i].message);
        }
    ts_sched_result_free(r);
    ts_sched_result_free(r2);
    ts_sched_result_free(r3);
    ts_arena_free(ar);
}

static void every_fixture_decides_what_it_expects(void **state)
{
    (void)state;
    size_t n;
    char **names = list_fixtures(&n);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        json_t *j = load(names[i]);
        struct ts_arena *a = ts_arena_new();
        struct ts_sched_snapshot s;
        struct ts_error err = {0};
        if (ts_sched_snapshot_from_json(j, a, &s, &err) != TS_OK)
            fail_msg("%s: %s", names[i], err.message);
        struct ts_sched_result *r = NULL;
        if (ts_sched_decide(&s, &r, &err) != TS_OK)
            fail_msg("%s: %s", names[i], err.message);
        const json_t *exp = json_object_get(j, "expect");
        if (exp == NULL)
            fail_msg("%s: no \"expect\"", names[i]);
        if (json_object_get(exp, "decisions"))
            expect_decisions(names[i], &s, r, json_object_get(exp, "decisions"));
        if (json_object_get(exp, "pending"))
            expect_pending(names[i], &s, r, json_object_get(exp, "pending"));
        if (json_object_get(exp, "shares"))
            expect_shares(names[i], &s, r, json_object_get(exp, "shares"));
        ts_sched_result_free(r);
        ts_arena_free(a);
        json_decref(j);
        free(names[i]);
    }
    free(names);
    if (failures > 0)
        fail_msg("%d fixture expectations were not met", failures);
}

static void every_strategy_keeps_the_invariants_on_every_fixture(void **state)
{
    (void)state;
    size_t n;
    char **names = list_fixtures(&n);
    for (size_t i = 0; i < n; i++) {
        json_t *j = load(names[i]);
        struct ts_arena *a = ts_arena_new();
        struct ts_sched_snapshot s;
        struct ts_error err = {0};
        assert_int_equal(ts_sched_snapshot_from_json(j, a, &s, &err), TS_OK);
        for (size_t k = 0; k < 3; k++) {
            s.config.strategy = strategies[k];
            check_cycle(names[i], &s);
        }
        ts_arena_free(a);
        json_decref(j);
        free(names[i]);
    }
    free(names);
}

static void every_fixture_survives_a_round_trip(void **state)
{
    (void)state;
    size_t n;
    char **names = list_fixtures(&n);
    for (size_t i = 0; i < n; i++) {
        json_t *j = load(names[i]);
        struct ts_arena *a = ts_arena_new();
        struct ts_sched_snapshot s, s2;
        struct ts_error err = {0};
        assert_int_equal(ts_sched_snapshot_from_json(j, a, &s, &err), TS_OK);
        json_t *once = ts_sched_snapshot_to_json(&s);
        if (ts_sched_snapshot_from_json(once, a, &s2, &err) != TS_OK)
            fail_msg("%s: its own encoding is refused: %s", names[i], err.message);
        json_t *twice = ts_sched_snapshot_to_json(&s2);
        if (!json_equal(once, twice))
            fail_msg("%s: decoding its encoding changed it", names[i]);
        json_decref(once);
        json_decref(twice);
        ts_arena_free(a);
        json_decref(j);
        free(names[i]);
    }
    free(names);
}

/* Untrusted snapshots (tessera-sim reads files): each refused with the path
 * of what is wrong. */
static void a_bad_snapshot_is_refused_with_its_path(void **state)
{
    (void)state;
    static const struct {
        const char *json, *message;
    } bad[] = {
        {"{\"now\": 0, \"bogus\": 1}", "snapshot: unknown member \"bogus\""},
        {"{\"config\": {\"strategy\": 3}}", "config: \"strategy\" must be a string"},
        {"{\"config\": {\"nope\": 1}}", "config: unknown member \"nope\""},
        {"{\"departments\": {\"name\": \"d\"}}", "departments: must be an array"},
        {"{\"projects\": [{\"name\": \"p\", \"department\": \"nosuch\"}]}",
         "projects[0]: no department \"nosuch\""},
        {"{\"projects\": [{\"name\": \"p\", \"quota\": 1, \"limit\": \"x\"}]}",
         "projects[0]: \"limit\" must be a number"},
        {"{\"nodes\": [{\"name\": \"n\", \"gpus\": \"x\"}]}",
         "nodes[0]: \"gpus\" must be a count or an array"},
        {"{\"nodes\": [{\"name\": \"n\", \"collision\": \"fight\"}]}",
         "nodes[0]: \"collision\" must be wait, priority or swap"},
        {"{\"nodes\": [{\"name\": \"n\", \"gpus\": [{\"model\": \"A100\", \"memory_gib\": 40, "
         "\"color\": 1}]}]}",
         "nodes[0]: unknown member \"color\""},
        {"{\"nodes\": [{\"name\": \"n\", \"gpus\": 2000000}]}", "nodes: too many GPUs"},
        {"{\"projects\": [{\"name\": \"p\", \"quota\": 1}], \"nodes\": [{\"name\": \"n\", "
         "\"gpus\": 2}], \"running\": [{\"name\": \"j\", \"project\": \"q\", \"node\": \"n\", "
         "\"gpu\": 1, \"gpus\": [0]}]}",
         "running[0]: no project \"q\""},
        {"{\"projects\": [{\"name\": \"p\", \"quota\": 1}], \"nodes\": [{\"name\": \"n\", "
         "\"gpus\": 2}], \"running\": [{\"name\": \"j\", \"project\": \"p\", \"node\": \"m\", "
         "\"gpu\": {\"count\": 1}, \"gpus\": [0]}]}",
         "running[0]: no node \"m\""},
        {"{\"projects\": [{\"name\": \"p\", \"quota\": 1}], \"nodes\": [{\"name\": \"n\", "
         "\"gpus\": 2}], \"running\": [{\"name\": \"j\", \"project\": \"p\", \"node\": \"n\", "
         "\"gpu\": {\"count\": 1}, \"gpus\": [5]}]}",
         "running[0]: node \"n\" has no GPU 5"},
        {"{\"projects\": [{\"name\": \"p\", \"quota\": 1}], \"nodes\": [{\"name\": \"n\", "
         "\"gpus\": 2}], \"running\": [{\"name\": \"j\", \"project\": \"p\", \"node\": \"n\", "
         "\"gpu\": {\"count\": 1}, \"gpus\": [\"a\"]}]}",
         "running[0]: \"gpus\" must list device indexes"},
        {"{\"projects\": [{\"name\": \"p\", \"quota\": 1}], \"nodes\": [{\"name\": \"n\", "
         "\"gpus\": 2}], \"pending\": [{\"name\": \"j\", \"project\": \"p\", \"gpu\": {\"count\": "
         "1}, \"suspended_on\": \"m\"}]}",
         "pending[0]: no node \"m\""},
        {"{\"projects\": [{\"name\": \"p\", \"quota\": 1}], \"nodes\": [{\"name\": \"n\", "
         "\"gpus\": 2}], \"pending\": [{\"name\": \"j\", \"project\": \"p\", \"gpu\": 1, "
         "\"extra\": 1}]}",
         "pending[0]: unknown member \"extra\""},
        {"{\"shapes\": [{\"count\": 1, \"portion\": 1, \"gpu_model\": [1]}]}",
         "shapes[0]: \"gpu_model\" must be an array of strings"},
        {"{\"shapes\": [{\"count\": 1, \"portion\": 1, \"what\": 2}]}",
         "shapes[0]: unknown member \"what\""},
        {"{\"projects\": [{\"name\": \"p\", \"quota\": 1}], \"nodes\": [{\"name\": \"n\", "
         "\"gpus\": 2, \"gpu_model\": \"A100\"}], \"running\": [{\"name\": \"j\", \"project\": "
         "\"p\", \"node\": \"n\", \"gpu\": {\"count\": 1}, \"gpus\": "
         "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}]}",
         "running[0]: node \"n\" has no GPU 2"},
        {"{\"projects\": [{\"name\": \"p\", \"quota\": 1}], \"nodes\": [{\"name\": \"n\", "
         "\"gpus\": 2}], \"pending\": [{\"name\": \"j\", \"project\": \"p\", \"gpu\": 1}]}",
         "pending[0].gpu: must be an object"},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(bad); i++) {
        json_error_t je;
        json_t *j = json_loads(bad[i].json, 0, &je);
        assert_non_null(j);
        struct ts_arena *a = ts_arena_new();
        struct ts_sched_snapshot s;
        struct ts_error err = {0};
        if (ts_sched_snapshot_from_json(j, a, &s, &err) == TS_OK)
            fail_msg("taken: %s", bad[i].json);
        if (strcmp(err.message, bad[i].message) != 0)
            fail_msg("%s: \"%s\", not \"%s\"", bad[i].json, err.message, bad[i].message);
        ts_arena_free(a);
        json_decref(j);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_fixture_decides_what_it_expects),
        cmocka_unit_test(every_strategy_keeps_the_invariants_on_every_fixture),
        cmocka_unit_test(every_fixture_survives_a_round_trip),
        cmocka_unit_test(a_bad_snapshot_is_refused_with_its_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
