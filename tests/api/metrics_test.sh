#!/usr/bin/env bash
# tests/api/metrics_test.sh - the server's /metrics as Prometheus tools read
# it: a server with an agent on two simulated GPUs, a project, a running job
# and a pending one (so that every family has samples), then
#   1. `promtool check metrics` on /metrics: no lint problem at all;
#   2. the per-GPU series: _ratio names, memory in bytes, DCGM-exporter's
#      labels; every metric the Grafana dashboard (docs/grafana/tessera.json)
#      queries is on /metrics;
#   3. a real Prometheus (Debian's prometheus) scrapes /metrics with a bearer
#      token every second: the target is up, the server's gauges and
#      counters are queryable through Prometheus's API, and every query of
#      the dashboard runs.
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
# DCGM-exporter's label names (gpu, UUID, modelName, Hostname) are on every
# per-GPU series so that queries can join them with DCGM's; modelName is
# camelCase, which promtool's lint reports once per family that carries it.
# That one report is let through, only for tessera_gpu_* families, and only
# while modelName is the only camelCase label name on /metrics.
camel=$(grep -v '^#' "$WEB_TMP/metrics.txt" | grep -o '[{,][A-Za-z_][A-Za-z0-9_]*="' |
  tr -d '{,="' | { grep '[a-z][A-Z]' || true; } | sort -u | tr '\n' ' ')
[ "$camel" = "modelName " ] || web_fail "camelCase label names on /metrics: '$camel' (only DCGM's modelName is allowed)"
promtool check metrics <"$WEB_TMP/metrics.txt" >"$WEB_TMP/promtool.out" 2>&1 || true # its lint exits 3
grep -v "^tessera_gpu_[a-z_]* label names should be written in 'snake_case' not 'camelCase'\$" \
  "$WEB_TMP/promtool.out" >"$WEB_TMP/promtool.rest" || true
if [ -s "$WEB_TMP/promtool.rest" ]; then
  cat "$WEB_TMP/promtool.rest" >&2
  web_fail "promtool check metrics found problems in /metrics"
fi
echo "ok   promtool check metrics: no problem in $(grep -vc '^#' "$WEB_TMP/metrics.txt") samples (beside DCGM's modelName)"

# Prometheus's naming: 0..1 gauges end in _ratio, none is left under its old name
for old in tessera_gpu_allocated tessera_gpu_utilization; do
  ! grep -q "^$old[{ ]" "$WEB_TMP/metrics.txt" || web_fail "$old is still on /metrics (renamed ${old}_ratio)"
done
# a simulated GPU of 16 GiB, with DCGM-exporter's labels
gpu_line=$(grep '^tessera_gpu_memory_total_bytes{' "$WEB_TMP/metrics.txt" | grep 'gpu="0"' | head -n 1)
echo "$gpu_line" | grep -q 'Hostname="node-1"' || web_fail "no Hostname label: $gpu_line"
echo "$gpu_line" | grep -q 'UUID="[^"]' || web_fail "no UUID label: $gpu_line"
echo "$gpu_line" | grep -q 'modelName="[^"]' || web_fail "no modelName label: $gpu_line"
echo "$gpu_line" | grep -q ' 17179869184$' || web_fail "GPU 0 is not 16 GiB: $gpu_line"
grep -q '^tessera_gpu_memory_free_bytes{' "$WEB_TMP/metrics.txt" || web_fail "no tessera_gpu_memory_free_bytes"
echo "ok   per-GPU series: _ratio names, memory total and free in bytes, gpu, UUID, modelName, Hostname"

# the Grafana dashboard (docs/grafana/tessera.json): valid JSON, and every
# metric it queries is a family on /metrics
dashboard=${TS_SOURCE_DIR:-$(dirname "$0")/../..}/docs/grafana/tessera.json
node -e '
  const d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const out = [];
  const walk = (ps) => ps.forEach((p) => { (p.targets || []).forEach((t) => out.push(t.expr)); walk(p.panels || []); });
  walk(d.panels);
  if (!out.length) { console.error("no queries"); process.exit(1); }
  console.log(out.join("\n"));' "$dashboard" >"$WEB_TMP/exprs.txt" ||
  web_fail "docs/grafana/tessera.json is not a dashboard with queries"
grep -o 'tessera_[a-z_]*' "$WEB_TMP/exprs.txt" | sed 's/_bucket$//' | sort -u >"$WEB_TMP/queried.txt"
while read -r name; do
  grep -q "^# TYPE $name " "$WEB_TMP/metrics.txt" || web_fail "the dashboard queries $name, which /metrics does not have"
done <"$WEB_TMP/queried.txt"
echo "ok   docs/grafana/tessera.json: $(wc -l <"$WEB_TMP/exprs.txt") queries over $(wc -l <"$WEB_TMP/queried.txt") metrics, every one on /metrics"

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

# every dashboard query runs in Prometheus, with Grafana's variables as the
# dashboard sets them (every server, a 5 s rate window)
n=0
while read -r expr; do
  q=$(printf '%s' "$expr" | sed 's/\$instance/.*/g; s/\$__rate_interval/5s/g')
  query "$q" | grep -q '"status":"success"' || web_fail "Prometheus refused the dashboard's query: $q"
  n=$((n + 1))
done <"$WEB_TMP/exprs.txt"
dash_data() { query 'tessera_gpu_utilization_ratio{job="tessera",gpu="0",Hostname="node-1",UUID=~".+",modelName=~".+"}' | grep -q '"value"'; }
web_wait 10 "tessera_gpu_utilization_ratio with DCGM's labels in Prometheus" dash_data
echo "ok   Prometheus ran the dashboard's $n queries"
