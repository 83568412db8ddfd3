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
#      of both services (packages repacked as V~pre1), the hardening
#      systemd applied, a job, a restart, a SIGKILL the unit's Restart=
#      answers; then (systemd_walk_later.sh) a job's cgroups below the
#      agent's unit, the guide's HTTPS, the upgrade to V with a job
#      running; both stopped; then poweroff;
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

# systemd's control groups: a folder of their own, CG, at one path P/CG in
# each hierarchy systemd is to use: name=systemd and cgroup2 (which track
# processes) and the v1 controllers the agent puts its jobs' groups in
# (pids, memory, cpu, devices; and cpuacct, where it is mounted apart from
# cpu: systemd realizes cpu with it). systemd takes its name=systemd path for its
# root in every hierarchy and uses a v1 controller only where that path
# exists (as on a host, where it is / in all), and with Delegate=yes makes
# the agent's unit group in each. P is the deepest of this shell's own
# groups (a v1 memory group the machine put it in, here), so that nothing
# leaves a limit it is under; the folders of P made where they were not
# are removed afterwards, with CG.
CG=tessera-systemd-test.$$
cg_mounts=() cg_paths=()
while IFS=: read -r _ ctrl path; do
  m=
  case ,$ctrl, in
  ,name=systemd,) m=$(findmnt -rn -t cgroup -O name=systemd -o TARGET | head -n 1) ;;
  ,,) m=$(findmnt -rn -t cgroup2 -o TARGET | head -n 1) ;;
  *,pids,* | *,memory,* | *,cpu,* | *,cpuacct,* | *,devices,*)
    m=$(findmnt -rn -t cgroup -O "$(tr , '\n' <<<"$ctrl" | grep -Ex 'pids|memory|cpu|cpuacct|devices' | head -n 1)" \
      -o TARGET | head -n 1)
    ;;
  esac
  [ -n "$m" ] && [ -w "$m" ] || continue
  cg_mounts+=("$m")
  cg_paths+=("${path%/}")
done </proc/self/cgroup
if [ ${#cg_mounts[@]} -eq 0 ]; then
  echo "SKIP: no writable name=systemd or cgroup2 hierarchy for systemd's control groups"
  exit 77
fi
P=
for p in "${cg_paths[@]}"; do [ ${#p} -le ${#P} ] || P=$p; done
for p in "${cg_paths[@]}"; do
  case $P/ in "$p"/*) ;; *)
    echo "FAIL: this shell's control groups are not on one path (${cg_paths[*]}): no one root for systemd"
    exit 1
    ;;
  esac
done
cg_made=() # the folders made for P/CG, in the order made
cg_make() {
  local m d rest
  for m in "${cg_mounts[@]}"; do
    d=$m
    rest=${P#/}/$CG
    for part in ${rest//\// }; do
      d=$d/$part
      [ -d "$d" ] && continue
      mkdir "$d" && cg_made+=("$d")
    done
  done
}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/tessera-systemd.XXXXXX")
# CG's folders, with what systemd made below them, deepest first; then the
# folders made for P, the last made first
cg_remove() {
  local i d
  # listed first (-prune: not entered), then removed: a find that walks
  # folders being removed fails, and set -e would end the test here
  for d in $(find /sys/fs/cgroup -maxdepth 8 -type d -name "$CG" -prune 2>/dev/null || true); do
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  for ((i = ${#cg_made[@]} - 1; i >= 0; i--)); do rmdir "${cg_made[i]}" 2>/dev/null || true; done
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
  node-install.sh node-join.sh agent-conf.ini agent-conf-sim.ini agent-start.sh node-check.sh \
  tls-certs.sh tls-server-conf.ini tls-agent-conf.ini tls-cli.sh upgrade.sh backup.sh \
  restore-db.sh restore-pgpass.sh restore.sh restore-conf.ini restore-check.sh; do
  check "the guide marks block ${b%.*} (${b##*.})" test -s "$files/blocks/$b"
done
# the walk starts from the same files repacked as version V~pre1, which
# dpkg orders before V, and upgrades to V (no older release is built here)
debs_older "$files/debs" "$files/debs-old" "$TMP/repack"
check "and the same three as an older version" test "$(ls "$files"/debs-old/*~pre1_*.deb | wc -l)" = 3
cp "$HERE/systemd_walk.sh" "$HERE/systemd_walk_later.sh" "$HERE/guide_lib.sh" "$HERE/checks.sh" "$files/"

# ---- 2. the walk, under systemd ------------------------------------------------
cg_make
say "systemd as PID 1 of a throwaway root with loopback only"
(
  # only this subshell and what it starts go into systemd's folders
  for m in "${cg_mounts[@]}"; do echo $BASHPID >"$m$P/$CG/cgroup.procs"; done
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
left=
for d in "${cg_made[@]}"; do [ ! -d "$d" ] || left="$left $d"; done
check "systemd's control groups ($CG) are removed, and the folders made for them" \
  test -z "$(find /sys/fs/cgroup -maxdepth 8 -type d -name "$CG" -prune 2>/dev/null || true)$left"
say "the walk took $(($(date +%s) - start)) s"

[ $fails -eq 0 ] || { echo "FAIL: $fails checks failed"; exit 1; }
echo "all systemd checks passed"
