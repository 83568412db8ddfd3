#!/bin/sh
# sched_placement.sh - tessera-sim's placement replay over every Alibaba
# "openb" trace and every strategy (10 seeds, ATC'23 protocol), next to the
# published figures (unallocated GPU % at 100% arrival, mean ± sd; from
# ../shared/traces/alibaba-gpu-v2023/README.md).
#
# usage: tests/bench/sched_placement.sh [BIN_DIR] [TRACE_DIR] [SEEDS]
set -eu
bin=${1:-build/bin}
traces=${2:-../shared/traces/alibaba-gpu-v2023}
seeds=${3:-10}
nodes=$traces/openb_node_list_gpu_node.csv
[ -f "$nodes" ] || { echo "no trace at $traces (skipped)"; exit 77; }

. "$(dirname "$0")/published.sh"

printf '%-12s %-8s %-14s %-14s %-12s %-12s\n' trace strategy "at 100%" "at 130%" "pub. FGD" "pub. BestFit"
for t in default cpu050 gpushare40 gpushare60 gpushare80 gpushare100 gpuspec10 multigpu20; do
    pods=$traces/openb_pod_list_$t.csv
    [ -f "$pods" ] || continue
    set -- $(published $t)
    for s in binpack spread fgd; do
        line=$("$bin/tessera-sim" placement --nodes "$nodes" --pods "$pods" --strategy $s \
               --seeds "$seeds" -o text)
        a100=$(echo "$line" | sed 's/.*arrival \([0-9.]* ± [0-9.]*\),.*/\1/' | tr -d ' ')
        a130=$(echo "$line" | sed 's/.*at 130% \([0-9.]* ± [0-9.]*\) .*/\1/' | tr -d ' ')
        printf '%-12s %-8s %-14s %-14s %-12s %-12s\n' $t $s "$a100" "$a130" "$1" "$2"
    done
done
