# tests/browser/lib.sh - sourced by the browser tests' drivers: a real
# tessera-server (its own embedded PostgreSQL) in a temporary folder, node
# agents on simulated GPUs, API calls with curl, and a cleanup that leaves
# nothing running, even when the test fails or is interrupted.
#
# Needs TS_BIN_DIR (the build's bin/). Sets WEB_TMP, WEB_URL, WEB_TOKEN.

set -euo pipefail
[ -d "${TS_BIN_DIR:-}" ] || { echo "FAIL: TS_BIN_DIR must name the build's bin/ folder" >&2; exit 1; }
TS_BIN_DIR=$(cd "$TS_BIN_DIR" && pwd)

WEB_TOKEN=${WEB_TOKEN:-browser-test-admin-0123456789abcdef}
WEB_TMP=$(mktemp -d "${TMPDIR:-/tmp}/tessera-web.XXXXXX")
# as root, the embedded PostgreSQL runs as user postgres, who must reach it
chmod 755 "$WEB_TMP"
WEB_URL=
web_server_pid=
web_agent_pids=()
web_child_pid= # a driver's foreground work, run in the background

web_say() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
web_fail() {
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}

# api METHOD PATH [JSON] [HEADER...]: the body on stdout; non-2xx fails.
api() {
  local method=$1 path=$2 body=${3:-}
  shift $(($# < 3 ? $# : 3))
  local hdr=() h out code
  for h in "$@"; do hdr+=(-H "$h"); done
  out=$(curl -sS -X "$method" -H "Authorization: Bearer $WEB_TOKEN" -H 'Content-Type: application/json' \
    "${hdr[@]}" ${body:+--data "$body"} -w '\n%{http_code}' "$WEB_URL/api/v1$path") ||
    web_fail "$method $path: curl failed"
  code=${out##*$'\n'}
  out=${out%$'\n'*}
  case $code in
    2??) printf '%s\n' "$out" ;;
    *) web_fail "$method $path: HTTP $code $out" ;;
  esac
}

# Processes whose working folder lies in WEB_TMP: the agents' supervisors
# and job processes (jobs outlive their agent by design).
web_leftovers() {
  local d pid cwd
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" = $$ ] && continue
    cwd=$(readlink "$d/cwd" 2>/dev/null) || continue
    case $cwd in "$WEB_TMP" | "$WEB_TMP"/*) echo "$pid" ;; esac
  done
}

web_cleanup() {
  local rc=$? i p
  trap - EXIT INT TERM
  set +e
  if [ -n "$web_child_pid" ]; then
    kill -TERM "$web_child_pid" 2>/dev/null
    wait "$web_child_pid" 2>/dev/null
  fi
  if [ -n "$WEB_URL" ] && [ -n "$web_server_pid" ] && kill -0 "$web_server_pid" 2>/dev/null; then
    # cancel every job so that agents stop them (grace 2 s), then wait
    for id in $(curl -sS -H "Authorization: Bearer $WEB_TOKEN" \
      "$WEB_URL/api/v1/jobs?state=pending,scheduled,running,evicting&limit=1000" 2>/dev/null |
      grep -o '"id":[0-9]*' | cut -d: -f2); do
      curl -sS -o /dev/null -X DELETE -H "Authorization: Bearer $WEB_TOKEN" "$WEB_URL/api/v1/jobs/$id"
    done
    for i in $(seq 50); do
      curl -sS -H "Authorization: Bearer $WEB_TOKEN" \
        "$WEB_URL/api/v1/jobs?state=scheduled,running,evicting,cancelling&limit=1" 2>/dev/null |
        grep -q '"id"' || break
      sleep 0.2
    done
  fi
  for p in "${web_agent_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${web_agent_pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ -n "$web_server_pid" ]; then
    kill -TERM "$web_server_pid" 2>/dev/null
    for i in $(seq 300); do kill -0 "$web_server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$web_server_pid" 2>/dev/null
    wait "$web_server_pid" 2>/dev/null
  fi
  p=$(web_leftovers)
  if [ -n "$p" ]; then
    kill -TERM $p 2>/dev/null
    sleep 1
    p=$(web_leftovers)
    [ -n "$p" ] && kill -KILL $p 2>/dev/null
  fi
  # a sanitizer build reports into the logs (leaks only at exit)
  for p in "$WEB_TMP/server.log" "$WEB_TMP"/agents/*/agent.log; do
    if [ -f "$p" ] && grep -Eq 'Sanitizer|runtime error:' "$p"; then
      echo "FAIL: a sanitizer report in ${p#"$WEB_TMP"/}:" >&2
      grep -E -A 20 'Sanitizer|runtime error:' "$p" | head -n 40 >&2
      rc=1
    fi
  done
  if [ $rc -ne 0 ]; then
    for p in "$WEB_TMP/server.log" "$WEB_TMP"/agents/*/agent.log; do
      [ -f "$p" ] || continue
      echo "--- last lines of ${p#"$WEB_TMP"/} ---" >&2
      tail -n 30 "$p" >&2
    done
  fi
  rm -rf "$WEB_TMP"
  exit $rc
}
trap web_cleanup EXIT
trap 'exit 130' INT TERM

# web_start_server [ARGS...]: start tessera-server on a free port; wait
# until /readyz answers.
web_start_server() {
  mkdir -p "$WEB_TMP/server"
  TESSERA_ADMIN_TOKEN=$WEB_TOKEN "$TS_BIN_DIR/tessera-server" --data-dir "$WEB_TMP/server" \
    --listen 127.0.0.1:0 "$@" 2>"$WEB_TMP/server.log" &
  web_server_pid=$!
  local i
  for i in $(seq 600); do
    if [ -s "$WEB_TMP/server/server.addr" ] &&
      curl -fsS "$(cat "$WEB_TMP/server/server.addr")/readyz" >/dev/null 2>&1; then
      WEB_URL=$(cat "$WEB_TMP/server/server.addr")
      return 0
    fi
    kill -0 "$web_server_pid" 2>/dev/null || web_fail "tessera-server exited at start"
    sleep 0.1
  done
  web_fail "tessera-server was not ready within 60 s"
}

# web_start_agent NODE GPUS: an agent on simulated GPUs (e.g. sim:2x80GiB).
web_start_agent() {
  local node=$1 gpus=$2
  # a token of its own, that may act only as its node
  if [ ! -s "$WEB_TMP/agent-$node.token" ]; then
    api POST /tokens "{\"name\":\"browser-agent-$node\",\"role\":\"agent\",\"nodes\":[\"$node\"]}" |
      sed -n 's/.*"token":"\([^"]*\)".*/\1/p' >"$WEB_TMP/agent-$node.token"
  fi
  mkdir -p "$WEB_TMP/agents/$node"
  # started from inside WEB_TMP, so that web_leftovers finds its children
  (cd "$WEB_TMP/agents/$node" && exec "$TS_BIN_DIR/tessera-agent" --server "$WEB_URL" \
    --token-file "$WEB_TMP/agent-$node.token" --node "$node" --data-dir "$WEB_TMP/agents/$node" \
    --gpus "$gpus" --report-interval 1s 2>"$WEB_TMP/agents/$node/agent.log") &
  web_agent_pids+=($!)
}

# web_wait SECONDS WHAT COMMAND...: run COMMAND every 0.2 s until it succeeds.
web_wait() {
  local secs=$1 what=$2 i
  shift 2
  for i in $(seq $((secs * 5))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  web_fail "timed out after ${secs}s waiting for $what"
}
