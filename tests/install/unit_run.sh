# tests/install/unit_run.sh - sourced inside the throwaway root by
# guide_walk.sh: a service started and stopped from its installed unit
# file as systemd would, as far as a machine where systemd is not PID 1
# lets a test (docs/operations.md, "How this guide is tested").
#
#   unit_start NAME   `systemctl start NAME`: reads
#                     /usr/lib/systemd/system/NAME.service and runs its
#                     ExecStart= in the unit's terms (below); returns once
#                     the service said READY=1 on $NOTIFY_SOCKET (Type=notify),
#                     fails when it exits first or TimeoutStartSec= passes
#   unit_stop NAME    `systemctl stop NAME`: SIGTERM to the main process
#                     (both units' KillMode= send it there first), fails
#                     unless it says STOPPING=1 and exits within
#                     TimeoutStopSec=
#
# Applied from the unit: ExecStart=, Type=notify, User=, Group= (with the
# user's groups, HOME, USER, LOGNAME and SHELL), UMask=, LimitNOFILE=,
# LimitMEMLOCK=, NoNewPrivileges=, CapabilityBoundingSet= (empty: none),
# and in a mount namespace of the service's own: ProtectSystem=strict (/
# and /run read-only, and /tmp unless private), ReadWritePaths=,
# PrivateTmp=, ProtectHome=yes|read-only; the working folder is /, the
# environment systemd's PATH and the above. A directive outside this list
# fails unit_start, unless it is one of UNIT_NOT_APPLIED (said once), so a
# directive added to a unit is either applied here or named as not.
# Output goes to /opt/tessera-test/logs/NAME.log (the journal's place).

UNIT_DIR=/usr/lib/systemd/system
UNIT_NOT_APPLIED="Description Documentation Wants After WantedBy Restart RestartSec KillMode TasksMax
  Delegate PrivateDevices ProtectKernelTunables ProtectKernelModules ProtectKernelLogs
  ProtectControlGroups ProtectClock ProtectHostname RestrictNamespaces RestrictRealtime
  RestrictSUIDSGID LockPersonality RestrictAddressFamilies SystemCallArchitectures
  SystemCallFilter"
UNIT_APPLIED="Type ExecStart User Group UMask LimitNOFILE LimitMEMLOCK NoNewPrivileges
  CapabilityBoundingSet ProtectSystem ReadWritePaths PrivateTmp ProtectHome
  TimeoutStartSec TimeoutStopSec"
declare -A unit_pid unit_listener

unit_key() { # NAME KEY: the value of KEY= in NAME's unit (the last one), or nothing
  sed -n "s/^$2=//p" "$UNIT_DIR/$1.service" | tail -n 1
}

unit_secs() { # "180s", "90", "2min": seconds
  case $1 in
  *min) echo $((${1%min} * 60)) ;;
  *s) echo "${1%s}" ;;
  *) echo "$1" ;;
  esac
}

# The lines of NAME's unit that neither list names: printed, one a line.
unit_unknown() {
  local key
  for key in $(sed -n 's/^\([A-Za-z]*\)=.*/\1/p' "$UNIT_DIR/$1.service" | sort -u); do
    case " $(echo $UNIT_APPLIED $UNIT_NOT_APPLIED) " in
    *" $key "*) ;;
    *) echo "$key" ;;
    esac
  done
}

# unit_script's lines for NAME's limit KEY (ulimit's OPTION): where this
# machine's hard limit is lower and cannot be raised (no CAP_SYS_RESOURCE
# in a container), the hard limit, said in the service's log.
unit_limit() {
  local v
  v=$(unit_key "$1" "$2")
  [ -n "$v" ] || return 0
  [ "$v" != infinity ] || v=unlimited
  echo "ulimit $3 $v 2>/dev/null || { echo \"unit_run: $2=$v is above this machine's hard limit, \$(ulimit -H $3), kept\"; ulimit $3 \$(ulimit -H $3); }"
}

# The script run as the service's main process, in a mount namespace of
# its own: mounts as the unit says, then the user, limits and environment,
# then exec ExecStart.
unit_script() {
  local name=$1 exec user group umask_ rw p home shell
  exec=$(unit_key "$name" ExecStart)
  user=$(unit_key "$name" User)
  group=$(unit_key "$name" Group)
  umask_=$(unit_key "$name" UMask)
  case $exec in
  [-@+!:]* | *[\"\'\$%\;\|\&\<\>]*) echo "echo 'unit_run: cannot run ExecStart=$exec (a prefix, quotes, specifiers or shell)' >&2; exit 99"; return ;;
  esac
  echo 'set -e'
  if [ "$(unit_key "$name" ProtectSystem)" = strict ]; then
    echo 'mount -o remount,bind,ro /'
    echo 'mount -o remount,bind,ro /run'
    [ "$(unit_key "$name" PrivateTmp)" = yes ] || echo 'mount -o remount,bind,ro /tmp'
  fi
  if [ "$(unit_key "$name" PrivateTmp)" = yes ]; then
    echo 'mount -t tmpfs -o mode=1777 tmpfs /tmp'
    echo 'mount -t tmpfs -o mode=1777 tmpfs /var/tmp'
  fi
  case $(unit_key "$name" ProtectHome) in
  yes) echo 'for d in /home /root /run/user; do [ ! -d $d ] || mount -t tmpfs -o ro,mode=0755 tmpfs $d; done' ;;
  read-only) echo 'for d in /home /root; do mount --bind $d $d; mount -o remount,bind,ro $d; done' ;;
  esac
  rw=$(unit_key "$name" ReadWritePaths)
  for p in $rw; do
    echo "mount --bind $p $p && mount -o remount,bind,rw $p"
  done
  [ -z "$umask_" ] || echo "umask $umask_"
  unit_limit "$name" LimitNOFILE -n
  unit_limit "$name" LimitMEMLOCK -l
  echo 'cd /'
  local priv=(setpriv)
  [ "$(unit_key "$name" NoNewPrivileges)" = yes ] && priv+=(--no-new-privs)
  if grep -qx 'CapabilityBoundingSet=' "$UNIT_DIR/$name.service"; then
    priv+=(--bounding-set -all --inh-caps -all)
  fi
  local env=(env -i "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    "NOTIFY_SOCKET=/run/$name.notify")
  if [ -n "$user" ]; then
    home=$(getent passwd "$user" | cut -d: -f6)
    shell=$(getent passwd "$user" | cut -d: -f7)
    priv+=(--reuid "$user" --regid "${group:-$user}" --init-groups)
    env+=("HOME=$home" "USER=$user" "LOGNAME=$user" "SHELL=$shell")
  fi
  echo "exec ${priv[*]} -- ${env[*]} $exec"
}

unit_start() {
  local name=$1 secs unknown i
  [ -f "$UNIT_DIR/$name.service" ] || { echo "  no $UNIT_DIR/$name.service"; return 1; }
  unknown=$(unit_unknown "$name")
  [ -z "$unknown" ] || { echo "  unit_run does not know these directives of $name:" $unknown; return 1; }
  [ "$(unit_key "$name" Type)" = notify ] || { echo "  $name is not Type=notify"; return 1; }
  secs=$(unit_secs "$(unit_key "$name" TimeoutStartSec)")
  mkdir -p /opt/tessera-test/logs
  unit_script "$name" >"/opt/tessera-test/$name.unit.sh"
  /opt/tessera-test/notify_listen "/run/$name.notify" 600 >"/opt/tessera-test/logs/$name.said" &
  unit_listener[$name]=$!
  for i in $(seq 50); do [ -S "/run/$name.notify" ] && break; sleep 0.1; done
  chmod 0777 "/run/$name.notify" # as systemd's: any service user may write to it
  unshare -m --propagation private bash "/opt/tessera-test/$name.unit.sh" \
    </dev/null >"/opt/tessera-test/logs/$name.log" 2>&1 &
  unit_pid[$name]=$!
  for i in $(seq $((${secs:-90} * 10))); do
    grep -q READY=1 "/opt/tessera-test/logs/$name.said" && return 0
    if ! kill -0 "${unit_pid[$name]}" 2>/dev/null; then
      echo "  $name exited before READY=1; its last lines:"
      tail -n 15 "/opt/tessera-test/logs/$name.log" | sed 's/^/  | /'
      return 1
    fi
    sleep 0.1
  done
  echo "  $name did not say READY=1 within ${secs}s"
  return 1
}

unit_stop() {
  local name=$1 pid=${unit_pid[$1]:-} secs i
  [ -n "$pid" ] || { echo "  $name was not started"; return 1; }
  secs=$(unit_secs "$(unit_key "$name" TimeoutStopSec)")
  if ! kill -TERM "$pid" 2>/dev/null; then
    echo "  $name had exited already"
    kill "${unit_listener[$name]}" 2>/dev/null
    wait "${unit_listener[$name]}" 2>/dev/null
    return 1
  fi
  for i in $(seq $((${secs:-90} * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "  $name did not exit within ${secs}s of SIGTERM"
    kill -KILL "$pid"
    return 1
  fi
  local st=0
  wait "$pid" 2>/dev/null || st=$?
  unset "unit_pid[$name]" # stopped: a later unit_stop has nothing to stop
  for i in $(seq 20); do kill -0 "${unit_listener[$name]}" 2>/dev/null || break; sleep 0.1; done
  kill "${unit_listener[$name]}" 2>/dev/null
  wait "${unit_listener[$name]}" 2>/dev/null
  grep -q STOPPING=1 "/opt/tessera-test/logs/$name.said" || { echo "  $name did not say STOPPING=1"; return 1; }
  [ $st -eq 0 ] || { echo "  $name exited with status $st"; return 1; }
}
