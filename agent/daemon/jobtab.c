/*
 * jobtab.c - the agent's job list: find, wake (jobtab.h).
 */
#include "agent/daemon/jobtab.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "api/log.h"

void ts_jobtab_wake(struct ts_jobtab *t)
{
    uint64_t one = 1;
    if (write(t->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        ts_log_warn("could not wake the main loop: %s", strerror(errno));
}

struct ts_ajob *ts_jobtab_find(struct ts_jobtab *t, int64_t id, int attempt)
{
    for (struct ts_ajob *j = t->jobs; j != NULL; j = j->next)
        if (j->id == id && j->attempt == attempt)
            return j;
    return NULL;
}
