/*
 * join.h - `tessera-agent --join` (join.c), which needs nothing of the
 * running agent's state.
 */
#ifndef TS_AGENT_DAEMON_JOIN_H
#define TS_AGENT_DAEMON_JOIN_H

/* `tessera-agent --join URL TOKEN|- [--node NAME] [--config FILE]`: checks
 * the token with the server, writes it and the config file; starts nothing.
 * Returns the exit status. */
int ts_agent_join(int argc, char **argv);

#endif /* TS_AGENT_DAEMON_JOIN_H */
