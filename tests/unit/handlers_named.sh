#!/bin/sh
# handlers_named.sh SOURCE_DIR - every handler the route table names
# (server/routes.c) is defined in server/handlers/ as an ordinary function,
# its name at the start of a line after its return type, where ctags, cscope
# and grep find it; no macro writes a handler's signature.
set -u
src=${1:-.}
status=0
names=$(grep -o 'ts_h_[a-z0-9_]*' "$src/server/routes.c" | sort -u)
[ -n "$names" ] || { echo "no handler in $src/server/routes.c"; exit 1; }
for n in $names; do
    if ! grep -q "^enum ts_err $n(void \*ctx, struct ts_request \*r, struct ts_error \*err)$" \
        "$src"/server/handlers/*.c; then
        echo "handler $n is not written out as a function in server/handlers/"
        status=1
    fi
done
if grep -n 'define[[:space:]]*TS_HANDLER' "$src"/server/handlers/*.h; then
    echo "a macro still writes the handlers' signature"
    status=1
fi
[ $status -eq 0 ] && echo "$(echo "$names" | wc -l) handlers, each written out"
exit $status
