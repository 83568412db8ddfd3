/*
 * test_tls.c - the whole cluster over HTTPS with client certificates (mTLS),
 * with certificates the test makes with the openssl tool: a CA, the
 * server's certificate for 127.0.0.1 and localhost, a client certificate for
 * the agent and the CLI, and a second CA with a client certificate of its
 * own. The server runs with --tls-cert, --tls-key and --tls-client-ca; a
 * real agent (simgpu) and the CLI talk to it over HTTPS; a job runs to
 * completion. An agent token without a client certificate is refused,
 * plain HTTP to the HTTPS port gets no answer, a CA that did not sign the
 * server's certificate makes the CLI say so, and bad TLS files stop the
 * server, the agent and the CLI at start with the file's name.
 *
 *   e2e_test_tls [CASE-PATTERN]
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/integration/pgtest.h"

static char dir[256]; /* certificates, the CLI's config, outputs */
static char f_ca[300], f_srv_cert[300], f_srv_key[300], f_cli_cert[300], f_cli_key[300];
static char f_other_ca[300], f_other_cert[300], f_other_key[300];

/* The certificates, made with openssl in dir. 0 or -1. */
static int make_certificates(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "set -e; cd %s; exec 2>openssl.log;"
             "ca() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
             " -keyout $1.key -out $1.pem -days 2 -subj /CN=$1"
             " -addext basicConstraints=critical,CA:TRUE"
             " -addext keyUsage=critical,keyCertSign,cRLSign; };"
             "leaf() { openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
             " -keyout $2.key -out $2.csr -subj /CN=$3;"
             " printf '%%b\\n' \"$4\" > $2.ext;"
             " openssl x509 -req -in $2.csr -CA $1.pem -CAkey $1.key -CAcreateserial"
             " -out $2.pem -days 2 -extfile $2.ext; };"
             "ca ca; ca other-ca;"
             "leaf ca server localhost"
             " 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth';"
             "leaf ca client n1 'extendedKeyUsage=clientAuth';"
             "leaf other-ca other n1 'extendedKeyUsage=clientAuth';"
             "chmod 600 *.key",
             dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "test_tls: openssl failed; see %s/openssl.log\n", dir);
        return -1;
    }
    snprintf(f_ca, sizeof(f_ca), "%s/ca.pem", dir);
    snprintf(f_srv_cert, sizeof(f_srv_cert), "%s/server.pem", dir);
    snprintf(f_srv_key, sizeof(f_srv_key), "%s/server.key", dir);
    snprintf(f_cli_cert, sizeof(f_cli_cert), "%s/client.pem", dir);
    snprintf(f_cli_key, sizeof(f_cli_key), "%s/client.key", dir);
    snprintf(f_other_ca, sizeof(f_other_ca), "%s/other-ca.pem", dir);
    snprintf(f_other_cert, sizeof(f_other_cert), "%s/other.pem", dir);
    snprintf(f_other_key, sizeof(f_other_key), "%s/other.key", dir);
    return 0;
}

static int group_setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/tessera-tls-XXXXXX");
    if (mkdtemp(dir) == NULL || make_certificates() != 0)
        return -1;
    /* the CLI reads no config file of the user running the test */
    setenv("XDG_CONFIG_HOME", dir, 1);
    unsetenv("TESSERA_CA");
    unsetenv("TESSERA_CERT");
    unsetenv("TESSERA_KEY");
    ts_it_tls = (struct ts_it_tls){f_ca, f_cli_cert, f_cli_key};
    static char agent_args[1000];
    snprintf(agent_args, sizeof(agent_args), "--ca %s --cert %s --key %s", f_ca, f_cli_cert,
             f_cli_key);
    const char *const server_args[] = {"--tls-cert",      f_srv_cert, "--tls-key", f_srv_key,
                                       "--tls-client-ca", f_ca,       NULL};
    const struct ts_e2e_project_spec projects[] = {{"secure", 1}, {NULL, 0}};
    const struct ts_e2e_agent_spec agents[] = {{"n1", "sim:1x16GiB", NULL, agent_args},
                                               {NULL, NULL, NULL, NULL}};
    return ts_e2e_setup(state, server_args, projects, agents);
}

static int group_teardown(void **state)
{
    int rc = *state != NULL ? ts_e2e_teardown(state) : 0;
    ts_it_tls = (struct ts_it_tls){NULL, NULL, NULL};
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (dir[0] != '\0' && system(cmd) != 0)
        fprintf(stderr, "test_tls: could not remove %s\n", dir);
    return rc;
}

/* Run argv (argv[0] a program in the bin folder, or "tessera"); what it
 * printed, stdout and stderr together, into out (new text: free). Returns
 * the exit status. */
static int run(char **out, const char *const *argv)
{
    char exe[600], path[400];
    const char *args[64];
    snprintf(exe, sizeof(exe), "%s/%s", ts_e2e_bin_dir(), argv[0]);
    args[0] = exe;
    int n = 1;
    for (; n < 63 && argv[n] != NULL; n++)
        args[n] = argv[n];
    args[n] = NULL;
    snprintf(path, sizeof(path), "%s/run.out", dir);
    int rc = ts_pgtest_run(args, path, NULL);
    *out = ts_pgtest_read_file(path);
    if (*out == NULL)
        *out = strdup("");
    fprintf(stderr, "$ %s ... -> %d\n%s", argv[0], rc, *out);
    return rc;
}

#define RUN(out, ...) run(out, (const char *const[]){__VA_ARGS__, NULL})

static void the_whole_cluster_runs_a_job_over_mtls(void **state)
{
    struct ts_e2e *c = *state;
    assert_int_equal(strncmp(c->srv.url, "https://127.0.0.1:", 18), 0);
    setenv("TESSERA_TOKEN", TS_IT_ADMIN_TOKEN, 1);
    char *out = NULL;
    /* the CLI: the CA from the environment, no client certificate (a person) */
    setenv("TESSERA_CA", f_ca, 1);
    int rc = RUN(&out, "tessera", "--server", c->srv.url, "submit", "hello", "-p", "secure",
                 "--gpu-portion-request", "0.5", "--wait", "--", "sh", "-c", "echo hello over tls");
    unsetenv("TESSERA_CA");
    assert_int_equal(rc, 0);
    free(out);
    /* its output came back through the agent's HTTPS log shipping */
    rc =
        RUN(&out, "tessera", "--server", c->srv.url, "--ca", f_ca, "logs", "hello", "-p", "secure");
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "hello over tls"));
    free(out);
    rc =
        RUN(&out, "tessera", "--server", c->srv.url, "--ca", f_ca, "list", "--all", "-p", "secure");
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "succeeded"));
    free(out);
    /* the agent's own log: no TLS failure on the way */
    assert_false(ts_e2e_log_has(c->agents[0].log, "could not reach the server"));
    c->passed = true;
}

static void an_agent_token_needs_a_client_certificate(void **state)
{
    struct ts_e2e *c = *state;
    char *token = ts_pgtest_read_file(c->agents[0].token_file);
    assert_non_null(token);
    token[strcspn(token, "\r\n")] = '\0';
    struct ts_response r;

    /* no certificate: refused, saying why */
    struct ts_client *bare = ts_client_new(c->srv.url, token);
    assert_int_equal(ts_client_set_tls(bare, f_ca, NULL, NULL), 0);
    assert_int_equal(ts_it_req(bare, "GET", "/api/v1/nodes/n1", NULL, NULL, &r), 403);
    assert_non_null(strstr(ts_it_str(r.json, "detail"), "client certificate"));
    ts_response_free(&r);
    assert_int_equal(ts_it_req(bare, "GET", "/api/v1/nodes/n1/desired?wait=0", NULL, NULL, NULL),
                     403);
    /* a person's token needs none */
    ts_client_set_token(bare, TS_IT_ADMIN_TOKEN);
    assert_int_equal(ts_it_req(bare, "GET", "/api/v1/nodes/n1", NULL, NULL, NULL), 200);
    ts_client_free(bare);

    /* a certificate of another CA: refused, for anyone */
    struct ts_client *other = ts_client_new(c->srv.url, token);
    assert_int_equal(ts_client_set_tls(other, f_ca, f_other_cert, f_other_key), 0);
    assert_int_equal(ts_it_req(other, "GET", "/api/v1/nodes/n1", NULL, NULL, &r), 403);
    assert_non_null(strstr(ts_it_str(r.json, "detail"), "not signed by a CA this server trusts"));
    ts_response_free(&r);
    ts_client_set_token(other, TS_IT_ADMIN_TOKEN);
    assert_int_equal(ts_it_req(other, "GET", "/api/v1/nodes/n1", NULL, NULL, NULL), 403);
    ts_client_free(other);

    /* the CA's client certificate: accepted */
    struct ts_client *good = ts_it_client(&c->srv, token);
    assert_int_equal(ts_it_req(good, "GET", "/api/v1/nodes/n1", NULL, NULL, NULL), 200);
    ts_client_free(good);
    free(token);
    c->passed = true;
}

static void plain_http_to_the_https_port_fails(void **state)
{
    struct ts_e2e *c = *state;
    char url[160];
    snprintf(url, sizeof(url), "http://%s", c->srv.url + strlen("https://"));
    struct ts_client *plain = ts_client_new(url, TS_IT_ADMIN_TOKEN);
    assert_int_equal(ts_it_req(plain, "GET", "/api/v1/jobs", NULL, NULL, NULL), -1);
    ts_client_free(plain);
    setenv("TESSERA_TOKEN", TS_IT_ADMIN_TOKEN, 1);
    char *out = NULL;
    assert_int_equal(RUN(&out, "tessera", "--server", url, "list"), 2);
    assert_non_null(strstr(out, "needs an https:// URL"));
    free(out);
    /* the server still serves HTTPS */
    assert_int_equal(ts_it_req(c->srv.admin, "GET", "/readyz", NULL, NULL, NULL), 200);
    c->passed = true;
}

static void a_wrong_ca_fails_with_a_clear_message(void **state)
{
    struct ts_e2e *c = *state;
    setenv("TESSERA_TOKEN", TS_IT_ADMIN_TOKEN, 1);
    char *out = NULL;
    /* the time a run that works takes here, to compare with */
    double t0 = ts_e2e_now();
    assert_int_equal(RUN(&out, "tessera", "--server", c->srv.url, "--ca", f_ca, "list"), 0);
    double ok_secs = ts_e2e_now() - t0;
    free(out);
    t0 = ts_e2e_now();
    assert_int_equal(RUN(&out, "tessera", "--server", c->srv.url, "--ca", f_other_ca, "list"), 2);
    double failed_secs = ts_e2e_now() - t0;
    assert_non_null(strstr(out, "could not make a TLS connection to the server"));
    assert_non_null(strstr(out, "certificate"));
    assert_non_null(strstr(out, "--ca"));
    free(out);
    /* not tried again: the retries of an unreachable server sleep 1.4 s */
    fprintf(stderr, "a run that works: %.2f s, the refused one: %.2f s\n", ok_secs, failed_secs);
    assert_true(failed_secs < ok_secs + 1.0);
    /* no --ca: the system's CAs do not know this one either */
    assert_int_equal(RUN(&out, "tessera", "--server", c->srv.url, "list"), 2);
    assert_non_null(strstr(out, "could not make a TLS connection to the server"));
    free(out);
    c->passed = true;
}

static void bad_tls_files_stop_each_program_at_start_naming_the_file(void **state)
{
    struct ts_e2e *c = *state;
    char data[400], missing[400], open_key[400], *out = NULL;
    snprintf(data, sizeof(data), "%s/never", dir);
    snprintf(missing, sizeof(missing), "%s/missing.pem", dir);
    snprintf(open_key, sizeof(open_key), "%s/open.key", dir);
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "cp %s %s && chmod 644 %s", f_srv_key, open_key, open_key);
    assert_int_equal(system(cmd), 0);

    /* the server: a missing certificate, a key open to others, the key of
     * another certificate, a CA file without certificates */
    assert_int_equal(RUN(&out, "tessera-server", "--data-dir", data, "--listen", "127.0.0.1:0",
                         "--tls-cert", missing, "--tls-key", f_srv_key),
                     1);
    assert_non_null(strstr(out, missing));
    assert_non_null(strstr(out, "No such file"));
    free(out);
    assert_int_equal(RUN(&out, "tessera-server", "--data-dir", data, "--listen", "127.0.0.1:0",
                         "--tls-cert", f_srv_cert, "--tls-key", open_key),
                     1);
    assert_non_null(strstr(out, open_key));
    assert_non_null(strstr(out, "open to group or others"));
    free(out);
    assert_int_equal(RUN(&out, "tessera-server", "--data-dir", data, "--listen", "127.0.0.1:0",
                         "--tls-cert", f_srv_cert, "--tls-key", f_cli_key),
                     1);
    assert_non_null(strstr(out, "is not the key of the --tls-cert"));
    assert_non_null(strstr(out, f_cli_key));
    free(out);
    assert_int_equal(RUN(&out, "tessera-server", "--data-dir", data, "--listen", "127.0.0.1:0",
                         "--tls-cert", f_srv_cert, "--tls-key", f_srv_key, "--tls-client-ca",
                         f_srv_key),
                     1);
    assert_non_null(strstr(out, "--tls-client-ca"));
    free(out);
    /* nothing was started: the checks come before the database */
    struct stat st;
    assert_int_not_equal(stat(data, &st), 0);

    /* the agent */
    assert_int_equal(RUN(&out, "tessera-agent", "--server", c->srv.url, "--token-file",
                         c->token_file, "--node", "n9", "--data-dir", data, "--gpus", "none",
                         "--ca", f_ca, "--cert", f_cli_cert, "--key", missing),
                     1);
    assert_non_null(strstr(out, missing));
    free(out);
    assert_int_equal(RUN(&out, "tessera-agent", "--server", c->srv.url, "--token-file",
                         c->token_file, "--node", "n9", "--data-dir", data, "--gpus", "none",
                         "--cert", f_cli_cert, "--key", open_key),
                     1);
    assert_non_null(strstr(out, "open to group or others"));
    free(out);

    /* the CLI */
    setenv("TESSERA_TOKEN", TS_IT_ADMIN_TOKEN, 1);
    assert_int_equal(RUN(&out, "tessera", "--server", c->srv.url, "--ca", missing, "list"), 1);
    assert_non_null(strstr(out, missing));
    free(out);
    assert_int_equal(
        RUN(&out, "tessera", "--server", c->srv.url, "--ca", f_ca, "--cert", f_cli_cert, "list"),
        1);
    assert_non_null(strstr(out, "--cert is given without --key"));
    free(out);
    c->passed = true;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_whole_cluster_runs_a_job_over_mtls),
        cmocka_unit_test(an_agent_token_needs_a_client_certificate),
        cmocka_unit_test(plain_http_to_the_https_port_fails),
        cmocka_unit_test(a_wrong_ca_fails_with_a_clear_message),
        cmocka_unit_test(bad_tls_files_stop_each_program_at_start_naming_the_file),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
