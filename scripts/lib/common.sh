# scripts/lib/common.sh - shared by scripts/test and scripts/demo: install
# the Debian packages Tessera needs (only those missing), configure, build.
# Sourced, not run. Works as root or with sudo.

TS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Debian 12 packages: build tools, libraries, PostgreSQL 15 (server and
# client tools used by the tests), curl for the demo.
TS_PACKAGES=(
  build-essential cmake pkg-config
  libmicrohttpd-dev libjansson-dev libpq-dev libcurl4-openssl-dev libssl-dev libcmocka-dev
  postgresql postgresql-client curl ca-certificates procps
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
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  ts_say "installing ${missing[*]}"
  ts_sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # postgresql's package would start a cluster of its own; we never use it
  ts_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
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
