/*
 * test_arena.c - the arena: allocations are zeroed and aligned, and a reset
 * arena hands its kept memory out again, zeroed, and gives back what the
 * round after it left unused.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/arena.h"
#include "api/array.h"

static void allocations_are_zeroed_and_aligned(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    assert_non_null(a);
    for (size_t n = 1; n < 20000; n = n * 3 + 1) {
        unsigned char *p = ts_arena_alloc(a, n);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(p[i], 0);
        memset(p, 0xab, n);
    }
    assert_string_equal(ts_arena_printf(a, "%d-%s", 7, "x"), "7-x");
    ts_arena_free(a);
}

/* The same allocations after a reset land in the memory of the round before
 * (small and large blocks), and come back zeroed. */
static void a_reset_arena_reuses_its_memory_zeroed(void **state)
{
    (void)state;
    static const size_t sizes[] = {100, 3000, 5000, 70000, 200, 1 << 20, 40};
    enum { N = TS_ARRAY_LEN(sizes) };
    struct ts_arena *a = ts_arena_new();
    unsigned char *first[N];
    for (size_t i = 0; i < N; i++) {
        first[i] = ts_arena_alloc(a, sizes[i]);
        assert_non_null(first[i]);
        memset(first[i], 0xcd, sizes[i]);
    }
    ts_arena_reset(a);
    for (size_t i = 0; i < N; i++) {
        unsigned char *p = ts_arena_alloc(a, sizes[i]);
        assert_non_null(p);
        bool kept = false;
        for (size_t k = 0; k < N; k++)
            kept |= p >= first[k] - 16 * 1024 && p < first[k] + sizes[k] + 16 * 1024;
        assert_true(kept);
        for (size_t k = 0; k < sizes[i]; k++)
            assert_int_equal(p[k], 0);
    }
    /* the large block of 1 MiB is the one handed out again */
    ts_arena_reset(a);
    assert_ptr_equal(ts_arena_alloc(a, 1 << 20), first[5]);
    ts_arena_free(a);
}

/* A round that uses less lets the next reset give the rest back; the arena
 * still serves any size afterwards, and NULL is a no-op. */
static void what_a_round_leaves_unused_is_freed(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    for (int round = 0; round < 50; round++) {
        size_t n = round % 2 ? 64 : (size_t)(round + 1) * 10000;
        for (int i = 0; i < 20; i++) {
            unsigned char *p = ts_arena_alloc(a, n);
            assert_non_null(p);
            assert_int_equal(p[n - 1], 0);
            p[n - 1] = 1;
        }
        ts_arena_reset(a);
    }
    ts_arena_reset(NULL);
    ts_arena_free(a); /* LeakSanitizer checks nothing kept is lost */
}

/* ts_arena_alloc_uninit hands out aligned room of its own, small and large,
 * not zeroed; what it held is zeroed when ts_arena_alloc hands it out after
 * a reset. */
static void an_unzeroed_allocation_has_room_of_its_own(void **state)
{
    (void)state;
    struct ts_arena *a = ts_arena_new();
    enum { N = 6 };
    static const size_t sizes[N] = {1, 24, 4000, 5000, 100000, 17};
    unsigned char *p[N];
    for (size_t i = 0; i < N; i++) {
        p[i] = ts_arena_alloc_uninit(a, sizes[i]);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % 16, 0);
        memset(p[i], (int)(0x10 + i), sizes[i]);
    }
    for (size_t i = 0; i < N; i++)
        for (size_t k = 0; k < sizes[i]; k++)
            assert_int_equal(p[i][k], 0x10 + i);
    ts_arena_reset(a);
    for (size_t i = 0; i < N; i++) {
        unsigned char *z = ts_arena_alloc(a, sizes[i]);
        assert_non_null(z);
        for (size_t k = 0; k < sizes[i]; k++)
            assert_int_equal(z[k], 0);
    }
    ts_arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allocations_are_zeroed_and_aligned),
        cmocka_unit_test(a_reset_arena_reuses_its_memory_zeroed),
        cmocka_unit_test(what_a_round_leaves_unused_is_freed),
        cmocka_unit_test(an_unzeroed_allocation_has_room_of_its_own),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
