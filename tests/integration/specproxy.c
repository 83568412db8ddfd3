/*
 * specproxy.c - Stoplight Prism in front of a test's server (specproxy.h).
 */
#include "tests/integration/specproxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/client/client.h"
#include "api/clock.h"

/* A loopback port nobody listens on now (the kernel's pick). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static int healthy(const char *url)
{
    struct ts_client *c = ts_client_new(url, NULL);
    if (c == NULL)
        return 0;
    struct ts_response r;
    struct ts_error err;
    int ok =
        ts_client_do(c, "GET", "/healthz", NULL, 0, NULL, &r, &err) == TS_OK && r.status == 200;
    if (ok)
        ts_response_free(&r);
    ts_client_free(c);
    return ok;
}

int ts_it_specproxy_start(struct ts_it_specproxy *p, const char *dir, const char *upstream,
                          char *url, size_t len)
{
    memset(p, 0, sizeof(*p));
    const char *prism = getenv("TS_IT_PRISM");
    if (prism == NULL || prism[0] == '\0')
        return 0;
    const char *src = getenv("TS_SOURCE_DIR");
    char spec[512], portstr[16];
    snprintf(spec, sizeof(spec), "%s/api/openapi.yaml", src ? src : ".");
    int port = free_port();
    if (port < 0) {
        perror("specproxy: socket");
        return -1;
    }
    snprintf(portstr, sizeof(portstr), "%d", port);
    snprintf(p->log, sizeof(p->log), "%s/prism.log", dir);
    p->pid = fork();
    if (p->pid < 0) {
        p->pid = 0;
        return -1;
    }
    if (p->pid == 0) {
        int fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        /* its own process group: npm's launcher may start children */
        setpgid(0, 0);
        execl(prism, prism, "proxy", spec, upstream, "--host", "127.0.0.1", "--port", portstr,
              (char *)NULL);
        _exit(127);
    }
    snprintf(url, len, "http://127.0.0.1:%d", port);
    for (int waited = 0; waited < 60000; waited += 100) {
        if (waitpid(p->pid, NULL, WNOHANG) == p->pid) {
            p->pid = 0;
            fprintf(stderr, "specproxy: %s exited early; its log is %s\n", prism, p->log);
            return -1;
        }
        if (healthy(url))
            return 1;
        ts_sleep_ms(100);
    }
    fprintf(stderr, "specproxy: prism did not answer on %s within 60 s\n", url);
    ts_it_specproxy_stop(p);
    return -1;
}

int ts_it_specproxy_stop(struct ts_it_specproxy *p)
{
    if (p->pid <= 0)
        return 0;
    kill(-p->pid, SIGTERM);
    for (int waited = 0; waitpid(p->pid, NULL, WNOHANG) != p->pid; waited += 20) {
        if (waited >= 10000) {
            kill(-p->pid, SIGKILL);
            waitpid(p->pid, NULL, 0);
            break;
        }
        ts_sleep_ms(20);
    }
    p->pid = 0;
    FILE *f = fopen(p->log, "r");
    if (f == NULL)
        return -1;
    /* Prism logs "[HTTP SERVER] get /path ... Request received", then its
     * validator's "Violation: request ..." and "Violation: response ..."
     * lines for that request */
    char line[4096], request[512] = "";
    int n = 0, status = 0;
    while (fgets(line, sizeof(line), f)) {
        const char *st = strstr(line, " has returned ");
        if (st != NULL) {
            status = atoi(st + strlen(" has returned "));
            continue;
        }
        const char *s = strstr(line, "[HTTP SERVER] ");
        if (s != NULL) {
            s += strlen("[HTTP SERVER] ");
            size_t k = strcspn(s, "\n");
            const char *end = strstr(s, " ℹ");
            if (end != NULL && (size_t)(end - s) < k)
                k = (size_t)(end - s);
            snprintf(request, sizeof(request), "%.*s", (int)k, s);
            status = 0;
            continue;
        }
        s = strstr(line, "Violation: response");
        if (s != NULL) {
            fprintf(stderr, "api/openapi.yaml does not allow the answer to %s (%d): %s", request,
                    status, s + strlen("Violation: "));
            n++;
        }
    }
    fclose(f);
    if (n > 0)
        fprintf(stderr, "specproxy: %d response(s) the document does not allow (log: %s)\n", n,
                p->log);
    return n;
}
