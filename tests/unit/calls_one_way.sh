#!/bin/sh
# calls_one_way.sh LIBDIR - no call circle between the files of the
# scheduler core (libts_sched.a) and of the agent daemon (libts_agent.a)
# (issue 16): nm over each library gives, per object file, the functions
# it defines and those it calls; a file that calls another's function is
# an edge, and tsort finds any loop. Files that were one unit split for
# length and called each other by design would count as one node (UNITS
# below); there are none. Fails naming the files of each loop.
#
# usage: tests/unit/calls_one_way.sh LIBDIR
set -eu
dir=$1
# groups of files that are one unit: "member=unit" (none left: the place
# and broker groups were split into hubs, issue 16)
UNITS=""
bad=0
for name in sched agent; do
    lib="$dir/libts_$name.a"
    [ -f "$lib" ] || { echo "no $lib: is the build there?"; exit 1; }
    edges=$(nm -A "$lib" 2>/dev/null | awk -v units="$UNITS" '
        BEGIN { n = split(units, u, /[ \n]+/)
                for (i = 1; i <= n; i++) { split(u[i], kv, "="); unit[kv[1]] = kv[2] } }
        { split($1, p, ":"); m = p[2]; if (m in unit) m = unit[m] }
        $2 ~ /^[TDBRCV]$/ { def[$3] = m }
        $2 == "U" { use[m, $3] = 1 }
        END { for (k in use) { split(k, q, SUBSEP)
                  if ((q[2] in def) && def[q[2]] != q[1]) e[q[1] " " def[q[2]]] = 1 }
              for (x in e) print x }' | sort -u)
    nedges=$(echo "$edges" | grep -c . || true)
    [ "$nedges" -gt 10 ] || { echo "$lib: only $nedges calls between files: nm failed?"; exit 1; }
    loops=$(echo "$edges" | tsort 2>&1 >/dev/null || true)
    if [ -n "$loops" ]; then
        echo "libts_$name.a: files call each other in a circle:"
        echo "$loops" | sed 's/^tsort: //'
        bad=$((bad + 1))
    else
        echo "libts_$name.a: $nedges calls between files, all one way"
    fi
done
[ "$bad" -eq 0 ]
