/*
 * test_network.c - a job's network, as a hostile member would try it (issue
 * 14): a real server, two real agents as root with the sandbox on, n1 with
 * --job-network none and n2 with --job-network host. A job on each tries
 * TCP connections to the server's port on 127.0.0.1 and to a port the test
 * listens on (any address: a stand-in for another service of the node, such
 * as an agent or server bound to all addresses) on 127.0.0.1 and on the
 * node's own address. With none every one fails and the job sees only its
 * loopback, which is up (a connection there is refused, not unreachable);
 * with host every one succeeds, so the option is what makes the
 * difference. Skipped (77) when not root or where no network namespace can
 * be made.
 *
 *   e2e_test_network [CASE-PATTERN]
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"

static int setup(void **state)
{
    static const struct ts_e2e_project_spec projects[] = {{"vision", 2}, {NULL, 0}};
    static const struct ts_e2e_agent_spec agents[] = {
        {"n1", "sim:1x4GiB", "net=none", "--job-network none"},
        {"n2", "sim:1x4GiB", "net=host", "--job-network host"},
        {NULL, NULL, NULL, NULL}};
    return ts_e2e_setup(state, NULL, projects, agents);
}

/* A TCP socket listening on every address; its port into *port, or -1. */
static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* The node's first IPv4 address that is not loopback, into buf; false when
 * it has none. */
static bool node_address(char *buf, size_t len)
{
    struct ifaddrs *ifs = NULL;
    bool found = false;
    if (getifaddrs(&ifs) != 0)
        return false;
    for (struct ifaddrs *i = ifs; i != NULL && !found; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
            (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
            continue;
        found = inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf,
                          (socklen_t)len) != NULL;
    }
    freeifaddrs(ifs);
    return found;
}

/* Runs on the node labelled net=WHICH and tries each target; its output
 * (new). Each target gives a line "connect HOST:PORT ok" or "connect
 * HOST:PORT no: WHY"; "ifaces=..." lists the interfaces the job sees. */
static char *probe(struct ts_e2e *c, const char *which, const char *targets)
{
    char script[2048], extra[128], name[32];
    snprintf(script, sizeof(script),
             "for t in %s; do "
             "why=$(timeout 5 bash -c \"exec 3<>/dev/tcp/${t%%:*}/${t#*:}\" 2>&1) "
             "&& echo \"connect $t ok\" || echo \"connect $t no: $why\"; done; "
             "echo ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,); "
             "echo end",
             targets);
    snprintf(extra, sizeof(extra), "{\"node_selector\": {\"net\": \"%s\"}}", which);
    snprintf(name, sizeof(name), "probe-%s", which);
    long long id = ts_e2e_submit(&c->srv, "vision", name, "{\"count\": 1}", NULL, extra, script);
    assert_true(id > 0);
    json_t *j = ts_e2e_wait_state(&c->srv, id, "succeeded", 60);
    assert_non_null(j);
    json_decref(j);
    char *out =
        ts_e2e_output(ts_e2e_agent_named(c, strcmp(which, "none") == 0 ? "n1" : "n2"), id, 1);
    fprintf(stderr, "job on net=%s said:\n%s\n", which, out);
    return out;
}

static void a_job_without_network_reaches_no_port_of_the_node_and_with_host_it_does(void **state)
{
    struct ts_e2e *c = *state;
    int port = 0;
    int lfd = listen_any(&port);
    assert_true(lfd >= 0);
    const char *colon = strrchr(c->srv.url, ':');
    assert_non_null(colon);
    int srv_port = atoi(colon + 1);
    char ip[64], targets[256], line[128];
    bool has_ip = node_address(ip, sizeof(ip));
    int n = snprintf(targets, sizeof(targets), "127.0.0.1:%d 127.0.0.1:%d", srv_port, port);
    if (has_ip)
        snprintf(targets + n, sizeof(targets) - (size_t)n, " %s:%d", ip, port);
    else
        fprintf(stderr, "this node has no address but loopback: that target is left out\n");

    char *none = probe(c, "none", targets);
    char *host = probe(c, "host", targets);
    const char *which[] = {"127.0.0.1", "127.0.0.1", has_ip ? ip : NULL};
    int ports[] = {srv_port, port, port};
    for (int i = 0; i < 3 && which[i] != NULL; i++) {
        snprintf(line, sizeof(line), "connect %s:%d ok\n", which[i], ports[i]);
        assert_non_null(strstr(host, line));
        assert_null(strstr(none, line));
        snprintf(line, sizeof(line), "connect %s:%d no: ", which[i], ports[i]);
        assert_non_null(strstr(none, line));
    }
    /* only its loopback, and that is up: refused there, not unreachable */
    assert_non_null(strstr(none, "ifaces=lo,\n"));
    assert_non_null(strstr(none, "Connection refused"));
    assert_null(strstr(host, "ifaces=lo,\n"));
    assert_non_null(strstr(none, "end\n"));
    free(none);
    free(host);
    close(lfd);
    c->passed = true;
}

int main(int argc, char **argv)
{
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: the sandbox needs the agents to run as root\n");
        return 77;
    }
    pid_t pid = fork();
    if (pid == 0)
        _exit(unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID) == 0 ? 0 : 1);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "skipped: this machine cannot make network namespaces\n");
        return 77;
    }
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_job_without_network_reaches_no_port_of_the_node_and_with_host_it_does, setup,
            ts_e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
