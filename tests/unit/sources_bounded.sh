#!/bin/sh
# sources_bounded.sh SOURCE_DIR - what keeps the production code readable
# (STYLE.md), checked over agent/, api/ and server/:
#   - no .c file over 800 lines;
#   - no function over 100 lines (from its header line to its closing
#     brace; clang-format, which scripts/lint enforces, puts a function's
#     braces alone at the start of their lines, so they are found by line);
#   - every .c and .h file is named in the nearest README.md at or above its
#     folder (as itself, as STEM.[ch], or a header through its STEM.c);
#   - every .c file is named in a CMakeLists.txt of its folder or one above
#     (the source lists are explicit: a file left out would not be built).
# Known exceptions, each with the size it may not grow past, are listed in
# sources_bounded.allow beside this script; the list only shrinks: an
# exception that is gone or smaller than listed is reported, so that its
# line is removed or lowered. Fails naming each finding.
set -u
src=${1:-.}
allow=$(cd "$(dirname "$0")" && pwd)/sources_bounded.allow
cd "$src" || exit 1
files=$(find agent api server -name '*.[ch]' 2>/dev/null | sort)
n=$(echo "$files" | wc -l)
[ "$n" -gt 100 ] || { echo "only $n sources under $src: is it the source folder?"; exit 1; }
bad=0
# allowed KIND KEY: the listed bound, or nothing
allowed() {
    awk -v k="$1" -v key="$2" '$1 == k && $2 == key {print $3}' "$allow"
}
found=$(mktemp)
trap 'rm -f "$found"' EXIT
# one awk over every .c file: its length, and each long function
echo "$files" | grep '\.c$' | xargs awk '
    FNR == 1 { if (prev != "" && plines > 800) print "file " prev " " plines; start = 0 }
    { prev = FILENAME; plines = FNR }
    /^[A-Za-z_]/ && !/;[[:space:]]*$/ { hdr = $0; at = FNR }
    /^\{/ { start = at; name = hdr; sub(/\(.*/, "", name); sub(/.*[ *]/, "", name) }
    /^\}/ && start { n = FNR - start + 1; if (n > 100) print "function " FILENAME ":" name " " n; start = 0 }
    END { if (plines > 800) print "file " prev " " plines }
' >"$found"
while read -r kind key size; do
    limit=$(allowed "$kind" "$key")
    if [ -z "$limit" ]; then
        echo "$kind $key: $size lines (at most $([ "$kind" = file ] && echo 800 || echo 100))"
        bad=$((bad + 1))
    elif [ "$size" -gt "$limit" ]; then
        echo "$kind $key: $size lines, grew past its listed $limit"
        bad=$((bad + 1))
    elif [ "$size" -lt "$limit" ]; then
        echo "$kind $key: $size lines, below its listed $limit: lower the line in $(basename "$allow")"
        bad=$((bad + 1))
    fi
done <"$found"
while read -r kind key limit; do
    case $kind in file | function) ;; *) continue ;; esac
    grep -q "^$kind $key " "$found" ||
        { echo "$kind $key is within bounds now: remove its line from $(basename "$allow")"; bad=$((bad + 1)); }
done <"$allow"
for f in $files; do
    d=${f%/*}
    while [ ! -f "$d/README.md" ] && [ "$d" != "${d%/*}" ]; do d=${d%/*}; done
    b=${f##*/}
    s=${b%.*}
    grep -qF -e "$b" -e "$s.[ch]" "$d/README.md" && continue
    case $b in *.h) grep -qF "$s.c" "$d/README.md" && continue ;; esac
    echo "readme $d/README.md does not name $f"
    bad=$((bad + 1))
done
for f in $(echo "$files" | grep '\.c$'); do
    d=${f%/*}
    b=${f##*/}
    listed=no
    while :; do
        if [ -f "$d/CMakeLists.txt" ] && grep -qE "(^|[ /(])$b([ )]|\$)" "$d/CMakeLists.txt"; then
            listed=yes
            break
        fi
        [ "$d" != "${d%/*}" ] || break
        d=${d%/*}
    done
    if [ "$listed" = no ]; then
        echo "cmake: no CMakeLists.txt at or above ${f%/*} names $b"
        bad=$((bad + 1))
    fi
done
[ "$bad" -eq 0 ] || { echo "$bad findings"; exit 1; }
echo "$n sources: files, functions and READMEs within bounds ($(grep -c '^[fu]' "$allow") listed exceptions)"
