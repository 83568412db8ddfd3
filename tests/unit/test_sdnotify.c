/*
 * test_sdnotify.c - api/sdnotify.h: a message reaches the socket that
 * $NOTIFY_SOCKET names (a path or an abstract name), the variable is gone
 * from the environment after init (children must not report as the
 * service), and nothing is sent without one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/sdnotify.h"

/* a datagram socket bound at NAME ("@x": abstract); returns its fd */
static int listener(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    assert_true(len < sizeof(sa.sun_path));
    memcpy(sa.sun_path, name, len);
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    if (name[0] == '@')
        sa.sun_path[0] = '\0';
    else
        unlink(name);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, salen), 0);
    return fd;
}

static void received(int fd, const char *want)
{
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
    assert_true(n >= 0);
    buf[n] = '\0';
    assert_string_equal(buf, want);
}

static void ready_reaches_a_socket_named_by_a_path(void **state)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/ts-sdnotify-%d", (int)getpid());
    int fd = listener(path);
    setenv("NOTIFY_SOCKET", path, 1);
    ts_sdnotify_init();
    assert_null(getenv("NOTIFY_SOCKET"));
    assert_int_equal(ts_sdnotify("READY=1\nSTATUS=listening"), 1);
    received(fd, "READY=1\nSTATUS=listening");
    assert_int_equal(ts_sdnotify("STOPPING=1"), 1);
    received(fd, "STOPPING=1");
    close(fd);
    unlink(path);
}

static void ready_reaches_an_abstract_socket(void **state)
{
    char name[64];
    snprintf(name, sizeof(name), "@ts-sdnotify-%d", (int)getpid());
    int fd = listener(name);
    setenv("NOTIFY_SOCKET", name, 1);
    ts_sdnotify_init();
    assert_int_equal(ts_sdnotify("READY=1"), 1);
    received(fd, "READY=1");
    close(fd);
}

static void nothing_is_sent_without_a_service_manager(void **state)
{
    unsetenv("NOTIFY_SOCKET");
    ts_sdnotify_init();
    assert_int_equal(ts_sdnotify("READY=1"), 0);
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    ts_sdnotify_init();
    assert_int_equal(ts_sdnotify("READY=1"), 0);
    assert_null(getenv("NOTIFY_SOCKET"));
}

static void a_socket_gone_is_an_error_not_a_crash(void **state)
{
    setenv("NOTIFY_SOCKET", "/tmp/ts-sdnotify-nobody-listens-here", 1);
    ts_sdnotify_init();
    assert_true(ts_sdnotify("READY=1") < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ready_reaches_a_socket_named_by_a_path),
        cmocka_unit_test(ready_reaches_an_abstract_socket),
        cmocka_unit_test(nothing_is_sent_without_a_service_manager),
        cmocka_unit_test(a_socket_gone_is_an_error_not_a_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
