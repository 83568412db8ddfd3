/*
 * sched_json.h - snapshots and results as JSON, for fixtures
 * (tests/data/sched/NAME.json), tessera-sim and debugging.
 *
 * The JSON names things (projects, nodes, jobs) by name; the decoder turns
 * the names into the snapshot's indexes. GPU and host memory are in GiB
 * (`memory_gib`, fractional allowed). The format is described in
 * server/sched/README.md. Unknown members are errors (a typo in a fixture
 * must not pass silently); the top-level members "expect" and "description"
 * are left to the caller.
 */
#ifndef TS_SERVER_SCHED_SCHED_JSON_H
#define TS_SERVER_SCHED_SCHED_JSON_H

#include <jansson.h>

#include "api/arena.h"
#include "api/err.h"
#include "server/sched/sched.h"

/* Decode `in` into *out; everything *out points to is allocated from `a`
 * (borrowed until the arena is freed); `in` is only borrowed during the call. */
enum ts_err ts_sched_snapshot_from_json(const json_t *in, struct ts_arena *a,
                                        struct ts_sched_snapshot *out, struct ts_error *err);

/* The snapshot back as JSON in the same format (new reference, NULL when out
 * of memory): tessera-sim and the tests write snapshots with it. */
json_t *ts_sched_snapshot_to_json(const struct ts_sched_snapshot *s);

/* A result as JSON, names taken from the snapshot it was decided on (new
 * reference, NULL when out of memory). */
json_t *ts_sched_result_to_json(const struct ts_sched_snapshot *s, const struct ts_sched_result *r);

/* "bind", "evict", "suspend". */
const char *ts_sched_action_name(enum ts_sched_action a);

#endif /* TS_SERVER_SCHED_SCHED_JSON_H */
