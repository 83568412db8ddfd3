/*
 * join.c - `tessera-agent --join URL TOKEN [--node NAME] [--config FILE]`:
 * joins this machine to a cluster before the service first starts. Asks the
 * server who the token is (GET /api/v1/whoami: an agent token, and the
 * nodes it may act as), picks the node name (--node, else the token's one
 * node, else this host's name when the token allows it), writes the token
 * to the config file's token-file (mode 0600; next to the config file as
 * agent.token when it names none) and sets server, node and token-file in
 * the config file, keeping everything else in it. Starts nothing: the
 * service (tessera-agent.service) registers the node when started.
 * TOKEN "-" reads it from standard input, where ps cannot show it.
 *
 * An https server's certificate fingerprint (SHA-256) is printed before the
 * token is sent. --server-fingerprint FP pins it: the certificate is fetched
 * without checking it, refused unless its fingerprint is FP (nothing
 * written, no token sent), and, when the config file names no ca, saved as
 * server.pem beside it and set as ca, so the agent trusts that certificate
 * and no other.
 */
#include <errno.h>
#include <fnmatch.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "agent/daemon/join.h"

#include "agent/daemon/certpin.h"
#include "agent/daemon/conn.h"
#include "api/arena.h"
#include "api/files.h"
#include "api/units.h"
#include "api/wire.h"

#define JOIN_CONF_MAX (256 * 1024)
#define JOIN_USAGE                                                                                 \
    "usage: tessera-agent --join URL TOKEN|- [--node NAME] [--config FILE] "                       \
    "[--server-fingerprint SHA256]"

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tessera-agent --join: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* The value of an active "key = value" line of text, copied into out; ""
 * when there is none. Quotes are not undone (a path needs none). */
static void conf_get(const char *text, const char *key, char *out, size_t len)
{
    out[0] = '\0';
    size_t klen = strlen(key);
    for (const char *l = text; l != NULL && *l != '\0';) {
        const char *end = strchr(l, '\n');
        size_t n = end != NULL ? (size_t)(end - l) : strlen(l);
        const char *p = l;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, key, klen) == 0) {
            const char *q = p + klen;
            while (*q == ' ' || *q == '\t')
                q++;
            if (*q == '=') {
                q++;
                while (*q == ' ' || *q == '\t')
                    q++;
                size_t vlen = (size_t)(l + n - q);
                while (vlen > 0 &&
                       (q[vlen - 1] == ' ' || q[vlen - 1] == '\t' || q[vlen - 1] == '\r'))
                    vlen--;
                snprintf(out, len, "%.*s", (int)vlen, q);
            }
        }
        l = end != NULL ? end + 1 : NULL;
    }
}

/* Is this line "key = ...", or its commented-out "# key = ..."? */
static bool line_sets(const char *l, size_t n, const char *key)
{
    size_t klen = strlen(key);
    const char *p = l, *e = l + n;
    while (p < e && (*p == ' ' || *p == '\t' || *p == '#'))
        p++;
    if ((size_t)(e - p) < klen || strncmp(p, key, klen) != 0)
        return false;
    p += klen;
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    return p < e && *p == '=';
}

/* text with "key = value" in place of the first line that sets key (active
 * or commented out) and without the others; appended when none does. New. */
static char *conf_set(const char *text, const char *key, const char *value)
{
    size_t cap = strlen(text) + strlen(key) + strlen(value) + 8;
    char *out = malloc(cap), *w = out;
    if (out == NULL)
        return NULL;
    bool done = false;
    for (const char *l = text; *l != '\0';) {
        const char *end = strchr(l, '\n');
        size_t n = end != NULL ? (size_t)(end - l) : strlen(l);
        if (line_sets(l, n, key)) {
            if (!done)
                w += sprintf(w, "%s = %s\n", key, value);
            done = true;
        } else {
            memcpy(w, l, n);
            w += n;
            *w++ = '\n';
        }
        l = end != NULL ? end + 1 : l + n;
    }
    if (!done)
        w += sprintf(w, "%s = %s\n", key, value);
    *w = '\0';
    return out;
}

/* May a token bound to nodes (none: any node) act as name? */
static bool token_allows(const struct ts_whoami *who, const char *name)
{
    if (who->nnodes == 0)
        return true;
    for (size_t i = 0; i < who->nnodes; i++)
        if (fnmatch(who->nodes[i], name, 0) == 0)
            return true;
    return false;
}

/* The token's nodes as the server wrote them, ["a","b*"], into buf. */
static const char *nodes_text(const struct ts_whoami *who, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "[");
    for (size_t i = 0; i < who->nnodes && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s\"%s\"", i > 0 ? "," : "", who->nodes[i]);
    if (at < len)
        snprintf(buf + at, len - at, "]");
    return buf;
}

/* The node's name: --node, the token's one exact node, or the host name. */
static int pick_node(const struct ts_whoami *who, const char *given, char *out, size_t len)
{
    if (given != NULL) {
        snprintf(out, len, "%s", given);
    } else if (who->nnodes == 1 && strchr(who->nodes[0], '*') == NULL) {
        snprintf(out, len, "%s", who->nodes[0]);
    } else {
        char host[256] = "";
        gethostname(host, sizeof(host) - 1);
        host[strcspn(host, ".")] = '\0';
        for (char *c = host; *c != '\0'; c++)
            if (*c >= 'A' && *c <= 'Z')
                *c = (char)(*c - 'A' + 'a');
        snprintf(out, len, "%s", host);
    }
    if (!ts_name_valid(out))
        return fail("invalid node name \"%.64s\": lower-case letters, digits and '-', at most "
                    "63%s",
                    out, given != NULL ? "" : " (from the host name: give --node NAME)");
    if (!token_allows(who, out)) {
        char bound[1024];
        return fail("the token may act only as the nodes %s, not as \"%s\"%s",
                    nodes_text(who, bound, sizeof(bound)), out,
                    given != NULL ? "" : ": give --node NAME");
    }
    return 0;
}

/* Reads TOKEN ("-": a line of stdin) into out. */
static int read_token(const char *arg, char *out, size_t len)
{
    if (strcmp(arg, "-") == 0) {
        if (fgets(out, (int)len, stdin) == NULL)
            return fail("no token on standard input");
        out[strcspn(out, "\r\n")] = '\0';
    } else {
        snprintf(out, len, "%s", arg);
    }
    if (out[0] == '\0' || strpbrk(out, " \t\r\n") != NULL)
        return fail("the token must be one word");
    return 0;
}

/* An https server's certificate: its fingerprint printed; with pin, fetched
 * unchecked and refused unless the fingerprint is pin, and when tls names
 * no ca, *ca_out set to where join saves it (beside config). *pem is new.
 * 0 or -1 (said). */
static int server_certificate(const char *url, const struct ts_conn_tls *tls, const char *pin,
                              const char *config, char **pem, char ca_out[PATH_MAX])
{
    char fp[TS_CERTPIN_LEN], dir[PATH_MAX];
    struct ts_error err = {0};
    if (ts_certpin_fetch(url, tls, pin == NULL, pem, fp, &err) != TS_OK) {
        fail("%s%s", err.message,
             pin == NULL ? "; if the certificate is one you expect, give its CA as ca in the "
                           "config file or pin it with --server-fingerprint"
                         : "");
        return -1;
    }
    printf("server certificate SHA-256 fingerprint: %s\n", fp);
    if (pin == NULL)
        return 0;
    if (!ts_certpin_matches(pin, fp)) {
        fail("the server's certificate is not the one pinned: its SHA-256 fingerprint is %s, "
             "--server-fingerprint gave %.128s; nothing was written and no token sent",
             fp, pin);
        return -1;
    }
    if (tls->ca == NULL) {
        snprintf(dir, sizeof(dir), "%s", config);
        if (snprintf(ca_out, PATH_MAX, "%s/server.pem", dirname(dir)) >= PATH_MAX)
            return fail("the config file's path is too long");
    }
    fflush(stdout);
    return 0;
}

/* What --join's command line says. */
struct join_args {
    const char *url, *token_arg, *node, *config, *pin;
    bool https;
};

/* argv[2..] of --join into j; 0, or 1 after saying what is wrong. */
static int join_parse(int argc, char **argv, struct join_args *j)
{
    memset(j, 0, sizeof(*j));
    for (int i = 2; i < argc; i++) {
        if ((strcmp(argv[i], "--node") == 0 || strcmp(argv[i], "--config") == 0) && i + 1 < argc) {
            *(argv[i][2] == 'n' ? &j->node : &j->config) = argv[i + 1];
            i++;
        } else if (strcmp(argv[i], "--server-fingerprint") == 0 && i + 1 < argc) {
            j->pin = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            return fail("unknown option %.64s; " JOIN_USAGE, argv[i]);
        } else if (j->url == NULL) {
            j->url = argv[i];
        } else if (j->token_arg == NULL) {
            j->token_arg = argv[i];
        } else {
            return fail("unexpected argument \"%.64s\"", argv[i]);
        }
    }
    if (j->url == NULL || j->token_arg == NULL)
        return fail(JOIN_USAGE);
    j->https = strncmp(j->url, "https://", 8) == 0;
    if (j->pin != NULL && !j->https)
        return fail("--server-fingerprint needs an https:// server: %.128s", j->url);
    if (j->config == NULL)
        j->config =
            getenv("TESSERA_CONFIG") != NULL ? getenv("TESSERA_CONFIG") : "/etc/tessera/agent.conf";
    return 0;
}

/* GET /whoami with the token: an agent token, and the node it joins as
 * (pick_node) in name. 0, or 1 after saying why not. */
static int join_whoami(struct ts_conn *c, const struct join_args *j, char *name, size_t len)
{
    long status = 0;
    struct ts_error err = {0};
    json_t *who = NULL;
    struct ts_arena *arena = ts_arena_new();
    int rc = 1;
    if (ts_conn_json(c, "GET", "/api/v1/whoami", NULL, 30, &status, &who, &err) != TS_OK) {
        fail("could not reach the server at %s: %s", j->url, err.message);
        goto out;
    }
    if (status == 401) {
        fail("the server at %s does not know this token (401)", j->url);
        goto out;
    }
    if (status != 200 || !json_is_object(who)) {
        fail("GET %s/api/v1/whoami answered %ld %s", j->url, status, ts_problem_text(who));
        goto out;
    }
    struct ts_whoami me;
    if (arena == NULL || ts_wire_whoami_decode(who, arena, &me, &err) != TS_OK) {
        fail("could not read the answer of GET %s/api/v1/whoami: %s", j->url,
             arena != NULL ? err.message : "out of memory");
        goto out;
    }
    if (strcmp(me.role, "agent") != 0) {
        fail("the token's role is %s, not agent: create one with `tessera token create NAME -r "
             "agent -n NODE`",
             me.role);
        goto out;
    }
    if (pick_node(&me, j->node, name, len) != 0)
        goto out;
    rc = 0;
out:
    ts_arena_free(arena);
    json_decref(who);
    return rc;
}

/* Where --join writes: the config file as it was read, the token file
 * and its temporary, a pinned certificate and its temporary. */
struct join_files {
    const char *config;
    const char *text; /* the config file's text before the join */
    mode_t conf_mode;
    const char *token_file, *tmp;
    const char *pinned_ca, *pinned_tmp; /* "" when nothing was pinned */
};

/* server, node, token-file (and ca when pinned) into the config file, the
 * token and the certificate in their places. 0, or 1 after saying why
 * not. */
static int join_write(const struct join_files *f, const char *url, const char *name)
{
    int rc = 1;
    char *with_server = conf_set(f->text, "server", url);
    char *with_node = with_server != NULL ? conf_set(with_server, "node", name) : NULL;
    char *with_token = with_node != NULL ? conf_set(with_node, "token-file", f->token_file) : NULL;
    char *with_ca =
        with_token != NULL && f->pinned_ca[0] ? conf_set(with_token, "ca", f->pinned_ca) : NULL;
    if (with_token == NULL || (f->pinned_ca[0] && with_ca == NULL)) {
        fail("out of memory");
        goto out;
    }
    if (rename(f->tmp, f->token_file) != 0) {
        fail("could not write %s: %s", f->token_file, strerror(errno));
        goto out;
    }
    const char *final = with_ca != NULL ? with_ca : with_token;
    if (f->pinned_ca[0] && rename(f->pinned_tmp, f->pinned_ca) != 0) {
        fail("could not write %s: %s", f->pinned_ca, strerror(errno));
        goto out;
    }
    int w = ts_files_write_atomic(f->config, final, strlen(final), f->conf_mode);
    if (w != 0) {
        fail("could not write %s: %s", f->config, strerror(-w));
        goto out;
    }
    rc = 0;
out:
    free(with_server);
    free(with_node);
    free(with_token);
    free(with_ca);
    return rc;
}

int ts_agent_join(int argc, char **argv)
{
    struct join_args j;
    if (join_parse(argc, argv, &j) != 0)
        return 1;
    const char *config = j.config;
    char token[512];
    if (read_token(j.token_arg, token, sizeof(token)) != 0)
        return 1;

    /* the config file as it is (an absent one is started empty) */
    char *text = ts_files_read(config, JOIN_CONF_MAX, NULL);
    if (text == NULL && errno != ENOENT)
        return fail("could not read %s: %s", config, strerror(errno));
    if (text == NULL && (text = strdup("")) == NULL)
        return fail("out of memory");
    struct stat st;
    mode_t conf_mode = stat(config, &st) == 0 ? (st.st_mode & 07777) : 0600;

    /* the token goes where the config file says, else beside it */
    char token_file[PATH_MAX], dir[PATH_MAX], tmp[PATH_MAX + 16];
    conf_get(text, "token-file", token_file, sizeof(token_file));
    snprintf(dir, sizeof(dir), "%s", config);
    if (token_file[0] == '\0')
        snprintf(token_file, sizeof(token_file), "%s/agent.token", dirname(dir));
    snprintf(tmp, sizeof(tmp), "%s.join", token_file);
    int rc = 1;
    struct ts_conn *c = NULL;
    char *pem = NULL;
    char pinned_ca[PATH_MAX] = "", pinned_tmp[PATH_MAX + 16] = "";
    char line[600];
    snprintf(line, sizeof(line), "%s\n", token);
    int w = ts_files_write_atomic(tmp, line, strlen(line), 0600);
    if (w != 0) {
        fail("could not write %s: %s", tmp, strerror(-w));
        goto out;
    }

    curl_global_init(CURL_GLOBAL_DEFAULT);
    static atomic_bool never;
    /* an https server is checked with the config file's ca (cert and key
     * when it asks agents for a client certificate) */
    char ca[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
    conf_get(text, "ca", ca, sizeof(ca));
    conf_get(text, "cert", cert, sizeof(cert));
    conf_get(text, "key", key, sizeof(key));
    struct ts_conn_tls tls = {ca[0] ? ca : NULL, cert[0] ? cert : NULL, key[0] ? key : NULL};
    if (j.https && server_certificate(j.url, &tls, j.pin, config, &pem, pinned_ca) != 0)
        goto out;
    if (pinned_ca[0] != '\0') { /* the pinned certificate checks every request of --join too */
        snprintf(pinned_tmp, sizeof(pinned_tmp), "%s.join", pinned_ca);
        int pw = ts_files_write_atomic(pinned_tmp, pem, strlen(pem), 0644);
        if (pw != 0) {
            fail("could not write %s: %s", pinned_tmp, strerror(-pw));
            pinned_tmp[0] = '\0';
            goto out;
        }
        tls.ca = pinned_tmp;
    }
    c = ts_conn_new(j.url, tmp, &tls, &never);
    if (c == NULL) {
        fail("out of memory");
        goto out;
    }
    char name[128];
    if (join_whoami(c, &j, name, sizeof(name)) != 0)
        goto out;
    const struct join_files f = {config, text, conf_mode, token_file, tmp, pinned_ca, pinned_tmp};
    if (join_write(&f, j.url, name) != 0)
        goto out;
    printf("joined %s as node %s: the token is in %s (mode 0600), server, node and token-file "
           "are set in %s\n"
           "start the agent: systemctl enable --now tessera-agent\n",
           j.url, name, token_file, config);
    rc = 0;
out:
    unlink(tmp);
    if (pinned_tmp[0] != '\0')
        unlink(pinned_tmp);
    ts_conn_free(c);
    free(pem);
    free(text);
    return rc;
}
