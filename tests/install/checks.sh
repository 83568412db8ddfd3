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
