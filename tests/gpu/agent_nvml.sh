#!/usr/bin/env bash
# tessera-agent --gpus nvml on a real node: NVML (loaded with dlopen) names
# every GPU with its UUID, model and memory, as the agent registers them.
# Skips (77) without an NVIDIA GPU.
set -euo pipefail
[ -e /dev/nvidiactl ] && ldconfig -p 2>/dev/null | grep 'libnvidia-ml.so.1' >/dev/null ||
  { echo "no NVIDIA GPU: skipped"; exit 77; } # no grep -q: under pipefail, SIGPIPE could skip a GPU node
bin=${TS_BIN_DIR:?}
dir=$(mktemp -d)
trap 'kill $agent 2>/dev/null || true; rm -rf "$dir"' EXIT
echo '{"node": "gpu-test", "generation": 1, "jobs": []}' >"$dir/desired.json"
"$bin/tessera-agent" --node gpu-test --data-dir "$dir/agent" --gpus nvml \
  --desired-file "$dir/desired.json" >"$dir/agent.log" 2>&1 &
agent=$!
for _ in $(seq 100); do [ -s "$dir/agent/node.json" ] && break; sleep 0.1; done
cat "$dir/agent/node.json" || { cat "$dir/agent.log"; echo "FAIL: no node.json"; exit 1; }
grep -q '"uuid": *"GPU-' "$dir/agent/node.json" || { echo "FAIL: no GPU with an NVML UUID"; exit 1; }
echo "ok: the agent registered the node's GPUs through NVML"
