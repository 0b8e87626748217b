#!/usr/bin/env bash
# Installs vcsim, govmomi's vSphere API simulator (a real vim25 SOAP server), into a cache
# directory: built at 0.24.2 from Debian bookworm's `golang-github-vmware-govmomi` source
# package with Debian's Go 1.19, its one outside import (google/uuid) taken from Debian's
# packages through GOPATH, with no module download (GOPROXY=off). About 30 s on 2 cores.
# Idempotent: when the binary is already in the cache it returns at once.
# Prints the binary's path. BOSUN_VCSIM overrides it (a vcsim built elsewhere).
set -euo pipefail

GOVMOMI_VERSION=0.24.2
DEB_VERSION='0.24.2-3'
CACHE=$HOME/.cache/bosun/vcsim/$GOVMOMI_VERSION
BIN=${BOSUN_VCSIM:-$CACHE/vcsim}

log() { printf '[setup-vcsim] %s\n' "$*" >&2; }

if [ -x "$BIN" ]; then
  log "vcsim cached at $BIN"
  echo "$BIN"
  exit 0
fi

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive

# Go 1.19, google/uuid and the govmomi source package all come from Debian: check that apt
# can reach them before writing anything.
cannot() {
  log "cannot build vcsim here: $*"
  log "instead, set BOSUN_VCSIM to a vcsim binary (govmomi $GOVMOMI_VERSION or later)"
  exit 3
}
command -v apt-get >/dev/null || cannot "no apt-get (it installs Go 1.19 and fetches Debian's govmomi source package)"
[ -z "$SUDO" ] || command -v sudo >/dev/null || cannot "not root, and no sudo to run apt-get with"
apt_updated=
apt_update() {
  # Error-Mode=any: by default apt-get update exits 0 when no index could be fetched.
  $SUDO apt-get update -qq -o APT::Update::Error-Mode=any -o Acquire::http::Timeout=30 ||
    cannot "apt-get update failed (above): the build needs Debian's package mirror"
  apt_updated=1
}
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ -n "$apt_updated" ] || apt_update
  log "apt-get install ${missing[*]}"
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

apt_install golang-1.19-go golang-github-google-uuid-dev dpkg-dev

src_list=/etc/apt/sources.list.d/bosun-bookworm-src.sources
if ! apt-cache showsrc golang-github-vmware-govmomi 2>/dev/null | grep -q "^Version: $DEB_VERSION"; then
  if [ ! -f "$src_list" ]; then
    log "adding a deb-src entry for bookworm ($src_list)"
    $SUDO tee "$src_list" >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  fi
  apt_update
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bosun-vcsim.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
log "downloading Debian source package golang-github-vmware-govmomi $DEB_VERSION"
apt-get source --download-only "golang-github-vmware-govmomi=$DEB_VERSION" >/dev/null 2>&1 ||
  cannot "apt-get source golang-github-vmware-govmomi=$DEB_VERSION failed"
mkdir src
tar -xf golang-github-vmware-govmomi_"$GOVMOMI_VERSION".orig.tar.* -C src --strip-components=1

# A GOPATH build: govmomi from the source tree, google/uuid from Debian's gocode tree.
mkdir -p gopath/src/github.com/vmware
ln -s "$work/src" gopath/src/github.com/vmware/govmomi
export PATH=/usr/lib/go-1.19/bin:$PATH
export GOPATH=$work/gopath:/usr/share/gocode GO111MODULE=off GOPROXY=off GOFLAGS= CGO_ENABLED=0
export GOCACHE=$work/gocache
log "building vcsim"
(cd gopath/src/github.com/vmware/govmomi && go build -o "$work/vcsim" ./vcsim) >"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log" >&2; exit 1; }
mkdir -p "$(dirname "$BIN")"
install -m 0755 "$work/vcsim" "$BIN"
log "vcsim ready at $BIN"
echo "$BIN"
