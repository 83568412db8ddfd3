#!/bin/sh
# agent_wire_typed.sh SOURCE_DIR - the agent holds structs, not JSON, of
# what it exchanges with the server (issue 16, STYLE.md "One protocol, both
# sides"): the registration, the desired state, the report, their answers
# and problems go through api/'s codecs. No file of agent/daemon/ reads or
# builds JSON member by member (json_object_get, json_pack, json_unpack)
# except those below, which read and write the agent's own files; each is
# named with what it reads. Fails naming each file:line elsewhere.
set -u
src=${1:-.}
cd "$src/agent/daemon" 2>/dev/null || { echo "no agent/daemon under $src"; exit 1; }
# FILE: why it may
own_files='
ajob.c: launch.json argv, env and working_dir (its sandbox, cgroup and other records: records.c)
supervisor.c: launch.json argv, env and working_dir
'
allowed=$(echo "$own_files" | sed -n 's/^\([a-z_]*\.c\):.*/\1/p')
n=$(ls ./*.c 2>/dev/null | wc -l)
[ "$n" -gt 20 ] || { echo "only $n sources in agent/daemon: is it the source folder?"; exit 1; }
hits=$(grep -nE '(^|[^A-Za-z0-9_])json_(object_get|pack|unpack)[a-z_]*[[:space:]]*\(' ./*.c ./*.h |
    sed 's|^\./||' | while IFS= read -r line; do
        f=${line%%:*}
        echo "$allowed" | grep -qx "$f" || echo "agent/daemon/$line"
    done)
if [ -n "$hits" ]; then
    echo "$hits" | sed 's|$| (wire data read or built by hand: use the codec in api/wire.h)|'
    echo "$(echo "$hits" | wc -l) places in agent/daemon/ handle JSON members by hand"
    exit 1
fi
echo "$n sources in agent/daemon/: the wire goes through api/'s codecs"
