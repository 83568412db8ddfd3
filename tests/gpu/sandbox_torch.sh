#!/usr/bin/env bash
# The job sandbox over the real NVIDIA driver, with PyTorch: a job of the
# real agent (--gpus nvml, --sandbox on, desired-state file, no server)
#   1. runs as the unprivileged job user in its own PID namespace;
#   2. sees its memory limit as the GPU's size and gets out-of-memory past it;
#   3. keeps both with `env -u LD_PRELOAD`, and when it loads the driver by
#      the real file's path through ctypes: the overlay, not the preload,
#      puts the limit there;
#   4. cannot see the agent's files (its data folder is hidden).
# The collision tests (shim_torch.sh, shim_torch_bursts.sh) run their jobs
# with --sandbox off because two jobs there signal each other through a
# shared folder, which a sandbox hides on purpose.
# Skips (77) without an NVIDIA GPU, python3 + torch, or where the agent
# cannot sandbox (not root, no namespaces).
set -euo pipefail
[ -e /dev/nvidiactl ] && ldconfig -p 2>/dev/null | grep 'libcuda.so.1' >/dev/null ||
  { echo "no NVIDIA GPU: skipped"; exit 77; }
py=$(command -v python3) && "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
  { echo "no python3 with a CUDA-enabled torch: skipped"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "not root: the agent cannot sandbox; skipped"; exit 77; }
bin=${TS_BIN_DIR:?}
dir=$(mktemp -d -p /var/lib tessera-gpu-sandbox.XXXXXX)
chmod 0755 "$dir" # the job user reaches its folder through the data folder's parents
agent=
cleanup() {
  [ -n "$agent" ] && kill "$agent" 2>/dev/null && wait "$agent" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
GiB=$((1 << 30))
req=$((2 * GiB)) lim=$((4 * GiB))
# the real driver's file, as the loader resolves it outside any sandbox
real=$("$py" -c 'import ctypes
ctypes.CDLL("libcuda.so.1")
for line in open("/proc/self/maps"):
    if "libcuda.so" in line: print(line.split()[-1]); break')
echo "real driver: $real"

job=$(cat <<EOF
import ctypes, os, sys
print("uid", os.getuid(), "pid", os.getpid(), flush=True)
assert os.getuid() != 0, "the job runs as root"
assert os.getpid() < 100, "the job is not in its own PID namespace"
assert os.environ.get("LD_PRELOAD") is None, "LD_PRELOAD is still set"
assert not os.path.exists("$dir/agent/report.json"), "the agent's files are visible"
# 3. the driver loaded by the real file's path: cuMemGetInfo answers the limit
cu = ctypes.CDLL("$real")
assert cu.cuInit(0) == 0
dev = ctypes.c_int(); ctx = ctypes.c_void_p()
assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
free, total = ctypes.c_size_t(), ctypes.c_size_t()
assert cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
print("driver by path: total", total.value, "free", free.value, flush=True)
assert abs(total.value - $lim) <= (2 << 20), total.value
p = ctypes.c_uint64()
rc = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t($lim + $GiB))
print("driver by path: cuMemAlloc past the limit ->", rc, flush=True)
assert rc == 2, rc  # CUDA_ERROR_OUT_OF_MEMORY
# 2. PyTorch
import torch
n = torch.cuda.device_count()
print("devices", n, flush=True)
assert n == 1, n
free, total = torch.cuda.mem_get_info()
print("torch: total", total, "free", free, flush=True)
assert abs(total - $lim) <= (2 << 20), total
x = torch.ones(($lim - $GiB) // 4, device="cuda")
assert float(x[-1]) == 1.0
try:
    torch.empty($lim, dtype=torch.uint8, device="cuda")
    sys.exit("allocated past the limit")
except torch.cuda.OutOfMemoryError:
    print("torch: out of memory past the limit, as expected", flush=True)
print("sandboxed job: ok", flush=True)
EOF
)
mkdir -p "$dir/agent"
echo '{"generation": 0, "jobs": []}' >"$dir/desired.json"
"$bin/tessera-agent" --node gpu-test --data-dir "$dir/agent" --gpus nvml --sandbox on \
  --desired-file "$dir/desired.json" --report-interval 1s >"$dir/agent.log" 2>&1 &
agent=$!
for _ in $(seq 100); do [ -s "$dir/agent/report.json" ] && break; sleep 0.1; done
if grep -q 'jobs are not sandboxed' "$dir/agent.log"; then
  cat "$dir/agent.log"
  echo "the agent cannot sandbox on this machine: skipped"
  exit 77
fi
cmd=$("$py" -c 'import json, sys; print(json.dumps(["env", "-u", "LD_PRELOAD", sys.argv[1], "-c", sys.argv[2]]))' "$py" "$job")
printf '{"generation": 1, "jobs": [{"id": 1, "attempt": 1, "name": "sandboxed", "project": "p",
  "action": "run", "priority": 50, "grace_seconds": 5,
  "gpus": [{"index": 0, "memory_bytes": %d, "memory_limit_bytes": %d}],
  "env": {"HOME": "/tmp"}, "command": %s}]}' "$req" "$lim" "$cmd" >"$dir/desired.json"
code=
for _ in $(seq 400); do
  code=$("$py" - "$dir/agent/report.json" <<'EOF'
import json, sys
try: r = json.load(open(sys.argv[1]))
except Exception: sys.exit(0)
for j in r.get("jobs", []):
    if j["id"] == 1 and j["state"] == "exited":
        print(j.get("exit_code", 128 + j.get("signal", 0)))
    elif j["id"] == 1 and j["state"] not in ("starting", "running"):
        print(j["state"], j.get("message", ""))
EOF
)
  [ -n "$code" ] && break
  sleep 0.2
done
cat "$dir/agent/report.json" 2>/dev/null | head -c 2000; echo
cat "$dir/agent/jobs/1-1/output.log" 2>/dev/null || cat "$dir/agent/jobs/1-1/work/output.log" 2>/dev/null || true
[ "$code" = 0 ] || { cat "$dir/agent.log"; echo "FAIL: the sandboxed job exited '${code:-timeout}'"; exit 1; }
echo "ok: a sandboxed job on the real driver keeps its limit without LD_PRELOAD and by the driver's path"
