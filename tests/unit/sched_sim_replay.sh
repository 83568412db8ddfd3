#!/bin/sh
# sched_sim_replay.sh - `tessera-sim replay` on a trace small enough to
# work out by hand: one node of 2 GPUs; projects a and b, quota 1 each.
# a1 and a2 (project a, 1 GPU, 100 s) start at 0, a2 borrowing b's GPU; b1
# (b, 1 GPU, 100 s, utilization 0.5) arrives at 50 and takes it back at
# once: a2 is evicted with 50 s left and resumes at 100 when a1 ends, so
# both GPUs are allocated from 0 to 150 (100 %); utilization is
# (100 + 100 + 0.5 * 100) / 300 = 83.3333 %; a gets 200 GPU-s (0.0555556
# GPU-h), b 100 (0.0277778); a's completions are 100 and 150 s. "huge" asks
# for 4 GPUs and never runs: the replay still ends.
#
# usage: tests/unit/sched_sim_replay.sh TESSERA_SIM
set -eu
sim=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
has() { # has FILE TEXT
    grep -qF -- "$2" "$1" || fail "$1 has no '$2': $(cat "$1")"
}

printf 'sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,2,A100\n' >"$tmp/nodes.csv"
printf 'name,quota_gpus\na,1\nb,1\n' >"$tmp/projects.csv"
{
    echo 'name,project,submit_s,duration_s,num_gpu,gpu_milli,cpu_milli,memory_mib,priority,preemptible,utilization'
    echo 'a1,a,0,100,1,1000,1000,1024,50,1,1'
    echo 'a2,a,0,100,1,1000,1000,1024,50,1,1'
    echo 'b1,b,50,100,1,1000,1000,1024,50,1,0.5'
    echo 'huge,b,60,100,4,1000,1000,1024,50,1,1'
} >"$tmp/jobs.csv"
run() { # run OUT ARGS...
    out=$1
    shift
    "$sim" replay --nodes "$tmp/nodes.csv" --projects "$tmp/projects.csv" --jobs "$tmp/jobs.csv" \
        --interval 10 --sample 50 "$@" >"$tmp/$out" 2>"$tmp/$out.err"
}

run json -o json || fail "replay -o json exited $?"
has "$tmp/json" '"gpus": 2, "jobs": 4,'
has "$tmp/json" '"allocation_pct": 100.0, "utilization_pct": 83.3333, "preemptions": 1'
has "$tmp/json" '{"project": "a", "done": 2, "queueing_delay_s": {"mean": 0.0, "p50": 0.0, "p99": 0.0}, "completion_s": {"mean": 125.0, "p50": 100.0, "p99": 150.0}, "gpu_hours": 0.0555556'
has "$tmp/json" '{"project": "b", "done": 1,'
has "$tmp/json" '"gpu_hours": 0.0277778'
has "$tmp/json" '"series": [[0, 0.0, 0.0], [50, 100.0, 100.0], [100, 100.0, 75.0], [150, 100.0, 75.0]]'

run text || fail "replay exited $?"
has "$tmp/text" 'allocation 100.0%, utilization 83.3%, 1 preemptions'
grep -Eq '^a +2 +0 +0 +0 +125 +100 +150 +0\.1 +0\.1 +1$' "$tmp/text" || fail "row a: $(cat "$tmp/text")"

# bad input: a clear message and exit 2 (usage) or 1 (a file)
if run bad --strategy nosuch; then fail "an unknown strategy was taken"; fi
has "$tmp/bad.err" '--strategy binpack|spread|fgd'
if run bad --frobnicate 1; then fail "an unknown option was taken"; fi
has "$tmp/bad.err" 'unknown option --frobnicate'
echo 'c1,nosuch,0,10,1,1000,1000,1024,50,1,1' >>"$tmp/jobs.csv"
if run bad; then fail "a job of an unknown project was taken"; fi
has "$tmp/bad.err" 'job "c1": no project "nosuch"'
printf 'name,quota_gpus\na,1\na,2\n' >"$tmp/projects.csv"
if run bad; then fail "a project listed twice was taken"; fi
has "$tmp/bad.err" 'project "a" is listed twice'

[ "$fails" -eq 0 ] || exit 1
echo "replay: every figure as worked out by hand"
