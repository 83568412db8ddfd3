# tests/install/throwaway_root.sh - sourced by the tests that install the
# Debian packages for real (dpkg_root.sh, guide_test.sh), as root.
#
#   throwaway_root DIR FILES INNER [isolated [SECONDS]]
#
# runs `bash /opt/tessera-test/INNER` chrooted in a throwaway copy of this
# machine's root: an overlay over / whose upper layer is a tmpfs mounted at
# DIR, in a mount namespace of its own, so nothing written there reaches
# the host. The folder FILES is copied to /opt/tessera-test first. /dev,
# /proc and /sys are the host's; /run and /tmp are empty tmpfs (no
# /run/systemd/system: maintainer scripts see no running systemd).
# "isolated" adds a network namespace with only loopback up (nothing
# started inside reaches another address, and its ports are its own) and
# a PID namespace with its own /proc (whatever is still running when INNER
# ends is killed with it, and all of it once SECONDS have passed, if
# given: SIGKILL to unshare, --kill-child to the namespace). Prints what INNER prints, or the line
# "throwaway_root: no overlay here" where the overlay cannot be made (then
# the status is 0); else the status is INNER's.
throwaway_root() {
  local dir=$1 files=$2 inner=$3 ns=(-m) limit=()
  # isolated: if unshare is killed, so is the namespace's init (unshare
  # itself ignores SIGTERM while it waits), and SECONDS kills it then
  [ "${4:-}" = isolated ] && ns=(-m -n -p -f --kill-child)
  [ -z "${5:-}" ] || limit=(timeout -s KILL "$5")
  mkdir -p "$dir"
  # shellcheck disable=SC2016 # expanded by the inner shell
  "${limit[@]}" unshare "${ns[@]}" bash -c '
    set -e
    r=$1 files=$2 inner=$3 isolated=$4
    mount --make-rprivate /
    mount -t tmpfs tmpfs "$r"
    mkdir -p "$r/up" "$r/work" "$r/root"
    mount -t overlay overlay -o "lowerdir=/,upperdir=$r/up,workdir=$r/work" "$r/root" ||
      { echo "throwaway_root: no overlay here"; exit 0; }
    mkdir -p "$r/root/opt/tessera-test"
    cp -r "$files/." "$r/root/opt/tessera-test/"
    for d in dev sys; do mount --rbind "/$d" "$r/root/$d"; done
    if [ "$isolated" = isolated ]; then
      ip link set lo up
      mount -t proc proc "$r/root/proc"
    else
      mount --rbind /proc "$r/root/proc"
    fi
    mount -t tmpfs tmpfs "$r/root/run"
    mount -t tmpfs tmpfs "$r/root/tmp"
    exec chroot "$r/root" bash "/opt/tessera-test/$inner"
  ' _ "$dir" "$files" "$inner" "${4:-}"
}
