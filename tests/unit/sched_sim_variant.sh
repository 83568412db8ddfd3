#!/bin/sh
# sched_sim_variant.sh - `tessera-sim variant` is deterministic from its seed,
# keeps the shares it is asked for, and only resamples the source's pods.
#
# usage: tests/unit/sched_sim_variant.sh TESSERA_SIM PODS.csv
set -eu
sim=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# shares FILE -> "pods gpu_pods cpu_only gpus share_gpus multi_gpus spec_pods max_pod_gpus"
shares() {
    awk -F, '
        /^#/ { next }
        !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
        {
            n++; g = $c["num_gpu"] * $c["gpu_milli"] / 1000
            if (g == 0) { cpu++; next }
            gp++; G += g; if (g > mx) mx = g
            if ($c["num_gpu"] == 1 && $c["gpu_milli"] < 1000) S += g
            if ($c["num_gpu"] > 1) M += g
            if ("gpu_spec" in c && $c["gpu_spec"] != "") sp++
        }
        END { printf "%d %d %d %.3f %.3f %.3f %d %.3f\n", n, gp, cpu, G, S, M, sp, mx }' "$1"
}

# near NAME GOT WANT TOL
near() {
    awk -v g="$2" -v w="$3" -v t="$4" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= t) }' ||
        fail "$1: $2, asked for $3 (tolerance $4)"
}

# only_source FILE: every pod's resources are one of the source's pods'
only_source() {
    awk -F, '
        /^#/ { next }
        !(FILENAME in hd) { hd[FILENAME] = 1; delete c; for (i = 1; i <= NF; i++) c[$i] = i; next }
        { k = $c["cpu_milli"] "," $c["memory_mib"] "," $c["num_gpu"] "," $c["gpu_milli"] }
        NR == FNR { seen[k] = 1; next }
        !(k in seen) { bad++ }
        END { exit bad > 0 }' "$src" "$1" || fail "$1 has pods that are not in the source"
}

v() { # out options...
    out=$1
    shift
    "$sim" variant --pods "$src" "$@" -o "$tmp/$out" || fail "variant $* exited $?"
}

# the same seed gives the same file, another seed another
v a.csv --seed 7 --gpushare 0.6 --cpu-only 0.2 --gpuspec 0.3
v b.csv --seed 7 --gpushare 0.6 --cpu-only 0.2 --gpuspec 0.3
v c.csv --seed 8 --gpushare 0.6 --cpu-only 0.2 --gpuspec 0.3
cmp -s "$tmp/a.csv" "$tmp/b.csv" || fail "seed 7 twice gave two different files"
cmp -s "$tmp/a.csv" "$tmp/c.csv" && fail "seeds 7 and 8 gave the same file"

# no option: the source's pods, shuffled
v same.csv --seed 3
set -- $(shares "$src")
src_n=$1 src_gp=$2 src_cpu=$3
set -- $(shares "$tmp/same.csv")
[ "$1 $2 $3" = "$src_n $src_gp $src_cpu" ] || fail "no option changed the counts: $1 $2 $3"
awk -F, '!/^#/ && NR > 1 { print $2, $3, $4, $5 }' "$src" | sort >"$tmp/src.keys"
awk -F, '!/^#/ && !/^name/ { print $2, $3, $4, $5 }' "$tmp/same.csv" | sort >"$tmp/same.keys"
cmp -s "$tmp/src.keys" "$tmp/same.keys" || fail "no option did not keep the source's pods"

# GPU request shares: within two of the largest pods of the target
for seed in 1 2 3; do
    for share in 0 0.25 0.6 1; do
        v s.csv --seed $seed --gpushare $share --gpu-pods 3000
        set -- $(shares "$tmp/s.csv")
        [ "$2" = 3000 ] || fail "--gpu-pods 3000 gave $2 GPU pods"
        near "seed $seed gpushare $share" "$(awk -v s="$5" -v g="$4" 'BEGIN { print s / g }')" \
            $share "$(awk -v m="$8" -v g="$4" 'BEGIN { print 2 * m / g + 1e-9 }')"
        only_source "$tmp/s.csv"
    done
    for share in 0 0.1 0.4; do
        v m.csv --seed $seed --multigpu $share --gpu-pods 3000
        set -- $(shares "$tmp/m.csv")
        near "seed $seed multigpu $share" "$(awk -v s="$6" -v g="$4" 'BEGIN { print s / g }')" \
            $share "$(awk -v m="$8" -v g="$4" 'BEGIN { print 2 * m / g + 1e-9 }')"
        only_source "$tmp/m.csv"
    done
done

# counts asked as shares of pods are exact
for share in 0 0.05 0.3 0.5; do
    v c.csv --seed 5 --cpu-only $share
    set -- $(shares "$tmp/c.csv")
    want=$(awk -v f=$share -v g="$2" 'BEGIN { printf "%.0f", f * g / (1 - f) }')
    [ "$3" = "$want" ] || fail "cpu-only $share: $3 CPU-only pods for $2 GPU pods, asked $want"
    [ "$2" = "$src_gp" ] || fail "cpu-only $share changed the GPU pods: $2"
    only_source "$tmp/c.csv"
done
for share in 0 0.1 0.33 1; do
    v g.csv --seed 5 --gpuspec $share
    set -- $(shares "$tmp/g.csv")
    want=$(awk -v f=$share -v g="$2" 'BEGIN { printf "%.0f", f * g }')
    [ "$7" = "$want" ] || fail "gpuspec $share: $7 constrained of $2 GPU pods, asked $want"
done

# all at once
v all.csv --seed 9 --gpushare 0.4 --multigpu 0.2 --cpu-only 0.1 --gpuspec 0.25 --gpu-pods 3000
set -- $(shares "$tmp/all.csv")
tol=$(awk -v m="$8" -v g="$4" 'BEGIN { print 2 * m / g + 1e-9 }')
near "combined gpushare" "$(awk -v s="$5" -v g="$4" 'BEGIN { print s / g }')" 0.4 "$tol"
near "combined multigpu" "$(awk -v s="$6" -v g="$4" 'BEGIN { print s / g }')" 0.2 "$tol"
[ "$3" = 333 ] || fail "combined cpu-only: $3 CPU-only pods, asked 333"
[ "$7" = 750 ] || fail "combined gpuspec: $7 constrained pods, asked 750"

# shares that cannot be met are refused
"$sim" variant --pods "$src" --gpushare 0.7 --multigpu 0.5 -o "$tmp/x.csv" 2>/dev/null &&
    fail "gpushare 0.7 with multigpu 0.5 was accepted"
"$sim" variant --pods "$src" --gpuspec 1.5 -o "$tmp/x.csv" 2>/dev/null &&
    fail "gpuspec 1.5 was accepted"

[ $fails = 0 ] || exit 1
echo "variant: all checks passed"
