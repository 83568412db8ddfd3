#!/usr/bin/env bash
# tests/browser/nodegrid_test.sh - the node grid shows where the node-level
# scheduler runs a job (issue 17): a real server and one agent with
# --node-scheduler spread on two simulated GPUs; two notebooks that the
# scheduler packs on one GPU, of which the node runs one on the other GPU;
# then nodegrid.mjs reads the grid in headless Chromium (playwright-core).
# Missing Chromium, node or playwright-core fail as in dashboard_test.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
chromium=${TS_CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] && command -v node >/dev/null 2>&1 &&
  [ -f "$here/node_modules/playwright-core/package.json" ] || {
  echo "FAIL: needs Chromium, node and playwright-core (scripts/test installs them)" >&2
  exit 1
}
. "$here/lib.sh"
out=${TS_OUT_DIR:-$WEB_TMP/screenshots}
mkdir -p "$out"

web_start_server
api POST /departments '{"name":"research","quota":{"gpus":2}}' >/dev/null
api POST /projects '{"name":"lab","department":"research","quota":{"gpus":2}}' >/dev/null
TESSERA_NODE_SCHEDULER=spread TESSERA_GPU_RESERVE=512MiB web_start_agent node-1 sim:2x4GiB
ready() { api GET /nodes | grep -q '"state":"ready"'; }
web_wait 30 "a ready node" ready
for nb in nb-a nb-b; do
  api POST /jobs "{\"name\":\"$nb\",\"project\":\"lab\",\"kind\":\"interactive\",\"grace_period\":\"2s\",\"gpu\":{\"memory\":\"1792MiB\",\"memory_limit\":\"3584MiB\"},\"command\":[\"sleep\",\"600\"]}" >/dev/null
done
moved() { api GET /nodes | tr -d ' ' | grep -q '"moved_jobs":\[{'; }
web_wait 30 "a job the node runs on another GPU" moved

TS_URL=$WEB_URL TS_TOKEN=$WEB_TOKEN TS_CHROMIUM=$chromium TS_OUT_DIR=$out \
  node "$here/nodegrid.mjs" &
web_child_pid=$!
wait $web_child_pid
