#!/usr/bin/env bash
# tests/api/grafana_test.sh - docs/grafana/tessera.json against Grafana's
# own dashboard schema: @grafana/schema (Grafana Labs' package, generated
# from the CUE schema Grafana validates dashboards with) publishes it as
# TypeScript types, so the dashboard is written out as an object literal of
# type Dashboard and the TypeScript compiler checks it (missing required
# members, wrong types, members the schema does not know). A dashboard with
# one member misspelled must be refused too, so a checker that accepts
# anything fails the test. Versions pinned by tests/api/package-lock.json;
# no network. Label api.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tsc=$here/node_modules/.bin/tsc
[ -x "$tsc" ] && [ -d "$here/node_modules/@grafana/schema" ] ||
  { echo "FAIL: typescript or @grafana/schema missing in $here/node_modules: run scripts/test -L api (or npm ci in tests/api)" >&2; exit 1; }
dashboard=${1:-$root/docs/grafana/tessera.json}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the package is resolved from tests/api/node_modules
ln -s "$here/node_modules" "$tmp/node_modules"

# check FILE.ts DASHBOARD.json: the dashboard as a typed literal
check() {
  { echo "import type { Dashboard } from '@grafana/schema';"
    printf 'export const dashboard: Dashboard = '
    cat "$2"
    echo ';'; } >"$1"
  "$tsc" --noEmit --strict --moduleResolution bundler --module esnext \
    --target es2020 --skipLibCheck false "$1"
}

schema=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$here/node_modules/@grafana/schema/package.json" | head -n1)
echo "== $dashboard against @grafana/schema $schema (Dashboard)"
check "$tmp/dashboard.ts" "$dashboard"
echo "ok   $(basename "$dashboard") is a Dashboard as Grafana's schema defines it"

# the checker refuses what Grafana's schema refuses: a panel member misspelt
sed '0,/"gridPos"/s//"gridPosition"/' "$dashboard" >"$tmp/bad.json"
cmp -s "$dashboard" "$tmp/bad.json" && { echo "FAIL: no gridPos to misspell in $dashboard" >&2; exit 1; }
if check "$tmp/bad.ts" "$tmp/bad.json" >"$tmp/bad.out" 2>&1; then
  echo "FAIL: a dashboard with gridPos misspelt passed the check" >&2
  exit 1
fi
grep -q "gridPosition" "$tmp/bad.out" ||
  { echo "FAIL: the misspelt dashboard failed for another reason:" >&2; cat "$tmp/bad.out" >&2; exit 1; }
echo "ok   a misspelt panel member is refused: $(grep -c 'gridPosition' "$tmp/bad.out") error(s) name it"
