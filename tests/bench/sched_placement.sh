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

published() { # trace -> "FGD BestFit"
    case $1 in
    default) echo "4.77±0.10 7.14±0.14" ;;
    gpushare40) echo "6.04±0.07 8.56±0.19" ;;
    gpushare60) echo "8.75±0.12 10.94±0.17" ;;
    gpushare80) echo "10.92±0.10 13.34±0.23" ;;
    gpushare100) echo "13.36±0.15 15.38±0.21" ;;
    multigpu20) echo "4.47±0.15 6.27±0.24" ;;
    gpuspec10) echo "5.34±0.18 6.90±0.20" ;;
    cpu050) echo "5.00±0.11 6.44±0.12" ;;
    esac
}

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
