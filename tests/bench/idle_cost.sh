#!/bin/sh
# idle_cost.sh BIN_DIR [AGENTS...] - what the control plane costs at rest:
# for each count of agents (default: 0 and 20), a fresh tessera-server with
# its embedded PostgreSQL and that many idle tessera-agent processes of 8
# simulated GPUs each; after 15 s of warm-up, the CPU the server and every
# process of its PostgreSQL use over 30 s (TS_IDLE_SECONDS), as a share of
# one core, next to the agents' own, and the scheduler cycles that ran.
# Issue 15's goals: <= 1 % with no agents, <= 3 % with 20.
#
#   tests/bench/idle_cost.sh build/bin 0 20 100
set -eu
bin=$(cd "$1" && pwd)
shift
[ $# -gt 0 ] || set -- 0 20
secs=${TS_IDLE_SECONDS:-30}
hz=$(getconf CLK_TCK)
admin=tsk_idlecostbenchadmin0123456789abcdef

ticks() { # the user + system ticks of the processes named
    t=0
    for p in "$@"; do
        [ -r "/proc/$p/stat" ] || continue
        v=$(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')
        t=$((t + v))
    done
    echo $t
}

printf '%-8s %-18s %-16s %-10s\n' agents "server+postgres" "agents (all)" cycles
for n in "$@"; do
    d=$(mktemp -d /tmp/tessera-idle.XXXXXX)
    TESSERA_ADMIN_TOKEN=$admin "$bin/tessera-server" --data-dir "$d" --listen 127.0.0.1:0 \
        --log-level warn >"$d/server.log" 2>&1 &
    spid=$!
    port=
    i=0
    while [ $i -lt 120 ]; do
        port=$(ss -ltnpH 2>/dev/null | grep "pid=$spid," | grep -o '127.0.0.1:[0-9]*' | head -1 || true)
        [ -n "$port" ] && curl -sf "http://$port/readyz" >/dev/null && break
        i=$((i + 1))
        sleep 0.5
    done
    curl -sf -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
        -X POST "http://$port/api/v1/tokens" -d '{"name": "agents", "role": "agent"}' |
        sed 's/.*"token": *"\([^"]*\)".*/\1/' >"$d/agent.token"
    chmod 600 "$d/agent.token"
    apids=
    k=1
    while [ $k -le "$n" ]; do
        mkdir -p "$d/a$k"
        "$bin/tessera-agent" --server "http://$port" --token-file "$d/agent.token" --node "n$k" \
            --data-dir "$d/a$k" --gpus sim:8x80GiB >"$d/a$k.log" 2>&1 &
        apids="$apids $!"
        k=$((k + 1))
    done
    sleep 15
    pm=$(head -1 "$d/pg/data/postmaster.pid")
    sp="$spid $pm $(pgrep -P "$pm" | tr '\n' ' ')"
    c0=$(curl -s "http://$port/metrics" | awk '/^tessera_scheduler_cycles_total/ {print $2}')
    a0=$(ticks $sp)
    b0=$(ticks $apids)
    sleep "$secs"
    a1=$(ticks $sp)
    b1=$(ticks $apids)
    c1=$(curl -s "http://$port/metrics" | awk '/^tessera_scheduler_cycles_total/ {print $2}')
    ready=$(curl -s -H "Authorization: Bearer $admin" "http://$port/api/v1/nodes" |
        grep -o '"state": *"ready"' | wc -l)
    printf '%-8s %-18s %-16s %-10s\n' "$n ($ready ready)" \
        "$(echo "scale=2; ($a1 - $a0) * 100 / $hz / $secs" | bc) %" \
        "$(echo "scale=2; ($b1 - $b0) * 100 / $hz / $secs" | bc) %" "$((c1 - c0)) in ${secs}s"
    # shellcheck disable=SC2086
    [ -z "$apids" ] || kill $apids 2>/dev/null || true
    sleep 1
    kill "$spid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$d"
done
