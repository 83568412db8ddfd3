#!/bin/sh
# sched_variants.sh - fgd and binpack against the paper's FGD and BestFit on
# every Alibaba "openb" trace and on variants of the default pod list made
# with `tessera-sim variant` (other shares of GPU-model constraints,
# sharing, multi-GPU and CPU-only pods), under the ATC'23 placement protocol
# (unallocated GPU % at 100% arrival, mean±sd over SEEDS seeds from 42).
#
# FGD is the published figure where there is one, else the computed
# reference `fgd-paper`; BestFit likewise with `bestfit`. Prints a markdown
# table; exits 1 when fgd is above FGD or binpack above BestFit (means) on
# any row.
#
# usage: tests/bench/sched_variants.sh [BIN_DIR] [TRACE_DIR] [SEEDS] [ROWS]
#        ROWS: a grep -E pattern over row names (default: all)
set -eu
bin=${1:-build/bin}
traces=${2:-../shared/traces/alibaba-gpu-v2023}
seeds=${3:-10}
rows=${4:-.}
sim=$bin/tessera-sim
nodes=$traces/openb_node_list_gpu_node.csv
default=$traces/openb_pod_list_default.csv
[ -f "$nodes" ] && [ -f "$default" ] || { echo "no trace at $traces (skipped)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/published.sh"

# Variants of the default list, each from seed 1: name and tessera-sim
# variant options. GPU-model constraints are drawn from gpuspec10's.
variants() {
    cat <<EOF
v-gpuspec20 --gpuspec 0.2
v-gpuspec33 --gpuspec 0.33
v-gpuspec40 --gpuspec 0.4
v-gpuspec50 --gpuspec 0.5
v-gpushare10 --gpushare 0.1
v-gpushare20 --gpushare 0.2
v-gpushare30 --gpushare 0.3
v-gpushare50 --gpushare 0.5
v-gpushare70 --gpushare 0.7
v-multigpu0 --multigpu 0
v-multigpu10 --multigpu 0.1
v-multigpu30 --multigpu 0.3
v-multigpu40 --multigpu 0.4
v-multigpu50 --multigpu 0.5
v-cpu00 --cpu-only 0
v-cpu05 --cpu-only 0.05
v-cpu10 --cpu-only 0.1
v-cpu20 --cpu-only 0.2
v-cpu30 --cpu-only 0.3
v-cpu40 --cpu-only 0.4
v-cpu45 --cpu-only 0.45
v-cpu50 --cpu-only 0.5
v-cpu60 --cpu-only 0.6
v-mixed --gpuspec 0.25 --gpushare 0.4 --multigpu 0.15 --cpu-only 0.2
v-mixed2 --gpuspec 0.15 --gpushare 0.25 --multigpu 0.3 --cpu-only 0.4
v-mixed3 --gpuspec 0.4 --gpushare 0.6 --multigpu 0.1 --cpu-only 0.3
EOF
}

run() { # pods strategy -> "mean±sd" at 100%
    "$sim" placement --nodes "$nodes" --pods "$1" --strategy "$2" --seeds "$seeds" -o text |
        sed 's/.*arrival \([0-9.]*\) ± \([0-9.]*\),.*/\1±\2/'
}

mean() { echo "${1%%±*}"; }

fail=0
row() { # name pods
    set -- "$1" "$2" $(published "$1")
    b=$(run "$2" binpack)
    f=$(run "$2" fgd)
    fp=$(run "$2" fgd-paper)
    bf=$(run "$2" bestfit)
    ref=$3
    [ "$ref" = - ] && ref=$fp
    bref=$4
    [ "$bref" = - ] && bref=$bf
    df=$(awk -v a="$(mean "$f")" -v b="$(mean "$ref")" 'BEGIN { printf "%+.2f", a - b }')
    db=$(awk -v a="$(mean "$b")" -v b="$(mean "$bref")" 'BEGIN { printf "%+.2f", a - b }')
    mark=""
    case $df in +0.00 | -*) ;; *) mark=" **fgd above FGD**" fail=1 ;; esac
    case $db in +0.00 | -*) ;; *) mark="$mark **binpack above BestFit**" fail=1 ;; esac
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |%s\n' "$1" "$b" "$f" "$fp" "$3" "$bf" "$4" \
        "$df" "$db" "$mark"
}

echo "| trace / variant | binpack | fgd | fgd-paper | published FGD | bestfit | published BestFit | fgd − FGD | binpack − BestFit |"
echo "|---|---|---|---|---|---|---|---|---|"
for t in default cpu050 gpushare40 gpushare60 gpushare80 gpushare100 gpuspec10 multigpu20; do
    pods=$traces/openb_pod_list_$t.csv
    [ -f "$pods" ] || continue
    echo "$t" | grep -Eq "$rows" || continue
    row "$t" "$pods"
done
variants >"$tmp/variants"
while read -r name opts; do
    echo "$name" | grep -Eq "$rows" || continue
    # shellcheck disable=SC2086
    "$sim" variant --pods "$default" --specs-from "$traces/openb_pod_list_gpuspec10.csv" \
        --seed 1 $opts -o "$tmp/$name.csv"
    row "$name" "$tmp/$name.csv"
done <"$tmp/variants"
echo
echo "FGD: published where known, else fgd-paper; BestFit likewise with bestfit."
echo "Variants: tessera-sim variant --pods openb_pod_list_default.csv --seed 1 OPTIONS."
exit $fail
