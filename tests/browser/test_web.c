/*
 * test_web.c - the dashboard's files as the server holds them
 * (server/handlers/web.c): only names built in are found, each has the
 * Content-Type of its extension and an ETag of its bytes, and
 * If-None-Match is read as RFC 9110 says.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/handlers/web.h"

static void the_page_its_scripts_and_uplot_are_built_in(void **state)
{
    const struct ts_embedded_file *f = ts_web_find("index.html", false);
    assert_non_null(f);
    assert_non_null(strstr(f->data, "ui/app.js"));
    assert_int_equal(f->data[f->len], '\0');
    assert_non_null(ts_web_find("app.js", false));
    assert_non_null(ts_web_find("style.css", false));
    assert_non_null(ts_web_find("uPlot.iife.min.js", true));
    assert_non_null(ts_web_find("uPlot.LICENSE", true));
}

static void only_known_names_are_found(void **state)
{
    assert_null(ts_web_find("README.md", false)); /* not served */
    assert_null(ts_web_find("uPlot.iife.min.js", false));
    assert_null(ts_web_find("app.js", true));
    assert_null(ts_web_find("../server/server.c", false));
    assert_null(ts_web_find("..", false));
    assert_null(ts_web_find("", false));
    assert_null(ts_web_find(NULL, false));
    assert_null(ts_web_find("APP.JS", false));
}

static void content_types_follow_the_extension(void **state)
{
    assert_string_equal(ts_web_content_type("index.html"), "text/html; charset=utf-8");
    assert_string_equal(ts_web_content_type("app.js"), "text/javascript; charset=utf-8");
    assert_string_equal(ts_web_content_type("style.css"), "text/css; charset=utf-8");
    assert_string_equal(ts_web_content_type("favicon.svg"), "image/svg+xml");
    assert_string_equal(ts_web_content_type("uPlot.LICENSE"), "text/plain; charset=utf-8");
    assert_string_equal(ts_web_content_type("data.bin"), "application/octet-stream");
    assert_string_equal(ts_web_content_type("js"), "application/octet-stream");
}

static void the_etag_is_a_quoted_hash_of_the_bytes(void **state)
{
    struct ts_embedded_file a = {"a.js", "abc", 3}, b = {"b.js", "abd", 3}, c = {"c.css", "abc", 3};
    char ea[19], eb[19], ec[19];
    ts_web_etag(&a, ea);
    ts_web_etag(&b, eb);
    ts_web_etag(&c, ec);
    assert_int_equal(strlen(ea), 18);
    assert_int_equal(ea[0], '"');
    assert_int_equal(ea[17], '"');
    assert_string_not_equal(ea, eb);
    assert_string_equal(ea, ec); /* the bytes, not the name */
    /* every built-in file has a distinct one */
    char e1[19], e2[19];
    ts_web_etag(ts_web_find("app.js", false), e1);
    ts_web_etag(ts_web_find("index.html", false), e2);
    assert_string_not_equal(e1, e2);
}

static void if_none_match_lists_weak_tags_and_star(void **state)
{
    const char *tag = "\"0123456789abcdef\"";
    assert_true(ts_web_etag_matches("\"0123456789abcdef\"", tag));
    assert_true(ts_web_etag_matches("W/\"0123456789abcdef\"", tag));
    assert_true(ts_web_etag_matches("\"x\", \"0123456789abcdef\"", tag));
    assert_true(ts_web_etag_matches(" \"x\" ,W/\"0123456789abcdef\" ", tag));
    assert_true(ts_web_etag_matches("*", tag));
    assert_false(ts_web_etag_matches("\"0123456789abcde\"", tag));
    assert_false(ts_web_etag_matches("\"0123456789abcdef0\"", tag));
    assert_false(ts_web_etag_matches("0123456789abcdef", tag));
    assert_false(ts_web_etag_matches("", tag));
    assert_false(ts_web_etag_matches(",,", tag));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_page_its_scripts_and_uplot_are_built_in),
        cmocka_unit_test(only_known_names_are_found),
        cmocka_unit_test(content_types_follow_the_extension),
        cmocka_unit_test(the_etag_is_a_quoted_hash_of_the_bytes),
        cmocka_unit_test(if_none_match_lists_weak_tags_and_star),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
