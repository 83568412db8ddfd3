/*
 * version.h - the release (TS_VERSION, from CMake) and the agent protocol
 * version the server and the agents exchange at registration.
 *
 * The protocol is MAJOR.MINOR. A server accepts an agent of its own major
 * and of its own minor or the one before (rolling upgrades: upgrade the
 * server first, then the agents one by one); it refuses any other, older or
 * newer, with incompatible_protocol. An agent that sends no version speaks
 * 1.0, the protocol before the exchange existed.
 */
#ifndef TS_API_VERSION_H
#define TS_API_VERSION_H

#include <stdbool.h>

#define TS_PROTOCOL_MAJOR 1
#define TS_PROTOCOL_MINOR 1
/* "1.1": what the agent sends and the server announces */
#define TS_PROTOCOL_STR "1.1"
/* the version of an agent that sends none */
#define TS_PROTOCOL_NONE_STR "1.0"

struct ts_protocol {
    int major, minor;
};

/* "MAJOR.MINOR" (digits only, each 0..999) into *out; false on anything
 * else. s is borrowed. */
bool ts_protocol_parse(const char *s, struct ts_protocol *out);

/* Whether a server of protocol server accepts an agent of protocol agent. */
bool ts_protocol_accepts(struct ts_protocol server, struct ts_protocol agent);

/* The oldest agent protocol a server of protocol server accepts. */
struct ts_protocol ts_protocol_oldest(struct ts_protocol server);

#endif
