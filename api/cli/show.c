/*
 * show.c - GET, then the server's JSON unchanged or a view of it (show.h).
 */
#include "api/cli/show.h"

#include <stdio.h>

#include "api/cli/out.h"
#include "api/cli/req.h"

int ts_show_get(struct ts_cli *cli, int fmt, const char *path, ts_show_fn show, void *ud)
{
    struct ts_response r;
    int rc = ts_req(cli, "GET", path, NULL, NULL, 0, &r);
    if (rc != TS_EXIT_OK)
        return rc;
    if (fmt == TS_OUT_JSON)
        ts_out_raw(&r);
    else
        rc = show(cli, &r, ud);
    ts_response_free(&r);
    return rc;
}

int ts_show_named(struct ts_cli *cli, const struct ts_args *a, const char *collection,
                  ts_show_fn show, void *ud)
{
    int fmt = ts_cli_format(cli, a);
    if (fmt < 0)
        return TS_EXIT_USAGE;
    char esc[256], path[320];
    snprintf(path, sizeof(path), "/api/v1/%s/%s", collection,
             ts_req_escape(a->pos[0], esc, sizeof(esc)));
    return ts_show_get(cli, fmt, path, show, ud);
}

void ts_show_rows(const struct ts_cli *cli, const json_t *items, const struct ts_show_table *tab,
                  void *ud)
{
    struct ts_table *t = ts_table_new(tab->cols, tab->ncols);
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
        tab->row(t, item, ud);
    ts_cli_table_print(cli, t);
    ts_table_free(t);
}

struct list_show {
    const char *member;
    const struct ts_show_table *tab;
    void *ud;
};

static int show_member_rows(struct ts_cli *cli, const struct ts_response *r, void *ud)
{
    const struct list_show *l = ud;
    ts_show_rows(cli, json_object_get(r->json, l->member), l->tab, l->ud);
    return TS_EXIT_OK;
}

int ts_show_list(struct ts_cli *cli, int fmt, const char *path, const char *member,
                 const struct ts_show_table *tab, void *ud)
{
    struct list_show l = {member, tab, ud};
    return ts_show_get(cli, fmt, path, show_member_rows, &l);
}
