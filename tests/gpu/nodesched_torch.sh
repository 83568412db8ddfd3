#!/usr/bin/env bash
# The node-level scheduler's example (issue 17) with PyTorch on two real
# NVIDIA GPUs, under the real agent (--gpus nvml, --node-scheduler spread,
# desired-state file, no server):
#   1. two notebooks (jobs 1 and 2), both bound by "the cluster" to GPU 0
#      with a request of half of it and a limit of all of it; the node runs
#      one of them on GPU 1 (report.json: physical_index 1);
#   2. both burst to 70 % of a GPU at once with torch (possible only
#      because they are spread), checked by value and checksum;
#   3. they give their bursts back, keeping a 1 GiB pattern each;
#   4. a whole-GPU job (job 3) is bound to GPU 1: the node moves the spread
#      notebook back to GPU 0 first (its event "moved gpu 1 → gpu 0"), and
#      the job runs within 10 s, allocating and checking half of GPU 1;
#   5. both notebooks read their tensors back on GPU 0 (value and checksum)
#      and end with status 0.
# --gpu-reserve leaves 16 GiB of each GPU to the jobs whatever its size.
# Skips (77) without an NVIDIA GPU, without python3 + torch, with fewer
# than two GPUs, on a GPU under 20 GiB, or without room in /dev/shm.
set -euo pipefail
[ -e /dev/nvidiactl ] && ldconfig -p 2>/dev/null | grep 'libcuda.so.1' >/dev/null ||
  { echo "no NVIDIA GPU: skipped"; exit 77; }
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
  { echo "no python3 with a CUDA-enabled torch: skipped"; exit 77; }
n=$(python3 -c 'import torch; print(torch.cuda.device_count())')
[ "$n" -ge 2 ] || { echo "$n GPU(s); the example needs two: skipped"; exit 77; }
bin=${TS_BIN_DIR:?}
dir=$(mktemp -d)
agent=
kill_jobs() {
  local f pid
  for f in "$dir"/agent/jobs/*/job.json; do
    [ -e "$f" ] || continue
    pid=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$f")
    [ -n "$pid" ] && { kill -KILL -- "-$pid" 2>/dev/null; } || true
  done
}
cleanup() {
  [ -n "$agent" ] && kill "$agent" 2>/dev/null && wait "$agent" 2>/dev/null || true
  kill_jobs
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  cat "$dir/agent.log" 2>/dev/null | tail -n 50 || true
  for f in "$dir"/agent/jobs/*/output.log; do [ -e "$f" ] && { echo "== $f"; cat "$f"; }; done
  exit 1
}
GiB=$((1 << 30))
total=$(python3 -c 'import torch; print(min(torch.cuda.mem_get_info(i)[1] for i in range(2)))')
[ "$total" -ge $((20 * GiB)) ] || { echo "a GPU has under 20 GiB: skipped"; exit 77; }
usable=$((16 * GiB))
reserve=$((total - usable))
req=$((usable / 2)) lim=$usable
burst=$((usable * 7 / 10))
swap=$((4 * GiB))
shm=$(df -B1 --output=avail /dev/shm 2>/dev/null | tail -n 1 || echo 0)
[ "${shm:-0}" -ge "$swap" ] || { echo "/dev/shm has ${shm:-0} bytes free: skipped"; exit 77; }

cat >"$dir/nb.py" <<'EOF'
import os, sys, time, torch
name, burst = sys.argv[1], int(sys.argv[2])
d = os.environ["T_DIR"]
def say(msg): print(f"{name}: {msg}", flush=True)
def mark(f): open(os.path.join(d, f), "w").close()
def wait_for(f, limit=600):
    t = time.time()
    while not os.path.exists(os.path.join(d, f)):
        if time.time() - t > limit: sys.exit(f"{name}: no {f} after {limit} s")
        time.sleep(0.05)
chunk = 256 << 20
elems = chunk // 4
base = 1.0 if name == "nb-a" else 1000.0
ts = [torch.full((elems,), base + i, device="cuda") for i in range(burst // chunk)]
torch.cuda.synchronize()
keep = (1 << 30) // chunk  # the pattern kept after the burst
def check(when, live):
    bad = [i for i in range(live) if not (ts[i].min().item() == base + i == ts[i].max().item())]
    got = sum(ts[i].sum(dtype=torch.float64).item() for i in range(live))
    want = sum((base + i) * elems for i in range(live))
    say(f"checksum {when}: {got:.0f}, expected {want:.0f}")
    if bad or got != want:
        say(f"tensors changed: {bad}")
        sys.exit(3)
check("bursting", len(ts))
say(f"holds {len(ts) * chunk} bytes")
mark(f"{name}-burst")
wait_for("drop")
del ts[keep:]
torch.cuda.empty_cache()
mark(f"{name}-dropped")
wait_for("stop")
check("after the move", keep)
say("intact")
EOF
cat >"$dir/whole.py" <<'EOF'
import sys, torch
n = int(sys.argv[1]) // 4
t = torch.full((n,), 7.0, device="cuda")
ok = t.min().item() == 7.0 == t.max().item()
print(f"whole: {n * 4} bytes on {torch.cuda.get_device_name()}: {'ok' if ok else 'BAD'}", flush=True)
sys.exit(0 if ok else 3)
EOF

nb() { # id name
  printf '{"id": %d, "attempt": 1, "name": "%s", "project": "p", "action": "run", "grace_seconds": 5,
    "gpus": [{"index": 0, "memory_bytes": %d, "memory_limit_bytes": %d}],
    "env": {"T_DIR": "%s"}, "command": ["python3", "%s", "%s", "%d"]}' \
    "$1" "$2" "$req" "$lim" "$dir" "$dir/nb.py" "$2" "$burst"
}
whole='{"id": 3, "attempt": 1, "name": "whole", "project": "p", "action": "run", "grace_seconds": 5,
  "gpus": [{"index": 1}], "command": ["python3", "'"$dir/whole.py"'", "'"$((usable / 2))"'"]}'
desired() { # generation jobs...
  local g=$1
  shift
  local IFS=,
  echo "{\"generation\": $g, \"jobs\": [$*]}" >"$dir/desired.json.tmp"
  mv "$dir/desired.json.tmp" "$dir/desired.json"
}
field() { # id what: "physical" (GPU it runs on) or "state" from report.json
  python3 - "$dir/agent/report.json" "$1" "$2" <<'EOF'
import json, sys
try: r = json.load(open(sys.argv[1]))
except Exception: sys.exit(0)
for j in r.get("jobs", []):
    if j["id"] == int(sys.argv[2]):
        if sys.argv[3] == "state": print(j["state"], j.get("exit_code", "-"))
        else: print(" ".join(str(g.get("physical_index", g["index"])) for g in j.get("gpus", [])))
EOF
}
flag_wait() { # file seconds
  for _ in $(seq $(($2 * 10))); do [ -e "$dir/$1" ] && return 0; sleep 0.1; done
  fail "no $1 after $2 s"
}

desired 1
"$bin/tessera-agent" --node gpu-test --data-dir "$dir/agent" --gpus nvml --sandbox off \
  --node-scheduler spread --gpu-reserve "$reserve" --swap-reserve "$swap" \
  --desired-file "$dir/desired.json" --report-interval 1s >"$dir/agent.log" 2>&1 &
agent=$!
for _ in $(seq 600); do [ -s "$dir/agent/node.json" ] && break; sleep 0.1; done
[ -s "$dir/agent/node.json" ] || fail "the agent did not start"

desired 2 "$(nb 1 nb-a)" "$(nb 2 nb-b)"
flag_wait nb-a-burst 300
flag_wait nb-b-burst 300
pa=$(field 1 physical) pb=$(field 2 physical)
echo "notebooks bound to GPU 0 run on GPU $pa and GPU $pb, each holding 70 % of a GPU"
[ "$pa" != "$pb" ] || fail "the notebooks were not spread ($pa, $pb)"
touch "$dir/drop"
flag_wait nb-a-dropped 120
flag_wait nb-b-dropped 120
t0=$(date +%s.%N)
desired 3 "$(nb 1 nb-a)" "$(nb 2 nb-b)" "$whole"
state=
for _ in $(seq 300); do
  state=$(field 3 state)
  case "$state" in running* | exited*) break ;; esac
  sleep 0.1
done
t1=$(date +%s.%N)
took=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
echo "the whole-GPU job bound to GPU 1: $state after $took s"
case "$state" in running* | "exited 0") ;; *) fail "the whole-GPU job did not start: $state" ;; esac
python3 -c "import sys; sys.exit(0 if $t1 - $t0 <= 10 else 1)" || fail "it took over 10 s"
grep -rh "moved gpu 1 → gpu 0" "$dir/agent" | head -n 1 || fail "no moved event"
[ "$(field 1 physical)" = 0 ] && [ "$(field 2 physical)" = 0 ] || fail "a notebook is not on GPU 0"
touch "$dir/stop"
for id in 1 2 3; do
  for _ in $(seq 600); do
    state=$(field "$id" state)
    case "$state" in exited*) break ;; esac
    sleep 0.2
  done
  [ "$state" = "exited 0" ] || fail "job $id: $state"
done
grep -h "intact\|whole:" "$dir"/agent/jobs/*/output.log
[ "$(cat "$dir"/agent/jobs/*/output.log | grep -c ': intact')" = 2 ] || fail "a notebook lost memory"
echo "PASS"
