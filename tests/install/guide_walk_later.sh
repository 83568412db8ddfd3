# tests/install/guide_walk_later.sh - sourced by guide_walk.sh inside the
# throwaway root: the guide's sections after the first job, in its order,
# each as walk_NAME, with guide_walk.sh's helpers (step, guide_sh,
# guide_conf, out, mode_owner, tessera_admin) and unit_run.sh's:
#   walk_tls        HTTPS: the guide's CA and server certificate (openssl),
#                   server.conf's TLS lines, the server restarted on 8443,
#                   agent.conf's https server and ca, the agent restarted,
#                   the CLI with --ca and `config set ca`, a job over https;
#                   then (walk_mtls) the node's client certificate, the
#                   agent restarted with it, the server with tls-client-ca:
#                   the node's token refused without the certificate (403),
#                   accepted with it, a job through the agent
#   walk_prometheus the viewer token, the scrape job merged into Debian's
#                   /etc/prometheus/prometheus.yml, promtool, then Debian's
#                   Prometheus (as its unit runs it: user prometheus) until
#                   up{job="tessera"} is 1
#   walk_restore    the dump restored into a fresh database of an external
#                   PostgreSQL (Debian's postgresql-15 cluster "main" on
#                   this machine, db.example.org), the server started on it
#   walk_replicas   a second replica on the same database, as a second host
#                   would run it: same data, one leader, failover
#   walk_upgrade    newer packages installed over the running ones with a
#                   job running, both services restarted: data, conffiles
#                   and the job kept, the schema checked
# The walk started the packages of the same build repacked as version
# V~pre1 (guide_test.sh): the upgrade goes to V, the same files, since no
# older release is built here; install/upgrade migrates an old schema.

# the Debian prometheus's pid, and the cluster's state, for walk_later_stop
prom_pid=
pg_main=0
fails_not() { ! "$@"; }

unit_restart() { # NAME: `systemctl restart NAME`; the earlier log kept as NAME.log.1
  unit_stop "$1" || return 1
  mv "/opt/tessera-test/logs/$1.log" "/opt/tessera-test/logs/$1.log.1"
  unit_start "$1"
}

# guide_yaml_scrape NAME FILE: the guide's yaml block NAME, a
# `scrape_configs:` list, added to FILE's own list as an admin edits it
# (FILE keeps its other jobs, mode and owner)
guide_yaml_scrape() {
  local block=$T/blocks/$1.yaml file=$2 tmp=$T/yaml.tmp
  [ -f "$block" ] || { echo "  the guide has no block marked $1"; return 1; }
  [ "$(head -n 1 "$block")" = "scrape_configs:" ] || { echo "  block $1 is not a scrape_configs list"; return 1; }
  grep -q '^scrape_configs:' "$file" || { echo "  $file has no scrape_configs"; return 1; }
  awk -v block="$block" '
    { print }
    /^scrape_configs:/ { while ((getline line <block) > 0) if (line != "scrape_configs:") print line }
  ' "$file" >"$tmp" && cat "$tmp" >"$file"
  rm -f "$tmp"
}

cli_without_ca() { # whoami as the admin, with neither --ca nor a config file
  (. "$T/admin.env" && HOME=/nonexistent tessera whoami) >/dev/null 2>&1
}

walk_tls() {
  step "the guide's CA and server certificate (openssl)" guide_sh tls-certs
  step "server.key is 0640 root:tessera" mode_owner /etc/tessera/tls/server.key "640 root:tessera"
  step "ca.key is 0600 root:root" mode_owner /etc/tessera/tls/ca.key "600 root:root"
  step "the guide's TLS lines written into server.conf" guide_conf tls-server-conf /etc/tessera/server.conf
  step "tessera-server restarts (systemctl restart) and says READY=1 on https" unit_restart tessera-server
  step "  listening on 8443 (https)" grep -q "STATUS=listening on 0.0.0.0:8443 port 8443 (https)" "$T/logs/tessera-server.said"
  step "/readyz answers 200 over https to a client given the guide's CA" \
    curl -fsS --cacert /etc/tessera/tls/ca.pem -o /dev/null https://tessera.example.org:8443/readyz
  step "a client without that CA is refused (the certificate is checked)" \
    fails_not curl -fsS -o /dev/null https://tessera.example.org:8443/readyz
  step "nothing answers plain http any more" fails_not curl -fsS -o /dev/null http://127.0.0.1:8080/readyz
  step "the guide's https server and ca written into agent.conf" guide_conf tls-agent-conf /etc/tessera/agent.conf
  step "agent.conf stays 0600 root:root" mode_owner /etc/tessera/agent.conf "600 root:root"
  step "tessera-agent restarts and says READY=1 once registered over https" unit_restart tessera-agent
  step "  as gpu-01" grep -q "READY=1 STATUS=registered node=gpu-01 gpus=" "$T/logs/tessera-agent.said"
  step "the guide's CLI over https: --ca, config set ca, describe node" guide_sh tls-cli
  step "whoami with --ca says admin" has "$(out tls-cli)" admin
  step "describe node (the ca from the config file) shows gpu-01" has "$(out tls-cli)" gpu-01
  step "the CLI without the CA is refused" fails_not cli_without_ca
  step "a job on half a GPU runs through the agent over https and succeeds" \
    tessera_admin submit smoke-tls -p vision --gpu-portion-request 0.5 --wait -- \
    tessera-gpuload --memory 1GiB --steps 2
  walk_mtls
}

# agent_whoami [CURL OPTIONS]: the HTTP status of whoami with the node's
# token (from standard input, not the command line) over https
agent_whoami() {
  echo "Authorization: Bearer $(cat /etc/tessera/agent.token)" |
    curl -sS -o /dev/null -w '%{http_code}' --cacert /etc/tessera/tls/ca.pem -H @- "$@" \
      https://tessera.example.org:8443/api/v1/whoami
}

# client certificates: the node's, then the server asking agents for one
walk_mtls() {
  local tls=/etc/tessera/tls
  step "the guide's node certificate signed by its CA (openssl)" guide_sh tls-client-cert
  step "gpu-01.key is 0600 root:root" mode_owner $tls/gpu-01.key "600 root:root"
  step "gpu-01.pem is for TLS clients, issued by the guide's CA" \
    bash -c "openssl verify -CAfile $tls/ca.pem -purpose sslclient $tls/gpu-01.pem >/dev/null"
  step "the guide's cert and key written into agent.conf" guide_conf tls-agent-cert /etc/tessera/agent.conf
  step "tessera-agent restarts with its certificate and registers" unit_restart tessera-agent
  step "the guide's tls-client-ca written into server.conf" guide_conf tls-client-ca /etc/tessera/server.conf
  step "tessera-server restarts asking agents for certificates" unit_restart tessera-server
  step "  it says so (client_certificates=agents)" grep -q "client_certificates=agents" "$T/logs/tessera-server.log"
  step "the node's token without its certificate is refused: 403" test "$(agent_whoami)" = 403
  step "with the node's certificate and key it is accepted: 200" \
    test "$(agent_whoami --cert $tls/gpu-01.pem --key $tls/gpu-01.key)" = 200
  step "the CLI (an admin token) still needs no certificate" guide_sh tls-cli
  step "the agent reconnected with its certificate: a job runs and succeeds" \
    tessera_admin submit smoke-mtls -p vision --gpu-portion-request 0.5 --wait -- \
    tessera-gpuload --memory 1GiB --steps 2
}

prom_query() { # QUERY: Prometheus's answer (JSON)
  curl -fsS --data-urlencode "query=$1" http://127.0.0.1:9090/api/v1/query
}
prom_up() { # QUERY: true once QUERY's first sample is "1", within 45 s (a scrape every 15 s)
  local i
  for i in $(seq 225); do
    case $(prom_query "$1" 2>/dev/null) in *',"1"]'*) return 0 ;; esac
    sleep 0.2
  done
  echo "  $1: $(prom_query "$1" 2>&1)"
  curl -fsS http://127.0.0.1:9090/api/v1/targets | grep -o '"lastError":"[^"]*"' | sed 's/^/  /'
  return 1
}
# Debian's Prometheus as prometheus.service runs it: user prometheus, the
# packaged config; its data in /tmp (the unit's is private)
prom_start() {
  local i
  setpriv --reuid prometheus --regid prometheus --init-groups -- env -i HOME=/var/lib/prometheus \
    PATH=/usr/bin:/bin prometheus --config.file=/etc/prometheus/prometheus.yml \
    --storage.tsdb.path=/tmp/prometheus-data --web.listen-address=127.0.0.1:9090 \
    </dev/null >"$T/logs/prometheus.log" 2>&1 &
  prom_pid=$!
  for i in $(seq 150); do
    curl -fsS -o /dev/null http://127.0.0.1:9090/-/ready 2>/dev/null && return 0
    kill -0 $prom_pid 2>/dev/null || break
    sleep 0.2
  done
  tail -n 10 "$T/logs/prometheus.log" | sed 's/^/  | /'
  return 1
}

walk_prometheus() {
  step "the guide's viewer token for Prometheus" guide_sh prometheus-token
  step "the token file is 0600 prometheus" mode_owner /etc/prometheus/tessera.token "600 prometheus:prometheus"
  step "the guide's scrape job added to the scrape_configs of Debian's prometheus.yml" \
    guide_yaml_scrape prometheus-scrape /etc/prometheus/prometheus.yml
  step "the guide's promtool check config" guide_sh prometheus-check
  step "Debian's Prometheus starts on it, as user prometheus" prom_start
  step "it scrapes the server over https with the token: up{job=\"tessera\"} is 1" prom_up 'up{job="tessera"}'
  step "and the server's figures are in it: tessera_cluster_gpus is the 2 simulated GPUs" \
    prom_up 'tessera_cluster_gpus == bool 2'
}

walk_restore() {
  echo "127.0.0.1 db.example.org" >>/etc/hosts
  step "the database host's PostgreSQL starts (Debian's cluster 15/main, as postgresql.service would)" \
    pg_ctlcluster 15 main start
  pg_main=1
  step "the guide's role and empty database on it" guide_sh restore-db
  step "tessera-server stops (systemctl stop)" unit_stop tessera-server
  step "the guide's .pgpass" guide_sh restore-pgpass
  step ".pgpass is 0600 tessera" mode_owner /var/lib/tessera/.pgpass "600 tessera:tessera"
  step "the guide's pg_restore of the dump into the fresh database" guide_sh restore
  step "the guide's database line written into server.conf" guide_conf restore-conf /etc/tessera/server.conf
  mv "$T/logs/tessera-server.log" "$T/logs/tessera-server.log.2"
  step "tessera-server starts on the restored database and says READY=1" unit_start tessera-server
  step "  the external database, not the embedded one" \
    grep -q "STATUS=listening on 0.0.0.0:8443 port 8443 (https), external database" "$T/logs/tessera-server.said"
  step "  no embedded PostgreSQL runs" fails_not grep -qs /var/lib/tessera/pg /proc/[0-9]*/cmdline
  step "  the schema came with the dump: no migration applied" \
    fails_not grep -q "applied migration" "$T/logs/tessera-server.log"
  step "the guide's checks after the restore (the admin token is the dump's)" guide_sh restore-check
  step "the project is there" has "$(out restore-check)" vision
  step "and the job, succeeded" has "$(out restore-check)" succeeded
  step "the external database holds them (smoke, smoke-tls, smoke-mtls)" \
    test "$(runuser -u postgres -- psql -d tessera -tAc "SELECT count(*) FROM job WHERE name LIKE 'smoke%'")" = 3
}

R2=https://tessera.example.org:8444
r2_pid=
metric() { # URL NAME: NAME's value on URL's /metrics, as the admin
  (. "$T/admin.env" && echo "Authorization: Bearer $TESSERA_TOKEN" |
    curl -fsS --cacert /etc/tessera/tls/ca.pem -H @- "$1/metrics") 2>/dev/null |
    sed -n "s/^$2 //p"
}
leads_within() { # URL SECONDS: its tessera_scheduler_leader is 1 within SECONDS
  local i
  for i in $(seq $(($2 * 5))); do
    [ "$(metric "$1" tessera_scheduler_leader)" = 1 ] && return 0
    sleep 0.2
  done
  echo "  $1: tessera_scheduler_leader $(metric "$1" tessera_scheduler_leader)"
  return 1
}
# A second replica as tessera-server.service runs it on a second host (user
# tessera, the installed server.conf, .pgpass in the tessera user's home);
# here beside the first, so with a data folder and a port of its own
r2_start() {
  local i
  install -d -m 0700 -o tessera -g tessera /var/lib/tessera-replica2
  setpriv --reuid tessera --regid tessera --init-groups -- env -i HOME=/var/lib/tessera USER=tessera \
    PATH=/usr/sbin:/usr/bin:/sbin:/bin tessera-server --config /etc/tessera/server.conf \
    --data-dir /var/lib/tessera-replica2 --listen 0.0.0.0:8444 \
    </dev/null >"$T/logs/replica2.log" 2>&1 &
  r2_pid=$!
  for i in $(seq 300); do
    curl -fsS --cacert /etc/tessera/tls/ca.pem -o /dev/null "$R2/readyz" 2>/dev/null && return 0
    kill -0 $r2_pid 2>/dev/null || break
    sleep 0.2
  done
  tail -n 10 "$T/logs/replica2.log" | sed 's/^/  | /'
  return 1
}
r2_stop() {
  local st=0
  kill -TERM "$r2_pid" 2>/dev/null || return 1
  wait "$r2_pid" || st=$?
  r2_pid=
  return $st
}
submit_ha() {
  tessera_admin --server "$R2" submit ha -p vision --gpu-portion-request 0.5 -- \
    tessera-gpuload --memory 1GiB --steps 2 >/dev/null
}
placed_by_r2() { # the job ha left pending: bound by replica 2's scheduler
  local i st
  for i in $(seq 100); do
    st=$(tessera_admin --server "$R2" describe job ha -p vision -o json | jq -r .state 2>/dev/null)
    case $st in scheduled | running | succeeded) return 0 ;; esac
    sleep 0.2
  done
  echo "  ha is $st"
  return 1
}

walk_replicas() {
  step "a second replica on the same database starts and answers /readyz" r2_start
  step "  it serves the same data: the project, through it" \
    has "$(tessera_admin --server "$R2" project list)" vision
  step "the guide's check of the leader" guide_sh replica-leader
  step "  the first replica leads" has "$(out replica-leader)" "tessera_scheduler_leader 1"
  step "  the second does not" test "$(metric "$R2" tessera_scheduler_leader)" = 0
  step "the first replica stops (systemctl stop)" unit_stop tessera-server
  step "  the second leads within 10 s" leads_within "$R2" 10
  step "  a job is submitted through it" submit_ha
  step "  and its scheduler binds it (the first is down)" placed_by_r2
  step "the first replica starts again and says READY=1" unit_start tessera-server
  step "  the agent, back on it, runs the job: succeeded" wait_state ha succeeded 60
  step "the second replica stops on SIGTERM, status 0" r2_stop
}

start_across() {
  tessera_admin submit across -p vision --gpu-portion-request 0.5 -- \
    tessera-gpuload --memory 1GiB --steps 45 >/dev/null && wait_state across running 30
}

walk_upgrade() {
  local old new
  old=$(dpkg-query -W -f '${Version}' tessera-server)
  step "a job that outlasts the upgrade (45 steps of 1 s) is running" start_across
  rm -f "$ADMIN_HOME"/*.deb
  cp "$T"/debs/*.deb "$ADMIN_HOME/"
  new=$(dpkg-deb -f "$(ls "$ADMIN_HOME"/tessera-server_*.deb)" Version)
  step "the guide's apt install of the newer packages ($old to $new) over the running services" guide_sh upgrade
  step "dpkg has the three at $new" test "$(dpkg-query -W -f '${Version} ' tessera-server tessera-agent tessera-cli)" = "$new $new $new "
  step "server.conf keeps the admin's lines (TLS, database) and stays 0640 root:tessera" \
    bash -c "grep -q '^tls-cert = ' /etc/tessera/server.conf && grep -q '^database = postgresql://tessera@' \
      /etc/tessera/server.conf && [ \"\$(stat -c '%a %U:%G' /etc/tessera/server.conf)\" = '640 root:tessera' ]"
  step "agent.conf keeps its https server and ca" grep -q '^ca = /etc/tessera/tls/ca.pem' /etc/tessera/agent.conf
  step "the token files and the data stay" test -s /etc/tessera/agent.token -a -s /var/lib/tessera/admin.token
  step "the server restarts on the new binary (systemctl restart) and says READY=1" unit_restart tessera-server
  step "  its migrations checked the schema: up to date, nothing applied again" \
    bash -c "grep -q 'database schema is up to date' '$T/logs/tessera-server.log' &&
      ! grep -q 'applied migration' '$T/logs/tessera-server.log'"
  step "the agent restarts (systemctl restart) and says READY=1" unit_restart tessera-agent
  step "  it adopted the running job" grep -q "adopted job .* state=running" "$T/logs/tessera-agent.log"
  step "the job kept running through the upgrade and succeeds" wait_state across succeeded 90
  step "the data is still there: the projects, as the same admin" has "$(tessera_admin project list)" vision
}

# What the later sections left running: the second replica, Prometheus,
# the external PostgreSQL (the services are walk's).
walk_later_stop() {
  [ -z "$r2_pid" ] || r2_stop
  if [ -n "$prom_pid" ]; then
    kill -TERM "$prom_pid" 2>/dev/null
    wait "$prom_pid" 2>/dev/null
  fi
  [ $pg_main = 0 ] || pg_ctlcluster 15 main stop -m fast >/dev/null 2>&1
}
