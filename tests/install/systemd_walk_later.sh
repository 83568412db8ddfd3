# tests/install/systemd_walk_later.sh - sourced by systemd_walk.sh's driver
# inside the throwaway root, with its helpers (step, prop, props, is,
# guide_sh, guide_conf, out, tessera_admin): what guide_walk_later.sh walks
# under unit_run.sh and depends on the units, here under systemd itself:
#   walk_job_groups  a running job's cgroups (pids, memory, cpu, devices) are
#                    below tessera-agent.service's group (agent/daemon/
#                    cgroup.c: Delegate=yes on cgroup v1), and go with it
#   walk_tls         the guide's CA and certificates (openssl), server.conf's
#                    TLS lines: the server, as user tessera under the unit's
#                    hardening, reads them from /etc/tessera/tls and
#                    serves https; agent.conf's https server and ca: the
#                    agent registers over https; the CLI with the CA
#   walk_upgrade     the walk installed the packages repacked as V~pre1
#                    (systemd_test.sh): the guide's apt install of V over
#                    the running services with a job running, then
#                    systemctl restart of both: no failed start, the job
#                    adopted and still below the unit, conffiles kept
#   walk_restore     the guide's pg_dump, Debian's PostgreSQL 15 cluster
#                    started by this systemd as the database host, the
#                    role, .pgpass, pg_restore, server.conf's database line:
#                    the server's unit starts on the external database
# Not walked here (guide_walk_later.sh walks them under unit_run.sh; they
# depend on no unit): Prometheus and the second replica.

# submit NAME GPULOAD-ARGS...: a job on half a GPU, running within 30 s
submit() {
  local name=$1
  shift
  tessera_admin submit "$name" -p vision --gpu-portion-request 0.5 -- tessera-gpuload "$@" >/dev/null &&
    wait_state "$name" running 30
}
# cg_of PID CONTROLLER: the process's group in that v1 hierarchy
cg_of() {
  awk -F: -v c="$2" '{ n = split($2, l, ","); for (i = 1; i <= n; i++) if (l[i] == c) print $3 }' \
    "/proc/$1/cgroup" 2>/dev/null
}
# job_pid ARGS: the pid of the tessera-gpuload whose arguments end in ARGS
job_pid() {
  local d
  for d in /proc/[0-9]*; do
    [ "$(cat "$d/comm" 2>/dev/null)" = tessera-gpuload ] || continue
    case "$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)" in *" $1 ") echo "${d#/proc/}" ;; esac
  done | head -n 1
}
# below_unit PID: each of the job's groups is below tessera-agent.service's
# group (the agent's, in name=systemd), in a job group of the agent's base
below_unit() {
  local unit c g bad=
  unit=$(cg_of "$(prop tessera-agent MainPID)" name=systemd)
  case $unit in */system.slice/tessera-agent.service) ;; *)
    echo "  the agent's group is $unit"
    return 1
    ;;
  esac
  for c in pids memory cpu devices; do
    g=$(cg_of "$1" $c)
    case $g in "$unit"/tessera-*/*-*) ;; *) bad="$bad $c:$g" ;; esac
  done
  [ -z "$bad" ] || { echo "  not below $unit:$bad"; return 1; }
}

walk_job_groups() {
  local pid g
  step "a job that runs until cancelled is running" \
    submit probe --memory 1GiB --duration 10m
  pid=$(job_pid "--duration 10m")
  step "its process is there" test -n "$pid"
  step "its cgroups (pids, memory, cpu, devices) are below tessera-agent.service's" below_unit "$pid"
  g=$(cg_of "$pid" pids)
  step "systemd counts its tasks in the unit's (TasksCurrent of the unit >= pids.current of the job's group)" \
    test "$(prop tessera-agent TasksCurrent)" -ge "$(cat "/sys/fs/cgroup/pids$g/pids.current" 2>/dev/null || echo 1000000)"
  step "tessera cancel ends it" tessera_admin cancel probe -p vision
  step "  cancelled" wait_state probe cancelled 30
  step "  and its group is removed" wait_for 10 test ! -e "/sys/fs/cgroup/pids$g"
}

walk_tls() {
  step "the guide's CA and server certificate (openssl)" guide_sh tls-certs
  step "the guide's TLS lines written into server.conf" guide_conf tls-server-conf /etc/tessera/server.conf
  step "systemctl restart tessera-server: as tessera, it reads its certificate and key from /etc/tessera/tls" \
    systemctl restart tessera-server
  server_stops=$((server_stops + 1))
  step "  and says it serves https (STATUS=)" \
    has "$(prop tessera-server StatusText)" "listening on 0.0.0.0:8443 port 8443 (https)"
  step "/readyz answers 200 over https to a client given the guide's CA" \
    curl -fsS --cacert /etc/tessera/tls/ca.pem -o /dev/null https://tessera.example.org:8443/readyz
  step "the guide's https server and ca written into agent.conf" guide_conf tls-agent-conf /etc/tessera/agent.conf
  step "systemctl restart tessera-agent: it registers over https (READY=1)" systemctl restart tessera-agent
  step "  as gpu-01" has "$(prop tessera-agent StatusText)" "registered node=gpu-01"
  step "the guide's CLI over https: --ca, config set ca, describe node" guide_sh tls-cli
  step "describe node shows gpu-01" has "$(out tls-cli)" gpu-01
}

walk_upgrade() {
  local old new pid
  old=$(dpkg-query -W -f '${Version}' tessera-server)
  step "a job that outlasts the upgrade (30 steps of 1 s) is running" \
    submit across --memory 1GiB --steps 30
  rm -f "$ADMIN_HOME"/*.deb
  cp "$T"/debs/*.deb "$ADMIN_HOME/"
  new=$(dpkg-deb -f "$(ls "$ADMIN_HOME"/tessera-server_*.deb)" Version)
  step "the guide's apt install of the newer packages ($old to $new) over the running services" guide_sh upgrade
  step "dpkg has the three at $new" \
    is "$(dpkg-query -W -f '${Version} ' tessera-server tessera-agent tessera-cli)" "$new $new $new "
  step "nothing was restarted by the upgrade (NRestarts 0, both active)" \
    is "$(props tessera-server ActiveState,NRestarts)$(props tessera-agent ActiveState,NRestarts)" \
    "ActiveState=active NRestarts=0 ActiveState=active NRestarts=0 "
  step "server.conf keeps its TLS lines, 0640 root:tessera; agent.conf its ca" \
    bash -c "grep -q '^tls-cert = ' /etc/tessera/server.conf && grep -q '^ca = /etc/tessera/tls/ca.pem' \
      /etc/tessera/agent.conf && [ \"\$(stat -c '%a %U:%G' /etc/tessera/server.conf)\" = '640 root:tessera' ]"
  step "systemctl restart tessera-server on the new binary" systemctl restart tessera-server
  server_stops=$((server_stops + 1))
  step "systemctl restart tessera-agent on the new binary" systemctl restart tessera-agent
  step "both active, not counted as failures (NRestarts 0), Result=success" \
    is "$(props tessera-server ActiveState,NRestarts,Result)$(props tessera-agent ActiveState,NRestarts,Result)" \
    "ActiveState=active NRestarts=0 Result=success ActiveState=active NRestarts=0 Result=success "
  step "the new agent adopted the running job (journal)" \
    bash -c "journalctl -u tessera-agent -q --no-pager | grep -q 'adopted job .* state=running'"
  pid=$(job_pid "--steps 30")
  step "its groups are still below the unit's" below_unit "${pid:-0}"
  step "the job kept running through the upgrade and succeeds" wait_state across succeeded 90
}

# the restore into an external PostgreSQL, Debian's cluster 15/main run by
# this systemd (postgresql@15-main.service), the server's unit on it over
# TCP with the tessera user's .pgpass
pg_unit=
walk_restore() {
  echo "127.0.0.1 db.example.org" >>/etc/hosts
  step "the guide's pg_dump of the embedded database (as tessera)" guide_sh backup
  step "systemctl start postgresql@15-main: the database host's PostgreSQL, under this systemd" \
    systemctl start postgresql@15-main
  pg_unit=postgresql@15-main
  step "the guide's role and empty database on it" guide_sh restore-db
  # this stop ends the embedded PostgreSQL; teardown's stop will not (its
  # count in server_stops moves here)
  step "systemctl stop tessera-server" systemctl stop tessera-server
  step "the guide's .pgpass" guide_sh restore-pgpass
  step "  0600 tessera" mode_owner /var/lib/tessera/.pgpass "600 tessera:tessera"
  step "the guide's pg_restore of the dump into the fresh database" guide_sh restore
  step "the guide's database line written into server.conf" guide_conf restore-conf /etc/tessera/server.conf
  step "systemctl start tessera-server: under its unit it reaches the external database over TCP" \
    systemctl start tessera-server
  step "  says so (STATUS=)" \
    has "$(prop tessera-server StatusText)" "listening on 0.0.0.0:8443 port 8443 (https), external database"
  step "  and runs no embedded PostgreSQL" \
    test -z "$(grep -ls /var/lib/tessera/pg /proc/[0-9]*/cmdline 2>/dev/null)"
  step "the guide's checks after the restore (the admin token is the dump's)" guide_sh restore-check
  step "  the project and the job are there" \
    bash -c "grep -q vision '$T/out/restore-check.out' && grep -q succeeded '$T/out/restore-check.out'"
}
