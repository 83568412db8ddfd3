#!/usr/bin/env bash
# tls_cost.sh BIN_DIR [ROUNDS] - what HTTPS and client certificates cost a
# request: 500 keep-alive GETs of /api/v1/nodes in one curl process, against
# a server on plain HTTP, and against one with --tls-cert, --tls-key and
# --tls-client-ca (an agent token with its client certificate, and an admin
# token without one). Certificates are made with openssl. Prints each mode's
# fastest of ROUNDS (default 6) runs, the machine's load being what it is.
#
#   tests/bench/tls_cost.sh build/bin
set -euo pipefail
bin=$(cd "$1" && pwd)
rounds=${2:-6}
admin=tsk_tlscostbenchadmin0123456789abcdef
d=$(mktemp -d /tmp/tessera-tlscost.XXXXXX)
spid=
cleanup() { [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null; rm -rf "$d"; }
trap cleanup EXIT
chmod 755 "$d" # the embedded PostgreSQL runs as postgres when this runs as root

(cd "$d"
 ec="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
 openssl req -x509 $ec -keyout ca.key -out ca.pem -days 1 -subj /CN=bench-ca \
     -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
 printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
 printf 'extendedKeyUsage=clientAuth\n' >client.ext
 for n in server client; do
     openssl req $ec -keyout $n.key -out $n.csr -subj /CN=$n
     openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $n.pem \
         -days 1 -extfile $n.ext
 done
 chmod 600 ./*.key) 2>"$d/openssl.log"

start() { # data folder, server options...
    local dir=$1
    shift
    mkdir -p "$dir"
    TESSERA_ADMIN_TOKEN=$admin "$bin/tessera-server" --data-dir "$dir" --listen 127.0.0.1:0 \
        --log-level warn "$@" >"$dir/server.log" 2>&1 &
    spid=$!
    for _ in $(seq 300); do
        [ -s "$dir/server.addr" ] && break
        kill -0 "$spid" 2>/dev/null || { tail "$dir/server.log" >&2; exit 1; }
        sleep 0.1
    done
    url=$(cat "$dir/server.addr")
}
stop() { kill "$spid"; wait "$spid" || true; spid=; }
fastest() { # token, curl options...: the fastest of the rounds, seconds
    local tok=$1 best= t urls=()
    shift
    for _ in $(seq 500); do urls+=("$url/api/v1/nodes"); done
    for _ in $(seq "$rounds"); do
        t=$({ /usr/bin/time -f %e curl -sf -H "Authorization: Bearer $tok" "$@" "${urls[@]}" \
            >/dev/null; } 2>&1 | tail -1)
        if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
    done
    echo "$best"
}
agent_token() { # curl options...
    curl -sf "$@" -H "Authorization: Bearer $admin" --json '{"name":"bench-agent","role":"agent"}' \
        "$url/api/v1/tokens" | sed 's/.*"token": *"\([^"]*\)".*/\1/'
}

printf '%-44s %s\n' "500 keep-alive GETs /api/v1/nodes" "fastest of $rounds (s)"
start "$d/plain"
tok=$(agent_token)
printf '%-44s %s\n' "http, agent token" "$(fastest "$tok")"
stop
start "$d/tls" --tls-cert "$d/server.pem" --tls-key "$d/server.key" --tls-client-ca "$d/ca.pem"
tls=(--cacert "$d/ca.pem")
tok=$(agent_token "${tls[@]}")
printf '%-44s %s\n' "https + client certificate, agent token" \
    "$(fastest "$tok" "${tls[@]}" --cert "$d/client.pem" --key "$d/client.key")"
printf '%-44s %s\n' "https, no client certificate, admin token" "$(fastest "$admin" "${tls[@]}")"
stop
