#!/bin/sh
# exports_prefixed.sh - every symbol a static library of the build exports
# carries the project's prefix (ts_: ts_sched_*, ts_store_*, ...; STYLE.md),
# so that no library's name clashes with another unit's static of the same
# name. Names the compiler makes (a leading underscore: sanitizers) are not
# the code's. Fails listing each unprefixed symbol and its library.
#
# usage: tests/unit/exports_prefixed.sh LIBDIR
set -eu
dir=$1
n=0
bad=0
for lib in "$dir"/libts_*.a; do
    [ -f "$lib" ] || continue
    n=$((n + 1))
    for s in $(nm -g --defined-only "$lib" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDBRCVW]$/ {print $3}' |
        grep -v '^ts_' | grep -v '^_' | sort -u); do
        echo "$(basename "$lib"): $s has no ts_ prefix"
        bad=$((bad + 1))
    done
done
if [ "$n" -lt 5 ]; then
    echo "only $n libts_*.a found in $dir: is the build there?"
    exit 1
fi
[ "$bad" -eq 0 ] || exit 1
echo "every symbol of $n libraries carries its prefix"
