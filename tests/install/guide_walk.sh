# tests/install/guide_walk.sh - run by guide_test.sh as root inside the
# throwaway root (throwaway_root.sh, isolated: loopback only, a PID
# namespace of its own): docs/operations.md's commands in the guide's
# order, on one machine that is both the server host and node gpu-01.
# /opt/tessera-test holds the packages (debs/, and debs-old/: the same
# repacked as an older version, which the walk installs first and the
# guide's upgrade replaces), the guide's marked blocks (blocks/NAME.sh,
# NAME.ini, NAME.yaml), notify_listen, checks.sh, unit_run.sh,
# guide_lib.sh (guide_sh, guide_conf) and guide_walk_later.sh (the
# sections after the first job). Prints one line per check; the walk stops at the first
# failed step (the next ones need it), stops what it started, and ends
# with "guide_walk: N failed".
set -u
T=/opt/tessera-test
. "$T/checks.sh"
. "$T/unit_run.sh"
. "$T/guide_walk_later.sh"
ADMIN_HOME=/root # the admin's shell: root, in root's home, where the packages were copied
mkdir -p "$T/out"
: >"$T/admin.env"
. "$T/guide_lib.sh"

# mount_opt UNIT PATH: ro or rw, for the mount at PATH the unit's main
# process sees (the last one mounted there)
mount_opt() {
  awk -v p="$2" '$5 == p { split($6, o, ","); v = o[1] } END { print v }' \
    "/proc/${unit_pid[$1]}/mountinfo"
}
# the processes of this PID namespace but this shell (its init) and the
# subshell asking: pid and command line, one a line
others() {
  local d pid
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" = 1 ] || [ "$pid" = $$ ] || [ "$pid" = "$BASHPID" ] && continue
    [ -r "$d/cmdline" ] || continue
    echo "$pid $(tr '\0' ' ' <"$d/cmdline")"
  done
}

stopped=0
step() { # DESCRIPTION COMMAND...: a check the next steps need
  [ $stopped = 0 ] || return 0
  local before=$fails
  check "$@"
  [ $fails = "$before" ] || stopped=1
}

walk() {
  # 2. the server host, from the older packages (the upgrade installs debs/)
  cp "$T"/debs-old/*.deb "$ADMIN_HOME/"
  step "the guide's apt install of tessera-server and tessera-cli (no network: the dependencies are installed)" \
    guide_sh server-install
  step "they are installed" test -x /usr/bin/tessera-server -a -x /usr/bin/tessera
  step "server.conf is 0640 root:tessera before the admin edits it" mode_owner /etc/tessera/server.conf "640 root:tessera"
  step "the guide's server.conf lines written into /etc/tessera/server.conf" \
    guide_conf server-conf /etc/tessera/server.conf
  step "and it stays 0640 root:tessera" mode_owner /etc/tessera/server.conf "640 root:tessera"
  step "tessera-server.service starts (its ExecStart as User=tessera) and says READY=1" \
    unit_start tessera-server
  step "it runs as the tessera user" test "$(stat -c %U "/proc/${unit_pid[tessera-server]}")" = tessera
  step "its / is read-only and /var/lib/tessera writable (ProtectSystem=strict, ReadWritePaths=)" \
    test "$(mount_opt tessera-server /):$(mount_opt tessera-server /var/lib/tessera)" = ro:rw
  local listen port
  listen=$(conf_value /etc/tessera/server.conf listen)
  port=${listen##*:}
  step "/readyz answers 200 on the guide's listen address ($listen) once it said READY=1" \
    curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz"
  step "the first start made the admin token, 0600 tessera" mode_owner /var/lib/tessera/admin.token "600 tessera:tessera"
  step "and the embedded PostgreSQL in /var/lib/tessera/pg" test -d /var/lib/tessera/pg/data
  step "the guide's first CLI commands (whoami, department and project create)" guide_sh server-admin
  step "whoami says admin" has "$(out server-admin)" admin
  step "project list shows the guide's project" has "$(tessera_admin project list)" vision

  # 3. the node
  step "the guide's node token command" guide_sh node-token
  step "the token file is 0600" mode_owner "$ADMIN_HOME/gpu-01.token" "600 root:root"
  # the guide's host name for the server, here on this machine
  echo "127.0.0.1 tessera.example.org" >>/etc/hosts
  step "the guide's apt install of tessera-agent" guide_sh node-install
  step "agent.conf is 0600 root:root" mode_owner /etc/tessera/agent.conf "600 root:root"
  step "the guide's tessera-agent --join" guide_sh node-join
  step "--join says it joined as gpu-01" has "$(out node-join)" "as node gpu-01"
  step "--join wrote the token to /etc/tessera/agent.token, 0600" mode_owner /etc/tessera/agent.token "600 root:root"
  step "the same token" cmp -s /etc/tessera/agent.token "$ADMIN_HOME/gpu-01.token"
  step "agent.conf names the server and the node" \
    test "$(conf_value /etc/tessera/agent.conf server):$(conf_value /etc/tessera/agent.conf node)" = \
    "http://tessera.example.org:8080:gpu-01"
  step "the guide's agent.conf lines written into /etc/tessera/agent.conf" \
    guide_conf agent-conf /etc/tessera/agent.conf
  step "and its lines for a machine without a GPU" guide_conf agent-conf-sim /etc/tessera/agent.conf
  step "agent.conf stays 0600 root:root" mode_owner /etc/tessera/agent.conf "600 root:root"
  step "tessera-agent.service starts and says READY=1 once registered" unit_start tessera-agent
  step "it runs with its unit's UMask=0077" \
    test "$(awk '/^Umask:/ { print $2 }' "/proc/${unit_pid[tessera-agent]}/status")" = 0077
  step "it registered as gpu-01 with its simulated GPUs" \
    grep -q "READY=1 STATUS=registered node=gpu-01 gpus=" "$T/logs/tessera-agent.said"
  step "the guide's node check: describe node, a job on half a GPU (--wait), its logs" guide_sh node-check
  step "describe node shows gpu-01's GPUs" has "$(out node-check)" gpu-01
  step "the job finished: succeeded" has "$(tessera_admin describe job smoke -p vision)" succeeded
  step "its logs are gpuload's, which saw half of an 80 GiB GPU (the shim's limit)" \
    has "$(out node-check)" 'gpu="Tessera SimGPU 80GiB" gpu_memory=40GiB'
  step "it wrote its checkpoint under the packaged checkpoint-root" \
    test -s /var/lib/tessera-agent/checkpoints/vision/1/gpuload.ckpt

  # HTTPS and Prometheus
  walk_tls
  walk_prometheus

  # backups and restore
  step "the guide's pg_dump of the embedded database" guide_sh backup
  step "the dump holds the projects" \
    bash -c "pg_restore -f - -a -t project '$ADMIN_HOME/tessera.dump' | grep -q vision"
  walk_restore
  walk_replicas

  # upgrades, then versions
  walk_upgrade
  step "the guide's tessera version and tessera-agent --version" guide_sh versions
  local release
  release=$(dpkg-query -W -f '${Version}' tessera-server)
  step "tessera version shows the client's release, the packages'" has "$(out versions)" "client:   tessera $release"
  step "and the server's" has "$(out versions)" "server:   tessera-server $release at https://tessera.example.org:8443"
  step "tessera-agent --version the agent's" has "$(out versions)" "tessera-agent $release"
}

tessera_admin() { # the CLI as the guide's admin, for the walk's own checks
  (. "$T/admin.env" && HOME=/root tessera "$@") 2>&1
}

teardown() {
  stopped=0
  if [ $fails -ne 0 ] && [ -n "${unit_pid[tessera-server]:-}" ]; then
    echo "  --- the jobs, as the server saw them ---"
    { tessera_admin list -A --all; tessera_admin events smoke -p vision; } | sed 's/^/  | /'
    tessera_admin events across -p vision 2>/dev/null | sed 's/^/  | /'
  fi
  [ -z "${unit_pid[tessera-agent]:-}" ] || step "tessera-agent stops on SIGTERM (systemctl stop) and says STOPPING=1" unit_stop tessera-agent
  [ -z "${unit_pid[tessera-server]:-}" ] || step "tessera-server stops on SIGTERM and says STOPPING=1" unit_stop tessera-server
  walk_later_stop
  local left base
  base=$(sed -n 's/.*jobs are sandboxed .* base=\(tessera-[0-9a-f]*\).*/\1/p' "$T/logs/tessera-agent.log" 2>/dev/null)
  [ -z "$base" ] || check "the agent's control groups ($base) are gone" \
    test -z "$(find /sys/fs/cgroup -maxdepth 2 -name "$base" 2>/dev/null)"
  left=$(others)
  check "nothing is left running: no server, PostgreSQL, agent, supervisor or job" test -z "$left"
  [ -z "$left" ] || printf '%s\n' "$left" | sed 's/^/  left: /'
  if [ $fails -ne 0 ]; then
    for f in "$T"/logs/*.log; do
      [ -f "$f" ] || continue
      echo "  --- last lines of ${f##*/} ---"
      tail -n 20 "$f" | sed 's/^/  | /'
    done
  fi
}

walk
teardown
echo "guide_walk: $fails failed"
