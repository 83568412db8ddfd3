# tests/install/checks.sh - sourced by the shell tests that print one line
# per check: `check DESCRIPTION COMMAND...` runs the command and prints
# "ok   DESCRIPTION" or "FAIL DESCRIPTION", counting failures in $fails;
# `has TEXT PART` and `hasnt TEXT PART` are commands for it that say what
# they did not find (or found).
fails=0
check() { # DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then
    printf 'ok   %s\n' "$what"
  else
    printf 'FAIL %s\n' "$what"
    fails=$((fails + 1))
  fi
}
has() { case $1 in *"$2"*) return 0 ;; esac; printf '  "%s" does not contain "%s"\n' "$1" "$2"; return 1; }
hasnt() { case $1 in *"$2"*) printf '  "%s" contains "%s"\n' "$1" "$2"; return 1 ;; esac; return 0; }

# debs_older FROM TO SCRATCH: every package of FROM repacked into TO as
# version V~pre1, which dpkg orders before V (the walks' upgrade from it)
debs_older() {
  local deb
  mkdir -p "$2"
  for deb in "$1"/*.deb; do
    rm -rf "$3"
    dpkg-deb -R "$deb" "$3"
    sed -i 's/^Version: .*/&~pre1/' "$3/DEBIAN/control"
    dpkg-deb -b "$3" "$2/" >/dev/null
  done
}
