#!/usr/bin/env bash
# Burst collisions on a real NVIDIA GPU with PyTorch, under the real agent
# (--gpus nvml, desired-state file, no server). Two jobs on GPU 0, each with
# a small request and a burst limit, both bursting so that the two bursts do
# not fit together; the same collision under each resolver:
#   wait:     B's burst waits (event memory_wait) until A frees its own, then
#             succeeds: no out-of-memory, no job ended;
#   priority: B (priority 50) bursting ends A (priority 10), which holds its
#             burst: A gets SIGTERM and is reported evicted in report.json;
#             B's burst succeeds;
#   swap:     once both hold their bursts (A, idle meanwhile, is swapped
#             out for B's), both keep touching every byte of them for 20 s:
#             they time-share the GPU (--swap-quantum 2s), each swapped out
#             to the host reserve and back at least twice, and both finish
#             with their tensors intact; the warm starts (the first call
#             after being swapped out, which waits for the other's turn and
#             brings the memory back) are printed.
# Tensors are checked by value (min and max of each) and by checksum before
# and after. --gpu-reserve leaves 16 GiB of the GPU to the jobs whatever its
# size, so the bursts (9 GiB each) and the host reserve stay small.
# Skips (77) without an NVIDIA GPU, without python3 + torch, or on a GPU
# under 20 GiB.
set -euo pipefail
# (grep reads all of ldconfig's output: with -q and pipefail, ldconfig could
# die of SIGPIPE and a GPU node would be skipped)
[ -e /dev/nvidiactl ] && ldconfig -p 2>/dev/null | grep 'libcuda.so.1' >/dev/null ||
  { echo "no NVIDIA GPU: skipped"; exit 77; }
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
  { echo "no python3 with a CUDA-enabled torch: skipped"; exit 77; }
bin=${TS_BIN_DIR:?}
dir=$(mktemp -d)
agent=
# Jobs outlive their agent (by design): whatever a failed case left running
# is killed, process group and all (a job's pgid is its pid).
kill_jobs() {
  local f pid
  for f in "$dir"/*/agent/jobs/*/job.json; do
    [ -e "$f" ] || continue
    pid=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$f")
    [ -n "$pid" ] && { kill -CONT -- "-$pid" 2>/dev/null; kill -KILL -- "-$pid" 2>/dev/null; } || true
  done
}
cleanup() {
  [ -n "$agent" ] && kill "$agent" 2>/dev/null && wait "$agent" 2>/dev/null || true
  kill_jobs
  rm -rf "$dir"
}
trap cleanup EXIT
GiB=$((1 << 30))
total=$(python3 -c 'import torch; print(torch.cuda.mem_get_info()[1])')
echo "GPU 0: $((total / GiB)) GiB"
[ "$total" -ge $((20 * GiB)) ] || { echo "GPU 0 has under 20 GiB: skipped"; exit 77; }

# What the jobs may use of GPU 0 (the ledger's usable memory): 16 GiB. Each
# job asks for 2 GiB, may burst to 10 GiB and holds 9 GiB: one burst fits
# beside the other's request (11 GiB), the two bursts (18 GiB) do not.
usable=$((16 * GiB))
reserve=$((total - usable))
req=$((2 * GiB)) lim=$((10 * GiB)) use=$((9 * GiB))
# the host swap reserve: both jobs' memory at once (one out, the other going
# out), taken in /dev/shm and pinned at start on a real GPU
swap=$((2 * lim + 2 * GiB))
shm=$(df -B1 --output=avail /dev/shm 2>/dev/null | tail -n 1 || echo 0)
[ "${shm:-0}" -ge "$swap" ] ||
  { echo "/dev/shm has ${shm:-0} bytes free, the host swap reserve needs $swap: skipped"; exit 77; }

cat >"$dir/job.py" <<'EOF'
import os, statistics, sys, time, torch
role, mode, use, req = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
d = os.environ["T_DIR"]
def say(msg): print(f"{role}: {msg}", flush=True)
def mark(name): open(os.path.join(d, name), "w").close()
def wait_for(name, limit=300):
    t = time.time()
    while not os.path.exists(os.path.join(d, name)):
        if time.time() - t > limit: sys.exit(f"{role}: no {name} after {limit} s")
        time.sleep(0.05)
free, total = torch.cuda.mem_get_info()
say(f"mem_get_info total={total} free={free}")
if role == "B":
    wait_for("a_ready")
chunk = 256 << 20
elems = chunk // 4
base = 1.0 if role == "A" else 1000.0
ts, longest, t0 = [], 0.0, time.time()
for i in range(use // chunk):  # the first req // chunk are within the request
    t = time.time()
    ts.append(torch.full((elems,), base + i, device="cuda"))
    torch.cuda.synchronize()
    longest = max(longest, time.time() - t)
say(f"holds {len(ts) * chunk} bytes in {len(ts)} tensors (request {req}): allocated in "
    f"{(time.time() - t0) * 1000:.0f} ms, longest allocation {longest * 1000:.0f} ms")
added = 0
def check(when):
    # min and max of each tensor (no temporary as large as a tensor) and a
    # float64 checksum, exact for these integers
    live = [(i, u) for i, u in enumerate(ts) if u is not None]
    bad = [i for i, u in live if not (u.min().item() == base + i + added == u.max().item())]
    got = sum(u.sum(dtype=torch.float64).item() for _, u in live)
    want = sum((base + i + added) * elems for i, _ in live)
    say(f"checksum {when}: {got:.0f}, expected {want:.0f}")
    if bad or got != want:
        say(f"tensors changed: {bad}")
        sys.exit(3)
check("before")
if mode == "wait" and role == "A":
    mark("a_ready")
    wait_for("release")
    keep = req // chunk
    ts[keep:] = [None] * (len(ts) - keep)  # its burst
    torch.cuda.empty_cache()
    say("freed its burst")
    wait_for("b_done")
elif mode == "priority" and role == "A":
    mark("a_ready")
    wait_for("b_done")  # B's burst ends this job first
    say("was not ended")
elif mode == "swap":
    # both touch their bursts at the same time: A (swapped out while idle
    # for B's burst) starts once B holds all of its own
    if role == "A":
        mark("a_ready")
        wait_for("b_ready")
    else:
        mark("b_ready")
    passes, t0 = [], time.time()
    while time.time() - t0 < 20:
        t = time.time()
        for u in ts:
            u.add_(1.0)
        torch.cuda.synchronize()
        passes.append(time.time() - t)
        added += 1
    usual = statistics.median(passes)
    slow = [k for k, p in enumerate(passes) if p > max(0.1, 20 * usual)]
    warm = [passes[k] for k in slow]
    after = [passes[k + 1] for k in slow if k + 1 < len(passes)]
    say(f"{len(passes)} passes over {len(ts) * chunk} bytes in 20 s, a pass {usual * 1000:.1f} ms")
    if warm:
        # the pass that brings the memory back, and the one after it (back
        # to the usual time: nothing is left out)
        say(f"warm starts (first call after being swapped out): {len(warm)}, first "
            f"{warm[0] * 1000:.0f} ms, median {statistics.median(warm) * 1000:.0f} ms, longest "
            f"{max(warm) * 1000:.0f} ms; the pass after one: median "
            f"{statistics.median(after) * 1000 if after else 0:.1f} ms")
    else:
        say("warm starts (first call after being swapped out): none seen")
check("after")
say("intact")
if role == "B":
    mark("b_done")
EOF

start_agent() { # collision
  mkdir -p "$dir/$1"
  echo '{"generation": 0, "jobs": []}' >"$dir/$1/desired.json"
  "$bin/tessera-agent" --node gpu-test --data-dir "$dir/$1/agent" --gpus nvml --sandbox off \
    --gpu-reserve "$reserve" --collision "$1" --collision-wait 60s --collision-grace 2s \
    --swap-reserve "$swap" --swap-idle 1s --swap-quantum 2s \
    --desired-file "$dir/$1/desired.json" --report-interval 1s >"$dir/$1/agent.log" 2>&1 &
  agent=$!
  for _ in $(seq 600); do # pinning the host reserve takes seconds
    [ -s "$dir/$1/agent/node.json" ] && return
    kill -0 "$agent" 2>/dev/null || break
    sleep 0.1
  done
  agent=
  cat "$dir/$1/agent.log"
  echo "FAIL: $1: the agent did not start"
  exit 1
}
stop_agent() { kill "$agent" 2>/dev/null || true; wait "$agent" || true; agent=; }
job() { # id role mode: A is job 1 (priority 10), B job 2 (priority 50)
  printf '{"id": %d, "attempt": 1, "name": "j%d", "project": "p", "action": "run", "priority": %d,
    "grace_seconds": 5, "gpus": [{"index": 0, "memory_bytes": %d, "memory_limit_bytes": %d}],
    "env": {"T_DIR": "%s"}, "command": ["python3", "%s", "%s", "%s", "%d", "%d"]}' \
    "$1" "$1" "$(($1 == 1 ? 10 : 50))" "$req" "$lim" "$dir" "$dir/job.py" "$2" "$3" "$use" "$req"
}
report() { # collision id -> "state exit evicted" of the job in the agent's report, or nothing
  python3 - "$dir/$1/agent/report.json" "$2" <<'EOF'
import json, sys
try: r = json.load(open(sys.argv[1]))
except Exception: sys.exit(0)
for j in r.get("jobs", []):
    if j["id"] == int(sys.argv[2]):
        code = j.get("exit_code", 128 + j.get("signal", 0)) if j["state"] == "exited" else "-"
        print(j["state"], code, "evicted" if j.get("evicted") else "-")
EOF
}
wait_exit() { # collision id -> exit code (128 + signal when killed)
  local state code rest
  for _ in $(seq 900); do
    read -r state code rest <<<"$(report "$1" "$2")" || true
    [ "$state" = exited ] && { echo "$code"; return; }
    sleep 0.2
  done
  echo timeout
}
# A job's files; grep reads them itself (a pipe into grep -q under pipefail
# may fail on SIGPIPE).
events() { echo "$dir/$1/agent/jobs/$2-1/events.log"; }
output() { echo "$dir/$1/agent/jobs/$2-1/output.log"; }
has_event() { grep -q "\"type\":\"$3\"" "$(events "$1" "$2")" 2>/dev/null; } # collision id type
fail() { # collision message
  echo "--- agent log"; cat "$dir/$1/agent.log"
  for id in 1 2; do echo "--- job $id events"; cat "$(events "$1" "$id")" 2>/dev/null || true; done
  echo "FAIL: $1: $2"
  exit 1
}
# How many times job id was swapped out (its own swapped_out events; the
# agent logs each, the reports carry one per 30 s).
swapped_out() { grep -c "job event job=$2 attempt=1 type=swapped_out message=\"pid " "$dir/$1/agent.log" || true; }

for mode in wait priority swap; do
  rm -f "$dir"/a_ready "$dir"/b_ready "$dir"/b_done "$dir"/release
  start_agent "$mode"
  printf '{"generation": 1, "jobs": [%s, %s]}' "$(job 1 A "$mode")" "$(job 2 B "$mode")" \
    >"$dir/$mode/desired.json"
  if [ "$mode" = wait ]; then
    # B's burst waits: the broker says so; A frees 2 s later
    for _ in $(seq 600); do has_event wait 2 memory_wait && break; sleep 0.2; done
    has_event wait 2 memory_wait || fail wait "B's burst did not wait"
    sleep 2
    touch "$dir/release"
  fi
  b=$(wait_exit "$mode" 2)
  a=$(wait_exit "$mode" 1)
  echo "--- $mode: A exited $a, B exited $b"
  cat "$(output "$mode" 1)" "$(output "$mode" 2)" 2>/dev/null || true
  [ "$b" = 0 ] || fail "$mode" "B did not finish intact (exit $b)"
  has_event "$mode" 2 out_of_memory && fail "$mode" "B was refused memory"
  case $mode in
  wait)
    [ "$a" = 0 ] || fail wait "A did not finish intact (exit $a)"
    waited=$(sed -n 's/.*longest allocation \([0-9]*\) ms.*/\1/p' "$(output wait 2)" 2>/dev/null || true)
    [ "${waited:-0}" -ge 1500 ] || fail wait "B's burst did not wait for A's (longest allocation ${waited:-?} ms)"
    has_event wait 1 memory_ended && fail wait "a job was ended"
    echo "wait: B's burst waited ${waited} ms for A's to be freed, then was granted"
    ;;
  priority)
    r=$(report priority 1)
    echo "priority: A in the report: $r"
    case $r in "exited 143 evicted" | "exited 137 evicted") ;; *) fail priority "A was not ended and reported evicted ($r)" ;; esac
    has_event priority 1 memory_ended || fail priority "no memory_ended event on A"
    grep -q 'was not ended' "$(output priority 1)" && fail priority "A ran to its end"
    ;;
  swap)
    [ "$a" = 0 ] || fail swap "A did not finish intact (exit $a)"
    na=$(swapped_out swap 1) nb=$(swapped_out swap 2)
    echo "swap: A was swapped out $na times, B $nb times"
    grep -m 4 'type=swapped_out message="pid ' "$dir/swap/agent.log" || true
    [ "$na" -ge 2 ] && [ "$nb" -ge 2 ] || fail swap "the jobs did not time-share the GPU"
    for id in 1 2; do
      has_event swap "$id" memory_ended && fail swap "job $id was ended"
      has_event swap "$id" fell_back_to_priority && fail swap "the swap resolver fell back to priority"
    done
    grep -h 'warm starts' "$(output swap 1)" "$(output swap 2)" || fail swap "no figures from the jobs"
    ;;
  esac
  stop_agent
done
echo "ok: two PyTorch jobs' colliding bursts under wait, priority and swap on a real GPU"
