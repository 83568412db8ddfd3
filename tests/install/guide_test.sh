#!/usr/bin/env bash
# tests/install/guide_test.sh - the operator's guide (docs/operations.md)
# walked as an admin would, on the Debian packages installed by apt
# (issue 19; ctest install/guide):
#   1. `cpack -G DEB` from the build folder makes the three packages, and
#      the same repacked as an older version (V~pre1) for the upgrade;
#   2. the guide's blocks marked `<!-- test: NAME -->` are taken from the
#      guide as written (every other sh block must say why no test runs
#      it), so the guide cannot drift from what works;
#   3. in a throwaway copy of this machine's root (throwaway_root.sh,
#      isolated: loopback only, so no package is downloaded and no port is
#      shared; a PID namespace of its own), guide_walk.sh runs them in
#      order: apt install of the packages, the guide's server.conf, the
#      server started from its installed unit file as systemd would
#      (unit_run.sh: its ExecStart as User=tessera, READY=1, /readyz), the
#      CLI's first commands, a node token (0600), apt install of the agent,
#      --join, the guide's agent.conf with simulated GPUs, the agent from
#      its unit, a job on half a GPU that runs and succeeds, its logs;
#      HTTPS, client certificates (mTLS), Prometheus, pg_dump and a restore into an external
#      PostgreSQL, a second replica on it, an upgrade over older packages
#      (guide_walk_later.sh),
#      `tessera version`; then both services stopped as systemctl stop
#      would, and nothing left running;
#   4. nothing of it reached this machine.
# Root only (77 otherwise), and not in sanitizer builds (TS_SANITIZE=1:
# no packages there, as in install/packages). Needs TS_BUILD_DIR (a built
# build folder) and TS_SOURCE_DIR.
set -euo pipefail
SRC=$(cd "${TS_SOURCE_DIR:?}" && pwd)
BUILD=$(cd "${TS_BUILD_DIR:?TS_BUILD_DIR must name a build folder}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
GUIDE=$SRC/docs/operations.md
say() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: the guide's apt install needs root"
  exit 77
fi
if [ "${TS_SANITIZE:-0}" = 1 ]; then
  echo "SKIP: sanitizer build: no packages"
  exit 77
fi
for tool in cpack unshare ip apt-get setpriv; do
  command -v $tool >/dev/null || { echo "FAIL: $tool is missing (scripts/lib/common.sh installs it)"; exit 1; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/tessera-guide.XXXXXX")
cleanup() {
  local rc=$?
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT
. "$HERE/checks.sh"
. "$HERE/throwaway_root.sh"
. "$HERE/guide_blocks.sh"

# ---- 1. the packages ----------------------------------------------------------
start=$(date +%s)
say "cpack -G DEB"
cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$TMP/pkg" >"$TMP/cpack.log" 2>&1 ||
  { tail -n 30 "$TMP/cpack.log" >&2; echo "FAIL: cpack failed"; exit 1; }
files=$TMP/files
mkdir -p "$files/debs" "$files/blocks"
cp "$TMP"/pkg/tessera-*.deb "$files/debs/"
check "cpack made the three packages" test "$(ls "$files/debs" | wc -l)" = 3
# the packages the walk starts from, for the guide's upgrade to replace: the
# same files repacked as version V~pre1, which dpkg orders before V (no
# older release is built here; install/upgrade migrates an older schema)
debs_older "$files/debs" "$files/debs-old" "$TMP/repack"
check "and the same three as an older version" test "$(ls "$files"/debs-old/*~pre1_*.deb | wc -l)" = 3

# ---- 2. the guide's blocks ----------------------------------------------------
# blocks/NAME.sh or NAME.ini for each `<!-- test: NAME -->` line followed by
# a fenced block (guide_blocks.sh)
guide_blocks "$GUIDE" "$files/blocks" >"$TMP/blocks.said"
check "every test marker in the guide stands above a fenced block, each name once" \
  bash -c "! grep -E '^(bad|dup) ' '$TMP/blocks.said'"
check "every other sh block of the guide says why no test runs it" \
  bash -c "! grep '^untested ' '$TMP/blocks.said'"
grep -E '^(bad|dup|untested) ' "$TMP/blocks.said" | sed "s|^|  docs/operations.md: |" || true
walked="server-install.sh server-conf.ini server-admin.sh node-token.sh node-install.sh node-join.sh
  agent-conf.ini agent-conf-sim.ini node-check.sh tls-certs.sh tls-server-conf.ini tls-agent-conf.ini
  tls-cli.sh tls-client-cert.sh tls-agent-cert.ini tls-client-ca.ini prometheus-token.sh
  prometheus-scrape.yaml prometheus-check.sh backup.sh restore-db.sh restore-pgpass.sh restore.sh
  restore-conf.ini restore-check.sh replica-leader.sh upgrade.sh versions.sh"
for b in $walked; do
  check "the guide marks block ${b%.*} (${b##*.})" test -s "$files/blocks/$b"
done
# the guide's systemctl blocks: systemd_test.sh runs them under systemd
walked_by_systemd="server-start.sh agent-start.sh"
for f in "$files"/blocks/*; do
  case " $(echo $walked $walked_by_systemd) " in
  *" ${f##*/} "*) ;;
  *) check "the walk runs the guide's block ${f##*/}" false ;;
  esac
done

# ---- 3. the walk --------------------------------------------------------------
if [ -d /run/systemd/system ]; then
  say "systemd runs here (PID 1: $(cat /proc/1/comm)); the walk starts the units with unit_run.sh all the same"
else
  say "systemd is not PID 1 here ($(cat /proc/1/comm)): the walk starts the units with unit_run.sh"
fi
cp "$HERE/guide_walk.sh" "$HERE/guide_walk_later.sh" "$HERE/guide_lib.sh" "$HERE/unit_run.sh" "$HERE/checks.sh" "$BUILD/tests/notify_listen" "$files/"
say "the guide, in a throwaway root with loopback only"
# its checks printed as they come
throwaway_root "$TMP/root" "$files" guide_walk.sh isolated 2>&1 | tee "$TMP/walk.out" |
  grep -E '^(ok|FAIL|  )' || true
out=$(cat "$TMP/walk.out")
case $out in
*"throwaway_root: no overlay here"*)
  echo "SKIP: no overlayfs here"
  exit 77
  ;;
*"guide_walk: 0 failed"*) ;;
*)
  printf '%s\n' "$out" | grep -Ev '^(ok|FAIL|  )' | tail -n 20 | sed 's/^/  | /'
  check "the walk through the guide" false
  ;;
esac

# ---- 4. nothing on this machine -----------------------------------------------
check "nothing of the packages reached this machine" test ! -e /usr/bin/tessera-server -a ! -e /etc/tessera/agent.token
left=
for d in /proc/[0-9]*; do
  case $(readlink "$d/root" 2>/dev/null) in "$TMP"/*) left="$left ${d#/proc/}" ;; esac
done
check "no process of the walk is left on this machine" test -z "$left"
say "the walk took $(($(date +%s) - start)) s"

[ $fails -eq 0 ] || { echo "FAIL: $fails checks failed"; exit 1; }
echo "all guide checks passed"
