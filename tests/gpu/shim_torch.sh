#!/usr/bin/env bash
# The CUDA interposer on a real NVIDIA GPU with PyTorch, under the real
# agent (--gpus nvml, desired-state file, no server):
#   1. torch.cuda.mem_get_info() shows the job's limit as the GPU's size;
#   2. allocating past the limit raises torch's out-of-memory error;
#   3. two jobs collide under each resolver (wait, priority, swap): the one
#      within its request gets its memory; tensors are intact (under
#      priority the burst holder's job is ended with SIGTERM, reported
#      evicted, with an event saying so);
#   4. a swapped-out model answers its next request with the same output,
#      and the time of that first request (the warm start) is printed;
#   5. the shim and swap benchmarks, when built, print their figures.
# Burst against burst under each resolver: shim_torch_bursts.sh. The jobs run
# with --sandbox off: they signal each other through one folder, which a
# sandbox hides on purpose (sandbox_torch.sh runs a job sandboxed).
# Skips (77) without an NVIDIA GPU or without python3 + torch.
set -euo pipefail
# (grep reads all of ldconfig's output: with -q and pipefail, ldconfig could
# die of SIGPIPE and a GPU node would be skipped)
[ -e /dev/nvidiactl ] && ldconfig -p 2>/dev/null | grep 'libcuda.so.1' >/dev/null ||
  { echo "no NVIDIA GPU: skipped"; exit 77; }
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
  { echo "no python3 with a CUDA-enabled torch: skipped"; exit 77; }
bin=${TS_BIN_DIR:?}
tests=${TS_TESTS_DIR:-$bin/../tests}
dir=$(mktemp -d)
agent=
cleanup() {
  [ -n "$agent" ] && kill "$agent" 2>/dev/null && wait "$agent" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
GiB=$((1 << 30))
# the GPU's memory, from NVML as the agent will see it
total=$(python3 -c 'import torch; print(torch.cuda.mem_get_info()[1])')
echo "GPU 0: $((total / GiB)) GiB"

# What the jobs may use of GPU 0 (the ledger's usable memory): at most
# 32 GiB, whatever the GPU's size (--gpu-reserve keeps the rest), so the host
# swap reserve stays small. Two jobs whose requests fit but whose use does
# not: A asks for 10% and bursts to its limit of 45%; B asks for and uses
# 60% (each less a tensor of 256 MiB, for the model and the allocator), so
# A's burst and B's request (over 101%) collide.
usable=$((total < 32 * GiB ? total : 32 * GiB))
a_req=$((usable / 10)) a_lim=$((usable * 45 / 100)) a_use=$((a_lim - (256 << 20)))
b_req=$((usable * 60 / 100)) b_use=$((b_req - (256 << 20)))

cat >"$dir/job.py" <<'EOF'
import os, sys, time, torch
role, use, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = os.environ["T_DIR"]
def mark(name): open(os.path.join(d, name), "w").close()
def wait_for(name, limit=120):
    t = time.time()
    while not os.path.exists(os.path.join(d, name)):
        if time.time() - t > limit: sys.exit(f"{role}: no {name}")
        time.sleep(0.05)
free, total = torch.cuda.mem_get_info()
print(f"{role}: mem_get_info total={total} free={free}", flush=True)
chunk = 256 << 20
n = use // chunk
ts = [torch.full((chunk // 4,), float(i), device="cuda") for i in range(n)]
model = torch.nn.Linear(1024, 1024).cuda()
x = torch.ones(64, 1024, device="cuda")
y0 = model(x).sum().item()
torch.cuda.synchronize()
print(f"{role}: holds {n * chunk} bytes", flush=True)
if role == "A":
    mark("a_ready")
    if mode == "wait":
        time.sleep(5); del ts; torch.cuda.empty_cache(); ts = []
        print("A: freed its burst", flush=True)
    wait_for("b_done")
    t = time.time()
    y1 = model(x).sum().item()
    torch.cuda.synchronize()
    print(f"A: first request after B took {(time.time() - t) * 1000:.1f} ms", flush=True)
    assert y1 == y0, (y0, y1)
else:
    wait_for("a_ready")
    t = time.time()
    ts2 = [torch.full((chunk // 4,), 7.0, device="cuda") for _ in range((use // chunk) - n)]
    print(f"B: got its request in {(time.time() - t) * 1000:.0f} ms", flush=True)
    assert all(bool((u == 7.0).all()) for u in ts2)
for i, u in enumerate(ts):
    assert bool((u == float(i)).all()), f"{role}: tensor {i} changed"
print(f"{role}: intact", flush=True)
if role == "B":
    del ts2, ts; torch.cuda.empty_cache(); mark("b_done")
EOF

# 1 and 2: the limit as the GPU's size, and out-of-memory past it
limit_job=$(cat <<EOF
import torch
free, total = torch.cuda.mem_get_info()
print("total", total, "free", free)
assert abs(total - $a_lim) <= (2 << 20), total
try:
    torch.empty($a_lim + (1 << 30), dtype=torch.uint8, device="cuda")
    raise SystemExit("allocated past the limit")
except torch.cuda.OutOfMemoryError:
    print("out of memory past the limit, as expected")
EOF
)

start_agent() { # collision
  mkdir -p "$dir/$1"
  echo '{"generation": 0, "jobs": []}' >"$dir/$1/desired.json"
  "$bin/tessera-agent" --node gpu-test --data-dir "$dir/$1/agent" --gpus nvml --sandbox off \
    --gpu-reserve "$((total - usable))" --collision "$1" --collision-wait 60s --swap-reserve "$((a_lim / GiB + 2))GiB" --swap-idle 1s \
    --desired-file "$dir/$1/desired.json" --report-interval 1s >"$dir/$1/agent.log" 2>&1 &
  agent=$!
}
stop_agent() { kill "$agent"; wait "$agent" || true; agent=; grep -H "swap reserve" "$dir"/*/agent.log || true; }
job() { # id role use mode request limit command...
  local id=$1 req=$5 lim=$6
  shift 6
  printf '{"id": %d, "attempt": 1, "name": "j%d", "project": "p", "action": "run", "priority": %d,
    "grace_seconds": 5, "gpus": [{"index": 0, "memory_bytes": %d, "memory_limit_bytes": %d}],
    "env": {"T_DIR": "%s"}, "command": %s}' "$id" "$id" "$((id == 1 ? 10 : 50))" "$req" "$lim" "$dir" "$*"
}
wait_exit() { # collision id -> exit code in the agent's report
  for _ in $(seq 600); do
    c=$(python3 - "$dir/$1/agent/report.json" "$2" <<'EOF'
import json, sys
try: r = json.load(open(sys.argv[1]))
except Exception: sys.exit(0)
for j in r.get("jobs", []):
    if j["id"] == int(sys.argv[2]) and j["state"] == "exited":
        print(j.get("exit_code", 128 + j.get("signal", 0)))
EOF
)
    [ -n "$c" ] && { echo "$c"; return; }
    sleep 0.2
  done
  echo timeout
}
output() { cat "$dir/$1/agent/jobs/$2-1/output.log" 2>/dev/null || true; }

start_agent wait
printf '{"generation": 1, "jobs": [%s]}' \
  "$(job 9 x 0 x "$a_req" "$a_lim" "[\"python3\", \"-c\", $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$limit_job")]")" \
  >"$dir/wait/desired.json"
[ "$(wait_exit wait 9)" = 0 ] || { output wait 9; cat "$dir/wait/agent.log"; echo "FAIL: limit job"; exit 1; }
output wait 9
stop_agent

for mode in wait priority swap; do
  rm -f "$dir"/a_ready "$dir"/b_done
  start_agent "$mode"
  printf '{"generation": 1, "jobs": [%s, %s]}' \
    "$(job 1 A "$a_use" "$mode" "$a_req" "$a_lim" "[\"python3\", \"$dir/job.py\", \"A\", \"$a_use\", \"$mode\"]")" \
    "$(job 2 B "$b_use" "$mode" "$b_req" "$b_req" "[\"python3\", \"$dir/job.py\", \"B\", \"$b_use\", \"$mode\"]")" \
    >"$dir/$mode/desired.json"
  b=$(wait_exit "$mode" 2)
  a=$(wait_exit "$mode" 1)
  echo "--- $mode: A exited $a, B exited $b"
  output "$mode" 1
  output "$mode" 2
  [ "$b" = 0 ] || { cat "$dir/$mode/agent.log"; echo "FAIL: $mode: B did not finish"; exit 1; }
  if [ "$mode" = priority ]; then
    # SIGTERM (143), or SIGKILL (137) after --collision-grace; reported evicted
    [ "$a" = 143 ] || [ "$a" = 137 ] || { echo "FAIL: priority: A was not ended (exit $a)"; exit 1; }
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if any(j["id"] == 1 and j.get("evicted") for j in r["jobs"]) else 1)' \
      "$dir/$mode/agent/report.json" || { echo "FAIL: priority: A is not reported evicted"; exit 1; }
    grep -q memory_ended "$dir/$mode/agent/report.json" "$dir/$mode/agent.log" ||
      { echo "FAIL: no memory_ended event"; exit 1; }
  else
    [ "$a" = 0 ] || { cat "$dir/$mode/agent.log"; echo "FAIL: $mode: A did not finish intact"; exit 1; }
  fi
  [ "$mode" = swap ] && { grep -q swapped_out "$dir/$mode/agent/report.json" "$dir/$mode/agent.log" ||
    { echo "FAIL: no swapped_out event"; exit 1; }; }
  stop_agent
done

for b in bench_shim bench_swap; do
  [ -x "$tests/$b" ] && { echo "--- $b"; "$tests/$b" || echo "FAIL: $b exited $?"; }
done
echo "ok: limits, out-of-memory, and the wait, priority and swap resolvers on a real GPU"
