#!/usr/bin/env bash
# tests/browser/dashboard_test.sh - the dashboard in a real browser against a
# real cluster: tessera-server (embedded PostgreSQL, metric points every
# 2 s), two agents with two simulated 80 GiB GPUs each, a seeded workload,
# then dashboard.mjs drives headless Chromium through it (playwright-core).
#
# The workload, and so the figures the page must show:
#   vision/train-busy   train, 1 GPU, tessera-gpuload busy 90%    -> running
#   vision/notebook-idle interactive, 1 GPU, sleeps (0% util)     -> running, idle
#   nlp/eval-big        interactive, 2 GPUs, nlp's quota is 1     -> pending
# tiles: ready nodes 2 / 2, GPUs ready 4 / 4, allocated 2 / 4, idle 1,
# running 2, pending 1.
#
# Missing Chromium, node or playwright-core fail the test with the command
# that installs them (scripts/test does). Screenshots go to TS_OUT_DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
chromium=${TS_CHROMIUM:-/usr/bin/chromium}
missing=()
[ -x "$chromium" ] || missing+=("Chromium ($chromium): apt-get install chromium")
command -v node >/dev/null 2>&1 || missing+=("node: apt-get install nodejs npm")
[ -f "$here/node_modules/playwright-core/package.json" ] ||
  missing+=("playwright-core: npm install --prefix $here (tests/browser/package.json)")
if [ ${#missing[@]} -gt 0 ]; then
  printf 'FAIL: the browser test needs what is missing here (scripts/test installs it all):\n' >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 1
fi

. "$here/lib.sh"
out=${TS_OUT_DIR:-$WEB_TMP/screenshots}
mkdir -p "$out"
rm -f "$out"/*.png

web_say "starting tessera-server"
web_start_server --series-interval 2s
api POST /departments '{"name":"research","quota":{"gpus":3,"over_quota_weight":2}}' >/dev/null
api POST /departments '{"name":"product","quota":{"gpus":1}}' >/dev/null
api POST /projects '{"name":"vision","department":"research","quota":{"gpus":2,"limit":4}}' >/dev/null
api POST /projects '{"name":"nlp","department":"research","quota":{"gpus":1}}' >/dev/null
api POST /projects '{"name":"search","department":"product","quota":{"gpus":1,"priority":1}}' >/dev/null

web_say "starting two agents with two simulated 80 GiB GPUs each"
web_start_agent node-1 sim:2x80GiB
web_start_agent node-2 sim:2x80GiB
ready_nodes() { [ "$(api GET /nodes | grep -o '"state":"ready"' | wc -l)" -ge 2 ]; }
web_wait 30 "two ready nodes" ready_nodes

job() { # NAME PROJECT KIND GPU-JSON COMMAND-JSON
  api POST /jobs "{\"name\":\"$1\",\"project\":\"$2\",\"kind\":\"$3\",\"grace_period\":\"2s\",\"gpu\":$4,\"command\":$5}" >/dev/null
}
load=$TS_BIN_DIR/tessera-gpuload
job train-busy vision train '{"count":1}' "[\"$load\",\"--pattern\",\"train\",\"--memory\",\"4GiB\",\"--busy\",\"0.9\",\"--step\",\"500ms\"]"
job notebook-idle vision interactive '{"count":1}' '["sleep","600"]'
job eval-big nlp interactive '{"count":2}' '["sleep","600"]'
two_running() { [ "$(api GET '/jobs?state=running' | grep -o '"state":"running"' | wc -l)" -eq 2 ]; }
web_wait 30 "two running jobs" two_running
reasoned() { api GET /queue | grep -q '"code":"quota_exhausted"'; }
web_wait 30 "the pending job's reason" reasoned
busy_gpu() { api GET /nodes | grep -Eq '"utilization":0\.[1-9]'; }
web_wait 30 "a busy GPU sample" busy_gpu

web_say "running the browser (screenshots in $out)"
# in the background so that a SIGTERM (ctest's timeout) reaches the trap,
# which stops the browser and the cluster
TS_URL=$WEB_URL TS_TOKEN=$WEB_TOKEN TS_CHROMIUM=$chromium TS_OUT_DIR=$out \
  node "$here/dashboard.mjs" &
web_child_pid=$!
wait $web_child_pid
