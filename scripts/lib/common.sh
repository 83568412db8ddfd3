# scripts/lib/common.sh - shared by scripts/test and scripts/demo: install
# the Debian packages Tessera needs (only those missing), configure, build.
# Sourced, not run. Works as root or with sudo.

TS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Debian 12 packages: build tools, libraries (GnuTLS: libmicrohttpd's TLS,
# for the server's HTTPS checks), PostgreSQL 15 (server and client tools used
# by the tests), curl for the demo, openssl for the tests' certificates,
# Chromium and Node.js for the dashboard's browser tests (npm too, unless node
# came with one) and the API checks, Prometheus for promtool and a real
# scrape (label api; on a machine with systemd the package also starts its
# own service on :9090, which the tests never use), dpkg-dev and systemd for
# the packaging test (dpkg-shlibdeps, systemd-analyze verify; nothing started),
# iproute2 for install/guide (`ip link set lo up` in its network namespace),
# clang-format and cppcheck for scripts/lint.
TS_PACKAGES=(
  build-essential cmake pkg-config
  libmicrohttpd-dev libjansson-dev libpq-dev libcurl4-openssl-dev libssl-dev libcmocka-dev libgnutls28-dev
  postgresql postgresql-client curl ca-certificates procps openssl
  chromium nodejs prometheus
  dpkg-dev systemd iproute2
  clang-format cppcheck
)

ts_say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

ts_sudo() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

ts_install_deps() {
  local missing=() p
  for p in "${TS_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  # Debian's nodejs comes without npm; other builds of node bring their own
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if [ ${#missing[@]} -gt 0 ]; then
    ts_say "installing ${missing[*]}"
    ts_sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # postgresql's package would start a cluster of its own; we never use it
    ts_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
  ts_install_playwright
  ts_install_api_tools
}

# playwright-core, at the version tests/browser/package.json names, into
# tests/browser/node_modules (git-ignored). It drives Debian's Chromium: no
# browser is downloaded. Nothing happens when that version is there.
ts_install_playwright() {
  local dir=$TS_ROOT/tests/browser want have
  [ -f "$dir/package.json" ] || return 0
  want=$(sed -n 's/.*"playwright-core": *"\([^"]*\)".*/\1/p' "$dir/package.json")
  have=
  if [ -f "$dir/node_modules/playwright-core/package.json" ]; then
    have=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' \
      "$dir/node_modules/playwright-core/package.json" | head -n1)
  fi
  if [ -n "$want" ] && [ "$want" = "$have" ]; then
    return 0
  fi
  ts_say "installing playwright-core $want into tests/browser/node_modules"
  (cd "$dir" && npm install --no-audit --no-fund --no-package-lock --loglevel=error >/dev/null)
}

# Redocly CLI, Spectral and Prism, exactly as tests/api/package-lock.json
# pins them, into tests/api/node_modules (git-ignored; about 340 MB, two
# minutes from npm). Kept between runs and build folders: nothing happens
# when the lock file is the one installed.
ts_install_api_tools() {
  local dir=$TS_ROOT/tests/api
  [ -f "$dir/package-lock.json" ] || return 0
  if cmp -s "$dir/package-lock.json" "$dir/node_modules/.tessera-installed-lock"; then
    return 0
  fi
  ts_say "installing the API checks' npm tools into tests/api/node_modules"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) &&
    cp "$dir/package-lock.json" "$dir/node_modules/.tessera-installed-lock"
}

# ts_build BUILD_DIR [cmake args...]
ts_build() {
  local dir=$1
  shift
  ts_say "configuring $dir"
  cmake -S "$TS_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  ts_say "building $dir"
  cmake --build "$dir" -j"$(nproc)"
}
