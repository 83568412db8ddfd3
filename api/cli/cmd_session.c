/*
 * cmd_session.c - who and where: login, config view|set, whoami.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "api/arena.h"
#include "api/array.h"
#include "api/cli/cli.h"
#include "api/cli/out.h"
#include "api/cli/req.h"
#include "api/version.h"
#include "api/wire.h"

/* A token as it may be shown: its first 8 characters. */
static char *mask(const char *token, char *buf, size_t len)
{
    if (token == NULL)
        snprintf(buf, len, "(none)");
    else if (strlen(token) <= 8)
        snprintf(buf, len, "%.*s\xe2\x80\xa6", (int)(strlen(token) / 2), token);
    else
        snprintf(buf, len, "%.8s\xe2\x80\xa6", token);
    return buf;
}

/* One line from stdin into buf without its newline; no echo on a terminal. */
static int read_secret(char *buf, size_t len)
{
    bool tty = isatty(STDIN_FILENO);
    struct termios old, quiet;
    if (tty) {
        fprintf(stderr, "token: ");
        if (tcgetattr(STDIN_FILENO, &old) == 0) {
            quiet = old;
            quiet.c_lflag &= ~(tcflag_t)ECHO;
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
        } else {
            tty = false;
        }
    }
    char *got = fgets(buf, (int)len, stdin);
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
        fputc('\n', stderr);
    }
    if (got == NULL)
        return -1;
    buf[strcspn(buf, "\r\n")] = '\0';
    return buf[0] ? 0 : -1;
}

static const struct ts_opt login_opts[] = {
    {"project", 'p', "PROJECT", "also make PROJECT the default project", false},
    TS_OPT_END,
};

static int cmd_login(struct ts_cli *cli, const struct ts_args *a)
{
    char secret[1024];
    const char *token = ts_args_get(a, "token");
    if (token == NULL || token[0] == '\0')
        token = getenv("TESSERA_TOKEN");
    if (token == NULL || token[0] == '\0') {
        if (read_secret(secret, sizeof(secret)) != 0)
            return ts_cli_usage_error(cli, "no token: give --token, TESSERA_TOKEN or type it");
        token = secret;
    }
    /* check the token with the server it is for before keeping it */
    free(cli->conf.token);
    cli->conf.token = strdup(token);
    if (cli->conf.token == NULL)
        return TS_EXIT_SERVER;
    struct ts_response r;
    int rc = ts_req(cli, "GET", "/api/v1/projects", NULL, NULL, TS_REQ_KEEP, &r);
    if (rc == TS_EXIT_AUTH && r.status == 401) {
        fprintf(stderr, "error: %s refused the token: nothing was written\n", cli->conf.server);
        ts_req_print_problem(&r);
        ts_response_free(&r);
        return rc;
    }
    if (rc != TS_EXIT_OK && rc != TS_EXIT_AUTH) { /* 403: a valid token of a role that cannot
                                                     read projects (an agent's) */
        if (r.status)
            ts_req_print_problem(&r);
        ts_response_free(&r);
        return rc;
    }
    ts_response_free(&r);
    const char *project = ts_args_get(a, "project");
    if (project && project[0]) {
        char esc[256], path[320];
        snprintf(path, sizeof(path), "/api/v1/projects/%s",
                 ts_req_escape(project, esc, sizeof(esc)));
        if ((rc = ts_req(cli, "GET", path, NULL, NULL, 0, &r)) != TS_EXIT_OK)
            return rc;
        ts_response_free(&r);
    }
    struct ts_error err;
    ts_error_clear(&err);
    if (ts_conf_store(&cli->conf, "server", cli->conf.server, &err) != TS_OK ||
        ts_conf_store(&cli->conf, "token", token, &err) != TS_OK ||
        (project && project[0] && ts_conf_store(&cli->conf, "project", project, &err) != TS_OK)) {
        fprintf(stderr, "error: %s\n", err.message);
        return TS_EXIT_USAGE;
    }
    printf("logged in to %s; wrote %s\n", cli->conf.server, cli->conf.path);
    return TS_EXIT_OK;
}

static int cmd_config_view(struct ts_cli *cli, const struct ts_args *a)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    const struct ts_conf *c = &cli->conf;
    char tok[64];
    mask(c->token, tok, sizeof(tok));
    if (fmt == TS_OUT_JSON) {
        json_t *o = json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:s?, s:s, s:s?, s:s?, s:s?}", "server",
                              c->server, "server_from", c->server_from, "token",
                              c->token ? tok : NULL, "token_from", c->token_from, "project",
                              c->project, "project_from", c->project_from, "config_file", c->path,
                              "ca", c->ca, "cert", c->cert, "key", c->key);
        ts_out_json(o);
        json_decref(o);
        return TS_EXIT_OK;
    }
    bool exists = access(c->path, F_OK) == 0;
    printf("config file: %s%s\n", c->path, exists ? "" : " (not written yet)");
    printf("server:      %s (from %s)\n", c->server, c->server_from);
    if (c->token)
        printf("token:       %s (from %s)\n", tok, c->token_from);
    else
        printf("token:       (none)\n");
    if (c->project)
        printf("project:     %s (from %s)\n", c->project, c->project_from);
    else
        printf("project:     (none)\n");
    if (c->ca)
        printf("ca:          %s (from %s)\n", c->ca, c->ca_from);
    if (c->cert)
        printf("cert:        %s (from %s)\n", c->cert, c->cert_from);
    if (c->key)
        printf("key:         %s (from %s)\n", c->key, c->key_from);
    return TS_EXIT_OK;
}

static int cmd_config_set(struct ts_cli *cli, const struct ts_args *a)
{
    const char *key = a->pos[0], *value = a->pos[1];
    if (!ts_conf_key_valid(key))
        return ts_cli_usage_error(
            cli, "unknown key \"%s\": server, token, project, ca, cert or key", key);
    struct ts_error err;
    ts_error_clear(&err);
    if (ts_conf_store(&cli->conf, key, value[0] ? value : NULL, &err) != TS_OK) {
        fprintf(stderr, "error: %s\n", err.message);
        return TS_EXIT_USAGE;
    }
    if (value[0])
        printf("%s set in %s\n", key, cli->conf.path);
    else
        printf("%s removed from %s\n", key, cli->conf.path);
    return TS_EXIT_OK;
}

/* Without GET /api/v1/whoami: the role as far as the routes tell it. */
static int whoami_probe(struct ts_cli *cli, json_t **me)
{
    struct ts_response r;
    int rc = ts_req(cli, "GET", "/api/v1/projects", NULL, NULL, 0, &r);
    if (rc != TS_EXIT_OK)
        return rc;
    json_t *projects = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(r.json, "projects"), i, p)
        json_array_append(projects, json_object_get(p, "name"));
    ts_response_free(&r);
    rc = ts_req(cli, "GET", "/api/v1/tokens", NULL, NULL, TS_REQ_KEEP, &r);
    const char *role = rc == TS_EXIT_OK ? "admin" : "member or viewer";
    ts_response_free(&r);
    if (rc != TS_EXIT_OK && rc != TS_EXIT_AUTH) {
        json_decref(projects);
        return rc;
    }
    *me = json_pack("{s:s, s:o}", "role", role, "projects", projects);
    return TS_EXIT_OK;
}

static int cmd_whoami(struct ts_cli *cli, const struct ts_args *a)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    if (cli->conf.token == NULL) {
        fprintf(stderr, "error: no token: run 'tessera login', or give --token or TESSERA_TOKEN\n");
        return TS_EXIT_AUTH;
    }
    struct ts_response r;
    json_t *me = NULL;
    int rc = ts_req(cli, "GET", "/api/v1/whoami", NULL, NULL, TS_REQ_KEEP, &r);
    if (rc == TS_EXIT_OK && json_is_object(r.json)) {
        me = json_incref(r.json);
        if (fmt == TS_OUT_JSON) {
            ts_out_raw(&r);
            ts_response_free(&r);
            json_decref(me);
            return TS_EXIT_OK;
        }
    } else if (r.status == 404 || r.status == 405) { /* an older server */
        rc = whoami_probe(cli, &me);
    } else if (rc != TS_EXIT_OK && r.status) {
        ts_req_print_problem(&r);
    }
    ts_response_free(&r);
    if (rc != TS_EXIT_OK)
        return rc;
    if (fmt == TS_OUT_JSON) {
        ts_out_json(me);
        json_decref(me);
        return TS_EXIT_OK;
    }
    /* the answer through the codec the server encodes it with (an older
     * server's probed role and projects decode the same) */
    struct ts_arena *ar = ts_arena_new();
    struct ts_whoami w;
    struct ts_error err;
    ts_error_clear(&err);
    enum ts_err e = ar != NULL ? ts_wire_whoami_decode(me, ar, &w, &err) : ts_error_nomem(&err);
    json_decref(me);
    if (e != TS_OK) {
        fprintf(stderr, "error: could not read the server's answer to whoami: %s\n", err.message);
        ts_arena_free(ar);
        return TS_EXIT_SERVER;
    }
    char tok[64];
    printf("server:   %s (from %s)\n", cli->conf.server, cli->conf.server_from);
    printf("token:    %s (from %s)\n", mask(cli->conf.token, tok, sizeof(tok)),
           cli->conf.token_from);
    if (w.name != NULL)
        printf("name:     %s\n", w.name);
    printf("role:     %s\n", w.role);
    if (w.nprojects > 0) {
        printf("projects:");
        for (size_t i = 0; i < w.nprojects; i++)
            printf("%s %s", i ? "," : "", w.projects[i]);
        printf("\n");
    }
    if (cli->conf.project)
        printf("project:  %s (default, from %s)\n", cli->conf.project, cli->conf.project_from);
    ts_arena_free(ar);
    return TS_EXIT_OK;
}

/* The client's release, then the server's (GET /api/v1/version): its
 * release, the agent protocols it accepts and its schema. The client line
 * comes first, so a server that does not answer still leaves it. */
static int cmd_version(struct ts_cli *cli, const struct ts_args *a)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    if (fmt != TS_OUT_JSON) {
        printf("client:   tessera %s (agent protocol %s)\n", TS_VERSION, TS_PROTOCOL_STR);
        fflush(stdout);
    }
    struct ts_response r;
    int rc = ts_req(cli, "GET", "/api/v1/version", NULL, NULL, 0, &r);
    if (rc != TS_EXIT_OK)
        return rc;
    if (fmt == TS_OUT_JSON) {
        json_t *o = json_pack("{s:{s:s,s:s},s:O}", "client", "version", TS_VERSION,
                              "protocol_version", TS_PROTOCOL_STR, "server", r.json);
        ts_out_json(o);
        json_decref(o);
        ts_response_free(&r);
        return TS_EXIT_OK;
    }
    char v[64], p[16], o[16], sv[16];
    printf("server:   tessera-server %s at %s\n", ts_out_member(r.json, "version", v, sizeof(v)),
           cli->conf.server);
    if (json_object_get(r.json, "protocol_version") != NULL)
        printf("protocol: %s (accepts agents %s to %s)\n",
               ts_out_member(r.json, "protocol_version", p, sizeof(p)),
               ts_out_member(r.json, "oldest_agent_protocol", o, sizeof(o)), p);
    else /* a server before the exchange: agents of protocol 1.0 */
        printf("protocol: %s (a server before the protocol exchange)\n", TS_PROTOCOL_NONE_STR);
    printf("schema:   %s\n", ts_out_member(r.json, "schema_version", sv, sizeof(sv)));
    ts_response_free(&r);
    return TS_EXIT_OK;
}

static const struct ts_opt output_opts[] = {TS_OPT_OUTPUT, TS_OPT_END};

const struct ts_cmd ts_cmds_session[] = {
    {"login", "[--server URL] [--token TOKEN] [-p PROJECT]",
     "check a token with the server and keep both in the config file",
     "The token is read from --token, else TESSERA_TOKEN, else typed (without echo) or\n"
     "piped on stdin. The config file is $XDG_CONFIG_HOME/tessera/config.json or\n"
     "~/.config/tessera/config.json, written with mode 0600.",
     login_opts, 0, 0, false, false, cmd_login},
    {"config view", "[-o table|json]", "show the server, token and project in use and their source",
     "Precedence: --server/--token/-p, then TESSERA_SERVER/TESSERA_TOKEN/TESSERA_PROJECT,\n"
     "then the config file, then http://127.0.0.1:8080 for the server.",
     output_opts, 0, 0, false, true, cmd_config_view},
    {"config set", "KEY VALUE",
     "set server, token, project, ca, cert or key in the config file (\"\" removes it)", NULL, NULL,
     2, 2, false, true, cmd_config_set},
    {"whoami", "[-o table|json]", "show the server, the token's role and projects", NULL,
     output_opts, 0, 0, false, false, cmd_whoami},
    {"version", "[-o table|json]", "show the client's and the server's release and protocol",
     "The server's version is public: no token is needed. 'tessera --version' shows the\n"
     "client's alone, without asking the server.",
     output_opts, 0, 0, false, false, cmd_version},
};
const size_t ts_cmds_session_count = TS_ARRAY_LEN(ts_cmds_session);
