#!/usr/bin/env bash
# tests/browser/serve_test.sh - the server serves the dashboard: the page at
# /, its files under /ui/ and /ui/vendor/ with the right Content-Type, an
# ETag and Cache-Control, 304 on a matching If-None-Match, no token needed,
# 404 for unknown names and for anything that looks like a path out of
# web/. Needs no browser (label integration).
. "$(dirname "$0")/lib.sh"

fails=0
check() { # DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then
    printf 'ok   %s\n' "$what"
  else
    printf 'FAIL %s\n' "$what"
    fails=$((fails + 1))
  fi
}

# fetch PATH [CURL ARGS...]: headers in $WEB_TMP/h, body in $WEB_TMP/b; status
fetch() {
  local path=$1
  shift
  rm -f "$WEB_TMP/h" "$WEB_TMP/b"
  : >"$WEB_TMP/b"
  curl -sS --path-as-is -D "$WEB_TMP/h" -o "$WEB_TMP/b" -w '%{http_code}' "$@" "$WEB_URL$path"
}
header() { # NAME: the value of a response header of the last fetch
  grep -i "^$1:" "$WEB_TMP/h" | head -n1 | cut -d: -f2- | tr -d '\r' | sed 's/^ *//'
}
is() { [ "$1" = "$2" ] || { printf '  expected "%s", got "%s"\n' "$2" "$1"; return 1; }; }
has() { case $1 in *"$2"*) return 0 ;; esac; printf '  "%s" does not contain "%s"\n' "$1" "$2"; return 1; }

web_start_server --scheduler=false

code=$(fetch /)
check "GET / answers 200 without a token" is "$code" 200
check "GET / is HTML" is "$(header Content-Type)" "text/html; charset=utf-8"
check "GET / is the dashboard's page" grep -q '<script src="ui/app.js" type="module">' "$WEB_TMP/b"
check "GET / has a strong ETag" grep -Eiq '^ETag: "[0-9a-f]{16}"' "$WEB_TMP/h"
check "GET / must be revalidated" is "$(header Cache-Control)" "no-cache"
check "GET / has a content security policy" has "$(header Content-Security-Policy)" "script-src 'self'"
check "GET / is never sniffed" is "$(header X-Content-Type-Options)" nosniff
etag=$(header ETag)

code=$(fetch / -H "If-None-Match: $etag")
check "a matching If-None-Match answers 304" is "$code" 304
check "a 304 has no body" is "$(wc -c <"$WEB_TMP/b" | tr -d ' ')" 0
check "a 304 repeats the ETag" is "$(header ETag)" "$etag"
code=$(fetch / -H "If-None-Match: W/\"0000000000000000\", $etag")
check "an ETag in a list of several answers 304" is "$code" 304
code=$(fetch / -H 'If-None-Match: "0000000000000000"')
check "another ETag answers 200" is "$code" 200

code=$(fetch /ui/app.js)
check "GET /ui/app.js answers 200" is "$code" 200
check "JavaScript is text/javascript" is "$(header Content-Type)" "text/javascript; charset=utf-8"
check "app.js is the file in web/" cmp -s "$WEB_TMP/b" "$TS_SOURCE_DIR/web/app.js"
code=$(fetch /ui/style.css)
check "CSS is text/css" is "$code $(header Content-Type)" "200 text/css; charset=utf-8"
code=$(fetch /ui/favicon.svg)
check "SVG is image/svg+xml" is "$code $(header Content-Type)" "200 image/svg+xml"
code=$(fetch /ui/vendor/uPlot.iife.min.js)
check "vendored uPlot is served" is "$code $(header Content-Type)" "200 text/javascript; charset=utf-8"
check "uPlot is the vendored file" cmp -s "$WEB_TMP/b" "$TS_SOURCE_DIR/web/vendor/uPlot.iife.min.js"
code=$(fetch /ui/vendor/uPlot.LICENSE)
check "uPlot's license is served as text" is "$code $(header Content-Type)" "200 text/plain; charset=utf-8"
check "it is the MIT license" grep -q 'MIT License' "$WEB_TMP/b"

for path in /ui/nope.js /ui/README.md /ui/vendor/app.js /ui/uPlot.iife.min.js /ui/ /ui \
  /ui/../server/server.log /ui/..%2F..%2Fetc%2Fpasswd /ui/%2e%2e/%2e%2e/etc/passwd \
  /ui/vendor/../../../../etc/passwd /ui/index.html/x /index.html; do
  code=$(fetch "$path")
  check "GET $path answers 404" is "$code" 404
  check "GET $path leaks no file" bash -c "! grep -q 'root:' '$WEB_TMP/b'"
done
code=$(fetch /ui/nope.js)
check "a 404 is problem+json" is "$(header Content-Type)" "application/problem+json"
code=$(fetch / -X POST)
check "POST / answers 405" is "$code" 405
code=$(fetch /ui/app.js -X DELETE)
check "DELETE /ui/app.js answers 405" is "$code" 405
code=$(fetch /api/v1/projects)
check "the API still needs a token" is "$code" 401

[ "$fails" -eq 0 ] || web_fail "$fails checks failed"
echo "all checks passed"
