#!/bin/sh
# includes_layered.sh SOURCE_DIR - the layers the folders promise (DESIGN.md,
# STYLE.md), checked over the sources: agent/ includes nothing of server/
# and server/ nothing of agent/; only server/store/ includes <libpq-fe.h> or
# calls libpq (PQ...()); only server/http/ includes <microhttpd.h>; api/,
# the base every binary links, includes neither agent/ nor server/. Tests
# are not scanned. Fails naming each file:line that crosses a layer.
set -u
src=${1:-.}
cd "$src" || exit 1
bad=0
# cross FILES_FOLDER ALLOWED_PREFIX PATTERN WHAT: every match of PATTERN in
# the C files under FILES_FOLDER, except under ALLOWED_PREFIX ("": none),
# is named.
cross() {
    hits=$(grep -rnE --include='*.[ch]' "$3" "$1" 2>/dev/null | grep -v "^${2:-//}" | sort)
    if [ -n "$hits" ]; then
        echo "$hits" | sed "s|\$| ($4)|"
        bad=$((bad + $(echo "$hits" | wc -l)))
    fi
}
n=$(find agent server api -name '*.[ch]' 2>/dev/null | wc -l)
[ "$n" -gt 100 ] || { echo "only $n sources under $src: is it the source folder?"; exit 1; }
cross agent "" '^[[:space:]]*#[[:space:]]*include[[:space:]]*"server/' "agent/ includes server/"
cross server "" '^[[:space:]]*#[[:space:]]*include[[:space:]]*"agent/' "server/ includes agent/"
cross api "" '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(agent|server)/' "api/ includes agent/ or server/"
for d in agent server api; do
    cross $d server/store/ '^[[:space:]]*#[[:space:]]*include[[:space:]]*<libpq-fe\.h>' \
        "libpq outside server/store/"
    cross $d server/store/ '(^|[^A-Za-z0-9_])PQ[a-zA-Z]+[[:space:]]*\(' "a libpq call outside server/store/"
    cross $d server/http/ '^[[:space:]]*#[[:space:]]*include[[:space:]]*<microhttpd\.h>' \
        "microhttpd outside server/http/"
done
[ "$bad" -eq 0 ] || { echo "$bad includes or calls cross a layer"; exit 1; }
echo "$n sources: no include or call crosses a layer"
