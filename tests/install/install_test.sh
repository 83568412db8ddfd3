#!/usr/bin/env bash
# tests/install/install_test.sh - what an admin installs (packaging/):
#   1. `cmake --install BUILD --prefix P` puts the binaries, the shim and
#      simgpu in P/lib/tessera/, the OpenAPI document, the configuration
#      files (mode 0600, an edited one kept on reinstall) and the systemd
#      units naming P's paths; `systemd-analyze verify` finds nothing to say
#      about the units;
#   2. the installed server and agent run from P with the installed
#      configuration files while the source and build folders are hidden
#      (a tmpfs over them in a mount namespace of their own): the server
#      serves the dashboard and the OpenAPI document, both say READY=1 to
#      $NOTIFY_SOCKET once ready (the server's /readyz answers 200 then, the
#      agent's node is registered), a job with a GPU fraction runs with
#      P/lib/tessera/libtessera-cuda.so preloaded, and both say STOPPING=1;
#   3. `cpack -G DEB` makes tessera-server, tessera-agent and tessera-cli
#      with their libraries in Depends, postgresql-15 recommended, the
#      files in their /usr and /etc places, conffiles, maintainer scripts
#      that create the tessera user and start nothing, and units that
#      `systemd-analyze verify` accepts in the packages' tree;
#   4. dpkg installs, removes and purges them for real in a throwaway copy
#      of this machine's root (dpkg_root.sh): the user, folders and modes
#      the maintainer scripts make, conffiles kept on remove and gone on
#      purge, the data kept, nothing enabled, and nothing on the host.
# Needs TS_BUILD_DIR (a built build folder) and TS_SOURCE_DIR. Part 3 is
# left out of sanitizer builds (TS_SANITIZE=1): the same packaging rules,
# and dpkg-shlibdeps would read the sanitizer runtimes in.
TS_BIN_DIR=${TS_BUILD_DIR:?TS_BUILD_DIR must name a build folder}/bin
. "$(dirname "$0")/../browser/lib.sh"
SRC=$(cd "${TS_SOURCE_DIR:?}" && pwd)
BUILD=$(cd "$TS_BUILD_DIR" && pwd)
P=$WEB_TMP/prefix

. "$(dirname "$0")/checks.sh"
mode_is() { [ "$(stat -c %a "$1")" = "$2" ] || { echo "  $1 has mode $(stat -c %a "$1")"; return 1; }; }
quiet() { # COMMAND...: succeeds and prints nothing (systemd-analyze warns with status 0)
  local out
  out=$("$@" 2>&1) || { printf '%s\n' "$out" | sed 's/^/  /'; return 1; }
  [ -z "$out" ] || { printf '%s\n' "$out" | sed 's/^/  /'; return 1; }
}
command -v systemd-analyze >/dev/null || web_fail "systemd-analyze is missing (Debian package systemd)"

# ---- 1. cmake --install -------------------------------------------------------
web_say "cmake --install $BUILD --prefix $P"
cmake --install "$BUILD" --prefix "$P" >"$WEB_TMP/install.log" || web_fail "cmake --install failed"
for f in bin/tessera-server bin/tessera-agent bin/tessera bin/tessera-sim bin/tessera-gpuload; do
  check "installs $f" test -x "$P/$f"
done
for f in lib/tessera/libtessera-cuda.so lib/tessera/simgpu/libcuda.so.1 lib/tessera/simgpu/libnvidia-ml.so.1; do
  check "installs $f" test -f "$P/$f"
done
check "installs the OpenAPI document" cmp -s "$P/share/tessera/openapi.yaml" "$SRC/api/openapi.yaml"
check "installs the operator's guide" test -s "$P/share/doc/tessera-server/operations.md"
for c in server agent; do
  check "installs etc/tessera/$c.conf, mode 0600" mode_is "$P/etc/tessera/$c.conf" 600
  check "installs tessera-$c.service" test -s "$P/lib/systemd/system/tessera-$c.service"
done
units=$(cat "$P"/lib/systemd/system/tessera-*.service)
check "the server's unit runs the installed binary with the installed config" \
  has "$units" "ExecStart=$P/bin/tessera-server --config $P/etc/tessera/server.conf"
check "the agent's unit runs the installed binary with the installed config" \
  has "$units" "ExecStart=$P/bin/tessera-agent --config $P/etc/tessera/agent.conf"
check "the units are Type=notify" test "$(grep -c '^Type=notify$' <<<"$units")" = 2
check "the units restart on failure" test "$(grep -c '^Restart=on-failure$' <<<"$units")" = 2
no_env() { ! grep -Eq '^(Environment|EnvironmentFile|PassEnvironment)=' <<<"$units"; }
check "no admin token or other secret in the units' environment" no_env
check "the server writes only its data folder" has "$units" "ReadWritePaths=$P/var/lib/tessera"$'\n'
check "the installed files name neither the source nor the build folder" \
  bash -c "! grep -rlF -e '$SRC' -e '$BUILD' '$P/etc' '$P/lib/systemd' '$P/share'"
for c in server agent; do
  check "systemd-analyze verify tessera-$c.service says nothing" \
    quiet systemd-analyze verify "$P/lib/systemd/system/tessera-$c.service"
done
for c in server agent; do
  web_say "systemd-analyze security: tessera-$c $(systemd-analyze security --offline=true \
    "$P/lib/systemd/system/tessera-$c.service" 2>/dev/null | grep -o 'exposure level.*' || true)"
done

# an admin's edits survive a reinstall; the new file lands beside them
echo "log-level = debug # edited" >>"$P/etc/tessera/server.conf"
cmake --install "$BUILD" --prefix "$P" >"$WEB_TMP/install2.log" || web_fail "cmake --install again failed"
check "a reinstall keeps an edited server.conf" grep -q "# edited" "$P/etc/tessera/server.conf"
check "and writes the new one beside it" test -s "$P/etc/tessera/server.conf.new"
sed -i '/# edited/d' "$P/etc/tessera/server.conf"

# ---- 2. the installed server and agent, with the source tree hidden ------------
# run COMMAND... in a mount namespace where SRC and BUILD are empty and read-only
hidden=(unshare --mount --propagation private -- sh -c \
  'for d in "$TS_HIDE_BUILD" "$TS_HIDE_SRC"; do mount -t tmpfs -o ro,size=4k none "$d" || exit 97; done; exec "$@"' sh)
if TS_HIDE_SRC=$SRC TS_HIDE_BUILD=$BUILD "${hidden[@]}" test ! -e "$SRC/api/openapi.yaml" 2>/dev/null; then
  web_say "the server and the agent run with $SRC and $BUILD hidden"
else
  web_say "cannot hide the source folder here (no mount namespace: not root?); running without"
  hidden=()
fi
export TS_HIDE_SRC=$SRC TS_HIDE_BUILD=$BUILD

conf() { # FILE NAME VALUE: set NAME in an installed config file, as an admin would
  sed -i "/^#* *$2 *=/d" "$1"
  printf '%s = %s\n' "$2" "$3" >>"$1"
}
conf "$P/etc/tessera/server.conf" data-dir "$WEB_TMP/server"
conf "$P/etc/tessera/server.conf" listen 127.0.0.1:0
conf "$P/etc/tessera/server.conf" admin-token "$WEB_TOKEN" # a secret in the 0600 file
chmod 0644 "$P/etc/tessera/server.conf"
refused=$("$P/bin/tessera-server" --config "$P/etc/tessera/server.conf" 2>&1) && web_fail "the server started"
check "the server refuses admin-token from a config file every user can read" \
  has "$refused" "admin-token is a secret, and every user can read the file (mode 0644)"
chmod 0600 "$P/etc/tessera/server.conf"
mkdir -p "$WEB_TMP/server"
"$BUILD/tests/notify_listen" "$WEB_TMP/server.notify" 120 >"$WEB_TMP/server.said" &
web_child_pid=$!
web_wait 5 "the notify socket" test -S "$WEB_TMP/server.notify"
(cd / && exec env NOTIFY_SOCKET="$WEB_TMP/server.notify" "${hidden[@]}" \
  "$P/bin/tessera-server" --config "$P/etc/tessera/server.conf" 2>"$WEB_TMP/server.log") &
web_server_pid=$!
for _ in $(seq 600); do
  grep -q READY=1 "$WEB_TMP/server.said" && break
  kill -0 "$web_server_pid" 2>/dev/null || web_fail "the installed tessera-server exited at start"
  sleep 0.1
done
WEB_URL=$(cat "$WEB_TMP/server/server.addr")
check "the installed server says READY=1" grep -q "READY=1 STATUS=listening on" "$WEB_TMP/server.said"
check "and is ready when it says so" curl -fsS -o /dev/null "$WEB_URL/readyz"
check "it serves the dashboard" bash -c "curl -fsS '$WEB_URL/' | grep -q 'ui/app.js'"
check "it serves the OpenAPI document" bash -c "curl -fsS '$WEB_URL/api/v1/openapi.yaml' | cmp -s - '$SRC/api/openapi.yaml'"
check "the embedded PostgreSQL did not inherit NOTIFY_SOCKET" \
  test "$(grep -c . "$WEB_TMP/server.said")" = 1

# agent tokens bound to their nodes, with the installed CLI
export TESSERA_SERVER=$WEB_URL TESSERA_TOKEN=$WEB_TOKEN
for n in n1 n2; do
  (umask 077 && "$P/bin/tessera" token create "install-$n" -r agent -n $n >"$WEB_TMP/$n.token") ||
    web_fail "tessera token create failed"
done
# joining: refused for a token that is not an agent's or not bound to the
# node, with the config file untouched; then n1 joins with its token
A=$P/etc/tessera/agent.conf
cp "$A" "$WEB_TMP/agent.conf.before"
out=$("$P/bin/tessera-agent" --join "$WEB_URL" - --config "$A" <<<"$WEB_TOKEN" 2>&1) &&
  web_fail "--join took an admin token"
check "--join refuses a token that is not an agent's" has "$out" "the token's role is admin, not agent"
out=$("$P/bin/tessera-agent" --join "$WEB_URL" "$(cat "$WEB_TMP/n2.token")" --node n1 --config "$A" 2>&1) &&
  web_fail "--join took n2's token for n1"
check "--join refuses a token bound to another node" has "$out" 'may act only as the nodes ["n2"], not as "n1"'
out=$("$P/bin/tessera-agent" --join "$WEB_URL" - --config "$A" <"$WEB_TMP/n2.token" 2>&1) ||
  web_fail "--join with n2's token failed: $out"
check "--join takes the token's one node as the node's name" has "$out" "as node n2"
check "--join sets node in agent.conf" grep -qx "node = n2" "$A"
out=$("$P/bin/tessera-agent" --join "$WEB_URL" - --config "$A" <"$WEB_TMP/n1.token" 2>&1) ||
  web_fail "--join failed: $out"
check "--join says what it did" has "$out" "joined $WEB_URL as node n1"
check "--join sets server and node in agent.conf, once each" \
  test "$(grep -c -e "^server = $WEB_URL\$" -e '^node = n1$' "$A"):$(grep -c -e '^server' -e '^node' "$A")" = 2:2
check "--join keeps agent.conf's other lines" \
  test "$(grep -v -e '^server' -e '^node' -e '^# node' "$A" | md5sum)" = \
  "$(grep -v -e '^server' -e '^node' -e '^# node' "$WEB_TMP/agent.conf.before" | md5sum)"
check "--join writes the token to token-file, mode 0600" cmp -s "$P/etc/tessera/agent.token" "$WEB_TMP/n1.token"
check "(mode 0600)" mode_is "$P/etc/tessera/agent.token" 600
conf "$A" data-dir "$WEB_TMP/agents/n1"
conf "$P/etc/tessera/agent.conf" gpus sim:1x8GiB
conf "$P/etc/tessera/agent.conf" report-interval 1s
mkdir -p "$WEB_TMP/agents/n1"
"$BUILD/tests/notify_listen" "$WEB_TMP/agent.notify" 120 >"$WEB_TMP/agent.said" &
agent_listener=$!
web_wait 5 "the notify socket" test -S "$WEB_TMP/agent.notify"
(cd "$WEB_TMP/agents/n1" && exec env NOTIFY_SOCKET="$WEB_TMP/agent.notify" "${hidden[@]}" \
  "$P/bin/tessera-agent" --config "$P/etc/tessera/agent.conf" 2>"$WEB_TMP/agents/n1/agent.log") &
web_agent_pids+=($!)
web_wait 30 "the agent's READY=1" grep -q READY=1 "$WEB_TMP/agent.said"
check "the installed agent says READY=1 once registered" grep -q "READY=1 STATUS=registered node=n1 gpus=1" "$WEB_TMP/agent.said"
check "the node is known to the server then" bash -c "curl -fsS -H 'Authorization: Bearer $WEB_TOKEN' '$WEB_URL/api/v1/nodes/n1' | grep -q '\"name\":\"n1\"'"
check "the agent found the installed shim" grep -q "shim=$P/lib/tessera/libtessera-cuda.so" "$WEB_TMP/agents/n1/agent.log"

api POST /departments '{"name":"ops","quota":{"gpus":1}}' >/dev/null
api POST /projects '{"name":"smoke","department":"ops","quota":{"gpus":1}}' >/dev/null
id=$(api POST /jobs '{"name":"preload","project":"smoke","command":["sh","-c","echo preload=$LD_PRELOAD"],"gpu":{"portion":0.5}}' |
  sed -n 's/^{"id":\([0-9]*\).*/\1/p')
[ -n "$id" ] || web_fail "no job id"
web_wait 60 "job $id to succeed" bash -c "curl -fsS -H 'Authorization: Bearer $WEB_TOKEN' '$WEB_URL/api/v1/jobs/$id' | grep -q '\"state\":\"succeeded\"'"
check "a fractional job runs with the installed shim preloaded" \
  has "$(api GET "/jobs/$id/logs" | sed 's/preload=.*:/preload=/')" "preload=$P/lib/tessera/libtessera-cuda.so"

kill -TERM "${web_agent_pids[0]}"
wait "${web_agent_pids[0]}" 2>/dev/null || true
web_agent_pids=()
wait "$agent_listener" 2>/dev/null || true
check "the agent says STOPPING=1 on SIGTERM" grep -q STOPPING=1 "$WEB_TMP/agent.said"
kill -TERM "$web_server_pid"
wait "$web_server_pid" 2>/dev/null || true
web_server_pid=
wait "$web_child_pid" 2>/dev/null || true
web_child_pid=
check "the server says STOPPING=1 on SIGTERM" grep -q STOPPING=1 "$WEB_TMP/server.said"

# ---- 3. Debian packages -------------------------------------------------------
if [ "${TS_SANITIZE:-0}" = 1 ]; then
  web_say "sanitizer build: packages not built"
else
  web_say "cpack -G DEB"
  start=$(date +%s%N)
  cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$WEB_TMP/pkg" >"$WEB_TMP/cpack.log" 2>&1 ||
    { tail -n 30 "$WEB_TMP/cpack.log" >&2; web_fail "cpack failed"; }
  web_say "cpack took $((($(date +%s%N) - start) / 1000000)) ms"
  deb() { ls "$WEB_TMP"/pkg/"$1"_*.deb; }
  field() { dpkg-deb -f "$(deb "$1")" "$2"; }
  files() { dpkg-deb -c "$(deb "$1")" | awk '{print $NF}'; }
  for p in tessera-server tessera-agent tessera-cli; do
    check "cpack makes $p" test -f "$(deb $p)"
  done
  for lib in libmicrohttpd12 libjansson4 libpq5 libssl3 passwd; do
    check "tessera-server depends on $lib" has "$(field tessera-server Depends)" "$lib"
  done
  check "tessera-server recommends postgresql-15" has "$(field tessera-server Recommends)" postgresql-15
  for lib in libcurl4 libjansson4 libssl3 passwd; do
    check "tessera-agent depends on $lib" has "$(field tessera-agent Depends)" "$lib"
  done
  for lib in libcurl4 libjansson4; do
    check "tessera-cli depends on $lib" has "$(field tessera-cli Depends)" "$lib"
  done
  server=$(files tessera-server)$'\n' agent=$(files tessera-agent)$'\n' cli=$(files tessera-cli)$'\n'
  for f in ./usr/bin/tessera-server ./usr/bin/tessera-sim ./usr/share/tessera/openapi.yaml \
    ./etc/tessera/server.conf ./usr/lib/systemd/system/tessera-server.service; do
    check "tessera-server holds $f" has "$server" "$f"$'\n'
  done
  for f in ./usr/bin/tessera-agent ./usr/lib/tessera/libtessera-cuda.so \
    ./usr/lib/tessera/simgpu/libcuda.so.1 ./etc/tessera/agent.conf \
    ./usr/lib/systemd/system/tessera-agent.service; do
    check "tessera-agent holds $f" has "$agent" "$f"$'\n'
  done
  check "tessera-cli holds ./usr/bin/tessera" has "$cli" ./usr/bin/tessera
  check "tessera-cli holds no service" hasnt "$cli" systemd
  check "tessera-server holds no agent" hasnt "$server" tessera-agent
  # the packages' tree, with this machine's units beside them for the
  # targets they name (systemd-analyze verify --root looks only there)
  root=$WEB_TMP/pkgroot
  for p in tessera-server tessera-agent tessera-cli; do
    dpkg-deb -x "$(deb $p)" "$root"
    dpkg-deb -e "$(deb $p)" "$WEB_TMP/control-$p"
  done
  cp -rn /lib/systemd/system/. "$root/usr/lib/systemd/system/"
  for c in server agent; do
    check "tessera-$c's conffiles name /etc/tessera/$c.conf" \
      grep -qx "/etc/tessera/$c.conf" "$WEB_TMP/control-tessera-$c/conffiles"
    check "tessera-$c's postinst creates the tessera system user" \
      grep -q 'useradd --system' "$WEB_TMP/control-tessera-$c/postinst"
    check "tessera-$c's postinst creates /var/lib/tessera" \
      grep -q 'install -d -m 0750 -o tessera -g tessera /var/lib/tessera$' "$WEB_TMP/control-tessera-$c/postinst"
    check "tessera-$c's scripts start and enable nothing" bash -c \
      "! grep -Eq 'systemctl (start|restart|enable)|deb-systemd-(invoke|helper)|invoke-rc.d' '$WEB_TMP/control-tessera-$c'/p*"
    check "tessera-$c's postinst is valid sh" sh -n "$WEB_TMP/control-tessera-$c/postinst"
    check "tessera-$c's unit runs /usr/bin/tessera-$c --config /etc/tessera/$c.conf" \
      grep -q "^ExecStart=/usr/bin/tessera-$c --config /etc/tessera/$c.conf$" \
      "$root/usr/lib/systemd/system/tessera-$c.service"
    check "systemd-analyze verify accepts the packaged tessera-$c.service" \
      quiet systemd-analyze verify --root="$root" "/usr/lib/systemd/system/tessera-$c.service"
  done
  check "the packaged server.conf keeps its data in /var/lib/tessera" \
    grep -qx 'data-dir = /var/lib/tessera' "$root/etc/tessera/server.conf"
  check "the packaged agent.conf keeps its data in /var/lib/tessera-agent" \
    grep -qx 'data-dir = /var/lib/tessera-agent' "$root/etc/tessera/agent.conf"

  # ---- 4. dpkg -i, -r and -P in a throwaway root ----------------------------------
  web_say "dpkg -i, -r and -P in a throwaway root"
  . "$(dirname "$0")/dpkg_root.sh"
  dpkg_root
fi

[ $fails -eq 0 ] || web_fail "$fails checks failed"
echo "all install checks passed"
