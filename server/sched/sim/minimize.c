/*
 * minimize.c - `tessera-sim minimize SNAPSHOT.json [--strategy S]`: the
 * smallest snapshot, found by deleting pieces of the given one, on which the
 * stability invariant still fails (the cycle after the decisions' cycle stops
 * a job). Prints it in the fixture format, ready to become a fixture in
 * tests/data/sched/ once named and given its expectations.
 *
 * Delta debugging over the JSON tree: every array element and every object
 * member is deleted in turn and the deletion kept when the snapshot still
 * parses and still fails; rounds repeat until one deletes nothing. Deleting
 * a node whose jobs still reference it does not parse, so jobs go first.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/sched/sched_json.h"
#include "server/sched/sim/sim.h"

/* Whether every running job holds as many GPUs as it asks for: deleting a
 * job's request or its GPUs alone would leave a snapshot no server sends. */
static bool consistent(const struct ts_sched_snapshot *s)
{
    for (size_t i = 0; i < s->nrunning; i++) {
        const struct ts_sched_request *r = &s->running[i].request;
        size_t want = r->kind == TS_SCHED_GPU_NONE    ? 0
                      : r->kind == TS_SCHED_GPU_COUNT ? (size_t)r->count
                                                      : (size_t)(r->devices > 0 ? r->devices : 1);
        if (s->running[i].nslots != want)
            return false;
    }
    return true;
}

/* Whether the cycle after the cycle on `j` stops a job. */
static bool unstable(const json_t *j, const char *strategy)
{
    struct ts_arena *a = ts_arena_new();
    if (a == NULL)
        return false;
    struct ts_sched_snapshot s, nx;
    struct ts_error err = {0};
    struct ts_sched_result *r = NULL, *r2 = NULL;
    bool bad = false;
    if (ts_sched_snapshot_from_json(j, a, &s, &err) != TS_OK || !consistent(&s))
        goto out;
    if (strategy != NULL)
        s.config.strategy = strategy;
    if (ts_sched_decide(&s, &r, &err) != TS_OK || ts_sched_apply(&s, r, a, &nx, &err) != TS_OK ||
        ts_sched_decide(&nx, &r2, &err) != TS_OK)
        goto out;
    for (size_t i = 0; i < r2->ndecisions && !bad; i++)
        bad = r2->decisions[i].action != TS_SCHED_BIND;
out:
    ts_sched_result_free(r);
    ts_sched_result_free(r2);
    ts_arena_free(a);
    return bad;
}

/* One round of deletions under `node`; returns how many were kept. */
static int shrink(json_t *root, json_t *node, const char *strategy)
{
    int kept = 0;
    if (json_is_array(node)) {
        for (size_t i = json_array_size(node); i-- > 0;) {
            json_t *el = json_incref(json_array_get(node, i));
            json_array_remove(node, i);
            if (unstable(root, strategy)) {
                json_decref(el);
                kept++;
            } else {
                json_array_insert_new(node, i, el);
            }
        }
        for (size_t i = 0; i < json_array_size(node); i++)
            kept += shrink(root, json_array_get(node, i), strategy);
    } else if (json_is_object(node)) {
        size_t n = json_object_size(node), k = 0;
        char **keys = calloc(n ? n : 1, sizeof(char *));
        if (keys == NULL)
            return kept;
        const char *key;
        json_t *v;
        json_object_foreach(node, key, v) {
            keys[k++] = strdup(key);
        }
        for (size_t i = 0; i < k; i++) {
            if (keys[i] == NULL)
                continue;
            v = json_incref(json_object_get(node, keys[i]));
            json_object_del(node, keys[i]);
            if (unstable(root, strategy)) {
                json_decref(v);
                kept++;
            } else {
                json_object_set_new(node, keys[i], v);
                kept += shrink(root, v, strategy);
            }
        }
        for (size_t i = 0; i < k; i++)
            free(keys[i]);
        free(keys);
    }
    return kept;
}

int sim_minimize_main(int argc, char **argv)
{
    const char *path = NULL, *strategy = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--strategy") == 0 && i + 1 < argc)
            strategy = argv[++i];
        else
            path = argv[i];
    }
    if (path == NULL) {
        fprintf(stderr, "tessera-sim minimize: a snapshot file is needed\n");
        return 2;
    }
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL) {
        fprintf(stderr, "tessera-sim minimize: %s:%d: %s\n", path, je.line, je.text);
        return 1;
    }
    if (!unstable(j, strategy)) {
        fprintf(stderr, "tessera-sim minimize: the cycle after the cycle on %s stops nothing\n",
                path);
        json_decref(j);
        return 1;
    }
    int rounds = 0;
    while (shrink(j, j, strategy) > 0)
        rounds++;
    json_dumpf(j, stdout, JSON_INDENT(2));
    printf("\n");
    fprintf(stderr, "tessera-sim minimize: %d rounds\n", rounds + 1);
    json_decref(j);
    return 0;
}
