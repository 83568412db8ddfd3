/*
 * test_authcache.c - the token cache: hits copy the entry (projects and
 * an agent's nodes), entries expire, clear forgets everything, a zero TTL
 * means no cache.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "server/authcache.h"

static const char h1[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
static const char h2[] = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

static struct ts_token_auth member(void)
{
    static int64_t ids[] = {3, 7};
    struct ts_token_auth t = {.id = 42, .role = TS_ROLE_MEMBER, .project_ids = ids, .nprojects = 2};
    strcpy(t.name, "alice");
    return t;
}

static void a_cached_token_comes_back_with_its_projects(void **state)
{
    struct ts_authcache *c = ts_authcache_new(60000);
    struct ts_arena *a = ts_arena_new();
    struct ts_token_auth t = member(), got;
    ts_authcache_put(c, h1, &t);
    assert_true(ts_authcache_get(c, h1, a, &got));
    assert_int_equal(got.id, 42);
    assert_string_equal(got.name, "alice");
    assert_int_equal(got.nprojects, 2);
    assert_int_equal(got.project_ids[1], 7);
    assert_ptr_not_equal(got.project_ids, t.project_ids);
    assert_false(ts_authcache_get(c, h2, a, &got));
    ts_arena_free(a);
    ts_authcache_free(c);
}

static void a_cached_agent_token_keeps_its_nodes(void **state)
{
    struct ts_authcache *c = ts_authcache_new(60000);
    struct ts_arena *a = ts_arena_new();
    struct ts_token_auth t = {.id = 5, .role = TS_ROLE_AGENT, .nodes = "gpu-*,n1"}, got;
    ts_authcache_put(c, h1, &t);
    assert_true(ts_authcache_get(c, h1, a, &got));
    assert_string_equal(got.nodes, "gpu-*,n1");
    assert_ptr_not_equal(got.nodes, t.nodes);
    struct ts_token_auth any = {.id = 6, .role = TS_ROLE_AGENT};
    ts_authcache_put(c, h2, &any);
    assert_true(ts_authcache_get(c, h2, a, &got));
    assert_null(got.nodes); /* any node stays any node */
    ts_arena_free(a);
    ts_authcache_free(c);
}

static void entries_expire_after_the_ttl(void **state)
{
    struct ts_authcache *c = ts_authcache_new(30);
    struct ts_arena *a = ts_arena_new();
    struct ts_token_auth t = member(), got;
    ts_authcache_put(c, h1, &t);
    assert_true(ts_authcache_get(c, h1, a, &got));
    struct timespec ts = {0, 60 * 1000000L};
    nanosleep(&ts, NULL);
    assert_false(ts_authcache_get(c, h1, a, &got));
    ts_arena_free(a);
    ts_authcache_free(c);
}

static void clear_forgets_every_token(void **state)
{
    struct ts_authcache *c = ts_authcache_new(60000);
    struct ts_arena *a = ts_arena_new();
    struct ts_token_auth t = member(), got;
    ts_authcache_put(c, h1, &t);
    ts_authcache_put(c, h2, &t);
    ts_authcache_clear(c);
    assert_false(ts_authcache_get(c, h1, a, &got));
    assert_false(ts_authcache_get(c, h2, a, &got));
    ts_arena_free(a);
    ts_authcache_free(c);
}

static void a_zero_ttl_means_no_cache(void **state)
{
    struct ts_arena *a = ts_arena_new();
    struct ts_token_auth t = member(), got;
    struct ts_authcache *c = ts_authcache_new(0);
    assert_null(c);
    ts_authcache_put(c, h1, &t);
    assert_false(ts_authcache_get(c, h1, a, &got));
    ts_arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_cached_token_comes_back_with_its_projects),
        cmocka_unit_test(a_cached_agent_token_keeps_its_nodes),
        cmocka_unit_test(entries_expire_after_the_ttl),
        cmocka_unit_test(clear_forgets_every_token),
        cmocka_unit_test(a_zero_ttl_means_no_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
