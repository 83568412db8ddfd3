#!/usr/bin/env bash
# tests/install/join_tls_test.sh - `tessera-agent --join` against an https
# server (issue 19): it prints the server certificate's SHA-256 fingerprint
# (the one `openssl x509 -fingerprint -sha256` prints); a certificate the
# config file's ca does not vouch for is refused with a hint to pin it;
# --server-fingerprint pins it: a wrong one is refused with nothing written,
# the right one joins and saves the certificate as the agent's ca; an http
# server with a pin is refused. Certificates are made with the openssl tool,
# as in tests/e2e/test_tls.c. Needs TS_BUILD_DIR.
TS_BIN_DIR=${TS_BUILD_DIR:?TS_BUILD_DIR must name a build folder}/bin
. "$(dirname "$0")/../browser/lib.sh"

. "$(dirname "$0")/checks.sh"

C=$WEB_TMP/certs
mkdir -p "$C"
(
  set -e
  cd "$C"
  exec 2>openssl.log
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
    -days 2 -subj /CN=ca -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key \
    -out server.csr -subj /CN=localhost
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
    -days 2 -extfile server.ext
  chmod 600 ./*.key
) || web_fail "openssl failed: $(cat "$C/openssl.log")"
want=$(openssl x509 -in "$C/server.pem" -noout -fingerprint -sha256 | sed 's/.*=//')

mkdir -p "$WEB_TMP/server"
TESSERA_ADMIN_TOKEN=$WEB_TOKEN "$TS_BIN_DIR/tessera-server" --data-dir "$WEB_TMP/server" \
  --listen 127.0.0.1:0 --tls-cert "$C/server.pem" --tls-key "$C/server.key" 2>"$WEB_TMP/server.log" &
web_server_pid=$!
web_wait 60 "the https server" test -s "$WEB_TMP/server/server.addr"
url=$(cat "$WEB_TMP/server/server.addr")
web_wait 60 "/readyz" curl -fsS --cacert "$C/ca.pem" "$url/readyz"
token=$(curl -fsS --cacert "$C/ca.pem" -H "Authorization: Bearer $WEB_TOKEN" --json \
  '{"name":"n1-agent","role":"agent","nodes":["n1"]}' "$url/api/v1/tokens" |
  tr -d ' ' | sed -n 's/.*"token":"\([^"]*\)".*/\1/p')
[ -n "$token" ] || web_fail "no agent token"

A=$WEB_TMP/etc/agent.conf
mkdir -p "$WEB_TMP/etc"
printf 'data-dir = /var/lib/tessera/agent\n' >"$A"
cp "$A" "$WEB_TMP/agent.conf.orig"
join() { "$TS_BIN_DIR/tessera-agent" --join "$@" - --config "$A" <<<"$token" 2>&1; }
untouched() { cmp -s "$A" "$WEB_TMP/agent.conf.orig" && [ ! -e "$WEB_TMP/etc/agent.token" ] &&
  [ ! -e "$WEB_TMP/etc/server.pem" ]; }

out=$(join "$url") && web_fail "--join trusted a certificate no CA vouches for: $out"
check "an unknown certificate is refused" has "$out" "could not reach $url"
check "  and a hint to pin it" has "$out" "pin it with --server-fingerprint"
check "  and nothing written" untouched

wrong=$(tr '0-9A-F' '1-9A-F0' <<<"$want")
out=$(join "$url" --server-fingerprint "$wrong") && web_fail "--join took a wrong fingerprint: $out"
check "a wrong pin is refused" has "$out" "the server's certificate is not the one pinned: its SHA-256 fingerprint is $want"
check "  naming the pin given" has "$out" "--server-fingerprint gave $wrong"
check "  and nothing written" untouched

out=$(join "http://127.0.0.1:1" --server-fingerprint "$want") && web_fail "--join pinned http"
check "a pin for an http server is refused" has "$out" "--server-fingerprint needs an https:// server"

out=$(join "$url" --server-fingerprint "sha256:$(tr -d : <<<"$want" | tr A-F a-f)") ||
  web_fail "--join with the right pin failed: $out"
check "the right pin (any case, no colons) joins" has "$out" "joined $url as node n1"
check "  printing the fingerprint" has "$out" "server certificate SHA-256 fingerprint: $want"
check "  saving the certificate beside the config" cmp -s "$WEB_TMP/etc/server.pem" "$C/server.pem"
check "  as the agent's ca" grep -qx "ca = $WEB_TMP/etc/server.pem" "$A"
check "  with the token" grep -qx "$token" "$WEB_TMP/etc/agent.token"
check "the saved certificate verifies the server" \
  curl -fsS --cacert "$WEB_TMP/etc/server.pem" "$url/healthz" -o /dev/null

cp "$WEB_TMP/agent.conf.orig" "$A"
printf 'ca = %s\n' "$C/ca.pem" >>"$A"
out=$(join "$url") || web_fail "--join with the CA failed: $out"
check "with the CA as ca, --join prints the fingerprint openssl prints" \
  has "$out" "server certificate SHA-256 fingerprint: $want"

[ "$fails" = 0 ] || web_fail "$fails checks failed"
web_say "all checks passed"
