/*
 * version.c - the agent protocol version: parse and the compatibility rule
 * (api/version.h).
 */
#include "api/version.h"

#include <ctype.h>
#include <stdlib.h>

static bool parse_part(const char **s, int *out)
{
    int v = 0, n = 0;
    while (isdigit((unsigned char)**s)) {
        if (++n > 3)
            return false;
        v = v * 10 + (**s - '0');
        (*s)++;
    }
    *out = v;
    return n > 0;
}

bool ts_protocol_parse(const char *s, struct ts_protocol *out)
{
    struct ts_protocol p;
    if (s == NULL || !parse_part(&s, &p.major) || *s++ != '.' || !parse_part(&s, &p.minor) ||
        *s != '\0')
        return false;
    *out = p;
    return true;
}

struct ts_protocol ts_protocol_oldest(struct ts_protocol server)
{
    return (struct ts_protocol){server.major, server.minor > 0 ? server.minor - 1 : 0};
}

bool ts_protocol_accepts(struct ts_protocol server, struct ts_protocol agent)
{
    struct ts_protocol oldest = ts_protocol_oldest(server);
    return agent.major == server.major && agent.minor <= server.minor &&
           agent.minor >= oldest.minor;
}
