#!/usr/bin/env bash
# tests/install/systemd_test.sh - the packaged units run by a real systemd
# (issue 19; ctest install/systemd): where guide_test.sh's walk applies
# what the units say by hand (unit_run.sh: systemd is not PID 1 on the
# test machines), here /lib/systemd/systemd itself boots as PID 1 of a
# throwaway root and runs them:
#   1. `cpack -G DEB` makes the three packages; the guide's marked blocks
#      are taken from docs/operations.md (guide_blocks.sh);
#   2. in a throwaway copy of this machine's root (throwaway_root.sh,
#      isolated: loopback only, PID namespace of its own) systemd_walk.sh
#      masks the machine's own units, boots systemd with a target that
#      wants nothing, installs the packages with the guide's commands and
#      drives systemd with systemctl: the guide's `systemctl enable --now`
#      of both services, the hardening systemd applied, a job, a restart,
#      a SIGKILL the unit's Restart= answers, both stopped; then poweroff;
#   3. nothing of it reached this machine: no package, no process, no
#      /run/systemd/system, no control group left.
# systemd's control groups go in a folder of their own in the name=systemd
# and cgroup2 hierarchies (tessera-systemd-test.PID), removed afterwards.
# Root only (77 otherwise), not in sanitizer builds (no packages there);
# 77 too where there is no overlayfs or no systemd to boot. Needs
# TS_BUILD_DIR (a built build folder) and TS_SOURCE_DIR.
set -euo pipefail
SRC=$(cd "${TS_SOURCE_DIR:?}" && pwd)
BUILD=$(cd "${TS_BUILD_DIR:?TS_BUILD_DIR must name a build folder}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
say() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: installing the packages and booting systemd need root"
  exit 77
fi
if [ "${TS_SANITIZE:-0}" = 1 ]; then
  echo "SKIP: sanitizer build: no packages"
  exit 77
fi
if [ ! -x /lib/systemd/systemd ] || ! command -v systemctl >/dev/null; then
  echo "SKIP: no /lib/systemd/systemd to boot"
  exit 77
fi
for tool in cpack unshare ip apt-get findmnt timeout; do
  command -v $tool >/dev/null || { echo "FAIL: $tool is missing (scripts/lib/common.sh installs it)"; exit 1; }
done
if [ -d /run/systemd/system ]; then
  # systemd runs this machine: its units could be run by it directly, but
  # a second systemd beside it is what this test knows how to keep apart
  echo "SKIP: systemd is PID 1 here ($(cat /proc/1/comm)); this test boots one of its own"
  exit 77
fi

# systemd's control groups: a folder of their own in each hierarchy that
# tracks processes (name=systemd of cgroup v1, and cgroup2)
CG=tessera-systemd-test.$$
cg_roots=()
while IFS=: read -r _ ctrl path; do
  m=
  case $ctrl in
  name=systemd) m=$(findmnt -rn -t cgroup -O name=systemd -o TARGET | head -n 1) ;;
  "") m=$(findmnt -rn -t cgroup2 -o TARGET | head -n 1) ;;
  esac
  [ -n "$m" ] && [ -w "$m" ] && cg_roots+=("$m${path%/}")
done </proc/self/cgroup
if [ ${#cg_roots[@]} -eq 0 ]; then
  echo "SKIP: no writable name=systemd or cgroup2 hierarchy for systemd's control groups"
  exit 77
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/tessera-systemd.XXXXXX")
# CG's folders wherever systemd made them (it makes its tree in every v1
# hierarchy under the name=systemd path), deepest first
cg_remove() {
  find /sys/fs/cgroup -maxdepth 3 -type d -name "$CG" 2>/dev/null |
    while IFS= read -r d; do find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null; done
  true
}
cleanup() {
  local rc=$?
  cg_remove
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT
. "$HERE/checks.sh"
. "$HERE/throwaway_root.sh"
. "$HERE/guide_blocks.sh"

# ---- 1. the packages and the guide's blocks ----------------------------------
start=$(date +%s)
say "cpack -G DEB"
cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$TMP/pkg" >"$TMP/cpack.log" 2>&1 ||
  { tail -n 30 "$TMP/cpack.log" >&2; echo "FAIL: cpack failed"; exit 1; }
files=$TMP/files
mkdir -p "$files/debs" "$files/blocks"
cp "$TMP"/pkg/tessera-*.deb "$files/debs/"
check "cpack made the three packages" test "$(ls "$files/debs" | wc -l)" = 3
guide_blocks "$SRC/docs/operations.md" "$files/blocks" >/dev/null
for b in server-install.sh server-conf.ini server-start.sh server-admin.sh node-token.sh \
  node-install.sh node-join.sh agent-conf.ini agent-conf-sim.ini agent-start.sh node-check.sh; do
  check "the guide marks block ${b%.*} (${b##*.})" test -s "$files/blocks/$b"
done
cp "$HERE/systemd_walk.sh" "$HERE/guide_lib.sh" "$HERE/checks.sh" "$files/"

# ---- 2. the walk, under systemd ------------------------------------------------
for root in "${cg_roots[@]}"; do mkdir "$root/$CG"; done
say "systemd as PID 1 of a throwaway root with loopback only"
(
  # only this subshell and what it starts go into systemd's folders
  for root in "${cg_roots[@]}"; do echo $BASHPID >"$root/$CG/cgroup.procs"; done
  # poweroff ends the walk: its status is SIGINT's (reboot(2) in a PID
  # namespace); after 420 s unshare is killed, and the namespace with it
  throwaway_root "$TMP/root" "$files" systemd_walk.sh isolated 420 2>&1 || true
) | tee "$TMP/walk.out" | grep -E '^(ok|FAIL|  |time)' || true
out=$(cat "$TMP/walk.out")
case $out in
*"throwaway_root: no overlay here"*)
  echo "SKIP: no overlayfs here"
  exit 77
  ;;
*"systemd_walk: systemd did not boot"*)
  printf '%s\n' "$out" | grep -Ev '^(ok|FAIL|time)' | tail -n 30 | sed 's/^/  | /'
  echo "SKIP: systemd did not boot here"
  exit 77
  ;;
*"systemd_walk: 0 failed"*) ;;
*)
  printf '%s\n' "$out" | grep -Ev '^(ok|FAIL|  |time)' | tail -n 20 | sed 's/^/  | /'
  check "the walk under systemd" false
  ;;
esac

# ---- 3. nothing on this machine -----------------------------------------------
check "nothing of the packages reached this machine" test ! -e /usr/bin/tessera-server -a ! -e /etc/tessera/agent.token
check "no systemd runs this machine after it (/run/systemd/system)" test ! -e /run/systemd/system
left=
for d in /proc/[0-9]*; do
  case $(readlink "$d/root" 2>/dev/null) in "$TMP"/*) left="$left ${d#/proc/}" ;; esac
done
check "no process of the walk is left on this machine" test -z "$left"
cg_remove
check "systemd's control groups ($CG) are removed" \
  test -z "$(find /sys/fs/cgroup -maxdepth 3 -type d -name "$CG" 2>/dev/null)"
say "the walk took $(($(date +%s) - start)) s"

[ $fails -eq 0 ] || { echo "FAIL: $fails checks failed"; exit 1; }
echo "all systemd checks passed"
