#!/usr/bin/env bash
# tests/api/lint_test.sh - api/openapi.yaml under third-party linters:
# Redocly CLI (recommended-strict, redocly.yaml and the exceptions listed in
# .redocly.lint-ignore.yaml) and Spectral (spectral:oas, .spectral.yaml,
# failing on warnings). Any problem fails. The tools come from npm, at the
# versions tests/api/package-lock.json pins (scripts/lib/common.sh installs
# them into tests/api/node_modules); they need no network to run.
# Label api.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$here/node_modules/.bin
for t in redocly spectral; do
  [ -x "$bin/$t" ] || { echo "FAIL: $bin/$t missing: run scripts/test -L api (or npm ci in tests/api)" >&2; exit 1; }
done
# no telemetry, no update check: the run is the same offline
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
spec=${1:-$root/api/openapi.yaml}
rc=0
echo "== redocly lint (recommended-strict)"
"$bin/redocly" lint --config "$here/redocly.yaml" "$spec" || rc=1
echo "== spectral lint (spectral:oas)"
"$bin/spectral" lint --ruleset "$here/.spectral.yaml" --fail-severity=warn "$spec" || rc=1
[ $rc -eq 0 ] && echo "ok   api/openapi.yaml lints clean"
exit $rc
