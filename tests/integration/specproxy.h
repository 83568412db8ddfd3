/*
 * specproxy.h - the integration tests' traffic checked against
 * api/openapi.yaml: when TS_IT_PRISM names Stoplight Prism's executable,
 * ts_it_start puts a `prism proxy` in front of the server it started and the
 * test talks to the proxy; ts_it_stop fails the test on any response that
 * Prism found the document does not allow (an undocumented status, content
 * type, header or body). Requests the document forbids are not counted:
 * tests send bad requests on purpose.
 */
#ifndef TS_TESTS_INTEGRATION_SPECPROXY_H
#define TS_TESTS_INTEGRATION_SPECPROXY_H

#include <stddef.h>
#include <sys/types.h>

struct ts_it_specproxy {
    pid_t pid;     /* 0: none */
    char log[300]; /* Prism's output */
};

/* Start Prism as a proxy of upstream ("http://127.0.0.1:PORT") when
 * TS_IT_PRISM is set, logging into dir/prism.log; url gets the proxy's
 * address. Returns 1 when started, 0 when TS_IT_PRISM is unset (url
 * untouched), -1 with a message on stderr. */
int ts_it_specproxy_start(struct ts_it_specproxy *p, const char *dir, const char *upstream,
                          char *url, size_t len);
/* Stop Prism; print every response violation it logged, with the request it
 * answered, to stderr. Returns the number of violations, -1 on error. */
int ts_it_specproxy_stop(struct ts_it_specproxy *p);

#endif /* TS_TESTS_INTEGRATION_SPECPROXY_H */
