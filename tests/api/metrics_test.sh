#!/usr/bin/env bash
# tests/api/metrics_test.sh - the server's /metrics as Prometheus tools read
# it: a server with an agent on two simulated GPUs, a project, a running job
# and a pending one (so that every family has samples), then
#   1. `promtool check metrics` on /metrics: no lint problem at all;
#   2. a real Prometheus (Debian's prometheus) scrapes /metrics with a bearer
#      token every second: the target is up and the server's gauges and
#      counters are queryable through Prometheus's API.
# Needs TS_BIN_DIR, promtool and prometheus (scripts/lib/common.sh installs
# Debian's prometheus package). Label api.
. "$(dirname "$0")/../browser/lib.sh"

command -v promtool >/dev/null || web_fail "promtool not found: install Debian's prometheus package"
command -v prometheus >/dev/null || web_fail "prometheus not found: install Debian's prometheus package"

web_say "starting tessera-server and an agent with two simulated GPUs"
web_start_server --series-interval 1s
api POST /departments '{"name":"research","quota":{"gpus":1}}' >/dev/null
api POST /projects '{"name":"vision","department":"research","quota":{"gpus":1,"limit":1}}' >/dev/null
web_start_agent node-1 sim:2x16GiB
ready_node() { api GET /nodes | grep -q '"state":"ready"'; }
web_wait 30 "a ready node" ready_node
job() { # NAME GPU-JSON
  api POST /jobs "{\"name\":\"$1\",\"project\":\"vision\",\"grace_period\":\"1s\",\"gpu\":$2,\"command\":[\"sleep\",\"600\"]}" >/dev/null
}
job runs '{"count":1}'
job waits '{"count":1}'
running() { api GET '/jobs?state=running' | grep -q '"name":"runs"'; }
web_wait 30 "a running job" running
sampled() { api GET /nodes | grep -q '"sampled_at":"'; }
web_wait 30 "a GPU sample" sampled

metrics() { curl -fsS -H "Authorization: Bearer $WEB_TOKEN" "$WEB_URL/metrics"; }
# the GPU gauges are the series sampler's latest figures: they come with its
# first pass after the agent's first sample, not with the sample itself
families() {
  metrics >"$WEB_TMP/metrics.txt" || return 1
  for family in tessera_cluster_gpus tessera_gpu_memory_used_bytes tessera_jobs tessera_http_requests_total; do
    grep -q "^$family[{ ]" "$WEB_TMP/metrics.txt" || return 1
  done
}
web_wait 30 "every family on /metrics (cluster, GPU, jobs, requests)" families

web_say "promtool check metrics"
if ! promtool check metrics <"$WEB_TMP/metrics.txt" >"$WEB_TMP/promtool.out" 2>&1 ||
  [ -s "$WEB_TMP/promtool.out" ]; then
  cat "$WEB_TMP/promtool.out" >&2
  web_fail "promtool check metrics found problems in /metrics"
fi
echo "ok   promtool check metrics: no problem in $(grep -vc '^#' "$WEB_TMP/metrics.txt") samples"

web_say "a real Prometheus scraping /metrics"
mkdir -p "$WEB_TMP/prom"
printf '%s' "$WEB_TOKEN" >"$WEB_TMP/prom/token"
cat >"$WEB_TMP/prom/prometheus.yml" <<EOF
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: tessera
    authorization: {credentials_file: $WEB_TMP/prom/token}
    static_configs: [{targets: ["${WEB_URL#http://}"]}]
EOF
promtool check config "$WEB_TMP/prom/prometheus.yml" >/dev/null || web_fail "promtool check config"
prom_url=
for try in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 20000))
  # started from inside WEB_TMP, so that the cleanup finds and stops it
  (cd "$WEB_TMP/prom" && exec prometheus --config.file="$WEB_TMP/prom/prometheus.yml" \
    --storage.tsdb.path="$WEB_TMP/prom/data" --web.listen-address="127.0.0.1:$port" \
    2>"$WEB_TMP/prom/prometheus.log") &
  prom_pid=$!
  for i in $(seq 100); do
    kill -0 $prom_pid 2>/dev/null || break
    if curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1; then
      prom_url=http://127.0.0.1:$port
      break 2
    fi
    sleep 0.2
  done
  kill $prom_pid 2>/dev/null
  wait $prom_pid 2>/dev/null
done
[ -n "$prom_url" ] || { tail -n 20 "$WEB_TMP/prom/prometheus.log" >&2; web_fail "prometheus did not start"; }
web_child_pid=$prom_pid

query() { curl -fsS "$prom_url/api/v1/query" --data-urlencode "query=$1"; }
# the scrape worked: up is 1 and the series carry the server's values
up() { query 'up{job="tessera"}' | grep -q '"value":\[[0-9.]*,"1"\]'; }
web_wait 30 "Prometheus to scrape the server (up == 1)" up
gpus() { query 'tessera_cluster_gpus{job="tessera"}' | grep -q '"value":\[[0-9.]*,"2"\]'; }
web_wait 10 "tessera_cluster_gpus == 2 in Prometheus" gpus
pending() { query 'tessera_jobs{project="vision",state="pending"}' | grep -q '"value":\[[0-9.]*,"1"\]'; }
web_wait 10 "tessera_jobs{project=vision,state=pending} == 1 in Prometheus" pending
rate() { query 'sum(rate(tessera_http_requests_total{job="tessera"}[5s])) > 0' | grep -q '"value"'; }
web_wait 20 "a rate of tessera_http_requests_total in Prometheus" rate
# Prometheus's own verdict on the last scrape: no sample was dropped
dropped() { query 'scrape_samples_post_metric_relabeling{job="tessera"} == scrape_samples_scraped{job="tessera"}' | grep -q '"value"'; }
web_wait 10 "every scraped sample kept" dropped
echo "ok   Prometheus scraped /metrics: up, tessera_cluster_gpus, tessera_jobs, rate(tessera_http_requests_total)"
