# tests/install/guide_lib.sh - sourced inside the throwaway root by the
# walks of the operator's guide (guide_walk.sh, systemd_walk.sh), after
# they set T (/opt/tessera-test: the guide's blocks in blocks/, outputs in
# out/) and ADMIN_HOME (the admin's folder), and made $T/admin.env: the
# guide's blocks run as an admin types them (guide_sh), its ini blocks
# written into the installed files as an admin edits them (guide_conf), and
# small checks on what they made.
mkdir -p "$T/out"

# guide_sh NAME: the guide's block NAME as an admin types it: bash -e in
# the admin's folder, with the variables the blocks before exported, no
# terminal; its output in out/NAME.out; a failed command is named.
guide_sh() {
  local name=$1 block=$T/blocks/$1.sh rc
  [ -f "$block" ] || { echo "  the guide has no block marked $name"; return 1; }
  (cd "$ADMIN_HOME" && env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash "$T/admin_shell.sh" "$T/admin.env" "$block") </dev/null >"$T/out/$name.out" 2>&1
  rc=$?
  [ $rc -eq 0 ] || tail -n 15 "$T/out/$name.out" | sed 's/^/  | /'
  return $rc
}
cat >"$T/admin_shell.sh" <<'EOF'
# the admin's shell for one block: ENV_FILE BLOCK
. "$1"
set -e -o pipefail
trap 'echo "a command of the guide failed (status $?): $BASH_COMMAND" >&2' ERR
. "$2"
trap - ERR
export -p | grep -Ev '^declare -x (HOME|LOGNAME|OLDPWD|PATH|PWD|SHELL|SHLVL|USER|_)=' >"$1"
EOF

# guide_conf NAME FILE: the guide's ini block NAME written into FILE as an
# admin edits it: each `key = value` line replaces the file's line setting
# that key, else the first one commenting it out, else is added; mode and
# owner kept.
guide_conf() {
  local block=$T/blocks/$1.ini file=$2 line key tmp=$T/conf.tmp
  [ -f "$block" ] || { echo "  the guide has no block marked $1"; return 1; }
  grep -Eq '^[a-z-]+ *=' "$block" || { echo "  block $1 sets nothing"; return 1; }
  while IFS= read -r line; do
    key=$(sed -n 's/^\([a-z-]*\) *=.*/\1/p' <<<"$line")
    [ -n "$key" ] || continue
    awk -v key="$key" -v line="$line" '
      { text[NR] = $0 }
      $0 ~ "^" key " *=" && !set { set = NR }
      $0 ~ "^# *" key " *=" && !commented { commented = NR }
      END {
        at = set ? set : commented
        for (i = 1; i <= NR; i++) print i == at ? line : text[i]
        if (!at) print line
      }' "$file" >"$tmp"
    cat "$tmp" >"$file" # in place: the file keeps its mode and owner
  done <"$block"
  rm -f "$tmp"
}

conf_value() { sed -n "s/^$2 *= *\([^ #]*\).*/\1/p" "$1" | tail -n 1; }
mode_owner() { [ "$(stat -c '%a %U:%G' "$1")" = "$2" ] || { echo "  $1: $(stat -c '%a %U:%G' "$1")"; return 1; }; }
out() { cat "$T/out/$1.out"; }

# The walks' jobs (each walk defines tessera_admin, the CLI as the admin).
job_state() { # NAME: the job's state in the vision project
  tessera_admin describe job "$1" -p vision -o json | jq -r .state 2>/dev/null
}
wait_state() { # NAME STATE SECONDS
  local i
  for i in $(seq $(($3 * 5))); do
    [ "$(job_state "$1")" = "$2" ] && return 0
    sleep 0.2
  done
  echo "  $1 is $(job_state "$1"), not $2"
  return 1
}
