#!/bin/sh
# layers_enforced.sh BUILD_DIR [SOURCE_DIR] - the build itself refuses an include that
# crosses a layer (issue 16, cmake/layers.cmake): for one source of each
# layer, its own compile command from BUILD_DIR/compile_commands.json is run
# (syntax only) over a probe file that includes one header. An allowed
# header must compile (else the command, not the layer, would be what
# fails); a forbidden one must fail, and because the header is not there or
# is refused by name (not for some other error). Fails naming each case.
#
# usage: tests/unit/layers_enforced.sh BUILD_DIR [SOURCE_DIR]
set -u
build=$1
db=$build/compile_commands.json
[ -f "$db" ] || { echo "no $db: configure with CMAKE_EXPORT_COMPILE_COMMANDS"; exit 1; }
src=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
n=0

# command_of FILE: the compile command of SOURCE_DIR/FILE and its folder,
# as two lines (CMake writes "directory", "command", "file" per entry, one
# member a line; JSON's \" and \\ undone).
command_of() {
    awk -v want="\"file\": \"$src/$1\"" '
        /^ *"directory": / { d = $0; sub(/^ *"directory": "/, "", d); sub(/",?$/, "", d) }
        /^ *"command": / { c = $0; sub(/^ *"command": "/, "", c); sub(/",?$/, "", c) }
        index($0, want) { gsub(/\\"/, "\"", c); gsub(/\\\\/, "\\", c); print d; print c; exit }' "$db"
}

# probe FILE HEADER allowed|refused [MISSING]: FILE's command over
# `#include HEADER`; refused means the compiler names MISSING (default:
# HEADER itself) as not found, or stops at a refusal of cmake/layers.cmake.
probe() {
    n=$((n + 1))
    out=$(command_of "$1")
    if [ -z "$out" ]; then
        echo "FAIL $1: not in $db"
        bad=$((bad + 1))
        return
    fi
    dir=$(echo "$out" | sed -n 1p)
    cmd=$(echo "$out" | sed -n 2p)
    printf '#include %s\nint ts_layer_probe;\n' "$2" >"$tmp/probe.c"
    # the source and its object give way to the probe, checked only
    cmd=$(echo "$cmd" | sed "s| -o [^ ]*| -fsyntax-only|; s| -c [^ ]*$| -c $tmp/probe.c|")
    (cd "$dir" && eval "$cmd") >"$tmp/out" 2>&1
    rc=$?
    case "$3" in
    allowed)
        if [ $rc -ne 0 ]; then
            echo "FAIL $1 cannot include $2, which its layer allows:"
            sed 's/^/    /' "$tmp/out"
            bad=$((bad + 1))
        else
            echo "ok   $1 includes $2"
        fi ;;
    refused)
        if [ $rc -eq 0 ]; then
            echo "FAIL $1 includes $2, which its layer forbids"
            bad=$((bad + 1))
        elif grep -q "${4:-$(echo "$2" | tr -d '"<>')}: No such file or directory" "$tmp/out" ||
            grep -q '#error .*cmake/layers.cmake' "$tmp/out"; then
            echo "ok   $1 refused $2: $(grep -m1 'No such file\|layers.cmake' "$tmp/out" | sed 's/.*error: //')"
        else
            echo "FAIL $1 over $2 failed for another reason:"
            sed 's/^/    /' "$tmp/out"
            bad=$((bad + 1))
        fi ;;
    esac
}

# the agent's daemon: api/ and agent/, never server/ or libpq
probe agent/daemon/agent.c '"agent/daemon/agent.h"' allowed
probe agent/daemon/agent.c '"api/wire.h"' allowed
probe agent/daemon/agent.c '"server/store/store.h"' refused
probe agent/daemon/agent.c '"server/sched/sched.h"' refused
probe agent/daemon/agent.c '<libpq-fe.h>' refused
probe agent/daemon/agent.c '<microhttpd.h>' refused
probe agent/shim/init.c '"agent/ledger/ledger.h"' allowed
probe agent/shim/init.c '"server/http/http.h"' refused
# the interposer, the simulated GPU, gpuload: never the daemon
probe agent/shim/init.c '"agent/daemon/broker.h"' refused
probe agent/simgpu/cuda.c '"agent/simgpu/state.h"' allowed
probe agent/simgpu/cuda.c '"agent/shim/swap.h"' refused
probe agent/gpuload/run.c '"agent/daemon/agent.h"' refused
probe agent/ledger/ledger.c '"api/err.h"' refused
# the CLI and the base: api/ only
probe api/cli/main.c '"api/cli/cli.h"' allowed
probe api/cli/main.c '"server/server.h"' refused
probe api/cli/main.c '"agent/daemon/agent.h"' refused
probe api/wire.c '"server/store/store.h"' refused
# the scheduler core: api/ and server/sched/, no store, no libpq
probe server/sched/decide.c '"server/sched/sched.h"' allowed
probe server/sched/decide.c '"server/store/store.h"' refused
probe server/sched/decide.c '<libpq-fe.h>' refused
# the store: libpq is its own, HTTP and the rest of the server are not
probe server/store/db.c '<libpq-fe.h>' allowed
probe server/store/db.c '"server/store/db_pg.h"' allowed
probe server/store/db.c '"server/http/http.h"' refused
probe server/store/db.c '"server/server.h"' refused
probe server/store/db.c '<microhttpd.h>' refused
# the HTTP layer: microhttpd is its own, the store and handlers are not
probe server/http/http.c '<microhttpd.h>' allowed
probe server/http/http.c '"server/store/store.h"' refused
probe server/http/http.c '"server/server.h"' refused
probe server/http/http.c '<libpq-fe.h>' refused
# the rest of the server: server/ through the store's functions, never
# libpq, the store's statements, microhttpd or the agent
probe server/handlers/jobs.c '"server/store/store.h"' allowed
probe server/handlers/jobs.c '<libpq-fe.h>' refused
probe server/handlers/jobs.c '"server/store/db_pg.h"' refused libpq-fe.h
probe server/handlers/jobs.c '<microhttpd.h>' refused
probe server/handlers/jobs.c '"agent/ledger/ledger.h"' refused
probe server/main.c '"agent/daemon/agent.h"' refused

[ "$bad" -eq 0 ] || { echo "$bad of $n cases: the build does not hold its layers"; exit 1; }
echo "$n cases: every layer builds what it may include and refuses the rest"
