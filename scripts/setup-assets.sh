#!/usr/bin/env bash
# Installs the binaries of bosun's test control plane into a cache directory:
#   etcd (Debian's etcd-server 3.4) and kube-apiserver, kube-controller-manager and
#   client-go's sample-controller (the benchmark peer), built at v1.20.2 from Debian bookworm's
#   `kubernetes` source package with Debian's Go 1.19.
# Idempotent: when every binary is already in the cache it returns at once.
# BOSUN_ASSETS overrides the cache directory (default ~/.cache/bosun/assets/v1.20.2).
set -euo pipefail

K8S_VERSION=v1.20.2
DEB_VERSION='1.20.5+really1.20.2-1.1+deb12u1'
ASSETS=${BOSUN_ASSETS:-$HOME/.cache/bosun/assets/$K8S_VERSION}
BINARIES=(etcd kube-apiserver kube-controller-manager sample-controller)

log() { printf '[setup-assets] %s\n' "$*" >&2; }

all_present() {
  for b in "${BINARIES[@]}"; do [ -x "$ASSETS/$b" ] || return 1; done
  [ -f "$ASSETS/sample-controller-crd.yaml" ]
}

if all_present; then
  log "assets cached in $ASSETS"
  echo "$ASSETS"
  exit 0
fi

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive

# Everything below needs apt-get and Debian's package mirror (etcd, Go 1.19 and the kubernetes
# source package come from there). Check both before writing anything, so that a machine that
# cannot build says so at once instead of failing somewhere in the build.
cannot() {
  local absent=()
  for b in "${BINARIES[@]}"; do [ -x "$ASSETS/$b" ] || absent+=("$b"); done
  [ -f "$ASSETS/sample-controller-crd.yaml" ] || absent+=(sample-controller-crd.yaml)
  log "cannot build the test control plane here: $*"
  log "missing in $ASSETS: ${absent[*]}"
  log "instead, set BOSUN_ASSETS to a directory holding official binaries of these names (v1.20)"
  exit 3
}
command -v apt-get >/dev/null || cannot "no apt-get (it installs etcd and Go 1.19 from Debian packages and fetches Debian's kubernetes source package)"
[ -z "$SUDO" ] || command -v sudo >/dev/null || cannot "not root, and no sudo to run apt-get with"
# Error-Mode=any: by default apt-get update exits 0 when no index could be fetched.
$SUDO apt-get update -qq -o APT::Update::Error-Mode=any -o Acquire::http::Timeout=30 ||
  cannot "apt-get update failed (above): the build needs Debian's package mirror"
apt_updated=1
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ -z "$apt_updated" ]; then $SUDO apt-get update -qq; apt_updated=1; fi
  log "apt-get install ${missing[*]}"
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

mkdir -p "$ASSETS"

# etcd from Debian.
apt_install etcd-server
cp -f "$(command -v etcd || echo /usr/bin/etcd)" "$ASSETS/etcd"

need_build=
for b in kube-apiserver kube-controller-manager sample-controller; do
  [ -x "$ASSETS/$b" ] || need_build=1
done
[ -f "$ASSETS/sample-controller-crd.yaml" ] || need_build=1

if [ -n "$need_build" ]; then
  apt_install golang-1.19-go rsync golang-github-modern-go-reflect2-dev dpkg-dev make
  src_list=/etc/apt/sources.list.d/bosun-bookworm-src.sources
  if ! apt-cache showsrc kubernetes 2>/dev/null | grep -q "^Version: $DEB_VERSION"; then
    log "adding a deb-src entry for bookworm ($src_list)"
    $SUDO tee "$src_list" >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    $SUDO apt-get update -qq
  fi

  work=${BOSUN_BUILD_DIR:-$HOME/.cache/bosun/build}
  rm -rf "$work"; mkdir -p "$work"
  cd "$work"
  log "downloading Debian source package kubernetes $DEB_VERSION"
  apt-get source --download-only "kubernetes=$DEB_VERSION" >/dev/null
  orig=$(ls kubernetes_*.orig.tar.* | head -n1)
  mkdir src
  tar -xf "$orig" -C src --strip-components=1
  cd src

  # reflect2 1.0.1 (vendored) crashes under Go >= 1.18; Debian ships 1.0.2.
  r2=/usr/share/gocode/src/github.com/modern-go/reflect2
  rm -rf vendor/github.com/modern-go/reflect2
  mkdir -p vendor/github.com/modern-go/reflect2
  cp -r "$r2"/. vendor/github.com/modern-go/reflect2/
  rm -f vendor/github.com/modern-go/reflect2/go.mod vendor/github.com/modern-go/reflect2/*_test.go

  mkdir -p .go/src/k8s.io
  ln -sfn ../../.. .go/src/k8s.io/kubernetes
  log "building kube-apiserver, kube-controller-manager, sample-controller (several minutes on 2 cores)"
  export PATH=/usr/lib/go-1.19/bin:$PATH
  export GOPATH=$PWD/.go CGO_ENABLED=0 GOCACHE=$work/gocache GOFLAGS=-mod=vendor
  export KUBE_GIT_VERSION=$K8S_VERSION KUBE_GIT_TREE_STATE=clean
  make WHAT="cmd/kube-apiserver cmd/kube-controller-manager vendor/k8s.io/sample-controller" >"$work/build.log" 2>&1 || {
    tail -n 40 "$work/build.log" >&2; exit 1; }
  out=_output/local/bin/linux/amd64
  [ -d "$out" ] || out=$(dirname "$(find _output -type f -name kube-apiserver | head -n1)")
  for b in kube-apiserver kube-controller-manager sample-controller; do
    install -m 0755 "$out/$b" "$ASSETS/$b"
  done
  cp vendor/k8s.io/sample-controller/artifacts/examples/crd-status-subresource.yaml "$ASSETS/sample-controller-crd.yaml"
  cd /
  rm -rf "$work"
fi

all_present || { log "assets incomplete in $ASSETS"; exit 1; }
log "assets ready in $ASSETS"
echo "$ASSETS"
