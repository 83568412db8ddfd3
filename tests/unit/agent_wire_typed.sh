#!/bin/sh
# agent_wire_typed.sh SOURCE_DIR - the agent holds structs, not JSON, of
# what it exchanges with the server (issue 16, STYLE.md "One protocol, both
# sides"): the registration, the desired state, the report, their answers,
# job output, whoami and problems go through api/'s codecs, and the agent's
# own files (status.json, job.json, stop.json, launch.json) through the
# typed records of records.c, whose member tables drive both directions.
# No file of agent/daemon/ reads or builds JSON member by member
# (json_object_get, json_pack, json_unpack). Fails naming each file:line.
set -u
src=${1:-.}
cd "$src/agent/daemon" 2>/dev/null || { echo "no agent/daemon under $src"; exit 1; }
n=$(ls ./*.c 2>/dev/null | wc -l)
[ "$n" -gt 20 ] || { echo "only $n sources in agent/daemon: is it the source folder?"; exit 1; }
hits=$(grep -nE '(^|[^A-Za-z0-9_])json_(object_get|pack|unpack)[a-z_]*[[:space:]]*\(' ./*.c ./*.h |
    sed 's|^\./|agent/daemon/|')
if [ -n "$hits" ]; then
    echo "$hits" | sed 's|$| (JSON members by hand: use a codec of api/wire.h or a record of records.h)|'
    echo "$(echo "$hits" | wc -l) places in agent/daemon/ handle JSON members by hand"
    exit 1
fi
echo "$n sources in agent/daemon/: the wire and the agent's files go through codecs"
