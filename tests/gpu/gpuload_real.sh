#!/usr/bin/env bash
# tessera-gpuload on the real driver: the embedded PTX kernel loads and runs,
# its buffers survive byte for byte, a checkpoint resumes. Skips (77) without
# an NVIDIA GPU.
set -euo pipefail
[ -e /dev/nvidiactl ] && ldconfig -p 2>/dev/null | grep 'libcuda.so.1' >/dev/null ||
  { echo "no NVIDIA GPU: skipped"; exit 77; } # no grep -q: under pipefail, SIGPIPE could skip a GPU node
bin=${TS_BIN_DIR:?}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for pattern in train notebook inference; do
  out=$("$bin/tessera-gpuload" --pattern "$pattern" --memory 2GiB --steps 3 --step 200ms --idle 200ms \
    --checkpoint-dir "$dir/$pattern" 2>&1) || { rc=$?; echo "$out"; echo "FAIL: $pattern exited $rc"; exit 1; }
  echo "$out" | tail -n 2
  grep -q '^done step=3' <<<"$out" || { echo "$out"; echo "FAIL: $pattern did not finish 3 steps"; exit 1; }
done
out=$("$bin/tessera-gpuload" --pattern train --memory 1GiB --steps 5 --step 200ms \
  --checkpoint-dir "$dir/train" --resume-count 1 2>&1)
grep -q 'resumed from step 3 (resume count 1)' <<<"$out" || { echo "$out"; echo "FAIL: no resume"; exit 1; }
echo "ok: gpuload ran every pattern on the real GPU and resumed from its checkpoint"
