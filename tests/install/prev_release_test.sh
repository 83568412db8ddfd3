#!/usr/bin/env bash
# tests/install/prev_release_test.sh - an upgrade from the previous
# release's real binaries (issue 19; ctest install/prev_release, label
# install only: not in the default run). No release is tagged: the
# previous release is the commit that introduced the packaging, PREV below
# (2026-11-26: migrations up to 0007, an agent that sends no protocol
# version, which servers take as 1.0, the minor before this one's 1.1).
# Its tessera-server and tessera-agent are built from this repository's
# history (git archive of PREV, cmake, those two targets only: about 20 s
# on 2 cores), kept in TS_BUILD_DIR/prev-release for the next run. Then:
#   1. PREV's server makes its database (embedded PostgreSQL in its data
#      folder): a department, a project, an agent token; PREV's agent
#      (simulated GPU) registers and runs a job to its end, its output
#      logged; a second job waits (2 GPUs, the node has 1);
#   2. this build's server starts on that data folder: it applies the
#      migrations after 0007 and none before, and serves PREV's data: the
#      project and its quota, the finished job (succeeded, its log), the
#      waiting one still pending;
#   3. PREV's agent, unchanged, registers with this server (accepted: the
#      minor before its own), and a job submitted now runs on it and
#      succeeds: the wire PREV's agent speaks is still served.
# 77 when the history lacks PREV (a shallow clone) or it does not build
# here. Needs TS_BUILD_DIR and TS_SOURCE_DIR.
PREV=dde4702d7034d46409e0d6db6545ee943fd2e5c1
NEW_BIN=${TS_BUILD_DIR:?TS_BUILD_DIR must name a build folder}/bin
TS_BIN_DIR=$NEW_BIN
. "$(dirname "$0")/../browser/lib.sh"
. "$(dirname "$0")/checks.sh"
SRC=$(cd "${TS_SOURCE_DIR:?}" && pwd)
OLD=$(cd "$TS_BUILD_DIR" && pwd)/prev-release

# ---- PREV's binaries, built once ----------------------------------------------
if [ "$(cat "$OLD/commit" 2>/dev/null)" != $PREV ] || [ ! -x "$OLD/build/bin/tessera-server" ] ||
  [ ! -x "$OLD/build/bin/tessera-agent" ]; then
  if ! git -C "$SRC" cat-file -e "$PREV^{commit}" 2>/dev/null; then
    echo "SKIP: this clone's history lacks the previous release's commit $PREV (shallow?)"
    exit 77
  fi
  web_say "building the previous release ($PREV) in $OLD"
  rm -rf "$OLD"
  mkdir -p "$OLD/src"
  git -C "$SRC" archive "$PREV" | tar -x -C "$OLD/src"
  if ! { cmake -S "$OLD/src" -B "$OLD/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
    cmake --build "$OLD/build" -j2 --target tessera-server tessera-agent; } >"$OLD/build.log" 2>&1; then
    tail -n 20 "$OLD/build.log" >&2
    echo "SKIP: the previous release does not build here (its log: $OLD/build.log)"
    exit 77
  fi
  echo $PREV >"$OLD/commit"
fi
OLD_BIN=$OLD/build/bin
check "PREV's agent predates the protocol exchange (its --version names none)" \
  bash -c "! '$OLD_BIN/tessera-agent' --version 2>&1 | grep -q 'agent protocol'"

# start_server BIN: a tessera-server from BIN on the test's data folder
start_server() {
  rm -f "$WEB_TMP/server/server.addr"
  mkdir -p "$WEB_TMP/server"
  TESSERA_ADMIN_TOKEN=$WEB_TOKEN "$1/tessera-server" --data-dir "$WEB_TMP/server" \
    --listen 127.0.0.1:0 2>>"$WEB_TMP/server.log" &
  web_server_pid=$!
  web_wait 120 "$1/tessera-server" test -s "$WEB_TMP/server/server.addr"
  WEB_URL=$(cat "$WEB_TMP/server/server.addr")
  web_wait 60 "/readyz" curl -fsS "$WEB_URL/readyz"
}
stop_server() {
  kill -TERM "$web_server_pid"
  wait "$web_server_pid" 2>/dev/null || true
  web_server_pid=
}
# start_old_agent: PREV's agent as node old-1, one simulated GPU
start_old_agent() {
  mkdir -p "$WEB_TMP/agents/old-1"
  (cd "$WEB_TMP/agents/old-1" && exec "$OLD_BIN/tessera-agent" --server "$WEB_URL" \
    --token-file "$WEB_TMP/agent.token" --node old-1 --data-dir "$WEB_TMP/agents/old-1" \
    --gpus sim:1x8GiB --report-interval 1s 2>>"$WEB_TMP/agents/old-1/agent.log") &
  web_agent_pids=($!)
}
stop_old_agent() {
  kill -TERM "${web_agent_pids[0]}"
  wait "${web_agent_pids[0]}" 2>/dev/null || true
  web_agent_pids=()
}
# FIELD of the job NAME of project vision, in whichever list shape the server has
job_field() { # NAME FIELD
  api GET "/jobs?project=vision&state=pending,running,succeeded,failed&limit=100" |
    jq -r --arg n "$1" --arg f "$2" '[.. | objects | select(.name? == $n and has("state"))][0][$f] // empty'
}
state_of() { job_field "$1" state; }
id_of() { job_field "$1" id; }
is_state() { [ "$(state_of "$1")" = "$2" ]; }
submit() { # NAME GPUS COMMAND-JSON
  api POST /jobs "{\"name\":\"$1\",\"project\":\"vision\",\"command\":$3,\"gpu\":{\"count\":$2}}" >/dev/null
}

# ---- 1. PREV's server and agent make the data ------------------------------------
start_server "$OLD_BIN"
api POST /departments '{"name":"research","quota":{"gpus":4}}' >/dev/null
api POST /projects '{"name":"vision","department":"research","quota":{"gpus":2}}' >/dev/null
api POST /tokens '{"name":"agent-old-1","role":"agent","nodes":["old-1"]}' | tr -d ' ' |
  sed -n 's/.*"token":"\([^"]*\)".*/\1/p' >"$WEB_TMP/agent.token"
check "PREV's server made an agent token" test -s "$WEB_TMP/agent.token"
start_old_agent
submit old-done 1 '["sh","-c","echo written by the previous release"]'
web_wait 60 "old-done to succeed on PREV's agent" is_state old-done succeeded
submit old-wait 2 '["true"]'
web_wait 30 "old-wait to be pending" is_state old-wait pending
stop_old_agent
stop_server
check "PREV's server applied migrations up to 0007 only" \
  bash -c "grep -q 'applied migration version=7 ' '$WEB_TMP/server.log' &&
    ! grep -q 'applied migration version=8 ' '$WEB_TMP/server.log'"
mv "$WEB_TMP/server.log" "$WEB_TMP/server-prev.log"

# ---- 2. this release's server on PREV's data --------------------------------------
start_server "$NEW_BIN"
latest=$(ls "$SRC/migrations" | sed -n 's/^0*\([0-9][0-9]*\)_.*\.sql$/\1/p' | sort -n | tail -n 1)
check "this server applied the migrations after 0007 (8 to $latest)" \
  bash -c "for v in \$(seq 8 $latest); do grep -q \"applied migration version=\$v \" '$WEB_TMP/server.log' || exit 1; done"
check "  and none of PREV's again" \
  bash -c "! grep -Eq 'applied migration version=[1-7] ' '$WEB_TMP/server.log'"
out=$(api GET /projects/vision | tr -d ' \n')
check "PREV's project is there, in its department, with its quota" \
  has "$out" '"name":"vision","department":"research"'
check "  its quota of 2 GPUs" has "$out" '"gpus":2'
check "PREV's finished job is there, succeeded" is_state old-done succeeded
check "  with the output PREV's agent shipped" \
  has "$(api GET "/jobs/$(id_of old-done)/logs")" "written by the previous release"
check "PREV's waiting job is still pending" is_state old-wait pending

# ---- 3. PREV's agent with this server ---------------------------------------------
start_old_agent
web_wait 60 "PREV's agent to register with this server" \
  grep -q "node registered name=old-1" "$WEB_TMP/server.log"
check "this server accepted PREV's agent (no protocol_version: 1.0)" \
  bash -c "! grep -q 'registration refused' '$WEB_TMP/agents/old-1/agent.log'"
submit after-upgrade 1 '["sh","-c","echo run by the previous release agent"]'
web_wait 60 "a job to succeed on PREV's agent under this server" is_state after-upgrade succeeded
check "a job submitted to this server ran on PREV's agent and succeeded" is_state after-upgrade succeeded
check "  its output shipped by PREV's agent" \
  has "$(api GET "/jobs/$(id_of after-upgrade)/logs")" "run by the previous release agent"

[ "$fails" = 0 ] || web_fail "$fails checks failed"
web_say "all checks passed"
