#!/usr/bin/env bash
# tests/install/version_test.sh - releases and the agent protocol (issue 19):
#   - tessera-server, tessera-agent and tessera --version print the release
#     and the agent protocol; `tessera version` adds the server's (public:
#     no token), and still prints the client's when no server answers;
#   - GET /api/v1/version names the protocol and the oldest agent accepted;
#   - registration: the server's protocol and the minor before it (an agent
#     that sends none is 1.0) are accepted; an older minor, a newer minor, an
#     other major and a malformed version are refused (409
#     incompatible_protocol, 422) with nothing written;
#   - an agent the server refuses prints the server's reason and exits 1
#     (TS_TEST_AGENT_PROTOCOL makes it claim another protocol).
# Needs TS_BUILD_DIR (a built build folder).
TS_BIN_DIR=${TS_BUILD_DIR:?TS_BUILD_DIR must name a build folder}/bin
. "$(dirname "$0")/../browser/lib.sh"

. "$(dirname "$0")/checks.sh"

release=$(sed -n 's/^project(tessera VERSION \([0-9.]*\).*/\1/p' "$(dirname "$0")/../../CMakeLists.txt")
[ -n "$release" ] || web_fail "no release in CMakeLists.txt"
for b in tessera-server tessera-agent tessera; do
  out=$("$TS_BIN_DIR/$b" --version 2>&1) || web_fail "$b --version failed: $out"
  check "$b --version prints its release and protocol" has "$out" "$b $release (agent protocol 1.1)"
done
out=$("$TS_BIN_DIR/tessera" --server http://127.0.0.1:1 version 2>&1) && web_fail "version without a server succeeded"
check "tessera version without a server still prints the client" has "$out" "client:   tessera $release"
check "and says why it has no server's" has "$out" "127.0.0.1:1"

web_start_server
out=$(curl -fsS "$WEB_URL/api/v1/version")
out=$(sed 's/": /":/g' <<<"$out")
check "GET /api/v1/version names the protocol" has "$out" '"protocol_version":"1.1"'
check "and the oldest agent protocol it accepts" has "$out" '"oldest_agent_protocol":"1.0"'
out=$(env -u TESSERA_TOKEN "$TS_BIN_DIR/tessera" --server "$WEB_URL" version 2>&1) ||
  web_fail "tessera version failed: $out"
check "tessera version shows the server's release" has "$out" "server:   tessera-server $release at $WEB_URL"
check "and its protocols" has "$out" "protocol: 1.1 (accepts agents 1.0 to 1.1)"

reg() { # NODE PROTOCOL-MEMBER: the body and status of a registration, JSON spaces dropped
  curl -sS -X PUT -H "Authorization: Bearer $WEB_TOKEN" -H 'Content-Type: application/json' \
    --data "{\"cpu\":4,\"memory_bytes\":1073741824,\"gpus\":[]$2}" -w ' %{http_code}' \
    "$WEB_URL/api/v1/nodes/$1" | sed 's/": /":/g'
}
nodes() { api GET /nodes | grep -o '"name": *"v[0-9a-z-]*"' | sort | tr -d ' \n'; }
for p in none 1.1 1.0; do
  m=",\"protocol_version\":\"$p\""
  [ "$p" = none ] && m=
  out=$(reg "v-ok-${p/./-}" "$m")
  check "an agent of protocol $p registers" has "$out" " 200"
done
before=$(nodes)
for p in 0.9 1.2 2.0 2.1; do
  out=$(reg v-refused ",\"protocol_version\":\"$p\"")
  check "an agent of protocol $p is refused with 409" has "$out" " 409"
  check "  as incompatible_protocol" has "$out" '"code":"incompatible_protocol"'
  check "  saying what the server accepts" has "$out" "agent protocol $p is not supported by this server (tessera-server $release), which accepts 1.0 to 1.1"
done
out=$(reg v-refused ',"protocol_version":"1.1.0"')
check "a malformed protocol_version is 422" has "$out" '"field":"protocol_version"'
check "  saying the form" has "$out" 'protocol_version must be MAJOR.MINOR'

check "a refused agent's node is not written" test "$(nodes)" = "$before"

# the real agent, claiming a protocol the server does not speak
api POST /tokens '{"name":"agent-old","role":"agent"}' | tr -d ' ' | sed -n 's/.*"token":"\([^"]*\)".*/\1/p' \
  >"$WEB_TMP/agent.token"
mkdir -p "$WEB_TMP/agents/v-agent"
set +e
(cd "$WEB_TMP/agents/v-agent" && TS_TEST_AGENT_PROTOCOL=2.0 timeout 60 "$TS_BIN_DIR/tessera-agent" \
  --server "$WEB_URL" --token-file "$WEB_TMP/agent.token" --node v-agent \
  --data-dir "$WEB_TMP/agents/v-agent" --gpus sim:1x8GiB --sandbox off 2>"$WEB_TMP/agents/v-agent/agent.log")
rc=$?
set -e
said=$(cat "$WEB_TMP/agents/v-agent/agent.log")
check "the refused agent exits 1 (not 124: it does not retry forever)" test "$rc" = 1
check "and prints the server's reason" has "$said" "agent protocol 2.0 is not supported by this server"
check "and what to do" has "$said" "upgrade the server before its agents"
check "its node is not registered" test "$(nodes)" = "$before"

[ "$fails" = 0 ] || web_fail "$fails checks failed"
web_say "all checks passed"
