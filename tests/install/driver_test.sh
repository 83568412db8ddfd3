#!/usr/bin/env bash
# tests/install/driver_test.sh - the agent refuses to start on a node whose
# CUDA driver it cannot use (issue 19), saying what it looked for and the
# versions it found: its simgpu folder (--simgpu-lib-dir) without
# libcuda.so.1, with a file that is not a library, with a library that is
# not a CUDA driver; and it starts with the whole folder (the simgpu path
# still works) and says which driver it checked. --desired-file: no server
# is needed for any of this, and none is contacted.
# Needs TS_BUILD_DIR (a built build folder).
set -euo pipefail
B=${TS_BUILD_DIR:?TS_BUILD_DIR must name a build folder}
BIN=$B/bin SIM=$B/lib/simgpu
T=$(mktemp -d "${TMPDIR:-/tmp}/tessera-driver.XXXXXX")
agent_pid=
cleanup() {
  [ -n "$agent_pid" ] && kill -TERM "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
. "$(dirname "$0")/checks.sh"

echo '{"jobs": []}' >"$T/desired.json"
run_agent() { # NAME LIBDIR: start an agent on a simulated GPU with simgpu from LIBDIR
  mkdir -p "$T/$1"
  "$BIN/tessera-agent" --node "$1" --data-dir "$T/$1" --gpus sim:1x8GiB --sandbox off \
    --desired-file "$T/desired.json" --simgpu-lib-dir "$2" 2>"$T/$1.log" &
  agent_pid=$!
}
refused() { # NAME LIBDIR: the agent exits 1 within 20 s; prints its log
  run_agent "$1" "$2"
  local rc=0
  for _ in $(seq 100); do kill -0 "$agent_pid" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$agent_pid" 2>/dev/null; then
    echo "  still running after 20 s"
    kill -TERM "$agent_pid"
  fi
  wait "$agent_pid" || rc=$?
  agent_pid=
  [ "$rc" = 1 ] || { echo "  exit status $rc"; return 1; }
}

cp -rL "$SIM" "$T/missing"
rm "$T/missing/libcuda.so.1"
check "no libcuda.so.1: the agent exits 1" refused missing "$T/missing"
said=$(cat "$T/missing.log")
check "  saying it could not load the driver and where it looked" \
  has "$said" "could not load the CUDA driver: looked for simgpu's driver $T/missing/libcuda.so.1"
check "  and the versions it found" has "$said" "versions found: NVML driver 550.54.15-simgpu"
check "  and never reached node.json (it did not get as far as registering)" test ! -e "$T/missing/node.json"

cp -rL "$SIM" "$T/broken"
printf 'not a library %.0s' $(seq 600) >"$T/broken/libcuda.so.1"
check "a broken libcuda.so.1: the agent exits 1" refused broken "$T/broken"
check "  with the loader's reason" has "$(cat "$T/broken.log")" "$T/broken/libcuda.so.1: invalid ELF header"

cp -rL "$SIM" "$T/other"
cp "$SIM/libnvidia-ml.so.1" "$T/other/libcuda.so.1"
check "a library that is not a CUDA driver: the agent exits 1" refused other "$T/other"
check "  naming what it lacks" has "$(cat "$T/other.log")" "is not usable: it has no cuInit"
check "  and the CUDA version the shim needs" has "$(cat "$T/other.log")" "the shim needs CUDA 11.0 or later"

run_agent good "$SIM"
for _ in $(seq 100); do [ -s "$T/good/node.json" ] && break; sleep 0.2; done
check "with simgpu's driver the agent starts" test -s "$T/good/node.json"
check "  and says which driver it checked" has "$(cat "$T/good.log")" "cuda driver path="
check "  and its CUDA version" has "$(cat "$T/good.log")" "cuda=12.4 driver=550.54.15-simgpu"
[ "$fails" = 0 ] || { echo "$fails checks failed"; exit 1; }
echo "all checks passed"
