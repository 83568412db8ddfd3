# tests/install/systemd_walk.sh - run by systemd_test.sh as root, PID 1
# of the throwaway root (throwaway_root.sh, isolated: loopback only, a PID
# namespace of its own). /opt/tessera-test holds the packages (debs/, and
# debs-old/: the same repacked as V~pre1), the guide's marked blocks
# (blocks/), checks.sh, guide_lib.sh and systemd_walk_later.sh.
#
# As PID 1 it makes the root safe for a second systemd (/sys and
# /proc/sys read-only, the console a file, every unit of the machine that
# starts by itself masked, a target that wants nothing as the default),
# starts itself again as the driver (`systemd_walk.sh drive`) and becomes
# /lib/systemd/systemd --system. The driver waits for the boot, walks
# sections 2 and 3 of docs/operations.md with the guide's own blocks, its
# systemctl lines included (on the V~pre1 packages), checks what systemd
# did with the units, then systemd_walk_later.sh's jobs' cgroups, HTTPS,
# the upgrade to V and the restore into an external PostgreSQL; stops
# both services and powers off. One line per check, "time WHAT: S s" for
# the boot and each start, and "systemd_walk: N failed" last; "systemd_walk:
# systemd did not boot" where it did not.
set -u
T=/opt/tessera-test
SYSTEMD_KEEP="systemd-journald.service systemd-journald.socket systemd-journald-dev-log.socket"

become_systemd() {
  mkdir -p "$T/logs"
  # nothing of this machine's kernel settings or devices for it to change:
  # /sys read-only but the control groups below it, /proc/sys read-only
  mount -o remount,bind,ro /sys
  mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys
  # its console (status lines, its own log) a file, not the machine's
  : >"$T/logs/console.log"
  mount --bind "$T/logs/console.log" /dev/console
  # the machine's units that would start with the targets the services
  # pull in (sysinit, sockets, timers) or with the machine (multi-user,
  # getty), masked but the journal; then a default target that wants nothing
  local f u
  for f in /lib/systemd/system/{sysinit,sockets,timers,multi-user,getty}.target.wants/* \
    /etc/systemd/system/*.wants/* tmp.mount systemd-networkd-wait-online.service \
    NetworkManager-wait-online.service; do
    u=${f##*/}
    [ "$u" != "*" ] || continue # a folder that is not there
    case " $SYSTEMD_KEEP " in *" $u "*) continue ;; esac
    ln -sf /dev/null "/etc/systemd/system/$u"
  done
  printf '[Unit]\nDescription=tessera systemd test: nothing\n' >/etc/systemd/system/tessera-test.target
  date +%s.%N >"$T/boot.start"
  bash "$0" drive &
  # a UTS namespace for the host name it sets; container= says where it runs
  exec unshare -u env -i container=tessera-test PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    /lib/systemd/systemd --system --unit=tessera-test.target --log-target=console \
    --show-status=no </dev/null
}
[ "${1:-}" = drive ] || become_systemd

. "$T/checks.sh"
ADMIN_HOME=/root
: >"$T/admin.env"
. "$T/guide_lib.sh"
. "$T/systemd_walk_later.sh"

now() { date +%s.%N; }
# time WHAT START: how long since START, unless a step failed before
took() { [ $stopped = 1 ] || echo "time $1: $(since "$2") s"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
prop() { systemctl show -p "$2" --value "$1"; } # UNIT PROPERTY
props() { systemctl show -p "$2" "$1" | sort | tr '\n' ' '; } # UNIT P1,P2,...: "P1=V1 P2=V2 ... " by name
is() { [ "$1" = "$2" ] || { printf '  "%s", not "%s"\n' "$1" "$2"; return 1; }; } # VALUE EXPECTED
# PID FIELD: the field of /proc/PID/status, its values one space apart
status_field() { awk -v k="$2:" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "/proc/$1/status" 2>/dev/null; }
# mount_opt PID PATH: ro or rw, the mount at PATH the process sees
mount_opt() {
  awk -v p="$2" '$5 == p { split($6, o, ","); v = o[1] } END { print v }' "/proc/$1/mountinfo" 2>/dev/null
}
readyz() { curl -fsS -o /dev/null -w '%{http_code}' "http://127.0.0.1:8080/readyz"; }
# wait_for SECONDS COMMAND...: until the command succeeds
wait_for() {
  local until=$(($(date +%s) + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt $until ] || return 1
    sleep 0.2
  done
}
# the processes of the namespace but systemd, the journal and this walk
others() {
  local d pid
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" = 1 ] || [ "$pid" = $$ ] || [ "$pid" = "$BASHPID" ] && continue
    [ -r "$d/cmdline" ] || continue
    [ "$(cat "$d/comm" 2>/dev/null)" = systemd-journal ] && continue
    echo "$pid $(tr '\0' ' ' <"$d/cmdline")"
  done
}
tessera_admin() { (. "$T/admin.env" && HOME=/root tessera "$@") 2>&1; }

stopped=0
step() { # DESCRIPTION COMMAND...: a check the next steps need
  [ $stopped = 0 ] || return 0
  local before=$fails
  check "$@"
  [ $fails = "$before" ] || stopped=1
}

boot() {
  local s _
  for _ in $(seq 600); do
    s=$(systemctl is-system-running 2>/dev/null)
    case $s in running | degraded) break ;; esac
    sleep 0.1
  done
  case $s in
  running | degraded) ;;
  *)
    echo "systemd_walk: systemd did not boot (state: ${s:-no answer on /run/systemd/private})"
    tail -n 20 "$T/logs/console.log"
    # not through systemd: reboot(2) here ends the namespace's init
    systemctl --force --force poweroff
    exit 1
    ;;
  esac
  echo "time boot (systemd as PID 1 to is-system-running: $s): $(since "$(cat "$T/boot.start")") s"
  check "systemd is PID 1 of the throwaway root" test "$(cat /proc/1/comm)" = systemd
  check "it booted with no failed unit" test "$s" = running
  [ "$s" = running ] || systemctl --failed --no-legend | sed 's/^/  /'
}

server() {
  local t pid uid
  cp "$T"/debs-old/*.deb "$ADMIN_HOME/" # walk_upgrade installs debs/ over them
  step "the guide's apt install of tessera-server and tessera-cli" guide_sh server-install
  step "apt saw systemd running: postinst reloaded it, started nothing" \
    test "$(prop tessera-server ActiveState)" = inactive
  step "the guide's server.conf lines" guide_conf server-conf /etc/tessera/server.conf
  t=$(now)
  step "the guide's systemctl enable --now tessera-server and systemctl status" guide_sh server-start
  echo "time systemctl enable --now tessera-server (first start: initdb, migrations): $(since "$t") s"
  step "/readyz answers 200 as soon as systemctl returned (Type=notify: READY=1)" is "$(readyz)" 200
  step "it is enabled, for multi-user.target" test "$(systemctl is-enabled tessera-server)" = enabled
  step "systemctl status shows it active" \
    has "$(out server-start)" "Active: active (running)"
  step "and the Status: line the guide quotes (STATUS= of READY=1)" \
    has "$(out server-start)" 'Status: "listening on 0.0.0.0:8080 port 8080 (http), embedded database"'
  pid=$(prop tessera-server MainPID)
  step "systemd knows its main process" test "${pid:-0}" -gt 1
  step "systemctl show: User=tessera, NoNewPrivileges, ProtectSystem=strict, ProtectHome, PrivateTmp, PrivateDevices" \
    is "$(props tessera-server User,NoNewPrivileges,ProtectSystem,ProtectHome,PrivateTmp,PrivateDevices)" \
    "NoNewPrivileges=yes PrivateDevices=yes PrivateTmp=yes ProtectHome=yes ProtectSystem=strict User=tessera "
  uid=$(id -u tessera)
  step "the process runs as tessera (real, effective, saved uid)" \
    is "$(status_field "$pid" Uid)" "$uid $uid $uid $uid"
  step "no new privileges, no capability, bounding set empty (CapabilityBoundingSet=)" \
    is "$(status_field "$pid" NoNewPrivs):$(status_field "$pid" CapEff):$(status_field "$pid" CapBnd)" \
    "1:0000000000000000:0000000000000000"
  step "a seccomp filter (SystemCallFilter=) and UMask=0077" \
    is "$(status_field "$pid" Seccomp):$(status_field "$pid" Umask)" 2:0077
  step "its / is read-only, /var/lib/tessera writable (ProtectSystem=strict, ReadWritePaths=)" \
    is "$(mount_opt "$pid" /):$(mount_opt "$pid" /var/lib/tessera)" ro:rw
  touch /tmp/tessera-systemd-host
  step "its /tmp is private (PrivateTmp=)" test ! -e "/proc/$pid/root/tmp/tessera-systemd-host"
  step "its /dev is private (PrivateDevices=: no /dev/kmsg)" \
    test -e /dev/kmsg -a ! -e "/proc/$pid/root/dev/kmsg"
  step "/root is not there for it (ProtectHome=yes)" test -z "$(ls -A "/proc/$pid/root/root" 2>/dev/null)"
  step "it and its PostgreSQL are in the unit's control group" \
    test "$(grep -l tessera-server.service /proc/[0-9]*/cgroup 2>/dev/null | wc -l)" -gt 2
  step "the guide's first CLI commands" guide_sh server-admin
  step "whoami says admin" has "$(out server-admin)" admin
}

agent() {
  local t pid
  step "the guide's node token command" guide_sh node-token
  echo "127.0.0.1 tessera.example.org" >>/etc/hosts
  step "the guide's apt install of tessera-agent" guide_sh node-install
  step "the guide's tessera-agent --join" guide_sh node-join
  step "the guide's agent.conf lines" guide_conf agent-conf /etc/tessera/agent.conf
  step "and its lines for simulated GPUs" guide_conf agent-conf-sim /etc/tessera/agent.conf
  t=$(now)
  step "the guide's systemctl enable --now tessera-agent and systemctl status" guide_sh agent-start
  took "systemctl enable --now tessera-agent (until registered)" "$t"
  step "systemctl status shows the agent's STATUS=: registered as gpu-01 with 2 GPUs" \
    has "$(out agent-start)" "registered node=gpu-01 gpus=2"
  pid=$(prop tessera-agent MainPID)
  step "the agent runs as root, UMask=0077, no new privileges" \
    is "$(status_field "$pid" Uid):$(status_field "$pid" Umask):$(status_field "$pid" NoNewPrivs)" "0 0 0 0:0077:1"
  step "its / is read-only, /var/lib/tessera-agent writable" \
    is "$(mount_opt "$pid" /):$(mount_opt "$pid" /var/lib/tessera-agent)" ro:rw
  step "systemctl show: KillMode=process, Delegate=yes, LimitMEMLOCK=infinity, TasksMax=infinity" \
    is "$(props tessera-agent KillMode,Delegate,LimitMEMLOCK,TasksMax)" \
    "Delegate=yes KillMode=process LimitMEMLOCK=infinity TasksMax=infinity "
  # the jobs' groups are below the unit's: its device rules bound theirs
  # (a GPU node's /dev/nvidia*), and NVML's in the agent itself
  step "the unit's devices group allows every device (a *:* rwm)" \
    is "$(cat "/sys/fs/cgroup/devices$(cg_of "$pid" devices)/devices.list" 2>&1)" "a *:* rwm"
  step "the guide's node check: a job on half a GPU, its logs" guide_sh node-check
  step "the job succeeded" has "$(tessera_admin describe job smoke -p vision)" succeeded
  step "gpuload saw half of an 80 GiB GPU" has "$(out node-check)" 'gpu_memory=40GiB'
}

restarts() {
  local t pid pid2
  pid=$(prop tessera-server MainPID)
  t=$(now)
  step "systemctl restart tessera-server" systemctl restart tessera-server
  took "systemctl restart tessera-server" "$t"
  pid2=$(prop tessera-server MainPID)
  step "a new main process, ready when systemctl returned (/readyz 200)" \
    test "$pid2" != "$pid" -a "$(readyz)" = 200
  step "a restart asked for is not counted as one for failure (NRestarts=0)" \
    is "$(prop tessera-server NRestarts)" 0
  t=$(now)
  kill -KILL "$pid2"
  step "after kill -9 of its main process systemd restarts it (Restart=on-failure, RestartSec=2s)" \
    wait_for 60 bash -c "[ \"\$(systemctl show -p NRestarts --value tessera-server)\" = 1 ] &&
      [ \"\$(systemctl show -p ActiveState --value tessera-server)\" = active ]"
  took "from kill -9 to active again" "$t"
  step "with a new main process that answers /readyz 200" \
    test "$(prop tessera-server MainPID)" != "$pid2" -a "$(readyz)" = 200
  step "the data is there after the restarts" has "$(tessera_admin describe job smoke -p vision)" succeeded
}

teardown() {
  local t left
  stopped=0
  t=$(now)
  check "systemctl stop tessera-agent tessera-server" systemctl stop tessera-agent tessera-server
  took "systemctl stop of both" "$t"
  check "both inactive, stopped cleanly (Result=success), not restarted by Restart=" \
    is "$(props tessera-agent ActiveState,Result)$(props tessera-server ActiveState,Result)" \
    "ActiveState=inactive Result=success ActiveState=inactive Result=success "
  # each stop of the server stopped its PostgreSQL itself (pg_ctl stop:
  # "fast shutdown"); a SIGTERM from systemd to the whole control group
  # (KillMode=control-group) would reach postgres first ("smart shutdown")
  # and at times make pg_ctl fail ("could not stop PostgreSQL")
  left=$(cat /var/lib/tessera/pg/log/*.log 2>/dev/null)
  check "PostgreSQL was stopped by the server each time (fast shutdown), never by systemd's SIGTERM (KillMode=mixed)" \
    is "$(grep -c 'received fast shutdown request' <<<"$left"):$(grep -c 'received smart shutdown request' <<<"$left")" \
    "$server_stops:0"
  # the guide's way to the lines to act on (Logs): none in this walk
  left=$(journalctl -u tessera-server -u tessera-agent -p warning -q --no-pager 2>&1)
  check "journalctl -p warning: no warning or error of either service in the walk" test -z "$left"
  [ -z "$left" ] || printf '%s\n' "$left" | tail -n 8 | sed 's/^/  | /'
  local base
  base=$(journalctl -u tessera-agent -q --no-pager 2>/dev/null |
    sed -n 's/.*jobs are sandboxed .* base=\([^ ]*\).*/\1/p' | tail -n 1)
  check "the agent said where its jobs' control groups are (journal): below its unit's" \
    has "$base" "/system.slice/tessera-agent.service/tessera-"
  [ -z "$base" ] || check "and they are gone ($base)" \
    test ! -e "/sys/fs/cgroup/pids/$base" -a ! -e "/sys/fs/cgroup/memory/$base"
  [ -z "$pg_unit" ] || check "systemctl stop $pg_unit" systemctl stop "$pg_unit"
  left=$(others)
  check "nothing is left running: no server, PostgreSQL, agent, supervisor or job" test -z "$left"
  [ -z "$left" ] || printf '%s\n' "$left" | sed 's/^/  left: /'
  if [ $fails -ne 0 ]; then
    for u in tessera-server tessera-agent; do
      echo "  --- journalctl -u $u, last lines ---"
      journalctl -u $u --no-pager -n 25 2>&1 | sed 's/^/  | /'
    done
    echo "  --- console, last lines ---"
    tail -n 20 "$T/logs/console.log" | sed 's/^/  | /'
  fi
}

server_stops=2 # restarts' systemctl restart and teardown's stop; the later walks count theirs
boot
server
agent
restarts
walk_job_groups
walk_tls
walk_upgrade
walk_restore
teardown
echo "systemd_walk: $fails failed"
systemctl --no-block poweroff
