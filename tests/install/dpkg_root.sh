# tests/install/dpkg_root.sh - sourced by install_test.sh after cpack: the
# three packages installed, removed and purged with dpkg itself, as root, in
# a throwaway copy of this machine's root (throwaway_root.sh: an overlay
# over / whose upper layer is a tmpfs, in a mount namespace of its own), so
# nothing reaches the host. Each check inside prints one line, read back
# here. Skipped (said, not failed) where the overlay cannot be made (not
# root, no overlayfs).
# Uses $WEB_TMP/pkg (the packages), check and has (checks.sh).

dpkg_root_checks() { # run inside the throwaway root
  set -u
  fails=0
  . /opt/tessera-test/checks.sh
  cd /opt/tessera-test
  mode_owner() { [ "$(stat -c '%a %U:%G' "$1")" = "$2" ] || { echo "  $1: $(stat -c '%a %U:%G' "$1")"; return 1; }; }
  installed() { dpkg-query -W -f '${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
  check "dpkg -i installs tessera-cli, tessera-server and tessera-agent" \
    dpkg -i tessera-cli_*.deb tessera-server_*.deb tessera-agent_*.deb
  for p in tessera-cli tessera-server tessera-agent; do
    check "dpkg says $p is installed" installed $p
  done
  check "the tessera system user exists, with no login shell" \
    has "$(getent passwd tessera)" ":/var/lib/tessera:/usr/sbin/nologin"
  check "its uid is a system uid (under 1000)" test "$(id -u tessera)" -lt 1000
  check "/var/lib/tessera is 750 tessera:tessera" mode_owner /var/lib/tessera "750 tessera:tessera"
  check "/var/lib/tessera-agent is 700 root:root" mode_owner /var/lib/tessera-agent "700 root:root"
  check "/etc/tessera/server.conf is 640 root:tessera (it may hold the admin token)" \
    mode_owner /etc/tessera/server.conf "640 root:tessera"
  for b in tessera tessera-server tessera-agent; do
    check "/usr/bin/$b --version runs" has "$(/usr/bin/$b --version 2>&1)" "0."
  done
  check "the agent finds the installed shim" test -f /usr/lib/tessera/libtessera-cuda.so
  check "no unit is enabled (no wants/ link)" \
    test -z "$(find /etc/systemd/system -name 'tessera-*' 2>/dev/null)"
  echo "edited = yes" >>/etc/tessera/agent.conf
  check "dpkg -r removes the three packages" dpkg -r tessera-agent tessera-server tessera-cli
  check "the binaries are gone" test ! -e /usr/bin/tessera-server -a ! -e /usr/bin/tessera
  check "an edited conffile stays after remove" grep -q '^edited = yes' /etc/tessera/agent.conf
  check "the data folders stay after remove" test -d /var/lib/tessera -a -d /var/lib/tessera-agent
  check "dpkg -P purges them" dpkg -P tessera-agent tessera-server tessera-cli
  check "purge removes the conffiles" test ! -e /etc/tessera/agent.conf -a ! -e /etc/tessera/server.conf
  check "purge keeps the tessera user and /var/lib/tessera (the database)" \
    test -d /var/lib/tessera -a -n "$(getent passwd tessera)"
  check "dpkg -i installs again over the kept user and folders" \
    dpkg -i tessera-cli_*.deb tessera-server_*.deb tessera-agent_*.deb
  echo "dpkg_root: $fails failed"
}

dpkg_root() {
  if [ "$(id -u)" != 0 ]; then
    web_say "not root: dpkg -i not tried"
    return
  fi
  local files=$WEB_TMP/dpkgfiles out
  mkdir -p "$files"
  cp "$WEB_TMP"/pkg/*.deb "$(dirname "${BASH_SOURCE[0]}")/checks.sh" "$files/"
  {
    declare -f check has hasnt dpkg_root_checks
    echo 'dpkg_root_checks'
  } >"$files/dpkg_inner.sh"
  . "$(dirname "${BASH_SOURCE[0]}")/throwaway_root.sh"
  out=$(throwaway_root "$WEB_TMP/dpkgroot" "$files" dpkg_inner.sh 2>&1) || true
  printf '%s\n' "$out" | grep -E '^(ok|FAIL|  )' || true
  case $out in
  *"throwaway_root: no overlay here"*) web_say "no overlayfs here: dpkg -i not tried" ;;
  *"dpkg_root: 0 failed"*) ;;
  *)
    printf '%s\n' "$out" | tail -n 20 | sed 's/^/  | /'
    check "dpkg -i, -r and -P in a throwaway root" false
    ;;
  esac
  check "nothing of the packages reached this machine" test ! -e /usr/bin/tessera-server
}
